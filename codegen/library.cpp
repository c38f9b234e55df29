#include "codegen/library.hpp"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "support/error.hpp"

namespace kiln::library {

namespace {

blasint fit(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<blasint>::max())
    throw Error(std::string("matmul: ") + what + " " + std::to_string(v) +
                " does not fit BLAS's 32-bit integers; use smaller chunks");
  return static_cast<blasint>(v);
}

// Checked before every call (a cheap read), since the program may set OpenBLAS's threads too.
void single_threaded_blas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

template <class T>
void zero(int64_t m, int64_t n, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, T(0));
}

template <class T>
void gemm_typed(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0 || (k == 0 && accumulate)) return;
  if (k == 0) return zero(m, n, c, ldc);
  const T beta = accumulate ? T(1) : T(0);
  single_threaded_blas();
  const CBLAS_ORDER rm = CblasRowMajor;
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  blasint M = fit(m, "rows"), N = fit(n, "columns"), K = fit(k, "contracted length");
  blasint LDA = fit(lda, "leading dimension"), LDB = fit(ldb, "leading dimension");
  blasint LDC = fit(ldc, "leading dimension");
  if (n == 1) {
    // c[:, 0] = op(A) b[:, 0]; b's column steps by ldb (stored k x 1) or by 1 (stored 1 x k).
    blasint incb = tb ? 1 : LDB;
    blasint rows = ta ? K : M, cols = ta ? M : K;
    if constexpr (std::is_same_v<T, double>)
      cblas_dgemv(rm, op(ta), rows, cols, 1.0, a, LDA, b, incb, beta, c, LDC);
    else
      cblas_sgemv(rm, op(ta), rows, cols, 1.0f, a, LDA, b, incb, beta, c, LDC);
    return;
  }
  if (m == 1) {
    // c[0, :] = op(B)^T a[0, :]; a's row steps by 1 (stored 1 x k) or by lda (stored k x 1).
    blasint inca = ta ? LDA : 1;
    blasint rows = tb ? N : K, cols = tb ? K : N;
    if constexpr (std::is_same_v<T, double>)
      cblas_dgemv(rm, op(!tb), rows, cols, 1.0, b, LDB, a, inca, beta, c, 1);
    else
      cblas_sgemv(rm, op(!tb), rows, cols, 1.0f, b, LDB, a, inca, beta, c, 1);
    return;
  }
  if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(rm, op(ta), op(tb), M, N, K, 1.0, a, LDA, b, LDB, beta, c, LDC);
  else
    cblas_sgemm(rm, op(ta), op(tb), M, N, K, 1.0f, a, LDA, b, LDB, beta, c, LDC);
}

}  // namespace

void gemm(DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
          int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc, bool accumulate) {
  if (t == DType::Float64)
    gemm_typed(trans_a, trans_b, m, n, k, static_cast<const double*>(a), lda,
               static_cast<const double*>(b), ldb, static_cast<double*>(c), ldc, accumulate);
  else if (t == DType::Float32)
    gemm_typed(trans_a, trans_b, m, n, k, static_cast<const float*>(a), lda,
               static_cast<const float*>(b), ldb, static_cast<float*>(c), ldc, accumulate);
  else
    throw InternalError(std::string("library::gemm on ") + dtype_name(t));
}

void add_into(DType t, int64_t m, int64_t n, void* c, int64_t ldc, const void* p) {
  auto add = [&](auto* cc, const auto* pp) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) cc[i * ldc + j] += pp[i * n + j];
  };
  if (t == DType::Float64)
    add(static_cast<double*>(c), static_cast<const double*>(p));
  else if (t == DType::Float32)
    add(static_cast<float*>(c), static_cast<const float*>(p));
  else
    throw InternalError(std::string("library::add_into on ") + dtype_name(t));
}

std::string routine_name(DType t, int64_t m, int64_t n) {
  std::string s = t == DType::Float32 ? "s" : "d";
  return s + (m == 1 || n == 1 ? "gemv" : "gemm");
}

}  // namespace kiln::library
