// Seed 000: the thin SVD of a tall chunked array (TSQR over its row blocks), and how well
// u s vh reproduces it.  svd [N [C [K]]]
#include <cstdio>

#include "common.hpp"
#include "kiln/kiln.hpp"

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, 1, 10000), c = arg(argc, argv, 2, 5000),
                k = arg(argc, argv, 3, 1000);
  // x made once, kept in memory: the factorization and the check read the same values.
  kiln::Array x = kiln::random::Generator(0).normal(0, 1, {n, k}, {c, k}).persist();
  kiln::linalg::SVD f = kiln::linalg::svd(x);
  kiln::Array error = kiln::linalg::norm(kiln::matmul(f.u * f.s, f.vh) - x) / kiln::linalg::norm(x);
  std::vector<kiln::NDArray> r = kiln::compute({f.s, error});
  std::printf("svd %.17g %.17g %.3g\n", r[0].at(0), r[0].at(1), r[1].item<double>());
}
