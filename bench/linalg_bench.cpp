// Chunked matrix products against one OpenBLAS call, in one run (the target: a chunked
// 8000^3 GEMM at 90% or more of one multi-threaded dgemm's GFLOP/s).
//
// BM_GemmOneOpenBlasCall/N: one cblas_dgemm (Kiln's OpenBLAS, codegen/blas.hpp) of two N x N
// matrices with OpenBLAS on every core. BM_GemmKilnChunked/N/C: kiln::matmul(x, x) for a resident x
// (a buffer) in C x C chunks, on every core: a gemm per result block and contraction chunk
// (single-threaded BLAS inside Kiln's block tasks), the result materialized. Counter gflops = 2 N^3
// / seconds per iteration. BM_GramKiln/N/K and BM_GramOpenBlasSyrk/N/K: the upper triangle of A^T A
// for a K x N row-major block, on one core: Kiln's Gram kernel (codegen/gram.cpp, what X^T X calls
// up to 256 columns) and cblas_dsyrk. Counter gflops = K N (N + 1) / seconds (syrk's count).
// BM_GramProductKiln/K/N: kiln::matmul(x.T(), x) for a resident K x N x in one chunk, on every
// core (the product's contraction split into parallel partials, each an upper triangle).
// KILN_BENCH_QUICK=1: N and C divided by 20.
#include <thread>
#include <vector>

#include "bench/bench_common.hpp"
#include "codegen/blas.hpp"
#include "codegen/gram.hpp"
#include "tools/workloads.hpp"

namespace {

double gemm_flops(int64_t n) { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * n; }

// A K x N block (the GLM Hessian's 5242-row blocks of 100 columns by default).
std::vector<double> block(int64_t k, int64_t n) {
  std::vector<double> a(static_cast<size_t>(k * n));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<double>((i * 2654435761u) % 1000) / 500 - 1;
  return a;
}

std::vector<double> matrix(int64_t n) { return block(n, n); }

void BM_GemmOneOpenBlasCall(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<double> a = matrix(n), c(a.size());
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  KILN_OPENBLAS(set_num_threads)(threads);
  const auto N = static_cast<blasint>(n);
  for (auto _ : state) {
    KILN_CBLAS(dgemm)
    (CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, a.data(), N, a.data(), N, 0.0,
     c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["gflops"] =
      benchmark::Counter(gemm_flops(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}

void BM_GemmKilnChunked(benchmark::State& state) {
  kiln::bench::init_env();
  const int64_t n = state.range(0), chunk = state.range(1);
  std::vector<double> a = matrix(n);
  kiln::Array x = kiln::from_buffer(a.data(), {n, n}, {chunk, chunk});
  kiln::Array y = kiln::matmul(x, x);
  kiln::ComputeOptions opt;
  opt.progress = false;
  kiln::bench::compute_and_stats({y}, opt);  // plan and compile outside the timing
  for (auto _ : state) kiln::bench::compute_and_stats({y}, opt);
  state.counters["gflops"] =
      benchmark::Counter(gemm_flops(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GramKiln(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1);
  if (!kiln::library::gram_fits(n)) return state.SkipWithError("no Gram kernel for this host/n");
  std::vector<double> a = block(k, n), c(static_cast<size_t>(n * n));
  for (auto _ : state) {
    kiln::library::gram_upper(n, k, a.data(), n, c.data(), n, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["gflops"] = benchmark::Counter(static_cast<double>(k) * n * (n + 1) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kiln::library::gram_isa());
}

void BM_GramOpenBlasSyrk(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1);
  std::vector<double> a = block(k, n), c(static_cast<size_t>(n * n));
  KILN_OPENBLAS(set_num_threads)(1);
  for (auto _ : state) {
    KILN_CBLAS(dsyrk)
    (CblasRowMajor, CblasUpper, CblasTrans, static_cast<blasint>(n), static_cast<blasint>(k), 1.0,
     a.data(), static_cast<blasint>(n), 0.0, c.data(), static_cast<blasint>(n));
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["gflops"] = benchmark::Counter(static_cast<double>(k) * n * (n + 1) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GramProductKiln(benchmark::State& state) {
  kiln::bench::init_env();
  const int64_t k = state.range(0), n = state.range(1);
  std::vector<double> a = block(k, n);
  kiln::Array x = kiln::from_buffer(a.data(), {k, n}, {k, n});
  kiln::Array g = kiln::matmul(x.T(), x);
  kiln::ComputeOptions opt;
  opt.progress = false;
  kiln::bench::compute_and_stats({g}, opt);  // plan and compile outside the timing
  for (auto _ : state) kiln::bench::compute_and_stats({g}, opt);
  state.counters["gflops"] = benchmark::Counter(static_cast<double>(k) * n * (n + 1) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  const char* quick = std::getenv("KILN_BENCH_QUICK");
  const int64_t div = quick && std::atoi(quick) != 0 ? kiln::workloads::kQuickDivisor : 1;
  for (int64_t n : {4000, 8000}) {
    benchmark::RegisterBenchmark("BM_GemmOneOpenBlasCall", BM_GemmOneOpenBlasCall)
        ->Args({n / div})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_GemmKilnChunked", BM_GemmKilnChunked)
        ->Args({n / div, n / 4 / div})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (int64_t n : {10, 37, 100, 256}) {
    for (auto* f : {&BM_GramKiln, &BM_GramOpenBlasSyrk})
      benchmark::RegisterBenchmark(f == &BM_GramKiln ? "BM_GramKiln" : "BM_GramOpenBlasSyrk", f)
          ->Args({n, 5242 / div})
          ->Unit(benchmark::kMicrosecond);
  }
  for (int64_t n : {100, 400})
    benchmark::RegisterBenchmark("BM_GramProductKiln", BM_GramProductKiln)
        ->Args({200000 / div, n})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  return true;
}();

}  // namespace
