// The GPU backend: the CUDA driver API loaded with dlopen (libcuda.so.1), so one binary runs on
// machines with and without a GPU. "No GPU" is decided by cuInit and cuDeviceGetCount, not by
// dlopen alone: the toolkit's stub libcuda loads and then cuInit fails.
//
// With a GPU: each device's primary context; kernels printed for the device (Flavor::Device),
// compiled by NVRTC for its architecture (cubins cached, nvrtc.hpp) and loaded into each device's
// context when first launched there; device memory through cuMemAlloc / cuMemFree (the runtime
// pools it) and synchronous copies. A launch copies the block's I, F and P arrays to the device
// (the kernel reads them through pointers), zeroes the status word and the tree kernels' scratch,
// launches on the legacy default stream and reads the status back, which waits for the kernel.
// NOT YET RUN ON A GPU: no session so far had one (docs/ARCHITECTURE.md lists what was verified).
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_printer.hpp"
#include "codegen/cuda/curand_api.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/kernel_support.hpp"
#include "codegen/library.hpp"
#include "codegen/vector_math.hpp"
#include "ir/linalg.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln::cuda {

namespace {

// The driver API's types, as cuda.h declares them (cuda.h is not needed to build).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_...
constexpr CUresult kOutOfMemory = 2;                           // CUDA_ERROR_OUT_OF_MEMORY

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
  CUresult (*htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t) = nullptr;
  CUresult (*memset8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*memset2d8)(CUdeviceptr, size_t, unsigned char, size_t, size_t) = nullptr;
  CUresult (*load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**) = nullptr;
  std::string why;  // empty: a driver with devices
  int devices = 0;
};

template <class F>
bool bind(void* h, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(h, name));
  return *f != nullptr;
}

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
        bind(h, "cuMemFree_v2", &x.mem_free) && bind(h, "cuMemcpyHtoD_v2", &x.htod) &&
        bind(h, "cuMemcpyDtoH_v2", &x.dtoh) && bind(h, "cuMemcpyPeer", &x.peer) &&
        bind(h, "cuMemsetD8_v2", &x.memset8) && bind(h, "cuMemsetD2D8_v2", &x.memset2d8) &&
        bind(h, "cuModuleLoadData", &x.load_data) &&
        bind(h, "cuModuleGetFunction", &x.get_function) && bind(h, "cuLaunchKernel", &x.launch);
    if (!ok) x.why = "libcuda.so.1 lacks a function Kiln calls (a driver older than CUDA 4?)";
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

// The devices' primary contexts and architectures, made current on the calling thread per call.
class Gpus final : public backend::DeviceMemory {
 public:
  Gpus() {
    const Driver& d = driver();
    for (int k = 0; k < d.devices; ++k) {
      CUdevice dev = 0;
      check(d.device_get(&dev, k), "cuDeviceGet");
      int major = 0, minor = 0;
      check(d.attribute(&major, kAttrComputeMajor, dev), "cuDeviceGetAttribute");
      check(d.attribute(&minor, kAttrComputeMinor, dev), "cuDeviceGetAttribute");
      CUcontext ctx = nullptr;
      check(d.primary_ctx(&ctx, dev), "cuDevicePrimaryCtxRetain");
      ctx_.push_back(ctx);
      arch_.push_back(major * 10 + minor);
    }
  }
  int count() const override { return static_cast<int>(ctx_.size()); }
  int max_count() const override { return count(); }
  void* alloc(int device, size_t bytes) override {
    use(device);
    CUdeviceptr p = 0;
    CUresult rc = driver().mem_alloc(&p, std::max<size_t>(bytes, 1));
    if (rc == kOutOfMemory)
      throw Error("device cuda: device " + std::to_string(device) +
                  " is out of memory allocating " + std::to_string(bytes) + " bytes");
    check(rc, "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  void free(int device, void* p, size_t) override {
    use(device);
    driver().mem_free(dptr(p));  // in a deleter: nothing to report to
  }
  void to_device(int device, void* dst, const void* src, size_t bytes) override {
    use(device);
    check(driver().htod(dptr(dst), src, bytes), "cuMemcpyHtoD");
  }
  void to_host(int device, void* dst, const void* src, size_t bytes) override {
    use(device);
    check(driver().dtoh(dst, dptr(src), bytes), "cuMemcpyDtoH");
  }
  void between(int to, void* dst, int from, const void* src, size_t bytes) override {
    use(to);
    check(driver().peer(dptr(dst), ctx_[to], dptr(src), ctx_[from], bytes), "cuMemcpyPeer");
  }

  void use(int device) const { check(driver().set_current(ctx_.at(device)), "cuCtxSetCurrent"); }
  CUcontext context(int device) const { return ctx_.at(device); }
  int arch(int device) const { return arch_.at(device); }

 private:
  std::vector<CUcontext> ctx_;
  std::vector<int> arch_;
};

// A __global__ function of a source: compiled by NVRTC for each device's architecture and loaded
// into its context at the first use there (modules stay loaded for the process).
class DeviceFunction {
 public:
  DeviceFunction(std::string source, const char* name, Gpus& gpus)
      : source_(std::move(source)), name_(name), gpus_(gpus) {}
  // Leaves the device current.
  CUfunction get(int device) const {
    gpus_.use(device);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = fns_.find(device); it != fns_.end()) return it->second;
    int arch = gpus_.arch(device);
    NvrtcOutput out = nvrtc_cubin(source_, arch, "kiln_kernel.cu");
    if (!out.ok)
      throw InternalError("device cuda: NVRTC rejects a kernel for sm_" + std::to_string(arch) +
                          ":\n" + out.log);
    CUmodule mod = nullptr;
    check(driver().load_data(&mod, out.cubin.data()), "cuModuleLoadData");
    CUfunction fn = nullptr;
    check(driver().get_function(&fn, mod, name_), "cuModuleGetFunction");
    fns_[device] = fn;
    return fn;
  }

