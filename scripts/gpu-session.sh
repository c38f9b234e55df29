#!/usr/bin/env bash
# The checks of the GPU issue that need a GPU, in one batch, for a session that is lent one (the
# device tool; DEVELOPERS.md): build and pack here, run there, read the logs back.
#
#   here:   bash scripts/gpu-session.sh pack
#   there:  run(command="bash scripts/gpu-session.sh run", carry=[".device-pack"], timeout_s=540)
#           (one call: a session has 15 minutes of device time in all, the machine's start
#           included; the steps share a budget of KILN_GPU_BUDGET_S seconds, 420 unless set, and
#           a step that would start past it is skipped and says so in its log, so the call ends
#           in time to read the logs and rerun a part: `run tests` or `run workloads`)
#
# `run` unpacks the programs (the GPU machine has no LLVM or oneTBB), then, with every log under
# $OUT (the device tool brings it back): the device (nvidia-smi), the whole test suite with
# KILN_DEVICE=cuda (NumPy's expectations from the machine's python3), and the issue's workloads
# on the GPU with their copy counts and compile times, each also with the data generated in the
# kernel. KILN_GPU_DEVICE=cuda-emu runs the same steps on the emulator (a dry run of this script
# without a GPU: `KILN_GPU_DEVICE=cuda-emu OUT=/tmp/out bash scripts/gpu-session.sh run`).
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
phase="${2:-all}"  # run: tests, workloads or all

if [ "$mode" = pack ]; then
  set -e
  cmake --build --preset release
  bash ../shared/tools/device-pack.sh build/release/kiln build/release/kiln_tests \
    build/release/kiln_bench
  exit 0
fi

if [ "$mode" != run ]; then
  echo "usage: $0 pack | run [tests|workloads|all]" >&2
  exit 2
fi

out="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$out"
device="${KILN_GPU_DEVICE:-cuda}"
if [ -d .device-pack ]; then
  eval "$(bash .device-pack/unpack.sh)"
  bin=dp
else
  bin=build/release  # the dry run here
fi
export KILN_PYTHON="${KILN_PYTHON:-python3}" KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-cache}"
budget="${KILN_GPU_BUDGET_S:-420}"
# The seconds a step may take: its own limit ($1) or what is left of the budget, if less; 0 when
# under 10 s are left (the caller skips the step).
limit() {
  local left=$((budget - SECONDS))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

{
  date
  nvidia-smi 2>&1 | head -20 || echo "no nvidia-smi"
  timeout 60 "$bin/kiln" run diamond --size 100 --chunk 50 --device "$device" --json 2>&1 | head -3
} >"$out/device.log"

if [ "$phase" = all ] || [ "$phase" = tests ]; then
  # The whole suite on the device (results against NumPy, bit-for-bit checks against the CPU's), in
  # 8 shards at once: each kernel is compiled by NVRTC on a fresh machine (0.1-0.3 s each).
  # KILN_GPU_FILTER narrows it (the dry run).
  shards=8
  t="$(limit 300)"
  [ "$t" -gt 0 ] || shards=0  # (timeout 0 would mean no limit)
  for i in $(seq 0 $((shards - 1))); do
    KILN_DEVICE="$device" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$t" \
      "$bin/kiln_tests" --gtest_brief=1 --gtest_filter="${KILN_GPU_FILTER:-*}" \
      >"$out/tests-$i.log" 2>&1 &
  done
  fails=0
  codes=""
  for job in $(jobs -p); do
    wait "$job" || {
      codes="$codes $?"
      fails=$((fails + 1))
    }
  done
  {
    [ "$shards" -gt 0 ] || echo "kiln_tests skipped: the budget of $budget s is spent"
    echo "kiln_tests: $fails of $shards shards failed, exit codes:${codes:- none} (124: past its $t s)"
    grep -h "FAILED\|Failure" "$out"/tests-*.log | head -100
    tail -n 3 "$out"/tests-*.log
  } >"$out/tests.log"
  rm -f "$out"/tests-*.log
fi
[ "$phase" = all ] || [ "$phase" = workloads ] || { ls -l "$out"; exit 0; }

# The issue's targets: each workload on the device, median of 5, the report's copies and compile
# time; then with --resident (data made once, then the expression timed over it).
workloads=("random-sum --size 20000 --chunk 2000" "random-sum --size 500000 --chunk 10000"
  "trig-identity --size 10000 --chunk 2000" "diamond --size 10000 --chunk 2000"
  "svd --size 10000 --cols 1000 --chunk 5000" "matmul --size 4000 --chunk 1000")
if [ "$device" != cuda ]; then  # the dry run: small sizes
  workloads=("random-sum --size 200 --chunk 100" "trig-identity --size 200 --chunk 100"
    "diamond --size 200 --chunk 100" "svd --size 400 --cols 20 --chunk 200"
    "matmul --size 200 --chunk 100")
fi
{
  for w in "${workloads[@]}"; do
    echo "== $w"
    t="$(limit 120)"
    [ "$t" -gt 0 ] || { echo "skipped: the budget of $budget s is spent"; continue; }
    # shellcheck disable=SC2086
    timeout "$t" "$bin/kiln" run $w --device "$device" --repeat 5 --quiet 2>&1 | tail -12
    case "$w" in  # svd makes its data before its timed solver; 2 TB cannot be kept
      svd* | *500000*) continue ;;
    esac
    t="$(limit 60)"
    [ "$t" -gt 0 ] || { echo "--resident skipped: the budget of $budget s is spent"; continue; }
    # shellcheck disable=SC2086
    timeout "$t" "$bin/kiln" run $w --device "$device" --repeat 5 --quiet --resident 2>&1 | tail -4
  done
  # cuRAND's bulk generator against Kiln's own (random::Engine::Curand): x made whole by
  # curandGenerateNormalDouble / UniformDouble on the device, then the same expression.
  for w in "${workloads[@]}"; do
    case "$w" in  # those that generate x (the 2 TB run: the budget)
      svd* | matmul* | *500000*) continue ;;
    esac
    echo "== $w --rng curand"
    t="$(limit 120)"
    [ "$t" -gt 0 ] || { echo "skipped: the budget of $budget s is spent"; continue; }
    # shellcheck disable=SC2086
    timeout "$t" "$bin/kiln" run $w --device "$device" --repeat 5 --quiet --rng curand 2>&1 |
      tail -4
  done
} >"$out/workloads.log" 2>&1
date >>"$out/workloads.log"
ls -l "$out"
