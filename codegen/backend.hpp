// The backend interface: what the runtime asks of a device. A backend turns kernel IR
// (codegen/kernel_ir.hpp, defined in docs/KERNEL_IR.md) into a kernel it can launch on one
// block's arguments (the ABI in kernel_ir.hpp), and says what it can do. The runtime includes
// this header and nothing of any backend's own folder; backend_for() is the one place that knows
// them all. A new backend implements Backend in codegen/<name>/, adds a Device, and registers
// here (docs/ARCHITECTURE.md, "Adding a backend").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"
#include "codegen/library.hpp"
#include "support/device.hpp"

namespace kiln::backend {

enum class MemorySpace : uint8_t { Host, Device };

struct Capabilities {
  bool jit = false;          // compiles machine code (false: interprets the kernel IR)
  bool vector_math = false;  // transcendentals evaluated several lanes at a time (libmvec)
  char vector_isa =
      0;  // host code's widest x86 vector ISA: 'e' AVX-512, 'd' AVX2, 'b' SSE4 (0: n/a)
  bool float64 = true;                     // float64 arithmetic at full speed
  MemorySpace memory = MemorySpace::Host;  // where launch() expects block arguments to live
  int64_t preferred_block_elements = 0;    // a block size it runs well with (0: no preference)
};

struct CompileStats {
  int64_t compiled = 0;        // kernels compiled (or prepared) in this process
  int64_t disk_hits = 0;       // kernels loaded from an on-disk cache
  double compile_seconds = 0;  // time spent in both
};

// Text forms of a compiled kernel for people (KILN_DEBUG=4/5, --emit-kernels): what the printer
// made of the kernel IR and, for optimizing backends, the code after optimization.
struct KernelDumps {
  std::string printed;
  std::string optimized;
};

// A kernel ready to run. launch() evaluates it over one block: I, F and P as kernel_ir.hpp
// lays them out. It throws kiln::Error for a run-time error the kernel raised (an integer to a
// negative power). Thread-safe: blocks run concurrently.
//
// On a backend with device memory, launch() only queues the kernel: each device runs its queued
// work (launches, copies, library calls) in the order it was queued, asynchronously to the host,
// and DeviceMemory::synchronize() waits for it and throws the errors its kernels raised.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // `device`: which of the backend's devices runs it (0 for host backends); P then points into
  // that device's memory (DeviceMemory).
  virtual void launch(const int64_t* I, const double* F, void* const* P, int device) const = 0;
};

// The memory of a backend whose kernels do not read the host's (Capabilities::memory ==
// Device): the runtime allocates blocks there, copies in what kernels read and copies out what
// the host needs (runtime/device.cpp pools and counts them). Devices are numbered 0 ...
// count() - 1. Thread-safe.
//
// Each device has one queue (a CUDA stream): launches, copies to and between devices and library
// calls on the device run in the order they were queued, and may run after the call that queued
// them returned. So work queued after a task's work on the same device sees its results, and
// memory freed to the runtime's pool is only reused by later work in the same queue. The calls
// below keep the host's side safe: to_device() has read `src` when it returns; to_host() returns
// once `dst` holds the values (after everything queued before it); between() orders the copy
// after the source device's queued work and that device's later work after the copy; free()
// waits for the device's queue.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual int count() const = 0;      // devices a run uses unless told (KILN_DEVICES)
  virtual int max_count() const = 0;  // devices a run may be told to use
  // The machine's number for device `device` (CUDA's ordinal): runs number the devices from the
  // one at process::launcher_local_rank() modulo the machine's devices, so that the ranks of a
  // distributed program on one machine each start on a device of their own.
  virtual int ordinal(int device) const = 0;
  // Throws kiln::Error naming the device and size when the device is out of memory.
  virtual void* alloc(int device, size_t bytes) = 0;
  virtual void free(int device, void* p, size_t bytes) = 0;
  virtual void to_device(int device, void* dst, const void* src, size_t bytes) = 0;
  virtual void to_host(int device, void* dst, const void* src, size_t bytes) = 0;
  virtual void between(int to, void* dst, int from, const void* src, size_t bytes) = 0;
  // Sets `count` elements of `bytes` bytes (1, 4 or 8) at dst to `pattern`'s low bytes, queued
  // like a copy: reduction partials' start values without a copy from the host.
  virtual void fill(int device, void* dst, uint64_t pattern, int bytes, size_t count) = 0;
  // Waits until `device` has run everything queued on it; then throws kiln::Error for the first
  // error a kernel raised there since the last call (an integer to a negative power), clearing it.
  virtual void synchronize(int device) = 0;
};

// Folds reduction partials where they are, on a device (DeviceMemory backends): acc[e] =
// acc[e] (+) in[e] for e < n, by the combine rules of docs/KERNEL_IR.md §8 (argmin/argmax: the
// values, then the int64 indices at index_offset bytes). Thread-safe.
class Combiner {
 public:
  virtual ~Combiner() = default;
  virtual void combine(int device, void* acc, const void* in, int64_t n,
                       size_t index_offset) const = 0;
};

// Matrix products in a device's memory (DeviceMemory backends): library GEMM tasks run where
// their operands are instead of on copies on the host. The contract of library::gemm and
// library::add_into (codegen/library.hpp: row-major, leading dimensions in elements, A^T A
// exactly symmetric), with every pointer in `device`'s memory. Thread-safe; calls are queued on
// the device like launches (DeviceMemory). Throws kiln::Error naming the call.
class DeviceBlas {
 public:
  virtual ~DeviceBlas() = default;
  virtual void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, void* c,
                    int64_t ldc, bool accumulate) = 0;
  virtual void add_into(int device, DType t, int64_t m, int64_t n, void* c, int64_t ldc,
                        const void* p) = 0;
  virtual std::string name() const = 0;  // for --emit-ir: "cuBLAS", ...
};

