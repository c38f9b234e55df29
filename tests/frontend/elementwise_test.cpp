// Element-wise ops against NumPy: every ufunc, broadcasting, promotion, weak scalars.
#include <cstring>
#include "oracle.hpp"

#include "support/flags.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

namespace {

struct UnaryCase {
  const char* np;
  Array (*fn)(const Array&);
  double lo, hi, ulps;
};

}  // namespace

TEST(Elementwise, UnaryFloat64MatchesNumPy) {
  // Kiln's vector functions (and libmvec's) are within 4 ulp of the correctly rounded result, as is
  // what NumPy calls (glibc, or its own SIMD code on AVX-512 hosts and for tanh): 8 ulp apart at
  // most, on any host. ulps 0: exact.
  const UnaryCase cases[] = {
      {"np.negative(x)", [](const Array& a) { return -a; }, -5, 5, 0},
      {"np.absolute(x)", [](const Array& a) { return kiln::abs(a); }, -5, 5, 0},
      {"np.sqrt(x)", [](const Array& a) { return kiln::sqrt(a); }, 0, 100, 0},
      {"np.exp(x)", [](const Array& a) { return kiln::exp(a); }, -20, 20, 8},
      {"np.expm1(x)", [](const Array& a) { return kiln::expm1(a); }, -2, 2, 8},
      {"np.log(x)", [](const Array& a) { return kiln::log(a); }, 1e-3, 1e3, 8},
      {"np.log1p(x)", [](const Array& a) { return kiln::log1p(a); }, -0.9, 10, 8},
      {"np.sin(x)", [](const Array& a) { return kiln::sin(a); }, -10, 10, 8},
      {"np.cos(x)", [](const Array& a) { return kiln::cos(a); }, -10, 10, 8},
      {"np.tan(x)", [](const Array& a) { return kiln::tan(a); }, -1.5, 1.5, 8},
      {"np.tanh(x)", [](const Array& a) { return kiln::tanh(a); }, -5, 5, 8},
      {"np.arcsin(x)", [](const Array& a) { return kiln::arcsin(a); }, -1, 1, 8},
      {"np.arccos(x)", [](const Array& a) { return kiln::arccos(a); }, -1, 1, 8},
      {"np.arctan(x)", [](const Array& a) { return kiln::arctan(a); }, -10, 10, 8},
      {"np.floor(x)", [](const Array& a) { return kiln::floor(a); }, -5, 5, 0},
      {"np.ceil(x)", [](const Array& a) { return kiln::ceil(a); }, -5, 5, 0},
      {"np.round(x)", [](const Array& a) { return kiln::round(a); }, -5, 5, 0},
      {"np.sign(x)", [](const Array& a) { return kiln::sign(a); }, -5, 5, 0},
      {"1 / (1 + np.exp(-x))", [](const Array& a) { return kiln::sigmoid(a); }, -10, 10, 8},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    NDArray x = kt::random_array(DType::Float64, {37, 53}, seed++, c.lo, c.hi);
    NDArray got = c.fn(lazy(x, {16, 20})).compute();
    NDArray want = kt::numpy({{"x", x}}, {c.np})[0];
    EXPECT_TRUE(c.ulps ? kt::same_ulps(got, want, c.ulps) : same(got, want)) << c.np;
  }
}

TEST(Elementwise, RoundIsHalfToEven) {
  NDArray x = kt::make_array(DType::Float64, {6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4999});
  EXPECT_TRUE(same(kiln::round(lazy(x)).compute(),
                   kt::make_array(DType::Float64, {6}, {0, 2, 2, -0.0, -2, 2})));
}

