#!/usr/bin/env bash
# Builds Kiln and runs the test suite (ctest). Usage: scripts/test.sh [preset]
# Presets: release (default), asan (AddressSanitizer + UBSan), tsan (ThreadSanitizer; the executor
# runs on std::threads there, as libtbb is not instrumented). Every preset runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
preset="${1:-release}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset"
