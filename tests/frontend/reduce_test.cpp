// Reductions against NumPy: every reduction, over all axes and axis subsets, keepdims, uneven
// chunkings (so partials go through the combine tree), integer and bool inputs, NaN.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

namespace {
NDArray clone(const NDArray& a) {
  NDArray c(a.dtype(), a.shape());
  std::memcpy(c.data(), a.data(), static_cast<size_t>(a.size()) * dtype_size(a.dtype()));
  return c;
}
}  // namespace

TEST(Reduce, AllReductionsAllAxisSetsMatchNumPy) {
  NDArray a = kt::random_array(DType::Float64, {13, 7, 11}, 61, 0.5, 1.5);
  Array x = lazy(a, {4, 3, 5});
  std::vector<std::pair<std::vector<int>, std::string>> axes = {
      {{}, "None"},       {{0}, "0"},          {{1}, "1"},        {{2}, "2"},
      {{0, 2}, "(0, 2)"}, {{-1, 1}, "(1, 2)"}, {{0, 1}, "(0, 1)"}};
  for (bool kd : {false, true}) {
    std::vector<std::string> exprs;
    std::vector<Array> got;
    for (const auto& [ax, np] : axes) {
      std::string k = std::string(", keepdims=") + (kd ? "True" : "False") + ")";
      for (const char* f : {"sum", "prod", "mean", "min", "max", "var", "std"})
        exprs.push_back(std::string("np.") + f + "(a, axis=" + np + k);
      exprs.push_back("np.all(a > 0.6, axis=" + np + k);
      exprs.push_back("np.any(a > 1.4, axis=" + np + k);
      got.insert(got.end(),
                 {x.sum(ax, kd), x.prod(ax, kd), x.mean(ax, kd), x.min(ax, kd), x.max(ax, kd),
                  x.var(ax, kd), x.std(ax, kd), (x > 0.6).all(ax, kd), (x > 1.4).any(ax, kd)});
    }
    auto want = kt::numpy({{"a", a}}, exprs);
    auto res = compute(got);
    for (size_t k = 0; k < exprs.size(); ++k) EXPECT_TRUE(same(res[k], want[k], 1e-12)) << exprs[k];
  }
}

TEST(Reduce, IntegerAndBoolDtypes) {
  NDArray i = kt::random_array(DType::Int32, {50, 30}, 62, -100, 100);
  NDArray b = kt::random_array(DType::Bool, {50, 30}, 63);
  Array x = lazy(i, {7, 8}), y = lazy(b, {7, 8});
  auto want =
      kt::numpy({{"i", i}, {"b", b}},
                {"i.sum()", "i.sum(axis=0)", "i.min(axis=1)", "i.max()", "i.mean()", "b.sum()",
                 "b.sum(axis=1)", "b.all()", "b.any(axis=0)", "(i % 3 + 1).prod(axis=0)"});
  auto got = compute({x.sum(), x.sum({0}), x.min({1}), x.max(), x.mean(), y.sum(), y.sum({1}),
                      y.all(), y.any({0}), (x % 3 + 1).prod({0})});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-13)) << k;
  EXPECT_EQ(got[0].dtype(), DType::Int64);
  EXPECT_EQ(got[4].dtype(), DType::Float64);
}

TEST(Reduce, NaNPropagatesThroughMinMaxAndSum) {
  NDArray a = kt::make_array(DType::Float64, {2, 3}, {1, NAN, 3, 4, 5, 6});
  Array x = lazy(a, {1, 2});
  auto got = compute({x.min(), x.max({1}), x.sum({0}), x.min({0})});
  EXPECT_TRUE(std::isnan(got[0].item<double>()));
  EXPECT_TRUE(same(got[1], kt::make_array(DType::Float64, {2}, {NAN, 6})));
  EXPECT_TRUE(same(got[2], kt::make_array(DType::Float64, {3}, {5, NAN, 9})));
  EXPECT_TRUE(same(got[3], kt::make_array(DType::Float64, {3}, {1, NAN, 3})));
}

TEST(Reduce, ManyBlocksUseTheCombineTree) {
  // 40 x 40 blocks: each result is folded through two levels of the fan-in-8 tree.
  NDArray a = kt::random_array(DType::Float64, {400, 80}, 64);
  Array x = lazy(a, {10, 2});
  auto want = kt::numpy({{"a", a}}, {"a.sum()", "a.max(axis=0)", "a.mean(axis=1)"});
  auto got = compute({x.sum(), x.max({0}), x.mean({1})});
  EXPECT_TRUE(same(got[0], want[0], 1e-12));
  EXPECT_TRUE(same(got[1], want[1]));
  EXPECT_TRUE(same(got[2], want[2], 1e-13, 1e-15));
}

