// Fusion: kernel and task counts, the reasons for boundaries, --no-fuse giving the same results.
#include <sstream>

#include "oracle.hpp"

using namespace kiln;

namespace {
Stats run(const std::vector<Array>& a, bool fuse, std::vector<NDArray>* out = nullptr,
          std::string* ir = nullptr) {
  ComputeOptions o;
  o.fuse = fuse;
  std::ostringstream os;
  if (ir) o.ir = &os;
  auto r = compute(a, o);
  if (out) *out = r;
  if (ir) *ir = os.str();
  return stats();
}
}  // namespace

TEST(Fusion, RandomSumIsOneKernelWithOneTaskPerBlockPlusTree) {
  random::Generator rng(0);
  Array x = rng.normal(10, 1, {400, 400}, {100, 100});
  Array y = (x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum();
  std::string ir;
  Stats s = run({y}, true, nullptr, &ir);
  EXPECT_EQ(s.last_kernels, 1);
  EXPECT_EQ(s.last_tasks, 16 + 2 + 1);  // 16 blocks, two combines of 8, one final
  // The slice reached the generator: after push_slices no Slice node is left.
  std::string after = ir.substr(ir.find("; IR after push_slices"));
  EXPECT_EQ(after.find("Slice"), std::string::npos) << after;
  EXPECT_NE(ir.find("reduction across blocks"), std::string::npos);
}

TEST(Fusion, DiamondComputesSharedNodeOnce) {
  random::Generator rng(0);
  Array x = rng.uniform(1, 2, {100, 100}, {50, 50});
  Array y = (exp(x) - 1 / x).sum();
  std::ostringstream kernels;
  ComputeOptions o;
  o.kernels = &kernels;
  NDArray r = compute({y}, o)[0];
  // One random leaf in the kernel: x is generated once per element and used twice.
  std::string k = kernels.str();
  size_t leaves = 0;
  for (size_t p = k.find("leaf "); p != std::string::npos; p = k.find("leaf ", p + 1))
    if (k.compare(p, 8, "leaf 0: ") == 0 || k.compare(p, 8, "leaf 1: ") == 0) ++leaves;
  EXPECT_EQ(leaves, 1u) << k;
  EXPECT_NEAR(r.item<double>() / 1e4, std::exp(2) - std::exp(1) - std::log(2), 0.01);
}

TEST(Fusion, NoFuseRunsEveryOpAsItsOwnTaskWithTheSameResults) {
  random::Generator rng(3);
  Array x = rng.uniform(0, 1, {60, 60}, {20, 20});
  std::vector<Array> outs = {(sin(x) * 2 + cos(x)).sum({0}), (x * x - 1).max(),
                             (x + 1).slice({{0, {}, 2}, {{}, {}, -3}})};
  std::vector<NDArray> fused, unfused;
  Stats a = run(outs, true, &fused);
  Stats b = run(outs, false, &unfused);
  EXPECT_LT(a.last_kernels, b.last_kernels);
  EXPECT_LT(a.last_tasks, b.last_tasks);
  for (size_t k = 0; k < outs.size(); ++k) EXPECT_TRUE(kt::same(fused[k], unfused[k], 1e-12)) << k;
}

TEST(Fusion, SeveralOutputsOverTheSameDataShareOneKernel) {
  random::Generator rng(0);
  Array x = rng.uniform(0, 1, {100, 100}, {25, 25});
  Array y = sin(x) * sin(x) + cos(x) * cos(x) == 1;
  Stats s = run({y.all(), y.sum(), x.max()}, true);
  EXPECT_EQ(s.last_kernels, 1);
}

TEST(Fusion, IndependentWorkOnDifferentDataStaysInSeparateKernels) {
  // Row slices of one buffer (one block each, like ADMM's chunks) share no data: merged into one
  // kernel they would run as one task. Sums over the same slice share it: one kernel. A broadcast
  // vector both read (a column mean) does not count as shared data.
  NDArray data = kt::random_array(DType::Float64, {400, 8}, 61);
  Array x = kt::lazy(data, {100, 8}), m = x.mean({0});
  std::vector<Array> parts;
  for (int64_t r = 0; r < 400; r += 100)
    parts.push_back(((x.slice({Slice(r, r + 100), Slice::all()}) - m) * 2.0).sum());
  std::vector<NDArray> got;
  Stats s = run(parts, true, &got);
  EXPECT_EQ(s.last_kernels, 1 + 4);  // the mean; a kernel per slice
  auto want = kt::numpy({{"x", data}}, {"[((x[r:r + 100] - x.mean(0)) * 2).sum() for r in "
                                        "range(0, 400, 100)]"});
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(got[k].item<double>(), want[0].at(k), 1e-9) << k;
  Array one = x.slice({Slice(100, 200), Slice::all()});
  s = run({one.sum(), (one * one).sum(), one.max()}, true);
  EXPECT_EQ(s.last_kernels, 1);
}

TEST(Fusion, ReductionFeedingElementwiseIsABoundary) {
  NDArray a = kt::random_array(DType::Float64, {30, 20}, 91);
  Array x = kt::lazy(a, {10, 10});
  Array centered = x - x.mean({0}, true);
  std::vector<NDArray> out;
  Stats s = run({centered}, true, &out);
  EXPECT_EQ(s.last_kernels, 2);
  EXPECT_TRUE(
      kt::same(out[0], kt::numpy({{"a", a}}, {"a - a.mean(axis=0, keepdims=True)"})[0], 1e-14));
}

TEST(Fusion, ReshapesOfNonContiguousViewsAreCopiedFirst) {
  NDArray a = kt::random_array(DType::Float64, {6, 8}, 92);
  Array x = kt::lazy(a, {3, 4});
  // Reshape of a transposed/sliced leaf, of a sliced reduction result, and chains of views.
  std::vector<Array> outs = {x.T().reshape({48}),
                             x.sum({0}, true).slice({Slice::all(), {0, {}, 2}}).reshape({2, 2}),
                             x.max({1}).slice({{{}, {}, -2}}).reshape({3, 1}) + 1,
                             (x + 1).T().slice({{1, {}, 2}}).reshape({-1}).slice({{0, {}, 5}}),
                             x.reshape({2, 3, 8}).sum({0}).T().reshape({-1})};
  auto want = kt::numpy(
      {{"a", a}}, {"a.T.reshape(48)", "a.sum(axis=0, keepdims=True)[:, ::2].reshape(2, 2)",
                   "a.max(axis=1)[::-2].reshape(3, 1) + 1", "(a + 1).T[1::2].reshape(-1)[::5]",
                   "a.reshape(2, 3, 8).sum(axis=0).T.reshape(-1)"});
  for (bool fuse : {true, false}) {
    std::vector<NDArray> got;
    run(outs, fuse, &got);
    for (size_t k = 0; k < outs.size(); ++k) EXPECT_TRUE(kt::same(got[k], want[k], 1e-14)) << k;
  }
}

TEST(Fusion, MergingIndependentKernelsNeverCreatesACycle) {
  // {x.max, x*y.max} and {y.max, y*x.max} are each independent pairs, but merging both would make
  // the two kernels wait for each other (found by the differential fuzzer).
  NDArray d = kt::make_array(DType::Float64, {4}, {1, 2, 3, 4});
  Array x = kt::lazy(d, {1}), y = kt::lazy(d, {2});
  auto got = compute({x * y.max(), y * x.max()});
  EXPECT_TRUE(kt::same(got[0], kt::make_array(DType::Float64, {4}, {4, 8, 12, 16})));
  EXPECT_TRUE(kt::same(got[1], kt::make_array(DType::Float64, {4}, {4, 8, 12, 16})));
}

TEST(Fusion, LongChainsSplitIntoKernelsOfBoundedSize) {
  // 3000 additions would be one kernel whose compile time grows faster than linearly; fuse
  // splits it where the size estimate passes its limit, and says so.
  static double data[] = {0.5, -2, 1e6};
  Array x = from_buffer(data, DType::Float64, {3});
  for (int k = 0; k < 3000; ++k) x = x + 1.0;
  std::vector<NDArray> out;
  std::string ir;
  Stats s = run({x}, true, &out, &ir);
  EXPECT_GE(s.last_kernels, 3000 / 512);
  EXPECT_LE(s.last_kernels, 3000 / 512 + 1);
  EXPECT_NE(ir.find("kernel size limit"), std::string::npos);
  EXPECT_EQ(out[0].at(0), 3000.5);
  EXPECT_EQ(out[0].at(1), 2998);
  EXPECT_EQ(out[0].at(2), 1e6 + 3000);
}

TEST(Fusion, AMillionOpChainBuildsLowersAndComputes) {
  // Every walk over the graph is iterative: building, the passes, lowering (which recursed and
  // overflowed the stack at 30,000 ops), planning and freeing a 1,000,000-op chain. The chain's
  // kernels are all alike, so few are compiled.
#ifdef KILN_SANITIZED
  const int n = 100000;  // 12 s in release; sanitizers are 5-15x slower
#else
  const int n = 1000000;
#endif
  static int64_t data[] = {-7, 0, 40};
  Array x = from_buffer(data, DType::Int64, {3});
  for (int k = 0; k < n; ++k) x = x + 1;
  NDArray r = x.compute();
  EXPECT_EQ(r.at_int(0), n - 7);
  EXPECT_EQ(r.at_int(1), n);
  EXPECT_EQ(r.at_int(2), n + 40);
}
