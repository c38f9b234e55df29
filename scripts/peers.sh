#!/usr/bin/env bash
# Builds Kiln and runs the seed workloads side by side with NumPy, NumExpr, Dask, JAX and Numba,
# printing a markdown table of medians and Kiln's speed-ups (bench/README.md, "Peers").
#
# The peers run in a virtual environment, bench/peers/.venv, holding the pinned
# bench/peers/requirements.txt from PyPI: created on first use, `pip install -r` again only when
# the requirements (or the Python minor version) change, which a stamp file in the venv records.
# PEERS_PYTHON=/usr/bin/python3 skips the venv and uses Debian's python3-numpy/-numexpr/-dask
# (JAX is then reported as skipped, and Numba too unless python3-numba is installed).
# PEERS_BASE_PYTHON (default python3) is the interpreter the venv is made from. Extra arguments
# go to bench/peers/seeds_peers.py (--help); without --jsonl FILE the JSON lines are also
# written to build/peers/peers-DATE-TIME.jsonl (peers-resident-DATE-TIME.jsonl with --resident:
# the resident variant, x made before the timed region, its own table). `peers.sh
# --overhead-table [options]` runs bench/peers/overhead_table.py (the scheduling-overhead study)
# instead, `peers.sh --glm [options]` bench/peers/glm_peers.py (kiln::glm's solvers against
# dask-glm and scikit-learn), `peers.sh --reduce [options]` bench/peers/reduce_peers.py (the
# whole-array reductions beside NumPy's, per core).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh peers

venv=bench/peers/.venv
req=bench/peers/requirements.txt
stamp=$venv/.requirements-stamp
python=${PEERS_PYTHON:-}
if [ -z "$python" ]; then
  base=${PEERS_BASE_PYTHON:-python3}
  want="$(sha256sum "$req" | cut -d' ' -f1) python$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "peers: creating $venv with $("$base" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    "$base" -m venv --clear "$venv"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "peers: installing $req into $venv (pinned; a few hundred MB the first time)"
    "$base" -m venv "$venv"  # idempotent: refreshes the interpreter links and pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$req"
    echo "$want" >"$stamp"
  fi
  python=$venv/bin/python
fi

cmake --preset release >/dev/null
if [ "${1:-}" = "--overhead-table" ]; then  # the scheduling-overhead study instead
  shift
  cmake --build --preset release --target kiln_cli kiln_bench
  exec "$python" bench/peers/overhead_table.py build/release/kiln "$@"
fi
if [ "${1:-}" = "--reduce" ]; then  # the reductions beside NumPy's instead
  shift
  cmake --build --preset release --target kiln_bench
  exec "$python" bench/peers/reduce_peers.py build/release/kiln_bench "$@"
fi
cmake --build --preset release --target kiln_cli
if [ "${1:-}" = "--glm" ]; then  # the GLM solvers against dask-glm and scikit-learn instead
  shift
  exec "$python" bench/peers/glm_peers.py build/release/kiln "$@"
fi
# The JSON lines also go to a file under build/peers/ unless --jsonl is given.
jsonl=()
case " $* " in
  *" --jsonl "* | *" --jsonl="*) ;;
  *) mkdir -p build/peers
     variant=""
     case " $* " in *" --resident "*) variant=resident- ;; esac
     jsonl=(--jsonl "build/peers/peers-$variant$(date +%Y%m%d-%H%M%S).jsonl")
     echo "peers: JSON lines in ${jsonl[1]}" >&2 ;;
esac
"$python" bench/peers/seeds_peers.py build/release/kiln "$@" "${jsonl[@]}"
