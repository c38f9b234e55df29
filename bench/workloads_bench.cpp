// Time per seed workload (kiln::workloads::all(), the same graphs as `kiln run`), fused and
// unfused. Each workload runs at three settings:
//
//   fused    N = the workload's default (the size `kiln run` and bench/peers use)
//   fused    N = default / 2      \  the pair to compare: unfused materializes every
//   unfused  N = default / 2      /  intermediate array, so it runs at the smaller size
//
// always with the workload's default chunk C and all cores. KILN_BENCH_QUICK=1 divides every N
// and C by kiln::workloads::kQuickDivisor (smoke runs, scripts/smoke.sh). Counters: tasks and
// kernels of the plan, peak_bytes (host memory of one compute; binary prefixes, Mi = MiB), and
// items_per_second (N*N elements per second). The graph is rebuilt every iteration (as
// `kiln run --repeat` does), and one untimed compute() first builds the plan and compiles its
// kernels, so the timed iterations are plan-cache hits.
//
// A solver workload (logistic-gd) runs its `solve` instead: the time is the solver's own
// (SolveStats::seconds, as `kiln run` reports it; making the problem is not timed), one untimed
// solve first compiles; counters computes and tasks (summed over its computes), peak_bytes (the
// largest compute's), no items_per_second.

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "bench/bench_common.hpp"
#include "tools/workloads.hpp"

namespace {

using kiln::workloads::Workload;

void set_peak(benchmark::State& state, int64_t bytes) {
  state.counters["peak_bytes"] = benchmark::Counter(
      static_cast<double>(bytes), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}

void BM_Workload(benchmark::State& state, const Workload* w, int64_t n, int64_t c, bool fuse) {
  kiln::bench::init_env();
  kiln::ComputeOptions opt;
  opt.fuse = fuse;
  kiln::Stats s = kiln::bench::compute_and_stats(w->build(n, c), opt);  // plan + compile
  for (auto _ : state) s = kiln::bench::compute_and_stats(w->build(n, c), opt);
  state.counters["tasks"] = static_cast<double>(s.last_tasks);
  state.counters["kernels"] = static_cast<double>(s.last_kernels);
  set_peak(state, s.last_peak_bytes);
  state.SetItemsProcessed(state.iterations() * n * n);
}

void BM_Solver(benchmark::State& state, const Workload* w, int64_t n, int64_t c, bool fuse) {
  kiln::bench::init_env();
  kiln::ComputeOptions opt;
  opt.fuse = fuse;
  opt.progress = false;
  kiln::workloads::SolveStats st;
  kiln::workloads::SolveArgs args;
  args.n = n;
  args.c = c;
  args.cols = w->cols;
  w->solve(args, opt, &st);  // plans + compiles
  for (auto _ : state) {
    st = {};
    benchmark::DoNotOptimize(w->solve(args, opt, &st));
    state.SetIterationTime(st.seconds);
  }
  state.counters["computes"] = static_cast<double>(st.computes);
  state.counters["tasks"] = static_cast<double>(st.tasks);
  set_peak(state, st.peak_bytes);
}

const bool registered = [] {
  const char* quick = std::getenv("KILN_BENCH_QUICK");
  const int64_t div = quick && std::atoi(quick) != 0 ? kiln::workloads::kQuickDivisor : 1;
  for (const auto& w : kiln::workloads::all()) {
    struct Setting {
      int64_t n;
      bool fuse;
    };
    const int64_t n = w.size / div, c = w.chunk / div;
    for (Setting st : {Setting{n, true}, Setting{n / 2, true}, Setting{n / 2, false}}) {
      std::string name = "BM_Workload/" + w.name + "/N:" + std::to_string(st.n) +
                         "/C:" + std::to_string(c) + (st.fuse ? "/fused" : "/unfused");
      auto* b = w.solve
                    ? benchmark::RegisterBenchmark(name.c_str(), BM_Solver, &w, st.n, c, st.fuse)
                          ->UseManualTime()
                    : benchmark::RegisterBenchmark(name.c_str(), BM_Workload, &w, st.n, c, st.fuse)
                          ->UseRealTime();
      b->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
