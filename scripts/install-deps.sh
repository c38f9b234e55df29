#!/usr/bin/env bash
# The one list of Debian packages Kiln needs to build, test and benchmark. Idempotent: installs only
# what is missing. Used by both README commands and by .ci/run; `install-deps.sh peers` adds the
# Python peers the benchmark comparison runs (bench/peers).
set -euo pipefail
pkgs=(
  cmake ninja-build ccache g++ clang-format
  llvm-19-dev clang-19
  libopenblas-dev liblapacke-dev libboost-graph-dev libtbb-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy
)
if [ "${1:-}" = peers ]; then
  pkgs+=(python3-dask python3-numexpr python3-venv)
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
