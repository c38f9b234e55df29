// Helpers shared by the Google Benchmark suites in bench/ (header only: the CMake glob builds
// bench/*_bench.cpp into kiln_bench, so this file is not compiled on its own).
#pragma once
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "kiln/kiln.hpp"
#include "support/flags.hpp"

namespace kiln::bench {

// Points the on-disk kernel cache at a private directory (unless KILN_CACHE_DIR is already set),
// so benchmark runs neither read nor fill the user's ~/.cache/kiln. Must run before the first
// compute(): flags are read from the environment once.
inline void init_env() {
  static const bool done = [] {
    if (!std::getenv("KILN_CACHE_DIR")) {
      const char* tmp = std::getenv("TMPDIR");
      std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-bench-cache";
      setenv("KILN_CACHE_DIR", dir.c_str(), 0);
    }
    (void)kiln::flags();  // read the environment now
    return true;
  }();
  (void)done;
}

// Wall-clock stopwatch for counters that must be derived from the measured loop itself
// (Google Benchmark 1.7 does not expose the elapsed time to the benchmark function).
class Stopwatch {
 public:
  void start() { t0_ = std::chrono::steady_clock::now(); }
  void stop() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  double seconds() const { return total_; }

 private:
  std::chrono::steady_clock::time_point t0_;
  double total_ = 0;
};

// Runs a compute() and keeps its results from being optimized away.
inline Stats compute_and_stats(const std::vector<Array>& arrays, const ComputeOptions& opt) {
  std::vector<NDArray> r = compute(arrays, opt);
  benchmark::DoNotOptimize(r.data());
  benchmark::ClobberMemory();
  return stats();
}

}  // namespace kiln::bench
