// Library calls: the host BLAS routines that library nodes (MatMul) run on blocks. The one place
// that calls BLAS (codegen/blas.hpp), with codegen/cuda/host_solver.cpp's LAPACK. The runtime calls
// these from its block tasks.
//
// Threads: a call runs on the calling worker's thread only (OpenBLAS is set to one thread before
// each call if it is not): Kiln's workers already run one block task per core, and OpenBLAS's
// own threads on top would oversubscribe the cores. Parallelism comes from the blocks (the plan
// splits a large product into enough row panels for every core). The exception: a LAPACK call
// that the plan proves runs alone (every other group of the plan runs before or after it:
// TSQR's small factorizations) gets the run's threads, unless it is small (m n min(m, n) under
// 2^26: OpenBLAS's idle threads spin after a threaded call, taking the cores from the kernels
// that follow).
#pragma once
#include <cstdint>
#include <string>

#include "ir/dtype.hpp"
#include "ir/functions.hpp"

namespace kiln::library {

// OpenBLAS on the calling thread only, for the calls that follow (every call here sets it).
void single_threaded_blas();

// The BLAS that library calls run on, as it describes itself: its name and version, its build
// configuration, and the kernel family (OpenBLAS's "core") it picked for this CPU. `generic`: a
// core older than AVX2 on a host that has AVX2, i.e. the library did not recognize the CPU and
// runs products several times below its speed (OPENBLAS_CORETYPE overrides the choice). The first
// library call warns once on stderr when it is.
struct BlasInfo {
  std::string library, version, config, core;
  bool generic = false;
};
const BlasInfo& blas_info();

// C (m x n, row-major, leading dimension ldc) = op(A) * op(B), or C += op(A) * op(B) when
// `accumulate`, where op(A) is m x k and op(B) k x n; A is stored row-major with leading
// dimension lda as m x k, or as k x m when trans_a (and likewise B). float32 or float64. A
// product with k == 0 is zeros. Vectors go to gemv (n == 1 or m == 1), A^T A (trans_a, the same
// memory and leading dimension for both, m == n) to syrk and its mirror, everything else to gemm.
// Throws kiln::Error when a dimension or leading dimension does not fit BLAS's 32-bit integers.
void gemm(DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
          int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc, bool accumulate = false);

// C (m x n, ldc) += P (m x n, contiguous): the fixed-order sum of a product's partial results.
void add_into(DType t, int64_t m, int64_t n, void* c, int64_t ldc, const void* p);

// The routine gemm() calls for these shapes ("dgemm", "sgemv", ...), for --emit-ir.
std::string routine_name(DType t, int64_t m, int64_t n);

}  // namespace kiln::library

namespace kiln {
enum class LinalgFn : uint8_t;
}

namespace kiln::library {

// A matrix read in place: element (i, j) at data[offset + i * row_stride + j * col_stride].
struct MatrixRef {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t offset = 0, row_stride = 0, col_stride = 0;
};

// Runs LAPACK's f on a copy of a (and of b, for Solve and Lstsq) in dtype t, writing the packed
// result (ir/linalg.hpp: linalg_parts, each part row-major) to `out`, with OpenBLAS on `threads`
// threads (1 unless the plan knows nothing else runs meanwhile: PlanLibrary::exclusive). Throws
// kiln::Error naming the operation for non-finite input, a singular matrix (solve, inv), a matrix
// that is not positive definite (cholesky) and a factorization that did not converge (svd, eigh,
// lstsq), with LAPACK's info.
void lapack(LinalgFn f, DType t, const MatrixRef& a, const MatrixRef* b, void* out,
            int threads = 1);

// The errors of LAPACK calls, one wording for every device that runs them: the operation an
// error names (NumPy's function, or for TSQR's steps the functions they serve), LAPACK's info.
std::string op_name(LinalgFn f);
[[noreturn]] void lapack_error(LinalgFn f, const std::string& what, int info);
// getrf's and gesv's info > 0: U(info, info) is exactly zero.
[[noreturn]] void singular(LinalgFn f, int info);
[[noreturn]] void non_finite(LinalgFn f);

// ---- cuRAND's bulk generator (random::Engine::Curand) -----------------------------------------
// libcurand is loaded at run time (codegen/cuda/curand.cpp), so Kiln builds and runs without it.

// The cuRAND seed of the `stream`-th array a Generator(seed, Engine::Curand) makes.
uint64_t curand_seed(uint64_t seed, int64_t stream);

// Whether libcurand loads with every function Kiln calls (no GPU needed); if not, why.
bool curand_available(std::string* why);

// out[i] = element offset + i of cuRAND's Philox4_32_10 sequence for `seed` (kind Normal: normal
// doubles; Uniform: uniform doubles in (0, 1]), by cuRAND's host generator: for every offset and
// count, the elements of one generation of the whole sequence (so the values do not depend on how
// an array is split into calls). Throws kiln::Error when cuRAND cannot be loaded or fails.
void curand_host(RandomKind kind, uint64_t seed, int64_t offset, int64_t count, double* out);

}  // namespace kiln::library