TEST(Reduce, EmptyArrays) {
  Array z = zeros({0, 4}, {}, DType::Float64);
  EXPECT_EQ(z.sum().compute().item<double>(), 0.0);
  EXPECT_TRUE(same(z.sum({0}).compute(), kt::make_array(DType::Float64, {4}, {0, 0, 0, 0})));
  EXPECT_TRUE(std::isnan(z.mean().compute().item<double>()));
  EXPECT_EQ(z.prod().compute().item<double>(), 1.0);
  EXPECT_THROW(z.max(), Error);
}

TEST(Reduce, VarianceWithDdof) {
  NDArray a = kt::random_array(DType::Float64, {30, 4}, 65);
  Array x = lazy(a, {7, 4});
  auto want = kt::numpy({{"a", a}}, {"a.var(ddof=1)", "a.std(axis=0, ddof=1)"});
  auto got = compute({x.var({}, false, 1), x.std({0}, false, 1)});
  EXPECT_TRUE(same(got[0], want[0], 1e-13));
  EXPECT_TRUE(same(got[1], want[1], 1e-13));
}

TEST(Reduce, ArgminArgmaxMatchNumPy) {
  NDArray a = kt::random_array(DType::Float64, {23, 17}, 66);
  NDArray i = kt::random_array(DType::Int32, {23, 17}, 67, -4, 4);  // many ties
  NDArray n = kt::make_array(DType::Float64, {2, 4}, {1, NAN, 5, NAN, 7, 2, 7, 0});
  Array x = lazy(a, {5, 4}), y = lazy(i, {4, 3}), z = lazy(n, {1, 2});
  auto want = kt::numpy({{"a", a}, {"i", i}, {"n", n}},
                        {"a.argmax()", "a.argmin()", "a.argmax(axis=0)", "a.argmin(axis=1)",
                         "i.argmax()", "i.argmin(axis=0)", "i.argmax(axis=1)", "n.argmax()",
                         "n.argmin(axis=1)", "n.argmax(axis=0)", "(a * 2).argmax(axis=-1)"});
  auto got = compute({x.argmax(), x.argmin(), x.argmax(0), x.argmin(1), y.argmax(), y.argmin(0),
                      y.argmax(1), z.argmax(), z.argmin(1), z.argmax(0), (x * 2).argmax(-1)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
  EXPECT_EQ(x.argmax(1, true).shape(), (Shape{23, 1}));
  EXPECT_THROW(zeros({0}).argmax(), Error);
}

TEST(Reduce, ArgReductionsPreferTheFirstFlatIndexAcrossBlocks) {
  // With an inner dim chunked, blocks are not in flat order; ties and NaNs must still resolve to
  // the smallest flat index (found by the differential fuzzer).
  NDArray a = kt::make_array(DType::Float64, {2, 2}, {0, 5, 5, 0});
  NDArray n = kt::make_array(DType::Float64, {2, 2}, {0, NAN, NAN, 0});
  EXPECT_EQ(lazy(a, {2, 1}).argmax().compute().item<int64_t>(), 1);
  EXPECT_EQ(lazy(a, {2, 1}).argmin().compute().item<int64_t>(), 0);
  EXPECT_EQ(lazy(n, {2, 1}).argmin().compute().item<int64_t>(), 1);
  EXPECT_EQ(lazy(n, {1, 1}).argmax().compute().item<int64_t>(), 1);
  NDArray s = kt::make_array(DType::Float64, {}, {3.0});
  EXPECT_EQ(lazy(s).argmax(std::nullopt, true).shape(), Shape{});  // NumPy: 0-d stays 0-d
}

TEST(Reduce, ArgReductionsOverLongRowsMatchNumPyWithTiesNaNsAndZeros) {
  // Rows longer than the CPU kernels' strips (1024 elements, searched only where a strip beats the
  // earlier ones), values from a small set (ties in every strip and across strips and blocks),
  // -0.0 beside +0.0, a NaN late in one row and two in another; the whole array (its rows run
  // whole: coalesce_rows) and along each axis, in blocks of whole and of cut rows.
  NDArray x = kt::random_array(DType::Float64, {6, 3000}, 23, 0, 1);
  double* d = static_cast<double*>(x.data());
  for (int64_t k = 0; k < x.size(); ++k) d[k] = std::floor(d[k] * 7) - 3;  // -3 .. 3
  d[2 * 3000 + 2500] = -0.0;
  d[3 * 3000 + 2047] = NAN;
  d[5 * 3000 + 1500] = NAN;
  d[5 * 3000 + 20] = NAN;
  NDArray no_nan = clone(x);
  double* e = static_cast<double*>(no_nan.data());
  for (int64_t k = 0; k < no_nan.size(); ++k)
    if (std::isnan(e[k])) e[k] = 3;
  std::vector<std::pair<std::string, NDArray>> in = {{"x", x}, {"y", no_nan}};
  std::vector<std::string> exprs;
  for (const char* v : {"x", "y", "y.astype(np.int32)", "(y > 2)", "y.astype(np.float32)"})
    for (const char* f : {"argmax", "argmin"})
      for (const char* axis : {"None", "0", "1"})
        exprs.push_back(std::string("np.") + f + "(" + v + ", axis=" + axis + ")");
  std::vector<NDArray> want = kt::numpy(in, exprs);
  for (Shape chunks : {Shape{6, 3000}, Shape{2, 1000}, Shape{5, 1100}}) {
    size_t at = 0;
    Array xs = lazy(x, chunks), ys = lazy(no_nan, chunks);
    for (Array v : {xs, ys, ys.astype(DType::Int32), ys > 2.0, ys.astype(DType::Float32)})
      for (bool is_max : {true, false})
        for (std::optional<int> axis :
             {std::optional<int>(), std::optional<int>(0), std::optional<int>(1)}) {
          Array r = is_max ? v.argmax(axis) : v.argmin(axis);
          EXPECT_TRUE(same(r.compute(), want[at])) << exprs[at] << " chunks " << chunks[1];
          ++at;
        }
  }
}

TEST(Reduce, ArgReductionsOverShortRowsMatchNumPy) {
  // Rows of lanes to 1024 elements of an array in memory run one vector pass (the last vector
  // overlapping the others where the lanes do not divide the row): rows of 1 to 1025, values from
  // a small set (ties within and across lanes and rows), -0.0 beside +0.0, infinities, NaNs (one
  // row all NaN), each float and integer type; along rows, and over the whole of a slice whose
  // rows are not contiguous (each row's result folds into the partial in row order).
  for (int64_t n : {1, 3, 4, 7, 8, 9, 16, 17, 31, 100, 1000, 1024, 1025}) {
    NDArray x = kt::random_array(DType::Float64, {9, n + 3}, 24 + n, 0, 1);
    double* d = static_cast<double*>(x.data());
    for (int64_t k = 0; k < x.size(); ++k) d[k] = std::floor(d[k] * 5) - 2;  // -2 .. 2
    for (int64_t k = 0; k < x.size(); k += 7) d[k] = k % 2 ? -0.0 : 0.0;
    for (int64_t j = 0; j < n + 3; ++j) d[4 * (n + 3) + j] = NAN;
    d[(n + 3) + n / 2] = NAN;
    d[2 * (n + 3) + n - 1] = INFINITY;
    d[3 * (n + 3) + n / 3] = -INFINITY;
    NDArray no_nan = clone(x);
    double* e = static_cast<double*>(no_nan.data());
    for (int64_t k = 0; k < no_nan.size(); ++k)
      if (!std::isfinite(e[k])) e[k] = 2;
    // The arrays as they are in memory (a cast would be fused into the kernel's value).
    std::vector<NDArray> arrays =
        kt::numpy({{"x", x}, {"y", no_nan}},
                  {"x", "y", "y.astype(np.int32)", "y.astype(np.int64)", "x.astype(np.float32)"});
    std::vector<std::string> exprs;
    for (size_t a = 0; a < arrays.size(); ++a)
      for (const char* f : {"argmax", "argmin"})
        for (const char* axis : {"1", "None"})
          exprs.push_back(std::string("np.") + f + "(a" + std::to_string(a) +
                          "[:, :" + std::to_string(n) + "], axis=" + axis + ")");
    std::vector<NDArray> want = kt::numpy({{"a0", arrays[0]},
                                           {"a1", arrays[1]},
                                           {"a2", arrays[2]},
                                           {"a3", arrays[3]},
                                           {"a4", arrays[4]}},
                                          exprs);
    size_t at = 0;
    for (const NDArray& a : arrays) {
      Array v = lazy(a, {4, n + 3}).slice({Slice(), Slice(0, n)});
      for (bool is_max : {true, false})
        for (std::optional<int> axis : {std::optional<int>(1), std::optional<int>()}) {
          Array r = is_max ? v.argmax(axis) : v.argmin(axis);
          EXPECT_TRUE(same(r.compute(), want[at])) << exprs[at] << " n " << n;
          ++at;
        }
    }
  }
}

TEST(Reduce, MinMaxFoldsWhoseMainLoopStartsOnABoundaryMatchNumPy) {
  // A max/min fold over a long row starts its 16-vector loop at the first element on a 1 KiB
  // boundary: the elements before it run in a loop of their own. Rows starting at each of 10
  // offsets into a buffer, with a NaN before the boundary, in the main loop, in the rest, or
  // none; the extreme before the boundary; -0.0 and +0.0; float64, float32 and int32.
  NDArray base = kt::random_array(DType::Float64, {6010}, 25, -1, 1);
  for (int where : {-1, 3, 3000, 5990}) {
    NDArray x = clone(base);
    double* d = static_cast<double*>(x.data());
    d[5] = 7;  // the maximum, before any boundary the row's start can have (x 1000 in int32)
    d[6] = -7;
    d[4000] = -0.0;
    if (where >= 0) d[where] = NAN;
    std::vector<NDArray> arrays =
        kt::numpy({{"x", x}}, {"x", "x.astype(np.float32)", "(x * 1000).astype(np.int32)"});
    std::vector<std::string> exprs;
    std::vector<Array> got;
    for (size_t a = 0; a < arrays.size(); ++a) {
      for (int64_t off = 0; off < 10; ++off) {
        std::string v = "a" + std::to_string(a) + "[" + std::to_string(off) + ":" +
                        std::to_string(off + 6000) + "]";
        Array r = lazy(arrays[a]).slice({Slice(off, off + 6000)});
        exprs.insert(exprs.end(), {"np.max(" + v + ")", "np.min(" + v + ")",
                                   "np.any(" + v + " > 6.5)", "np.all(" + v + " < 6.5)"});
        got.insert(got.end(), {r.max(), r.min(), (r > 6.5).any(), (r < 6.5).all()});
        if (a < 2) {
          exprs.insert(exprs.end(), {"np.nanmax(" + v + ")", "np.nanmin(" + v + ")"});
          got.insert(got.end(), {nanmax(r), nanmin(r)});
        }
      }
    }
    std::vector<NDArray> want =
        kt::numpy({{"a0", arrays[0]}, {"a1", arrays[1]}, {"a2", arrays[2]}}, exprs);
    std::vector<NDArray> res = compute(got);
    for (size_t k = 0; k < res.size(); ++k)
      EXPECT_TRUE(same(res[k], want[k])) << exprs[k] << " where " << where;
  }
}

TEST(Reduce, MinMaxOverRowsWhoseEndsRunInTheirOwnLoopMatchNumPy) {
  // A float max/min fold runs a row's first multiple of 16 vectors in one loop and the rest (a
  // row shorter than that whole) in another: rows of 1000 (a rest of 104 or 40 elements), 300,
  // 37 and 3, with a NaN in the first part of one row and in the rest of another, and each row's
  // extreme in its rest (row 2) or first part (row 0); float64 and float32, along each axis and
  // over all. (Not ties of -0.0 and +0.0: NumPy's min of a row of them is +0.0 or -0.0 by its
  // SIMD order, +0.0 for 1000 elements and -0.0 for 37.)
  for (int64_t cols : {1000, 300, 37, 3}) {
    NDArray x = kt::random_array(DType::Float64, {6, cols}, 29, -1, 1);
    double* d = static_cast<double*>(x.data());
    d[1 * cols + cols / 4] = NAN;  // in the first part (for rows of 1000)
    d[3 * cols + cols - 2] = NAN;  // in the rest
    d[2 * cols + cols - 1] = 5;
    d[2 * cols + cols - 3] = -5;
    d[0] = 7;
    d[1] = -7;
    std::vector<std::pair<std::string, NDArray>> in = {{"x", x}};
    std::vector<std::string> exprs;
    for (const char* v : {"x", "x.astype(np.float32)"})
      for (const char* f : {"max", "min", "argmax", "argmin"})
        for (const char* axis : {"None", "0", "1"})
          exprs.push_back(std::string("np.") + f + "(" + v + ", axis=" + axis + ")");
    std::vector<NDArray> want = kt::numpy(in, exprs);
    for (Shape chunks : {Shape{6, cols}, Shape{4, cols}}) {
      size_t at = 0;
      Array a = lazy(x, chunks);
      for (Array v : {a, a.astype(DType::Float32)})
        for (int f = 0; f < 4; ++f)
          for (std::optional<int> axis :
               {std::optional<int>(), std::optional<int>(0), std::optional<int>(1)}) {
            std::vector<int> axes = axis ? std::vector<int>{*axis} : std::vector<int>{};
            Array r = f == 0   ? v.max(axes)
                      : f == 1 ? v.min(axes)
                      : f == 2 ? v.argmax(axis)
                               : v.argmin(axis);
            EXPECT_TRUE(same(r.compute(), want[at])) << exprs[at] << " cols " << cols;
            ++at;
          }
    }
  }
}

TEST(Reduce, WholeArrayReductionsOfBuffersCutIntoColumnsMatchNumPy) {
  // Reductions over every dim of memory chunked across its rows run over whole rows (the plan
  // merges the column chunks and splits the rows instead): the same values as NumPy's, a NaN
  // included, on 1 and 2 threads.
  NDArray x = kt::random_array(DType::Float64, {301, 2999}, 5);
  NDArray n = clone(x);
  static_cast<double*>(n.data())[1234] = NAN;
  std::vector<NDArray> want =
      kt::numpy({{"x", x}, {"n", n}}, {"np.sum(x)", "np.prod(x / 2)", "np.min(x)", "np.max(x)",
                                       "np.argmax(x)", "np.mean(x)", "np.max(n)", "np.argmin(n)",
                                       "np.any(x > 2.999)", "np.all(x < 2.999)"});
  for (int threads : {1, 2}) {
    ComputeOptions o;
    o.threads = threads;
    Array a = lazy(x, {100, 700}), b = lazy(n, {100, 700});
    std::vector<NDArray> got =
        compute({a.sum(), (a / 2.0).prod(), a.min(), a.max(), a.argmax(), a.mean(), b.max(),
                 b.argmin(), (a > 2.999).any(), (a < 2.999).all()},
                o);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(same(got[k], want[k], k < 2 || k == 5 ? 1e-12 : 0))
          << k << " threads " << threads;
  }
}

TEST(Reduce, ReductionsAlongRowsOfBuffersCutIntoColumnsMatchNumPy) {
  // Reductions of the innermost dim that keep outer dims run over whole rows too (the plan
  // merges the column chunks; each block's results land in its rows' region of the output,
  // whose chunks differ): NumPy's values, a NaN included, on 1 and 2 threads, and a 3-d array.
  // (An empty one: python/tests/test_array.py.)
  NDArray x = kt::random_array(DType::Float64, {301, 2999}, 6);
  NDArray n = clone(x);
  static_cast<double*>(n.data())[1234] = NAN;
  NDArray c = kt::random_array(DType::Float64, {7, 30, 200}, 7);
  std::vector<NDArray> want = kt::numpy(
      {{"x", x}, {"n", n}, {"c", c}},
      {"np.sum(x, axis=1)", "np.max(x, axis=1)", "np.argmax(x, axis=1)", "np.mean(x, axis=1)",
       "np.min(n, axis=1)", "np.argmin(n, axis=1)", "np.any(x > 2.9, axis=1)", "np.sum(c, axis=2)",
       "np.sum(c, axis=(1, 2))", "np.argmin(c, axis=2)"});
  for (int threads : {1, 2}) {
    ComputeOptions o;
    o.threads = threads;
    Array a = lazy(x, {100, 700}), b = lazy(n, {100, 700}), d = lazy(c, {3, 20, 70});
    std::vector<NDArray> got =
        compute({a.sum({1}), a.max({1}), a.argmax(1), a.mean({1}), b.min({1}), b.argmin(1),
                 (a > 2.9).any({1}), d.sum({2}), d.sum({1, 2}), d.argmin(2)},
                o);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(same(got[k], want[k], k == 0 || k == 3 || k == 7 || k == 8 ? 1e-12 : 0))
          << k << " threads " << threads;
  }
}

TEST(Reduce, RowsMergedIntoBlocksStartingAtAlignedRowsMatchNumPy) {
  // Rows of 64 float64 (512 bytes) in 16-column chunks: the merged blocks' rows are cut at
  // multiples of 8 rows (4 KiB) where the chunk allows it, into pieces of uneven sizes
  // (8, 16, 8, 8 rows of a 40-row chunk; 8, 8, 4 of the last 20). NumPy's values, NaN included.
  NDArray x = kt::random_array(DType::Float64, {100, 64}, 8);
  NDArray n = clone(x);
  static_cast<double*>(n.data())[64 * 57 + 3] = NAN;
  std::vector<NDArray> want =
      kt::numpy({{"x", x}, {"n", n}},
                {"np.sum(x)", "np.max(x)", "np.argmin(x)", "np.sum(x, axis=1)",
                 "np.argmax(n, axis=1)", "np.nanmax(n)", "np.nanmin(n, axis=1)", "np.max(n)"});
  for (int threads : {1, 2}) {
    ComputeOptions o;
    o.threads = threads;
    Array a = lazy(x, {40, 16}), b = lazy(n, {40, 16});
    std::vector<NDArray> got = compute(
        {a.sum(), a.max(), a.argmin(), a.sum({1}), b.argmax(1), nanmax(b), nanmin(b, {1}), b.max()},
        o);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(same(got[k], want[k], k == 0 || k == 3 ? 1e-12 : 0))
          << k << " threads " << threads;
  }
}

TEST(Reduce, LongFloatSumsAreAsAccurateAsNumPys) {
  // NumPy sums pairwise; a plain vectorized loop added n / lanes values in sequence per lane: the
  // mean of 10^7 float32 0.1s came out 0.09985014 in one block (NumPy 0.09999894).
  const int64_t n = 10000000;
  NDArray f32(DType::Float32, {n}), f64(DType::Float64, {n});
  std::fill_n(static_cast<float*>(f32.data()), n, 0.1f);
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t k = 0; k < n; ++k) static_cast<double*>(f64.data())[k] = u(gen);
  auto want =
      kt::numpy({{"a", f32}, {"b", f64}},
                {"np.mean(a)", "np.sum(b)", "np.sum(b.astype(np.longdouble)).astype(np.float64)",
                 "np.sum(np.abs(b))"});
  double exact_b = want[2].at(0), abs_b = want[3].at(0);
  double numpy_err = std::fabs(want[1].at(0) - exact_b);
  for (Shape chunks : {Shape{n}, Shape{}, Shape{1000003}}) {
    for (int threads : {1, 2}) {
      ComputeOptions o;
      o.threads = threads;
      auto got = compute({lazy(f32, chunks).mean(), lazy(f64, chunks).sum()}, o);
      // float32: the float64 sum of 10^7 float32(0.1) values, rounded once: within an ulp.
      EXPECT_NEAR(got[0].at(0), 0.1f, 7.5e-9) << shape_str(chunks);
      EXPECT_EQ(got[0].dtype(), DType::Float32);
      // float64: a worst-case bound (a few dozen ulps of sum(|b|)) would also pass a sequential
      // sum, so this checks the typical error on this fixed data: the sum is about 1000 (ulp
      // 1.1e-13); strips + compensation give 2e-13..7e-13 (AVX-512), NumPy 0, one vectorized
      // loop per block gave 2e-12..1.25e-11.
      double err = std::fabs(got[1].at(0) - exact_b);
      EXPECT_LE(err, 3e-12) << shape_str(chunks) << " numpy error " << numpy_err << ", sum(|b|) "
                            << abs_b;
    }
  }
}

TEST(Reduce, IntegerSumsWrapAroundAcrossBlocksAsNumPys) {
  // Partials of different blocks are combined on the host: in two's complement, as the kernels
  // and NumPy do (signed overflow there was undefined behaviour, which UBSan reports).
  NDArray a(DType::Int64, {4});
  int64_t* p = static_cast<int64_t*>(a.data());
  p[0] = INT64_MAX, p[1] = 1, p[2] = INT64_MAX, p[3] = 5;
  auto want = kt::numpy({{"a", a}}, {"a.sum()", "a.prod()"});
  EXPECT_TRUE(same(lazy(a, {1}).sum().compute(), want[0]));
  EXPECT_TRUE(same(lazy(a, {1}).prod().compute(), want[1]));
  EXPECT_EQ(lazy(a, {1}).sum().compute().item<int64_t>(), 4);  // 2 (2^63 - 1) + 6 mod 2^64
}

TEST(Reduce, SumsOfANegativeZeroArePositiveAsNumPys) {
  // NumPy adds to the identity +0.0, also for a 0-d operand (nothing to reduce); prod, min and
  // max keep the sign. Found by the fuzzer (seed 71, case 1426: sum of round(-0.125)).
  NDArray z = kt::make_array(DType::Float64, {}, {-0.0});
  NDArray v = kt::make_array(DType::Float32, {3}, {-0.0, -0.0, -0.0});
  auto want = kt::numpy({{"z", z}, {"v", v}}, {"np.sum(z)", "np.mean(z)", "np.prod(z)", "np.min(z)",
                                               "np.max(z)", "np.sum(v)", "np.mean(v)", "np.prod(v)",
                                               "np.sum(v.reshape(3, 1), axis=1)"});
  Array x = lazy(z), y = lazy(v, {2});
  auto got = compute({x.sum(), x.mean(), x.prod(), x.min(), x.max(), y.sum(), y.mean(), y.prod(),
                      y.reshape({3, 1}).sum({1})});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
  EXPECT_FALSE(std::signbit(got[0].item<double>()));
  EXPECT_TRUE(std::signbit(got[2].item<double>()));
}

TEST(Reduce, BlocksOfWholeContiguousRowsRunAsOneRow) {
  // A full reduction whose block's leaves step through it contiguously across its dims runs the
  // block as one row (PlanGroup::flat): a float sum then adds strips of 1024 elements across the
  // rows, bit for bit the sum of the same memory seen as one dim in the same blocks (row by row,
  // each row of 7 its own strip, the bits differ for these values: magnitudes 1e-6 to 1e6). Views
  // that are not contiguous (a column slice, a transpose, a row broadcast) keep their dims; every
  // result matches NumPy, and so do stores over such blocks (exact either way).
  NDArray a = kt::random_array(DType::Float64, {3000, 7}, 41, -1, 1);
  double* d = static_cast<double*>(a.data());
  for (int64_t k = 0; k < a.size(); ++k) d[k] *= std::pow(10.0, static_cast<double>(k % 13) - 6);
  NDArray n = clone(a);
  static_cast<double*>(n.data())[1234] = NAN;
  NDArray c = kt::random_array(DType::Float64, {4, 50, 6}, 42, -2, 2);
  Array x = lazy(a, {1000, 7});
  Array flat = from_buffer(a.data(), DType::Float64, {21000}, {7000});
  // Not on a GPU device (cuda, cuda-emu), whose plans keep the block's dims and sum in orders of
  // their own (KERNEL_IR.md §8.6): there only the comparisons with NumPy below hold.
  if (flags().device.rfind("cuda", 0) != 0) {
    EXPECT_EQ(x.sum().compute().item<double>(), flat.sum().compute().item<double>());
    EXPECT_EQ(x.mean().compute().item<double>(), flat.mean().compute().item<double>());
    EXPECT_EQ((x * 2.0 + 1.0).sum().compute().item<double>(),
              (flat * 2.0 + 1.0).sum().compute().item<double>());
    // Row-by-row sums of these values round otherwise (two, lest one agree by chance for some
    // vector width): else the test would not see the order.
    Array y = x * 3.0 - 1.0;
    EXPECT_TRUE(x.sum().compute().item<double>() != x.sum({1}).sum().compute().item<double>() ||
                y.sum().compute().item<double>() != y.sum({1}).sum().compute().item<double>());
  }
  Array nx = lazy(n, {1000, 7}), cx = lazy(c, {2, 50, 6});
  NDArray r = kt::random_array(DType::Float64, {7}, 43, -1, 1);
  Array row = lazy(r);
  auto want = kt::numpy({{"a", a}, {"n", n}, {"c", c}, {"r", r}},
                        {"a.sum()", "a.prod()", "a.min()", "a.max()", "a.argmax()", "a.argmin()",
                         "(a > 0).all()", "(a > 1e5).any()", "n.sum()", "n.max()", "n.argmin()",
                         "c.sum()", "c.argmax()", "c.max()", "a[:, :5].sum()", "a[:, 2:].argmax()",
                         "a.T.sum()", "c[:, 10:40].argmin()", "(a + r).sum()"});
  auto got = compute({x.sum(), x.prod(), x.min(), x.max(), x.argmax(), x.argmin(), (x > 0.0).all(),
                      (x > 1e5).any(), nx.sum(), nx.max(), nx.argmin(), cx.sum(), cx.argmax(),
                      cx.max(), x.slice({{0, 3000}, {0, 5}}).sum(),
                      x.slice({{0, 3000}, {2, 7}}).argmax(), x.transpose().sum(),
                      cx.slice({{0, 4}, {10, 40}, {0, 6}}).argmin(), (x + row).sum()});
  auto stored = kt::numpy({{"a", a}, {"c", c}, {"r", r}},
                          {"a * 2 + 1", "a[:, 1:6] * 3", "a.T - 1", "a + r", "c * c"});
  auto made = compute(
      {x * 2.0 + 1.0, x.slice({{0, 3000}, {1, 6}}) * 3.0, x.transpose() - 1.0, x + row, cx * cx});
  for (size_t k = 0; k < made.size(); ++k) EXPECT_TRUE(same(made[k], stored[k])) << "store " << k;
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].dtype() == DType::Float64 && !std::isnan(want[k].item<double>()) &&
        !std::isinf(want[k].item<double>()))
      EXPECT_NEAR(got[k].item<double>(), want[k].item<double>(),
                  1e-12 * std::max(1.0, std::abs(want[k].item<double>())))
          << k;
    else
      EXPECT_TRUE(same(got[k], want[k])) << k;
  }
}

