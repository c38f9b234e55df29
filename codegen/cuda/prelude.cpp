// The preludes of printed CUDA kernels (cuda_printer.hpp). The common part is written in the
// subset of C++ that both NVRTC and a host compiler take; the two heads define what differs:
// function qualifiers, bit casts, the 64x64 high product, warp shuffles and the block tree.
#include <cstdio>
#include <string>

#include "codegen/cuda/cuda_printer.hpp"
#include "codegen/math/kiln_math.hpp"
#include "codegen/vector_math.hpp"
#include "support/ziggurat_tables.hpp"

namespace kiln::cuda {

namespace {

// NVRTC: no headers (the math functions are built in), device functions inlined.
const char* kDeviceHead = R"(// Kiln CUDA kernel (NVRTC)
#define KILN_FN __device__ __forceinline__
#define KILN_TABLE __device__ const
typedef long long kiln_i64;
typedef unsigned long long kiln_u64;
typedef int kiln_i32;
typedef unsigned int kiln_u32;
typedef unsigned char kiln_u8;
KILN_FN double kiln_f64_from_bits(kiln_u64 b) { return __longlong_as_double((long long)b); }
KILN_FN kiln_u64 kiln_bits_of_f64(double x) { return (kiln_u64)__double_as_longlong(x); }
KILN_FN kiln_u64 kiln_mulhi64(kiln_u64 a, kiln_u64 b) { return __umul64hi(a, b); }
KILN_FN void kiln_raise(unsigned* st, unsigned code) { atomicOr(st, code); }
)";

// Host C++ (cuda-emu): the same code compiled by c++ into a shared object, run serially.
const char* kEmuHead = R"(// Kiln CUDA kernel (cuda-emu: host C++)
#include <math.h>
#define KILN_FN static inline
#define KILN_TABLE static const
#define KILN_EMU 1
typedef long long kiln_i64;
typedef unsigned long long kiln_u64;
typedef int kiln_i32;
typedef unsigned int kiln_u32;
typedef unsigned char kiln_u8;
KILN_FN double kiln_f64_from_bits(kiln_u64 b) { double x; __builtin_memcpy(&x, &b, 8); return x; }
KILN_FN kiln_u64 kiln_bits_of_f64(double x) { kiln_u64 b; __builtin_memcpy(&b, &x, 8); return b; }
KILN_FN kiln_u64 kiln_mulhi64(kiln_u64 a, kiln_u64 b) {
  return (kiln_u64)(((unsigned __int128)a * (unsigned __int128)b) >> 64);
}
KILN_FN void kiln_raise(unsigned* st, unsigned code) { *st |= code; }
)";