// LAPACK calls in a device's memory (DeviceMemory backends): library::lapack's contract
// (codegen/library.hpp: f's packed result, row-major parts, its errors) with a.data, b->data and
// out in `device`'s memory; `out_bytes` is the packed result's size, `threads` the host threads
// the call may use where it runs on the host. Thread-safe, ordered as DeviceBlas's calls.
class DeviceLapack {
 public:
  virtual ~DeviceLapack() = default;
  virtual void lapack(int device, LinalgFn f, DType t, const library::MatrixRef& a,
                      const library::MatrixRef* b, void* out, size_t out_bytes, int threads) = 0;
  // Whether f runs here; false: its calls run on the host, on copies (as without DeviceLapack).
  virtual bool runs(LinalgFn) const { return true; }
  virtual std::string name() const = 0;  // for --emit-ir: "cuSOLVER", ...
};

// cuRAND's generator in a device's memory (DeviceMemory backends; random::Engine::Curand):
// out[i] = element offset + i of cuRAND's Philox4_32_10 sequence for `seed` (kind Normal or
// Uniform), the values library::curand_host gives. Thread-safe, ordered as DeviceBlas's calls.
class DeviceRandom {
 public:
  virtual ~DeviceRandom() = default;
  virtual void generate(int device, RandomKind kind, uint64_t seed, int64_t offset, int64_t count,
                        double* out) = 0;
  virtual std::string name() const = 0;  // for --emit-ir: "cuRAND's device generator", ...
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Compiles (or prepares) a kernel; equal kernel IR may return the same kernel. Thread-safe.
  // Throws kiln::Error when it cannot (a compile failure, KILN_NO_COMPILE for JIT backends).
  virtual std::shared_ptr<const Kernel> compile(const kir::Kernel& k, KernelDumps* dumps) = 0;
  virtual CompileStats stats() const = 0;
  // What code is made for, for people: "znver3, vector math AVX2", "interpreter (...)".
  virtual std::string target() const = 0;
  // Backends with device memory return it; host backends, nullptr.
  virtual DeviceMemory* memory() { return nullptr; }
  // The combiner of a reduction's partials: backends with device memory must return one (the
  // runtime folds partials where they are); host backends return nullptr. Throws kiln::Error
  // when it cannot be compiled.
  virtual std::shared_ptr<const Combiner> combiner(ReduceFn, DType) { return nullptr; }
  // Backends with device memory may run GEMM library calls there; nullptr: library calls run on
  // the host, on copies of their operands.
  virtual DeviceBlas* blas() { return nullptr; }
  // Likewise for LAPACK calls; nullptr: they run on the host, on copies of their operands.
  virtual DeviceLapack* lapack() { return nullptr; }
  // Likewise for cuRAND's generator (Engine::Curand arrays); nullptr: cuRAND's host generator
  // fills them on the host.
  virtual DeviceRandom* random() { return nullptr; }
  // Why this backend's GEMM (lapack: LAPACK) calls run on the host, where blas() (lapack()) is
  // nullptr on a backend with device memory: the library that could not be loaded.
  virtual std::string library_missing(bool /*lapack*/) const { return ""; }
};

// A plan on `device` runs a library call (`call`: "GEMM", "LAPACK") on the host, on copies,
// because `why`: never silent. A warning on standard error, once per message, and listed by
// host_fallbacks(); a kiln::Error instead where KILN_CUDA_STRICT=1 and the device is cuda.
void note_host_fallback(Device device, const std::string& call, const std::string& why);
// Every message note_host_fallback has warned of in this process, in order.
std::vector<std::string> host_fallbacks();

// KILN_CUDA_PROFILE=1: the device kernels' run times, by kernel (cuda: CUDA events around each
// launch, read when its device synchronizes; cuda-emu: the host's clock around each emulated
// launch). Kernels are named by their kernel IR's hash and the CUDA printer's work split.
struct KernelTime {
  std::string kernel;
  int64_t launches = 0;
  double seconds = 0;
  double bytes = 0;  // kernels: what their launches moved (cuda::Traffic)
};
void add_kernel_time(const std::string& kernel, double seconds, double bytes = 0);
// Every kernel timed since the last reset, the longest total first.
std::vector<KernelTime> kernel_times();
// Clears the kernels' and the host phases' times.
void reset_kernel_times();

// KILN_CUDA_PROFILE=1: where the host's time goes, by phase ("compute: plan", "run: tasks", the
// CUDA backend's blocking driver calls, ...), as kernel_times (`kernel` names the phase). Phases
// nest: "compute: run" holds the "run: " ones, which hold the driver calls made in them.
void add_host_time(const std::string& phase, double seconds);
std::vector<KernelTime> host_times();
// Times its scope into add_host_time(phase) when KILN_CUDA_PROFILE is set (one flag read
// otherwise). `phase` must outlive it.
class HostTimer {
 public:
  explicit HostTimer(const char* phase);
  ~HostTimer();
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

 private:
  const char* phase_;
  int64_t start_ns_ = 0;
};

// The backend of a device (Default resolved first). Backends live for the process.
Backend& backend_for(Device d);

}  // namespace kiln::backend
