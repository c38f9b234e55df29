// cuda-emu: the CUDA printer's source compiled as host C++ (Flavor::Emu) into a shared object
// and run serially, thread by thread, with the GPU's reduction tree (cuda_printer.hpp). Objects
// are cached on disk (support/cache.hpp) by source and compiler, like the CPU backend's. With
// KILN_CUDA_CHECK each kernel's GPU source is also compiled by NVRTC for the architectures named,
// so a test run on cuda-emu checks both builds of every kernel it makes.
//
// Each emulated device has a queue, as a GPU has its stream (backend.hpp, DeviceMemory): a thread
// of its own runs the launches, combines, copies to the device and GEMMs queued on it, in order,
// while the caller goes on. So a runtime that reads a result before the work that makes it ran,
// or frees memory queued work still uses, fails here (wrong values; ThreadSanitizer's reports)
// as it would on a GPU.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_printer.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/cuda/solver.hpp"
#include "codegen/kernel_support.hpp"
#include "codegen/library.hpp"
#include "codegen/vector_math.hpp"
#include "ir/linalg.hpp"
#include "support/cache.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/flags.hpp"
#include "support/hash.hpp"
#include "support/process.hpp"

namespace kiln::cuda {

namespace {

using EmuFn = unsigned (*)(const int64_t* I, const double* F, void* const* P, int64_t grid);

// One emulated device's queue: a thread that runs the work pushed, one item at a time, in the
// order pushed (started at the first push; it lives for the process, like the backend).
class EmuQueue {
 public:
  void push(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      std::thread([this] { serve(); }).detach();
      started_ = true;
    }
    work_.push_back(std::move(work));
    cv_.notify_all();
  }
  // Returns once the queue is empty: everything pushed before the call (and since) has run.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return work_.empty() && !busy_; });
  }
  // Kernels' status words (bit 1: an integer to a negative power), kept until taken.
  void raise(unsigned status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ |= status;
  }
  // wait(), then the status raised and any exception queued work threw since the last call.
  unsigned take(std::exception_ptr* error) {
    wait();
    std::lock_guard<std::mutex> lock(mu_);
    *error = error_;
    error_ = nullptr;
    unsigned s = status_;
    status_ = 0;
    return s;
  }

 private:
  void serve() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return !work_.empty(); });
      std::function<void()> work = std::move(work_.front());
      work_.pop_front();
      busy_ = true;
      lock.unlock();
      std::exception_ptr e;
      try {
        work();
      } catch (...) {
        e = std::current_exception();
      }
      work = nullptr;  // captured buffers go before the waiters wake
      lock.lock();
      if (e && !error_) error_ = e;
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool started_ = false, busy_ = false;
  unsigned status_ = 0;
  std::exception_ptr error_;
};

