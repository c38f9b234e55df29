// Every kernel IR op on every backend this machine has: the LLVM kernels (--device cpu), the
// reference interpreter (--device interp) and the CUDA printer's kernels compiled as host C++
// (--device cuda-emu) must agree bit for bit on every element-wise op and dtype pair, over NaN,
// infinities, signed zeros, subnormals and the integers' extremes; and all must give the values
// docs/KERNEL_IR.md defines (the hand-computed rows below). Reductions: exact ones bit for bit,
// float sums and products within rounding error (docs/KERNEL_IR.md §8.6). Transcendental
// functions: Kiln's own (the default) agree bit for bit everywhere; with KILN_MATH=libmvec
// cuda-emu calls the host's libm, so it agrees bit for bit with the others in precise mode
// (KILN_PRECISE_MATH, glibc's functions) only, as libmvec's variants differ by a few ulp.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "codegen/vector_math.hpp"
#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

template <class T>
using lim = std::numeric_limits<T>;

// The special values of each dtype, as a lazy column of n elements.
std::vector<double> float_specials() {
  double inf = lim<double>::infinity(), nan = lim<double>::quiet_NaN();
  return {0.0,
          -0.0,
          1.0,
          -1.0,
          0.5,
          -0.5,
          1.5,
          2.5,
          -2.5,
          3.0,
          -7.0,
          0.1,
          -0.1,
          100.5,
          1e300,
          -1e300,
          5e-324,
          -5e-324,
          1e-310,
          -1e-310,
          lim<double>::max(),
          -lim<double>::max(),
          inf,
          -inf,
          nan,
          -nan,
          3.141592653589793,
          0x1p53,
          0x1p53 + 2,
          0x1p63,
          -0x1p63,
          0x1p31,
          -0x1p31 - 1,
          2147483647.5,
          1e-5,
          30.0,
          -30.0,
          709.0,
          -745.0,
          0.75,
          -0.9999};
}
std::vector<int64_t> int_specials(bool i64) {
  std::vector<int64_t> v = {0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, -32, 100, -100, 1000};
  if (i64) {
    for (int64_t x : {int64_t{63}, int64_t{64}, int64_t{65}, lim<int64_t>::max(),
                      lim<int64_t>::min(), lim<int64_t>::max() - 1, lim<int64_t>::min() + 1,
                      int64_t{1} << 53, (int64_t{1} << 53) + 1, int64_t{1} << 31})
      v.push_back(x);
  } else {
    for (int64_t x : {int64_t{lim<int32_t>::max()}, int64_t{lim<int32_t>::min()},
                      int64_t{lim<int32_t>::max() - 1}, int64_t{lim<int32_t>::min() + 1},
                      int64_t{1} << 24, (int64_t{1} << 24) + 1})
      v.push_back(x);
  }
  return v;
}

// A column (shape n x 1, or 1 x n when `row`) of the dtype's special values.
NDArray specials(DType t, bool row) {
  std::vector<double> f = float_specials();
  std::vector<int64_t> i = int_specials(t == DType::Int64);
  size_t n = t == DType::Bool ? 2 : is_float(t) ? f.size() : i.size();
  NDArray a(t, row ? Shape{1, int64_t(n)} : Shape{int64_t(n), 1});
  for (size_t k = 0; k < n; ++k) {
    switch (t) {
      case DType::Bool:
        static_cast<bool*>(a.data())[k] = k == 1;
        break;
      case DType::Int32:
        static_cast<int32_t*>(a.data())[k] = static_cast<int32_t>(i[k]);
        break;
      case DType::Int64:
        static_cast<int64_t*>(a.data())[k] = i[k];
        break;
      case DType::Float32:
        static_cast<float*>(a.data())[k] = static_cast<float>(f[k]);
        break;
      case DType::Float64:
        static_cast<double*>(a.data())[k] = f[k];
        break;
    }
  }
  return a;
}

const DType kDTypes[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};

std::vector<NDArray> on(Device d, const std::vector<Array>& outs) {
  ComputeOptions o;
  o.device = d;
  o.progress = false;
  return compute(outs, o);
}

std::string element(const NDArray& a, int64_t e) {
  char buf[64];
  if (is_float(a.dtype()))
    std::snprintf(buf, sizeof buf, "%.17g", a.at(e));
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(a.at_int(e)));
  return buf;
}

