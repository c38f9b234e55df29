// Slicing, transpose, reshape, rechunk, broadcast_to, concatenate and stack against NumPy.
#include "oracle.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

TEST(Structure, SlicesWithStepsNegativeStepsAndIndices) {
  NDArray a = kt::random_array(DType::Float64, {17, 23}, 71);
  Array x = lazy(a, {5, 6});
  auto want = kt::numpy(
      {{"a", a}}, {"a[::2, ::3]", "a[::-1, 3:20:4]", "a[-5:, :-7]", "a[10:2:-3, ::-2]", "a[4]",
                   "a[:, -1]", "a[3, 5]", "a[100:, :]", "a[::2, ::2] + 1", "(a + 1)[1::3, ::-5]"});
  auto got =
      compute({x.slice({{0, {}, 2}, {0, {}, 3}}), x.slice({{{}, {}, -1}, {3, 20, 4}}),
               x.slice({{-5, {}}, {{}, -7}}), x.slice({{10, 2, -3}, {{}, {}, -2}}), x[4],
               x.slice({Slice::all(), Slice::index(-1)}), x[3][5], x.slice({{100, {}}}),
               x.slice({{0, {}, 2}, {0, {}, 2}}) + 1, (x + 1).slice({{1, {}, 3}, {{}, {}, -5}})});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
}

TEST(Structure, TransposeReshapeRechunkBroadcast) {
  NDArray a = kt::random_array(DType::Float64, {6, 4, 5}, 72);
  Array x = lazy(a, {4, 3, 2});
  auto want =
      kt::numpy({{"a", a}}, {"a.T", "np.transpose(a, (1, 0, 2))", "a.reshape(24, 5)",
                             "a.reshape(-1)", "a.T.reshape(20, 6)", "(a + 1).reshape(3, 40)",
                             "np.broadcast_to(a[:, :1, :], (6, 4, 5)) * 2", "a[::2].T.reshape(-1)",
                             "np.sin(a).transpose(2, 0, 1)[1:, ::-1]"});
  auto got = compute({x.T(), x.transpose({1, 0, 2}), x.reshape({24, 5}), x.reshape({-1}),
                      x.T().reshape({20, 6}), (x + 1).reshape({3, 40}),
                      x.slice({Slice::all(), {0, 1}}).broadcast_to({6, 4, 5}) * 2,
                      x.slice({{0, {}, 2}}).T().reshape({-1}),
                      sin(x).transpose({2, 0, 1}).slice({{1, {}}, {{}, {}, -1}})});
  // Exact except sin (vector math: within 4 ulp of NumPy's glibc value).
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_TRUE(same(got[k], want[k], k + 1 == got.size() ? 1e-15 : 0)) << k;
  Array r = x.rechunk({6, 1, 5});
  EXPECT_EQ(r.chunks()[1].size(), 4u);
  EXPECT_TRUE(same(r.compute(), a));
  EXPECT_TRUE(same((x.rechunk({2, 2, 2}) + x).compute(), kt::numpy({{"a", a}}, {"a + a"})[0]));
}

TEST(Structure, ConcatenateAndStack) {
  NDArray a = kt::random_array(DType::Float64, {3, 4}, 73);
  NDArray b = kt::random_array(DType::Int32, {2, 4}, 74);
  NDArray c = kt::random_array(DType::Float64, {3, 4}, 75);
  Array x = lazy(a, {2, 2}), y = lazy(b), z = lazy(c, {3, 1});
  auto want =
      kt::numpy({{"a", a}, {"b", b}, {"c", c}},
                {"np.concatenate([a, b])", "np.concatenate([a, c], axis=1)", "np.stack([a, c])",
                 "np.stack([a, c], axis=2)", "np.concatenate([a, b, a * 2]).sum(axis=0)",
                 "np.concatenate([a, c], axis=-1)[::-1, 1:7]"});
  auto got = compute({concatenate({x, y}), concatenate({x, z}, 1), stack({x, z}), stack({x, z}, 2),
                      concatenate({x, y, x * 2}).sum({0}),
                      concatenate({x, z}, -1).slice({{{}, {}, -1}, {1, 7}})});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-15)) << k;
}

TEST(Structure, ZeroSizedAndScalarArrays) {
  NDArray a = kt::random_array(DType::Float64, {4, 0}, 76);
  Array x = lazy(a);
  EXPECT_EQ((x + 1).compute().shape(), (Shape{4, 0}));
  EXPECT_EQ(x.sum({1}).compute().shape(), (Shape{4}));
  Array s = scalar(2.5);
  EXPECT_EQ((s * 2).compute().item<double>(), 5.0);
  EXPECT_EQ(ones({3}).slice({{5, {}}}).compute().size(), 0);
}
