// Fusion and front-end costs.
//
//   BM_UfuncChain200    Dask's fusion benchmark case: 200 element-wise ufuncs in a chain
//                       (sin, +1, *0.5, abs, sqrt, repeated) over an N x N array in C x C
//                       blocks, fused (one kernel) and unfused (every ufunc its own kernel and
//                       task per block). Args: N, C, fuse. N=4000, C=500 is the Dask case
//                       (64 blocks); N=2000, C=250 (also 64 blocks) is 4x cheaper.
//   BM_BuildChain       graph-building cost: a chain of `ops` element-wise ops built from
//                       scratch (interning included); counters ns_per_node for building and
//                       ns_per_node_destroy for releasing the chain (both are in the time).
//   BM_PlanCacheHit     compute() of a 16-block element-wise expression with 16-element
//                       blocks, (sin(x) + 1) * 0.5 - x with x = uniform(16 x 16 in 4 x 4
//                       blocks): the kernels take almost no time (kernel_us_est, scaled
//                       from a 1024 x 1024 run on one thread, is an upper bound), so the time is
//                       compute()'s own cost on a plan-cache hit (templating, lookup, task plan
//                       run, allocation). Args: threads, rebuild (1: the expression is rebuilt
//                       every iteration, with a fresh generator seed, as user code would do).
#include <benchmark/benchmark.h>

#include "bench/bench_common.hpp"
#include "kiln/glm.hpp"

