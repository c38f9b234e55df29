#!/usr/bin/env bash
# Builds Kiln and runs the seed workloads: a short table (fused and unfused) and the
# fused-graph summary of each workload; then the same workloads from Python, written with plain
# NumPy calls on kiln arrays (examples/python/seeds.py, docs/PYTHON.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target kiln_cli _kiln
./build/release/kiln seeds "$@"
echo
echo "The seeds from Python (import kiln; NumPy's functions on kiln arrays; second compute of each):"
PYTHONPATH=build/release/python .venv/oracle/bin/python examples/python/seeds.py
