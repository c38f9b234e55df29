// The GPU backend: the CUDA driver API loaded with dlopen (libcuda.so.1), so one binary runs on
// machines with and without a GPU. "No GPU" is decided by cuInit and cuDeviceGetCount, not by
// dlopen alone: the toolkit's stub libcuda loads and then cuInit fails.
//
// With a GPU: each device's primary context and one non-blocking stream, its queue (backend.hpp,
// DeviceMemory): every launch, copy, memset and cuBLAS / cuSOLVER / cuRAND call for the device
// goes on it, so they run in the order queued while the host goes on. Kernels are printed for the
// device (Flavor::Device), compiled by NVRTC for its architecture (cubins cached, nvrtc.hpp) and
// loaded into each device's context when first launched there; device memory through
// cuMemAllocAsync / cuMemFreeAsync on the device's stream where it has memory pools, else
// cuMemAlloc / cuMemFree (the runtime pools it too). A launch passes the block's I, F and P
// arrays by value (one __grid_constant__ parameter, copied by cuLaunchKernel: nothing to copy or
// wait for), one driver call per launch; kernels raise errors into the device's status word, which
// synchronize() reads. The host waits only where it must: copies to the host, LAPACK's results
// (cuSOLVER's info), freeing memory without memory pools, and synchronize() at the end of a run.
// Run on an H100 (sessions 22 and 24: the test suite, `kiln doctor --device cuda`, the workloads;
// bench/RESULTS.md, GPU section).
#include <dlfcn.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_printer.hpp"
#include "codegen/cuda/curand_api.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/solver.hpp"
#include "codegen/kernel_support.hpp"
#include "codegen/library.hpp"
#include "codegen/vector_math.hpp"
#include "ir/linalg.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/flags.hpp"
#include "support/process.hpp"

namespace kiln::cuda {

namespace {

// The driver API's types, as cuda.h declares them (cuda.h is not needed to build).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_...
constexpr int kAttrMultiprocessors = 16;                       // ..._MULTIPROCESSOR_COUNT
constexpr int kAttrMemoryPools = 115;                          // ..._MEMORY_POOLS_SUPPORTED
constexpr int kPoolReleaseThreshold = 4;                       // CU_MEMPOOL_ATTR_RELEASE_...
constexpr CUresult kOutOfMemory = 2;                           // CUDA_ERROR_OUT_OF_MEMORY
constexpr unsigned kStreamNonBlocking = 1;                     // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;                    // CU_EVENT_DISABLE_TIMING
// cuLaunchKernel's limit on a kernel's parameters (CUDA 12.1 and later, Volta and later).
constexpr size_t kMaxParamBytes = 32764;

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx)(CUcontext*, CUdevice) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_sync)(CUstream) = nullptr;
  CUresult (*stream_wait)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  // The asynchronous copies and memsets: every one goes on a device's stream.
  CUresult (*htod)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*dtoh)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream) = nullptr;
  CUresult (*memset8)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*memset2d8)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream) = nullptr;
  CUresult (*memset32)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*memset2d32)(CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream) = nullptr;
  CUresult (*load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**) = nullptr;
  // Optional (kiln doctor, the target's description).
  CUresult (*driver_version)(int*) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*elapsed)(float*, CUevent, CUevent) = nullptr;  // KILN_CUDA_PROFILE
  // The stream-ordered allocator (CUDA 11.2 and later), used where the device supports it.
  CUresult (*mem_alloc_async)(CUdeviceptr*, size_t, CUstream) = nullptr;
  CUresult (*mem_free_async)(CUdeviceptr, CUstream) = nullptr;
  CUresult (*default_pool)(CUmemoryPool*, CUdevice) = nullptr;
  CUresult (*pool_set)(CUmemoryPool, int, void*) = nullptr;
  CUresult (*occupancy)(int*, CUfunction, int, size_t) = nullptr;  // grids sized to the device
  std::string why;                                                 // empty: a driver with devices
  int devices = 0;
};

const Driver& driver() {
  static Driver d = [] {
    Driver x;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      x.why = "no CUDA driver (libcuda.so.1 cannot be loaded)";
      return x;
    }
    if (!bind(h, "cuInit", &x.init) || !bind(h, "cuDeviceGetCount", &x.device_count)) {
      x.why = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
      return x;
    }
    bind(h, "cuGetErrorString", &x.error_string);
    bind(h, "cuDriverGetVersion", &x.driver_version);
    bind(h, "cuDeviceGetName", &x.device_name);
    bind(h, "cuDeviceTotalMem_v2", &x.total_mem);
    if (!bind(h, "cuEventElapsedTime_v2", &x.elapsed)) bind(h, "cuEventElapsedTime", &x.elapsed);
    bind(h, "cuOccupancyMaxActiveBlocksPerMultiprocessor", &x.occupancy);
    if (!bind(h, "cuMemAllocAsync", &x.mem_alloc_async) ||
        !bind(h, "cuMemFreeAsync", &x.mem_free_async) ||
        !bind(h, "cuDeviceGetDefaultMemPool", &x.default_pool) ||
        !bind(h, "cuMemPoolSetAttribute", &x.pool_set))
      x.mem_alloc_async = nullptr;  // all four or none
    CUresult rc = x.init(0);
    if (rc != 0) {
      const char* s = nullptr;
      if (x.error_string) x.error_string(rc, &s);
      x.why = "cuInit failed (" + std::to_string(rc) + (s ? std::string(": ") + s : "") + ")";
      return x;
    }
    if (x.device_count(&x.devices) != 0 || x.devices <= 0) {
      x.why = "no CUDA device is present";
      return x;
    }
    bool ok =
        bind(h, "cuDeviceGet", &x.device_get) && bind(h, "cuDeviceGetAttribute", &x.attribute) &&
        bind(h, "cuDevicePrimaryCtxRetain", &x.primary_ctx) &&
        bind(h, "cuCtxSetCurrent", &x.set_current) && bind(h, "cuMemAlloc_v2", &x.mem_alloc) &&
        bind(h, "cuMemFree_v2", &x.mem_free) && bind(h, "cuStreamCreate", &x.stream_create) &&
        bind(h, "cuStreamSynchronize", &x.stream_sync) &&
        bind(h, "cuStreamWaitEvent", &x.stream_wait) && bind(h, "cuEventCreate", &x.event_create) &&
        bind(h, "cuEventRecord", &x.event_record) &&
        bind(h, "cuEventDestroy_v2", &x.event_destroy) &&
        bind(h, "cuMemcpyHtoDAsync_v2", &x.htod) && bind(h, "cuMemcpyDtoHAsync_v2", &x.dtoh) &&
        bind(h, "cuMemcpyDtoDAsync_v2", &x.dtod) && bind(h, "cuMemcpyPeerAsync", &x.peer) &&
        bind(h, "cuMemsetD8Async", &x.memset8) && bind(h, "cuMemsetD2D8Async", &x.memset2d8) &&
        bind(h, "cuMemsetD32Async", &x.memset32) && bind(h, "cuMemsetD2D32Async", &x.memset2d32) &&
        bind(h, "cuModuleLoadData", &x.load_data) &&
        bind(h, "cuModuleGetFunction", &x.get_function) && bind(h, "cuLaunchKernel", &x.launch);
    if (!ok) x.why = "libcuda.so.1 lacks a function Kiln calls (a driver older than CUDA 8?)";
    return x;
  }();
  return d;
}