namespace {

using kiln::Array;

Array ufunc_chain(Array x, int ops) {
  for (int i = 0; i < ops; ++i) {
    switch (i % 5) {
      case 0:
        x = kiln::sin(x);
        break;
      case 1:
        x = x + 1;
        break;
      case 2:
        x = x * 0.5;
        break;
      case 3:
        x = kiln::abs(x);
        break;
      default:
        x = kiln::sqrt(x);
        break;
    }
  }
  return x;
}

void BM_UfuncChain200(benchmark::State& state) {
  kiln::bench::init_env();
  const int64_t n = state.range(0), c = state.range(1);
  kiln::ComputeOptions opt;
  opt.fuse = state.range(2) != 0;
  auto build = [&] {
    kiln::random::Generator rng(42);
    return std::vector<Array>{ufunc_chain(rng.uniform(0, 1, {n, n}, {c, c}), 200)};
  };
  kiln::Stats s = kiln::bench::compute_and_stats(build(), opt);  // plan + compile
  for (auto _ : state) s = kiln::bench::compute_and_stats(build(), opt);
  state.counters["tasks"] = static_cast<double>(s.last_tasks);
  state.counters["kernels"] = static_cast<double>(s.last_kernels);
  state.counters["peak_bytes"] =
      benchmark::Counter(static_cast<double>(s.last_peak_bytes), benchmark::Counter::kDefaults,
                         benchmark::Counter::kIs1024);
  state.SetItemsProcessed(state.iterations() * n * n * 200);  // element-ops per second
}
BENCHMARK(BM_UfuncChain200)
    ->ArgNames({"N", "C", "fuse"})
    ->Args({2000, 250, 1})
    ->Args({2000, 250, 0})
    ->Args({4000, 500, 1})  // the Dask case: seconds per iteration
    ->Args({4000, 500, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_BuildChain(benchmark::State& state) {
  kiln::bench::init_env();
  const int ops = static_cast<int>(state.range(0));
  kiln::bench::Stopwatch build, destroy;
  for (auto _ : state) {
    build.start();
    Array y = ufunc_chain(kiln::zeros({1000}, {100}), ops);
    build.stop();
    benchmark::DoNotOptimize(y.node().get());
    destroy.start();
    y = Array();
    destroy.stop();
  }
  double nodes = static_cast<double>(state.iterations()) * ops;
  state.counters["ns_per_node"] = build.seconds() * 1e9 / nodes;
  state.counters["ns_per_node_destroy"] = destroy.seconds() * 1e9 / nodes;
}
BENCHMARK(BM_BuildChain)
    ->ArgName("ops")
    ->Arg(1000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

std::vector<Array> tiny_expression(uint64_t seed, int64_t n, int64_t c) {
  kiln::random::Generator rng(seed);
  Array x = rng.uniform(0, 1, {n, n}, {c, c});
  return {(kiln::sin(x) + 1) * 0.5 - x};
}

// Optimizing a graph: compute() of a freshly built `ops`-op chain (1 block of 1000 elements) with
// the plan cache cleared, so every iteration runs parameterize, simplify, push_slices, fuse,
// lowering and planning; the kernel itself comes from the in-memory kernel cache (compiled in the
// warm-up), so no LLVM time is included. Counter us_per_node: that cost per graph node, the
// figure to set against dask.optimize per task (bench/peers/graph_build.py).
void BM_PlanBuild(benchmark::State& state) {
  kiln::bench::init_env();
  const int ops = static_cast<int>(state.range(0));
  Array y = ufunc_chain(kiln::zeros({1000}, {1000}), ops);
  kiln::compute({y});  // compiles the kernel once
  kiln::bench::Stopwatch plan;
  for (auto _ : state) {
    kiln::clear_plan_cache();
    plan.start();
    kiln::compute({y});
    plan.stop();
  }
  state.counters["us_per_node"] =
      plan.seconds() * 1e6 / (static_cast<double>(state.iterations()) * ops);
}
BENCHMARK(BM_PlanBuild)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PlanCacheHit(benchmark::State& state) {
  constexpr int64_t kN = 16, kC = 4;  // 16 blocks of 4 x 4
  kiln::bench::init_env();
  kiln::ComputeOptions opt;
  opt.threads = static_cast<int>(state.range(0));
  const bool rebuild = state.range(1) != 0;
  // Kernel time of the same expression, estimated per element from 16 large blocks on one
  // thread (where compute()'s fixed cost is negligible), then scaled to the 16 tiny blocks.
  double kernel_us = 0;
  {
    kiln::ComputeOptions one;
    one.threads = 1;
    const int64_t big = 1024;
    kiln::bench::compute_and_stats(tiny_expression(1, big, big / 4), one);  // compile
    double best = 1e300;
    for (int r = 0; r < 5; ++r)
      best = std::min(
          best, kiln::bench::compute_and_stats(tiny_expression(1, big, big / 4), one).last_seconds);
    kernel_us = best / static_cast<double>(big * big) * kN * kN * 1e6;
  }
  std::vector<Array> prebuilt = tiny_expression(7, kN, kC);
  kiln::bench::compute_and_stats(prebuilt, opt);  // plan + compile
  kiln::Stats s;
  kiln::bench::Stopwatch sw;
  uint64_t seed = 100;
  sw.start();
  for (auto _ : state) {
    if (rebuild)
      s = kiln::bench::compute_and_stats(tiny_expression(++seed, kN, kC), opt);
    else
      s = kiln::bench::compute_and_stats(prebuilt, opt);
  }
  sw.stop();
  if (!s.last_cached) state.SkipWithError("expected a plan-cache hit");
  double us = sw.seconds() * 1e6 / static_cast<double>(state.iterations());
  state.counters["tasks"] = static_cast<double>(s.last_tasks);
  state.counters["us_per_compute"] = us;
  state.counters["kernel_us_est"] = kernel_us;
  state.counters["us_beyond_kernels"] = us - kernel_us;
}
BENCHMARK(BM_PlanCacheHit)
    ->ArgNames({"threads", "rebuild"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 0})
    ->Args({2, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// BM_RowFusion: a logistic regression's loss and gradient at b, the evaluation every GLM solver
// repeats (kiln::glm's family functions): eta = X @ b, the loss sum and X.T @ (sigmoid(eta) - y),
// X a resident N x K float64 array in row blocks of C. With row fusion (rows=1) X @ b is the row
// stage of the gradient's kernel, one pass over X; without (0), two. Counter GBps: X's bytes
// over the time of one evaluation.
void BM_RowFusion(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), c = state.range(2);
  kiln::bench::init_env();
  kiln::ComputeOptions opt;
  opt.row_fusion = state.range(3) != 0;
  kiln::random::Generator rng(61);
  std::vector<kiln::NDArray> data =
      kiln::compute({rng.standard_normal({n, k}, {c, k}), rng.uniform(0, 1, {n}, {c}) < 0.5});
  const kiln::NDArray& x = data[0];
  kiln::NDArray yb =
      kiln::compute({kiln::from_buffer(data[1].data(), data[1].dtype(), {n}, {c}, data[1].storage())
                         .astype(kiln::DType::Float64)})[0];
  Array X = kiln::from_buffer(x.data(), x.dtype(), x.shape(), {c, k}, x.storage());
  Array y = kiln::from_buffer(yb.data(), yb.dtype(), yb.shape(), {c}, yb.storage());
  std::vector<double> beta(static_cast<size_t>(k), 0.01);
  Array eta = kiln::matmul(X, kiln::from_buffer(beta.data(), {k}));
  std::vector<Array> eval = {kiln::glm::loss(kiln::glm::Family::Logistic, eta, y),
                             kiln::glm::gradient(kiln::glm::Family::Logistic, eta, X, y)};
  kiln::compute(eval, opt);  // plan and compile
  for (auto _ : state) benchmark::DoNotOptimize(kiln::compute(eval, opt));
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(n * k * 8) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RowFusion)
    ->ArgNames({"n", "k", "chunk", "rows"})
    ->Args({1000000, 100, 100000, 1})
    ->Args({1000000, 100, 100000, 0})
    ->Args({50000, 100, 5000, 1})  // the smoke run's
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
