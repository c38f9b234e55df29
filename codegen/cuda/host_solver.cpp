#include <algorithm>
#include <vector>

#include "codegen/cuda/solver.hpp"
#include "codegen/lapack.hpp"
#include "codegen/library.hpp"

// ---- cuSOLVER's dense API on the host's LAPACK (cuda-emu's cuSOLVER) --------------------------
// Each routine calls its LAPACK namesake (one BLAS thread, as every call here) on host memory;
// workspace queries answer LAPACK's sizes for a blocked run (a block of 64 columns); syevd's
// integer workspace, which cuSOLVER's API does not have, is the routine's own.

namespace kiln::cuda {

namespace {

template <class T>
struct HostSolver {
  using L = library::Lapack<T>;
  static int geqrf_size(SolverHandle, int, int n, T*, int, int* lwork) {
    *lwork = 64 * std::max(n, 1);
    return 0;
  }
  static int geqrf(SolverHandle, int m, int n, T* a, int lda, T* tau, T* work, int lwork,
                   int* info) {
    library::single_threaded_blas();
    L::geqrf(&m, &n, a, &lda, tau, work, &lwork, info);
    return 0;
  }
  static int orgqr_size(SolverHandle, int, int n, int, const T*, int, const T*, int* lwork) {
    *lwork = 64 * std::max(n, 1);
    return 0;
  }
  static int orgqr(SolverHandle, int m, int n, int k, T* a, int lda, const T* tau, T* work,
                   int lwork, int* info) {
    library::single_threaded_blas();
    L::orgqr(&m, &n, &k, a, &lda, tau, work, &lwork, info);
    return 0;
  }
  static int gesvd_size(SolverHandle, int m, int n, int* lwork) {
    *lwork = std::max({1, 3 * std::min(m, n) + std::max(m, n), 5 * std::min(m, n)}) + 64 * (m + n);
    return 0;
  }
  static int gesvd(SolverHandle, signed char jobu, signed char jobvt, int m, int n, T* a, int lda,
                   T* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork, T*, int* info) {
    library::single_threaded_blas();
    const char ju = static_cast<char>(jobu), jv = static_cast<char>(jobvt);
    L::gesvd(&ju, &jv, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, info);
    return 0;
  }
  static int potrf_size(SolverHandle, int, int, T*, int, int* lwork) {
    *lwork = 1;
    return 0;
  }
  static int potrf(SolverHandle, int uplo, int n, T* a, int lda, T*, int, int* info) {
    library::single_threaded_blas();
    L::potrf(uplo == kSolverFillLower ? "L" : "U", &n, a, &lda, info);
    return 0;
  }
  static int getrf_size(SolverHandle, int, int, T*, int, int* lwork) {
    *lwork = 1;
    return 0;
  }
  static int getrf(SolverHandle, int m, int n, T* a, int lda, T*, int* ipiv, int* info) {
    library::single_threaded_blas();
    L::getrf(&m, &n, a, &lda, ipiv, info);
    return 0;
  }
  static int getrs(SolverHandle, int trans, int n, int nrhs, const T* a, int lda, const int* ipiv,
                   T* b, int ldb, int* info) {
    library::single_threaded_blas();
    L::getrs(trans == kSolverOpN ? "N" : "T", &n, &nrhs, a, &lda, ipiv, b, &ldb, info);
    return 0;
  }
  static int syevd_size(SolverHandle, int, int, int n, const T*, int, const T*, int* lwork) {
    *lwork = 1 + 6 * n + 2 * n * n;
    return 0;
  }
  static int syevd(SolverHandle, int jobz, int uplo, int n, T* a, int lda, T* w, T* work, int lwork,
                   int* info) {
    library::single_threaded_blas();
    int liwork = 3 + 5 * n;
    std::vector<int> iwork(static_cast<size_t>(liwork));
    L::syevd(jobz == kSolverEigVectors ? "V" : "N", uplo == kSolverFillLower ? "L" : "U", &n, a,
             &lda, w, work, &lwork, iwork.data(), &liwork, info);
    return 0;
  }
};

}  // namespace

template <class T>
const SolverFns<T>& host_solver() {
  static const SolverFns<T> fns = [] {
    using H = HostSolver<T>;
    SolverFns<T> f;
    f.geqrf_size = &H::geqrf_size;
    f.geqrf = &H::geqrf;
    f.orgqr_size = &H::orgqr_size;
    f.orgqr = &H::orgqr;
    f.gesvd_size = &H::gesvd_size;
    f.gesvd = &H::gesvd;
    f.potrf_size = &H::potrf_size;
    f.potrf = &H::potrf;
    f.getrf_size = &H::getrf_size;
    f.getrf = &H::getrf;
    f.getrs = &H::getrs;
    f.syevd_size = &H::syevd_size;
    f.syevd = &H::syevd;
    return f;
  }();
  return fns;
}

template const SolverFns<double>& host_solver<double>();
template const SolverFns<float>& host_solver<float>();

}  // namespace kiln::cuda