// Throws kiln::Error naming the call and the driver's message unless rc is success.
void check(CUresult rc, const char* call) {
  if (rc == 0) return;
  const char* s = nullptr;
  if (driver().error_string) driver().error_string(rc, &s);
  throw Error(std::string("device cuda: ") + call + " failed (" + std::to_string(rc) +
              (s ? std::string(": ") + s : "") + ")");
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// KILN_CUDA_SYNC=1: waits for `stream` after a launch or copy, so that a fault is reported by
// the call that caused it (asynchronous errors otherwise surface at a later call). A kernel's
// fault names it and keeps its source in a file of the temporary directory.
void sync_check(CUstream stream, const char* what, const std::string* source = nullptr) {
  if (!flags().cuda_sync) return;
  CUresult rc = driver().stream_sync(stream);
  if (rc == 0) return;
  std::string kept;
  if (source) {
    static std::atomic<int> n{0};
    const char* tmp = std::getenv("TMPDIR");
    kept = std::string(tmp && tmp[0] == '/' ? tmp : "/tmp") + "/kiln-fault-" +
           std::to_string(getpid()) + "-" + std::to_string(n++) + ".cu";
    try {
      files::write(kept, *source, "device cuda: cannot keep the faulting kernel's source");
      kept = "; its source: " + kept;
    } catch (const Error& e) {
      kept = std::string("; ") + e.what();
    }
  }
  const char* s = nullptr;
  if (driver().error_string) driver().error_string(rc, &s);
  throw Error(std::string("device cuda: ") + what + " failed on the device (" + std::to_string(rc) +
              (s ? std::string(": ") + s : "") + ", KILN_CUDA_SYNC=1)" + kept);
}

// The devices: primary contexts (made current on the calling thread per call), architectures,
// streams (one per device: its queue) and status words (the errors kernels raised).
class Gpus final : public backend::DeviceMemory {
 public:
  Gpus() {
    const Driver& d = driver();
    // Device k of a run is the machine's (base + k) mod devices: ranks on one machine start on
    // different GPUs (backend.hpp, DeviceMemory::ordinal).
    const int base = d.devices > 0 ? process::launcher_local_rank() % d.devices : 0;
    for (int k = 0; k < d.devices; ++k) {
      CUdevice dev = 0;
      const int ordinal = (base + k) % d.devices;
      check(d.device_get(&dev, ordinal), "cuDeviceGet");
      int major = 0, minor = 0;
      check(d.attribute(&major, kAttrComputeMajor, dev), "cuDeviceGetAttribute");
      check(d.attribute(&minor, kAttrComputeMinor, dev), "cuDeviceGetAttribute");
      PerGpu g;
      g.ordinal = ordinal;
      check(d.primary_ctx(&g.ctx, dev), "cuDevicePrimaryCtxRetain");
      g.arch = major * 10 + minor;
      if (d.attribute(&g.sms, kAttrMultiprocessors, dev) != 0) g.sms = 0;
      if (k == 0) describe(dev);
      check(d.set_current(g.ctx), "cuCtxSetCurrent");
      check(d.stream_create(&g.stream, kStreamNonBlocking), "cuStreamCreate");
      // Device memory from the stream-ordered allocator where the device has memory pools: a
      // free is queued on the stream (after the work that may still use the memory) instead of
      // waiting for the stream; the default pool keeps up to 1 GiB of freed memory.
      int pools = 0;
      CUmemoryPool pool = nullptr;
      if (d.mem_alloc_async && d.attribute(&pools, kAttrMemoryPools, dev) == 0 && pools == 1 &&
          d.default_pool(&pool, dev) == 0) {
        uint64_t keep = uint64_t{1} << 30;
        g.async_alloc = d.pool_set(pool, kPoolReleaseThreshold, &keep) == 0;
      }
      check(d.mem_alloc(&g.status, sizeof(unsigned)), "cuMemAlloc");
      check(d.memset8(g.status, 0, sizeof(unsigned), g.stream), "cuMemsetD8Async");
      check(d.stream_sync(g.stream), "cuStreamSynchronize");
      gpus_.push_back(g);
    }
  }
  int count() const override { return static_cast<int>(gpus_.size()); }
  int max_count() const override { return count(); }
  int ordinal(int device) const override { return gpus_.at(static_cast<size_t>(device)).ordinal; }
  void* alloc(int device, size_t bytes) override {
    backend::HostTimer timer("cuda: cuMemAlloc(Async)");
    use(device);
    CUdeviceptr p = 0;
    const PerGpu& g = gpus_.at(static_cast<size_t>(device));
    CUresult rc = g.async_alloc ? driver().mem_alloc_async(&p, std::max<size_t>(bytes, 1), g.stream)
                                : driver().mem_alloc(&p, std::max<size_t>(bytes, 1));
    if (rc == kOutOfMemory)
      throw Error("device cuda: device " + std::to_string(device) +
                      " is out of memory allocating " + std::to_string(bytes) + " bytes",
                  ErrorKind::Memory);
    check(rc, g.async_alloc ? "cuMemAllocAsync" : "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  // After the work queued on the device's stream, which may still use the memory: queued there
  // (cuMemFreeAsync), or else waiting for the stream. Called from deleters, so it never throws: a
  // failure is kept and raised by the next synchronize() (keep_error).
  void free(int device, void* p, size_t) override {
    backend::HostTimer timer("cuda: free (cuMemFreeAsync, or cuStreamSynchronize and cuMemFree)");
    const Driver& d = driver();
    keep_error(d.set_current(context(device)), "cuCtxSetCurrent (freeing device memory)");
    if (gpus_.at(static_cast<size_t>(device)).async_alloc) {
      keep_error(d.mem_free_async(dptr(p), stream(device)), "cuMemFreeAsync");
      return;
    }
    keep_error(d.stream_sync(stream(device)), "cuStreamSynchronize (before freeing device memory)");
    keep_error(d.mem_free(dptr(p)), "cuMemFree");
  }
  // A failed call in a cleanup path (which cannot throw): the first one is kept, with the
  // driver's message, and raised by the next synchronize() of any device. After a kernel's fault
  // every later call fails too, so the first names the nearest call to the fault.
  void keep_error(CUresult rc, const char* call) noexcept {
    if (rc == 0) return;
    std::lock_guard<std::mutex> lock(kept_mu_);
    if (!kept_.empty()) return;
    try {
      const char* s = nullptr;
      if (driver().error_string) driver().error_string(rc, &s);
      kept_ = std::string("device cuda: ") + call + " failed (" + std::to_string(rc) +
              (s ? std::string(": ") + s : "") + ")";
    } catch (...) {  // out of memory for the message: the code alone
      kept_ = "device cuda: a cleanup call failed";
    }
  }
  // From pageable memory the driver stages `src` (or waits) before returning (CUDA's "API
  // synchronization behavior"), so the host may reuse it at once.
  void to_device(int device, void* dst, const void* src, size_t bytes) override {
    backend::HostTimer timer("cuda: copy to the device (cuMemcpyHtoDAsync)");
    use(device);
    check(driver().htod(dptr(dst), src, bytes, stream(device)), "cuMemcpyHtoDAsync");
    sync_check(stream(device), "a copy to the device (cuMemcpyHtoDAsync)");
  }
  // Memsets on the stream: an 8-byte pattern as one 32-bit memset where its halves are equal
  // (0.0, -1), else its low and high words as two 2-D memsets of one word per 8-byte row.
  void fill(int device, void* dst, uint64_t pattern, int bytes, size_t count) override {
    if (count == 0) return;
    use(device);
    const Driver& d = driver();
    const CUstream s = stream(device);
    const auto lo = static_cast<unsigned>(pattern), hi = static_cast<unsigned>(pattern >> 32);
    if (bytes == 1) {
      check(d.memset8(dptr(dst), static_cast<unsigned char>(pattern), count, s), "cuMemsetD8Async");
    } else if (bytes == 4 || (bytes == 8 && lo == hi)) {
      check(d.memset32(dptr(dst), lo, count * static_cast<size_t>(bytes) / 4, s),
            "cuMemsetD32Async");
    } else {
      check(d.memset2d32(dptr(dst), 8, lo, 1, count, s), "cuMemsetD2D32Async");
      check(d.memset2d32(dptr(dst) + 4, 8, hi, 1, count, s), "cuMemsetD2D32Async");
    }
    sync_check(s, "a fill on the device (cuMemsetD32Async)");
  }
  void to_host(int device, void* dst, const void* src, size_t bytes) override {
    backend::HostTimer timer("cuda: copy to the host (waits for the stream)");
    use(device);
    check(driver().dtoh(dst, dptr(src), bytes, stream(device)), "cuMemcpyDtoHAsync");
    check(driver().stream_sync(stream(device)), "cuStreamSynchronize");
  }
  // On the destination's stream, after an event of the source's stream; the source's stream then
  // waits for the copy, so its later work cannot overwrite `src` while the copy reads it.
  void between(int to, void* dst, int from, const void* src, size_t bytes) override {
    order(from, to);
    use(to);
    check(driver().peer(dptr(dst), context(to), dptr(src), context(from), bytes, stream(to)),
          "cuMemcpyPeerAsync");
    sync_check(stream(to), "a copy between devices (cuMemcpyPeerAsync)");
    order(to, from);
  }
  void synchronize(int device) override {
    backend::HostTimer timer("cuda: synchronize");
    {
      std::lock_guard<std::mutex> lock(kept_mu_);
      if (!kept_.empty()) {
        std::string e = std::move(kept_);
        kept_.clear();
        throw Error(e + ", in a cleanup before this synchronization");
      }
    }
    use(device);
    CUstream s = stream(device);
    check(driver().stream_sync(s), "cuStreamSynchronize");
    read_kernel_times(device);
    unsigned word = 0;
    const CUdeviceptr word_at = status(device);
    check(driver().dtoh(&word, word_at, sizeof word, s), "cuMemcpyDtoHAsync (the kernels' status)");
    check(driver().stream_sync(s), "cuStreamSynchronize");
    if (word == 0) return;
    check(driver().memset8(word_at, 0, sizeof word, s), "cuMemsetD8Async");
    check(driver().stream_sync(s), "cuStreamSynchronize");
    throw Error(kir::negative_power_message());
  }

  void use(int device) const { check(driver().set_current(context(device)), "cuCtxSetCurrent"); }
  // Device 0 for people: "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.2 GiB; driver API 13.0".
  const std::string& description() const { return description_; }
  CUcontext context(int device) const { return gpus_.at(device).ctx; }
  int multiprocessors(int device) const { return gpus_.at(static_cast<size_t>(device)).sms; }
  int arch(int device) const { return gpus_.at(device).arch; }
  CUstream stream(int device) const { return gpus_.at(device).stream; }
  // The word kernels on `device` raise errors into (kiln_raise); synchronize() reads it.
  CUdeviceptr status(int device) const { return gpus_.at(device).status; }

 private:
  struct PerGpu {
    CUcontext ctx = nullptr;
    int arch = 0;
    bool async_alloc = false;  // cuMemAllocAsync / cuMemFreeAsync on `stream`
    int sms = 0;               // multiprocessors (0: unknown)
    CUstream stream = nullptr;
    CUdeviceptr status = 0;
    int ordinal = 0;  // the machine's number for it (cuDeviceGet)
  };
  void describe(CUdevice dev) {
    const Driver& d = driver();
    char name[256] = {0};
    if (d.device_name && d.device_name(name, sizeof name - 1, dev) == 0) description_ = name;
    int major = 0, minor = 0, sms = 0;
    d.attribute(&major, kAttrComputeMajor, dev);
    d.attribute(&minor, kAttrComputeMinor, dev);
    description_ += (description_.empty() ? "sm_" : ", sm_") + std::to_string(major * 10 + minor);
    if (d.attribute(&sms, kAttrMultiprocessors, dev) == 0)
      description_ += ", " + std::to_string(sms) + " SMs";
    size_t bytes = 0;
    if (d.total_mem && d.total_mem(&bytes, dev) == 0) {
      char gib[32];
      std::snprintf(gib, sizeof gib, ", %.1f GiB", bytes / 1073741824.0);
      description_ += gib;
    }
    int v = 0;
    if (d.driver_version && d.driver_version(&v) == 0)
      description_ +=
          "; driver API " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }

  // KILN_CUDA_PROFILE: a launch's events, read once its device's stream has run them.
  struct Timed {
    std::string label;
    CUevent start = nullptr, stop = nullptr;
    int64_t bytes = 0;
  };

 public:
  // Times the launches queued between `start` and `stop` on `device`'s stream as `label`'s.
  void time_launch(int device, std::string label, CUevent start, CUevent stop, int64_t bytes) {
    std::lock_guard<std::mutex> lock(timed_mu_);
    timed_[device].push_back({std::move(label), start, stop, bytes});
  }

 private:
  void read_kernel_times(int device) {
    std::vector<Timed> done;
    {
      std::lock_guard<std::mutex> lock(timed_mu_);
      done.swap(timed_[device]);
    }
    const Driver& d = driver();
    CUresult failed = 0;  // every pair's events destroyed first, then the first failure raised
    for (const Timed& t : done) {
      float ms = 0;
      CUresult rc = d.elapsed(&ms, t.start, t.stop);
      d.event_destroy(t.start);
      d.event_destroy(t.stop);
      if (rc == 0)
        backend::add_kernel_time(t.label, ms / 1e3, static_cast<double>(t.bytes));
      else if (failed == 0)
        failed = rc;
    }
    check(failed, "cuEventElapsedTime (KILN_CUDA_PROFILE)");
  }

  std::mutex timed_mu_;
  std::map<int, std::vector<Timed>> timed_;
  std::string description_;
  std::mutex kept_mu_;
  std::string kept_;  // keep_error's
  // Work queued on `then` from now on waits for what is queued on `first` so far.
  void order(int first, int then) const {
    if (first == then) return;
    use(first);
    CUevent e = nullptr;
    check(driver().event_create(&e, kEventDisableTiming), "cuEventCreate");
    check(driver().event_record(e, stream(first)), "cuEventRecord");
    CUresult rc = driver().stream_wait(stream(then), e, 0);
    driver().event_destroy(e);  // released once it completes
    check(rc, "cuStreamWaitEvent");
  }

  std::vector<PerGpu> gpus_;
};

// A __global__ function of a source: compiled by NVRTC for each device's architecture and loaded
// into its context at the first use there (modules stay loaded for the process).
class DeviceFunction {
 public:
  DeviceFunction(std::string source, const char* name, Gpus& gpus)
      : source_(std::move(source)), name_(name), gpus_(gpus) {}
  // The constructor's function of the source's module, which is compiled and loaded once per
  // device. Leaves the device current.
  CUfunction get(int device) const {
    gpus_.use(device);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = fns_.find(device); it != fns_.end()) return it->second;
    return fns_[device] = function(device, name_);
  }
  // Another function of the same module (a split kernel's kiln_fold, kiln_rows_kernel).
  CUfunction get(int device, const char* name) const {
    gpus_.use(device);
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(device, std::string(name));
    if (auto it = others_.find(key); it != others_.end()) return it->second;
    return others_[key] = function(device, name);
  }

 private:
  CUfunction function(int device, const char* name) const {  // mu_ held
    CUmodule& mod = modules_[device];
    if (!mod) {
      int arch = gpus_.arch(device);
      NvrtcOutput out = nvrtc_cubin(source_, arch, "kiln_kernel.cu");
      if (!out.ok)
        throw InternalError("device cuda: NVRTC rejects a kernel for sm_" + std::to_string(arch) +
                            ":\n" + out.log);
      check(driver().load_data(&mod, out.cubin.data()), "cuModuleLoadData");
    }
    CUfunction fn = nullptr;
    check(driver().get_function(&fn, mod, name), "cuModuleGetFunction");
    return fn;
  }

  std::string source_;
  const char* name_;
  Gpus& gpus_;
  mutable std::mutex mu_;
  mutable std::unordered_map<int, CUmodule> modules_;
  mutable std::unordered_map<int, CUfunction> fns_;
  mutable std::map<std::pair<int, std::string>, CUfunction> others_;
};

// Queues a grid-stride kernel over `items` elements on a stream: blocks of 256 threads, at most
// 1024 blocks. `what` names it in errors.
void launch_grid_stride(CUfunction fn, int64_t items, void** params, CUstream stream,
                        const char* what) {
  auto grid = static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, 1024));
  check(driver().launch(fn, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr), what);
  sync_check(stream, what);
}