// Element semantics (docs/KERNEL_IR.md; the interpreter's functions of the same names).
const char* kCommon = R"(
#define KILN_BLOCK 256
#define KILN_ERR_NEGATIVE_POWER 1u
template <class T> struct kiln_unsigned { typedef T type; };
template <> struct kiln_unsigned<kiln_i32> { typedef kiln_u32 type; };
template <> struct kiln_unsigned<kiln_i64> { typedef kiln_u64 type; };
template <class T> KILN_FN T kiln_wadd(T a, T b) {
  typedef typename kiln_unsigned<T>::type U; return (T)(U)((U)a + (U)b);
}
template <class T> KILN_FN T kiln_wsub(T a, T b) {
  typedef typename kiln_unsigned<T>::type U; return (T)(U)((U)a - (U)b);
}
template <class T> KILN_FN T kiln_wmul(T a, T b) {
  typedef typename kiln_unsigned<T>::type U; return (T)(U)((U)a * (U)b);
}
// Float -> integer: truncation, saturating, NaN -> 0.
template <class I> KILN_FN I kiln_saturate(double x, double lo, double hi, I ilo, I ihi) {
  if (x != x) return 0;
  double t = trunc(x);
  if (t >= hi) return ihi;
  if (t <= lo) return ilo;
  return (I)t;
}
KILN_FN kiln_i64 kiln_to_i64(double x) {
  return kiln_saturate<kiln_i64>(x, -9223372036854775808.0, 9223372036854775808.0,
                                 (kiln_i64)0x8000000000000000ull, (kiln_i64)0x7fffffffffffffffull);
}
KILN_FN kiln_i32 kiln_to_i32(double x) {
  return kiln_saturate<kiln_i32>(x, -2147483648.0, 2147483647.0, (kiln_i32)0x80000000u,
                                 (kiln_i32)0x7fffffff);
}
template <class T> KILN_FN T kiln_ifmod(T a, T b) { return (b == 0 || b == -1) ? T(0) : T(a % b); }
template <class T> KILN_FN T kiln_floordiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return kiln_wsub(T(0), a);
  T q = a / b;
  if (kiln_wmul(q, b) != a && ((a ^ b) < 0)) q = kiln_wsub(q, T(1));
  return q;
}
template <class T> KILN_FN T kiln_shift(bool left, T a, T b) {
  typedef typename kiln_unsigned<T>::type U;
  const U bits = sizeof(T) * 8;
  if ((U)b >= bits) return left ? T(0) : (a < 0 ? T(-1) : T(0));
  return left ? (T)((U)a << b) : (T)(a >> b);
}
KILN_FN kiln_i64 kiln_ipow(kiln_i64 base, kiln_i64 e, unsigned* st) {
  if (e < 0) { kiln_raise(st, KILN_ERR_NEGATIVE_POWER); return 0; }
  kiln_u64 r = 1, b = (kiln_u64)base, x = (kiln_u64)e;
  while (x) { if (x & 1) r *= b; b *= b; x >>= 1; }
  return (kiln_i64)r;
}
// Reduction folds (codegen/reduce_rules.hpp): wrapping integer sums and products, NaN-propagating
// min and max where a tie gives v, argmin/argmax in index order and across partials.
template <class T> KILN_FN T kiln_fold_sum(T a, T v) { return kiln_wadd(a, v); }
KILN_FN double kiln_fold_sum(double a, double v) { return a + v; }
KILN_FN float kiln_fold_sum(float a, float v) { return a + v; }
KILN_FN kiln_u8 kiln_fold_sum(kiln_u8 a, kiln_u8 v) { return (kiln_u8)(a + v); }
template <class T> KILN_FN T kiln_fold_prod(T a, T v) { return kiln_wmul(a, v); }
KILN_FN double kiln_fold_prod(double a, double v) { return a * v; }
KILN_FN float kiln_fold_prod(float a, float v) { return a * v; }
KILN_FN kiln_u8 kiln_fold_prod(kiln_u8 a, kiln_u8 v) { return (kiln_u8)(a * v); }
template <class T> KILN_FN T kiln_fold_min(T a, T v) { return v < a ? v : a; }
KILN_FN double kiln_fold_min(double a, double v) { return (a < v || a != a) ? a : v; }
KILN_FN float kiln_fold_min(float a, float v) { return (a < v || a != a) ? a : v; }
template <class T> KILN_FN T kiln_fold_max(T a, T v) { return v > a ? v : a; }
KILN_FN double kiln_fold_max(double a, double v) { return (a > v || a != a) ? a : v; }
KILN_FN float kiln_fold_max(float a, float v) { return (a > v || a != a) ? a : v; }
template <class T> KILN_FN T kiln_fold_all(T a, T v) { return (T)(a && v); }
template <class T> KILN_FN T kiln_fold_any(T a, T v) { return (T)(a || v); }
template <class T> KILN_FN bool kiln_isnan(T v) { return v != v; }
template <class T> KILN_FN bool kiln_arg_better(bool is_max, T v, T a) {
  bool better = is_max ? v > a : v < a;
  return better || (kiln_isnan(v) && !kiln_isnan(a));
}
template <class T> KILN_FN void kiln_arg_fold(bool is_max, T& a, kiln_i64& ai, T v, kiln_i64 vi) {
  if (vi >= 0 && (ai < 0 || kiln_arg_better(is_max, v, a))) { a = v; ai = vi; }
}
template <class T> KILN_FN void kiln_arg_combine(bool is_max, T& a, kiln_i64& ai, T v, kiln_i64 vi) {
  bool tie = v == a || (kiln_isnan(v) && kiln_isnan(a));
  if (vi >= 0 && (ai < 0 || kiln_arg_better(is_max, v, a) || (tie && vi < ai))) { a = v; ai = vi; }
}
// Neumaier's step: (s, c) += x.
template <class T> KILN_FN void kiln_neumaier(T& s, T& c, T x) {
  T t = s + x;
  T lost = fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
  c = c + lost;
  s = t;
}
template <class T> KILN_FN T kiln_compensated(T s, T c) {
  return fabs(c) < (T)kiln_f64_from_bits(0x7ff0000000000000ull) ? s + c : s;
}

