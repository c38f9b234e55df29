// The backend registry: the one file that knows every backend.
#include "codegen/backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

#include "codegen/cpu/jit.hpp"
#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/interp/interp.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln::backend {

Backend& backend_for(Device d) {
  d = resolve_device(d);
  switch (d) {
    case Device::Cpu: {
      static Backend* cpu = cpu::make_backend().release();  // lives for the process
      return *cpu;
    }
    case Device::Interp: {
      static Backend* interp = interp::make_backend(cpu::math_mode).release();
      return *interp;
    }
    case Device::CudaEmu: {
      static Backend* emu = cuda::make_emu_backend().release();
      return *emu;
    }
    case Device::Cuda: {
      static Backend* gpu = cuda::make_device_backend().release();  // throws without a GPU
      return *gpu;
    }
    case Device::Default:
      break;
  }
  throw InternalError(std::string("backend_for: no backend for device ") + device_name(d));
}

namespace {
std::mutex g_fallbacks_mu;
std::vector<std::string> g_fallbacks;
}  // namespace

void note_host_fallback(Device device, const std::string& call, const std::string& why) {
  std::string msg = std::string("device ") + device_name(device) + ": " + call +
                    " calls run on the host, on copies of their operands: " + why;
  if (device == Device::Cuda && flags().cuda_strict)
    throw Error(msg + " (KILN_CUDA_STRICT=1 forbids it; KILN_CUDA_LIB_DIR names where the " +
                "library is)");
  std::lock_guard<std::mutex> lock(g_fallbacks_mu);
  for (const auto& m : g_fallbacks)
    if (m == msg) return;
  g_fallbacks.push_back(msg);
  std::fprintf(stderr, "kiln: warning: %s\n", msg.c_str());
}

namespace {
std::mutex g_times_mu;
std::map<std::string, KernelTime> g_times, g_host_times;

void add_time(std::map<std::string, KernelTime>& m, const std::string& name, double seconds,
              double bytes) {
  std::lock_guard<std::mutex> lock(g_times_mu);
  KernelTime& t = m[name];
  t.kernel = name;
  ++t.launches;
  t.seconds += seconds;
  t.bytes += bytes;
}

std::vector<KernelTime> longest_first(const std::map<std::string, KernelTime>& m) {
  std::vector<KernelTime> out;
  {
    std::lock_guard<std::mutex> lock(g_times_mu);
    for (const auto& [name, t] : m) out.push_back(t);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  return out;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void add_kernel_time(const std::string& kernel, double seconds, double bytes) {
  add_time(g_times, kernel, seconds, bytes);
}
std::vector<KernelTime> kernel_times() { return longest_first(g_times); }

void add_host_time(const std::string& phase, double seconds) {
  add_time(g_host_times, phase, seconds, 0);
}
std::vector<KernelTime> host_times() { return longest_first(g_host_times); }

void reset_kernel_times() {
  std::lock_guard<std::mutex> lock(g_times_mu);
  g_times.clear();
  g_host_times.clear();
}

HostTimer::HostTimer(const char* phase) : phase_(flags().cuda_profile ? phase : nullptr) {
  if (phase_) start_ns_ = now_ns();
}

HostTimer::~HostTimer() {
  if (!phase_) return;
  try {
    add_host_time(phase_, static_cast<double>(now_ns() - start_ns_) * 1e-9);
  } catch (...) {  // out of memory for the map's entry: the figure is lost, nothing else
  }
}

std::vector<std::string> host_fallbacks() {
  std::lock_guard<std::mutex> lock(g_fallbacks_mu);
  return g_fallbacks;
}

}  // namespace kiln::backend