// Folds partials on a GPU: one launch, grid-stride, on the device's stream.
class GpuCombiner final : public backend::Combiner {
 public:
  GpuCombiner(std::string source, Gpus& gpus)
      : gpus_(gpus), function_(std::move(source), "kiln_combine", gpus) {}
  void combine(int device, void* acc, const void* in, int64_t n,
               size_t index_offset) const override {
    if (n <= 0) return;
    CUfunction fn = function_.get(device);
    long long count = n, offset = static_cast<long long>(index_offset);
    CUdeviceptr a = dptr(acc), b = dptr(in);
    void* params[] = {&count, &a, &b, &offset};
    launch_grid_stride(fn, n, params, gpus_.stream(device), "cuLaunchKernel (combine)");
  }

 private:
  Gpus& gpus_;
  DeviceFunction function_;
};

// cuBLAS (libcublas, loaded with dlopen like the driver; its types as cublas_api.h declares
// them). Entry points with 32-bit dimensions, which CUDA 12 and 13 both export.
using CublasHandle = struct cublasContext*;
constexpr int kOpN = 0, kOpT = 1, kFillUpper = 1;  // CUBLAS_OP_N, CUBLAS_OP_T, ..._FILL_MODE_UPPER

template <class T>
struct CublasFns {
  int (*gemm)(CublasHandle, int, int, int, int, int, const T*, const T*, int, const T*, int,
              const T*, T*, int) = nullptr;
  int (*geam)(CublasHandle, int, int, int, int, const T*, const T*, int, const T*, const T*, int,
              T*, int) = nullptr;
  int (*syrk)(CublasHandle, int, int, int, int, const T*, const T*, int, const T*, T*,
              int) = nullptr;
};

