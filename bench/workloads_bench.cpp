// Time per seed workload (kiln::workloads::all(), the same graphs as `kiln run`), fused and
// unfused. Each workload runs at three settings:
//
//   fused    N = the workload's default (the size `kiln run` and bench/peers use)
//   fused    N = default / 2      \  the pair to compare: unfused materializes every
//   unfused  N = default / 2      /  intermediate array, so it runs at the smaller size
//
// always with the workload's default chunk C and all cores. Counters: tasks and kernels of the
// plan, peak_bytes (host memory of one compute; binary prefixes, Mi = MiB), and items_per_second
// (N*N elements per second). The graph is rebuilt every iteration (as `kiln run --repeat` does),
// and one untimed compute() first builds the plan and compiles its kernels, so the timed
// iterations are plan-cache hits.

#include <benchmark/benchmark.h>

#include "bench/bench_common.hpp"
#include "tools/workloads.hpp"

namespace {

void BM_Workload(benchmark::State& state, const kiln::workloads::Workload* w, int64_t n,
                 bool fuse) {
  kiln::bench::init_env();
  kiln::ComputeOptions opt;
  opt.fuse = fuse;
  kiln::Stats s = kiln::bench::compute_and_stats(w->build(n, w->chunk), opt);  // plan + compile
  for (auto _ : state) s = kiln::bench::compute_and_stats(w->build(n, w->chunk), opt);
  state.counters["tasks"] = static_cast<double>(s.last_tasks);
  state.counters["kernels"] = static_cast<double>(s.last_kernels);
  state.counters["peak_bytes"] =
      benchmark::Counter(static_cast<double>(s.last_peak_bytes), benchmark::Counter::kDefaults,
                         benchmark::Counter::kIs1024);
  state.SetItemsProcessed(state.iterations() * n * n);
}

const bool registered = [] {
  for (const auto& w : kiln::workloads::all()) {
    struct Setting {
      int64_t n;
      bool fuse;
    };
    for (Setting st :
         {Setting{w.size, true}, Setting{w.size / 2, true}, Setting{w.size / 2, false}}) {
      std::string name = "BM_Workload/" + w.name + "/N:" + std::to_string(st.n) +
                         "/C:" + std::to_string(w.chunk) + (st.fuse ? "/fused" : "/unfused");
      benchmark::RegisterBenchmark(name.c_str(), BM_Workload, &w, st.n, st.fuse)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
