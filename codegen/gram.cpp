// Kiln's Gram kernel (codegen/gram.hpp).
//
// c[j][i] = sum_r a[r][i] a[r][j] for i >= j, as BLIS-style register tiles:
// - A goes in panels of about 256 KiB of rows, which stay in L2 while every tile of the triangle
//   reads them. A tile holds rows j0 .. j0 + W - 1 of c (the broadcasts: A's columns j0 ..) and
//   up to three vectors of W columns (i0 ..; W = 8 doubles, one zmm, on AVX-512; 4, one ymm, on
//   AVX2): by symmetry c[j][i] = c[i][j], so a row of A gives both. Per row of A: V vector loads,
//   W broadcasts, V W FMAs (AVX-512: 24 zmm accumulators; AVX2: 12 ymm).
// - AVX-512 tiles read A's rows in place; a vector that runs past column n - 1 is a masked load
//   (no lane past a row's end is read, so the last row may end a mapping). AVX2 tiles read a copy
//   of the panel in slabs of 4 columns (zeros past n), each column block's rows one after another,
//   so that their narrower loads stream whole cache lines. On an Intel Xeon with AMX (one core,
//   5242-row blocks, GFLOP/s): AVX-512 in place 55-61 at n = 100, 57-58 at n = 37, 25-26 at
//   n = 10, 69-71 at n = 256, against 51-57, 32-34, 10-11 and 70-74 with the copy (a pass over A
//   from L3 or memory: a quarter of the time at n = 100); AVX2 with the copy 47 at n = 100 and 43
//   at n = 256, in place 30 and 28.
// - The tiles cover the upper triangle only: column blocks i0 >= j0. For n = 100, 94% (AVX-512)
//   and 97% (AVX2) of the products computed are needed; the rest are the lower halves of the
//   diagonal blocks. A last block of 4 columns or fewer runs as a ymm on AVX-512 (tile512's HALF).
// Measured on Zen 4 with the copy for both (bench/RESULTS.md, issue 12, session 12): 47 GFLOP/s at
// n = 100 on blocks of 5242 rows, 1.45x OpenBLAS 0.3.21's dsyrk.
#include "codegen/gram.hpp"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "codegen/backend.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace kiln::library {
namespace {

// Rows per panel: about 256 KiB of A (half of Zen 3's L2; at n = 100 on Zen 4, 128-384 KiB
// measured within 2%), rows of `width` doubles.
int64_t panel_rows(int64_t width) { return std::clamp<int64_t>(262144 / (8 * width), 16, 4096); }

__attribute__((target("avx2,fma"))) __m256i lanes256(int64_t k) {  // lanes 0 .. k-1 set
  return _mm256_set_epi64x(k > 3 ? -1 : 0, k > 2 ? -1 : 0, k > 1 ? -1 : 0, k > 0 ? -1 : 0);
}

// A panel of `rows` rows of A in slabs of 4 columns (AVX2): slab s holds columns 4 s .. 4 s + 3 of
// each row (zeros past n), rows one after another.
__attribute__((target("avx2,fma"))) void pack256(int64_t n, int64_t rows, const double* a,
                                                 int64_t lda, double* out) {
  const int64_t full = n / 4, left = n % 4;
  const __m256i m = lanes256(left);
  for (int64_t r = 0; r < rows; ++r) {
    const double* src = a + r * lda;
    double* dst = out + r * 4;
    for (int64_t s = 0; s < full; ++s)
      _mm256_storeu_pd(dst + s * rows * 4, _mm256_loadu_pd(src + s * 4));
    if (left) _mm256_storeu_pd(dst + full * rows * 4, _mm256_maskload_pd(src + full * 4, m));
  }
}

// One register tile: rows j0 .. j0 + NR - 1 of c (j0 = sj W, the broadcasts from column block
// sj), columns si W .. si W + V W - 1 (V vectors from column blocks si ..), masked at n. Column
// block s of the panel's row r starts at base + s * block + r * row: in place, block = W and
// row = lda; in slabs, block = rows * W and row = W.
struct TileArgs {
  const double* base;
  int64_t block, row;
  int64_t rows;  // the panel's rows
  int64_t n, si, sj;
  double* c;
  int64_t ldc;
  bool load;  // add to c's values (else overwrite)
};

// ---- AVX-512 -----------------------------------------------------------------------------------
// HALF: the last vector has 4 columns or fewer, so it runs as a ymm (two ymm FMAs per cycle
// against one zmm: for n = 100 that is 4 of the 104 columns computed in vain instead of 8 of 108).
template <int V, int NR, bool HALF>
__attribute__((target("avx512f,fma"))) void tile512(const TileArgs& t) {
  constexpr int W = 8, Z = HALF ? V - 1 : V;  // Z zmm vectors, then the ymm one
  __mmask8 m[V];
  for (int v = 0; v < V; ++v) {
    const int64_t left = t.n - (t.si + v) * W;
    m[v] = left >= W ? __mmask8(0xff) : __mmask8((1u << left) - 1);
  }
  const __m256i mh = lanes256(t.n - (t.si + Z) * W);
  __m512d acc[NR][V];
  __m256d half[NR];
  const int64_t i0 = t.si * W, j0 = t.sj * W;
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    double* cr = t.c + (j0 + j) * t.ldc + i0;
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v)
      acc[j][v] = t.load ? _mm512_maskz_loadu_pd(m[v], cr + v * W) : _mm512_setzero_pd();
    if (HALF) half[j] = t.load ? _mm256_maskload_pd(cr + Z * W, mh) : _mm256_setzero_pd();
  }
  const double* x = t.base + t.si * t.block;
  const double* b = t.base + t.sj * t.block;
  for (int64_t r = 0; r < t.rows; ++r, x += t.row, b += t.row) {
    __m512d xv[V];
    __m256d xh;
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v)  // only the last vector may run past column n - 1
      xv[v] = HALF || v + 1 < V ? _mm512_loadu_pd(x + v * t.block)
                                : _mm512_maskz_loadu_pd(m[v], x + v * t.block);
    if (HALF) xh = _mm256_maskload_pd(x + Z * t.block, mh);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m512d bj = _mm512_set1_pd(b[j]);