struct Cublas {
  int (*create)(CublasHandle*) = nullptr;
  int (*set_stream)(CublasHandle, CUstream) = nullptr;
  CublasFns<double> d;
  CublasFns<float> s;
  std::string why;  // empty: loaded
};

const Cublas& cublas() {
  static Cublas c = [] {
    Cublas x;
    void* h = open_toolkit_library("libcublas", &x.why);
    if (!h) {
      x.why = "cuBLAS not found (" + x.why + ")";
      return x;
    }
    bool ok = bind(h, "cublasCreate_v2", &x.create) &&
              bind(h, "cublasSetStream_v2", &x.set_stream) &&
              bind(h, "cublasDgemm_v2", &x.d.gemm) && bind(h, "cublasSgemm_v2", &x.s.gemm) &&
              bind(h, "cublasDgeam", &x.d.geam) && bind(h, "cublasSgeam", &x.s.geam) &&
              bind(h, "cublasDsyrk_v2", &x.d.syrk) && bind(h, "cublasSsyrk_v2", &x.s.syrk);
    if (!ok) x.why = "cuBLAS lacks a function Kiln calls";
    return x;
  }();
  return c;
}

void check_cublas(int status, const char* call) {
  if (status != 0)
    throw Error(std::string("device cuda: ") + call + " failed (cuBLAS status " +
                std::to_string(status) + ")");
}

