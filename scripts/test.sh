#!/usr/bin/env bash
# Builds Kiln and runs the test suite (ctest). Usage: scripts/test.sh [preset]
# Presets: release (default), asan (AddressSanitizer + UBSan), tsan (ThreadSanitizer; the executor
# runs on std::threads there, as libtbb is not instrumented). release and asan run every test,
# tsan those that can run Kiln's executor on several threads ($host_only below).
# The release preset then runs the suite again with kernels compiled for the next narrower CPU
# (KILN_TARGET_CPU: x86-64-v3, AVX2, on AVX-512 hosts; x86-64-v2, SSE4, on AVX2 hosts) and glibc's
# libmvec instead of Kiln's own vector math functions (KILN_MATH=libmvec), so both code paths and
# both math libraries are tested on one host; on AVX-512 hosts, the suites that compile kernels also
# for x86-64-v4 and x86-64-v2 (every x86-64 level the host runs); and once more on the reference
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
# Suites whose work does not depend on KILN_DEVICE: they choose their devices themselves (OpsTable
# compares every backend, Cuda, CacheFaults, Doctor, Blas, CudaLibraries) or compute nothing on one
# (the .npy and trace readers, the command line's parsing, the JIT's target, Kiln's math functions
# and the Gram kernel called directly, the generator's tables, the include layering, checked
# arithmetic, graph interning, the benchmark binary's smoke run; the Python package's pytest suite,
# whose own code is the binding: the backends under it are the other suites' subject). The device reruns below leave
# them out, as does ThreadSanitizer except for Cuda (cuda-emu compiles for two GPU targets on two
# threads): what the others test is not concurrent (their few computes are small, on the paths
# that the other suites run threaded).
single='OpsTable|CacheFaults|Doctor|Blas|CudaLibraries|NpyHostile|HostileCli|SizesCli|Report|Target'
single+='|Layering|Interning|Checked|Philox4x32_10|PhiloxMapping|KilnMath|Gram|Bench|Python'
# Distributed: mpirun's ranks, once (their own test puts them on cuda-emu, one device per rank).
single+='|Distributed'
# The GLM convergence sweep (every solver on two datasets, until each one's stopping rule holds)
# tests the solvers' logic: it runs on the JIT (release, and the narrower target below), not under
# ThreadSanitizer (161 of its 990 test-seconds), whose parallel paths the other GlmEstimators tests
# run, nor in the device reruns (interpreter 19 s, cuda-emu 49 s, three devices 35 s on a 2-core
# Xeon), where the other GlmEstimators and Glm tests run each solver's kernels.
sweep='^GlmEstimators\.ConvergedMeansTheGradientRuleHolds$'
host_only="^(Cuda|$single)\\.|$sweep"
suite=()
[ "$preset" = tsan ] && suite=(-E "^($single)\\.|$sweep")
# cuda-emu's host compiler runs under ccache (KILN_EMU_CXX="ccache c++", unless KILN_EMU_CXX is
# set) in every run but the release suite's, which keeps the default (c++, one run per kernel): a
# kernel that an earlier run on this machine compiled (another checkout, CI before) is a ccache
# hit. The compiler took 0.13 s per kernel, about 90% of the cuda-emu rerun's host compiling
# (1300 kernels) and most of OpsTable's 133 s under AddressSanitizer.
emu=()
if [ -z "${KILN_EMU_CXX:-}" ] && command -v ccache >/dev/null; then
  emu=(KILN_EMU_CXX="ccache c++")
fi
emu_says="${emu[*]:-KILN_EMU_CXX=${KILN_EMU_CXX:-c++}}"
if [ "$preset" = release ]; then
  timed "the $preset suite" ctest --preset "$preset"
else
  timed "the $preset suite ($emu_says)" env "${emu[@]}" ctest --preset "$preset" "${suite[@]}"
