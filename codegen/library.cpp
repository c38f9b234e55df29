#include "codegen/library.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

#include "codegen/blas.hpp"
#include "codegen/gram.hpp"
#include "codegen/lapack.hpp"
#include "ir/linalg.hpp"

#include "support/error.hpp"
#include "support/pages.hpp"

namespace kiln::library {

namespace {

blasint fit(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<blasint>::max())
    throw Error(std::string("matmul: ") + what + " " + std::to_string(v) +
                " does not fit BLAS's 32-bit integers; use smaller chunks");
  return static_cast<blasint>(v);
}

// ThreadSanitizer cannot see OpenBLAS's own hand-offs between its threads (libopenblas is not
// instrumented; it reports races inside dscal_k and friends), so TSan builds keep BLAS on the
// calling thread, as they keep the executor off oneTBB (runtime/execute.cpp).
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadedBlas = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadedBlas = false;
#else
constexpr bool kThreadedBlas = true;
#endif
#else
constexpr bool kThreadedBlas = true;
#endif

// OpenBLAS's kernel families that predate AVX2 (its "core" names, as openblas_get_corename
// returns them): on an AVX2 host, a sign that it did not recognize the CPU.
bool core_before_avx2(const std::string& core) {
  static const char* const old[] = {"Katmai",    "Coppermine",   "Northwood",   "Prescott",
                                    "Banias",    "Core2",        "Penryn",      "Dunnington",
                                    "Nehalem",   "Sandybridge",  "Atom",        "Nano",
                                    "Opteron",   "Opteron_SSE3", "Barcelona",   "Bobcat",
                                    "Bulldozer", "Piledriver",   "Steamroller", "Generic"};
  for (const char* o : old)
    if (core == o) return true;
  return false;
}

void warn_if_generic() {
  const BlasInfo& b = blas_info();
  if (!b.generic) return;
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string why = forced && *forced
                              ? std::string("as OPENBLAS_CORETYPE=") + forced + " asks"
                              : "it does not recognize this CPU";
  std::fprintf(stderr,
               "kiln: warning: %s %s runs its '%s' kernels on this AVX2%s host (%s): matrix "
               "products and decompositions run several times below this CPU's speed; "
               "OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell, Zen) chooses its kernels\n",
               b.library.c_str(), b.version.c_str(), b.core.c_str(),
               __builtin_cpu_supports("avx512f") ? "/AVX-512" : "", why.c_str());
}

// OpenBLAS's threads for the next calls; checked before every call (a cheap read), since the
// program may set them too. The first call also warns about a generic core.
void blas_threads(int threads) {
  static const bool warned = (warn_if_generic(), true);
  (void)warned;
  threads = kThreadedBlas ? std::max(threads, 1) : 1;
  if (KILN_OPENBLAS(get_num_threads)() != threads) KILN_OPENBLAS(set_num_threads)(threads);
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
      KILN_CBLAS(dgemv)(rm, op(ta), rows, cols, 1.0, a, LDA, b, incb, beta, c, LDC);
    else
      KILN_CBLAS(sgemv)(rm, op(ta), rows, cols, 1.0f, a, LDA, b, incb, beta, c, LDC);
    return;
  }
  if (m == 1) {
    // c[0, :] = op(B)^T a[0, :]; a's row steps by 1 (stored 1 x k) or by lda (stored k x 1).
    blasint inca = ta ? LDA : 1;
    blasint rows = tb ? N : K, cols = tb ? K : N;
    if constexpr (std::is_same_v<T, double>)
      KILN_CBLAS(dgemv)(rm, op(!tb), rows, cols, 1.0, b, LDB, a, inca, beta, c, 1);
    else
      KILN_CBLAS(sgemv)(rm, op(!tb), rows, cols, 1.0f, b, LDB, a, inca, beta, c, 1);
    return;
  }
  if (ta && !tb && a == b && lda == ldb && m == n) {
    // S^T S of one operand (a Gram matrix, X^T X): the upper triangle, about half the
    // multiplications, by Kiln's Gram kernel for few columns (1.3-1.8x OpenBLAS's dsyrk there,
    // codegen/gram.cpp) or by syrk; the lower one is its mirror (the whole of c, accumulated or
    // not, is then the sum).
    if constexpr (std::is_same_v<T, double>) {
      if (gram_fits(n))
        gram_upper(n, k, a, lda, c, ldc, accumulate);
      else
        KILN_CBLAS(dsyrk)(rm, CblasUpper, CblasTrans, N, K, 1.0, a, LDA, beta, c, LDC);
    } else {
      KILN_CBLAS(ssyrk)(rm, CblasUpper, CblasTrans, N, K, 1.0f, a, LDA, beta, c, LDC);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < i; ++j) c[i * ldc + j] = c[j * ldc + i];
    return;
  }
  if constexpr (std::is_same_v<T, double>)
    KILN_CBLAS(dgemm)(rm, op(ta), op(tb), M, N, K, 1.0, a, LDA, b, LDB, beta, c, LDC);
  else
    KILN_CBLAS(sgemm)(rm, op(ta), op(tb), M, N, K, 1.0f, a, LDA, b, LDB, beta, c, LDC);
}

}  // namespace