// A cuBLAS handle whose calls go on `stream` (the device current).
CublasHandle cublas_handle(CUstream stream) {
  CublasHandle h = nullptr;
  check_cublas(cublas().create(&h), "cublasCreate");
  check_cublas(cublas().set_stream(h, stream), "cublasSetStream");
  return h;
}

// Copies the lower triangle of a row-major n x n matrix (leading dimension ldc, 8- or 4-byte
// elements) onto its upper one: the mirror of a Gram product that syrk computed one half of.
const char* const kMirrorSource = R"(
template <class T>
__device__ void kiln_mirror(long long n, T* c, long long ldc) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n * n; t += stride) {
    long long i = t / n, j = t - i * n;
    if (i > j) c[j * ldc + i] = c[i * ldc + j];
  }
}
extern "C" __global__ void kiln_mirror8(long long n, unsigned long long* c, long long ldc) {
  kiln_mirror(n, c, ldc);
}
extern "C" __global__ void kiln_mirror4(long long n, unsigned int* c, long long ldc) {
  kiln_mirror(n, c, ldc);
}
)";

// Matrix products on a GPU through cuBLAS, on the device's stream like every launch and copy (so
// they are ordered with them). Row-major C = op(A) op(B) is column-major C^T =
// op(B)^T op(A)^T: the operands swap and the transpose flags stay. A^T A (one operand) is syrk
// into one triangle and a mirror kernel, exactly symmetric as on the CPU. One handle per device,
// calls on it one at a time.
class GpuBlas final : public backend::DeviceBlas {
 public:
  explicit GpuBlas(Gpus& gpus)
      : gpus_(gpus),
        mirror8_(kMirrorSource, "kiln_mirror8", gpus),
        mirror4_(kMirrorSource, "kiln_mirror4", gpus),
        devices_(static_cast<size_t>(gpus.count())) {}

  void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
            const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc,
            bool accumulate) override {
    if (m == 0 || n == 0) return;
    check_dims("GEMM", {m, n, k, lda, ldb, ldc});
    backend::HostTimer timer("cuda: a GEMM call (cuBLAS, queued)");
    PerDevice& d = handle(device);  // makes the device current
    std::lock_guard<std::mutex> lock(d.mu);
    const size_t es = dtype_size(t);
    if (k == 0) {  // an empty sum: zeros, or C unchanged
      if (!accumulate)
        check(driver().memset2d8(dptr(c), static_cast<size_t>(ldc) * es, 0,
                                 static_cast<size_t>(n) * es, static_cast<size_t>(m),
                                 gpus_.stream(device)),
              "cuMemsetD2D8Async");
      return;
    }
    const bool gram = trans_a && !trans_b && a == b && lda == ldb && m == n;
    auto run = [&](auto one, const auto& f) {
      using T = decltype(one);
      const T beta = accumulate ? T(1) : T(0);
      const T* A = static_cast<const T*>(a);
      const T* B = static_cast<const T*>(b);
      T* C = static_cast<T*>(c);
      if (gram) {
        check_cublas(f.syrk(d.handle, kFillUpper, kOpN, int(m), int(k), &one, A, int(lda), &beta, C,
                            int(ldc)),
                     "cublas syrk");
        mirror(device, es, m, c, ldc);
      } else {
        check_cublas(f.gemm(d.handle, trans_b ? kOpT : kOpN, trans_a ? kOpT : kOpN, int(n), int(m),
                            int(k), &one, B, int(ldb), A, int(lda), &beta, C, int(ldc)),
                     "cublas gemm");
      }
    };
    if (t == DType::Float64)
      run(1.0, cublas().d);
    else if (t == DType::Float32)
      run(1.0f, cublas().s);
    else
      throw InternalError("device cuda: GEMM of " + std::string(dtype_name(t)));
  }

  void add_into(int device, DType t, int64_t m, int64_t n, void* c, int64_t ldc,
                const void* p) override {
    if (m == 0 || n == 0) return;
    check_dims("a partial product's sum", {m, n, ldc});
    PerDevice& d = handle(device);
    std::lock_guard<std::mutex> lock(d.mu);
    auto run = [&](auto one, const auto& f) {  // C = 1 C + 1 P, in place (geam allows C == A)
      using T = decltype(one);
      T* C = static_cast<T*>(c);
      check_cublas(f.geam(d.handle, kOpN, kOpN, int(n), int(m), &one, C, int(ldc), &one,
                          static_cast<const T*>(p), int(n), C, int(ldc)),
                   "cublas geam");
    };
    if (t == DType::Float64)
      run(1.0, cublas().d);
    else
      run(1.0f, cublas().s);
  }

  std::string name() const override { return "cuBLAS"; }

 private:
  struct PerDevice {
    std::mutex mu;
    CublasHandle handle = nullptr;
  };

  PerDevice& handle(int device) {
    gpus_.use(device);
    PerDevice& d = devices_.at(static_cast<size_t>(device));
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.handle) d.handle = cublas_handle(gpus_.stream(device));
    return d;
  }

  void mirror(int device, size_t es, int64_t n, void* c, int64_t ldc) const {
    CUfunction fn = (es == 8 ? mirror8_ : mirror4_).get(device);
    long long count = n, ld = ldc;
    CUdeviceptr cp = dptr(c);
    void* params[] = {&count, &cp, &ld};
    launch_grid_stride(fn, n * n, params, gpus_.stream(device), "cuLaunchKernel (Gram mirror)");
  }

  static void check_dims(const char* what, std::initializer_list<int64_t> dims) {
    for (int64_t v : dims)
      if (v > 2147483647)
        throw Error(std::string("device cuda: ") + what +
                    " has a dimension or leading dimension beyond cuBLAS's 32-bit integers (" +
                    std::to_string(v) + ")");
  }

  Gpus& gpus_;
  DeviceFunction mirror8_, mirror4_;
  std::vector<PerDevice> devices_;
};

// cuSOLVER (libcusolver, loaded with dlopen like cuBLAS): its routines bound into the table that
// solver.cpp's calls use (codegen/cuda/solver.hpp).
template <class T>
bool bind_solver(void* h, char p, SolverFns<T>* fn) {
  auto name = [&](const char* routine) { return std::string("cusolverDn") + p + routine; };
  return bind(h, name("geqrf_bufferSize").c_str(), &fn->geqrf_size) &&
         bind(h, name("geqrf").c_str(), &fn->geqrf) &&
         bind(h, name("orgqr_bufferSize").c_str(), &fn->orgqr_size) &&
         bind(h, name("orgqr").c_str(), &fn->orgqr) &&
         bind(h, name("gesvd_bufferSize").c_str(), &fn->gesvd_size) &&
         bind(h, name("gesvd").c_str(), &fn->gesvd) &&
         bind(h, name("potrf_bufferSize").c_str(), &fn->potrf_size) &&
         bind(h, name("potrf").c_str(), &fn->potrf) &&
         bind(h, name("getrf_bufferSize").c_str(), &fn->getrf_size) &&
         bind(h, name("getrf").c_str(), &fn->getrf) && bind(h, name("getrs").c_str(), &fn->getrs) &&
         bind(h, name("syevd_bufferSize").c_str(), &fn->syevd_size) &&
         bind(h, name("syevd").c_str(), &fn->syevd);
}