// Random numbers: support/philox.hpp's functions, step for step.
struct kiln_w4 { kiln_u32 x0, x1, x2, x3; };
KILN_FN kiln_w4 kiln_philox(kiln_u64 seed, kiln_u32 stream, kiln_u64 j, kiln_u32 k) {
  kiln_u32 c0 = (kiln_u32)j, c1 = (kiln_u32)(j >> 32), c2 = stream, c3 = k;
  kiln_u32 k0 = (kiln_u32)seed, k1 = (kiln_u32)(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    kiln_u64 p0 = (kiln_u64)0xD2511F53u * c0, p1 = (kiln_u64)0xCD9E8D57u * c2;
    kiln_u32 n0 = (kiln_u32)(p1 >> 32) ^ c1 ^ k0, n1 = (kiln_u32)p1;
    kiln_u32 n2 = (kiln_u32)(p0 >> 32) ^ c3 ^ k1, n3 = (kiln_u32)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
  }
  kiln_w4 w = {c0, c1, c2, c3};
  return w;
}
struct kiln_words { kiln_u32 hi, lo; };
KILN_FN kiln_words kiln_element_words(kiln_u64 seed, kiln_u32 stream, kiln_u64 i) {
  kiln_w4 w = kiln_philox(seed, stream, i >> 1, 0);
  kiln_words r = {(i & 1) ? w.x2 : w.x0, (i & 1) ? w.x3 : w.x1};
  return r;
}
KILN_FN double kiln_u01(kiln_u32 hi, kiln_u32 lo) {
  kiln_u64 bits = ((kiln_u64)hi << 32) | lo;
  return (double)(bits >> 11) * 0x1.0p-53;
}
KILN_FN double kiln_uniform(kiln_u64 seed, kiln_u32 stream, kiln_u64 i) {
  kiln_words w = kiln_element_words(seed, stream, i);
  return kiln_u01(w.hi, w.lo);
}
KILN_FN kiln_i64 kiln_integers(kiln_u64 seed, kiln_u32 stream, kiln_u64 i, kiln_i64 low,
                               kiln_i64 high) {
  kiln_words w = kiln_element_words(seed, stream, i);
  kiln_u64 r = (kiln_u64)high - (kiln_u64)low, x = ((kiln_u64)w.hi << 32) | w.lo;
  return (kiln_i64)((kiln_u64)low + kiln_mulhi64(x, r));
}
)";