void single_threaded_blas() { blas_threads(1); }

const BlasInfo& blas_info() {
  static const BlasInfo info = [] {
    BlasInfo b;
    b.library = "OpenBLAS";
    const char* config = KILN_OPENBLAS(get_config)();
    const char* core = KILN_OPENBLAS(get_corename)();
    b.config = config ? config : "";
    b.core = core ? core : "";
    // The configuration starts "OpenBLAS <version> ...".
    std::istringstream words(b.config);
    std::string name;
    words >> name >> b.version;
    b.generic = __builtin_cpu_supports("avx2") && core_before_avx2(b.core);
    return b;
  }();
  return info;
}

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

// ---- LAPACK ----------------------------------------------------------------------------------

namespace kiln::library {

std::string op_name(LinalgFn f) {
  const bool tsqr = f == LinalgFn::TsqrR || f == LinalgFn::TsqrMix || f == LinalgFn::TsqrApply;
  return tsqr ? std::string("qr/svd (TSQR step ") + linalg_name(f) + " on a row block)"
              : std::string(linalg_name(f));
}

void lapack_error(LinalgFn f, const std::string& what, int info) {
  throw Error(op_name(f) + ": " + what + " (LAPACK " + linalg_routines(f) +
              " info = " + std::to_string(info) + ")");
}

void singular(LinalgFn f, int info) {
  lapack_error(f,
               "the matrix is singular (U(" + std::to_string(info) + ", " + std::to_string(info) +
                   ") is exactly zero)",
               info);
}

void non_finite(LinalgFn f) {
  throw Error(op_name(f) +
              ": the input has non-finite values (NaN or inf); a factorization of it would be "
              "meaningless");
}

namespace {

// Copies a rows x cols matrix from (offset, row_stride, col_stride) to dst, element (i, j) at
// dst[i * dst_row + j * dst_col], in 64 x 64 tiles (a transposing copy keeps whole tiles in
// cache). Checks that every value is finite.
template <class T>
void checked_copy(LinalgFn f, const MatrixRef& m, T* dst, int64_t dst_row, int64_t dst_col) {
  constexpr int64_t kTile = 64;
  const T* src = static_cast<const T*>(m.data);
  bool finite = true;
  for (int64_t i0 = 0; i0 < m.rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < m.cols; j0 += kTile)
      for (int64_t j = j0; j < std::min(m.cols, j0 + kTile); ++j)
        for (int64_t i = i0; i < std::min(m.rows, i0 + kTile); ++i) {
          T v = src[m.offset + i * m.row_stride + j * m.col_stride];
          finite = finite && std::isfinite(v);
          dst[i * dst_row + j * dst_col] = v;
        }
  if (!finite) non_finite(f);
}

// An uninitialized workspace (LAPACK overwrites its input, so it factorizes a copy), zeroed
// only where the copy does not cover it (rows beyond the matrix's, for lstsq's b); large ones on
// huge pages.
struct FreeWorkspace {
  size_t bytes = 0;
  void operator()(void* p) const { page_free(p, bytes); }
};

template <class T>
struct Workspace {
  std::unique_ptr<T[], FreeWorkspace> mem;
  T* data() { return mem.get(); }
  T& operator[](size_t i) { return mem[i]; }
  const T& operator[](size_t i) const { return mem[i]; }
};

template <class T>
Workspace<T> column_major(LinalgFn f, const MatrixRef& m, int64_t ld, int64_t cols) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(ld, 1) * std::max<int64_t>(cols, 1));
  auto* p = static_cast<T*>(page_alloc(n * sizeof(T)));
  if (!p)
    throw Error("linalg." + op_name(f) + ": out of memory for a " + std::to_string(n * sizeof(T)) +
                    "-byte LAPACK workspace",
                ErrorKind::Memory);
  Workspace<T> w{std::unique_ptr<T[], FreeWorkspace>(p, FreeWorkspace{n * sizeof(T)})};
  if (ld > m.rows || cols > m.cols) std::fill_n(w.data(), n, T(0));
  checked_copy(f, m, w.data(), 1, ld);
  return w;
}

// Writes the rows x cols column-major matrix w (leading dimension ld) to out, row-major, in tiles.
template <class T>
T* store(T* out, const T* w, int64_t ld, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile)
      for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j) out[i * cols + j] = w[i + j * ld];
  return out + rows * cols;
}

// Writes the upper triangle (trapezoid) of the rows x cols column-major w to out, row-major, with
// zeros below the diagonal: R of a QR factorization.
template <class T>
T* store_upper(T* out, const T* w, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) *out++ = j >= i ? w[i + j * ld] : T(0);
  return out;
}

