// Whole-array reductions of a resident float64 array, per core (issue 31: every reduction at least
// as fast per core as NumPy's on the same array; bench/peers/reduce_peers.py runs NumPy beside it).
//
// BM_Reduce/<fn>/threads:T: one compute() of fn over a 6000 x 6000 float64 array of standard
// normals in 2000 x 2000 chunks, made and persisted before the timed region, on T worker threads.
// BM_ReduceNarrow/<fn>/threads:T: the same over 1e6 x 100 in 100000 x 100 chunks (the shape of
// the GLM seed's X: rows of 800 bytes).
// fn: sum, prod, mean, min, max, argmin, argmax, any (x > 8: false everywhere, so no early exit
// anywhere; a standard normal passes 8 with probability 6e-16), all (x < 8: true everywhere),
// and the nan-functions nansum ... nanvar (the array has no NaN: the same work as with some).
// Counter ns_per_element = seconds / elements per iteration.
// KILN_BENCH_QUICK=1: 300 x 300 in 100 x 100 chunks, 50000 x 100 in 5000 x 100.
// bench/peers/reduce_peers.py runs NumPy's reductions of the same arrays beside these.
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
      {"any", [](const kiln::Array& x) { return (x > 8.0).any(); }},
      {"all", [](const kiln::Array& x) { return (x < 8.0).all(); }},
      {"nansum", [](const kiln::Array& x) { return kiln::nansum(x); }},
      {"nanprod", [](const kiln::Array& x) { return kiln::nanprod(x); }},
      {"nanmean", [](const kiln::Array& x) { return kiln::nanmean(x); }},
      {"nanmin", [](const kiln::Array& x) { return kiln::nanmin(x); }},
      {"nanmax", [](const kiln::Array& x) { return kiln::nanmax(x); }},
      {"nanargmin", [](const kiln::Array& x) { return kiln::nanargmin(x); }},
      {"nanargmax", [](const kiln::Array& x) { return kiln::nanargmax(x); }},
      {"nanvar", [](const kiln::Array& x) { return kiln::nanvar(x); }},
  };
  return c;
}

bool quick() {
  const char* q = std::getenv("KILN_BENCH_QUICK");
  return q && std::atoi(q) != 0;
}

struct Shape {
  int64_t rows, cols, chunk_rows, chunk_cols;
};
Shape square() {
  const int64_t n = quick() ? 6000 / kiln::workloads::kQuickDivisor : 6000;
  return {n, n, n / 3, n / 3};
}
Shape narrow() {
  const int64_t n = quick() ? 1000000 / kiln::workloads::kQuickDivisor : 1000000;
  return {n, 100, n / 10, 100};
}

// The resident arrays, each made once per process.
kiln::Array make(const Shape& s) {
  kiln::bench::init_env();
  kiln::random::Generator rng(31);
  return rng.normal(0, 1, {s.rows, s.cols}, {s.chunk_rows, s.chunk_cols}).persist();
}
const kiln::Array& resident(bool is_narrow) {
  if (is_narrow) {
    static const kiln::Array nr = make(narrow());
    return nr;
  }
  static const kiln::Array sq = make(square());
  return sq;
}

void BM_Reduce(benchmark::State& state, size_t k, int threads, bool is_narrow) {
  const Case& c = cases()[k];
  const kiln::Array r = c.fn(resident(is_narrow));
  kiln::ComputeOptions opt;
  opt.progress = false;
  opt.threads = threads;
  kiln::bench::compute_and_stats({r}, opt);  // plan and compile outside the timing
  for (auto _ : state) kiln::bench::compute_and_stats({r}, opt);
  const Shape s = is_narrow ? narrow() : square();
  const double elements = static_cast<double>(s.rows) * static_cast<double>(s.cols);
  state.counters["ns_per_element"] = benchmark::Counter(
      elements * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

const bool registered = [] {
  for (bool is_narrow : {false, true})
    for (size_t k = 0; k < cases().size(); ++k)
      for (int threads : {1, 2})
        benchmark::RegisterBenchmark((std::string(is_narrow ? "BM_ReduceNarrow/" : "BM_Reduce/") +
                                      cases()[k].name + "/threads:" + std::to_string(threads))
                                         .c_str(),
                                     [k, threads, is_narrow](benchmark::State& state) {
                                       BM_Reduce(state, k, threads, is_narrow);
                                     })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
  return true;
}();

}  // namespace
