// Seed 004: sin(x)^2 + cos(x)^2 == 1, tested exactly, element by element: does it hold for all,
// and for how many.  trig_identity [N [C]]
#include <cstdio>

#include "common.hpp"
#include "kiln/kiln.hpp"

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, 1, 10000), c = arg(argc, argv, 2, 2000);
  kiln::Array x = kiln::random::Generator(0).uniform(0, 1, {n, n}, {c, c});
  kiln::Array y = kiln::pow(kiln::sin(x), 2) + kiln::pow(kiln::cos(x), 2) == 1;
  std::vector<kiln::NDArray> r = kiln::compute({y.all(), y.sum()});  // one pass over x
  std::printf("trig-identity %s %lld\n", r[0].item<bool>() ? "true" : "false",
              static_cast<long long>(r[1].item<int64_t>()));
}
