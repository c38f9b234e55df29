// Kiln's math functions (kiln_math.inc) for the host: the vector variants CPU kernels call, under
// the x86 vector function ABI's names (_ZGVdN4v_kiln_exp: AVX2, 4 doubles, ...), so the JIT maps
// its scalar calls to them as it maps libm's to libmvec's; a scalar version for tests; and the
// text of the source for the CUDA printer.
#include "codegen/math/kiln_math.hpp"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "support/error.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

// Scalar helpers every instantiation uses (Payne-Hanek's integer steps, the tables).
#define KILN_M_SCALAR_HELPERS                                                                  \
  static inline unsigned long long kiln_m_sbits(double x) {                                    \
    unsigned long long b;                                                                      \
    std::memcpy(&b, &x, 8);                                                                    \
    return b;                                                                                  \
  }                                                                                            \
  static inline unsigned long long kiln_m_umulhi(unsigned long long a, unsigned long long b) { \
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);     \
  }
#define KILN_M_TABLE static const

// --- scalar ---------------------------------------------------------------------------------
namespace kiln_math_scalar {
typedef unsigned long long I;
KILN_M_SCALAR_HELPERS
static inline double kiln_m_fma(double a, double b, double c) { return std::fma(a, b, c); }
static inline double kiln_m_rint(double x) { return std::rint(x); }
static inline double kiln_m_floor(double x) { return std::floor(x); }
static inline double kiln_m_sqrt(double x) { return std::sqrt(x); }
static inline double kiln_m_gather(const double* t, double i) { return t[int(i)]; }
static inline I kiln_m_bits(double x) {
  I b;
  std::memcpy(&b, &x, 8);
  return b;
}
static inline double kiln_m_from_bits(double, I b) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}
static inline double kiln_m_splat(double, double c) { return c; }
static inline bool kiln_m_all(bool m) { return m; }
static inline bool kiln_m_all_within(double x, double lo, double hi) { return lo <= x && x <= hi; }
static inline int kiln_m_width(double) { return 1; }
static inline double kiln_m_get(double x, int) { return x; }
static inline void kiln_m_set(double& x, int, double v) { x = v; }
#define KILN_M_FN static inline
#define KILN_M_COLD static inline
#include "codegen/math/kiln_math.inc"
#undef KILN_M_IK
#undef KILN_M_H
#undef KILN_M_COLD
#undef KILN_M_FN
}  // namespace kiln_math_scalar

// --- vectors ------------------------------------------------------------------------------------
// One namespace per ISA, each with the source included under that ISA's target options.
#define KILN_M_VECTOR_HELPERS(V, I, FMA, RINT, FLOOR, ALL, WITHIN, SQRT, GATHER)                   \
  template <class M> /* a comparison's mask: an int64 vector (long or long long) */                \
  static inline __attribute__((always_inline)) bool kiln_m_all(M m) {                              \
    return ALL;                                                                                    \
  }                                                                                                \
  static inline __attribute__((always_inline)) bool kiln_m_all_within(V x, double lo, double hi) { \
    return WITHIN;                                                                                 \
  }                                                                                                \
  static inline __attribute__((always_inline)) V kiln_m_fma(V a, V b, V c) { return FMA; }         \
  static inline __attribute__((always_inline)) V kiln_m_rint(V x) { return RINT; }                 \
  static inline __attribute__((always_inline)) V kiln_m_floor(V x) { return FLOOR; }               \
  static inline __attribute__((always_inline)) V kiln_m_sqrt(V x) { return SQRT; }                 \
  static inline __attribute__((always_inline)) V kiln_m_gather(const double* t, V i) {             \
    return GATHER;                                                                                 \
  }                                                                                                \
  static inline __attribute__((always_inline)) I kiln_m_bits(V x) { return (I)x; }                 \
  static inline __attribute__((always_inline)) V kiln_m_from_bits(V, I b) { return (V)b; }         \
  static inline int kiln_m_width(V) { return int(sizeof(V) / 8); }                                 \
  static inline double kiln_m_get(V x, int i) { return x[i]; }                                     \
  static inline void kiln_m_set(V& x, int i, double v) { x[i] = v; }                               \
  KILN_M_SCALAR_HELPERS                                                                            \
  static inline __attribute__((always_inline)) V kiln_m_splat(V, double c) {                       \
    V v;                                                                                           \
    for (int i = 0; i < int(sizeof(V) / 8); ++i) v[i] = c;                                         \
    return v;                                                                                      \
  }