TEST(Elementwise, PredicatesAndSpecialValues) {
  double inf = INFINITY, nan = NAN;
  NDArray x = kt::make_array(DType::Float64, {6}, {0, -0.0, inf, -inf, nan, 2.5});
  auto want =
      kt::numpy({{"x", x}}, {"np.isnan(x)", "np.isfinite(x)", "np.sign(x)", "np.logical_not(x)",
                             "np.maximum(x, 1.0)", "np.minimum(x, 1.0)"});
  Array a = lazy(x);
  EXPECT_TRUE(same(isnan(a).compute(), want[0]));
  EXPECT_TRUE(same(isfinite(a).compute(), want[1]));
  EXPECT_TRUE(same(sign(a).compute(), want[2]));
  EXPECT_TRUE(same(logical_not(a).compute(), want[3]));
  EXPECT_TRUE(same(maximum(a, 1.0).compute(), want[4]));
  EXPECT_TRUE(same(minimum(a, 1.0).compute(), want[5]));
}

TEST(Elementwise, BinaryOpsWithBroadcastingMatchNumPy) {
  NDArray a = kt::random_array(DType::Float64, {7, 1, 9}, 11);
  NDArray b = kt::random_array(DType::Float64, {5, 9}, 12, 0.5, 4);
  Array x = lazy(a, {3, 1, 4}), y = lazy(b, {2, 5});
  std::vector<std::string> exprs = {"a + b",
                                    "a - b",
                                    "a * b",
                                    "a / b",
                                    "np.remainder(a, b)",
                                    "np.power(np.abs(a), b)",
                                    "a < b",
                                    "a <= b",
                                    "a > b",
                                    "a >= b",
                                    "a == b",
                                    "a != b",
                                    "np.maximum(a, b)",
                                    "np.minimum(a, b)"};
  auto want = kt::numpy({{"a", a}, {"b", b}}, exprs);
  std::vector<Array> got = {
      x + y,  x - y,  x * y,  x / y,         x % y,        pow(abs(x), y), x<y, x <= y, x> y,
      x >= y, x == y, x != y, maximum(x, y), minimum(x, y)};
  auto res = compute(got);
  // Correctly rounded operations are exact; pow (within 4 ulp) within 8 ulp of NumPy's.
  for (size_t k = 0; k < exprs.size(); ++k)
    EXPECT_TRUE(exprs[k].find("power") != std::string::npos ? kt::same_ulps(res[k], want[k], 8)
                                                            : same(res[k], want[k]))
        << exprs[k];
}