// The normal generator: ziggurat tables, then Kiln's own log and exp (support/philox.hpp).
const char* kNormal = R"(
KILN_FN double kiln_log_positive(double x) {
  const double coef[11] = {1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11,
                           1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
  kiln_u64 bits = kiln_bits_of_f64(x);
  kiln_i64 e = (kiln_i64)(bits >> 52) - 1023;
  double m = kiln_f64_from_bits((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > 2 * 0x1.6a09e667f3bcdp-1) { m = m * 0.5; e = e + 1; }
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = coef[0];
  for (int k = 1; k < 11; ++k) p = fma(p, z, coef[k]);
  const double de = (double)(kiln_i32)e;
  return fma(de, 0x1.62e42fee00000p-1, fma(de, 0x1.a39ef35793c76p-33, 2.0 * s * p));
}
KILN_FN double kiln_exp_nonpositive(double t) {
  const double coef[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                           1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0,
                           1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
  const double k = floor(t * 0x1.71547652b82fep+0 + 0.5);
  const double r = fma(-k, 0x1.a39ef35793c76p-33, fma(-k, 0x1.62e42fee00000p-1, t));
  double p = coef[0];
  for (int j = 1; j < 14; ++j) p = fma(p, r, coef[j]);
  return p * kiln_f64_from_bits((kiln_u64)((kiln_i64)k + 1023) << 52);
}
// Element i's word pairs in order: its half of the shared block, then (x0, x1) and (x2, x3) of
// its own blocks k = 1, 2, ... (support/philox.hpp's NormalWords).
struct kiln_normal_words { kiln_u64 seed, i; kiln_u32 stream, n; kiln_w4 w; };
KILN_FN kiln_words kiln_next_words(kiln_normal_words* s) {
  const kiln_u32 n = s->n++;
  if (n == 0) return kiln_element_words(s->seed, s->stream, s->i);
  kiln_words r;
  if (n & 1) {
    s->w = kiln_philox(s->seed, s->stream, s->i, (n + 1) / 2);
    r.hi = s->w.x0; r.lo = s->w.x1;
  } else {
    r.hi = s->w.x2; r.lo = s->w.x3;
  }
  return r;
}
KILN_FN double kiln_next_u01(kiln_normal_words* s) {
  const kiln_words w = kiln_next_words(s);
  return kiln_u01(w.hi, w.lo);
}
KILN_FN double kiln_normal(kiln_u64 seed, kiln_u32 stream, kiln_u64 i) {
  kiln_normal_words s = {seed, i, stream, 0, {0, 0, 0, 0}};
  for (;;) {
    const kiln_words w = kiln_next_words(&s);
    const double u = kiln_u01(w.hi, w.lo);
    const kiln_u32 layer = w.lo & (KILN_ZIG_LAYERS - 1);
    const bool negative = (w.lo >> KILN_ZIG_LAYER_BITS) & 1u;
    const double x = u * kiln_zig_x[layer];
    if (x < kiln_zig_x[layer + 1]) return negative ? -x : x;
    if (layer == 0) {
      for (;;) {
        const double a = -kiln_log_positive(1.0 - kiln_next_u01(&s)) / KILN_ZIG_R;
        const double b = -kiln_log_positive(1.0 - kiln_next_u01(&s));
        if (b + b >= a * a) return negative ? -(KILN_ZIG_R + a) : KILN_ZIG_R + a;
      }
    }
    const double y = kiln_zig_f[layer] +
                     kiln_next_u01(&s) * (kiln_zig_f[layer + 1] - kiln_zig_f[layer]);
    if (y < kiln_exp_nonpositive(-0.5 * x * x)) return negative ? -x : x;
  }
}
)";

// Shuffles and the block's tree (GPU), and the same tree run serially (cuda-emu): lane x
// combines lane x + off for off = 16, 8, 4, 2, 1 in each warp, then warp 0 does the same over
// the warps' results, so both give lane 0 the same value.
const char* kDeviceTree = R"(
template <class A> KILN_FN A kiln_shfl_down(const A& a, int off) {
  A r;
  const unsigned* s = (const unsigned*)&a;
  unsigned* d = (unsigned*)&r;
  for (int k = 0; k < (int)(sizeof(A) / 4); ++k) d[k] = __shfl_down_sync(0xffffffffu, s[k], off);
  return r;
}
template <class A> KILN_FN A kiln_block_tree(A a) {
  __shared__ A warps[32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) { A o = kiln_shfl_down(a, off); kiln_acc_combine(a, o); }
  if (lane == 0) warps[w] = a;
  __syncthreads();
  if (w == 0) {
    if (lane < KILN_BLOCK / 32) a = warps[lane]; else kiln_acc_init(a);
    for (int off = 16; off > 0; off >>= 1) { A o = kiln_shfl_down(a, off); kiln_acc_combine(a, o); }
  }
  return a;
}
// A group of gs threads' fold (owned kernels over long rows): gs = 32, the warp's tree, then
// lane 0's value to every lane; gs = KILN_BLOCK, the block's tree, then thread 0's value to
// every thread. The group is uniform (a whole warp or block), so every lane reaches it.
template <class A> KILN_FN A kiln_shfl0(const A& a) {
  A r;
  const unsigned* s = (const unsigned*)&a;
  unsigned* d = (unsigned*)&r;
  for (int k = 0; k < (int)(sizeof(A) / 4); ++k) d[k] = __shfl_sync(0xffffffffu, s[k], 0);
  return r;
}
template <class A> KILN_FN A kiln_rows_tree(A a, int gs) {
  if (gs == 32) {
    for (int off = 16; off > 0; off >>= 1) { A o = kiln_shfl_down(a, off); kiln_acc_combine(a, o); }
    return kiln_shfl0(a);
  }
  __shared__ A all;
  a = kiln_block_tree(a);
  if (threadIdx.x == 0) all = a;
  __syncthreads();
  a = all;
  __syncthreads();
  return a;
}
// A partial another block wrote (after its __threadfence): read past the L1 cache.
template <class A> KILN_FN A kiln_load_cg(const A* p) {
  A r;
  const unsigned* s = (const unsigned*)p;
  unsigned* d = (unsigned*)&r;
  for (int k = 0; k < (int)(sizeof(A) / 4); ++k) d[k] = __ldcg(s + k);
  return r;
}
)";

const char* kEmuTree = R"(
template <class A> static A kiln_block_tree_emu(A* lanes) {
  A warps[32];
  for (int w = 0; w < 32; ++w) kiln_acc_init(warps[w]);
  for (int w = 0; w < KILN_BLOCK / 32; ++w) {
    A* l = lanes + 32 * w;
    for (int off = 16; off > 0; off >>= 1)
      for (int x = 0; x < off; ++x) kiln_acc_combine(l[x], l[x + off]);
    warps[w] = l[0];
  }
  for (int off = 16; off > 0; off >>= 1)
    for (int x = 0; x < off; ++x) kiln_acc_combine(warps[x], warps[x + off]);
  return warps[0];
}
template <class A> static A kiln_rows_tree_emu(A* lanes, int gs) {
  if (gs != 32) return kiln_block_tree_emu(lanes);
  for (int off = 16; off > 0; off >>= 1)
    for (int x = 0; x < off; ++x) kiln_acc_combine(lanes[x], lanes[x + off]);
  return lanes[0];
}
)";

