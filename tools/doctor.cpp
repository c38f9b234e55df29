// kiln doctor: what this machine gives Kiln, then a few small computations on a device checked
// against a reference, stopping at the first that fails (tools/doctor.hpp).
#include "tools/doctor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "codegen/cuda/nvrtc.hpp"
#include "codegen/library.hpp"
#include "kiln/kiln.hpp"
#include "runtime/distributed.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln::doctor {

namespace {

ComputeOptions on(Device d) {
  ComputeOptions o;
  o.device = d;
  o.progress = false;
  return o;
}

// "" when a and b hold the same bits; else where and how they differ.
std::string bit_difference(const NDArray& a, const NDArray& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return "dtype or shape differ";
  const size_t bytes = static_cast<size_t>(a.size()) * dtype_size(a.dtype());
  if (std::memcmp(a.data(), b.data(), bytes) == 0) return "";
  for (int64_t k = 0; k < a.size(); ++k)
    if (std::memcmp(static_cast<const char*>(a.data()) + k * dtype_size(a.dtype()),
                    static_cast<const char*>(b.data()) + k * dtype_size(b.dtype()),
                    dtype_size(a.dtype())) != 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: %.17g, expected %.17g",
                    static_cast<long long>(k), a.at(k), b.at(k));
      return buf;
    }
  return "";
}

// "" when every element of a is within rtol of b's (relative to b's largest magnitude).
std::string near_difference(const NDArray& a, const NDArray& b, double rtol) {
  if (a.shape() != b.shape()) return "shapes differ";
  double scale = 0;
  for (int64_t k = 0; k < b.size(); ++k) scale = std::max(scale, std::fabs(b.at(k)));
  for (int64_t k = 0; k < a.size(); ++k)
    if (!(std::fabs(a.at(k) - b.at(k)) <= rtol * std::max(scale, 1e-300))) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: %.17g, expected %.17g (rtol %g)",
                    static_cast<long long>(k), a.at(k), b.at(k), rtol);
      return buf;
    }
  return "";
}

NDArray abs_of(const NDArray& a) { return compute({abs(asarray(a))}, on(Device::Cpu))[0]; }

struct Check {
  const char* name;
  std::function<std::string()> run;  // "" passed, else what failed
};

}  // namespace