// The emulated devices' memory: host memory, but each allocation belongs to one device and is
// known, so a launch can check that every pointer it is given is in its device's memory (a
// runtime that hands a kernel host memory, or another device's, fails here as it would on GPUs).
// New allocations are filled with 0xff bytes (NaN, -1, true), so a kernel that reads what was
// never copied in gives wrong values instead of zeros that might pass.
class EmuMemory final : public backend::DeviceMemory {
 public:
  static constexpr int kMaxDevices = 16;
  int count() const override { return 1; }  // more when asked (KILN_DEVICES)
  int max_count() const override { return kMaxDevices; }
  int ordinal(int device) const override { return (base_ + device) % kMaxDevices; }
  void* alloc(int device, size_t bytes) override {
    check_device(device);
    void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    if (!p)
      throw Error("cuda-emu: device " + std::to_string(device) + " is out of memory allocating " +
                      std::to_string(bytes) + " bytes",
                  ErrorKind::Memory);
    std::memset(p, 0xff, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    live_[reinterpret_cast<uintptr_t>(p)] = {bytes, device};
    return p;
  }
  void free(int device, void* p, size_t) override {
    queue(device).wait();  // queued work may still use it
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      if (it == live_.end() || it->second.second != device)
        throw InternalError("cuda-emu: freeing memory that is not device " +
                            std::to_string(device) + "'s");
      live_.erase(it);
    }
    std::free(p);
  }
  // Queued, from a copy of `src` taken now (a GPU driver's staging buffer).
  void to_device(int device, void* dst, const void* src, size_t bytes) override {
    check(device, dst, bytes, "a copy to the device");
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    queue(device).push([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  }
  void fill(int device, void* dst, uint64_t pattern, int bytes, size_t count) override {
    check(device, dst, count * static_cast<size_t>(bytes), "a fill on the device");
    queue(device).push([dst, pattern, bytes, count] {
      for (size_t i = 0; i < count; ++i)
        std::memcpy(static_cast<char*>(dst) + i * static_cast<size_t>(bytes), &pattern,
                    static_cast<size_t>(bytes));  // the low bytes (x86-64: little-endian)
    });
  }
  void to_host(int device, void* dst, const void* src, size_t bytes) override {
    check(device, src, bytes, "a copy to the host");
    queue(device).wait();
    std::memcpy(dst, src, bytes);
  }
  // Both devices' queued work first (the source's writes, the destination's readers of `dst`).
  void between(int to, void* dst, int from, const void* src, size_t bytes) override {
    check(to, dst, bytes, "a copy between devices");
    check(from, src, bytes, "a copy between devices");
    queue(from).wait();
    queue(to).wait();
    std::memcpy(dst, src, bytes);
  }
  void synchronize(int device) override {
    std::exception_ptr error;
    unsigned status = queue(device).take(&error);
    if (error) std::rethrow_exception(error);
    if (status & 1u) throw Error(kir::negative_power_message());
  }
  EmuQueue& queue(int device) {
    check_device(device);
    return queues_[device];
  }
  // InternalError unless [p, p + bytes) lies in one allocation of `device`.
  void check(int device, const void* p, size_t bytes, const char* what) const {
    auto at = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(at);
    if (it != live_.begin()) {
      --it;
      if (it->second.second == device && at + bytes <= it->first + it->second.first) return;
    }
    throw InternalError(std::string("cuda-emu: ") + what + " on device " + std::to_string(device) +
                        " uses memory that is not that device's");
  }

 private:
  void check_device(int device) const {
    if (device < 0 || device >= kMaxDevices)
      throw InternalError("cuda-emu: no device " + std::to_string(device));
  }
  mutable std::mutex mu_;
  std::map<uintptr_t, std::pair<size_t, int>> live_;  // start -> bytes, device
  EmuQueue queues_[kMaxDevices];
  const int base_ = process::launcher_local_rank() % kMaxDevices;  // (numbering only)
};

// Matrix products on the emulated devices: the host BLAS (library::gemm, the CPU's calls, so the
// same bits) on the emulated memory, after checking that every operand's extent lies in the
// device's memory as cuBLAS's would have to.
class EmuBlas final : public backend::DeviceBlas {
 public:
  explicit EmuBlas(EmuMemory& memory) : memory_(memory) {}
  void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
            const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc,
            bool accumulate) override {
    if (m > 0 && n > 0) {
      const size_t es = dtype_size(t);
      if (k > 0) {
        memory_.check(device, a, extent(trans_a ? k : m, trans_a ? m : k, lda, es), "a GEMM");
        memory_.check(device, b, extent(trans_b ? n : k, trans_b ? k : n, ldb, es), "a GEMM");
      }
      memory_.check(device, c, extent(m, n, ldc, es), "a GEMM");
    }
    memory_.queue(device).push(
        [=] { library::gemm(t, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate); });
  }
  void add_into(int device, DType t, int64_t m, int64_t n, void* c, int64_t ldc,
                const void* p) override {
    if (m > 0 && n > 0) {
      memory_.check(device, c, extent(m, n, ldc, dtype_size(t)), "a partial product's sum");
      memory_.check(device, p, extent(m, n, n, dtype_size(t)), "a partial product's sum");
    }
    memory_.queue(device).push([=] { library::add_into(t, m, n, c, ldc, p); });
  }
  std::string name() const override { return "the host's BLAS on emulated device memory"; }

 private:
  // Bytes from the first to the last element of a rows x cols row-major matrix.
  static size_t extent(int64_t rows, int64_t cols, int64_t ld, size_t es) {
    return static_cast<size_t>((rows - 1) * ld + cols) * es;
  }
  EmuMemory& memory_;
};

// LAPACK calls on the emulated devices: the GPU's call sequences (solver.cpp: workspaces, the
// strided copies, cuSOLVER's routines) with the host's LAPACK behind cuSOLVER's signatures
// (host_solver), on the emulated memory, every copy's extent checked; for the functions a GPU
// runs (gpu_lapack_runs: lstsq runs on the host, on copies, as there). So cuda-emu checks the
// GPU's LAPACK path element for element; its values agree with the CPU's within rounding, not
// bit for bit (gesvd for gesdd, geqrf for CholeskyQR2 and latsqr, TSQR's refactoring apply).
// A call waits for the device's queue, then runs on the caller's thread (a GPU's LAPACK call
// waits too, for cuSOLVER's info), so its copies are plain ones.
class EmuLapack final : public backend::DeviceLapack {
 public:
  explicit EmuLapack(EmuMemory& memory) : memory_(memory) {}
  bool runs(LinalgFn f) const override { return gpu_lapack_runs(f); }
  void lapack(int device, LinalgFn f, DType t, const library::MatrixRef& a,
              const library::MatrixRef* b, void* out, size_t out_bytes, int) override {
    if (out_bytes > 0) memory_.check(device, out, out_bytes, "a LAPACK call");
    memory_.queue(device).wait();
    On on(memory_, device);
    if (t == DType::Float64)
      solver_lapack(on, host_solver<double>(), nullptr, f, a, b, static_cast<double*>(out));
    else if (t == DType::Float32)
      solver_lapack(on, host_solver<float>(), nullptr, f, a, b, static_cast<float*>(out));
    else
      throw InternalError("cuda-emu: LAPACK call on " + std::string(dtype_name(t)));
  }
  std::string name() const override {
    return "the GPU's cuSOLVER calls on the host's LAPACK, on emulated device memory";
  }