#pragma GCC push_options
#pragma GCC target("sse4.2")
namespace kiln_math_b {
typedef double V __attribute__((vector_size(16)));
typedef unsigned long long I __attribute__((vector_size(16)));
typedef float F __attribute__((vector_size(16)));
// SSE4 has no FMA instruction: each lane through libm's fma (exact; only the x86-64-v2 target).
KILN_M_VECTOR_HELPERS(V, I, (V{std::fma(a[0], b[0], c[0]), std::fma(a[1], b[1], c[1])}),
                      _mm_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                      _mm_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                      _mm_movemask_pd(reinterpret_cast<__m128d>(m)) == 3,
                      _mm_movemask_pd(_mm_and_pd(_mm_cmple_pd(_mm_set1_pd(lo), x),
                                                 _mm_cmple_pd(x, _mm_set1_pd(hi)))) == 3,
                      _mm_sqrt_pd(x), (V{t[int(i[0])], t[int(i[1])]}))
#define KILN_M_FN static inline __attribute__((always_inline))
#define KILN_M_COLD static __attribute__((noinline, cold))
#include "codegen/math/kiln_math.inc"
#undef KILN_M_IK
#undef KILN_M_H
#undef KILN_M_COLD
#undef KILN_M_FN
}  // namespace kiln_math_b
#pragma GCC pop_options

// Gathers (and AVX-512's conversion) through their masked forms with a defined source: the plain
// ones hand GCC an undefined register, which -Wmaybe-uninitialized reports.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace kiln_math_d {
typedef double V __attribute__((vector_size(32)));
typedef unsigned long long I __attribute__((vector_size(32)));
typedef float F __attribute__((vector_size(32)));
KILN_M_VECTOR_HELPERS(
    V, I, _mm256_fmadd_pd(a, b, c),
    _mm256_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
    _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
    _mm256_movemask_pd(reinterpret_cast<__m256d>(m)) == 15,
    _mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(_mm256_set1_pd(lo), x, _CMP_LE_OQ),
                                     _mm256_cmp_pd(x, _mm256_set1_pd(hi), _CMP_LE_OQ))) == 15,
    _mm256_sqrt_pd(x),
    _mm256_mask_i32gather_pd(_mm256_setzero_pd(), t, _mm256_cvttpd_epi32(i),
                             _mm256_castsi256_pd(_mm256_set1_epi64x(-1)), 8))
// Constants as 32-byte memory operands rather than GCC's broadcasts into registers (one
// instruction and an FP pipe each): an empty asm that might write the constant keeps GCC from
// folding it into a broadcast, and the load folds into the instruction that uses it.
#define kiln_m_splat(like, c)                                              \
  (*[] {                                                                   \
    alignas(32) static V k = {double(c), double(c), double(c), double(c)}; \
    asm("" : "+m"(k));                                                     \
    return &k;                                                             \
  }())
// The range tests' bounds likewise (the helper above would broadcast them).
static inline __attribute__((always_inline)) bool kiln_m_within_v(V x, V lo, V hi) {
  return _mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(lo, x, _CMP_LE_OQ),
                                          _mm256_cmp_pd(x, hi, _CMP_LE_OQ))) == 15;
}
#define kiln_m_all_within(x, lo, hi) kiln_m_within_v(x, kiln_m_splat(x, lo), kiln_m_splat(x, hi))
#define KILN_M_IK(like, c)                                                       \
  (*[] {                                                                         \
    alignas(32) static I k = {(unsigned long long)(c), (unsigned long long)(c),  \
                              (unsigned long long)(c), (unsigned long long)(c)}; \
    asm("" : "+m"(k));                                                           \
    return &k;                                                                   \
  }())
#define KILN_M_FN static inline __attribute__((always_inline))
#define KILN_M_COLD static __attribute__((noinline, cold))
#include "codegen/math/kiln_math.inc"
#undef KILN_M_IK
#undef kiln_m_all_within
#undef kiln_m_splat
#undef KILN_M_H
#undef KILN_M_COLD
#undef KILN_M_FN
}  // namespace kiln_math_d
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f")
namespace kiln_math_e {
typedef double V __attribute__((vector_size(64)));
typedef unsigned long long I __attribute__((vector_size(64)));
typedef float F __attribute__((vector_size(64)));
KILN_M_VECTOR_HELPERS(
    V, I, _mm512_fmadd_pd(a, b, c),
    _mm512_maskz_roundscale_pd(0xff, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
    _mm512_maskz_roundscale_pd(0xff, x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
    _mm512_test_epi64_mask(reinterpret_cast<__m512i>(m), reinterpret_cast<__m512i>(m)) == 0xff,
    _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(_mm512_set1_pd(lo), x, _CMP_LE_OQ), x,
                            _mm512_set1_pd(hi), _CMP_LE_OQ) == 0xff,
    _mm512_maskz_sqrt_pd(0xff, x),
    _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xff, _mm512_maskz_cvttpd_epi32(0xff, i), t, 8))
#define KILN_M_FN static inline __attribute__((always_inline))
#define KILN_M_COLD static __attribute__((noinline, cold))
#include "codegen/math/kiln_math.inc"
#undef KILN_M_IK
#undef KILN_M_H
#undef KILN_M_COLD
#undef KILN_M_FN
}  // namespace kiln_math_e
#pragma GCC pop_options

