// Kiln's BLAS: the OpenBLAS of the scipy-openblas32 wheel (cmake/blas-requirements.txt; why:
// docs/ARCHITECTURE.md, "BLAS and LAPACK"). Every symbol it exports carries the scipy_ prefix, its
// cblas.h declares them so, and the files that call BLAS include this header rather than <cblas.h>
// and name a routine through KILN_CBLAS (KILN_CBLAS(dgemm) is scipy_cblas_dgemm), an OpenBLAS
// function through KILN_OPENBLAS, a LAPACK routine through KILN_LAPACK (codegen/lapack.hpp).
#pragma once
#include <cblas.h>

#define KILN_CBLAS(f) scipy_cblas_##f
#define KILN_OPENBLAS(f) scipy_openblas_##f
#define KILN_LAPACK(f) scipy_##f

// Fails here, not at a distant call, when the include path finds another cblas.h first (the
// system's libopenblas-dev, whose declarations carry no prefix).
static_assert(sizeof(&KILN_CBLAS(dgemm)) > 0 && sizeof(&KILN_OPENBLAS(get_corename)) > 0,
              "codegen/blas.hpp needs the scipy-openblas32 cblas.h (scripts/install-deps.sh)");