// A workspace query (lwork = -1) gives the optimal size in work[0].
int work_size(double w) { return static_cast<int>(std::max(1.0, w)); }

// The sign and log|det| from an LU factorization (getrf) of an n x n matrix.
template <class T>
void lu_slogdet(const Workspace<T>& lu, const std::vector<int>& ipiv, int n, int info, T* sign,
                T* logdet) {
  if (info > 0) {  // exactly singular
    *sign = 0;
    *logdet = -std::numeric_limits<T>::infinity();
    return;
  }
  T s = 1, l = 0;
  for (int i = 0; i < n; ++i) {
    T d = lu[static_cast<size_t>(i) * n + i];
    if (ipiv[i] != i + 1) s = -s;
    if (d < 0) s = -s;
    l += std::log(std::abs(d));
  }
  *sign = s;
  *logdet = l;
}

// BLAS level 3 on column-major matrices, d or s.
void syrk_upper(int n, int k, const double* a, double* c) {  // C = A A^T, A n x k (ld n)
  KILN_CBLAS(dsyrk)(CblasColMajor, CblasUpper, CblasNoTrans, n, k, 1.0, a, n, 0.0, c, n);
}
void syrk_upper(int n, int k, const float* a, float* c) {
  KILN_CBLAS(ssyrk)(CblasColMajor, CblasUpper, CblasNoTrans, n, k, 1.0f, a, n, 0.0f, c, n);
}
void gemm_tn(int n, int m, const double* a, const double* b, double* c) {  // C = A^T B, n x m
  KILN_CBLAS(dgemm)(CblasColMajor, CblasTrans, CblasNoTrans, n, m, n, 1.0, a, n, b, n, 0.0, c, n);
}
void gemm_tn(int n, int m, const float* a, const float* b, float* c) {
  KILN_CBLAS(sgemm)(CblasColMajor, CblasTrans, CblasNoTrans, n, m, n, 1.0f, a, n, b, n, 0.0f, c, n);
}
void trmm_upper(int n, const double* u, double* b) {  // B = U B, both n x n upper
  KILN_CBLAS(dtrmm)
  (CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0, u, n, b, n);
}
void trmm_upper(int n, const float* u, float* b) {
  KILN_CBLAS(strmm)
  (CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0f, u, n, b, n);
}

// One CholeskyQR step on Qt (n x m, column-major: Q row-major m x n): G = Qt Qt^T = Q^T Q, its
// Cholesky factor U (upper, G = U^T U) into u, then Q = Q U^-1. Refuses (false, Q untouched) when
// G is not numerically positive definite or U's reciprocal condition number (LAPACK trcon's
// 1-norm estimate, = 1/cond(Q)) is below min_rcond.
template <class T>
bool cholesky_qr_step(int m, int n, T* qt, T* u, T min_rcond) {
  using L = Lapack<T>;
  syrk_upper(n, m, qt, u);
  int info = 0;
  L::potrf("U", &n, u, &n, &info);
  if (info != 0) return false;
  T rcond = 0;
  std::vector<T> work(3 * static_cast<size_t>(n));
  std::vector<int> iwork(n);
  L::trcon("1", "U", "N", &n, u, &n, &rcond, work.data(), iwork.data(), &info);
  if (info != 0 || !(rcond >= min_rcond)) return false;
  // Q = Q U^-1 as Qt = U^-T Qt with U's explicit inverse (well conditioned: checked above), in
  // panels of columns of Qt through a cache-sized buffer: OpenBLAS's trsm with a 100 x 100
  // triangle runs at a fifth of gemm's speed.
  std::vector<T> inv(u, u + static_cast<size_t>(n) * n);
  L::trtri("U", "N", &n, inv.data(), &n, &info);
  if (info != 0) return false;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j) inv[i + static_cast<size_t>(j) * n] = 0;  // below the diagonal
  const int panel = std::max(1, (1 << 17) / std::max(n, 1));
  std::vector<T> tmp(static_cast<size_t>(n) * panel);
  for (int c = 0; c < m; c += panel) {
    int w = std::min(panel, m - c);
    T* cols = qt + static_cast<size_t>(c) * n;
    gemm_tn(n, w, inv.data(), cols, tmp.data());
    std::copy(tmp.begin(), tmp.begin() + static_cast<size_t>(n) * w, cols);
  }
  return true;
}

