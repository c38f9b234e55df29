#!/usr/bin/env bash
# Builds Kiln and runs the seed workloads side by side with NumPy, NumExpr and Dask (Debian's
# python3 packages), printing a markdown table of medians and Kiln's speed-ups.
# Extra arguments go to bench/peers/seeds_peers.py (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh peers
cmake --preset release >/dev/null
cmake --build --preset release --target kiln_cli
/usr/bin/python3 bench/peers/seeds_peers.py build/release/kiln "$@"