// The same dtype, shape and bytes (zero signs included), except that a NaN matches any NaN:
// which NaN an operation gives is not specified (docs/KERNEL_IR.md; x86 gives the first
// operand's, and both compilers may swap the operands of + and *).
::testing::AssertionResult identical(const NDArray& got, const NDArray& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "dtype/shape differ";
  size_t w = dtype_size(got.dtype());
  int64_t bad = 0, first = -1;
  for (int64_t e = 0; e < got.size(); ++e)
    if (std::memcmp(static_cast<const char*>(got.data()) + e * w,
                    static_cast<const char*>(want.data()) + e * w, w) != 0 &&
        !(is_float(got.dtype()) && std::isnan(got.at(e)) && std::isnan(want.at(e)))) {
      if (first < 0) first = e;
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ; first [" << first << "]: interp "
         << element(got, first) << ", cpu " << element(want, first);
}

// Computes the outputs on every backend and compares them bit for bit; cuda-emu's only where
// `emu_exact` says (all when it is empty).
void expect_backends_agree(const std::vector<Array>& outs, const std::vector<std::string>& names,
                           const std::vector<bool>& emu_exact = {}) {
  std::vector<NDArray> cpu = on(Device::Cpu, outs), interp = on(Device::Interp, outs);
  std::vector<NDArray> emu = on(Device::CudaEmu, outs);
  for (size_t k = 0; k < outs.size(); ++k) {
    EXPECT_TRUE(identical(interp[k], cpu[k])) << names[k];
    if (emu_exact.empty() || emu_exact[k]) {
      EXPECT_TRUE(identical(emu[k], interp[k])) << names[k] << " (cuda-emu against interp)";
    }
  }
}

bool transcendental(UnaryFn f) {
  return f != UnaryFn::Neg && f != UnaryFn::Abs && f != UnaryFn::Sqrt && f != UnaryFn::Floor &&
         f != UnaryFn::Ceil && f != UnaryFn::Round && f != UnaryFn::Sign && f != UnaryFn::IsNan &&
         f != UnaryFn::IsFinite && f != UnaryFn::Not && f != UnaryFn::Invert;
}

}  // namespace

TEST(OpsTable, EveryUnaryOpAndDtypeAgreesBitForBit) {
  // libmvec's functions, glibc's (precise), Kiln's own (the default: the same on cuda-emu).
  const std::string saved = flags().math;
  for (int mode = 0; mode < 3; ++mode) {
    bool precise = mode == 1, kiln = mode == 2;
    flags().precise_math = precise;
    flags().math = kiln ? "kiln" : "libmvec";
    for (DType t : kDTypes) {
      NDArray x = specials(t, false);
      Array a = kt::lazy(x, {7, 1});
      // A longer, strided operand too: the values repeated past one vector tile, transposed.
      Array wide = (a * Array(ones({1, 40}, {}, t))).T();
      std::vector<Array> outs;
      std::vector<std::string> names;
      std::vector<bool> emu_exact;
      for (int f = 0; f < kNumUnaryFns; ++f) {
        for (const Array& in : {a, wide}) {
          try {
            outs.push_back(unary(UnaryFn(f), in));
            names.push_back(std::string(unary_name(UnaryFn(f))) + "(" + dtype_name(t) + ")" +
                            (precise ? " precise"
                             : kiln  ? " kiln"
                                     : ""));
            emu_exact.push_back(precise || !transcendental(UnaryFn(f)) ||
                                (kiln && vm::kiln_has(vm::math_fn(UnaryFn(f)))));
          } catch (const Error&) {  // refused for this dtype by the frontend, as by NumPy
          }
        }
      }
      expect_backends_agree(outs, names, emu_exact);
    }
  }
  flags().precise_math = false;
  flags().math = saved;
}