// NumPy's nan-functions: every one, over axis subsets and keepdims, float64 and float32, uneven
// chunks (partials through the combine tree), a row and a column of NaN only (all-NaN slices:
// nanmean, nanmin, nanmax, nanvar, nanstd NaN, nansum 0, nanprod 1), infinities beside NaN.
TEST(Reduce, NanFunctionsMatchNumPy) {
  NDArray a = kt::random_array(DType::Float64, {19, 13}, 70, -2, 2);
  auto* p = static_cast<double*>(a.data());
  for (int64_t k = 0; k < a.size(); k += 3) p[k] = NAN;
  for (int64_t j = 0; j < 13; ++j) p[5 * 13 + j] = NAN;  // row 5
  for (int64_t i = 0; i < 19; ++i) p[i * 13 + 4] = NAN;  // column 4
  p[7 * 13 + 2] = INFINITY;
  p[8 * 13 + 2] = -INFINITY;
  NDArray a32 = kt::numpy({{"a", a}}, {"a.astype(np.float32)"})[0];
  for (const NDArray* in : {&a, &a32}) {
    const bool f32 = in->dtype() == DType::Float32;
    Array x = lazy(*in, {6, 4});
    std::vector<std::string> exprs;
    std::vector<Array> got;
    for (const auto& [ax, np] : std::vector<std::pair<std::vector<int>, std::string>>{
             {{}, "None"}, {{0}, "0"}, {{-1}, "1"}, {{0, 1}, "(0, 1)"}}) {
      for (bool kd : {false, true}) {
        std::string k = std::string(", keepdims=") + (kd ? "True" : "False") + ")";
        for (const char* f : {"nansum", "nanprod", "nanmean", "nanmin", "nanmax", "nanvar"})
          exprs.push_back(std::string("np.") + f + "(a, axis=" + np + k);
        exprs.push_back("np.nanstd(a, axis=" + np + ", ddof=1" + k);
        got.insert(got.end(),
                   {nansum(x, ax, kd), nanprod(x * 0.5 + 1, ax, kd), nanmean(x, ax, kd),
                    nanmin(x, ax, kd), nanmax(x, ax, kd), nanvar(x, ax, kd), nanstd(x, ax, kd, 1)});
        exprs[exprs.size() - 6] = "np.nanprod(a * 0.5 + 1, axis=" + np + k;
      }
    }
    auto want = kt::numpy({{"a", *in}}, exprs);  // (NumPy warns on the all-NaN slices)
    auto res = compute(got);
    for (size_t k = 0; k < exprs.size(); ++k) {
      EXPECT_EQ(res[k].dtype(), want[k].dtype()) << exprs[k];
      EXPECT_TRUE(same(res[k], want[k], f32 ? 2e-5 : 1e-12)) << exprs[k] << (f32 ? " f32" : "");
    }
  }
}

