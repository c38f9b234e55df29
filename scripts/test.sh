#!/usr/bin/env bash
# Builds Kiln and runs the test suite (ctest). Usage: scripts/test.sh [preset]
# Presets: release (default), asan (AddressSanitizer + UBSan, every test), tsan (ThreadSanitizer:
# the runtime's tests - executor, caches, fusion, random, reductions, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
preset="${1:-release}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
if [ "$preset" = tsan ]; then
  ctest --preset tsan -R '^(Execute|Cache|Fusion|Random|Reduce|Cli)\.'
else
  ctest --preset "$preset"
fi
