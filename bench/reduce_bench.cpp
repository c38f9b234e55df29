// Whole-array reductions of a resident float64 array, per core (issue 31: every reduction at least
// as fast per core as NumPy's on the same array; bench/peers/reduce_peers.py runs NumPy beside it).
//
// BM_Reduce/<fn>/threads:T: one compute() of fn over a 6000 x 6000 float64 array of standard
// normals in 2000 x 2000 chunks, made and persisted before the timed region, on T worker threads.
// fn: sum, prod, mean, min, max, argmin, argmax, any (x > 5: false everywhere, so no early exit
// anywhere), all (x < 5: true everywhere). Counter ns_per_element = seconds / 36e6 per iteration.
// KILN_BENCH_QUICK=1: 300 x 300 in 100 x 100 chunks.
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "tools/workloads.hpp"

namespace {

struct Case {
  const char* name;
  std::function<kiln::Array(const kiln::Array&)> fn;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"sum", [](const kiln::Array& x) { return x.sum(); }},
      {"prod", [](const kiln::Array& x) { return x.prod(); }},
      {"mean", [](const kiln::Array& x) { return x.mean(); }},
      {"min", [](const kiln::Array& x) { return x.min(); }},
      {"max", [](const kiln::Array& x) { return x.max(); }},
      {"argmin", [](const kiln::Array& x) { return x.argmin(); }},
      {"argmax", [](const kiln::Array& x) { return x.argmax(); }},
      {"any", [](const kiln::Array& x) { return (x > 5.0).any(); }},
      {"all", [](const kiln::Array& x) { return (x < 5.0).all(); }},
  };
  return c;
}

int64_t side() {
  const char* quick = std::getenv("KILN_BENCH_QUICK");
  return quick && std::atoi(quick) != 0 ? 6000 / kiln::workloads::kQuickDivisor : 6000;
}

// The resident array, made once per process.
const kiln::Array& resident() {
  static const kiln::Array x = [] {
    kiln::bench::init_env();
    const int64_t n = side();
    kiln::random::Generator rng(31);
    return rng.normal(0, 1, {n, n}, {n / 3, n / 3}).persist();
  }();
  return x;
}

void BM_Reduce(benchmark::State& state, size_t k, int threads) {
  const Case& c = cases()[k];
  const kiln::Array r = c.fn(resident());
  kiln::ComputeOptions opt;
  opt.progress = false;
  opt.threads = threads;
  kiln::bench::compute_and_stats({r}, opt);  // plan and compile outside the timing
  for (auto _ : state) kiln::bench::compute_and_stats({r}, opt);
  const double elements = static_cast<double>(side()) * static_cast<double>(side());
  state.counters["ns_per_element"] = benchmark::Counter(
      elements * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

const bool registered = [] {
  for (size_t k = 0; k < cases().size(); ++k)
    for (int threads : {1, 2})
      benchmark::RegisterBenchmark(
          (std::string("BM_Reduce/") + cases()[k].name + "/threads:" + std::to_string(threads))
              .c_str(),
          [k, threads](benchmark::State& state) { BM_Reduce(state, k, threads); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  return true;
}();

}  // namespace
