#!/usr/bin/env bash
# The installed package, as another project sees it (issue 32): installs the release build into a
# temporary prefix, then against that prefix alone
#  - compiles each installed header on its own (-Wall -Wextra -Werror -pedantic, only the prefix
#    on the include path: an installed header that includes an internal one fails here),
#  - keeps internal namespaces out of libkiln.so's exported symbols and prints their count,
#  - checks that libkiln.so and kiln load the BLAS installed beside them,
#  - configures, builds and runs examples/ (find_package(Kiln)) and one program through
#    pkg-config, and checks each example's result against the installed `kiln run`'s;
#  - `pip install .` into a fresh venv (the Python package, docs/PYTHON.md; build/wheel, ccache
#    shared with the release build), then imports it outside the source tree and checks a
#    compute against `kiln run`'s and the package's seed examples.
# Usage: scripts/test-install.sh [build dir, default build/release] (built first by test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "test-install: installed into a temporary prefix:"
(cd "$prefix" && find . -type f | sort | sed 's/^/  /')

# Each public header alone.
for h in $(cd "$prefix/include" && find kiln -name '*.hpp' | sort); do
  echo "#include \"$h\"" >"$work/one.cpp"
  c++ -std=c++17 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -fsyntax-only "$work/one.cpp" ||
    { echo "test-install: $h does not compile on its own against the prefix" >&2; exit 1; }
done
echo "test-install: every installed header compiles on its own"

# The exported symbols: the public API only.
lib="$(readlink -f "$prefix/lib/libkiln.so")"
nm -D --defined-only --demangle "$lib" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' \
  >"$work/symbols.txt"
count="$(wc -l <"$work/symbols.txt")"
internal='kiln::(backend|cuda|cpu|interp|kir|vm|kmath|cache|files|process|checked|workloads|detail|dist)::|kiln::(Node|Graph|FusedGraph|Plan|Context|Executor)\b|llvm::|tbb::|XXH'
if grep -E "$internal" "$work/symbols.txt" | head -20 | grep . ; then
  echo "test-install: libkiln.so exports internal symbols (above)" >&2
  exit 1
fi
echo "test-install: $(basename "$lib") ($(du -h "$lib" | cut -f1)) exports $count symbols, none internal"

# The BLAS the installed library and command load: the copy in the prefix (their RUNPATH), not the
# build's .venv/openblas.
for f in "$lib" "$prefix/bin/kiln"; do
  blas="$(ldd "$f" | awk '/libscipy_openblas/ { print $3 }')"
  [ "$(readlink -f "$blas")" = "$(readlink -f "$prefix/lib/libscipy_openblas.so")" ] ||
    { echo "test-install: $f loads its BLAS from '$blas', not from the prefix" >&2; exit 1; }
done
echo "test-install: libkiln.so and kiln load the BLAS installed beside them"

# The MPI plugin beside libkiln.so: the installed kiln under mpirun loads it from the prefix.
if [ -f "$prefix/lib/libkiln_mpi.so" ] && command -v mpirun >/dev/null; then
  mpi="$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --oversubscribe -np 2 "$prefix/bin/kiln" doctor 2>&1 | grep '^mpi ' || true)"
  case "$mpi" in
    *"$prefix/"*"libkiln_mpi.so"*"2 ranks"*) ;;
    *) echo "test-install: kiln doctor under mpirun -np 2 says: '$mpi'" >&2; exit 1 ;;
  esac
  echo "test-install: the installed kiln under mpirun -np 2 loads the prefix's libkiln_mpi.so"
fi

# The examples, built against the prefix alone.
cmake -S examples -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/examples" >/dev/null
kiln="$prefix/bin/kiln"
check() {  # check NAME EXAMPLE_ARGS -- KILN_RUN_ARGS: the example's numbers = kiln run's
  local name="$1" ex_args="$2" run_args="$3" fields="$4"
  got="$("$work/examples/$name" $ex_args)"
  want="$("$kiln" run $run_args --json --quiet)"
  python3 - "$got" "$want" "$fields" <<'EOS'
import json, math, sys
got, want, fields = sys.argv[1].split(), json.loads(sys.argv[2]), sys.argv[3].split()
for value, field in zip(got[1:], fields):
    w = want[field]
    g = {"true": 1.0, "false": 0.0}.get(value, None)
    g = float(value) if g is None else g
    if not math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12):
        sys.exit("test-install: %s: %s = %r, kiln run says %r" % (got[0], field, g, w))
print("  %-40s = kiln run's %s" % (" ".join(got), ", ".join(fields)))
EOS
}
echo "test-install: the examples against the installed kiln run:"
check random_sum "400 100" "random-sum --size 400 --chunk 100" "result"
check diamond "500 100" "diamond --size 500 --chunk 100" "result"
check trig_identity "300 100" "trig-identity --size 300 --chunk 100" "result count"
check svd "2000 500 40" "svd --rows 2000 --cols 40 --chunk 500" "result s1"
check logistic_gd "20000 5000 10" "logistic-gd --size 20000 --chunk 5000 --cols 10" "result iterations"

# pkg-config: one program built with kiln.pc's flags alone.
cp examples/diamond.cpp examples/common.hpp "$work/"
# shellcheck disable=SC2046
c++ -O1 "$work/diamond.cpp" -o "$work/diamond-pc" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kiln)
"$work/diamond-pc" 200 100 | grep -q '^diamond ' || { echo "test-install: pkg-config build failed" >&2; exit 1; }
echo "test-install: a program built with pkg-config's flags (kiln.pc) runs"

# The Python package: pip install . (pyproject.toml) into a fresh venv, with the pins of
# tests/requirements.txt for NumPy and the build backend (no build isolation: nothing unpinned).
pin() { grep -m1 "^$1==" tests/requirements.txt; }
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$(pin numpy)" \
  "$(pin scikit-build-core)" "$(pin nanobind)" "$(pin packaging)" "$(pin pathspec)"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation . ||
  { echo "test-install: pip install . failed" >&2; exit 1; }
want="$("$kiln" run diamond --size 600 --chunk 200 --json --quiet)"
(cd "$work" && "$work/venv/bin/python" - "$want" <<'EOS'
import json, math, os, sys
import numpy as np
import kiln
assert "site-packages" in kiln.__file__, kiln.__file__
x = kiln.random.default_rng(0).uniform(1, 2, size=(600, 600), chunks=(200, 200))
got, want = float((np.exp(x) - 1 / x).sum()), json.loads(sys.argv[1])["result"]
if not math.isclose(got, want, rel_tol=1e-12):
    sys.exit("test-install: the installed package's diamond is %r, kiln run's %r" % (got, want))
print("test-install: pip install . -> %s: diamond %r = kiln run's" % (os.path.dirname(kiln.__file__), got))
EOS
)
seeds="$PWD/examples/python/seeds.py"
(cd "$work" && "$work/venv/bin/python" "$seeds" --small | sed "s/^/  /")
