// Random generation inside kernels (docs/KERNEL_IR.md section 9).
//
//   BM_Generate/<kind>/step:S/threads:T   one compute() of the sum of an 8000 x 8000 array of
//       <kind> (normal, uniform, integers in [0, 1000)) in 2000 x 2000 chunks, every S-th column
//       kept (S = 1: the whole array, two elements per Philox block; S = 2: every other column,
//       as random-sum's [::2, ::2] keeps them, one block per element), on T worker threads.
//       Counter ns_per_element: the time over the elements generated, times T (core time).
// KILN_BENCH_QUICK (not 0): 800 x 800 in 200 x 200 chunks.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "bench/bench_common.hpp"

namespace {

using kiln::Array;

void BM_Generate(benchmark::State& state, int kind, int step, int threads) {
  kiln::bench::init_env();
  const char* quick = std::getenv("KILN_BENCH_QUICK");
  const int64_t n = quick && std::atoi(quick) != 0 ? 800 : 8000, c = n / 4;
  kiln::ComputeOptions opt;
  opt.threads = threads;
  kiln::random::Generator rng(3);
  Array x = kind == 0   ? rng.standard_normal({n, n}, {c, c})
            : kind == 1 ? rng.uniform(0, 1, {n, n}, {c, c})
                        : rng.integers(0, 1000, {n, n}, {c, c});
  if (step > 1) x = x.slice({kiln::Slice::all(), kiln::Slice({}, {}, step)});
  const std::vector<Array> sum = {x.sum()};
  kiln::compute(sum, opt);  // plan and compile
  for (auto _ : state) kiln::bench::compute_and_stats(sum, opt);
  state.counters["ns_per_element"] = benchmark::Counter(
      double(x.size()) * 1e-9 / threads,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

const bool registered = [] {
  const char* kinds[] = {"normal", "uniform", "integers"};
  for (int kind = 0; kind < 3; ++kind)
    for (int step : {1, 2})
      for (int threads : {1, 2})
        benchmark::RegisterBenchmark((std::string("BM_Generate/") + kinds[kind] + "/step:" +
                                      std::to_string(step) + "/threads:" + std::to_string(threads))
                                         .c_str(),
                                     [kind, step, threads](benchmark::State& state) {
                                       BM_Generate(state, kind, step, threads);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
