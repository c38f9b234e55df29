// The logistic-gd workload's solver (dask-glm's gradient descent on Kiln arrays) against the same
// algorithm in NumPy (tests/tools/glm_reference.py), on the same data.
#include <cmath>
#include <vector>

#include "oracle.hpp"
#include "tools/workloads.hpp"

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
    ComputeOptions opt;
    opt.fuse = fuse;
    workloads::SolveStats st;
    double loss = 0;
    int iterations = 0;
    std::vector<double> beta = workloads::logistic_gradient_descent(
        kt::lazy(x, {700, p}), kt::lazy(y, {700}), 15, 1e-14, opt, &st, &loss, &iterations);
    EXPECT_EQ(iterations, static_cast<int>(want.at(p + 1))) << fuse;
    EXPECT_NEAR(loss, want.at(p), 1e-9 * std::fabs(want.at(p))) << fuse;
    for (int64_t j = 0; j < p; ++j)
      EXPECT_NEAR(beta[j], want.at(j), 1e-8 * (1 + std::fabs(want.at(j)))) << fuse << " " << j;
    EXPECT_GT(st.computes, 3 * 15);  // gradient, X grad, X beta and the line search's losses
  }
}