TEST(Elementwise, IntegerArithmeticFollowsNumPy) {
  NDArray a = kt::random_array(DType::Int64, {40}, 21, -50, 50);
  NDArray b = kt::random_array(DType::Int64, {40}, 22, -6, 6);  // includes zeros
  Array x = lazy(a, {16}), y = lazy(b, {16});
  auto want =
      kt::numpy({{"a", a}, {"b", b}},
                {"a + b", "a - b", "a * b", "np.remainder(a, b)", "a / b", "np.power(a, np.abs(b))",
                 "np.maximum(a, b)", "-a", "np.abs(a)", "np.sign(a)"});
  auto got = compute(
      {x + y, x - y, x * y, x % y, x / y, pow(x, abs(y)), maximum(x, y), -x, abs(x), sign(x)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
}

TEST(Elementwise, TypePromotionMatchesNumPy) {
  NDArray i32 = kt::random_array(DType::Int32, {4, 3}, 31, -9, 9);
  NDArray i64 = kt::random_array(DType::Int64, {4, 3}, 32, -9, 9);
  NDArray f32 = kt::random_array(DType::Float32, {4, 3}, 33);
  NDArray f64 = kt::random_array(DType::Float64, {4, 3}, 34);
  NDArray bl = kt::random_array(DType::Bool, {4, 3}, 35);
  Array a = lazy(i32), b = lazy(i64), c = lazy(f32), d = lazy(f64), e = lazy(bl);
  auto want = kt::numpy(
      {{"a", i32}, {"b", i64}, {"c", f32}, {"d", f64}, {"e", bl}},
      {"a + b", "a + c", "c + d", "b * c", "e + a", "e & e", "a + np.int32(1)",
       "c * np.float32(0.5)", "a + 0.5", "e + e", "e * e", "a / a", "c / c", "np.sqrt(a)"});
  auto got = compute({a + b, a + c, c + d, b * c, e + a, e & e, a + 1, c * 0.5, a + 0.5, e + e,
                      e * e, a / a, c / c, sqrt(a)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-7)) << k;
  EXPECT_EQ((a + 1).dtype(), DType::Int32);
  EXPECT_EQ((c * 0.5).dtype(), DType::Float32);
  EXPECT_EQ((e + 1).dtype(), DType::Int64);
}

TEST(Elementwise, WhereClipAstypeLogical) {
  NDArray a = kt::random_array(DType::Float64, {6, 8}, 41);
  NDArray b = kt::random_array(DType::Float64, {8}, 42);
  Array x = lazy(a, {4, 3}), y = lazy(b);
  auto want = kt::numpy(
      {{"a", a}, {"b", b}},
      {"np.where(a > b, a, b)", "np.where(a > 0, 1.5, a)", "np.clip(a, -1, 1)",
       "a.astype(np.int32)", "a.astype(np.bool_)", "np.logical_and(a > 0, b > 0)",
       "np.logical_or(a > 0, b > 0)", "(a > 0).astype(np.float32)", "np.where(a > 0, 1, 0)"});
  auto got = compute({where(x > y, x, y), where(x > 0, 1.5, x), clip(x, -1, 1),
                      x.astype(DType::Int32), x.astype(DType::Bool), (x > 0) & (y > 0),
                      (x > 0) | (y > 0), (x > 0).astype(DType::Float32), where(x > 0, 1, 0)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
}

TEST(Elementwise, ScalarsOnEitherSide) {
  NDArray a = kt::random_array(DType::Float64, {10}, 51, 0.5, 3);
  Array x = lazy(a, {3});
  auto want = kt::numpy({{"a", a}}, {"2 - a", "2 / a", "2 ** a", "a ** 2", "3 % a", "a % 0.7"});
  auto got = compute({2 - x, 2 / x, pow(2, x), pow(x, 2), 3 % x, x % 0.7});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-15)) << k;
}

TEST(Elementwise, VectorizedTranscendentalsOverManyElements) {
  // Long rows make the vectorizer pick its widest variant (a wrong vector ISA would SIGILL).
  NDArray a = kt::random_array(DType::Float64, {64, 4096}, 52, -3, 3);
  Array x = lazy(a, {16, 4096});
  auto want = kt::numpy({{"a", a}}, {"np.sin(a).sum(axis=1)",
                                     "(np.exp(a) - np.cos(a) * np.log1p(np.abs(a))).max(axis=1)",
                                     "np.tanh(np.arctan(a)).sum(axis=1)"});
  auto got = compute(
      {sin(x).sum({1}), (exp(x) - cos(x) * log1p(abs(x))).max({1}), tanh(arctan(x)).sum({1})});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-12)) << k;
}