int run(Device device) {
  device = resolve_device(device);
  std::printf("kiln doctor --device %s\n", device_name(device));
  std::printf("host       %s, %u hardware threads\n", compile_target().c_str(),
              std::thread::hardware_concurrency());
  const library::BlasInfo& blas = library::blas_info();
  std::printf("blas       %s; core %s%s\n", blas.config.c_str(), blas.core.c_str(),
              blas.generic ? " (generic: this CPU is not recognized, products run slow; "
                             "OPENBLAS_CORETYPE chooses the kernels)"
                           : "");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (flags().threads > 0)
    std::printf("threads    %d workers (KILN_THREADS; %u hardware threads)", flags().threads,
                cores);
  else
    std::printf("threads    %u workers (one per hardware thread; KILN_THREADS sets it)", cores);
  std::printf(
      "; BLAS: one thread per call inside blocks, the run's workers for a call that runs "
      "alone\n");
  std::printf("cache      %s\n", flags().cache_dir.empty() ? "off (KILN_CACHE_DIR is empty)"
                                                           : flags().cache_dir.c_str());
  if (distributed::active()) {
    // Each rank's hardware threads, gathered (a collective: every rank's doctor runs it).
    std::vector<int64_t> threads = dist::allgather(std::thread::hardware_concurrency());
    std::string per_rank;
    for (int64_t t : threads) per_rank += (per_rank.empty() ? "" : " ") + std::to_string(t);
    std::printf(
        "mpi        %s (%s); %d ranks, rank 0 on %s; hardware threads per rank: %s; "
        "block b of each kernel on rank b %% %d\n",
        distributed::library().c_str(), dist::plugin_path().c_str(), distributed::size(),
        distributed::host().c_str(), per_rank.c_str(), distributed::size());
    if (device == Device::Cuda || device == Device::CudaEmu) {  // one device per rank: which
      int ordinal = -1;
      try {
        ordinal = device_ordinal(device);
      } catch (const Error&) {  // (no GPU there: said below)
      }
      std::vector<int64_t> ordinals = dist::allgather(ordinal + 1);  // (collectives: >= 0)
      std::string list;
      for (size_t r = 0; r < ordinals.size(); ++r)
        list += (r ? ", rank " : "rank ") + std::to_string(r) + " " +
                (ordinals[r] > 0
                     ? std::string(device_name(device)) + ":" + std::to_string(ordinals[r] - 1)
                     : std::string("none"));
      std::printf("devices    one per rank, numbered from the rank's place on its machine: %s\n",
                  list.c_str());
    }
  } else {
    std::printf(
        "mpi        not distributed (under mpirun, or with KILN_MPI=1, each compute's "
        "blocks are spread over the ranks)\n");
  }
  std::fflush(stdout);
  std::string target;
  try {
    target = device_target(device);  // starts the device (a GPU's driver and contexts)
  } catch (const Error& e) {
    std::printf("FAIL device: %s\n", e.what());
    return 1;
  }
  std::printf("device     %s\n", target.c_str());
  // Kernels are compared bit for bit with cuda-emu's on a GPU (the same printed source, run as
  // host C++), elsewhere with the interpreter's within rounding; library calls with the CPU's.
  const bool gpu = device == Device::Cuda;
  const Device ref = gpu ? Device::CudaEmu : Device::Interp;
  auto kernels_agree = [&](const std::vector<Array>& outs) {
    std::vector<NDArray> got = compute(outs, on(device)), want = compute(outs, on(ref));
    for (size_t k = 0; k < outs.size(); ++k) {
      std::string d =
          gpu ? bit_difference(got[k], want[k]) : near_difference(got[k], want[k], 1e-12);
      if (!d.empty()) return "output " + std::to_string(k) + ", " + d;
    }
    return std::string();
  };
  random::Generator rng(2026);
  Array x = rng.uniform(-2, 2, {1000, 1000}, {500, 500});
  std::vector<Check> checks = {
      {"elementwise (sin(x) * 2 + exp(-x) over 1e6 elements)",
       [&] { return kernels_agree({sin(x) * 2 + exp(-x)}); }},
      {"sum of 1e6 elements, rows and columns",
       [&] {
         return kernels_agree({x.sum(), x.sum(std::vector<int>{0}), x.sum(std::vector<int>{1})});
       }},
      {"long rows by a warp and by a thread block: sums, max, argmin, x - mean(x)",
       [&] {
         Array w = rng.uniform(-2, 2, {600, 2000}, {600, 2000});  // a warp per row
         Array b = rng.uniform(-2, 2, {4, 20000}, {4, 20000});    // a block per row
         return kernels_agree({w.sum(std::vector<int>{1}), w.max(std::vector<int>{1}),
                               b.sum(std::vector<int>{1}), b.argmin(1),
                               b - b.mean(std::vector<int>{1}, true)});
       }},
      {"argmax, whole and along rows",
       [&] {
         return kernels_agree({x.argmax(), x.argmax(1)});
       }},
      {"dgemm 64 x 64 against the CPU",
       [&] {
         Array a = rng.uniform(-1, 1, {64, 64}), b = rng.uniform(-1, 1, {64, 64});
         return near_difference(compute({matmul(a, b)}, on(device))[0],
                                compute({matmul(a, b)}, on(Device::Cpu))[0], 1e-13);
       }},
      {"Gram X.T @ X (4000 x 64 in 4 blocks) against the CPU",
       [&] {
         Array a = rng.normal(0, 1, {4000, 64}, {1000, 64});
         return near_difference(compute({matmul(a.T(), a)}, on(device))[0],
                                compute({matmul(a.T(), a)}, on(Device::Cpu))[0], 1e-12);
       }},
      {"QR (geqrf, TSQR of 400 x 20 in 4 blocks): |R| against the CPU",
       [&] {
         Array a = rng.normal(0, 1, {400, 20}, {100, 20});
         return near_difference(abs_of(compute({linalg::qr(a).r}, on(device))[0]),
                                abs_of(compute({linalg::qr(a).r}, on(Device::Cpu))[0]), 1e-10);
       }},
      {"SVD (gesvd of 400 x 20): singular values against the CPU",
       [&] {
         Array a = rng.normal(0, 1, {400, 20}, {100, 20});
         return near_difference(compute({linalg::svd(a).s}, on(device))[0],
                                compute({linalg::svd(a).s}, on(Device::Cpu))[0], 1e-12);
       }},
      {"cuRAND: 15 normals against its host generator (within 16 ulp of max(|x|, 1))",
       [&]() -> std::string {
         std::string why;
         if (!library::curand_available(&why)) return "skip: " + why;
         Array n = random::Generator(42, random::Engine::Curand).standard_normal({15});
         NDArray got = compute({n}, on(device))[0], want = compute({n}, on(Device::Cpu))[0];
         for (int64_t k = 0; k < 15; ++k)
           // Box-Muller's error is absolute: relative ulps fail near 0 (55 ulp at -0.056 on
           // the H100, 1.7 ulp of 1).
           if (std::fabs(got.at(k) - want.at(k)) >
               16 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::fabs(want.at(k)))) {
             char buf[120];
             std::snprintf(buf, sizeof buf, "element %lld: %.17g, host generator %.17g",
                           static_cast<long long>(k), got.at(k), want.at(k));
             return buf;
           }
         return "";
       }},
  };
  for (const Check& c : checks) {
    auto t0 = std::chrono::steady_clock::now();
    std::string failed;
    try {
      failed = c.run();
    } catch (const Error& e) {
      failed = e.what();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (failed.rfind("skip: ", 0) == 0) {
      std::printf("skip %s: %s\n", c.name, failed.c_str() + 6);
    } else if (!failed.empty()) {
      std::printf("FAIL %s: %s\n", c.name, failed.c_str());
      return 1;
    } else {
      std::printf("ok   %s (%.3f s)\n", c.name, s);
    }
    std::fflush(stdout);
  }
  for (const auto& [stem, path] : cuda::loaded_toolkit_libraries())
    std::printf("library    %s: %s\n", stem.c_str(), path.c_str());
  for (const auto& f : host_fallbacks()) std::printf("fallback   %s\n", f.c_str());
  std::printf("all checks passed\n");
  return 0;
}

}  // namespace kiln::doctor
