// Creation functions, zero-copy buffers, .npy files and the random generators.
#include <filesystem>

#include "oracle.hpp"
#include "support/philox.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

TEST(Creation, ConstantsAndRangesMatchNumPy) {
  auto want =
      kt::numpy({}, {"np.zeros((3, 4))", "np.ones((5,), dtype=np.int32)", "np.full((2, 3), 7.5)",
                     "np.arange(10)", "np.arange(3, 20, 4)", "np.arange(10, 0, -3)",
                     "np.arange(0.0, 1.0, 0.1)", "np.linspace(0, 1, 11)",
                     "np.linspace(-2, 3, 7, endpoint=False)", "np.arange(5, 5)"});
  auto got = compute({zeros({3, 4}), ones({5}, {}, DType::Int32), full({2, 3}, 7.5), arange(10),
                      arange(3, 20, 4), arange(10, 0, -3), arange(0.0, 1.0, 0.1, {3}),
                      linspace(0, 1, 11, true, {4}), linspace(-2, 3, 7, false), arange(5, 5)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-15)) << k;
}

TEST(Creation, FromBufferIsZeroCopy) {
  std::vector<double> data(12);
  for (int k = 0; k < 12; ++k) data[k] = k;
  Array x = from_buffer(data.data(), {3, 4}, {2, 2});
  EXPECT_EQ(x.sum().compute().item<double>(), 66.0);
  data[0] = 100;  // the array reads the user's memory, not a copy
  EXPECT_EQ(x.sum().compute().item<double>(), 166.0);
}

TEST(Creation, NpyRoundTripAndLazyLoad) {
  NDArray a = kt::random_array(DType::Float32, {20, 30}, 81);
  std::string path = kt::tmpdir() + "/creation.npy";
  a.save_npy(path);
  Array x = load_npy(path, {7, 7});
  EXPECT_EQ(x.dtype(), DType::Float32);
  EXPECT_TRUE(same(x.compute(), a));
  auto want = kt::numpy({{"a", a}}, {"(a * 2)[::3].sum(axis=1)"});
  EXPECT_TRUE(same((x * 2).slice({{0, {}, 3}}).sum({1}).compute(), want[0], 1e-5));
  save_npy(kt::tmpdir() + "/creation2.npy", x + 1);
  auto back = kt::numpy({{"a", a}}, {"np.load('" + kt::tmpdir() + "/creation2.npy') - (a + 1)"});
  EXPECT_TRUE(same(back[0], NDArray(DType::Float32, {20, 30})));
}

TEST(Random, ElementsMatchTheReferencePhilox) {
  random::Generator rng(1234);
  // Rows of 41 and chunks of odd widths: blocks and rows that start at odd flat indices, whose
  // first element is the second of its Philox block (support/philox.hpp).
  Array u = rng.uniform(0, 1, {50, 41}, {16, 15});
  Array n = rng.standard_normal({50, 41}, {13, 41});
  Array i = rng.integers(-5, 17, {50, 41}, {50, 7});
  auto got = compute({u, n, i});
  for (int64_t k = 0; k < 50 * 41; ++k) {
    ASSERT_EQ(got[0].at(k), philox::uniform(1234, 0, k)) << k;
    ASSERT_EQ(got[1].at(k), philox::standard_normal(1234, 1, k)) << k;  // bit-identical
    ASSERT_EQ(got[2].at_int(k), philox::integers(1234, 2, k, -5, 17)) << k;
  }
}

