#!/usr/bin/env bash
# Builds Kiln and runs the test suite (ctest). Usage: scripts/test.sh [preset]
# Presets: release (default), asan (AddressSanitizer + UBSan), tsan (ThreadSanitizer; the executor
# runs on std::threads there, as libtbb is not instrumented). Every preset runs every test.
# The release preset then runs the suite again with kernels compiled for the next narrower CPU
# (KILN_TARGET_CPU: x86-64-v3, AVX2, on AVX-512 hosts; x86-64-v2, SSE4, on AVX2 hosts) and
# glibc's libmvec instead of Kiln's own vector math functions (KILN_MATH=libmvec), so both code
# paths and both math libraries are tested on one host; and once more on the reference
# interpreter (KILN_DEVICE=interp: every compute() of the suite evaluated without the JIT, against
# the same NumPy expectations); and once more on cuda-emu (the CUDA printer's kernels compiled as
# host C++, and by NVRTC for sm_80 and sm_90 where the CUDA toolkit is installed), on one emulated
# device and then on three (KILN_DEVICES=3: blocks spread over devices, copies between them; the
# kernels are those of the run before, loaded from the disk cache); then installs the build into a
# temporary prefix and builds and checks examples/ against it (scripts/test-install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as it ends ("test.sh: ... took N s").
timed() {
  local start=$SECONDS what="$1"
  shift
  "$@"
  echo "test.sh: $what took $((SECONDS - start)) s"
}
bash scripts/install-deps.sh
preset="${1:-release}"
cmake --preset "$preset" >/dev/null
timed "the $preset build" cmake --build --preset "$preset"
timed "the $preset suite" ctest --preset "$preset"
if [ "$preset" = release ]; then
  host="$(build/release/kiln run diamond --size 100 --chunk 50 --json)"
  case "$host" in
    *AVX-512*) narrower=x86-64-v3 ;;
    *AVX2*) narrower=x86-64-v2 ;;
    *) narrower="" ;;
  esac
  if [ -n "$narrower" ]; then
    echo "test.sh: the suite again with KILN_TARGET_CPU=$narrower KILN_MATH=libmvec (host: $(echo "$host" | grep -o "\"compile_target\":\"[^\"]*\""))"
    KILN_TARGET_CPU="$narrower" KILN_MATH=libmvec timed "the $narrower suite" ctest --preset release
  fi
  echo "test.sh: the suite again on the interpreter (KILN_DEVICE=interp)"
  KILN_DEVICE=interp timed "the interpreter suite" ctest --preset release
  # The CUDA printer's kernels as host C++; where the CUDA toolkit is installed, each kernel's
  # GPU build is also compiled by NVRTC for sm_80 and sm_90.
  check=""
  if compgen -G "/usr/local/cuda/lib64/libnvrtc.so*" >/dev/null || ldconfig -p | grep -q libnvrtc; then
    check="80,90"
  fi
  # Fuzz.NumPyDifferential runs its first 120 programs there, not 300 (FuzzMatmul keeps its 120):
  # each kernel is compiled by the host compiler and by NVRTC twice, and on a 2-core Zen 3 the 300
  # took 591-605 s, at ctest's 600 s limit. The CPU and interpreter runs above keep all 300.
  echo "test.sh: the suite again on cuda-emu (KILN_DEVICE=cuda-emu, KILN_CUDA_CHECK=${check:-none: no NVRTC}, KILN_FUZZ_COUNT=120)"
  KILN_DEVICE=cuda-emu KILN_CUDA_CHECK="$check" KILN_FUZZ_COUNT=120 timed "the cuda-emu suite" \
    ctest --preset release
  echo "test.sh: the suite again on three emulated devices (KILN_DEVICE=cuda-emu KILN_DEVICES=3, KILN_FUZZ_COUNT=120)"
  KILN_DEVICE=cuda-emu KILN_DEVICES=3 KILN_FUZZ_COUNT=120 timed "the three-device suite" \
    ctest --preset release
  # The installed package as another project uses it: headers alone, exported symbols, examples/.
  echo "test.sh: cmake --install into a temporary prefix, then examples/ against it (scripts/test-install.sh)"
  timed "test-install.sh" bash scripts/test-install.sh build/release
fi
