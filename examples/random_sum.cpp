// Seed 001: the sum of a slice of a large random array, generated block by block inside the
// kernels (only the quarter the slice keeps is ever made).  random_sum [N [C]]
#include <cstdio>

#include "common.hpp"
#include "kiln/kiln.hpp"

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, 1, 20000), c = arg(argc, argv, 2, 2000);
  kiln::random::Generator rng(0);
  kiln::Array x = rng.normal(10, 1, {n, n}, {c, c});
  double s = (x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum().compute().item<double>();
  std::printf("random-sum %.17g\n", s);
}
