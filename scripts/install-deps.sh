#!/usr/bin/env bash
# The one list of Debian packages Kiln needs to build, test and benchmark; the test oracle: the
# NumPy pinned in tests/requirements.txt, in a venv at .venv/oracle (the tests' default
# interpreter; KILN_PYTHON overrides it); and Kiln's BLAS/LAPACK, the OpenBLAS wheel pinned in
# cmake/blas-requirements.txt, unpacked into .venv/openblas. Idempotent: installs only what is missing. Used by both
# README commands and by .ci/run; `install-deps.sh peers` adds the Python peers the benchmark
# comparison runs (bench/peers).
set -euo pipefail
pkgs=(
  cmake ninja-build ccache g++ clang-format
  llvm-19-dev clang-19 libclang-rt-19-dev
  libboost-graph-dev libtbb-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libdlpack-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-venv pkg-config
  openmpi-bin libopenmpi-dev
)
if [ "${1:-}" = peers ]; then
  pkgs+=(python3-dask python3-numexpr)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The oracle venv: rebuilt only when the pinned requirements differ from what it holds.
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv/oracle"
req="$root/tests/requirements.txt"
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  echo "install-deps: making the test oracle venv $venv ($(grep -v '^#' "$req" | tr '\n' ' '))"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi

# Kiln's BLAS: the wheel's files (a shared library, headers, a CMake config) under
# .venv/openblas/scipy_openblas32, replaced only when the pin changes.
blas="$root/.venv/openblas"
blas_req="$root/cmake/blas-requirements.txt"
if ! cmp -s "$blas_req" "$blas/requirements.txt" 2>/dev/null; then
  echo "install-deps: installing Kiln's BLAS into $blas ($(grep -v '^#' "$blas_req" | tr '\n' ' '))"
  rm -rf "$blas"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --target "$blas" \
    -r "$blas_req"
  cp "$blas_req" "$blas/requirements.txt"
fi