struct Cusolver {
  int (*create)(SolverHandle*) = nullptr;
  int (*set_stream)(SolverHandle, CUstream) = nullptr;
  SolverFns<double> d;
  SolverFns<float> s;
  std::string why;  // empty: loaded
};

const Cusolver& cusolver() {
  static Cusolver c = [] {
    Cusolver x;
    void* h = open_toolkit_library("libcusolver", &x.why);
    if (!h) {
      x.why = "cuSOLVER not found (" + x.why + ")";
      return x;
    }
    x.why.clear();
    if (!bind(h, "cusolverDnCreate", &x.create) || !bind(h, "cusolverDnSetStream", &x.set_stream) ||
        !bind_solver(h, 'D', &x.d) || !bind_solver(h, 'S', &x.s))
      x.why = "cuSOLVER lacks a function Kiln calls";
    return x;
  }();
  return c;
}

// The strided copy kernel of the GPU's LAPACK calls (SolverDevice::copy).
const char* const kCopySource = R"(
template <class T>
__device__ void kiln_copy(long long rows, long long cols, const T* src, long long ss0,
                          long long ss1, T* dst, long long ds0, long long ds1, int part,
                          int* nonfinite) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < rows * cols;
       t += stride) {
    long long i = t / cols, j = t - i * cols;
    T v = src[i * ss0 + j * ss1];
    if ((part == 1 && j < i) || (part == 2 && j > i)) v = T(0);
    if (nonfinite && !isfinite(v)) *nonfinite = 1;
    dst[i * ds0 + j * ds1] = v;
  }
}
extern "C" __global__ void kiln_copy8(long long rows, long long cols, const double* src,
                                      long long ss0, long long ss1, double* dst, long long ds0,
                                      long long ds1, int part, int* nonfinite) {
  kiln_copy(rows, cols, src, ss0, ss1, dst, ds0, ds1, part, nonfinite);
}
extern "C" __global__ void kiln_copy4(long long rows, long long cols, const float* src,
                                      long long ss0, long long ss1, float* dst, long long ds0,
                                      long long ds1, int part, int* nonfinite) {
  kiln_copy(rows, cols, src, ss0, ss1, dst, ds0, ds1, part, nonfinite);
}
)";

// LAPACK calls on a GPU through cuSOLVER (solver.cpp's call sequences, the ones cuda-emu runs on
// the host's LAPACK), on the device's stream like every launch and copy; workspaces from the
// device's allocator (Gpus::alloc), the copy kernel printed above, TSQR's product by cuBLAS's gemm.
// One cuSOLVER handle (and cuBLAS handle) per device, a call at a time per device. Run on an H100
// (doctor's QR and SVD checks, the svd workloads).
class GpuLapack final : public backend::DeviceLapack {
 public:
  explicit GpuLapack(Gpus& gpus)
      : gpus_(gpus),
        copy8_(kCopySource, "kiln_copy8", gpus),
        copy4_(kCopySource, "kiln_copy4", gpus),
        devices_(static_cast<size_t>(gpus.count())) {}

  // TSQR's apply also needs cuBLAS (its gemm); without it all three steps run on the host, since
  // the apply must form Q_i from the same factorization as the R step (signs included).
  bool runs(LinalgFn f) const override {
    const bool tsqr = f == LinalgFn::TsqrR || f == LinalgFn::TsqrMix || f == LinalgFn::TsqrApply;
    return gpu_lapack_runs(f) && (!tsqr || cublas().why.empty());
  }
  std::string name() const override { return "cuSOLVER"; }

  void lapack(int device, LinalgFn f, DType t, const library::MatrixRef& a,
              const library::MatrixRef* b, void* out, size_t, int) override {
    backend::HostTimer timer("cuda: a LAPACK call (cuSOLVER, queued and its waits)");
    gpus_.use(device);  // (lapack() offers this class only where cuSOLVER loaded)
    PerDevice& d = devices_.at(static_cast<size_t>(device));
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.solver) {
      int st = cusolver().create(&d.solver);
      if (st == 0) st = cusolver().set_stream(d.solver, gpus_.stream(device));
      if (st != 0)
        throw Error("device cuda: creating a cuSOLVER handle failed (cuSOLVER status " +
                    std::to_string(st) + ")");
    }
    On on{*this, d, device};
    if (t == DType::Float64)
      solver_lapack(on, cusolver().d, d.solver, f, a, b, static_cast<double*>(out));
    else if (t == DType::Float32)
      solver_lapack(on, cusolver().s, d.solver, f, a, b, static_cast<float*>(out));
    else
      throw InternalError("device cuda: LAPACK call on " + std::string(dtype_name(t)));
  }

 private:
  struct PerDevice {
    std::mutex mu;
    SolverHandle solver = nullptr;
    CublasHandle blas = nullptr;
  };

  // One call's device: its memory, copies and kernels.
  struct On final : SolverDevice {
    On(GpuLapack& l, PerDevice& d, int device)
        : l(l), d(d), device(device), stream(l.gpus_.stream(device)) {}
    GpuLapack& l;
    PerDevice& d;
    int device;
    CUstream stream;

    // Workspaces as the device's other memory (Gpus::alloc and free: stream-ordered where the
    // device can).
    void* alloc(size_t bytes) override { return l.gpus_.alloc(device, bytes); }
    void free(void* p) override {  // from Buffer's destructor: errors kept (Gpus::keep_error)
      if (p) l.gpus_.free(device, p, 0);
    }
    void zero(void* p, size_t bytes) override {
      check(driver().memset8(dptr(p), 0, bytes, stream), "cuMemsetD8Async");
    }
    void to_host(void* dst, const void* src, size_t bytes) override {
      backend::HostTimer timer("cuda: a LAPACK call's copy to the host (waits for the stream)");
      check(driver().dtoh(dst, dptr(src), bytes, stream), "cuMemcpyDtoHAsync (a LAPACK call)");
      check(driver().stream_sync(stream), "cuStreamSynchronize (a LAPACK call)");
    }
    void to_device(void* dst, const void* src, size_t bytes) override {
      check(driver().htod(dptr(dst), src, bytes, stream), "cuMemcpyHtoDAsync (a LAPACK call)");
    }
    void copy(size_t es, int64_t rows, int64_t cols, const void* src, int64_t ss0, int64_t ss1,
              void* dst, int64_t ds0, int64_t ds1, int part, int* nonfinite) override {
      if (rows == 0 || cols == 0) return;
      CUfunction k = (es == 8 ? l.copy8_ : l.copy4_).get(device);
      long long r = rows, c = cols, a0 = ss0, a1 = ss1, b0 = ds0, b1 = ds1;
      CUdeviceptr s = dptr(src), t = dptr(dst), flag = dptr(nonfinite);
      void* params[] = {&r, &c, &s, &a0, &a1, &t, &b0, &b1, &part, &flag};
      launch_grid_stride(k, rows * cols, params, stream, "cuLaunchKernel (a LAPACK call's copy)");
    }
    void gemm_tt(DType t, int r, int m, int n, const void* a, const void* b, void* c) override {
      if (!d.blas) d.blas = cublas_handle(stream);
      auto run = [&](auto one, const auto& f) {
        using T = decltype(one);
        const T zero = 0;
        check_cublas(f.gemm(d.blas, kOpT, kOpT, r, m, n, &one, static_cast<const T*>(a), n,
                            static_cast<const T*>(b), m, &zero, static_cast<T*>(c), r),
                     "cublas gemm (TSQR apply)");
      };
      if (t == DType::Float64)
        run(1.0, cublas().d);
      else
        run(1.0f, cublas().s);
    }
  };

  Gpus& gpus_;
  DeviceFunction copy8_, copy4_;
  std::vector<PerDevice> devices_;
};