// QR of a tall matrix (m >= 16 n) by CholeskyQR2 (Yamamoto et al.: CholeskyQR twice is as
// orthogonal as Householder QR when cond(a) < u^-1/2; here required below 1e6 in float64, 100 in
// float32, by LAPACK's estimate): level-3 BLAS on a's row-major copy written straight into Q's
// part of the result, no transposes. Returns false (nothing written but Q's part) for a matrix
// too ill-conditioned for it.
template <class T>
bool cholesky_qr2(LinalgFn f, const MatrixRef& a, int m, int n, T* out) {
  const T min_rcond = std::is_same_v<T, double> ? T(1e-6) : T(1e-2);
  T* q = out;  // row-major m x n = column-major qt, n x m
  checked_copy(f, a, q, n, 1);
  std::vector<T> u1(static_cast<size_t>(n) * n), u2(static_cast<size_t>(n) * n);
  if (!cholesky_qr_step(m, n, q, u1.data(), min_rcond)) return false;
  if (!cholesky_qr_step(m, n, q, u2.data(), T(0.5))) return false;  // Q is nearly orthogonal now
  trmm_upper(n, u2.data(), u1.data());                              // R = U2 U1
  store_upper(out + static_cast<size_t>(m) * n, u1.data(), n, n, n);
  return true;
}

// QR of a tall matrix (m >= 16 n, column-major in w) by LAPACK's own TSQR (latsqr over row
// blocks of mb that fit in cache, then orgtsqr for Q): 2.7x faster than geqrf + orgqr on
// 100000 x 100 (one Zen 4 core), where geqrf's panels stream the whole block per column.
template <class T>
void tall_qr(int m, int n, Workspace<T>& w, T* out) {
  using L = Lapack<T>;
  const int mb = std::max(2 * n, 1024), nb = std::min(n, 32), ldt = nb;
  const int blocks = (m - n + (mb - n) - 1) / (mb - n) + 1;
  std::vector<T> t(static_cast<size_t>(ldt) * n * blocks);
  int info = 0, lwork = -1;
  T query = 0;
  L::latsqr(&m, &n, &mb, &nb, w.data(), &m, t.data(), &ldt, &query, &lwork, &info);
  std::vector<T> work(work_size(query));
  lwork = static_cast<int>(work.size());
  L::latsqr(&m, &n, &mb, &nb, w.data(), &m, t.data(), &ldt, work.data(), &lwork, &info);
  store_upper(out + static_cast<size_t>(m) * n, w.data(), m, n, n);
  lwork = -1;
  L::orgtsqr(&m, &n, &mb, &nb, w.data(), &m, t.data(), &ldt, &query, &lwork, &info);
  work.resize(work_size(query));
  lwork = static_cast<int>(work.size());
  L::orgtsqr(&m, &n, &mb, &nb, w.data(), &m, t.data(), &ldt, work.data(), &lwork, &info);
  if (info != 0) throw InternalError("latsqr/orgtsqr info " + std::to_string(info));
  store(out, w.data(), m, m, n);
}

// ---- TSQR's steps on one row block (frontend/decompose.cpp) ---------------------------------
// TsqrR factors block X_i = Q_i R_i keeping only R_i; the stacked R factors are factored at the
// next level, which hands each block an n x r matrix M_i; TsqrMix and TsqrApply then write
// Q_i M_i, block i's rows of the result, without Q_i ever being stored. When R_i is well
// conditioned (LAPACK's 1-norm estimate rcond >= kOneProductRcond), Q_i M_i = X_i (R_i^-1 M_i):
// one product over the block, whose error grows with cond(X_i) (measured on 1e5 x 100: U's
// orthogonality 3e-15 at cond 100, as with Householder's Q; 2e-13 at 1e4; 1e-11 at 1e6). Else
// TsqrApply factors X_i again, bit for bit as TsqrR did (same routine, block sizes and one
// thread), forms Q_i and multiplies. TsqrR's info row says which: info[0] = 1 for the product,
// 0 for the refactorization; info[1] = the estimate.

template <class T>
constexpr T kOneProductRcond = std::is_same_v<T, double> ? T(1e-3) : T(1e-1);

