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

// Launches a grid-stride kernel over `items` elements on the legacy default stream: blocks of 256
// threads, at most 1024 blocks. `what` names it in errors.
void launch_grid_stride(CUfunction fn, int64_t items, void** params, const char* what) {
  auto grid = static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, 1024));
  check(driver().launch(fn, grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr), what);
}

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
    launch_grid_stride(fn, n, params, "cuLaunchKernel (combine)");
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
    launch_grid_stride(fn, n * n, params, "cuLaunchKernel (Gram mirror)");
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
    if (!bind(h, "cusolverDnCreate", &x.create) || !bind_solver(h, 'D', &x.d) ||
        !bind_solver(h, 'S', &x.s))
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
// the host's LAPACK), on the legacy default stream like every launch and copy; workspaces from
// cuMemAlloc, the copy kernel printed above, TSQR's product by cuBLAS's gemm. One cuSOLVER handle
// (and cuBLAS handle) per device, a call at a time per device. NOT YET RUN ON A GPU.
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
    gpus_.use(device);  // (lapack() offers this class only where cuSOLVER loaded)
    PerDevice& d = devices_.at(static_cast<size_t>(device));
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.solver)
      if (int st = cusolver().create(&d.solver); st != 0)
        throw Error("device cuda: cusolverDnCreate failed (cuSOLVER status " + std::to_string(st) +
                    ")");
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
    On(GpuLapack& l, PerDevice& d, int device) : l(l), d(d), device(device) {}
    GpuLapack& l;
    PerDevice& d;
    int device;

    void* alloc(size_t bytes) override {
      CUdeviceptr p = 0;
      check(driver().mem_alloc(&p, bytes), "cuMemAlloc (a LAPACK workspace)");
      return reinterpret_cast<void*>(p);
    }
    void free(void* p) override {
      if (p) driver().mem_free(dptr(p));
    }
    void zero(void* p, size_t bytes) override {
      check(driver().memset8(dptr(p), 0, bytes), "cuMemsetD8");
    }
    void to_host(void* dst, const void* src, size_t bytes) override {
      check(driver().dtoh(dst, dptr(src), bytes), "cuMemcpyDtoH (a LAPACK call)");
    }
    void to_device(void* dst, const void* src, size_t bytes) override {
      check(driver().htod(dptr(dst), src, bytes), "cuMemcpyHtoD (a LAPACK call)");
    }
    void copy(size_t es, int64_t rows, int64_t cols, const void* src, int64_t ss0, int64_t ss1,
              void* dst, int64_t ds0, int64_t ds1, int part, int* nonfinite) override {
      if (rows == 0 || cols == 0) return;
      CUfunction k = (es == 8 ? l.copy8_ : l.copy4_).get(device);
      long long r = rows, c = cols, a0 = ss0, a1 = ss1, b0 = ds0, b1 = ds1;
      CUdeviceptr s = dptr(src), t = dptr(dst), flag = dptr(nonfinite);
      void* params[] = {&r, &c, &s, &a0, &a1, &t, &b0, &b1, &part, &flag};
      launch_grid_stride(k, rows * cols, params, "cuLaunchKernel (a LAPACK call's copy)");
    }
    void gemm_tt(DType t, int r, int m, int n, const void* a, const void* b, void* c) override {
      if (!d.blas) check_cublas(cublas().create(&d.blas), "cublasCreate");
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
