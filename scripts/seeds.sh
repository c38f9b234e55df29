#!/usr/bin/env bash
# Builds Kiln and runs the seed workloads: a short table (fused and unfused) and the
# fused-graph summary of each workload.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target kiln_cli
./build/release/kiln seeds "$@"