TEST(Reduce, NanArgFunctionsMatchNumPyAndGiveMinusOneForAllNaNSlices) {
  NDArray a = kt::random_array(DType::Float64, {9, 14}, 71);
  auto* p = static_cast<double*>(a.data());
  for (int64_t k = 1; k < a.size(); k += 4) p[k] = NAN;
  for (int64_t j = 0; j < 14; ++j) p[3 * 14 + j] = NAN;  // row 3: all NaN
  p[0] = -INFINITY;                                      // an infinity before a NaN
  Array x = lazy(a, {4, 5});
  auto want = kt::numpy({{"a", a}},
                        {"np.nanargmax(a)", "np.nanargmin(a)", "np.nanargmax(a, axis=0)",
                         "np.nanargmin(a, axis=0)", "np.nanargmax(np.delete(a, 3, 0), axis=1)"});
  auto got = compute({nanargmax(x), nanargmin(x), nanargmax(x, 0), nanargmin(x, 0), nanargmax(x, 1),
                      nanargmin(x, -1, true)});
  for (size_t k = 0; k < 4; ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
  // Along rows: row 3 is all NaN (NumPy raises ValueError there): -1; the others as NumPy's.
  auto rows = static_cast<const int64_t*>(got[4].data());
  auto kept = static_cast<const int64_t*>(want[4].data());
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(rows[i], i == 3 ? -1 : kept[i - (i > 3)]) << i;
  EXPECT_EQ(got[5].shape(), (Shape{9, 1}));
  EXPECT_EQ(static_cast<const int64_t*>(got[5].data())[3], -1);
  NDArray nan0 = kt::make_array(DType::Float64, {}, {NAN});
  EXPECT_EQ(nanargmax(lazy(nan0)).compute().item<int64_t>(), -1);
}

TEST(Reduce, NanFunctionsOfIntegersBoolsAndEmptyArraysAreNumPys) {
  NDArray i = kt::random_array(DType::Int32, {12, 5}, 72, -50, 50);
  Array x = lazy(i, {5, 2});
  auto want = kt::numpy({{"i", i}}, {"np.nansum(i)", "np.nanmean(i, axis=0)", "np.nanmax(i)",
                                     "np.nanargmin(i, axis=1)", "np.nanvar(i, axis=1, ddof=1)",
                                     "np.nanprod(i % 3 + 1, axis=0)"});
  auto got = compute({nansum(x), nanmean(x, {0}), nanmax(x), nanargmin(x, 1),
                      nanvar(x, {1}, false, 1), nanprod(x % 3 + 1, {0})});
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << k;
    EXPECT_TRUE(same(got[k], want[k], 1e-13)) << k;
  }
  Array e = zeros({0, 3}, {}, DType::Float64);
  EXPECT_EQ(nansum(e).compute().item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(nanmean(e).compute().item<double>()));
  NDArray v = nanvar(e, {0}).compute();  // each column empty
  ASSERT_EQ(v.shape(), Shape{3});
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(static_cast<const double*>(v.data())[k]));
  try {
    nanmax(e);
    ADD_FAILURE() << "nanmax of an empty array returned";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("nanmax"), std::string::npos) << err.what();
  }
  EXPECT_THROW(nanreduce(ReduceFn::All, e), Error);
  EXPECT_THROW(nanargmin(zeros({4, 0}), 1), Error);
  EXPECT_THROW(nansum(Array()), Error);
  EXPECT_THROW(nanvar(e, {2}), Error);  // axis out of range
}