// Kiln's math functions as plain doubles; floats through double, rounded once.
const char* kMathHead = R"(
KILN_FN double kiln_m_fma(double a, double b, double c) { return fma(a, b, c); }
KILN_FN double kiln_m_rint(double x) { return rint(x); }
KILN_FN double kiln_m_floor(double x) { return floor(x); }
KILN_FN double kiln_m_sqrt(double x) { return sqrt(x); }
KILN_FN double kiln_m_gather(const double* t, double i) { return t[(int)i]; }
KILN_FN kiln_u64 kiln_m_bits(double x) { return kiln_bits_of_f64(x); }
KILN_FN double kiln_m_from_bits(double, kiln_u64 b) { return kiln_f64_from_bits(b); }
KILN_FN double kiln_m_splat(double, double c) { return c; }
KILN_FN bool kiln_m_all(bool m) { return m; }
KILN_FN bool kiln_m_all_within(double x, double lo, double hi) { return lo <= x && x <= hi; }
KILN_FN int kiln_m_width(double) { return 1; }
KILN_FN double kiln_m_get(double x, int) { return x; }
KILN_FN void kiln_m_set(double& x, int, double v) { x = v; }
KILN_FN kiln_u64 kiln_m_sbits(double x) { return kiln_bits_of_f64(x); }
KILN_FN kiln_u64 kiln_m_umulhi(kiln_u64 a, kiln_u64 b) { return kiln_mulhi64(a, b); }
#define KILN_M_TABLE KILN_TABLE
#define KILN_M_FN KILN_FN
#define KILN_M_COLD KILN_FN
)";
// The entry points, one per function the kernel calls (only those are instantiated).
const char* kMathWrap = R"(
#define KILN_M_WRAP(FN)                                                                  \
  KILN_FN double kiln_##FN(double x) { return kiln_m_##FN<double, kiln_u64>(x); }       \
  KILN_FN float kiln_##FN##f(float x) { return (float)kiln_##FN((double)x); }
)";
const char* kMathPow = R"(
KILN_FN double kiln_pow(double x, double y) { return kiln_m_pow<double, kiln_u64>(x, y); }
KILN_FN float kiln_powf(float x, float y) { return (float)kiln_pow((double)x, (double)y); }
)";

void append_table(std::string& s, const char* name, const double* t, int n) {
  s += "KILN_TABLE double ";
  s += name;
  s += "[" + std::to_string(n) + "] = {\n";
  char buf[64];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%a,%s", t[i], (i % 4 == 3 || i + 1 == n) ? "\n" : " ");
    s += buf;
  }
  s += "};\n";
}

}  // namespace

std::string prelude(Flavor flavor, bool normals, uint32_t kiln_fns) {
  bool emu = flavor == Flavor::Emu;
  std::string s = emu ? kEmuHead : kDeviceHead;
  s += kCommon;
  if (kiln_fns != 0) {
    s += kMathHead;
    s += kmath::source();
    s += kMathWrap;
    for (int f = 0; f < vm::kNumMathFns; ++f) {
      if (!((kiln_fns >> f) & 1u)) continue;
      if (vm::MathFn(f) == vm::MathFn::Pow)
        s += kMathPow;
      else
        s += std::string("KILN_M_WRAP(") + vm::libm_name(vm::MathFn(f)) + ")\n";
    }
  }
  if (normals) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "#define KILN_ZIG_LAYER_BITS %d\n#define KILN_ZIG_LAYERS %d\n#define KILN_ZIG_R "
                  "%a\n",
                  philox::kZigLayerBits, philox::kZigLayers, philox::kZigR);
    s += buf;
    append_table(s, "kiln_zig_x", philox::kZigX, philox::kZigLayers + 1);
    append_table(s, "kiln_zig_f", philox::kZigF, philox::kZigLayers + 1);
    s += kNormal;
  }
  return s;
}

std::string block_tree(Flavor flavor) { return flavor == Flavor::Emu ? kEmuTree : kDeviceTree; }

}  // namespace kiln::cuda
