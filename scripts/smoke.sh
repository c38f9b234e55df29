#!/usr/bin/env bash
# Smoke run, well under 2 minutes on 2 cores: every Google Benchmark family in kiln_bench at its
# smallest registered setting (the seed workloads, logistic-gd's solver included, at 1/20 of their
# default sizes: KILN_BENCH_QUICK=1), then `kiln seeds --quick`. It checks that everything runs
# and exits 0 (and that no benchmark reports an error), not the figures.
#
# Usage: scripts/smoke.sh [BUILD_DIR]. Without BUILD_DIR it installs what is missing and builds
# kiln_cli and kiln_bench with the release preset (build/release), like scripts/seeds.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}
if [ -z "$build" ]; then
  bash scripts/install-deps.sh
  cmake --preset release >/dev/null
  cmake --build --preset release --target kiln_cli kiln_bench
  build=build/release
fi
bench="$build/kiln_bench"
# One setting per benchmark family; a family missing here fails the check below.
filter='BM_Workload/|BM_UfuncChain200/N:2000/|BM_BuildChain/ops:1000/|BM_PlanBuild/100/'
filter+='|BM_PlanCacheHit/threads:1/|BM_CompileKernel/ops:8/|BM_EmptyTasks/blocks:1000/'
filter+='|BM_UnfusedChain10/blocks:1000/|BM_FanOut16/blocks:1000/'
filter+='|BM_GemmOneOpenBlasCall/200/|BM_GemmKilnChunked/200/|BM_RowFusion/n:50000/'
filter+='|BM_VectorMath/fn:3/|BM_VectorPow/kiln:1|BM_VectorSinCos/joint:1'
filter+='|BM_GramKiln/100/|BM_GramOpenBlasSyrk/100/|BM_GramProductKiln/10000/100/'
filter+="|BM_Reduce/max/threads:1/|BM_ReduceNarrow/sum/threads:1/|BM_Generate/normal/step:2/threads:1/"
families() { sed 's|/.*||' | sort -u; }
all=$(KILN_BENCH_QUICK=1 "$bench" --benchmark_list_tests | families)
picked=$(KILN_BENCH_QUICK=1 "$bench" --benchmark_list_tests --benchmark_filter="$filter" | families)
if [ "$all" != "$picked" ]; then
  echo "smoke: benchmark families not in the smoke filter:" $(comm -23 <(echo "$all") <(echo "$picked")) >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "smoke: kiln_bench ($(echo "$all" | wc -l) families)"
KILN_BENCH_QUICK=1 "$bench" --benchmark_filter="$filter" --benchmark_min_time=0.01 \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json
if grep -q '"error_occurred": true' "$out/bench.json"; then
  echo "smoke: a benchmark reported an error (see above)" >&2
  exit 1
fi
echo "smoke: kiln seeds --quick"
"$build/kiln" seeds --quick --repeat 1
echo "smoke: ok"
