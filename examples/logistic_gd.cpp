// Seeds 000 and 002: logistic regression by dask-glm's gradient descent (20 iterations) on
// X ~ N(0, 1) in row blocks, y = [X w + noise > 0].  logistic_gd [N [C [K]]]
#include <cstdio>

#include "common.hpp"
#include "kiln/glm.hpp"
#include "kiln/kiln.hpp"

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, 1, 1000000), c = arg(argc, argv, 2, 100000),
                p = arg(argc, argv, 3, 100);
  kiln::random::Generator rng(0);
  kiln::Array X = rng.normal(0, 1, {n, p}, {c, p});
  kiln::Array w = ((kiln::arange(p) % 7 - 3).astype(kiln::DType::Float64) / 3.0).reshape({1, p});
  kiln::Array y = ((X * w).sum({1}) + rng.normal(0, 1, {n}, {c}) > 0).astype(kiln::DType::Float64);
  // The data made once and kept in memory: every iteration reads them instead of regenerating.
  X = X.persist();
  y = y.persist();
  kiln::glm::Options o;
  o.max_iter = 20;
  o.tol = 1e-14;
  o.normalize = false;
  kiln::glm::Result r = kiln::glm::gradient_descent(X, y, o);
  std::printf("logistic-gd %.17g %d\n", r.loss.back(), static_cast<int>(r.n_iter));
}