// Householder QR of the column-major m x n block w (ld m, m >= n) in place, forming its Q in w
// when form_q: LAPACK's TSQR (latsqr, then orgtsqr) for tall blocks, geqrt (then gemqrt) else. R
// only with small panels (nb 8) is fastest on 1e5 x 100 (0.07 s on one Zen 4 core, geqrf 0.32).
template <class T>
void householder(LinalgFn f, int m, int n, T* w, bool form_q) {
  using L = Lapack<T>;
  int info = 0, lwork = -1;
  T query = 0;
  std::vector<T> work;
  if (m >= 16 * n) {
    const int mb = std::max(2 * n, 1024), nb = std::min(n, 8), ldt = nb;
    const int blocks = (m - n + (mb - n) - 1) / (mb - n) + 1;
    std::vector<T> t(static_cast<size_t>(ldt) * n * blocks);
    L::latsqr(&m, &n, &mb, &nb, w, &m, t.data(), &ldt, &query, &lwork, &info);
    if (form_q) {
      T q2 = 0;
      L::orgtsqr(&m, &n, &mb, &nb, w, &m, t.data(), &ldt, &q2, &lwork, &info);
      query = std::max(query, q2);
    }
    work.resize(work_size(query));
    lwork = static_cast<int>(work.size());
    L::latsqr(&m, &n, &mb, &nb, w, &m, t.data(), &ldt, work.data(), &lwork, &info);
    if (info == 0 && form_q)
      L::orgtsqr(&m, &n, &mb, &nb, w, &m, t.data(), &ldt, work.data(), &lwork, &info);
  } else {
    // geqrt's recursive panels: 0.180 s against geqrf's 0.217 for 5000 x 1000 on one core of an
    // Intel Xeon (AVX-512), NumPy's OpenBLAS through SciPy; Q (the rare refactorization) is then
    // its reflectors applied to [I; 0] (gemqrt).
    const int nb = std::max(1, std::min(n, 64)), ldt = nb;
    std::vector<T> t(static_cast<size_t>(ldt) * std::max(n, 1));
    work.resize(static_cast<size_t>(nb) * std::max(n, 1));
    L::geqrt(&m, &n, &nb, w, &m, t.data(), &ldt, work.data(), &info);
    if (info == 0 && form_q) {
      const size_t mn = static_cast<size_t>(m) * n;
      std::vector<T> q(mn, T(0));
      for (int j = 0; j < n; ++j) q[j + static_cast<size_t>(j) * m] = T(1);
      L::gemqrt("L", "N", &m, &n, &n, &nb, w, &m, t.data(), &ldt, q.data(), &m, work.data(), &info);
      std::copy_n(q.data(), mn, w);
    }
  }
  if (info != 0) lapack_error(f, "the block's QR factorization failed", info);
}

// The first `rows` rows of m (a view of the same memory).
MatrixRef top_rows(const MatrixRef& m, int64_t rows) {
  MatrixRef r = m;
  r.rows = rows;
  return r;
}

// Element (i, j) of m.
template <class T>
T element(const MatrixRef& m, int64_t i, int64_t j) {
  return static_cast<const T*>(m.data)[m.offset + i * m.row_stride + j * m.col_stride];
}

// LAPACK's estimate (trcon, 1-norm) of the reciprocal condition of the upper triangular n x n r
// (column-major, leading dimension ld); 0 where trcon fails.
template <class T>
T upper_rcond(int n, const T* r, int ld) {
  T rcond = 0;
  int status = 0;
  std::vector<T> work(3 * static_cast<size_t>(n));
  std::vector<int> iwork(n);
  Lapack<T>::trcon("1", "U", "N", &n, r, &ld, &rcond, work.data(), iwork.data(), &status);
  return status == 0 ? rcond : T(0);
}

// a = X_i (m x n, m >= n): R_i (n x n), then the info row.
template <class T>
void tsqr_r(LinalgFn f, const MatrixRef& a, int m, int n, T* out) {
  Workspace<T> w = column_major<T>(f, a, m, n);
  householder(f, m, n, w.data(), false);
  T* info = store_upper(out, w.data(), m, n, n);
  std::fill_n(info, n, T(0));
  const T rcond = upper_rcond(n, w.data(), m);
  info[0] = rcond >= kOneProductRcond<T> ? T(1) : T(0);
  if (n > 1) info[1] = rcond;
}

// a = [R_i; info] ((n + 1) x n), b = M_i (n x r): W = R_i^-1 M_i (or M_i itself when Q_i is to
// be formed), then an info row passing the mode on.
template <class T>
void tsqr_mix(LinalgFn f, const MatrixRef& a, const MatrixRef& b, int n, int r, T* out) {
  checked_copy(f, b, out, r, 1);
  const bool product = element<T>(a, n, 0) == T(1);
  if (product && r > 0) {
    std::vector<T> rm(static_cast<size_t>(n) * n);
    checked_copy(f, top_rows(a, n), rm.data(), n, 1);
    if constexpr (std::is_same_v<T, double>) {
      KILN_CBLAS(dtrsm)
      (CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, r, 1.0, rm.data(), n,
       out, r);
    } else {
      KILN_CBLAS(strsm)
      (CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, r, 1.0f, rm.data(), n,
       out, r);
    }
  }
  T* info = out + static_cast<size_t>(n) * r;
  std::fill_n(info, r, T(0));
  if (r > 0) info[0] = product ? T(1) : T(0);
}

