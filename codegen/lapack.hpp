// LAPACK's routines as Kiln's OpenBLAS exports them (Fortran symbols with the scipy_ prefix:
// codegen/blas.hpp), with a d/s traits struct, for the files that call them:
// codegen/library.cpp (the host's LAPACK calls) and codegen/cuda/host_solver.cpp (cuda-emu's
// cuSOLVER on them).
#pragma once
#include <cstddef>

#include "codegen/blas.hpp"

// OpenBLAS's LAPACK through its Fortran symbols (column-major, 32-bit integers, hidden lengths of
// character arguments last).
extern "C" {
#define KILN_LAPACK_DECLARE(p, T)                                                                  \
  void KILN_LAPACK(p##geqrf_)(const int* m, const int* n, T* a, const int* lda, T* tau, T* work,   \
                              const int* lwork, int* info);                                        \
  void KILN_LAPACK(p##latsqr_)(const int* m, const int* n, const int* mb, const int* nb, T* a,     \
                               const int* lda, T* t, const int* ldt, T* work, const int* lwork,    \
                               int* info);                                                         \
  void KILN_LAPACK(p##orgtsqr_)(const int* m, const int* n, const int* mb, const int* nb, T* a,    \
                                const int* lda, const T* t, const int* ldt, T* work,               \
                                const int* lwork, int* info);                                      \
  void KILN_LAPACK(p##geqrt_)(const int* m, const int* n, const int* nb, T* a, const int* lda,     \
                              T* t, const int* ldt, T* work, int* info);                           \
  void KILN_LAPACK(p##gemqrt_)(const char* side, const char* trans, const int* m, const int* n,    \
                               const int* k, const int* nb, const T* v, const int* ldv,            \
                               const T* t, const int* ldt, T* c, const int* ldc, T* work,          \
                               int* info, size_t, size_t);                                         \
  void KILN_LAPACK(p##orgqr_)(const int* m, const int* n, const int* k, T* a, const int* lda,      \
                              const T* tau, T* work, const int* lwork, int* info);                 \
  void KILN_LAPACK(p##gesdd_)(const char* jobz, const int* m, const int* n, T* a, const int* lda,  \
                              T* s, T* u, const int* ldu, T* vt, const int* ldvt, T* work,         \
                              const int* lwork, int* iwork, int* info, size_t);                    \
  void KILN_LAPACK(p##potrf_)(const char* uplo, const int* n, T* a, const int* lda, int* info,     \
                              size_t);                                                             \
  void KILN_LAPACK(p##trtri_)(const char* uplo, const char* diag, const int* n, T* a,              \
                              const int* lda, int* info, size_t, size_t);                          \
  void KILN_LAPACK(p##trcon_)(const char* norm, const char* uplo, const char* diag, const int* n,  \
                              const T* a, const int* lda, T* rcond, T* work, int* iwork,           \
                              int* info, size_t, size_t, size_t);                                  \
  void KILN_LAPACK(p##gesv_)(const int* n, const int* nrhs, T* a, const int* lda, int* ipiv, T* b, \
                             const int* ldb, int* info);                                           \
  void KILN_LAPACK(p##getrf_)(const int* m, const int* n, T* a, const int* lda, int* ipiv,         \
                              int* info);                                                          \
  void KILN_LAPACK(p##getrs_)(const char* trans, const int* n, const int* nrhs, const T* a,        \
                              const int* lda, const int* ipiv, T* b, const int* ldb, int* info,    \
                              size_t);                                                             \
  void KILN_LAPACK(p##gesvd_)(const char* jobu, const char* jobvt, const int* m, const int* n,     \
                              T* a, const int* lda, T* s, T* u, const int* ldu, T* vt,             \
                              const int* ldvt, T* work, const int* lwork, int* info, size_t,       \
                              size_t);                                                             \
  void KILN_LAPACK(p##getri_)(const int* n, T* a, const int* lda, const int* ipiv, T* work,        \
                              const int* lwork, int* info);                                        \
  void KILN_LAPACK(p##syevd_)(const char* jobz, const char* uplo, const int* n, T* a,              \
                              const int* lda, T* w, T* work, const int* lwork, int* iwork,         \
                              const int* liwork, int* info, size_t, size_t);                       \
  void KILN_LAPACK(p##gelsd_)(const int* m, const int* n, const int* nrhs, T* a, const int* lda,   \
                              T* b, const int* ldb, T* s, const T* rcond, int* rank, T* work,      \
                              const int* lwork, int* iwork, int* info);
KILN_LAPACK_DECLARE(d, double)
KILN_LAPACK_DECLARE(s, float)
#undef KILN_LAPACK_DECLARE
}

