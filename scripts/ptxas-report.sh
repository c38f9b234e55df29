#!/usr/bin/env bash
# Registers, spills and shared memory of the GPU kernels Kiln prints, without a GPU: runs the
# seed workloads at small sizes and the Cuda suite's work splits on cuda-emu with NVRTC checking
# each kernel's GPU build (KILN_CUDA_CHECK) and keeping its source (KILN_CUDA_CHECK_DIR), then
# `nvcc -cubin -fmad=false -Xptxas -v` on every source; prints one line per kernel entry.
#
# Usage: scripts/ptxas-report.sh [BUILD_DIR] [ARCH]   (defaults build/release, 90). Needs the
# CUDA toolkit's nvcc (/usr/local/cuda/bin) and a built kiln and kiln_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
arch=${2:-90}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "ptxas-report: no nvcc (the CUDA toolkit)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export KILN_DEVICE=cuda-emu KILN_CUDA_CHECK="$arch" KILN_CACHE_DIR="$dir/cache"
# Each source set in a folder named for what printed it.
job() {
  local name=$1
  shift
  mkdir -p "$dir/src/$name"
  KILN_CUDA_CHECK_DIR="$dir/src/$name" "$@" >/dev/null
}
for w in random-sum trig-identity diamond; do
  job "$w" "$build/kiln" run "$w" --size 2000 --chunk 500
done
job logistic-gd "$build/kiln" run logistic-gd --size 40000 --chunk 10000
for t in FlatKernels OwnedAndSerial LongColumns LongRows; do
  job "Cuda.$t" "$build/kiln_tests" --gtest_filter="Cuda.$t*"
done
printf '%-16s %-20s %-12s %-11s %5s %6s %6s\n' from kernel split entry regs spills smem
for f in "$dir"/src/*/*.cu; do
  from=$(basename "$(dirname "$f")")
  head=$(grep -m1 '^// kernel ' "$f")
  hash=$(echo "$head" | sed 's|// kernel \(0x[0-9a-f]*\)ull.*|\1|')
  split=$(echo "$head" | sed 's|.*ull: \([a-z]*\).*|\1|')
  case "$head" in
    *"long rows: a warp"*) split=owned-rows ;;
    *"owned, split"*) split=owned-split ;;
    *"flat, partials"*) split=flat-tree ;;
  esac
  # ptxas prints "Compiling entry function 'NAME'", then its usage lines.
  "$nvcc" -cubin -arch="sm_$arch" -fmad=false -Xptxas -v -x cu "$f" -o /dev/null 2>&1 |
    awk -v k="$hash" -v s="$split" -v from="$from" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); e = substr($0, RSTART + 1, RLENGTH - 2) }
      /spill stores/ { sp = $5 + $9 }
      /Used [0-9]+ registers/ {
        r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r)
        m = "0"; if (match($0, /[0-9]+ bytes smem/)) { m = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", m) }
        printf "%-16s %-20s %-12s %-11s %5s %6s %6s\n", from, k, s, e, r, sp, m
      }'
done