fi
if [ "$preset" = release ]; then
  # The differential fuzzer's NumPy text run on kiln arrays through the Python package (NEP 13/18),
  # compared with the C++ API's results: a slice of 150 cases of another seed than the suite's.
  echo "test.sh: the fuzzer through the Python layer (KILN_FUZZ_PYTHON=1, seed 2, 150 cases)"
  KILN_FUZZ_PYTHON=1 KILN_FUZZ_SEED=2 KILN_FUZZ_COUNT=150 timed "the Python fuzz slice" \
    ctest --preset release -R '^Fuzz\.NumPyDifferential$'
  host="$(build/release/kiln run diamond --size 100 --chunk 50 --json)"
  case "$host" in
    *AVX-512*) narrower=x86-64-v3 others="x86-64-v2"
      # x86-64-v4 also needs AVX-512 BW, CD, DQ and VL, which some AVX-512 CPUs lack.
      flags="$(grep -m1 '^flags' /proc/cpuinfo)"
      v4=yes
      for f in avx512f avx512bw avx512cd avx512dq avx512vl; do
        case " $flags " in *" $f "*) ;; *) v4="" ;; esac
      done
      if [ -n "$v4" ]; then others="x86-64-v4 x86-64-v2"; fi ;;
    *AVX2*) narrower=x86-64-v2 others="" ;;
    *) narrower="" others="" ;;
  esac
  # Without the suites whose work is the same for every JIT target and math library: the
  # readers, the command line's checks, the BLAS and CUDA libraries' discovery, the layering,
  # interning and arithmetic checks, the benchmark smoke run, the Python binding's suite and the
  # mpirun ranks' exchanges (OpsTable, the Gram kernel, Kiln's math and the Target tests stay).
  untargeted='^(CacheFaults|Doctor|Blas|CudaLibraries|NpyHostile|HostileCli|SizesCli|Report'
  untargeted+='|Layering|Interning|Checked|Bench|Python|Distributed)\.'
  if [ -n "$narrower" ]; then
    echo "test.sh: the suite again with KILN_TARGET_CPU=$narrower KILN_MATH=libmvec (host: $(echo "$host" | grep -o "\"compile_target\":\"[^\"]*\""))"
    KILN_TARGET_CPU="$narrower" KILN_MATH=libmvec timed "the $narrower suite" \
      ctest --preset release -E "$untargeted"
  fi
  # The suites whose kernels the JIT compiles for the target (element functions, reductions, the
  # differential fuzzer, fusion, linear algebra's kernels), for each other x86-64 level the host
  # runs: every level from SSE4.2 (v2) to AVX-512 (v4) is then tested on an AVX-512 host.
  jit='^(Elementwise|Reduce|Fuzz|FuzzMatmul|KilnMath|Bitwise|FloorDivide|FMod|Power|Scalars|Creation|Random|Fusion|RowFusion|Structure|Linalg|Decompose|Glm)\.'
  for level in $others; do
    echo "test.sh: the JIT's suites with KILN_TARGET_CPU=$level (KILN_FUZZ_COUNT=120)"
    KILN_TARGET_CPU="$level" KILN_FUZZ_COUNT=120 timed "the $level JIT suites" \
      ctest --preset release -R "$jit"
  done
  echo "test.sh: the suite again on the interpreter (KILN_DEVICE=interp)"
  KILN_DEVICE=interp timed "the interpreter suite" ctest --preset release -E "$host_only"
  # The CUDA printer's kernels as host C++; where the CUDA toolkit is installed, each kernel's
  # GPU build is also compiled by NVRTC for sm_80 and sm_90.
  check=""
  if compgen -G "/usr/local/cuda/lib64/libnvrtc.so*" >/dev/null || ldconfig -p | grep -q libnvrtc; then
    check="80,90"
  fi
  # Fuzz.NumPyDifferential runs its first 120 programs there, not 300 (FuzzMatmul keeps its 120):
  # each kernel is compiled by the host compiler and by NVRTC twice, and on a 2-core Zen 3 the 300
  # took 591-605 s, at ctest's 600 s limit. The CPU and interpreter runs above keep all 300.
  # NVRTC's cubins are cache entries of their own (cubin-<key>.cubin: the source, NVRTC's version
  # and the architecture), checked when loaded; those of earlier runs on this machine are copied
  # into this build's kernel cache first and this run's kept after, as ccache keeps the host
  # compiler's objects (with both warm, the stage took 200 s on a 2-core Xeon, NVRTC about two
  # thirds of Fuzz.NumPyDifferential's 124 s). Entries older than 30 days are dropped.
  cubins="${XDG_CACHE_HOME:-$HOME/.cache}/kiln-ci-cubins"
  mkdir -p "$cubins" build/release/kernel-cache
  find "$cubins" -name 'cubin-*.cubin' -mtime +30 -delete
  find "$cubins" -name 'cubin-*.cubin' -exec cp -n -t build/release/kernel-cache {} +
  echo "test.sh: the suite again on cuda-emu (KILN_DEVICE=cuda-emu, KILN_CUDA_CHECK=${check:-none: no NVRTC}, KILN_FUZZ_COUNT=120, $emu_says)"
  KILN_DEVICE=cuda-emu KILN_CUDA_CHECK="$check" KILN_FUZZ_COUNT=120 timed "the cuda-emu suite" \
    env "${emu[@]}" ctest --preset release -E "$host_only"
  find build/release/kernel-cache -name 'cubin-*.cubin' -exec cp -n -t "$cubins" {} +
  echo "test.sh: the suite again on three emulated devices (KILN_DEVICE=cuda-emu KILN_DEVICES=3, KILN_FUZZ_COUNT=120)"
  KILN_DEVICE=cuda-emu KILN_DEVICES=3 KILN_FUZZ_COUNT=120 timed "the three-device suite" \
    env "${emu[@]}" ctest --preset release -E "$host_only"
  # The installed package as another project uses it: headers alone, exported symbols, examples/.
  echo "test.sh: cmake --install into a temporary prefix, then examples/ against it (scripts/test-install.sh)"
  timed "test-install.sh" bash scripts/test-install.sh build/release
fi
