// Plan and kernel caches: a structurally equal expression is neither re-optimized nor
// recompiled; new scalar values and data pointers flow in as parameters.
#include <cstdlib>
#include <filesystem>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

TEST(Cache, SecondComputeOfSameStructureCompilesNothing) {
  std::vector<double> a(64, 1.0), b(64, 2.0);
  auto expr = [](const std::vector<double>& d, double step) {
    Array x = from_buffer(d.data(), {8, 8}, {4, 4});
    return (x * step + 3.0).sum();
  };
  EXPECT_EQ(expr(a, 0.5).compute().item<double>(), 64 * 3.5);
  Stats first = stats();
  flags().no_compile = true;  // any compile now throws
  double r = 0;
  EXPECT_NO_THROW(r = expr(b, 0.25).compute().item<double>());
  flags().no_compile = false;
  EXPECT_EQ(r, 64 * 3.5);
  Stats second = stats();
  EXPECT_TRUE(second.last_cached);
  EXPECT_EQ(second.plans_built, first.plans_built);
  EXPECT_EQ(second.kernels_compiled, first.kernels_compiled);
  EXPECT_EQ(second.plan_cache_hits, first.plan_cache_hits + 1);
}

TEST(Cache, IdentityScalarsGetTheirOwnPlan) {
  std::vector<double> a(16, 2.0);
  Array x = from_buffer(a.data(), {16});
  // x * 1 simplifies to x; x * 3 does not: same structure, different value classes.
  EXPECT_EQ((x * 1.0).sum().compute().item<double>(), 32.0);
  EXPECT_EQ((x * 3.0).sum().compute().item<double>(), 96.0);
}

TEST(Cache, DiskCacheMeansASecondProcessCompilesNothing) {
  std::string dir = kt::tmpdir() + "/disk-cache";
  std::filesystem::remove_all(dir);
  std::string cmd = "KILN_DEVICE=cpu KILN_CACHE_DIR=" + dir + " " + kt::kiln_cli() +
                    " run diamond --size 200 --chunk 100 --json > " + kt::tmpdir() + "/run";
  ASSERT_EQ(std::system((cmd + "1.json").c_str()), 0);
  ASSERT_EQ(std::system(("KILN_NO_COMPILE=1 " + cmd + "2.json").c_str()), 0);
  auto count = [](const std::string& d) {
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(d)) n += e.path().extension() == ".o";
    return n;
  };
  EXPECT_EQ(count(dir), 1);
}