TEST(OpsTable, EveryBinaryOpAndDtypePairAgreesBitForBit) {
  // Every op with libmvec's pow; then power again with Kiln's (the default): the same bits on
  // cuda-emu too.
  const std::string saved = flags().math;
  for (bool kiln : {false, true})
    for (DType ta : kDTypes) {
      for (DType tb : kDTypes) {
        flags().math = kiln ? "kiln" : "libmvec";
        NDArray x = specials(ta, false), y = specials(tb, true);
        Array a = kt::lazy(x, {5, 1}), b = kt::lazy(y, {1, 9});
        std::vector<Array> outs;
        std::vector<std::string> names;
        std::vector<bool> emu_exact;
        for (int f = 0; f < kNumBinaryFns; ++f) {
          auto fn = BinaryFn(f);
          if (kiln && fn != BinaryFn::Pow) continue;
          Array r;
          try {
            r = binary(fn, a, b);
          } catch (const Error&) {  // refused for these dtypes by the frontend, as by NumPy
            continue;
          }
          if (fn == BinaryFn::Pow && !is_float(r.dtype()) && tb != DType::Bool) {
            // Negative integer exponents are an error on both backends; then the others' values.
            EXPECT_THROW(on(Device::Interp, {r}), Error);
            EXPECT_THROW(on(Device::Cpu, {r}), Error);
            EXPECT_THROW(on(Device::CudaEmu, {r}), Error);
            r = binary(fn, a, maximum(b, Scalar(0)));
          }
          outs.push_back(r);
          names.push_back(std::string(binary_name(fn)) + "(" + dtype_name(ta) + ", " +
                          dtype_name(tb) + ")" + (kiln ? " kiln" : ""));
          emu_exact.push_back(kiln || fn != BinaryFn::Pow || !is_float(r.dtype()));  // libmvec's
        }
        expect_backends_agree(outs, names, emu_exact);
      }
    }
  flags().math = saved;
}

TEST(OpsTable, EveryCastAgreesBitForBit) {
  for (DType from : kDTypes) {
    NDArray x = specials(from, false);
    Array a = kt::lazy(x, {6, 1});
    std::vector<Array> outs;
    std::vector<std::string> names;
    for (DType to : kDTypes) {
      outs.push_back(a.astype(to));
      names.push_back(std::string("astype ") + dtype_name(from) + " -> " + dtype_name(to));
    }
    expect_backends_agree(outs, names);
  }
}

TEST(OpsTable, SelectAndScalarParametersAgreeBitForBit) {
  NDArray x = specials(DType::Float64, false), y = specials(DType::Float32, true);
  Array a = kt::lazy(x, {4, 1}), b = kt::lazy(y, {1, 3});
  expect_backends_agree({where(a > b, a, b), where(isnan(b), Scalar(-0.0), a * 0.5f),
                         clip(a, -1.5, 2.5), (b + Scalar(int64_t{3})) * Scalar(1e-300)},
                        {"where", "where scalar", "clip", "scalars"});
}

TEST(OpsTable, ExactReductionsAgreeBitForBit) {
  for (DType t : kDTypes) {
    NDArray x = specials(t, false);
    // An n x 40 matrix: the values, repeated, reduced along both axes, in several blocks.
    Array a = kt::lazy(x, {9, 1}) + Array(zeros({1, 40}, {1, 16}, t));
    std::vector<Array> outs;
    std::vector<std::string> names;
    auto add = [&](Array r, const std::string& n) {
      outs.push_back(r);
      names.push_back(n + "(" + dtype_name(t) + ")");
    };
    for (int axis : {0, 1}) {
      std::string ax = " axis " + std::to_string(axis);
      add(a.min({axis}), "min" + ax);
      add(a.max({axis}), "max" + ax);
      add(a.argmin(axis), "argmin" + ax);
      add(a.argmax(axis), "argmax" + ax);
      add(a.all({axis}), "all" + ax);
      add(a.any({axis}), "any" + ax);
      if (!is_float(t)) {
        add(a.sum({axis}), "sum" + ax);
        add(a.prod({axis}), "prod" + ax);
      }
    }
    add(a.argmin(), "argmin");
    add(a.argmax(), "argmax");
    expect_backends_agree(outs, names);
  }
}

TEST(OpsTable, FloatSumsAndProductsAgreeWithinRounding) {
  for (DType t : {DType::Float32, DType::Float64}) {
    // Long rows (strips of 1024 and their remainders), blocks along both axes.
    NDArray x = kt::random_array(t, {37, 3001}, 11, -2, 2);
    Array a = kt::lazy(x, {16, 1200});
    std::vector<Array> outs = {a.sum({1}),  a.sum({0}),     a.sum(),
                               a.mean({1}), a.mean(),       (a * 0.5 + 1.0).prod({1}),
                               a.var({1}),  exp(a).sum({1})};
    std::vector<NDArray> cpu = on(Device::Cpu, outs), interp = on(Device::Interp, outs);
    std::vector<NDArray> emu = on(Device::CudaEmu, outs);
    double tol = t == DType::Float32 ? 1e-5 : 1e-12;
    for (size_t k = 0; k < outs.size(); ++k) {
      EXPECT_TRUE(kt::same(interp[k], cpu[k], tol)) << "output " << k;
      EXPECT_TRUE(kt::same(emu[k], interp[k], k == 7 && t == DType::Float64 ? 1e-11 : tol))
          << "cuda-emu, output " << k;
    }
  }
}