// cuRAND's device generator (Philox4_32_10, default ordering), one per device, on the device's
// stream like every launch and copy; a call at a time per device (it sets the offset).
// Expected to give the host generator's values (cuRAND documents the host generator as producing
// the device's results): on an H100 its values differed by 1.7 ulp of max(|x|, 1) at most (the
// Curand tests; doctor allows 16).
class GpuRandom final : public backend::DeviceRandom {
 public:
  explicit GpuRandom(Gpus& gpus) : gpus_(gpus), devices_(static_cast<size_t>(gpus.count())) {}

  void generate(int device, RandomKind kind, uint64_t seed, int64_t offset, int64_t count,
                double* out) override {
    if (count <= 0) return;
    const CurandApi& c = curand_api();
    if (!c.why.empty()) throw Error("random (Engine::Curand): " + c.why);
    gpus_.use(device);
    PerDevice& d = devices_.at(static_cast<size_t>(device));
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.gen) {
      check_curand(c.create(&d.gen, kCurandPhilox), "curandCreateGenerator");
      check_curand(c.set_stream(d.gen, gpus_.stream(device)), "curandSetStream");
      check(driver().mem_alloc(&d.pair, 2 * sizeof(double)), "cuMemAlloc");
    }
    check_curand(c.set_seed(d.gen, seed), "curandSetPseudoRandomGeneratorSeed");
    auto* pair = reinterpret_cast<double*>(d.pair);
    curand_fill(d.gen, kind, offset, count, out, pair, [&] {
      check(driver().dtod(dptr(out + count - 1), d.pair, sizeof(double), gpus_.stream(device)),
            "cuMemcpyDtoDAsync (cuRAND's last element)");
    });
  }
  std::string name() const override { return "cuRAND's device generator"; }

 private:
  struct PerDevice {
    std::mutex mu;
    CurandGenerator gen = nullptr;
    CUdeviceptr pair = 0;
  };
  Gpus& gpus_;
  std::vector<PerDevice> devices_;
};

// Per-thread, per-device scratch of the tree kernels, grown as needed and kept for the thread
// (freed never: a few KiB per thread and device). Reused by the thread's next launch, which the
// stream orders after this one.
struct Scratch {
  CUdeviceptr p = 0;
  size_t bytes = 0;
};

class GpuKernel final : public backend::Kernel {
 public:
  GpuKernel(const kir::Kernel& k, Printed p, Gpus& gpus)
      : label_(kernel_label(k, p.shape)),
        rank_(k.rank),
        ints_(static_cast<size_t>(k.num_ints())),
        floats_(k.params.size()),
        pointers_(static_cast<size_t>(k.num_pointer_slots())),
        words_(arg_words(k)),
        printed_(std::move(p)),
        traffic_(k),
        gpus_(gpus),
        function_(printed_.source, "kiln_kernel", gpus) {
    const size_t bytes = 8 * static_cast<size_t>(words_.total());
    if (bytes + 2 * sizeof(CUdeviceptr) > kMaxParamBytes)
      throw Error("device cuda: a kernel's arguments take " + std::to_string(bytes) +
                  " bytes, beyond CUDA's limit of " + std::to_string(kMaxParamBytes) +
                  " bytes of kernel parameters (fewer operands per expression, or --no-fuse)");
  }

  void launch(const int64_t* I, const double* F, void* const* P, int device) const override {
    Launch l = launch_for(rank_, printed_.shape, I);
    if (l.items == 0) return;
    backend::HostTimer timer("cuda: a kernel's launch");
    const Driver& d = driver();
    const bool rows = l.group > 1;  // long rows: the module's kiln_rows_kernel
    CUfunction fn = rows ? function_.get(device, "kiln_rows_kernel")
                         : function_.get(device);  // makes the device current
    // A kernel whose values do not depend on its grid (all but the flat trees, whose partials
    // combine in the order of a fixed grid): one wave of the device's resident blocks at most.
    if (!printed_.shape.tree) {
      const int64_t wave = resident_blocks(device, rows, fn);
      if (wave > 0)
        l.grid = std::min((l.items + printed_.shape.block - 1) / printed_.shape.block, wave);
    }
    CUstream stream = gpus_.stream(device);
    // The kernel's kiln_args (cuda_printer.hpp, ArgWords).
    thread_local std::vector<uint64_t> args;
    args.assign(static_cast<size_t>(words_.total()), 0);
    std::memcpy(args.data(), I, 8 * ints_);
    std::memcpy(args.data() + words_.ints, F, 8 * floats_);
    std::memcpy(args.data() + words_.ints + words_.floats, P, 8 * pointers_);
    CUdeviceptr s_arg = 0;
    if (l.scratch_bytes > 0) {
      thread_local std::map<int, Scratch> scratch;
      Scratch& b = scratch[device];
      if (b.bytes < static_cast<size_t>(l.scratch_bytes)) {
        if (b.p) {
          check(d.stream_sync(stream), "cuStreamSynchronize (before growing a kernel's scratch)");
          check(d.mem_free(b.p), "cuMemFree (a kernel's scratch)");
        }
        b.p = 0;
        check(d.mem_alloc(&b.p, static_cast<size_t>(l.scratch_bytes)), "cuMemAlloc");
        b.bytes = static_cast<size_t>(l.scratch_bytes);
        // The ticket counter: zeroed once; each tree kernel's last block zeroes it again.
        check(d.memset8(b.p, 0, 256, stream), "cuMemsetD8Async");
      }
      s_arg = b.p;
    }
    CUdeviceptr status = gpus_.status(device);
    void* params[] = {args.data(), &s_arg, &status};
    CUevent start = nullptr, stop = nullptr;  // KILN_CUDA_PROFILE: events around the launch
    const bool profile = flags().cuda_profile && d.elapsed;
    if (profile) {
      check(d.event_create(&start, 0), "cuEventCreate (KILN_CUDA_PROFILE)");
      check(d.event_create(&stop, 0), "cuEventCreate (KILN_CUDA_PROFILE)");
      check(d.event_record(start, stream), "cuEventRecord (KILN_CUDA_PROFILE)");
    }
    check(d.launch(fn, static_cast<unsigned>(l.grid), 1, 1,
                   static_cast<unsigned>(printed_.shape.block), 1, 1, 0, stream, params, nullptr),
          "cuLaunchKernel");
    if (l.fold_grid > 0) {  // a split kernel's segments, folded by the module's kiln_fold
      void* fold_params[] = {args.data(), &s_arg};
      check(d.launch(function_.get(device, "kiln_fold"), static_cast<unsigned>(l.fold_grid), 1, 1,
                     static_cast<unsigned>(printed_.shape.block), 1, 1, 0, stream, fold_params,
                     nullptr),
            "cuLaunchKernel (kiln_fold)");
    }
    if (profile) {
      check(d.event_record(stop, stream), "cuEventRecord (KILN_CUDA_PROFILE)");
      gpus_.time_launch(device, label_, start, stop, traffic_.bytes(I));
    }
    sync_check(stream, "a kernel (cuLaunchKernel)", &printed_.source);
  }