 private:
  std::string source_;
  const char* name_;
  Gpus& gpus_;
  mutable std::mutex mu_;
  mutable std::unordered_map<int, CUfunction> fns_;
};

// Folds partials on a GPU: one launch, grid-stride, on the default stream (the next copy out
// waits for it).
class GpuCombiner final : public backend::Combiner {
 public:
  GpuCombiner(std::string source, Gpus& gpus)
      : function_(std::move(source), "kiln_combine", gpus) {}
  void combine(int device, void* acc, const void* in, int64_t n,
               size_t index_offset) const override {
    if (n <= 0) return;
    CUfunction fn = function_.get(device);
    long long count = n, offset = static_cast<long long>(index_offset);
    CUdeviceptr a = dptr(acc), b = dptr(in);
    void* params[] = {&count, &a, &b, &offset};
    auto grid = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1024));
    check(driver().launch(fn, grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
          "cuLaunchKernel (combine)");
  }

 private:
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
    bool ok = bind(h, "cublasCreate_v2", &x.create) && bind(h, "cublasDgemm_v2", &x.d.gemm) &&
              bind(h, "cublasSgemm_v2", &x.s.gemm) && bind(h, "cublasDgeam", &x.d.geam) &&
              bind(h, "cublasSgeam", &x.s.geam) && bind(h, "cublasDsyrk_v2", &x.d.syrk) &&
              bind(h, "cublasSsyrk_v2", &x.s.syrk);
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