TEST(OpsTable, RandomGeneratorsAgreeBitForBit) {
  random::Generator g(2024);
  // 2 x 10^5 normals: the ziggurat's rare path (0.43%) runs hundreds of times.
  Array n = g.normal(0, 1, {400, 500}, {150, 333});
  Array u = g.uniform(-1, 3, {400, 500}, {150, 333});
  Array i = g.integers(-5, 1000000007, {400, 500}, {150, 333});
  expect_backends_agree({n, u, i, n.astype(DType::Float32), (u * n).sum({1}) * 0 + u.max({1})},
                        {"normal", "uniform", "integers", "normal float32", "max of uniform"});
  // The same arrays made by whole-block reductions (the GPU's tree of per-thread partials).
  std::vector<NDArray> emu = on(Device::CudaEmu, {n.max(), u.argmin(), i.min(), n.sum()});
  std::vector<NDArray> interp = on(Device::Interp, {n.max(), u.argmin(), i.min(), n.sum()});
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(identical(emu[k], interp[k])) << "reduction " << k;
  EXPECT_TRUE(kt::same(emu[3], interp[3], 1e-12));
}

TEST(OpsTable, LegalizeLeavesOnlyPrimitivesForThePrinters) {
  // Every composite function, on every dtype the frontend accepts: the kernel IR the backends
  // receive holds none of them (and the values are checked bit for bit above).
  NDArray x = specials(DType::Float64, false), y = specials(DType::Int32, true);
  Array a = kt::lazy(x), b = kt::lazy(y);
  std::ostringstream kernels;
  ComputeOptions o;
  o.kernels = &kernels;
  o.progress = false;
  clear_plan_cache();
  compute({sign(a), sign(b), sigmoid(a), isfinite(a), isfinite(b), logical_not(a),
           logical_not(b > 0), a % b, b % b, floor_divide(a, b), floor_divide(b, b)},
          o);
  std::string text = kernels.str();
  for (const char* gone : {"sign", "sigmoid", "isfinite", "logical_not", "remainder"})
    EXPECT_EQ(text.find(std::string(" ") + gone + " v"), std::string::npos) << gone << "\n" << text;
  EXPECT_NE(text.find("fmod v"), std::string::npos) << text;
  EXPECT_NE(text.find("copysign v"), std::string::npos) << text;
  EXPECT_NE(text.find("const "), std::string::npos) << text;
  EXPECT_NE(text.find("floor_divide v"), std::string::npos) << "integers keep it\n" << text;
}