#pragma GCC unroll 4
      for (int v = 0; v < Z; ++v) acc[j][v] = _mm512_fmadd_pd(xv[v], bj, acc[j][v]);
      if (HALF) half[j] = _mm256_fmadd_pd(xh, _mm256_set1_pd(b[j]), half[j]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    double* cr = t.c + (j0 + j) * t.ldc + i0;
#pragma GCC unroll 4
    for (int v = 0; v < Z; ++v) _mm512_mask_storeu_pd(cr + v * W, m[v], acc[j][v]);
    if (HALF) _mm256_maskstore_pd(cr + Z * W, mh, half[j]);
  }
}

// ---- AVX2 --------------------------------------------------------------------------------------
template <int V, int NR>
__attribute__((target("avx2,fma"))) void tile256(const TileArgs& t) {
  constexpr int W = 4;
  __m256i m[V];
  for (int v = 0; v < V; ++v) m[v] = lanes256(t.n - (t.si + v) * W);
  __m256d acc[NR][V];
  const int64_t i0 = t.si * W, j0 = t.sj * W;
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[j][v] = t.load ? _mm256_maskload_pd(t.c + (j0 + j) * t.ldc + i0 + v * W, m[v])
                         : _mm256_setzero_pd();
  const double* x = t.base + t.si * t.block;  // slabs (t.row == W): zeros past n
  const double* b = t.base + t.sj * t.block;
  for (int64_t r = 0; r < t.rows; ++r, x += W, b += W) {
    __m256d xv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) xv[v] = _mm256_loadu_pd(x + v * t.block);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m256d bj = _mm256_broadcast_sd(b + j);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[j][v] = _mm256_fmadd_pd(xv[v], bj, acc[j][v]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm256_maskstore_pd(t.c + (j0 + j) * t.ldc + i0 + v * W, m[v], acc[j][v]);
}

using Tile = void (*)(const TileArgs&);

// tiles[half][V - 1][NR - 1] for V in 1 .. 3 vectors, NR in 1 .. W rows, the last vector whole
// or (half = 1) of 4 columns or fewer.
template <template <int, int, bool> class F, int... R>
struct Tiles {
  static constexpr Tile tiles[2][3][sizeof...(R)] = {
      {{F<1, R + 1, false>::run...}, {F<2, R + 1, false>::run...}, {F<3, R + 1, false>::run...}},
      {{F<1, R + 1, true>::run...}, {F<2, R + 1, true>::run...}, {F<3, R + 1, true>::run...}}};
};
template <int V, int NR, bool HALF>
struct T512 {
  static constexpr Tile run = tile512<V, NR, HALF>;
};
template <int V, int NR, bool>
struct T256 {  // a half vector would be an xmm: no gain
  static constexpr Tile run = tile256<V, NR>;
};

// The triangle's tiles over A's panels: in place (AVX-512) or copied into slabs (AVX2, `Pack`).
template <int W, class Set, bool Pack>
void gram_tiles(int64_t n, int64_t k, const double* a, int64_t lda, double* c, int64_t ldc,
                bool accumulate) {
  const int64_t kc = panel_rows(Pack ? n : lda), blocks = (n + W - 1) / W;
  thread_local std::vector<double> slabs;
  if (Pack) slabs.resize(size_t(blocks * std::min(kc, std::max<int64_t>(k, 1)) * W));
  for (int64_t r0 = 0; r0 < std::max<int64_t>(k, 1); r0 += kc) {
    const int64_t rows = std::min(kc, k - r0);
    TileArgs t{a + r0 * lda, W, lda, rows, n, 0, 0, c, ldc, accumulate || r0 > 0};
    if (Pack) {
      pack256(n, rows, a + r0 * lda, lda, slabs.data());
      t.base = slabs.data(), t.block = rows * W, t.row = W;
    }
    // Rows j of c in column block sj need the columns i >= j: blocks sj .., three at a time.
    for (t.sj = 0; t.sj < blocks; ++t.sj) {
      const int nr = int(std::min<int64_t>(W, n - t.sj * W));
      for (t.si = t.sj; t.si < blocks; t.si += 3) {
        const int v = int(std::min<int64_t>(3, blocks - t.si));
        const bool half = n - (t.si + v - 1) * W <= 4;
        Set::tiles[half][v - 1][nr - 1](t);
      }
    }
  }
}

enum class Isa { none, avx2, avx512 };

// The widest vector ISA of the CPU kernels' target (the JIT's: the host's, or KILN_TARGET_CPU's),
// the same rule that picks their libmvec variant; starts the JIT.
Isa isa() {
  static const Isa i = [] {
    switch (backend::backend_for(Device::Cpu).capabilities().vector_isa) {
      case 'e':
        return Isa::avx512;
      case 'd':
        return Isa::avx2;
      default:
        return Isa::none;
    }
  }();
  return i;
}

}  // namespace

const char* gram_isa() {
  switch (isa()) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::none:
      return "";
  }
  return "";
}

bool gram_fits(int64_t n) { return isa() != Isa::none && n >= 1 && n <= 256; }

void gram_upper(int64_t n, int64_t k, const double* a, int64_t lda, double* c, int64_t ldc,
                bool accumulate) {
  if (isa() == Isa::avx512)
    gram_tiles<8, Tiles<T512, 0, 1, 2, 3, 4, 5, 6, 7>, false>(n, k, a, lda, c, ldc, accumulate);
  else
    gram_tiles<4, Tiles<T256, 0, 1, 2, 3>, true>(n, k, a, lda, c, ldc, accumulate);
}

}  // namespace kiln::library