 private:
  // One call's emulated device.
  class On final : public SolverDevice {
   public:
    On(EmuMemory& memory, int device) : memory_(memory), device_(device) {}
    void* alloc(size_t bytes) override { return memory_.alloc(device_, bytes); }
    void free(void* p) override {
      if (p) memory_.free(device_, p, 0);
    }
    void zero(void* p, size_t bytes) override {
      memory_.check(device_, p, bytes, "a LAPACK call's memset");
      std::memset(p, 0, bytes);
    }
    void to_host(void* dst, const void* src, size_t bytes) override {
      memory_.check(device_, src, bytes, "a LAPACK call's copy to the host");
      std::memcpy(dst, src, bytes);
    }
    void to_device(void* dst, const void* src, size_t bytes) override {
      memory_.check(device_, dst, bytes, "a LAPACK call's copy to the device");
      std::memcpy(dst, src, bytes);
    }
    void copy(size_t es, int64_t rows, int64_t cols, const void* src, int64_t ss0, int64_t ss1,
              void* dst, int64_t ds0, int64_t ds1, int part, int* nonfinite) override {
      if (rows == 0 || cols == 0) return;
      check_region(src, es, rows, cols, ss0, ss1);
      check_region(dst, es, rows, cols, ds0, ds1);
      if (nonfinite) memory_.check(device_, nonfinite, sizeof(int), "a LAPACK call's copy");
      auto run = [&](auto* s, auto* d) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            T v = s[i * ss0 + j * ss1];
            if ((part == 1 && j < i) || (part == 2 && j > i)) v = T(0);
            if (nonfinite && !std::isfinite(v)) *nonfinite = 1;
            d[i * ds0 + j * ds1] = v;
          }
      };
      if (es == 8)
        run(static_cast<const double*>(src), static_cast<double*>(dst));
      else
        run(static_cast<const float*>(src), static_cast<float*>(dst));
    }
    void gemm_tt(DType t, int r, int m, int n, const void* a, const void* b, void* c) override {
      const size_t es = dtype_size(t);
      memory_.check(device_, a, static_cast<size_t>(n) * r * es, "a LAPACK call's GEMM");
      memory_.check(device_, b, static_cast<size_t>(m) * n * es, "a LAPACK call's GEMM");
      memory_.check(device_, c, static_cast<size_t>(r) * m * es, "a LAPACK call's GEMM");
      // Column-major C (r x m) = A^T B^T is row-major C^T (m x r) = B A, with B stored as n x m
      // and A as r x n row-major: both transposed.
      library::gemm(t, true, true, m, r, n, b, m, a, n, c, r);
    }