// Kernels over random leaves generate them a tile (256 elements) at a time, two elements per
// Philox block where the inner stride is 1, and refill the normals the ziggurat's fast path
// rejects: uneven tiles, rows and blocks starting at odd flat indices, strided and reversed inner
// indices, two normal leaves in one kernel, inner reductions (sum, argmax) and 0-d kernels (no
// loop) must all give the reference values.
TEST(Random, TiledGenerationMatchesTheReference) {
  auto rejected = [](uint64_t seed, uint32_t stream, uint64_t i) {
    const philox::Words w = philox::element_words(seed, stream, i);
    const uint32_t layer = w.lo & (philox::kZigLayers - 1);
    return !(philox::uniform_from_bits(w.hi, w.lo) * philox::kZigX[layer] <
             philox::kZigX[layer + 1]);
  };
  const int64_t rows = 3, cols = 999;
  random::Generator rng(5);
  Array n1 = rng.standard_normal({rows, cols}, {3, 701});  // streams 0, 1, 2
  Array u = rng.uniform(0, 1, {rows, cols}, {2, 301});
  Array n2 = rng.standard_normal({rows, cols}, {3, 701});
  auto got = compute({n1 * u + n2, n1.slice({{}, {1, {}, 3}}), n1.slice({{}, {{}, {}, -1}}),
                      n1.sum({1}), n1.argmax(1), n1.slice({{}, {{}, {}, 2}}),
                      n1.slice({{}, {1, {}, 2}}), u.slice({{}, {1, {}, 2}})});
  int64_t rejections = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, best = -INFINITY;
    int64_t arg = -1;
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t k = uint64_t(r * cols + c);
      const double a = philox::standard_normal(5, 0, k), b = philox::standard_normal(5, 2, k);
      rejections += rejected(5, 0, k);
      ASSERT_EQ(got[0].at(r * cols + c), a * philox::uniform(5, 1, k) + b) << r << "," << c;
      if (c % 3 == 1) {
        ASSERT_EQ(got[1].at(r * 333 + c / 3), a) << r << "," << c;
      }
      // Even strides: rows of 999 start at even and odd flat indices in turn.
      if (c % 2 == 0) {
        ASSERT_EQ(got[5].at(r * 500 + c / 2), a) << r << "," << c;
      } else {
        ASSERT_EQ(got[6].at(r * 499 + c / 2), a) << r << "," << c;
        ASSERT_EQ(got[7].at(r * 499 + c / 2), philox::uniform(5, 1, k)) << r << "," << c;
      }
      ASSERT_EQ(got[2].at(r * cols + (cols - 1 - c)), a) << r << "," << c;
      sum += a;
      if (a > best) best = a, arg = c;
    }
    EXPECT_NEAR(got[3].at(r), sum, 1e-11) << r;
    EXPECT_EQ(got[4].at_int(r), arg) << r;
  }
  EXPECT_GT(rejections, 3);  // the rare path ran
  // A 0-d kernel (no loop): an element whose fast path rejects, and one it accepts.
  Array line = rng.standard_normal({100000}, {30000});  // stream 3
  int64_t bad = 0, good = 0;
  while (!rejected(5, 3, uint64_t(bad))) ++bad;
  while (rejected(5, 3, uint64_t(good))) ++good;
  EXPECT_EQ(line[bad].compute().item<double>(), philox::standard_normal(5, 3, bad));
  EXPECT_EQ(line[good].compute().item<double>(), philox::standard_normal(5, 3, good));
}

TEST(Random, IndependentOfChunkingSliceAndThreads) {
  auto make = [](const Shape& chunks) {
    random::Generator rng(7);
    return rng.normal(10, 2, {64, 48}, chunks);
  };
  NDArray ref = make({64, 48}).compute();
  EXPECT_TRUE(same(make({5, 7}).compute(), ref));
  NDArray sliced = make({9, 9}).slice({{3, {}, 2}, {{}, {}, -3}}).compute();
  for (int64_t r = 0; r < sliced.shape()[0]; ++r)
    for (int64_t c = 0; c < sliced.shape()[1]; ++c)
      ASSERT_EQ(sliced.at(r * sliced.shape()[1] + c), ref.at((3 + 2 * r) * 48 + (47 - 3 * c)));
  ComputeOptions one, two;
  one.threads = 1;
  two.threads = 2;
  Array s = make({8, 8}).sum();
  EXPECT_EQ(compute({s}, one)[0].item<double>(), compute({s}, two)[0].item<double>());
}

TEST(Random, DistributionMoments) {
  random::Generator rng(99);
  Array x = rng.normal(10, 2, {1000, 1000}, {250, 250});
  auto r = compute({x.mean(), x.std()});
  EXPECT_NEAR(r[0].item<double>(), 10.0, 0.01);
  EXPECT_NEAR(r[1].item<double>(), 2.0, 0.01);
  Array u = rng.uniform(-1, 3, {1000, 1000});
  auto q = compute({u.min(), u.max(), u.mean()});
  EXPECT_GE(q[0].item<double>(), -1.0);
  EXPECT_LT(q[1].item<double>(), 3.0);
  EXPECT_NEAR(q[2].item<double>(), 1.0, 0.01);
}

