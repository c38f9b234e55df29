// Kiln's own math functions (codegen/math): accuracy against long double references over each
// function's whole domain (random arguments spread over every binade, and the special values);
// the same bits from every CPU vector variant as from the scalar code; and, as the default math,
// the same bits from compiled kernels, the interpreter and cuda-emu (OpsTable.*).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "codegen/math/kiln_math.hpp"
#include "codegen/vector_math.hpp"
#include "oracle.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"  // the joint variants take vectors (their ISA's registers)

using namespace kiln;

namespace {

// |got - want| in units of the last place of want's double (subnormal spacing below 2^-1022);
// 0 when both are the same NaN class or the same infinity.
double ulps(double got, long double want) {
  double w = static_cast<double>(want);
  if (std::isnan(w) || std::isnan(got)) return std::isnan(w) && std::isnan(got) ? 0 : 1e300;
  if (std::isinf(w) || std::isinf(got)) return got == w ? 0 : 1e300;
  int e = 0;
  std::frexp(w == 0 ? std::numeric_limits<double>::min() : w, &e);
  long double ulp = std::ldexp(1.0L, std::max(e - 53, -1074));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

// How many elements of got differ from want in their bits (NaNs of any payload are equal).
template <class T>
size_t differing(const std::vector<T>& got, const std::vector<T>& want) {
  size_t n = 0;  // which NaN is not specified (docs/KERNEL_IR.md)
  for (size_t i = 0; i < got.size(); ++i)
    n += std::memcmp(&got[i], &want[i], sizeof(T)) != 0 &&
         !(std::isnan(got[i]) && std::isnan(want[i]));
  return n;
}

struct Fn {
  const char* name;
  vm::MathFn fn;
  double (*kiln)(double);
  long double (*ref)(long double);
  double lo, hi;    // the arguments tried: |x| spread log-uniformly over [lo, hi], both signs
  double clo, chi;  // and x uniform over [clo, chi], where the error peaks
  double max_ulps;  // its bound (docs/KERNEL_IR.md §7.1 gives the largest error measured)
};

#define KILN_REF(f) [](long double x) { return f(x); }
const Fn kFns[] = {
    {"exp", vm::MathFn::Exp, kiln_exp, KILN_REF(expl), 1e-20, 746, -745, 709.78, 1.5},
    {"expm1", vm::MathFn::Expm1, kiln_expm1, KILN_REF(expm1l), 1e-300, 710, -1, 1, 2.5},
    {"log", vm::MathFn::Log, kiln_log, KILN_REF(logl), 1e-320, 1e308, 0.7, 1.5, 3},
    {"log1p", vm::MathFn::Log1p, kiln_log1p, KILN_REF(log1pl), 1e-300, 1e300, -0.3, 0.5, 4},
    {"tanh", vm::MathFn::Tanh, kiln_tanh, KILN_REF(tanhl), 1e-300, 30, -1, 1, 3},
    {"sin", vm::MathFn::Sin, kiln_sin, KILN_REF(sinl), 1e-300, 1e308, -10, 10, 2.5},
    {"cos", vm::MathFn::Cos, kiln_cos, KILN_REF(cosl), 1e-300, 1e308, -10, 10, 2.5},
    {"tan", vm::MathFn::Tan, kiln_tan, KILN_REF(tanl), 1e-300, 1e308, -10, 10, 4},
    {"atan", vm::MathFn::Atan, kiln_atan, KILN_REF(atanl), 1e-300, 1e300, -1, 1, 3},
    {"asin", vm::MathFn::Asin, kiln_asin, KILN_REF(asinl), 1e-300, 1, -1, 1, 2},
    {"acos", vm::MathFn::Acos, kiln_acos, KILN_REF(acosl), 1e-300, 1, -1, 1, 1.5},
};
#undef KILN_REF

// Random arguments per kind: 200,000 unless KILN_MATH_SAMPLES says (docs/KERNEL_IR.md §7.1's
// maxima come from 2 x 10^7).
int samples() {
  const char* s = std::getenv("KILN_MATH_SAMPLES");
  return s ? std::max(1000, std::atoi(s)) : 200000;
}

std::vector<double> arguments(const Fn& f, int n) {
  std::mt19937_64 g(17);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> x;
  double a = std::log(f.lo), b = std::log(f.hi);
  for (int i = 0; i < n; ++i) x.push_back((i & 1 ? -1 : 1) * std::exp(a + u(g) * (b - a)));
  for (int i = 0; i < n / 4; ++i) x.push_back(-2 + 4 * u(g));  // near 0 and 1, densely
  for (int i = 0; i < n; ++i) x.push_back(f.clo + (f.chi - f.clo) * u(g));
  // The doubles nearest multiples of pi/2 (the reductions' hard cases), small and huge.
  for (int i = 0; i < n / 8; ++i) {
    double k = std::floor(std::exp(u(g) * 700));
    x.push_back(static_cast<double>(k * 1.5707963267948966192313216916397514L));
  }
  double inf = std::numeric_limits<double>::infinity();
  for (double s : {0.0,
                   -0.0,
                   1.0,
                   -1.0,
                   0.5,
                   2.0,
                   inf,
                   -inf,
                   5e-324,
                   -5e-324,
                   1e-310,
                   709.78,
                   709.7827128933840,
                   -745.13,
                   -745.1332191019412,
                   710.0,
                   -1e300,
                   1e300,
                   std::numeric_limits<double>::quiet_NaN(),
                   0x1.fffffffffffffp-1,
                   0x1.0000000000001p+0,
                   -0x1.fffffffffffffp-1,
                   22.0,
                   1e-17})
    x.push_back(s);
  return x;
}

}  // namespace

TEST(KilnMath, EveryFunctionIsWithinItsUlpBoundOverItsDomain) {
  for (const Fn& f : kFns) {
    double worst = 0, at = 0;
    for (double x : arguments(f, samples())) {
      double e = ulps(f.kiln(x), f.ref(x));
      if (e > worst) {
        worst = e;
        at = x;
      }
    }
    EXPECT_LE(worst, f.max_ulps) << f.name << " at " << at;
    std::printf("kiln_%s: max error %.3f ulp (at %.17g)\n", f.name, worst, at);
  }
}

TEST(KilnMath, SpecialValuesAreIeeeLike) {
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(kiln_exp(0.0), 1.0);
  EXPECT_EQ(kiln_exp(-inf), 0.0);
  EXPECT_EQ(kiln_exp(inf), inf);
  EXPECT_EQ(kiln_exp(710.0), inf);
  EXPECT_EQ(kiln_exp(-746.0), 0.0);
  EXPECT_EQ(kiln_exp(-745.0), 5e-324);
  EXPECT_TRUE(std::signbit(kiln_expm1(-0.0)));
  EXPECT_EQ(kiln_expm1(-inf), -1.0);
  EXPECT_EQ(kiln_log(1.0), 0.0);
  EXPECT_EQ(kiln_log(0.0), -inf);
  EXPECT_EQ(kiln_log(-0.0), -inf);
  EXPECT_TRUE(std::isnan(kiln_log(-1.0)));
  EXPECT_EQ(kiln_log(inf), inf);
  EXPECT_EQ(kiln_log1p(-1.0), -inf);
  EXPECT_TRUE(std::isnan(kiln_log1p(-2.0)));
  EXPECT_TRUE(std::signbit(kiln_log1p(-0.0)));
  EXPECT_EQ(kiln_tanh(inf), 1.0);
  EXPECT_EQ(kiln_tanh(-inf), -1.0);
  EXPECT_TRUE(std::signbit(kiln_tanh(-0.0)));
  EXPECT_TRUE(std::isnan(kiln_sin(inf)));
  EXPECT_TRUE(std::isnan(kiln_cos(-inf)));
  EXPECT_TRUE(std::isnan(kiln_tan(inf)));
  EXPECT_TRUE(std::signbit(kiln_sin(-0.0)));
  EXPECT_TRUE(std::signbit(kiln_tan(-0.0)));
  EXPECT_EQ(kiln_cos(0.0), 1.0);
  EXPECT_EQ(kiln_sin(1e-300), 1e-300);
  EXPECT_TRUE(std::signbit(kiln_atan(-0.0)));
  EXPECT_TRUE(std::signbit(kiln_asin(-0.0)));
  EXPECT_EQ(kiln_atan(inf), 0x1.921fb54442d18p+0);
  EXPECT_EQ(kiln_atan(-inf), -0x1.921fb54442d18p+0);
  EXPECT_EQ(kiln_asin(1.0), 0x1.921fb54442d18p+0);
  EXPECT_EQ(kiln_acos(1.0), 0.0);
  EXPECT_EQ(kiln_acos(-1.0), 0x1.921fb54442d18p+1);
  EXPECT_TRUE(std::isnan(kiln_asin(1.5)));
  EXPECT_TRUE(std::isnan(kiln_acos(-1.5)));
  for (const Fn& f : kFns) EXPECT_TRUE(std::isnan(f.kiln(std::nan("")))) << f.name;
}

TEST(KilnMath, EveryVectorIsaGivesTheScalarBits) {
  struct Isa {
    char isa;
    int lanes;
    bool present;
  };
  const Isa isas[] = {{'b', 2, bool(__builtin_cpu_supports("sse4.2"))},
                      {'d', 4, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
                      {'e', 8, bool(__builtin_cpu_supports("avx512f"))}};
  int tried = 0;
  for (const Fn& f : kFns) {
    std::vector<double> x = arguments(f, 20000), want(x.size()), got(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = f.kiln(x[i]);
    std::vector<float> xf(x.begin(), x.end()), gotf(x.size());
    for (const Isa& s : isas) {
      if (!s.present) continue;
      ++tried;
      vm::MathMode m{false, s.isa, s.lanes, true};
      vm::apply(f.fn, m, x.data(), nullptr, got.data(), int64_t(x.size()));
      EXPECT_EQ(differing(got, want), 0u) << f.name << " on ISA " << s.isa;
      // float32: computed in double, rounded once.
      vm::apply(f.fn, m, xf.data(), nullptr, gotf.data(), int64_t(x.size()));
      size_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        float w = static_cast<float>(f.kiln(static_cast<double>(xf[i])));
        bad += std::memcmp(&w, &gotf[i], sizeof w) != 0 && !(std::isnan(w) && std::isnan(gotf[i]));
      }
      EXPECT_EQ(bad, 0u) << f.name << "f on ISA " << s.isa;
    }
  }
  EXPECT_GE(tried, 10);  // SSE4 and AVX2 at least, on every machine Kiln runs on
}

namespace {

// pow's arguments: x over every binade (both signs, with integer y for negative x), y spread so
// that |y log x| covers the whole range up to overflow and underflow; x near 1 with huge y; and
// small integers and halves.
std::vector<std::pair<double, double>> pow_arguments(int n) {
  std::mt19937_64 g(23);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::pair<double, double>> v;
  for (int i = 0; i < n; ++i) {
    double x = std::exp(std::log(1e-310) + u(g) * (std::log(1e308) - std::log(1e-310)));
    double lx = std::log(x);
    double y = (u(g) * 2 - 1) * 760 / (lx == 0 ? 1 : std::fabs(lx));
    if (i % 4 == 1) y = std::round(y);
    if (i % 8 == 1) x = -x;  // with the integer y
    v.push_back({x, y});
  }
  for (int i = 0; i < n / 4; ++i) {  // near 1: 1 + d, |d| down to 2^-52, y up to 2^60
    double d = std::ldexp(u(g) - 0.5, -int(u(g) * 52));
    double x = 1 + d, lx = std::log1p(d);
    v.push_back({x, (u(g) * 2 - 1) * 700 / std::fabs(lx == 0 ? 1 : lx)});
  }
  for (int i = 0; i < n / 8; ++i)
    v.push_back({std::ldexp(u(g) + 0.5, int(u(g) * 40) - 20), std::round(u(g) * 40 - 20) / 2});
  return v;
}

}  // namespace

TEST(KilnMath, PowIsWithinItsUlpBoundOverItsDomain) {
  double worst = 0, wx = 0, wy = 0;
  for (auto [x, y] : pow_arguments(samples())) {
    long double want = powl(static_cast<long double>(x), static_cast<long double>(y));
    double e = ulps(kiln_pow(x, y), want);
    if (e > worst) {
      worst = e;
      wx = x;
      wy = y;
    }
  }
  EXPECT_LE(worst, 2.0) << "pow(" << wx << ", " << wy << ")";
  std::printf("kiln_pow: max error %.3f ulp (at %.17g, %.17g)\n", worst, wx, wy);
}

TEST(KilnMath, PowSpecialValuesAreC99s) {
  // Every pair of special and ordinary values: the same value as glibc's pow (C99 Annex F), sign
  // of zero and infinity included; any NaN for a NaN.
  double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const double vals[] = {0.0,   -0.0,  1.0, -1.0, 0.5,   -0.5,   2.0,     -2.0,
                         3.0,   -3.0,  2.5, -2.5, 1e300, -1e300, 1e-310,  -1e-310,
                         inf,   -inf,  nan, 1e16, -1e16, 0x1p53, -0x1p53, 9007199254740993.0,
                         700.5, -745.5};
  int bad = 0;
  for (double x : vals)
    for (double y : vals) {
      double want = std::pow(x, y), got = kiln_pow(x, y);
      bool same = std::isnan(want) ? std::isnan(got)
                                   : std::memcmp(&want, &got, sizeof got) == 0 ||
                                         (std::isfinite(want) && want != 0 && ulps(got, want) <= 2);
      if (!same && ++bad < 20)
        ADD_FAILURE() << "pow(" << x << ", " << y << ") = " << got << ", glibc " << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(KilnMath, PowGivesTheScalarBitsOnEveryVectorIsa) {
  std::vector<std::pair<double, double>> args = pow_arguments(20000);
  std::vector<double> x, y, want, got(args.size());
  for (auto [a, b] : args) {
    x.push_back(a);
    y.push_back(b);
    want.push_back(kiln_pow(a, b));
  }
  int tried = 0;
  for (auto [isa, lanes, present] :
       {std::tuple{'b', 2, bool(__builtin_cpu_supports("sse4.2"))},
        std::tuple{'d', 4, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
        std::tuple{'e', 8, bool(__builtin_cpu_supports("avx512f"))}}) {
    if (!present) continue;
    ++tried;
    vm::MathMode m{false, isa, lanes, true};
    vm::apply(vm::MathFn::Pow, m, x.data(), y.data(), got.data(), int64_t(x.size()));
    EXPECT_EQ(differing(got, want), 0u) << "pow on ISA " << isa;
  }
  EXPECT_GE(tried, 2);
}

namespace {

typedef double d2 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));
typedef double d8 __attribute__((vector_size(64)));
typedef float f4 __attribute__((vector_size(16)));
typedef float f8 __attribute__((vector_size(32)));
typedef float f16 __attribute__((vector_size(64)));
extern "C" void _ZGVbN2v_kiln_sincos(d2, d2*, d2*);
extern "C" void _ZGVdN4v_kiln_sincos(d4, d4*, d4*);
extern "C" void _ZGVeN8v_kiln_sincos(d8, d8*, d8*);
extern "C" void _ZGVbN4v_kiln_sincosf(f4, f4*, f4*);
extern "C" void _ZGVdN8v_kiln_sincosf(f8, f8*, f8*);
extern "C" void _ZGVeN16v_kiln_sincosf(f16, f16*, f16*);

// s[i], c[i] = the joint variant's sin and cos of x[i], L lanes at a time (n a multiple of L);
// compiled for the ISA, as the vector arguments are passed in its registers.
#define KILN_JOINT(NAME, TARGET, V, T, L, FN)                                   \
  __attribute__((target(TARGET))) void NAME(const T* x, T* s, T* c, size_t n) { \
    for (size_t i = 0; i < n; i += L) {                                         \
      V v, a, b;                                                                \
      std::memcpy(&v, x + i, sizeof v);                                         \
      FN(v, &a, &b);                                                            \
      std::memcpy(s + i, &a, sizeof a);                                         \
      std::memcpy(c + i, &b, sizeof b);                                         \
    }                                                                           \
  }
KILN_JOINT(joint_b, "sse4.2", d2, double, 2, _ZGVbN2v_kiln_sincos)
KILN_JOINT(joint_d, "avx2,fma", d4, double, 4, _ZGVdN4v_kiln_sincos)
KILN_JOINT(joint_e, "avx512f", d8, double, 8, _ZGVeN8v_kiln_sincos)
KILN_JOINT(joint_bf, "sse4.2", f4, float, 4, _ZGVbN4v_kiln_sincosf)
KILN_JOINT(joint_df, "avx2,fma", f8, float, 8, _ZGVdN8v_kiln_sincosf)
KILN_JOINT(joint_ef, "avx512f", f16, float, 16, _ZGVeN16v_kiln_sincosf)
#undef KILN_JOINT

}  // namespace

TEST(KilnMath, JointSinCosGivesTheBitsOfSinAndCos) {
  // The variant CPU kernels call where they take both sin and cos of one value
  // (codegen/cpu/llvm_printer.cpp's join_sincos) must not change a bit of either: over sin's
  // arguments (every binade, multiples of pi/2, the special values), with vectors that mix
  // ordinary lanes and lanes beyond 2^20 or not finite (the general path).
  const Fn& sin_fn = *std::find_if(std::begin(kFns), std::end(kFns),
                                   [](const Fn& f) { return f.fn == vm::MathFn::Sin; });
  std::vector<double> x = arguments(sin_fn, 20000);
  std::mt19937_64 g(31);
  std::shuffle(x.begin(), x.end(), g);
  while (x.size() % 16) x.push_back(0.5);  // whole vectors of every width, the specials kept
  std::vector<double> want_s(x.size()), want_c(x.size()), s(x.size()), c(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_s[i] = kiln_sin(x[i]);
    want_c[i] = kiln_cos(x[i]);
  }
  std::vector<float> xf(x.begin(), x.end()), want_sf(x.size()), want_cf(x.size()), sf(x.size()),
      cf(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_sf[i] = static_cast<float>(kiln_sin(static_cast<double>(xf[i])));
    want_cf[i] = static_cast<float>(kiln_cos(static_cast<double>(xf[i])));
  }
  struct Isa {
    char isa;
    bool present;
    void (*d)(const double*, double*, double*, size_t);
    void (*f)(const float*, float*, float*, size_t);
  };
  const Isa isas[] = {
      {'b', bool(__builtin_cpu_supports("sse4.2")), joint_b, joint_bf},
      {'d', __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), joint_d, joint_df},
      {'e', bool(__builtin_cpu_supports("avx512f")), joint_e, joint_ef}};
  int tried = 0;
  for (const Isa& isa : isas) {
    if (!isa.present) continue;
    ++tried;
    isa.d(x.data(), s.data(), c.data(), x.size());
    EXPECT_EQ(differing(s, want_s), 0u) << "sin on ISA " << isa.isa;
    EXPECT_EQ(differing(c, want_c), 0u) << "cos on ISA " << isa.isa;
    isa.f(xf.data(), sf.data(), cf.data(), x.size());
    EXPECT_EQ(differing(sf, want_sf), 0u) << "sinf on ISA " << isa.isa;
    EXPECT_EQ(differing(cf, want_cf), 0u) << "cosf on ISA " << isa.isa;
  }
  EXPECT_GE(tried, 2);
  EXPECT_TRUE(std::signbit(
      s[std::find_if(x.begin(), x.end(), [](double v) { return v == 0 && std::signbit(v); }) -
        x.begin()]));  // sin(-0.0) = -0.0
}