   private:
    // The elements a strided rows x cols region starting at p reaches must be the device's.
    void check_region(const void* p, size_t es, int64_t rows, int64_t cols, int64_t s0,
                      int64_t s1) const {
      int64_t lo = 0, hi = 0;
      for (int64_t span : {(rows - 1) * s0, (cols - 1) * s1}) (span < 0 ? lo : hi) += span;
      memory_.check(device_, static_cast<const char*>(p) + lo * static_cast<int64_t>(es),
                    static_cast<size_t>(hi - lo + 1) * es, "a LAPACK call's copy");
    }
    EmuMemory& memory_;
    int device_;
  };

  EmuMemory& memory_;
};

// cuRAND on the emulated devices: its host generator (the values its device generator gives) on
// the emulated memory, after checking that the elements lie in the device's memory; queued.
class EmuRandom final : public backend::DeviceRandom {
 public:
  explicit EmuRandom(EmuMemory& memory) : memory_(memory) {}
  void generate(int device, RandomKind kind, uint64_t seed, int64_t offset, int64_t count,
                double* out) override {
    if (count <= 0) return;
    memory_.check(device, out, static_cast<size_t>(count) * sizeof(double), "a cuRAND call");
    memory_.queue(device).push([=] { library::curand_host(kind, seed, offset, count, out); });
  }
  std::string name() const override { return "cuRAND's host generator on emulated device memory"; }

 private:
  EmuMemory& memory_;
};

using CombineFn = void (*)(int64_t n, void* acc, const void* in, int64_t index_offset);

class EmuCombiner final : public backend::Combiner {
 public:
  EmuCombiner(CombineFn fn, EmuMemory& memory) : fn_(fn), memory_(memory) {}
  void combine(int device, void* acc, const void* in, int64_t n,
               size_t index_offset) const override {
    memory_.check(device, acc, 0, "a combine");
    memory_.check(device, in, 0, "a combine");
    CombineFn fn = fn_;
    auto offset = static_cast<int64_t>(index_offset);
    memory_.queue(device).push([=] { fn(n, acc, in, offset); });
  }

 private:
  CombineFn fn_;
  EmuMemory& memory_;
};

// Queues the launch with copies of I, F and P (the caller's arrays are gone by the time it runs,
// as cuLaunchKernel copies a GPU kernel's parameters).
class EmuKernel final : public backend::Kernel {
 public:
  EmuKernel(const kir::Kernel& k, KernelShape shape, EmuFn fn, EmuMemory& memory)
      : label_(kernel_label(k, shape)),
        rank_(k.rank),
        ints_(static_cast<size_t>(k.num_ints())),
        floats_(k.params.size()),
        pointers_(static_cast<size_t>(k.num_pointer_slots())),
        shape_(std::move(shape)),
        traffic_(k),
        fn_(fn),
        memory_(memory) {}
  void launch(const int64_t* I, const double* F, void* const* P, int device) const override {
    Launch l = launch_for(rank_, shape_, I);
    if (l.items == 0) return;
    for (size_t q = 0; q < pointers_; ++q)
      if (P[q]) memory_.check(device, P[q], 0, "a kernel launch");
    EmuQueue& queue = memory_.queue(device);
    // KILN_CUDA_PROFILE: the emulated launch timed by the host's clock (backend::kernel_times).
    std::string label = flags().cuda_profile ? label_ : std::string();
    const double bytes = label.empty() ? 0.0 : static_cast<double>(traffic_.bytes(I));
    queue.push([&queue, fn = fn_, grid = l.grid, i = std::vector<int64_t>(I, I + ints_),
                f = std::vector<double>(F, F + floats_), p = std::vector<void*>(P, P + pointers_),
                label = std::move(label), bytes] {
      auto t0 = std::chrono::steady_clock::now();
      unsigned status = fn(i.data(), f.data(), p.data(), grid);
      if (!label.empty())
        backend::add_kernel_time(
            label, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            bytes);
      queue.raise(status);
    });
  }