// out (m x r, row-major) = a (m x n) times wm (n x r, row-major), reading a in place when BLAS
// can: row-major (rows step by ld >= n, elements by 1) or column-major; anything else (reversed
// or strided views) through a column-major copy.
template <class T>
void times(LinalgFn f, const MatrixRef& a, int m, int n, const T* wm, int r, T* out) {
  const T* x = static_cast<const T*>(a.data) + a.offset;
  const bool by_rows = (a.cols <= 1 || a.col_stride == 1) && (a.rows <= 1 || a.row_stride >= n);
  const bool by_cols = (a.rows <= 1 || a.row_stride == 1) && (a.cols <= 1 || a.col_stride >= m);
  if (by_rows) {
    // In panels of rows of about 2 MiB: 30% faster than one call for 1e5 x 100 (OpenBLAS
    // 0.3.21, one Zen 4 core: 0.054 against 0.078 s), no change for 5000 x 1000.
    const int64_t ld = a.rows <= 1 ? n : a.row_stride;
    const int64_t panel = std::max<int64_t>(256, (int64_t{1} << 18) / std::max(n, 1));
    for (int64_t i = 0; i < m; i += panel)
      gemm_typed(false, false, std::min<int64_t>(panel, m - i), r, n, x + i * ld, ld, wm, r,
                 out + i * r, r, false);
    return;
  }
  if (by_cols)
    return gemm_typed(true, false, m, r, n, x, a.cols <= 1 ? m : a.col_stride, wm, r, out, r,
                      false);
  Workspace<T> w = column_major<T>(f, a, m, n);
  gemm_typed(true, false, m, r, n, w.data(), m, wm, r, out, r, false);
}

// a = X_i (m x n), b = [W; info] ((n + 1) x r): Q_i M_i (m x r).
template <class T>
void tsqr_apply(LinalgFn f, const MatrixRef& a, const MatrixRef& b, int m, int n, int r, T* out) {
  std::vector<T> wm(static_cast<size_t>(n) * r);
  checked_copy(f, top_rows(b, n), wm.data(), r, 1);
  if (r == 0) return;
  if (element<T>(b, n, 0) == T(1)) return times(f, a, m, n, wm.data(), r, out);  // X_i W
  Workspace<T> w = column_major<T>(f, a, m, n);
  householder(f, m, n, w.data(), true);
  gemm_typed(true, false, m, r, n, w.data(), m, wm.data(), r, out, r, false);
}

// The thin SVD of a tall a (m >= 2n): a = Q R (geqrf), R = U_R S Vh (gesdd), U = Q U_R, written
// as a (R^-1 U_R) when R is well conditioned (as TSQR's blocks: the error of U's orthogonality
// grows with cond(R)), else as Q U_R (orgqr, then a product). gesdd of a itself takes the same
// QR first but always forms Q: for a 2000 x 1000 a (two 5000-row blocks' R factors stacked, on
// two threads of an Intel Xeon with AVX-512) 0.48 s, this 0.44, of which gesdd of R 0.28-0.32.
template <class T>
void tall_svd(LinalgFn f, const MatrixRef& a, int m, int n, T* out) {
  using L = Lapack<T>;
  Workspace<T> w = column_major<T>(f, a, m, n);
  const size_t nn = static_cast<size_t>(n) * n;
  std::vector<T> tau(n), r(nn, T(0)), s(n), ur(nn), vt(nn);
  std::vector<int> iwork(8 * static_cast<size_t>(n));
  int info = 0, lwork = -1;
  T q1 = 0, q2 = 0, q3 = 0;
  L::geqrf(&m, &n, w.data(), &m, tau.data(), &q1, &lwork, &info);
  L::orgqr(&m, &n, &n, w.data(), &m, tau.data(), &q2, &lwork, &info);
  L::gesdd("S", &n, &n, r.data(), &n, s.data(), ur.data(), &n, vt.data(), &n, &q3, &lwork,
           iwork.data(), &info);
  std::vector<T> work(work_size(std::max({q1, q2, q3})));
  lwork = static_cast<int>(work.size());
  L::geqrf(&m, &n, w.data(), &m, tau.data(), work.data(), &lwork, &info);
  for (int j = 0; j < n; ++j)
    std::copy_n(w.data() + static_cast<size_t>(j) * m, j + 1,
                r.data() + static_cast<size_t>(j) * n);
  const bool product = upper_rcond(n, r.data(), n) >= kOneProductRcond<T>;
  std::vector<T> rt;
  if (product) rt = r;  // gesdd overwrites r
  L::gesdd("S", &n, &n, r.data(), &n, s.data(), ur.data(), &n, vt.data(), &n, work.data(), &lwork,
           iwork.data(), &info);
  if (info > 0) lapack_error(f, "the SVD did not converge", info);
  if (product) {  // ur = R^-1 U_R (column-major), then a times it (row-major)
    if constexpr (std::is_same_v<T, double>) {
      KILN_CBLAS(dtrsm)
      (CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0, rt.data(), n,
       ur.data(), n);
    } else {
      KILN_CBLAS(strsm)
      (CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0f, rt.data(), n,
       ur.data(), n);
    }
    std::vector<T> wm(nn);
    store(wm.data(), ur.data(), n, n, n);
    times(f, a, m, n, wm.data(), n, out);
  } else {
    L::orgqr(&m, &n, &n, w.data(), &m, tau.data(), work.data(), &lwork, &info);
    gemm_typed(true, true, m, n, n, w.data(), m, ur.data(), n, out, n, false);
  }
  out += static_cast<size_t>(m) * n;
  out = std::copy(s.begin(), s.end(), out);
  store(out, vt.data(), n, n, n);
}