TEST(OpsTable, BothBackendsComputeTheDocumentedValues) {
  // (expression, expected) rows from docs/KERNEL_IR.md, on 1-element arrays from buffers.
  double inf = lim<double>::infinity(), nan = lim<double>::quiet_NaN();
  int64_t min64 = lim<int64_t>::min(), max64 = lim<int64_t>::max();
  static double fv[] = {-5.0,  2.5, 5.0,  -2.5, -7.0, 2.0, 1.0,  0.0, -0.0,
                        1e300, 3.9, -3.9, 2.5,  -0.5, nan, -inf, 7.0, -2.0};
  static int64_t iv[] = {-7, 2, 7, -2, 5, 0, min64, -1, 1, 64, -8, 70, 8, 62, 3, 41, max64};
  auto f = [](int k) { return from_buffer(&fv[k], {1}); };
  auto i = [](int k) { return from_buffer(&iv[k], {1}); };
  struct Row {
    Array expr;
    double want_f;
    int64_t want_i;
    const char* what;
  };
  std::vector<Row> rows = {
      {f(0) % f(1), 0.0, 0, "remainder(-5.0, 2.5) is +0.0"},
      {f(2) % f(3), -0.0, 0, "remainder(5.0, -2.5) is -0.0"},
      {f(4) % f(5), 1.0, 0, "remainder(-7.0, 2.0) is 1.0"},
      {i(0) % i(1), 0, 1, "remainder(-7, 2) is 1"},
      {i(2) % i(3), 0, -1, "remainder(7, -2) is -1"},
      {i(4) % i(5), 0, 0, "remainder(5, 0) is 0"},
      {floor_divide(i(0), i(1)), 0, -4, "floor_divide(-7, 2) is -4"},
      {floor_divide(i(6), i(7)), 0, min64, "floor_divide(MIN, -1) wraps to MIN"},
      {floor_divide(i(4), i(5)), 0, 0, "floor_divide(5, 0) is 0"},
      {floor_divide(f(6), f(7)), inf, 0, "floor_divide(1.0, 0.0) is inf"},
      {floor_divide(f(8), f(6)), -0.0, 0, "floor_divide(-0.0, 1.0) is -0.0"},
      {floor_divide(f(16), f(17)), -4.0, 0, "floor_divide(7.0, -2.0) is -4.0"},
      {left_shift(i(8), i(9)), 0, 0, "left_shift(1, 64) is 0"},
      {right_shift(i(10), i(11)), 0, -1, "right_shift(-8, 70) is -1"},
      {right_shift(i(12), i(7)), 0, 0, "right_shift(8, -1) is 0"},
      {pow(i(1), i(13)), 0, int64_t{1} << 62, "power(2, 62) is 2^62"},
      {pow(i(14), i(15)), 0, int64_t(0xFA2A1CF67B5FB863ULL), "power(3, 41) wraps"},
      {f(9).astype(DType::Int32), 0, lim<int32_t>::max(), "1e300 to int32 saturates"},
      {f(14).astype(DType::Int64), 0, 0, "NaN to int64 is 0"},
      {f(15).astype(DType::Int64), 0, min64, "-inf to int64 is MIN"},
      {f(10).astype(DType::Int32), 0, 3, "3.9 to int32 is 3"},
      {f(11).astype(DType::Int32), 0, -3, "-3.9 to int32 is -3"},
      {i(16).astype(DType::Int32), 0, -1, "int64 MAX to int32 wraps to -1"},
      {f(14).astype(DType::Bool), 0, 1, "NaN to bool is true"},
      {sign(f(14)), nan, 0, "sign(NaN) is NaN"},
      {sign(f(8)), 0.0, 0, "sign(-0.0) is +0.0"},
      {round(f(12)), 2.0, 0, "round(2.5) is 2.0"},
      {round(f(13)), -0.0, 0, "round(-0.5) is -0.0"},
      {maximum(f(14), f(6)), nan, 0, "maximum(NaN, 1) is NaN"},
      {maximum(f(6), f(14)), nan, 0, "maximum(1, NaN) is NaN"},
      {f(8) + f(7), 0.0, 0, "-0.0 + 0.0 is +0.0"},
      {fmod(i(0), i(1)), 0, -1, "fmod(-7, 2) is -1"},
      {fmod(i(2), i(3)), 0, 1, "fmod(7, -2) is 1"},
      {fmod(i(4), i(5)), 0, 0, "fmod(5, 0) is 0"},
      {fmod(i(6), i(7)), 0, 0, "fmod(MIN, -1) is 0"},
      {fmod(f(0), f(1)), -0.0, 0, "fmod(-5.0, 2.5) is -0.0"},
      {copysign(f(1), f(8)), -2.5, 0, "copysign(2.5, -0.0) is -2.5"},
      {copysign(f(14), f(6)), nan, 0, "copysign(NaN, 1) is NaN"},
      {sigmoid(f(15)), 0.0, 0, "sigmoid(-inf) is 0"},
      {isfinite(f(15)), 0, 0, "isfinite(-inf) is false"},
      {logical_not(f(8)), 0, 1, "logical_not(-0.0) is true"},
  };
  for (Device d : {Device::Cpu, Device::Interp, Device::CudaEmu}) {
    for (const Row& r : rows) {
      NDArray got = on(d, {r.expr})[0];
      std::string where = std::string(r.what) + " on " + device_name(d);
      if (is_float(got.dtype())) {
        double g = got.at(0);
        if (std::isnan(r.want_f)) {
          EXPECT_TRUE(std::isnan(g)) << where << ": got " << g;
        } else {
          EXPECT_EQ(g, r.want_f) << where;
          EXPECT_EQ(std::signbit(g), std::signbit(r.want_f)) << where << ": the sign of " << g;
        }
      } else {
        EXPECT_EQ(got.at_int(0), r.want_i) << where;
      }
    }
  }
}
