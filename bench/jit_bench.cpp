// JIT compile latency per kernel. The on-disk object cache is disabled
// (kiln::flags().cache_dir = "", restored afterwards) and every iteration computes a
// structurally new expression, so every iteration is a plan-cache miss that runs the passes,
// lowers one fused kernel, and optimizes + code-generates + links it with LLVM ORC.
//
// The expression is a chain of `ops` element-wise ops on a small one-block array (arange, so that
// nothing is loop-invariant); op i is
// chosen from {+1.5, *0.5, sin, cos} by the i-th base-4 digit of a process-wide counter, so no
// two iterations (nor two benchmarks) produce the same kernel. Args: ops, reduce (1: the chain
// is summed, giving a reduction kernel instead of a store kernel), trig (1: past the variant
// digits the chain alternates sin and +, the mix whose compile time grew fastest). Chains past
// fuse's kernel size limit are split into several kernels: `kernels` counts them, and
// ms_per_op (wall time per element-wise op) should stay flat as ops grow.
//
// Counters: kernels (compiled per iteration, from kiln::stats().kernels_compiled),
// ms_per_kernel (wall time of compute(), including passes, lowering and the tiny execution,
// per compiled kernel), llvm_ms_per_kernel (kiln::stats().compile_seconds: LLVM only).
#include <benchmark/benchmark.h>

#include "bench/bench_common.hpp"

namespace {

using kiln::Array;

uint64_t g_variant = 1;  // never reused within the process

Array variant_chain(Array x, int ops, uint64_t v, bool trig) {
  for (int i = 0; i < ops; ++i) {
    if (trig && v == 0) {  // past the variant digits: alternate sin and + (the costly mix)
      x = i % 2 ? x + 1.0 : kiln::sin(x);
      continue;
    }
    switch (v & 3) {
      case 0:
        x = x + 1.5;
        break;
      case 1:
        x = x * 0.5;
        break;
      case 2:
        x = kiln::sin(x);
        break;
      default:
        x = kiln::cos(x);
        break;
    }
    v >>= 2;
  }
  return x;
}

void BM_CompileKernel(benchmark::State& state) {
  kiln::bench::init_env();
  const int ops = static_cast<int>(state.range(0));
  const bool reduce = state.range(1) != 0;
  const bool trig = state.range(2) != 0;
  if (ops < 8) {
    state.SkipWithError("ops must be >= 8 so that variants do not repeat");
    return;
  }
  const std::string saved_cache_dir = kiln::flags().cache_dir;
  kiln::flags().cache_dir = "";
  kiln::clear_plan_cache();
  kiln::Stats before = kiln::stats();
  kiln::ComputeOptions opt;
  opt.threads = 1;
  kiln::bench::Stopwatch sw;
  sw.start();
  for (auto _ : state) {
    Array y = variant_chain(kiln::arange(0.0, 1024.0, 1.0, {1024}), ops, g_variant++, trig);
    kiln::bench::compute_and_stats({reduce ? y.sum() : y}, opt);
  }
  sw.stop();
  kiln::Stats after = kiln::stats();
  kiln::flags().cache_dir = saved_cache_dir;
  kiln::clear_plan_cache();
  double kernels = static_cast<double>(after.kernels_compiled - before.kernels_compiled);
  double iters = static_cast<double>(state.iterations());
  state.counters["kernels"] = kernels / iters;
  state.counters["llvm_ms_per_kernel"] =
      kernels > 0 ? (after.compile_seconds - before.compile_seconds) * 1e3 / kernels : 0;
  state.counters["ms_per_kernel"] = kernels > 0 ? sw.seconds() * 1e3 / kernels : 0;
  state.counters["us_per_op"] = sw.seconds() * 1e6 / (iters * ops);
  if (after.kernels_from_disk != before.kernels_from_disk)
    state.SkipWithError("a kernel came from the disk cache");
}
BENCHMARK(BM_CompileKernel)
    ->ArgNames({"ops", "reduce", "trig"})
    ->Args({8, 0, 0})
    ->Args({32, 0, 0})
    ->Args({128, 0, 0})
    ->Args({32, 1, 0})
    ->Args({1000, 0, 0})
    ->Args({4000, 0, 0})
    ->Args({16000, 0, 0})
    ->Args({256, 0, 1})
    ->Args({1000, 0, 1})
    ->Args({4000, 0, 1})
    ->Args({16000, 0, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