// Matrix products on a GPU through cuBLAS, on the legacy default stream like every launch and
// copy (so they are ordered with them). Row-major C = op(A) op(B) is column-major C^T =
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
    PerDevice& d = handle(device);  // makes the device current
    std::lock_guard<std::mutex> lock(d.mu);
    const size_t es = dtype_size(t);
    if (k == 0) {  // an empty sum: zeros, or C unchanged
      if (!accumulate)
        check(driver().memset2d8(dptr(c), static_cast<size_t>(ldc) * es, 0,
                                 static_cast<size_t>(n) * es, static_cast<size_t>(m)),
              "cuMemsetD2D8");
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
    if (!d.handle) check_cublas(cublas().create(&d.handle), "cublasCreate");
    return d;
  }

  void mirror(int device, size_t es, int64_t n, void* c, int64_t ldc) const {
    CUfunction fn = (es == 8 ? mirror8_ : mirror4_).get(device);
    long long count = n, ld = ldc;
    CUdeviceptr cp = dptr(c);
    void* params[] = {&count, &cp, &ld};
    auto grid = static_cast<unsigned>(std::min<int64_t>((n * n + 255) / 256, 1024));
    check(driver().launch(fn, grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
          "cuLaunchKernel (Gram mirror)");
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

// cuSOLVER (libcusolver, loaded with dlopen like cuBLAS; its types as cusolverDn.h declares
// them): the dense routines with 32-bit dimensions and their workspace queries.
using SolverHandle = struct cusolverDnContext*;
constexpr int kFillLower = 0, kEigVectors = 1;  // CUBLAS_FILL_MODE_LOWER, CUSOLVER_EIG_MODE_VECTOR

template <class T>
struct SolverFns {
  int (*geqrf_size)(SolverHandle, int, int, T*, int, int*) = nullptr;
  int (*geqrf)(SolverHandle, int, int, T*, int, T*, T*, int, int*) = nullptr;
  int (*orgqr_size)(SolverHandle, int, int, int, const T*, int, const T*, int*) = nullptr;
  int (*orgqr)(SolverHandle, int, int, int, T*, int, const T*, T*, int, int*) = nullptr;
  int (*gesvd_size)(SolverHandle, int, int, int*) = nullptr;
  int (*gesvd)(SolverHandle, signed char, signed char, int, int, T*, int, T*, T*, int, T*, int, T*,
               int, T*, int*) = nullptr;
  int (*potrf_size)(SolverHandle, int, int, T*, int, int*) = nullptr;
  int (*potrf)(SolverHandle, int, int, T*, int, T*, int, int*) = nullptr;
  int (*getrf_size)(SolverHandle, int, int, T*, int, int*) = nullptr;
  int (*getrf)(SolverHandle, int, int, T*, int, T*, int*, int*) = nullptr;
  int (*getrs)(SolverHandle, int, int, int, const T*, int, const int*, T*, int, int*) = nullptr;
  int (*syevd_size)(SolverHandle, int, int, int, const T*, int, const T*, int*) = nullptr;
  int (*syevd)(SolverHandle, int, int, int, T*, int, T*, T*, int, int*) = nullptr;

  // Binds cusolverDn<p><routine> for every routine; false if one is missing.
  bool bind_all(void* h, char p) {
    auto name = [&](const char* routine) { return std::string("cusolverDn") + p + routine; };
    return bind(h, name("geqrf_bufferSize").c_str(), &geqrf_size) &&
           bind(h, name("geqrf").c_str(), &geqrf) &&
           bind(h, name("orgqr_bufferSize").c_str(), &orgqr_size) &&
           bind(h, name("orgqr").c_str(), &orgqr) &&
           bind(h, name("gesvd_bufferSize").c_str(), &gesvd_size) &&
           bind(h, name("gesvd").c_str(), &gesvd) &&
           bind(h, name("potrf_bufferSize").c_str(), &potrf_size) &&
           bind(h, name("potrf").c_str(), &potrf) &&
           bind(h, name("getrf_bufferSize").c_str(), &getrf_size) &&
           bind(h, name("getrf").c_str(), &getrf) && bind(h, name("getrs").c_str(), &getrs) &&
           bind(h, name("syevd_bufferSize").c_str(), &syevd_size) &&
           bind(h, name("syevd").c_str(), &syevd);
  }
};

struct Cusolver {
  int (*create)(SolverHandle*) = nullptr;
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
    if (!bind(h, "cusolverDnCreate", &x.create) || !x.d.bind_all(h, 'D') || !x.s.bind_all(h, 'S'))
      x.why = "cuSOLVER lacks a function Kiln calls";
    return x;
  }();
  return c;
}

template <class T>
const SolverFns<T>& solver_fns() {
  if constexpr (std::is_same_v<T, double>)
    return cusolver().d;
  else
    return cusolver().s;
}

template <class T>
const CublasFns<T>& cublas_fns() {
  if constexpr (std::is_same_v<T, double>)
    return cublas().d;
  else
    return cublas().s;
}

void check_solver(int status, const char* call) {
  if (status != 0)
    throw Error(std::string("device cuda: ") + call + " failed (cuSOLVER status " +
                std::to_string(status) + ")");
}

// Copies a rows x cols matrix, element (i, j) from src[i * ss0 + j * ss1] to dst[i * ds0 + j *
// ds1] (strides in elements, any sign): operands into cuSOLVER's column-major workspaces and
// results out into the row-major packed result. part 1 keeps the upper triangle (zeros below the
// diagonal), part 2 the lower; a non-null `nonfinite` is set to 1 when a value copied is NaN or
// infinite.
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

// Device memory for one call (the device current), freed at the end of the call.
struct DeviceBuffer {
  CUdeviceptr p = 0;
  explicit DeviceBuffer(size_t bytes) {
    check(driver().mem_alloc(&p, std::max<size_t>(bytes, 1)), "cuMemAlloc (cuSOLVER workspace)");
  }
  ~DeviceBuffer() {
    if (p) driver().mem_free(p);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p(o.p) { o.p = 0; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(p);
  }
};

// LAPACK calls on a GPU through cuSOLVER, on the legacy default stream like every launch and
// copy. Each call copies its operands into column-major workspaces (a printed copy kernel that
// also flags non-finite values, which are refused as on the host), runs the cuSOLVER routines,
// reads their info back (errors worded as the host's: library::lapack_error) and writes the
// packed result (ir/linalg.hpp) row-major with the same kernel. Results agree with the host's
// LAPACK within rounding, not bit for bit (other routines: gesvd for gesdd, geqrf for CholeskyQR2
// and latsqr). TSQR's R step always asks for the refactoring apply (info[0] = 0): cuSOLVER has no
// condition estimate; geqrf is run on the same block with the same sizes both times. One
// cuSOLVER handle (and cuBLAS handle, for TSQR's apply) per device, a call at a time per device.
// NOT YET RUN ON A GPU.
class GpuLapack final : public backend::DeviceLapack {
 public:
  explicit GpuLapack(Gpus& gpus)
      : gpus_(gpus),
        copy8_(kCopySource, "kiln_copy8", gpus),
        copy4_(kCopySource, "kiln_copy4", gpus),
        devices_(static_cast<size_t>(gpus.count())) {}

  // TSQR's apply also needs cuBLAS (its gemm).
  bool runs(LinalgFn f) const override {
    return gpu_lapack_runs(f) && (f != LinalgFn::TsqrApply || cublas().why.empty());
  }
  std::string name() const override { return "cuSOLVER"; }

  void lapack(int device, LinalgFn f, DType t, const library::MatrixRef& a,
              const library::MatrixRef* b, void* out, size_t, int) override {
    PerDevice& d = handle(device);
    std::lock_guard<std::mutex> lock(d.mu);
    if (t == DType::Float64)
      Call<double>{*this, d, device, f}.run(a, b, static_cast<double*>(out));
    else if (t == DType::Float32)
      Call<float>{*this, d, device, f}.run(a, b, static_cast<float*>(out));
    else
      throw InternalError("device cuda: LAPACK call on " + std::string(dtype_name(t)));
  }

 private:
  struct PerDevice {
    std::mutex mu;
    SolverHandle solver = nullptr;
    CublasHandle blas = nullptr;
  };

  PerDevice& handle(int device) {
    if (!cusolver().why.empty()) throw Error("device cuda: " + cusolver().why);
    gpus_.use(device);
    PerDevice& d = devices_.at(static_cast<size_t>(device));
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.solver) check_solver(cusolver().create(&d.solver), "cusolverDnCreate");
    return d;
  }

  // One call's state and steps, in element type T.
  template <class T>
  struct Call {
    GpuLapack& self;
    PerDevice& d;
    int device;
    LinalgFn f;
    const SolverFns<T>& fn = solver_fns<T>();

    static int fit(int64_t v) {
      if (v > 2147483647)
        throw Error("device cuda: a LAPACK call's dimension beyond cuSOLVER's 32-bit integers (" +
                    std::to_string(v) + ")");
      return static_cast<int>(v);
    }

    void copy(int64_t rows, int64_t cols, const T* src, int64_t ss0, int64_t ss1, T* dst,
              int64_t ds0, int64_t ds1, int part = 0, int* nonfinite = nullptr) const {
      if (rows == 0 || cols == 0) return;
      CUfunction k = (sizeof(T) == 8 ? self.copy8_ : self.copy4_).get(device);
      long long r = rows, c = cols, a0 = ss0, a1 = ss1, b0 = ds0, b1 = ds1;
      CUdeviceptr s = dptr(src), t = dptr(dst), flag = dptr(nonfinite);
      void* params[] = {&r, &c, &s, &a0, &a1, &t, &b0, &b1, &part, &flag};
      auto grid = static_cast<unsigned>(std::min<int64_t>((rows * cols + 255) / 256, 4096));
      check(driver().launch(k, grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
            "cuLaunchKernel (LAPACK operand copy)");
    }

    // m's elements, column-major with leading dimension ld in a workspace of ld x cols elements
    // (zeros beyond m), refusing non-finite values as the host does.
    DeviceBuffer gather(const library::MatrixRef& m, int64_t ld, int64_t cols) const {
      DeviceBuffer w(static_cast<size_t>(std::max<int64_t>(ld, 1) * std::max<int64_t>(cols, 1)) *
                     sizeof(T));
      if (ld > m.rows || cols > m.cols)
        check(driver().memset8(w.p, 0, static_cast<size_t>(ld * cols) * sizeof(T)), "cuMemsetD8");
      DeviceBuffer flag(sizeof(int));
      check(driver().memset8(flag.p, 0, sizeof(int)), "cuMemsetD8");
      copy(m.rows, m.cols, static_cast<const T*>(m.data) + m.offset, m.row_stride, m.col_stride,
           w.as<T>(), 1, ld, 0, flag.as<int>());
      if (read<int>(flag.as<int>()) != 0) library::non_finite(f);
      return w;
    }

    template <class V>
    static V read(const V* p) {
      V v{};
      check(driver().dtoh(&v, dptr(p), sizeof(V)), "cuMemcpyDtoH (a LAPACK call's info)");
      return v;
    }

    // Workspace of the largest of the queried sizes (elements).
    static DeviceBuffer workspace(std::initializer_list<int> sizes) {
      int n = 1;
      for (int s : sizes) n = std::max(n, s);
      return DeviceBuffer(static_cast<size_t>(n) * sizeof(T));
    }

    // Writes the rows x cols column-major w (leading dimension ld) to out row-major; returns the
    // end.
    T* store(T* out, const T* w, int64_t ld, int64_t rows, int64_t cols, int part = 0) const {
      copy(rows, cols, w, 1, ld, out, cols, 1, part);
      return out + rows * cols;
    }

    // Householder QR of the column-major m x n w in place (tau: min(m, n) elements).
    void geqrf(int m, int n, T* w, T* tau) const {
      int s = 0;
      check_solver(fn.geqrf_size(d.solver, m, n, w, m, &s), "cusolverDn geqrf_bufferSize");
      DeviceBuffer work = workspace({s}), info(sizeof(int));
      check_solver(
          fn.geqrf(d.solver, m, n, w, m, tau, work.as<T>(), std::max(1, s), info.as<int>()),
          "cusolverDn geqrf");
      if (int i = read(info.as<int>()); i != 0)
        library::lapack_error(f, "the QR factorization failed", i);
    }

    // The first k columns of Q from geqrf's reflectors in w (m x k, in place).
    void orgqr(int m, int k, T* w, const T* tau) const {
      int s = 0;
      check_solver(fn.orgqr_size(d.solver, m, k, k, w, m, tau, &s), "cusolverDn orgqr_bufferSize");
      DeviceBuffer work = workspace({s}), info(sizeof(int));
      check_solver(
          fn.orgqr(d.solver, m, k, k, w, m, tau, work.as<T>(), std::max(1, s), info.as<int>()),
          "cusolverDn orgqr");
      if (int i = read(info.as<int>()); i != 0) library::lapack_error(f, "orgqr failed", i);
    }

    // LU of the n x n column-major w in place; returns getrf's info (> 0: singular).
    int lu(int n, T* w, int* ipiv) const {
      int s = 0;
      check_solver(fn.getrf_size(d.solver, n, n, w, n, &s), "cusolverDn getrf_bufferSize");
      DeviceBuffer work = workspace({s}), info(sizeof(int));
      check_solver(fn.getrf(d.solver, n, n, w, n, work.as<T>(), ipiv, info.as<int>()),
                   "cusolverDn getrf");
      return read(info.as<int>());
    }

    void lu_solve(int n, int r, const T* w, const int* ipiv, T* x) const {
      DeviceBuffer info(sizeof(int));
      check_solver(fn.getrs(d.solver, kOpN, n, r, w, n, ipiv, x, n, info.as<int>()),
                   "cusolverDn getrs");
    }

    static void upload(T* dst, const std::vector<T>& v) {
      if (!v.empty())
        check(driver().htod(dptr(dst), v.data(), v.size() * sizeof(T)), "cuMemcpyHtoD");
    }

    void run(const library::MatrixRef& a, const library::MatrixRef* b, T* out) const {
      const int m = fit(a.rows), n = fit(a.cols), k = std::min(m, n);
      const int r = b ? fit(b->cols) : 0;
      switch (f) {
        case LinalgFn::Qr: {
          if (k == 0) return;
          DeviceBuffer w = gather(a, m, n), tau(static_cast<size_t>(k) * sizeof(T));
          geqrf(m, n, w.as<T>(), tau.as<T>());
          store(out + static_cast<int64_t>(m) * k, w.as<T>(), m, k, n, 1);  // R, upper
          orgqr(m, k, w.as<T>(), tau.as<T>());
          store(out, w.as<T>(), m, m, k);  // Q
          return;
        }
        case LinalgFn::Svd:
          return svd(a, m, n, k, out);
        case LinalgFn::Cholesky: {
          if (n == 0) return;
          DeviceBuffer w = gather(a, n, n), info(sizeof(int));
          int s = 0;
          check_solver(fn.potrf_size(d.solver, kFillLower, n, w.as<T>(), n, &s),
                       "cusolverDn potrf_bufferSize");
          DeviceBuffer work = workspace({s});
          check_solver(fn.potrf(d.solver, kFillLower, n, w.as<T>(), n, work.as<T>(), std::max(1, s),
                                info.as<int>()),
                       "cusolverDn potrf");
          if (int i = read(info.as<int>()); i > 0)
            library::lapack_error(f,
                                  "the matrix is not positive definite (its leading minor of "
                                  "order " +
                                      std::to_string(i) + " is not)",
                                  i);
          store(out, w.as<T>(), n, n, n, 2);  // L, lower
          return;
        }
        case LinalgFn::Solve: {
          DeviceBuffer w = gather(a, n, n), x = gather(*b, n, r);
          if (n == 0 || r == 0) return;
          DeviceBuffer ipiv(static_cast<size_t>(n) * sizeof(int));
          if (int i = lu(n, w.as<T>(), ipiv.as<int>()); i > 0) library::singular(f, i);
          lu_solve(n, r, w.as<T>(), ipiv.as<int>(), x.as<T>());
          store(out, x.as<T>(), n, n, r);
          return;
        }
        case LinalgFn::Inv: {
          DeviceBuffer w = gather(a, n, n);
          if (n == 0) return;
          DeviceBuffer ipiv(static_cast<size_t>(n) * sizeof(int)),
              x(static_cast<size_t>(n) * n * sizeof(T));
          if (int i = lu(n, w.as<T>(), ipiv.as<int>()); i > 0) library::singular(f, i);
          std::vector<T> eye(static_cast<size_t>(n) * n, T(0));
          for (int i = 0; i < n; ++i) eye[static_cast<size_t>(i) * n + i] = T(1);
          upload(x.as<T>(), eye);
          lu_solve(n, n, w.as<T>(), ipiv.as<int>(), x.as<T>());
          store(out, x.as<T>(), n, n, n);
          return;
        }
        case LinalgFn::Det:
        case LinalgFn::Slogdet:
          return slogdet(a, n, out);
        case LinalgFn::Eigh: {
          DeviceBuffer w = gather(a, n, n);
          if (n == 0) return;
          int s = 0;
          check_solver(fn.syevd_size(d.solver, kEigVectors, kFillLower, n, w.as<T>(), n, out, &s),
                       "cusolverDn syevd_bufferSize");
          DeviceBuffer work = workspace({s}), info(sizeof(int));
          check_solver(fn.syevd(d.solver, kEigVectors, kFillLower, n, w.as<T>(), n, out,
                                work.as<T>(), std::max(1, s), info.as<int>()),
                       "cusolverDn syevd");  // w (ascending) straight into the result
          if (int i = read(info.as<int>()); i > 0)
            library::lapack_error(f, "the eigenvalue computation did not converge", i);
          store(out + n, w.as<T>(), n, n, n);
          return;
        }
        case LinalgFn::TsqrR: {  // R_i, then the info row asking for the refactoring apply
          DeviceBuffer w = gather(a, m, n), tau(static_cast<size_t>(std::max(k, 1)) * sizeof(T));
          if (n == 0) return;
          geqrf(m, n, w.as<T>(), tau.as<T>());
          T* info = store(out, w.as<T>(), m, n, n, 1);
          check(driver().memset8(dptr(info), 0, static_cast<size_t>(n) * sizeof(T)), "cuMemsetD8");
          return;
        }
        case LinalgFn::TsqrMix: {    // W = M_i itself (Q_i is formed by the apply), info row
          expect_refactoring(a, n);  // a = [R_i; info]
          DeviceBuffer flag(sizeof(int));
          check(driver().memset8(flag.p, 0, sizeof(int)), "cuMemsetD8");
          copy(b->rows, b->cols, static_cast<const T*>(b->data) + b->offset, b->row_stride,
               b->col_stride, out, r, 1, 0, flag.as<int>());
          if (read<int>(flag.as<int>()) != 0) library::non_finite(f);
          check(driver().memset8(dptr(out + static_cast<int64_t>(n) * r), 0,
                                 static_cast<size_t>(r) * sizeof(T)),
                "cuMemsetD8");
          return;
        }
        case LinalgFn::TsqrApply: {  // Q_i W, Q_i formed by refactoring X_i as TsqrR did
          library::MatrixRef top = *b;
          top.rows = n;
          DeviceBuffer wm = gather(top, n, r);
          if (r == 0) return;
          expect_refactoring(*b, n);  // b = [W; info]
          DeviceBuffer w = gather(a, m, n), tau(static_cast<size_t>(std::max(k, 1)) * sizeof(T));
          geqrf(m, n, w.as<T>(), tau.as<T>());
          orgqr(m, n, w.as<T>(), tau.as<T>());
          // out (m x r, row-major) is column-major r x m = W^T Q^T.
          if (!d.blas) check_cublas(cublas().create(&d.blas), "cublasCreate");
          const T one = 1, zero = 0;
          check_cublas(cublas_fns<T>().gemm(d.blas, kOpT, kOpT, r, m, n, &one, wm.as<T>(), n,
                                            w.as<T>(), m, &zero, out, r),
                       "cublas gemm (TSQR apply)");
          return;
        }
        case LinalgFn::Lstsq:
          break;
      }
      throw InternalError(std::string("device cuda: cuSOLVER does not run ") + linalg_name(f));
    }

    // TSQR's info row (row `row` of m; its element 0: the mode) must ask for the refactoring
    // apply, the only one this backend's TsqrR writes.
    void expect_refactoring(const library::MatrixRef& m, int64_t row) const {
      if (m.cols == 0) return;
      if (read(static_cast<const T*>(m.data) + m.offset + row * m.row_stride) != T(0))
        throw InternalError(
            "device cuda: a TSQR step asks for the product apply, which "
            "cuSOLVER's TsqrR never chooses");
    }

    // U S Vh by gesvd, which needs rows >= columns: a wide matrix's SVD is its transpose's with
    // U and V swapped.
    void svd(const library::MatrixRef& a, int m, int n, int k, T* out) const {
      if (k == 0) return;
      const bool wide = m < n;
      library::MatrixRef at = a;
      if (wide) {
        std::swap(at.rows, at.cols);
        std::swap(at.row_stride, at.col_stride);
      }
      const int M = std::max(m, n), N = k;  // the factored matrix, M x N, M >= N
      DeviceBuffer w = gather(at, M, N), u(static_cast<size_t>(M) * k * sizeof(T)),
                   vt(static_cast<size_t>(k) * N * sizeof(T)),
                   rwork(static_cast<size_t>(k) * sizeof(T)), info(sizeof(int));
      T* s = out + static_cast<int64_t>(m) * k;
      int size = 0;
      check_solver(fn.gesvd_size(d.solver, M, N, &size), "cusolverDn gesvd_bufferSize");
      DeviceBuffer work = workspace({size});
      check_solver(fn.gesvd(d.solver, 'S', 'S', M, N, w.as<T>(), M, s, u.as<T>(), M, vt.as<T>(), k,
                            work.as<T>(), std::max(1, size), rwork.as<T>(), info.as<int>()),
                   "cusolverDn gesvd");  // S straight into the result
      if (int i = read(info.as<int>()); i > 0)
        library::lapack_error(f, "the SVD did not converge", i);
      T* vh = s + k;
      if (!wide) {
        store(out, u.as<T>(), M, m, k);  // U (m x k)
        store(vh, vt.as<T>(), k, k, n);  // Vh (k x n)
      } else {
        // a^T = U' S V'^T: U = V' (m x k: element (i, j) = VT'(j, i)), Vh = U'^T (k x n).
        copy(m, k, vt.as<T>(), k, 1, out, k, 1);
        copy(k, n, u.as<T>(), M, 1, vh, n, 1);
      }
    }

    // det or (sign, log|det|) from the LU's diagonal and pivots, as the host computes them.
    void slogdet(const library::MatrixRef& a, int n, T* out) const {
      DeviceBuffer w = gather(a, n, n);
      T sign = 1, logdet = 0;
      if (n > 0) {
        DeviceBuffer ipiv(static_cast<size_t>(n) * sizeof(int)),
            diag(static_cast<size_t>(n) * sizeof(T));
        int info = lu(n, w.as<T>(), ipiv.as<int>());
        if (info > 0) {
          sign = 0;
          logdet = -std::numeric_limits<T>::infinity();
        } else {
          copy(1, n, w.as<T>(), 0, n + 1, diag.as<T>(), 0, 1);
          std::vector<T> dg(static_cast<size_t>(n));
          std::vector<int> piv(static_cast<size_t>(n));
          check(driver().dtoh(dg.data(), diag.p, dg.size() * sizeof(T)), "cuMemcpyDtoH");
          check(driver().dtoh(piv.data(), ipiv.p, piv.size() * sizeof(int)), "cuMemcpyDtoH");
          for (int i = 0; i < n; ++i) {
            if (piv[i] != i + 1) sign = -sign;
            if (dg[i] < 0) sign = -sign;
            logdet += std::log(std::abs(dg[i]));
          }
        }
      }
      std::vector<T> result;
      if (f == LinalgFn::Det)
        result = {sign * std::exp(logdet)};
      else
        result = {sign, logdet};
      upload(out, result);
    }
  };

  Gpus& gpus_;
  DeviceFunction copy8_, copy4_;
  std::vector<PerDevice> devices_;
};

// cuRAND's device generator (Philox4_32_10, default ordering), one per device, on the legacy
// default stream like every launch and copy; a call at a time per device (it sets the offset).
// Expected to give the host generator's values (cuRAND documents the host generator as producing
// the device's results); NOT YET RUN ON A GPU.
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
      check(driver().mem_alloc(&d.pair, 2 * sizeof(double)), "cuMemAlloc");
    }
    check_curand(c.set_seed(d.gen, seed), "curandSetPseudoRandomGeneratorSeed");
    auto* pair = reinterpret_cast<double*>(d.pair);
    curand_fill(d.gen, kind, offset, count, out, pair, [&] {
      CUcontext ctx = gpus_.context(device);
      check(driver().peer(dptr(out + count - 1), ctx, d.pair, ctx, sizeof(double)),
            "cuMemcpyPeer (cuRAND's last element)");
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

// Per-thread, per-device launch buffers: the I, F, P arrays, the status word and the scratch,
// grown as needed and kept for the thread (freed never: a few KiB per thread and device).
struct LaunchBuffers {
  CUdeviceptr args = 0, scratch = 0;
  size_t args_bytes = 0, scratch_bytes = 0;
};

class GpuKernel final : public backend::Kernel {
 public:
  GpuKernel(const kir::Kernel& k, Printed p, Gpus& gpus)
      : rank_(k.rank),
        ints_(static_cast<size_t>(k.num_ints())),
        floats_(k.params.size()),
        pointers_(static_cast<size_t>(k.num_pointer_slots())),
        printed_(std::move(p)),
        gpus_(gpus),
        function_(printed_.source, "kiln_kernel", gpus) {}

  void launch(const int64_t* I, const double* F, void* const* P, int device) const override {
    Launch l = launch_for(rank_, printed_.shape, I);
    if (l.items == 0) return;
    const Driver& d = driver();
    CUfunction fn = function_.get(device);  // makes the device current
    thread_local std::map<int, LaunchBuffers> buffers;
    LaunchBuffers& b = buffers[device];
    // args: status word (8 bytes), I, F, P, each 8-byte aligned.
    size_t need = 8 + 8 * (ints_ + floats_ + pointers_);
    if (b.args_bytes < need) {
      if (b.args) d.mem_free(b.args);
      b.args = 0;
      check(d.mem_alloc(&b.args, need), "cuMemAlloc");
      b.args_bytes = need;
    }
    thread_local std::vector<unsigned char> host;
    host.assign(need, 0);
    std::memcpy(host.data() + 8, I, 8 * ints_);
    std::memcpy(host.data() + 8 + 8 * ints_, F, 8 * floats_);
    std::memcpy(host.data() + 8 + 8 * (ints_ + floats_), P, 8 * pointers_);
    check(d.htod(b.args, host.data(), need), "cuMemcpyHtoD");
    if (l.scratch_bytes > 0) {
      if (b.scratch_bytes < static_cast<size_t>(l.scratch_bytes)) {
        if (b.scratch) d.mem_free(b.scratch);
        b.scratch = 0;
        check(d.mem_alloc(&b.scratch, static_cast<size_t>(l.scratch_bytes)), "cuMemAlloc");
        b.scratch_bytes = static_cast<size_t>(l.scratch_bytes);
      }
      check(d.memset8(b.scratch, 0, 256), "cuMemsetD8");  // the ticket counter
    }
    CUdeviceptr status = b.args, i_arg = b.args + 8, f_arg = i_arg + 8 * ints_,
                p_arg = f_arg + 8 * floats_, s_arg = b.scratch;
    void* params[] = {&i_arg, &f_arg, &p_arg, &s_arg, &status};
    check(d.launch(fn, static_cast<unsigned>(l.grid), 1, 1,
                   static_cast<unsigned>(printed_.shape.block), 1, 1, 0, nullptr, params, nullptr),
          "cuLaunchKernel");
    unsigned word = 0;
    check(d.dtoh(&word, status, sizeof word), "cuMemcpyDtoH (the kernel's status)");
    if (word & 1u) throw Error(kir::negative_power_message());
  }

 private:
  int rank_;
  size_t ints_, floats_, pointers_;
  Printed printed_;
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
    Printed p = print(k, Flavor::Device, kiln_math());
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
    return t + ", sm_" + std::to_string(gpus_.arch(0)) + ", NVRTC " + nvrtc_version() + ")";
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

// Every LAPACK call but lstsq (cuSOLVER has no gelsd), TSQR's steps included.
bool gpu_lapack_runs(LinalgFn f) { return f != LinalgFn::Lstsq; }

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