 private:
  // SMs x the kernel's resident blocks per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor),
  // once per device and entry; 0 where unknown (launch_for's grid then).
  int64_t resident_blocks(int device, bool rows, CUfunction fn) const {
    std::lock_guard<std::mutex> lock(wave_mu_);
    auto it = wave_.find({device, rows});
    if (it != wave_.end()) return it->second;
    int per_sm = 0;
    const Driver& d = driver();
    int64_t w = 0;
    if (d.occupancy && d.occupancy(&per_sm, fn, printed_.shape.block, 0) == 0 && per_sm > 0)
      w = static_cast<int64_t>(per_sm) * gpus_.multiprocessors(device);
    wave_[{device, rows}] = w;
    return w;
  }

  std::string label_;
  int rank_;
  size_t ints_, floats_, pointers_;
  ArgWords words_;
  Printed printed_;
  Traffic traffic_;
  mutable std::mutex wave_mu_;
  mutable std::map<std::pair<int, bool>, int64_t> wave_;  // (device, kiln_rows_kernel)
  Gpus& gpus_;
  DeviceFunction function_;
};

bool kiln_math() { return vm::kiln_math_selected() && !flags().precise_math; }

class GpuBackend final : public backend::Backend {
 public:
  Device device() const override { return Device::Cuda; }
  backend::Capabilities capabilities() const override {
    backend::Capabilities c;
    c.jit = true;
    c.memory = backend::MemorySpace::Device;
    return c;
  }
  backend::DeviceMemory* memory() override { return &gpus_; }
  // Without cuBLAS, GEMM library calls run on the host, on copies (as LAPACK's do).
  backend::DeviceBlas* blas() override { return cublas().why.empty() ? &blas_ : nullptr; }
  // Without cuRAND, Engine::Curand arrays cannot be made at all (the Generator refuses first).
  backend::DeviceRandom* random() override { return &random_; }
  // Without cuSOLVER, LAPACK calls run on the host, on copies.
  backend::DeviceLapack* lapack() override { return cusolver().why.empty() ? &lapack_ : nullptr; }
  std::string library_missing(bool lapack) const override {
    return lapack ? cusolver().why : cublas().why;
  }
  std::shared_ptr<const backend::Combiner> combiner(ReduceFn fn, DType acc) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(fn, acc);
    if (auto it = combiners_.find(key); it != combiners_.end()) return it->second;
    auto c = std::make_shared<GpuCombiner>(print_combine(fn, acc, Flavor::Device), gpus_);
    combiners_[key] = c;
    return c;
  }
  std::shared_ptr<const backend::Kernel> compile(const kir::Kernel& k,
                                                 backend::KernelDumps* dumps) override {
    auto t0 = std::chrono::steady_clock::now();
    Printed p = print(k, Flavor::Device, kiln_math(), flags().cuda_rows_from);
    if (dumps) dumps->printed = p.source;
    // Compiled here for device 0's architecture (so compile errors and times belong to the
    // plan build); other architectures at their first launch.
    NvrtcOutput out = nvrtc_cubin(p.source, gpus_.arch(0), "kiln_kernel.cu");
    if (!out.ok)
      throw InternalError("device cuda: NVRTC rejects a kernel for sm_" +
                          std::to_string(gpus_.arch(0)) + ":\n" + out.log);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (out.cached)
        ++stats_.disk_hits;
      else
        ++stats_.compiled;
      stats_.compile_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return std::make_shared<GpuKernel>(k, std::move(p), gpus_);
  }
  backend::CompileStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::string target() const override {
    std::string t = "cuda (" + std::to_string(gpus_.count()) + " device";
    t += gpus_.count() == 1 ? "" : "s";
    return t + ": " + gpus_.description() + "; NVRTC " + nvrtc_version() + ")";
  }

 private:
  Gpus gpus_;
  GpuBlas blas_{gpus_};
  GpuRandom random_{gpus_};
  GpuLapack lapack_{gpus_};
  mutable std::mutex mu_;
  backend::CompileStats stats_;
  std::map<std::pair<ReduceFn, DType>, std::shared_ptr<const backend::Combiner>> combiners_;
};

}  // namespace

bool cublas_available(std::string* why) {
  if (why) *why = cublas().why;
  return cublas().why.empty();
}

std::string gram_mirror_source() { return kMirrorSource; }

bool cusolver_available(std::string* why) {
  if (why) *why = cusolver().why;
  return cusolver().why.empty();
}

std::string lapack_copy_source() { return kCopySource; }

bool cuda_device_present(std::string* why) {
  const Driver& d = driver();
  if (why) *why = d.why;
  return d.why.empty();
}

std::unique_ptr<backend::Backend> make_device_backend() {
  std::string why;
  if (!cuda_device_present(&why))
    throw Error("device cuda: " + why +
                "; run on the cpu, or on cuda-emu to test the CUDA kernels without a GPU");
  if (!nvrtc_available(&why)) throw Error("device cuda: a GPU is present, but " + why);
  return std::make_unique<GpuBackend>();
}

}  // namespace kiln::cuda