 private:
  std::string label_;
  int rank_;
  size_t ints_, floats_, pointers_;
  KernelShape shape_;
  Traffic traffic_;
  EmuFn fn_;
  EmuMemory& memory_;
};

std::vector<int> parse_arches(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) {
      size_t used = 0;
      int a = 0;
      try {
        a = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || a < 50)
        throw Error("KILN_CUDA_CHECK: '" + s + "' is not a list of architectures like 80,90");
      out.push_back(a);
    }
  return out;
}

// Kiln's functions (the default; not KILN_MATH=libmvec, not precise), as the CPU kernels call them.
bool kiln_math() { return vm::kiln_math_selected() && !flags().precise_math; }

// A private directory (mkdtemp, mode 0700) where cuda-emu writes the sources it compiles and the
// shared objects it loads: nobody else can swap a file between its check and its dlopen. Removed
// with the backend.
class WorkDir {
 public:
  const std::string& path() {
    if (path_.empty()) {
      std::string tmpl = std::filesystem::temp_directory_path().string() + "/kiln-emu-XXXXXX";
      if (!::mkdtemp(tmpl.data()))
        throw Error("cuda-emu: cannot make a working directory '" + tmpl +
                    "': " + std::strerror(errno));
      path_ = tmpl;
    }
    return path_;
  }
  ~WorkDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

 private:
  std::string path_;
};