// m n min(m, n) below which a LAPACK call runs on one thread (about 2 ms of one core's work).
constexpr double kSmallLapackWork = 1 << 26;

template <class T>
void lapack_typed(LinalgFn f, const MatrixRef& a, const MatrixRef* b, T* out, int threads) {
  using L = Lapack<T>;
  // A small factorization runs on one thread: OpenBLAS's threads spin for a while after each
  // threaded call (about 0.1 s), taking the cores from the kernels that follow. A Newton GLM fit
  // (a 100 x 100 solve per iteration, 1e6 x 100 data) ran 17-25% slower with the solve on two
  // threads, its profile 14% in OpenBLAS's blas_thread_server.
  const double work = static_cast<double>(a.rows) * static_cast<double>(a.cols) *
                      static_cast<double>(std::min(a.rows, a.cols));
  if (work < kSmallLapackWork) threads = 1;
  blas_threads(threads);
  const int m = fit(a.rows, "rows"), n = fit(a.cols, "columns");
  const int k = std::min(m, n);
  const int lda = std::max(1, m);
  const int r = b ? fit(b->cols, "columns") : 0;
  int info = 0, lwork = -1;
  T query = 0;
  switch (f) {
    case LinalgFn::TsqrR:
      blas_threads(1);  // TsqrApply's refactorization must give the same bits
      return tsqr_r(f, a, m, n, out);
    case LinalgFn::TsqrMix:
      return tsqr_mix(f, a, *b, n, r, out);
    case LinalgFn::TsqrApply:
      blas_threads(1);
      return tsqr_apply(f, a, *b, m, n, r, out);
    case LinalgFn::Qr: {
      if (k == 0) return;
      if (m >= 16 * n && cholesky_qr2(f, a, m, n, out)) return;
      Workspace<T> w = column_major<T>(f, a, lda, n);
      std::vector<T> tau(k);
      if (m >= 16 * n) return tall_qr<T>(m, n, w, out);
      L::geqrf(&m, &n, w.data(), &lda, tau.data(), &query, &lwork, &info);
      L::orgqr(&m, &k, &k, w.data(), &lda, tau.data(), &query, &lwork, &info);
      lwork = work_size(query);
      std::vector<T> work(lwork);
      L::geqrf(&m, &n, w.data(), &lda, tau.data(), work.data(), &lwork, &info);
      store_upper(out + static_cast<size_t>(m) * k, w.data(), lda, k, n);
      L::orgqr(&m, &k, &k, w.data(), &lda, tau.data(), work.data(), &lwork, &info);
      store(out, w.data(), lda, m, k);
      return;
    }
    case LinalgFn::Svd: {
      if (k == 0) return;
      if (m >= 2 * n) return tall_svd(f, a, m, n, out);
      Workspace<T> w = column_major<T>(f, a, lda, n);
      std::vector<T> s(k), u(static_cast<size_t>(m) * k), vt(static_cast<size_t>(k) * n);
      std::vector<int> iwork(8 * static_cast<size_t>(k));
      const int ldu = m, ldvt = k;
      L::gesdd("S", &m, &n, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, &query,
               &lwork, iwork.data(), &info);
      lwork = work_size(query);
      std::vector<T> work(lwork);
      L::gesdd("S", &m, &n, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, work.data(),
               &lwork, iwork.data(), &info);
      if (info > 0) lapack_error(f, "the SVD did not converge", info);
      out = store(out, u.data(), m, m, k);
      out = std::copy(s.begin(), s.end(), out);
      store(out, vt.data(), k, k, n);
      return;
    }
    case LinalgFn::Cholesky: {
      Workspace<T> w = column_major<T>(f, a, lda, n);
      if (n > 0) L::potrf("L", &n, w.data(), &lda, &info);
      if (info > 0)
        lapack_error(f,
                     "the matrix is not positive definite (its leading minor of order " +
                         std::to_string(info) + " is not)",
                     info);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) *out++ = j <= i ? w[i + static_cast<size_t>(j) * lda] : T(0);
      return;
    }
    case LinalgFn::Solve: {
      Workspace<T> w = column_major<T>(f, a, lda, n), x = column_major<T>(f, *b, lda, r);
      std::vector<int> ipiv(std::max(n, 1));
      if (n > 0 && r > 0) L::gesv(&n, &r, w.data(), &lda, ipiv.data(), x.data(), &lda, &info);
      if (info > 0) singular(f, info);
      store(out, x.data(), lda, n, r);
      return;
    }
    case LinalgFn::Inv: {
      Workspace<T> w = column_major<T>(f, a, lda, n);
      std::vector<int> ipiv(std::max(n, 1));
      if (n == 0) return;
      L::getrf(&n, &n, w.data(), &lda, ipiv.data(), &info);
      if (info > 0) singular(f, info);
      L::getri(&n, w.data(), &lda, ipiv.data(), &query, &lwork, &info);
      lwork = work_size(query);
      std::vector<T> work(lwork);
      L::getri(&n, w.data(), &lda, ipiv.data(), work.data(), &lwork, &info);
      store(out, w.data(), lda, n, n);
      return;
    }
    case LinalgFn::Det:
    case LinalgFn::Slogdet: {
      Workspace<T> w = column_major<T>(f, a, lda, n);
      std::vector<int> ipiv(std::max(n, 1));
      if (n > 0) L::getrf(&n, &n, w.data(), &lda, ipiv.data(), &info);
      T sign = 1, logdet = 0;
      lu_slogdet(w, ipiv, n, info, &sign, &logdet);
      if (f == LinalgFn::Det) {
        out[0] = sign * std::exp(logdet);  // as NumPy's det: from its slogdet
      } else {
        out[0] = sign;
        out[1] = logdet;
      }
      return;
    }
    case LinalgFn::Eigh: {
      Workspace<T> w = column_major<T>(f, a, lda, n);
      std::vector<T> vals(std::max(n, 1));
      if (n == 0) return;
      int liwork = -1, iquery = 0;
      L::syevd("V", "L", &n, w.data(), &lda, vals.data(), &query, &lwork, &iquery, &liwork, &info);
      lwork = work_size(query);
      liwork = std::max(1, iquery);
      std::vector<T> work(lwork);
      std::vector<int> iwork(liwork);
      L::syevd("V", "L", &n, w.data(), &lda, vals.data(), work.data(), &lwork, iwork.data(),
               &liwork, &info);
      if (info > 0) lapack_error(f, "the eigenvalue computation did not converge", info);
      out = std::copy(vals.begin(), vals.begin() + n, out);
      store(out, w.data(), lda, n, n);
      return;
    }
    case LinalgFn::Lstsq: {
      const int ldb = std::max({1, m, n});
      Workspace<T> w = column_major<T>(f, a, lda, n), x = column_major<T>(f, *b, ldb, r);
      std::vector<T> s(std::max(k, 1));
      T rcond = std::numeric_limits<T>::epsilon() * std::max(m, n);  // NumPy 2's default
      int rank = 0;
      if (k > 0 && r > 0) {
        int iquery = 0;
        L::gelsd(&m, &n, &r, w.data(), &lda, x.data(), &ldb, s.data(), &rcond, &rank, &query,
                 &lwork, &iquery, &info);
        lwork = work_size(query);
        std::vector<T> work(lwork);
        std::vector<int> iwork(std::max(1, iquery));
        L::gelsd(&m, &n, &r, w.data(), &lda, x.data(), &ldb, s.data(), &rcond, &rank, work.data(),
                 &lwork, iwork.data(), &info);
        if (info > 0) lapack_error(f, "the SVD did not converge", info);
      } else if (k > 0) {
        // No right-hand sides: only the singular values.
        std::vector<T> u(1), vt(1);
        int one = 1, ldvt = 1;
        std::vector<int> iwork(8 * static_cast<size_t>(k));
        L::gesdd("N", &m, &n, w.data(), &lda, s.data(), u.data(), &one, vt.data(), &ldvt, &query,
                 &lwork, iwork.data(), &info);
        lwork = work_size(query);
        std::vector<T> work(lwork);
        L::gesdd("N", &m, &n, w.data(), &lda, s.data(), u.data(), &one, vt.data(), &ldvt,
                 work.data(), &lwork, iwork.data(), &info);
        for (int q = 0; q < k; ++q) rank += s[q] > rcond * s[0] ? 1 : 0;
      }
      if (k == 0) std::fill_n(x.data(), static_cast<size_t>(ldb) * std::max(r, 1), T(0));
      T* xs = out;
      out = store(out, x.data(), ldb, n, r);
      if (m > n) {  // residuals ||b - a x||^2 per column, from the operands themselves
        const T* av = static_cast<const T*>(a.data);
        const T* bv = static_cast<const T*>(b->data);
        for (int j = 0; j < r; ++j) {
          T sum = 0;
          for (int i = 0; i < m; ++i) {
            T e = bv[b->offset + i * b->row_stride + j * b->col_stride];
            for (int q = 0; q < n; ++q)
              e -= av[a.offset + i * a.row_stride + q * a.col_stride] * xs[q * r + j];
            sum += e * e;
          }
          *out++ = sum;
        }
      }
      *out++ = static_cast<T>(rank);
      std::copy(s.begin(), s.begin() + k, out);
      return;
    }
  }
}

}  // namespace

void lapack(LinalgFn f, DType t, const MatrixRef& a, const MatrixRef* b, void* out, int threads) {
  if (t == DType::Float64)
    lapack_typed(f, a, b, static_cast<double*>(out), threads);
  else if (t == DType::Float32)
    lapack_typed(f, a, b, static_cast<float*>(out), threads);
  else
    throw InternalError(std::string("library::lapack on ") + dtype_name(t));
}

}  // namespace kiln::library
