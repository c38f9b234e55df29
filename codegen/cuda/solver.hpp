// LAPACK calls through cuSOLVER's dense API (cusolverDn), written once for the GPU and cuda-emu:
// the GPU binds the routine table to libcusolver (device.cpp), cuda-emu to the host's LAPACK
// behind the same signatures (host_solver.cpp), so cuda-emu runs the GPU's sequence of
// routines, workspaces and copies on its emulated memory, without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "codegen/library.hpp"
#include "ir/linalg.hpp"

namespace kiln::cuda {

// cuSOLVER's types and constants, as cusolverDn.h and cublas_api.h declare them.
using SolverHandle = struct cusolverDnContext*;
constexpr int kSolverOpN = 0;         // CUBLAS_OP_N
constexpr int kSolverFillLower = 0;   // CUBLAS_FILL_MODE_LOWER
constexpr int kSolverEigVectors = 1;  // CUSOLVER_EIG_MODE_VECTOR

// The routines (32-bit dimensions; status 0: success; info through a pointer in device memory).
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
};

// The host's LAPACK (OpenBLAS, one thread) behind cuSOLVER's signatures, on host memory:
// cuda-emu's cuSOLVER (host_solver.cpp).
template <class T>
const SolverFns<T>& host_solver();

// The memory and kernels one call runs on: a GPU's (device.cpp) or an emulated device's
// (emu.cpp). Pointers are in that device's memory; copies and kernels are ordered as issued.
class SolverDevice {
 public:
  virtual ~SolverDevice() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void to_device(void* dst, const void* src, size_t bytes) = 0;
  // The strided copy kernel: element (i, j) of a rows x cols matrix from src[i * ss0 + j * ss1]
  // to dst[i * ds0 + j * ds1] (strides in elements of es bytes, any sign); part 1 keeps the upper
  // triangle (zeros below the diagonal), 2 the lower; a non-null `nonfinite` is set to 1 when a
  // value copied is NaN or infinite.
  virtual void copy(size_t es, int64_t rows, int64_t cols, const void* src, int64_t ss0,
                    int64_t ss1, void* dst, int64_t ds0, int64_t ds1, int part, int* nonfinite) = 0;
  // C (r x m, column-major, ld r) = A^T B^T for A (n x r, ld n) and B (m x n, ld m): cuBLAS's
  // gemm with both operands transposed (TSQR's apply).
  virtual void gemm_tt(DType t, int r, int m, int n, const void* a, const void* b, void* c) = 0;
};

// Runs LAPACK function f (gpu_lapack_runs) on a and b in dev's memory through the routines fn,
// writing the packed result (ir/linalg.hpp) row-major to out, as library::lapack does on the
// host: the same errors (library::non_finite, lapack_error, singular), values within rounding.
// TSQR's R step asks for the refactoring apply (info[0] = 0): cuSOLVER has no condition estimate.
template <class T>
void solver_lapack(SolverDevice& dev, const SolverFns<T>& fn, SolverHandle h, LinalgFn f,
                   const library::MatrixRef& a, const library::MatrixRef* b, T* out);

}  // namespace kiln::cuda