class EmuBackend final : public backend::Backend {
 public:
  Device device() const override { return Device::CudaEmu; }
  backend::Capabilities capabilities() const override {
    backend::Capabilities c;
    c.jit = true;
    c.memory = backend::MemorySpace::Device;
    return c;
  }
  backend::DeviceMemory* memory() override { return &memory_; }
  backend::DeviceBlas* blas() override { return &blas_; }
  backend::DeviceLapack* lapack() override { return &lapack_; }
  backend::DeviceRandom* random() override { return &random_; }
  std::shared_ptr<const backend::Kernel> compile(const kir::Kernel& k,
                                                 backend::KernelDumps* dumps) override {
    auto t0 = std::chrono::steady_clock::now();
    Printed p = print(k, Flavor::Emu, kiln_math(), flags().cuda_rows_from);
    if (dumps) dumps->printed = p.source;
    // The GPU build's check runs on another thread while the host compiler builds the emulated
    // one (two cores: the pair takes the longer's time, not the sum); its failure is thrown below.
    std::future<void> check;
    if (!flags().cuda_check.empty())
      check = std::async(std::launch::async, [&] { check_with_nvrtc(k); });
    std::shared_ptr<const backend::Kernel> kernel = build_kernel(k, p, t0);
    if (check.valid()) check.get();
    return kernel;
  }
  std::shared_ptr<const backend::Combiner> combiner(ReduceFn fn, DType acc) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(fn, acc);
    if (auto it = combiners_.find(key); it != combiners_.end()) return it->second;
    std::string source = print_combine(fn, acc, Flavor::Emu);
    bool from_disk = false;
    auto f = reinterpret_cast<CombineFn>(build(source, "kiln_emu_combine", &from_disk));
    auto c = std::make_shared<EmuCombiner>(f, memory_);
    combiners_[key] = c;
    return c;
  }
  backend::CompileStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::string target() const override {
    std::string t = "cuda-emu (printed CUDA as host C++, " + flags().emu_cxx + ")";
    if (!flags().cuda_check.empty()) t += ", NVRTC check sm_" + flags().cuda_check;
    return t;
  }

 private:
  // The emulated kernel: compiled by the host compiler, or from the memory or disk cache.
  std::shared_ptr<const backend::Kernel> build_kernel(const kir::Kernel& k, const Printed& p,
                                                      std::chrono::steady_clock::time_point t0) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ULL, p.source), flags().emu_cxx);
    EmuFn fn;
    if (auto it = fns_.find(h); it != fns_.end()) {
      fn = it->second;
    } else {
      bool from_disk = false;
      fn = reinterpret_cast<EmuFn>(build(p.source, "kiln_emu_launch", &from_disk));
      fns_[h] = fn;
      if (from_disk)
        ++stats_.disk_hits;
      else
        ++stats_.compiled;
      stats_.compile_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return std::make_shared<EmuKernel>(k, p.shape, fn, memory_);
  }

  // KILN_CUDA_CHECK: the GPU build of the same kernel, once per distinct source.
  void check_with_nvrtc(const kir::Kernel& k) {
    const std::string& arches = flags().cuda_check;
    if (arches.empty()) return;
    std::vector<int> list = parse_arches(arches);
    Printed p = print(k, Flavor::Device, kiln_math(), flags().cuda_rows_from);
    uint64_t h = hash_bytes(0, p.source);
    {
      std::lock_guard<std::mutex> lock(checked_mu_);
      if (!checked_.insert(h).second) return;
    }
    if (!flags().cuda_check_dir.empty()) {
      char name[32];
      std::snprintf(name, sizeof name, "/%016llx.cu", static_cast<unsigned long long>(h));
      std::ofstream f(flags().cuda_check_dir + name);
      f << p.source;
      if (!f) throw Error("KILN_CUDA_CHECK_DIR: cannot write " + flags().cuda_check_dir + name);
    }
    // One thread per architecture (NVRTC is thread-safe).
    std::vector<std::future<NvrtcOutput>> outs;
    for (int a : list)
      outs.push_back(std::async(std::launch::async,
                                [&p, a] { return nvrtc_cubin(p.source, a, "kiln_kernel.cu"); }));
    for (size_t i = 0; i < list.size(); ++i) {
      NvrtcOutput out = outs[i].get();
      if (!out.ok)
        throw InternalError("cuda-emu: NVRTC rejects the GPU build of a kernel for sm_" +
                            std::to_string(list[i]) + ":\n" + out.log + "\n--- source ---\n" +
                            p.source);
    }
  }

  // Compiles (or loads from the disk cache) a source's shared object; returns `symbol` in it.
  void* build(const std::string& source, const char* symbol, bool* from_disk) {
    const std::string& cxx = flags().emu_cxx;
    cache::Key key =
        cache::key_of("emu-library\n" + cxx + "\n" + std::string(symbol) + "\n" + source);
    std::string entry = cache::path_of("emu", key, ".so");
    if (auto payload = cache::load(entry, cache::Kind::EmuLibrary, key)) {
      std::string why;
      if (void* fn = load(*payload, symbol, &why)) {
        *from_disk = true;
        return fn;
      }
      cache::reject(entry, "it does not load: " + why);
    }
    std::string so = compile(source, cxx, "k" + key.hex());
    cache::store(entry, cache::Kind::EmuLibrary, key, so);
    std::string why;
    void* fn = load(so, symbol, &why);
    if (!fn) throw InternalError("cuda-emu: a kernel just compiled does not load: " + why);
    return fn;
  }

  // The shared object the host compiler makes of a source: run with an argument vector, never
  // through a shell (KILN_EMU_CXX is split at blanks: "ccache c++" works). The compiler runs in
  // the private directory on files named after the source's key (`name`), so that its command
  // line is the same for the same kernel in every process: under ccache (which caches
  // compilations, not links) the object is compiled (-c) and linked in two runs, and a kernel that
  // any run on this machine compiled before is a cache hit; a plain compiler makes the shared
  // object in one run.
  std::string compile(const std::string& source, const std::string& cxx, const std::string& name) {
    const std::string dir = work_.path(), src = name + ".cpp", obj = name + ".o", so = name + ".so";
    auto in_dir = [&](const std::string& file) { return dir + "/" + file; };
    files::write(in_dir(src), source, "cuda-emu: cannot write");
    std::vector<std::string> words = process::split_words(cxx);
    if (words.empty()) throw Error("cuda-emu: KILN_EMU_CXX is empty; set it to a C++ compiler");
    const bool two_runs = std::filesystem::path(words[0]).filename() == "ccache";
    // A program given by a relative path ("./cxx", or ccache's compiler) is relative to where
    // Kiln runs, not to the private directory.
    for (size_t i = 0; i < std::min<size_t>(words.size(), two_runs ? 2 : 1); ++i)
      if (words[i].find('/') != std::string::npos && words[i][0] != '/')
        words[i] = std::filesystem::absolute(words[i]).string();
    std::vector<std::string> argv = words;
    for (const char* a : {"-std=c++17", "-O1", "-fPIC", "-w", "-ffp-contract=off",
                          "-fno-strict-aliasing", "-x", "c++"})
      argv.push_back(a);
    if (two_runs)
      argv.insert(argv.end(), {"-c", src, "-o", obj});
    else
      argv.insert(argv.end(), {"-shared", src, "-o", so});
    const char* what = "cuda-emu (the host compiler, KILN_EMU_CXX)";
    process::Result r = process::run(argv, what, dir);
    if (r.exit_code == 0 && two_runs) {
      argv = words;
      argv.insert(argv.end(), {"-shared", obj, "-o", so});
      r = process::run(argv, what, dir);
    }
    std::error_code ec;
    std::filesystem::remove(in_dir(obj), ec);
    if (r.exit_code != 0) {
      std::filesystem::remove(in_dir(so), ec);
      std::string kept = std::filesystem::temp_directory_path().string() + "/kiln-emu-failed-" +
                         std::to_string(getpid()) + "-" + std::to_string(counter_++) + ".cpp";
      std::filesystem::rename(in_dir(src), kept, ec);
      std::string cmd;
      for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
      throw InternalError("cuda-emu: the host compiler rejects a printed kernel (" + cmd +
                          ", exit " + std::to_string(r.exit_code) + ", in " + dir + "):\n" +
                          r.output + "\n--- source: " + (ec ? std::string("not kept") : kept) +
                          " ---");
    }
    std::filesystem::remove(in_dir(src), ec);
    std::string bytes =
        files::read_regular(in_dir(so), cache::kMaxEntryBytes, "cuda-emu: compiled kernel");
    std::filesystem::remove(in_dir(so), ec);
    return bytes;
  }

  // dlopens a shared object's bytes (written to a fresh file in the private directory, unlinked
  // once loaded); `symbol` in it, or nullptr with *why set.
  void* load(const std::string& bytes, const char* symbol, std::string* why) {
    std::string so = work_.path() + "/l" + std::to_string(counter_++) + ".so";
    files::write(so, bytes, "cuda-emu: cannot write");
    void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::error_code ec;
    std::filesystem::remove(so, ec);  // the mapping stays
    void* sym = handle ? dlsym(handle, symbol) : nullptr;
    if (!sym) {
      const char* e = dlerror();
      *why = e ? e : std::string("no ") + symbol;
      if (handle) dlclose(handle);
    }
    return sym;
  }

  WorkDir work_;
  EmuMemory memory_;
  EmuBlas blas_{memory_};
  EmuLapack lapack_{memory_};
  EmuRandom random_{memory_};
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, EmuFn> fns_;
  std::map<std::pair<ReduceFn, DType>, std::shared_ptr<const backend::Combiner>> combiners_;
  std::mutex checked_mu_;  // not mu_, which the host compiler's run holds
  std::unordered_set<uint64_t> checked_;
  backend::CompileStats stats_;
  std::atomic<int64_t> counter_{0};
};

}  // namespace

std::unique_ptr<backend::Backend> make_emu_backend() { return std::make_unique<EmuBackend>(); }

}  // namespace kiln::cuda