// The exported variants: doubles, and floats computed in double and rounded once (two double
// vectors per float vector).
#define KILN_M_EXPORT(ISA, TARGET, ND, NF, NS, FN)                                             \
  extern "C" __attribute__((target(TARGET))) NS::V _ZGV##ISA##N##ND##v_kiln_##FN(NS::V x) {    \
    return NS::kiln_m_##FN<NS::V, NS::I>(x);                                                   \
  }                                                                                            \
  extern "C" __attribute__((target(TARGET))) NS::F _ZGV##ISA##N##NF##v_kiln_##FN##f(NS::F x) { \
    NS::V lo, hi;                                                                              \
    for (int i = 0; i < ND; ++i) {                                                             \
      lo[i] = x[i];                                                                            \
      hi[i] = x[i + ND];                                                                       \
    }                                                                                          \
    lo = NS::kiln_m_##FN<NS::V, NS::I>(lo);                                                    \
    hi = NS::kiln_m_##FN<NS::V, NS::I>(hi);                                                    \
    NS::F r;                                                                                   \
    for (int i = 0; i < ND; ++i) {                                                             \
      r[i] = static_cast<float>(lo[i]);                                                        \
      r[i + ND] = static_cast<float>(hi[i]);                                                   \
    }                                                                                          \
    return r;                                                                                  \
  }
#define KILN_M_EXPORT_ALL(FN)                                            \
  KILN_M_EXPORT(b, "sse4.2", 2, 4, kiln_math_b, FN)                      \
  KILN_M_EXPORT(d, "avx2,fma", 4, 8, kiln_math_d, FN)                    \
  KILN_M_EXPORT(e, "avx512f", 8, 16, kiln_math_e, FN)                    \
  extern "C" double kiln_##FN(double x) {                                \
    return kiln_math_scalar::kiln_m_##FN<double, unsigned long long>(x); \
  }

// pow: two arguments.
#define KILN_M_EXPORT2(ISA, TARGET, ND, NF, NS, FN)           \
  extern "C" __attribute__((target(TARGET)))                  \
  NS::V _ZGV##ISA##N##ND##vv_kiln_##FN(NS::V x, NS::V y) {    \
    return NS::kiln_m_##FN<NS::V, NS::I>(x, y);               \
  }                                                           \
  extern "C" __attribute__((target(TARGET)))                  \
  NS::F _ZGV##ISA##N##NF##vv_kiln_##FN##f(NS::F x, NS::F y) { \
    NS::V xl, xh, yl, yh;                                     \
    for (int i = 0; i < ND; ++i) {                            \
      xl[i] = x[i];                                           \
      xh[i] = x[i + ND];                                      \
      yl[i] = y[i];                                           \
      yh[i] = y[i + ND];                                      \
    }                                                         \
    xl = NS::kiln_m_##FN<NS::V, NS::I>(xl, yl);               \
    xh = NS::kiln_m_##FN<NS::V, NS::I>(xh, yh);               \
    NS::F r;                                                  \
    for (int i = 0; i < ND; ++i) {                            \
      r[i] = static_cast<float>(xl[i]);                       \
      r[i + ND] = static_cast<float>(xh[i]);                  \
    }                                                         \
    return r;                                                 \
  }
#define KILN_M_EXPORT2_ALL(FN)                                              \
  KILN_M_EXPORT2(b, "sse4.2", 2, 4, kiln_math_b, FN)                        \
  KILN_M_EXPORT2(d, "avx2,fma", 4, 8, kiln_math_d, FN)                      \
  KILN_M_EXPORT2(e, "avx512f", 8, 16, kiln_math_e, FN)                      \
  extern "C" double kiln_##FN(double x, double y) {                         \
    return kiln_math_scalar::kiln_m_##FN<double, unsigned long long>(x, y); \
  }

KILN_M_EXPORT_ALL(exp)
KILN_M_EXPORT_ALL(expm1)
KILN_M_EXPORT_ALL(log)
KILN_M_EXPORT_ALL(log1p)
KILN_M_EXPORT_ALL(tanh)
KILN_M_EXPORT_ALL(sin)
KILN_M_EXPORT_ALL(cos)
KILN_M_EXPORT_ALL(tan)
KILN_M_EXPORT_ALL(atan)
KILN_M_EXPORT_ALL(asin)
KILN_M_EXPORT_ALL(acos)
KILN_M_EXPORT2_ALL(pow)

