#include "codegen/cuda/solver.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_backend.hpp"
#include "support/error.hpp"

namespace kiln::cuda {

// Every LAPACK call but lstsq (cuSOLVER has no gelsd), TSQR's steps included.
bool gpu_lapack_runs(LinalgFn f) { return f != LinalgFn::Lstsq; }

namespace {

void check_solver(int status, const char* call) {
  if (status != 0)
    throw Error(std::string("device cuda: cusolverDn ") + call + " failed (cuSOLVER status " +
                std::to_string(status) + ")");
}

int fit(int64_t v) {
  if (v > std::numeric_limits<int>::max())
    throw Error("device cuda: a LAPACK call's dimension beyond cuSOLVER's 32-bit integers (" +
                std::to_string(v) + ")");
  return static_cast<int>(v);
}

// Device memory for one call, freed at its end.
class Buffer {
 public:
  Buffer(SolverDevice& dev, size_t bytes) : dev_(dev), p_(dev.alloc(std::max<size_t>(bytes, 1))) {}
  ~Buffer() { dev_.free(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : dev_(o.dev_), p_(o.p_) { o.p_ = nullptr; }
  template <class V>
  V* as() const {
    return static_cast<V*>(p_);
  }

 private:
  SolverDevice& dev_;
  void* p_;
};

template <class T>
class Call {
 public:
  Call(SolverDevice& dev, const SolverFns<T>& fn, SolverHandle h, LinalgFn f)
      : dev_(dev), fn_(fn), h_(h), f_(f) {}

  void run(const library::MatrixRef& a, const library::MatrixRef* b, T* out) {
    const int m = fit(a.rows), n = fit(a.cols), k = std::min(m, n);
    const int r = b ? fit(b->cols) : 0;
    switch (f_) {
      case LinalgFn::Qr: {
        if (k == 0) return;
        Buffer w = gather(a, m, n), tau = elements(k);
        geqrf(m, n, w.as<T>(), tau.as<T>());
        store(out + static_cast<int64_t>(m) * k, w.as<T>(), m, k, n, 1);  // R, upper
        orgqr(m, k, w.as<T>(), tau.as<T>());
        store(out, w.as<T>(), m, m, k);  // Q
        return;
      }
      case LinalgFn::Svd:
        return svd(a, m, n, k, out);
      case LinalgFn::Cholesky: {
        Buffer w = gather(a, n, n);
        if (n == 0) return;
        int s = 0;
        check_solver(fn_.potrf_size(h_, kSolverFillLower, n, w.as<T>(), n, &s), "potrf_bufferSize");
        Buffer work = workspace({s}), info = ints(1);
        check_solver(fn_.potrf(h_, kSolverFillLower, n, w.as<T>(), n, work.as<T>(), std::max(1, s),
                               info.as<int>()),
                     "potrf");
        if (int i = read(info.as<int>()); i > 0)
          library::lapack_error(f_,
                                "the matrix is not positive definite (its leading minor of "
                                "order " +
                                    std::to_string(i) + " is not)",
                                i);
        store(out, w.as<T>(), n, n, n, 2);  // L, lower
        return;
      }
      case LinalgFn::Solve: {
        Buffer w = gather(a, n, n), x = gather(*b, n, r);
        if (n == 0 || r == 0) return;
        Buffer ipiv = ints(n);
        if (int i = lu(n, w.as<T>(), ipiv.as<int>()); i > 0) library::singular(f_, i);
        lu_solve(n, r, w.as<T>(), ipiv.as<int>(), x.as<T>());
        store(out, x.as<T>(), n, n, r);
        return;
      }
      case LinalgFn::Inv: {
        Buffer w = gather(a, n, n);
        if (n == 0) return;
        Buffer ipiv = ints(n), x = elements(static_cast<int64_t>(n) * n);
        if (int i = lu(n, w.as<T>(), ipiv.as<int>()); i > 0) library::singular(f_, i);
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
        Buffer w = gather(a, n, n);
        if (n == 0) return;
        int s = 0;
        check_solver(
            fn_.syevd_size(h_, kSolverEigVectors, kSolverFillLower, n, w.as<T>(), n, out, &s),
            "syevd_bufferSize");
        Buffer work = workspace({s}), info = ints(1);
        // The eigenvalues (ascending) straight into the result, then the vectors (columns).
        check_solver(fn_.syevd(h_, kSolverEigVectors, kSolverFillLower, n, w.as<T>(), n, out,
                               work.as<T>(), std::max(1, s), info.as<int>()),
                     "syevd");
        if (int i = read(info.as<int>()); i > 0)
          library::lapack_error(f_, "the eigenvalue computation did not converge", i);
        store(out + n, w.as<T>(), n, n, n);
        return;
      }
      case LinalgFn::TsqrR: {  // R_i, then the info row: the refactoring apply
        Buffer w = gather(a, m, n), tau = elements(std::max(k, 1));
        if (n == 0) return;
        geqrf(m, n, w.as<T>(), tau.as<T>());
        T* info = store(out, w.as<T>(), m, n, n, 1);
        dev_.zero(info, static_cast<size_t>(n) * sizeof(T));
        return;
      }
      case LinalgFn::TsqrMix: {    // W = M_i itself (the apply forms Q_i), then the info row
        expect_refactoring(a, n);  // a = [R_i; info]
        Buffer flag = ints(1);
        dev_.zero(flag.as<int>(), sizeof(int));
        dev_.copy(sizeof(T), b->rows, b->cols, static_cast<const T*>(b->data) + b->offset,
                  b->row_stride, b->col_stride, out, r, 1, 0, flag.as<int>());
        if (read(flag.as<int>()) != 0) library::non_finite(f_);
        dev_.zero(out + static_cast<int64_t>(n) * r, static_cast<size_t>(r) * sizeof(T));
        return;
      }
      case LinalgFn::TsqrApply: {     // Q_i W, Q_i formed by factoring X_i as TsqrR did
        library::MatrixRef top = *b;  // b = [W; info]
        top.rows = n;
        Buffer wm = gather(top, n, r);
        if (r == 0) return;
        expect_refactoring(*b, n);
        Buffer w = gather(a, m, n), tau = elements(std::max(k, 1));
        geqrf(m, n, w.as<T>(), tau.as<T>());
        orgqr(m, n, w.as<T>(), tau.as<T>());
        // out (m x r, row-major) is column-major r x m = W^T Q^T.
        dev_.gemm_tt(std::is_same_v<T, double> ? DType::Float64 : DType::Float32, r, m, n,
                     wm.as<T>(), w.as<T>(), out);
        return;
      }
      case LinalgFn::Lstsq:
        break;
    }
    throw InternalError(std::string("cuSOLVER calls: ") + linalg_name(f_) + " does not run there");
  }

 private:
  Buffer elements(int64_t n) { return Buffer(dev_, static_cast<size_t>(n) * sizeof(T)); }
  Buffer ints(int64_t n) { return Buffer(dev_, static_cast<size_t>(n) * sizeof(int)); }

  template <class V>
  V read(const V* p) {
    V v{};
    dev_.to_host(&v, p, sizeof(V));
    return v;
  }

  void upload(T* dst, const std::vector<T>& v) {
    if (!v.empty()) dev_.to_device(dst, v.data(), v.size() * sizeof(T));
  }

  // A workspace of the largest of the queried sizes (elements).
  Buffer workspace(std::initializer_list<int> sizes) {
    int n = 1;
    for (int s : sizes) n = std::max(n, s);
    return elements(n);
  }

  // m's elements column-major with leading dimension ld, in a workspace of ld x cols elements
  // (zeros beyond m), refusing non-finite values as the host does.
  Buffer gather(const library::MatrixRef& m, int64_t ld, int64_t cols) {
    Buffer w = elements(std::max<int64_t>(ld, 1) * std::max<int64_t>(cols, 1));
    if (ld > m.rows || cols > m.cols)
      dev_.zero(w.as<T>(), static_cast<size_t>(ld * cols) * sizeof(T));
    Buffer flag = ints(1);
    dev_.zero(flag.as<int>(), sizeof(int));
    dev_.copy(sizeof(T), m.rows, m.cols, static_cast<const T*>(m.data) + m.offset, m.row_stride,
              m.col_stride, w.as<T>(), 1, ld, 0, flag.as<int>());
    if (read(flag.as<int>()) != 0) library::non_finite(f_);
    return w;
  }

  // Writes the rows x cols column-major w (leading dimension ld) to out row-major (part: as
  // SolverDevice::copy); returns the end.
  T* store(T* out, const T* w, int64_t ld, int64_t rows, int64_t cols, int part = 0) {
    dev_.copy(sizeof(T), rows, cols, w, 1, ld, out, cols, 1, part, nullptr);
    return out + rows * cols;
  }

  // Householder QR of the column-major m x n w in place (tau: min(m, n) elements).
  void geqrf(int m, int n, T* w, T* tau) {
    int s = 0;
    check_solver(fn_.geqrf_size(h_, m, n, w, m, &s), "geqrf_bufferSize");
    Buffer work = workspace({s}), info = ints(1);
    check_solver(fn_.geqrf(h_, m, n, w, m, tau, work.as<T>(), std::max(1, s), info.as<int>()),
                 "geqrf");
    if (int i = read(info.as<int>()); i != 0)
      library::lapack_error(f_, "the QR factorization failed", i);
  }

  // The first k columns of Q from geqrf's reflectors in w, in place.
  void orgqr(int m, int k, T* w, const T* tau) {
    int s = 0;
    check_solver(fn_.orgqr_size(h_, m, k, k, w, m, tau, &s), "orgqr_bufferSize");
    Buffer work = workspace({s}), info = ints(1);
    check_solver(fn_.orgqr(h_, m, k, k, w, m, tau, work.as<T>(), std::max(1, s), info.as<int>()),
                 "orgqr");
    if (int i = read(info.as<int>()); i != 0) library::lapack_error(f_, "forming Q failed", i);
  }

  // LU of the n x n column-major w in place; returns getrf's info (> 0: singular).
  int lu(int n, T* w, int* ipiv) {
    int s = 0;
    check_solver(fn_.getrf_size(h_, n, n, w, n, &s), "getrf_bufferSize");
    Buffer work = workspace({s}), info = ints(1);
    check_solver(fn_.getrf(h_, n, n, w, n, work.as<T>(), ipiv, info.as<int>()), "getrf");
    return read(info.as<int>());
  }

  void lu_solve(int n, int r, const T* w, const int* ipiv, T* x) {
    Buffer info = ints(1);
    check_solver(fn_.getrs(h_, kSolverOpN, n, r, w, n, ipiv, x, n, info.as<int>()), "getrs");
  }

  // TSQR's info row (row `row` of m; its element 0 is the mode) must ask for the refactoring
  // apply, the only one this TsqrR writes.
  void expect_refactoring(const library::MatrixRef& m, int64_t row) {
    if (m.cols == 0) return;
    if (read(static_cast<const T*>(m.data) + m.offset + row * m.row_stride) != T(0))
      throw InternalError(
          "cuSOLVER calls: a TSQR step asks for the product apply, which their "
          "TsqrR never chooses");
  }

  // U S Vh by gesvd, which needs rows >= columns: a wide matrix's SVD is its transpose's with U
  // and V swapped.
  void svd(const library::MatrixRef& a, int m, int n, int k, T* out) {
    if (k == 0) return;
    const bool wide = m < n;
    library::MatrixRef at = a;
    if (wide) {
      std::swap(at.rows, at.cols);
      std::swap(at.row_stride, at.col_stride);
    }
    const int big = std::max(m, n);  // the factored matrix: big x k
    Buffer w = gather(at, big, k), u = elements(static_cast<int64_t>(big) * k),
           vt = elements(static_cast<int64_t>(k) * k), rwork = elements(k), info = ints(1);
    T* s = out + static_cast<int64_t>(m) * k;
    int size = 0;
    check_solver(fn_.gesvd_size(h_, big, k, &size), "gesvd_bufferSize");
    Buffer work = workspace({size});
    // S straight into the result.
    check_solver(fn_.gesvd(h_, 'S', 'S', big, k, w.as<T>(), big, s, u.as<T>(), big, vt.as<T>(), k,
                           work.as<T>(), std::max(1, size), rwork.as<T>(), info.as<int>()),
                 "gesvd");
    if (int i = read(info.as<int>()); i > 0)
      library::lapack_error(f_, "the SVD did not converge", i);
    T* vh = s + k;
    if (!wide) {
      store(out, u.as<T>(), big, m, k);  // U (m x k)
      store(vh, vt.as<T>(), k, k, n);    // Vh (k x n)
      return;
    }
    // a^T = U' S V'^T: U = V' (m x k; element (i, j) = VT'(j, i)), Vh = U'^T (k x n).
    dev_.copy(sizeof(T), m, k, vt.as<T>(), k, 1, out, k, 1, 0, nullptr);
    dev_.copy(sizeof(T), k, n, u.as<T>(), big, 1, vh, n, 1, 0, nullptr);
  }

  // det or (sign, log|det|) from the LU's diagonal and pivots, computed on the host as
  // library::lapack does.
  void slogdet(const library::MatrixRef& a, int n, T* out) {
    Buffer w = gather(a, n, n);
    T sign = 1, logdet = 0;
    if (n > 0) {
      Buffer ipiv = ints(n), diag = elements(n);
      if (lu(n, w.as<T>(), ipiv.as<int>()) > 0) {
        sign = 0;
        logdet = -std::numeric_limits<T>::infinity();
      } else {
        dev_.copy(sizeof(T), 1, n, w.as<T>(), 0, n + 1, diag.as<T>(), 0, 1, 0, nullptr);
        std::vector<T> dg(static_cast<size_t>(n));
        std::vector<int> piv(static_cast<size_t>(n));
        dev_.to_host(dg.data(), diag.as<T>(), dg.size() * sizeof(T));
        dev_.to_host(piv.data(), ipiv.as<int>(), piv.size() * sizeof(int));
        for (int i = 0; i < n; ++i) {
          if (piv[i] != i + 1) sign = -sign;
          if (dg[i] < 0) sign = -sign;
          logdet += std::log(std::abs(dg[i]));
        }
      }
    }
    if (f_ == LinalgFn::Det)
      upload(out, {sign * std::exp(logdet)});
    else
      upload(out, {sign, logdet});
  }

  SolverDevice& dev_;
  const SolverFns<T>& fn_;
  SolverHandle h_;
  LinalgFn f_;
};

}  // namespace

template <class T>
void solver_lapack(SolverDevice& dev, const SolverFns<T>& fn, SolverHandle h, LinalgFn f,
                   const library::MatrixRef& a, const library::MatrixRef* b, T* out) {
  Call<T>(dev, fn, h, f).run(a, b, out);
}

template void solver_lapack<double>(SolverDevice&, const SolverFns<double>&, SolverHandle, LinalgFn,
                                    const library::MatrixRef&, const library::MatrixRef*, double*);
template void solver_lapack<float>(SolverDevice&, const SolverFns<float>&, SolverHandle, LinalgFn,
                                   const library::MatrixRef&, const library::MatrixRef*, float*);

}  // namespace kiln::cuda
