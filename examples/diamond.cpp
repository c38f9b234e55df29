// Seed 002's diamond: exp(x) and 1/x share x, fused into one kernel with the sum.
// diamond [N [C]]
#include <cstdio>

#include "common.hpp"
#include "kiln/kiln.hpp"

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, 1, 10000), c = arg(argc, argv, 2, 2000);
  kiln::Array x = kiln::random::Generator(0).uniform(1, 2, {n, n}, {c, c});
  double s = (kiln::exp(x) - 1 / x).sum().compute().item<double>();
  std::printf("diamond %.17g\n", s);
}