// sin and cos of one vector in one call, for the CPU JIT, which joins a kernel's calls of the two
// variants above on one operand into one call of this (join_sincos in
// codegen/cpu/llvm_printer.cpp); results through pointers (GCC would return a struct of two
// vectors in memory anyway).
#define KILN_M_EXPORT_SINCOS(ISA, TARGET, ND, NF, NS)                               \
  extern "C" __attribute__((target(TARGET))) void _ZGV##ISA##N##ND##v_kiln_sincos(  \
      NS::V x, NS::V* s, NS::V* c) {                                                \
    NS::kiln_m_sincos<NS::V, NS::I>(x, *s, *c);                                     \
  }                                                                                 \
  extern "C" __attribute__((target(TARGET))) void _ZGV##ISA##N##NF##v_kiln_sincosf( \
      NS::F x, NS::F* s, NS::F* c) {                                                \
    NS::V lo, hi, slo, shi, clo, chi;                                               \
    for (int i = 0; i < ND; ++i) {                                                  \
      lo[i] = x[i];                                                                 \
      hi[i] = x[i + ND];                                                            \
    }                                                                               \
    NS::kiln_m_sincos<NS::V, NS::I>(lo, slo, clo);                                  \
    NS::kiln_m_sincos<NS::V, NS::I>(hi, shi, chi);                                  \
    for (int i = 0; i < ND; ++i) {                                                  \
      (*s)[i] = static_cast<float>(slo[i]);                                         \
      (*s)[i + ND] = static_cast<float>(shi[i]);                                    \
      (*c)[i] = static_cast<float>(clo[i]);                                         \
      (*c)[i + ND] = static_cast<float>(chi[i]);                                    \
    }                                                                               \
  }
KILN_M_EXPORT_SINCOS(b, "sse4.2", 2, 4, kiln_math_b)
KILN_M_EXPORT_SINCOS(d, "avx2,fma", 4, 8, kiln_math_d)
KILN_M_EXPORT_SINCOS(e, "avx512f", 8, 16, kiln_math_e)

namespace kiln::kmath {

namespace {
const char kSource[] =
#include "kiln_math_text.inc"
    ;
}  // namespace

const char* source() { return kSource; }

std::vector<std::pair<std::string, void*>> vector_symbols() {
  std::vector<std::pair<std::string, void*>> v;
#define KILN_M_SYMBOLS(FN)                                                                   \
  v.emplace_back("_ZGVbN2v_kiln_" #FN, reinterpret_cast<void*>(&_ZGVbN2v_kiln_##FN));        \
  v.emplace_back("_ZGVdN4v_kiln_" #FN, reinterpret_cast<void*>(&_ZGVdN4v_kiln_##FN));        \
  v.emplace_back("_ZGVeN8v_kiln_" #FN, reinterpret_cast<void*>(&_ZGVeN8v_kiln_##FN));        \
  v.emplace_back("_ZGVbN4v_kiln_" #FN "f", reinterpret_cast<void*>(&_ZGVbN4v_kiln_##FN##f)); \
  v.emplace_back("_ZGVdN8v_kiln_" #FN "f", reinterpret_cast<void*>(&_ZGVdN8v_kiln_##FN##f)); \
  v.emplace_back("_ZGVeN16v_kiln_" #FN "f", reinterpret_cast<void*>(&_ZGVeN16v_kiln_##FN##f));
  KILN_M_SYMBOLS(exp)
  KILN_M_SYMBOLS(expm1)
  KILN_M_SYMBOLS(log)
  KILN_M_SYMBOLS(log1p)
  KILN_M_SYMBOLS(tanh)
  KILN_M_SYMBOLS(sin)
  KILN_M_SYMBOLS(cos)
  KILN_M_SYMBOLS(tan)
  KILN_M_SYMBOLS(atan)
  KILN_M_SYMBOLS(asin)
  KILN_M_SYMBOLS(acos)
  KILN_M_SYMBOLS(sincos)
#undef KILN_M_SYMBOLS
  v.emplace_back("_ZGVbN2vv_kiln_pow", reinterpret_cast<void*>(&_ZGVbN2vv_kiln_pow));
  v.emplace_back("_ZGVdN4vv_kiln_pow", reinterpret_cast<void*>(&_ZGVdN4vv_kiln_pow));
  v.emplace_back("_ZGVeN8vv_kiln_pow", reinterpret_cast<void*>(&_ZGVeN8vv_kiln_pow));
  v.emplace_back("_ZGVbN4vv_kiln_powf", reinterpret_cast<void*>(&_ZGVbN4vv_kiln_powf));
  v.emplace_back("_ZGVdN8vv_kiln_powf", reinterpret_cast<void*>(&_ZGVdN8vv_kiln_powf));
  v.emplace_back("_ZGVeN16vv_kiln_powf", reinterpret_cast<void*>(&_ZGVeN16vv_kiln_powf));
  return v;
}

}  // namespace kiln::kmath
