// Kiln's own Gram kernel: the upper triangle of A^T A for a row-major A with few columns (a
// block of rows of a tall matrix, as GLM Hessians and TSQR read them). OpenBLAS's syrk runs
// such shapes at about a quarter of the FMA units' peak; this kernel reads A in place, in
// panels of rows that stay in L2, through AVX-512 or AVX2 register tiles.
#pragma once
#include <cstdint>

namespace kiln::library {

// Which Gram kernel gram_upper would run: "avx512", "avx2" or "" (none: the caller uses BLAS).
// The CPU kernels' vector ISA (the cpu backend's Capabilities::vector_isa: the host's, or
// KILN_TARGET_CPU's; x86-64-v3 gives AVX2), so the narrower variant is tested on wider hosts.
const char* gram_isa();

// Whether gram_upper takes an n-column operand (and an ISA is available).
bool gram_fits(int64_t n);

// c's upper triangle (row j, columns i >= j; c row-major with row stride ldc) = A^T A, or
// += A^T A when `accumulate`. A is k x n, row-major, row stride lda. Entries below the diagonal
// of c are left with unspecified values (the caller mirrors the upper triangle). Requires
// gram_fits(n).
void gram_upper(int64_t n, int64_t k, const double* a, int64_t lda, double* c, int64_t ldc,
                bool accumulate);

}  // namespace kiln::library