TEST(Elementwise, PreciseMathCallsGlibcsScalarFunctions) {
  // KILN_PRECISE_MATH makes kernels call glibc's scalar sin/cos/..., so an exact test such as
  // sin^2 + cos^2 == 1 counts as the same test written in C++ with std::sin/std::cos. (NumPy gives
  // that count too only where it calls glibc as well: not on AVX-512 hosts, where it has SIMD code
  // of its own; and the vector functions, Kiln's by default, are within 4 ulp of glibc's.)
  NDArray a = kt::random_array(DType::Float64, {300, 400}, 53, 0, 1);
  Array x = lazy(a, {100, 100});
  Array y = (pow(sin(x), 2) + pow(cos(x), 2) == 1).sum();
  int64_t glibc_count = 0;
  for (int64_t k = 0; k < a.size(); ++k) {
    double s = std::sin(a.at(k)), c = std::cos(a.at(k));
    glibc_count += s * s + c * c == 1;
  }
  kiln::clear_plan_cache();
  flags().precise_math = true;
  int64_t plans = kiln::stats().plans_built;
  int64_t precise = y.compute().item<int64_t>();
  NDArray precise_sin = sin(x).compute();
  flags().precise_math = false;
  int64_t fast = y.compute().item<int64_t>();
  NDArray fast_sin = sin(x).compute();
  EXPECT_EQ(kiln::stats().plans_built, plans + 4);  // the flag is part of the plan's key
  // On a GPU (KILN_DEVICE=cuda) the kernels call CUDA's sin/cos instead, within 2 ulp of the
  // exact result by CUDA's documentation (an H100: 93766 of the 120000 are exact, glibc 94986).
  const bool gpu = flags().device == "cuda";
  if (!gpu) {
    EXPECT_EQ(precise, glibc_count);
  }
  EXPECT_GT(fast, 0);
  for (int64_t k = 0; k < a.size(); ++k) {
    double want = std::sin(a.at(k));
    if (gpu)
      ASSERT_LE(std::fabs(precise_sin.at(k) - want), 4 * (std::nextafter(want, 2.0) - want)) << k;
    else
      ASSERT_EQ(precise_sin.at(k), want) << k;
    ASSERT_LE(std::fabs(fast_sin.at(k) - want), 4 * (std::nextafter(want, 2.0) - want)) << k;
  }
}

TEST(Elementwise, TranscendentalValuesDoNotDependOnChunkingOrFusion) {
  // The vectorized body and the scalar remainder call the same vector variant, so an element's
  // value is the same whatever block (and so loop position) it falls in, fused or not; sin and
  // cos of one value, one joint call in fused kernels (codegen/cpu: join_sincos), two unfused.
  NDArray a = kt::random_array(DType::Float64, {37, 61}, 54, -4, 4);
  NDArray f = kt::random_array(DType::Float32, {37, 61}, 55, -4, 4);
  auto exprs = [](const Array& x, const Array& y) {
    return std::vector<Array>{sin(x) * cos(x) + exp(x / 4) - log1p(abs(x)),
                              tanh(x) + arctan(x) + pow(abs(x) + 1, x / 3),
                              sin(y) * cos(y) + exp(y / 4) + tan(y / 8)};
  };
  ComputeOptions unfused;
  unfused.fuse = false;
  auto ref = compute(exprs(lazy(a, {37, 61}), lazy(f, {37, 61})));
  for (const Shape& chunks : {Shape{5, 7}, Shape{1, 61}, Shape{37, 3}}) {
    for (bool fuse : {true, false}) {
      ComputeOptions o;
      o.fuse = fuse;
      auto got = compute(exprs(lazy(a, chunks), lazy(f, chunks)), o);
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_EQ(0, std::memcmp(got[k].data(), ref[k].data(), ref[k].nbytes()))
            << k << " chunks " << shape_str(chunks) << " fuse " << fuse;
    }
  }
}

TEST(Elementwise, MathReductionsOverRowsOfAnyLengthAgree) {
  // CPU kernels whose body calls vector math run a row as a loop over whole groups of 4 vectors
  // and a vectorized loop over the rest (codegen/cpu: body_loop). Rows of every remainder:
  // the exact count of sin^2 + cos^2 == 1 is the same whatever the chunking, fused (one kernel
  // with reductions) or not (sin and cos stored first), and sums along rows match NumPy.
  NDArray a = kt::random_array(DType::Float64, {40, 1031}, 56, -5, 5);
  auto count = [](const Array& x) { return (pow(sin(x), 2) + pow(cos(x), 2) == 1).sum(); };
  ComputeOptions unfused;
  unfused.fuse = false;
  int64_t want = compute({count(lazy(a, {40, 1031}))}, unfused)[0].item<int64_t>();
  EXPECT_GT(want, 0);
  for (const Shape& chunks :
       {Shape{40, 1031}, Shape{7, 61}, Shape{40, 250}, Shape{3, 33}, Shape{40, 1000}, Shape{1, 95}})
    EXPECT_EQ(count(lazy(a, chunks)).compute().item<int64_t>(), want) << shape_str(chunks);
  auto np = kt::numpy({{"a", a}}, {"(np.sin(a) * np.exp(a / 8)).sum(axis=1)"});
  for (const Shape& chunks : {Shape{40, 1031}, Shape{7, 61}, Shape{5, 250}}) {
    Array x = lazy(a, chunks);
    EXPECT_TRUE(same(compute({(sin(x) * exp(x / 8)).sum({1})})[0], np[0], 1e-12))
        << shape_str(chunks);
  }
}