namespace kiln::library {

// The d or s routine for T.
template <class T>
struct Lapack;
#define KILN_LAPACK_TRAITS(p, T)                                     \
  template <>                                                        \
  struct Lapack<T> {                                                 \
    template <class... A>                                            \
    static void geqrf(A... a) {                                      \
      KILN_LAPACK(p##geqrf_)(a...);                                  \
    }                                                                \
    template <class... A>                                            \
    static void geqrt(A... a) {                                      \
      KILN_LAPACK(p##geqrt_)(a...);                                  \
    }                                                                \
    template <class... A>                                            \
    static void gemqrt(A... a) {                                     \
      KILN_LAPACK(p##gemqrt_)(a..., size_t{1}, size_t{1});           \
    }                                                                \
    template <class... A>                                            \
    static void orgqr(A... a) {                                      \
      KILN_LAPACK(p##orgqr_)(a...);                                  \
    }                                                                \
    template <class... A>                                            \
    static void latsqr(A... a) {                                     \
      KILN_LAPACK(p##latsqr_)(a...);                                 \
    }                                                                \
    template <class... A>                                            \
    static void orgtsqr(A... a) {                                    \
      KILN_LAPACK(p##orgtsqr_)(a...);                                \
    }                                                                \
    template <class... A>                                            \
    static void gesdd(A... a) {                                      \
      KILN_LAPACK(p##gesdd_)(a..., size_t{1});                       \
    }                                                                \
    template <class... A>                                            \
    static void potrf(A... a) {                                      \
      KILN_LAPACK(p##potrf_)(a..., size_t{1});                       \
    }                                                                \
    template <class... A>                                            \
    static void trtri(A... a) {                                      \
      KILN_LAPACK(p##trtri_)(a..., size_t{1}, size_t{1});            \
    }                                                                \
    template <class... A>                                            \
    static void trcon(A... a) {                                      \
      KILN_LAPACK(p##trcon_)(a..., size_t{1}, size_t{1}, size_t{1}); \
    }                                                                \
    template <class... A>                                            \
    static void gesv(A... a) {                                       \
      KILN_LAPACK(p##gesv_)(a...);                                   \
    }                                                                \
    template <class... A>                                            \
    static void getrf(A... a) {                                      \
      KILN_LAPACK(p##getrf_)(a...);                                  \
    }                                                                \
    template <class... A>                                            \
    static void getrs(A... a) {                                      \
      KILN_LAPACK(p##getrs_)(a..., size_t{1});                       \
    }                                                                \
    template <class... A>                                            \
    static void gesvd(A... a) {                                      \
      KILN_LAPACK(p##gesvd_)(a..., size_t{1}, size_t{1});            \
    }                                                                \
    template <class... A>                                            \
    static void getri(A... a) {                                      \
      KILN_LAPACK(p##getri_)(a...);                                  \
    }                                                                \
    template <class... A>                                            \
    static void syevd(A... a) {                                      \
      KILN_LAPACK(p##syevd_)(a..., size_t{1}, size_t{1});            \
    }                                                                \
    template <class... A>                                            \
    static void gelsd(A... a) {                                      \
      KILN_LAPACK(p##gelsd_)(a...);                                  \
    }                                                                \
  };
KILN_LAPACK_TRAITS(d, double)
KILN_LAPACK_TRAITS(s, float)
#undef KILN_LAPACK_TRAITS

}  // namespace kiln::library
