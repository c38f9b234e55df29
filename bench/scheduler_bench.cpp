// Scheduler overhead per task: graphs whose kernels do almost nothing (blocks of one element),
// so the time per task is what the executor (dependency counts, oneTBB spawning, argument
// setup, allocation and freeing of block buffers) costs.
//
//   empty    x + 1 with x = uniform(0, 1, {n}, {1}), fused: n kernel tasks of one element each
//   chain    10 element-wise ops on x, fuse=false: every op its own task per block (the
//            generator leaf is evaluated inside the first op's kernel)
//   fanout   16 different element-wise expressions of the same array x + 1, computed together,
//            fuse=false: the shared array is materialized once per block and read 16 times
//
// Args: n (blocks), threads. Counters: tasks (kiln::stats().last_tasks of one compute), and
// ns_per_task = wall time / (iterations * tasks), which includes compute()'s fixed per-call cost
// (templating, plan-cache lookup, task-arena creation) amortized over the tasks.
#include <benchmark/benchmark.h>

#include "bench/bench_common.hpp"

namespace {

using kiln::Array;

enum class Kind { Empty, Chain, FanOut };

std::vector<Array> build(Kind kind, int64_t n) {
  // A generator source (not zeros: the simplifier folds constant leaves into their consumers,
  // so `zeros + 1` would not be a materialized array under fuse=false).
  kiln::random::Generator rng(0);
  Array x = rng.uniform(0, 1, {n}, {1});
  switch (kind) {
    case Kind::Empty:
      return {x + 1};
    case Kind::Chain: {
      Array y = x;
      for (int i = 0; i < 10; ++i) y = (i % 2 == 0) ? y + 1.5 : y * 0.5;
      return {y};
    }
    case Kind::FanOut: {
      Array src = x + 1;
      std::vector<Array> outs;
      for (int k = 0; k < 16; ++k) {
        double s = 1.25 + k;
        switch (k % 4) {
          case 0:
            outs.push_back(src + s);
            break;
          case 1:
            outs.push_back(src * s);
            break;
          case 2:
            outs.push_back(src - s);
            break;
          default:
            outs.push_back(s - src);
            break;
        }
      }
      return outs;
    }
  }
  return {};
}

void run(benchmark::State& state, Kind kind) {
  kiln::bench::init_env();
  const int64_t n = state.range(0);
  kiln::ComputeOptions opt;
  opt.fuse = kind == Kind::Empty;
  opt.threads = static_cast<int>(state.range(1));
  std::vector<Array> arrays = build(kind, n);
  // Warm-up: builds the plan and compiles its kernels; the timed iterations hit the plan cache.
  kiln::Stats s = kiln::bench::compute_and_stats(arrays, opt);
  int64_t tasks = s.last_tasks;
  kiln::bench::Stopwatch sw;
  sw.start();
  for (auto _ : state) {
    s = kiln::bench::compute_and_stats(arrays, opt);
    tasks = s.last_tasks;
  }
  sw.stop();
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["kernels"] = static_cast<double>(s.last_kernels);
  state.counters["ns_per_task"] =
      sw.seconds() * 1e9 / (static_cast<double>(state.iterations()) * std::max<int64_t>(1, tasks));
}

void BM_EmptyTasks(benchmark::State& state) { run(state, Kind::Empty); }
void BM_UnfusedChain10(benchmark::State& state) { run(state, Kind::Chain); }
void BM_FanOut16(benchmark::State& state) { run(state, Kind::FanOut); }

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"blocks", "threads"});
  for (int64_t n : {1000, 10000})
    for (int64_t t : {1, 2}) b->Args({n, t});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_EmptyTasks)->Apply(args);
BENCHMARK(BM_UnfusedChain10)->Apply(args);
BENCHMARK(BM_FanOut16)->Apply(args);

}  // namespace