TEST(Elementwise, FloatRemainderZeroTakesTheDivisorsSign) {
  // np.remainder(-5.0, 2.5) is +0.0 and np.remainder(5.0, -2.5) is -0.0 (found by the fuzzer:
  // 1 / remainder gave -inf where NumPy gives inf).
  NDArray b = kt::make_array(DType::Float64, {4}, {2.5, -2.5, 5, -1});
  auto want = kt::numpy({{"b", b}}, {"1 / np.remainder(-5.0, b)", "1 / np.remainder(5.0, b)"});
  auto got = compute({1 / (-5.0 % lazy(b)), 1 / (5.0 % lazy(b))});
  EXPECT_TRUE(same(got[0], want[0]));
  EXPECT_TRUE(same(got[1], want[1]));
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_EQ(std::signbit(got[0].at(k)), std::signbit(want[0].at(k))) << k;
}

TEST(Elementwise, SignOfNegativeZeroIsPositiveZero) {
  // NumPy: np.sign(-0.0) is +0.0, so 1 / sign(-0.0) is +inf (found by the fuzzer).
  NDArray x = kt::make_array(DType::Float64, {3}, {-0.0, 0.0, NAN});
  NDArray s = sign(lazy(x)).compute();
  EXPECT_FALSE(std::signbit(s.at(0)));
  EXPECT_FALSE(std::signbit(s.at(1)));
  EXPECT_TRUE(std::isnan(s.at(2)));
  EXPECT_EQ((1 / sign(lazy(x))).compute().at(0), INFINITY);
}

TEST(Elementwise, ClipKeepsTheValueOnATieWithAScalarBound) {
  // np.clip with scalar bounds keeps x where x equals a bound, so a zero keeps its sign; NaN stays
  // NaN; lo > hi gives hi. Found by the fuzzer (seed 73, case 2958: clip(round(x), False, True)
  // of a float32 x gave +0.0 where NumPy gives -0.0).
  for (DType t : {DType::Float32, DType::Float64}) {
    NDArray a = kt::make_array(t, {7}, {-0.0, 0.0, NAN, -3, 0.5, 2, -INFINITY});
    auto want = kt::numpy(
        {{"a", a}}, {"np.clip(a, 0.0, 1.0)", "np.clip(a, -0.0, -0.0)", "np.clip(a, -1.0, 0.0)",
                     "np.clip(a, 3, 1)", "np.clip(a, False, True)"});
    Array x = lazy(a, {3});
    auto got = compute({clip(x, 0.0, 1.0), clip(x, -0.0, -0.0), clip(x, -1.0, 0.0), clip(x, 3, 1),
                        clip(x, false, true)});
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(same(got[k], want[k])) << k << " " << kiln::dtype_name(t);
  }
  NDArray i = kt::make_array(DType::Int32, {4}, {-5, 0, 7, 100});
  auto want = kt::numpy({{"i", i}}, {"np.clip(i, -1, 8)", "np.clip(i, -1, 2.5)"});
  EXPECT_TRUE(same(clip(lazy(i), -1, 8).compute(), want[0]));
  EXPECT_TRUE(same(clip(lazy(i), -1, 2.5).compute(), want[1]));
}