TEST(Creation, ScalarCastsConvertAsKernelCastsDo) {
  // A scalar cast is folded when the expression is built; an array's is done by the kernel. Both
  // must give the same bits: floats to integers truncate and saturate (NaN -> 0), integers to
  // int32 wrap, int64 to float32 rounds once (the sum below lies just above a float32 tie of its
  // double, so rounding through a double would give 2^54).
  const double fs[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e20, -1e20, 2.5, -2.5, -0.0};
  const int64_t is[] = {(int64_t{1} << 54) + (int64_t{1} << 30) + 1, int64_t{3} << 31, -7, 0};
  for (DType to : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    for (double v : fs) {
      NDArray one = kt::make_array(DType::Float64, {1}, {v});
      NDArray folded = scalar(v).astype(to).reshape({1}).compute();
      NDArray kernel = lazy(one).astype(to).compute();
      EXPECT_TRUE(same(folded, kernel)) << v << " to " << dtype_name(to);
    }
    for (int64_t v : is) {
      NDArray one(DType::Int64, {1});
      static_cast<int64_t*>(one.data())[0] = v;
      NDArray folded = scalar(v).astype(to).reshape({1}).compute();
      NDArray kernel = lazy(one).astype(to).compute();
      EXPECT_TRUE(same(folded, kernel)) << v << " to " << dtype_name(to);
    }
  }
  EXPECT_EQ(scalar(3e9).astype(DType::Int32).compute().item<int32_t>(), INT32_MAX);
  EXPECT_EQ(full({2}, 1e20, DType::Int64).compute().at_int(1), INT64_MAX);
  EXPECT_EQ(full({2}, NAN, DType::Int32).compute().at_int(0), 0);
  EXPECT_EQ(scalar((int64_t{1} << 54) + (int64_t{1} << 30) + 1)
                .astype(DType::Float32)
                .compute()
                .item<float>(),
            0x1p54f + 0x1p31f);
}

TEST(Random, UniformNeverReturnsHigh) {
  // Where float32 (or float64) spacing is as wide as the interval, low + (high - low) * u rounds
  // to high for about half the elements; Kiln keeps [low, high).
  random::Generator rng(5);
  NDArray f = rng.uniform(1e8, 1e8 + 8, {10000}, {1000}, DType::Float32).compute();
  NDArray d = rng.uniform(0x1p53, 0x1p53 + 2, {10000}, {1000}).compute();
  for (int64_t k = 0; k < f.size(); ++k) {
    ASSERT_EQ(f.at(k), 1e8) << k;
    ASSERT_EQ(d.at(k), 0x1p53) << k;
  }
  // An ordinary interval keeps its values (the clamp changes only what rounded to high).
  NDArray a = rng.uniform(-2, 3, {4000}, {1000}, DType::Float32).compute();
  NDArray b = rng.uniform(-2, 3, {4000}, {1000}).compute();
  double lo = 3, hi = -2;
  for (int64_t k = 0; k < a.size(); ++k) {
    lo = std::min(lo, a.at(k)), hi = std::max(hi, a.at(k));
    ASSERT_LT(b.at(k), 3.0) << k;
    ASSERT_GE(b.at(k), -2.0) << k;
  }
  EXPECT_LT(hi, 3.0);
  EXPECT_GE(lo, -2.0);
  EXPECT_GT(hi, 2.99);
  EXPECT_LT(lo, -1.99);
}

TEST(Creation, FromBufferWithAnOwnerKeepsTheMemoryAlive) {
  auto data = std::make_shared<std::vector<double>>(std::vector<double>{1.5, -2.0, 4.25, 8.0});
  std::weak_ptr<std::vector<double>> watch = data;
  const double* p = data->data();
  Array a = from_buffer(p, DType::Float64, {4}, {3}, std::shared_ptr<const void>(data));
  data.reset();  // the array holds the only reference now
  ASSERT_FALSE(watch.expired());
  Array y = (a * 2).sum();
  a = Array();
  EXPECT_FALSE(watch.expired()) << "an expression that reads the buffer keeps it alive";
  EXPECT_EQ(y.compute().item<double>(), 23.5);
  EXPECT_EQ(y.compute().item<double>(), 23.5);  // the cached plan holds no reference of its own
  y = Array();
  EXPECT_TRUE(watch.expired()) << "released with the last array that reads it";
}
