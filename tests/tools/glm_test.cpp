// The logistic-gd workload's solver (dask-glm's gradient descent, kiln::glm::gradient_descent
// without column normalization) against the same algorithm in NumPy
// (tests/tools/glm_reference.py), on the same data.
#include <cmath>
#include <vector>

#include "kiln/glm.hpp"
#include "oracle.hpp"

using namespace kiln;

TEST(Workloads, LogisticGradientDescentMatchesNumPy) {
  const int64_t n = 3000, p = 8;
  NDArray x = kt::random_array(DType::Float64, {n, p}, 17, -2, 2);
  NDArray noise = kt::random_array(DType::Float64, {n}, 18, -1, 1);
  std::vector<double> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    double s = noise.at(i);
    for (int64_t j = 0; j < p; ++j) s += x.at(i * p + j) * (static_cast<double>(j) - 3.5) / 2;
    labels[i] = s > 0;
  }
  NDArray y = kt::make_array(DType::Float64, {n}, labels);
  const std::string ref = "(__import__('sys').path.insert(0, '" + kt::source_dir() +
                          "/tests/tools'), __import__('glm_reference')"
                          ".gradient_descent(X, y, 15, 1e-14))[1]";
  NDArray want = kt::numpy({{"X", x}, {"y", y}}, {ref})[0];
  ASSERT_EQ(want.size(), p + 2);
  for (bool fuse : {true, false}) {
    glm::Options o;
    o.compute.fuse = fuse;
    o.max_iter = 15;
    o.tol = 1e-14;
    o.normalize = false;
    Stats before = stats();
    glm::Result r = glm::gradient_descent(kt::lazy(x, {700, p}), kt::lazy(y, {700}), o);
    Stats after = stats();
    EXPECT_EQ(r.n_iter, static_cast<int>(want.at(p + 1))) << fuse;
    EXPECT_NEAR(r.loss.back(), want.at(p), 1e-9 * std::fabs(want.at(p))) << fuse;
    for (int64_t j = 0; j < p; ++j)
      EXPECT_NEAR(r.coef[j], want.at(j), 1e-8 * (1 + std::fabs(want.at(j)))) << fuse << " " << j;
    // Per iteration: X grad with the first trial's loss and gradient, X beta, and the line
    // search's further losses (the gradient needs a compute of its own only after a backtrack).
    EXPECT_GE(after.computes - before.computes, 2 * 15);
    EXPECT_GT(after.tasks - before.tasks, after.computes - before.computes);
  }
}
