// The push_slices switch (ComputeOptions::push_slices, KILN_NO_PUSH_SLICES) is independent of
// fusion: unfused plans still generate only the elements a slice keeps.
#include <sstream>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

// random-sum at 400 x 400 in 100 x 100 blocks: (x + 1)[::2, ::2].sum().
Array random_sum() {
  random::Generator rng(0);
  Array x = rng.normal(10, 1, {400, 400}, {100, 100});
  return (x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum();
}

// The storage summary (--emit-ir) and the result of one compute.
std::string storage(bool fuse, bool push, double* result) {
  ComputeOptions o;
  o.fuse = fuse;
  o.push_slices = push;
  std::ostringstream ir;
  o.ir = &ir;
  *result = compute({random_sum()}, o)[0].item<double>();
  std::string s = ir.str();
  return s.substr(s.rfind("fused graph:"));
}

}  // namespace

TEST(PushSlicesSwitch, UnfusedRandomSumAddsOnlyTheKeptQuarter) {
  double fused = 0, unfused = 0, unpushed = 0;
  storage(true, true, &fused);
  std::string s = storage(false, true, &unfused);
  // x + 1 is stored per block, over the 200 x 200 elements the slice keeps.
  EXPECT_NE(s.find("Binary[add] float64 (200, 200): per block"), std::string::npos) << s;
  EXPECT_EQ(s.find("(400, 400)"), std::string::npos) << s;
  // Without push_slices the whole 400 x 400 x + 1 is made, then sliced.
  std::string u = storage(false, false, &unpushed);
  EXPECT_NE(u.find("Binary[add] float64 (400, 400): per block"), std::string::npos) << u;
  EXPECT_NEAR(unfused, fused, 1e-12 * std::abs(fused));
  EXPECT_NEAR(unpushed, fused, 1e-12 * std::abs(fused));
  EXPECT_NEAR(fused / (200 * 200), 11.0, 0.05);
}

TEST(PushSlicesSwitch, IsPartOfThePlanCacheKeyAndHasAnEnvironmentFlag) {
  ComputeOptions push, keep;
  keep.push_slices = false;
  double a = compute({random_sum()}, push)[0].item<double>();
  double b = compute({random_sum()}, push)[0].item<double>();
  EXPECT_TRUE(stats().last_cached);
  double c = compute({random_sum()}, keep)[0].item<double>();
  EXPECT_FALSE(stats().last_cached);  // another plan, not the pushed one
  EXPECT_EQ(a, b);
  EXPECT_NEAR(c, a, 1e-12 * std::abs(a));
  // KILN_NO_PUSH_SLICES=1 (flags().no_push_slices) overrides the option: the plan found is the
  // unpushed one just built.
  flags().no_push_slices = true;
  compute({random_sum()}, push);
  bool cached = stats().last_cached;
  std::ostringstream ir;
  ComputeOptions dump;
  dump.ir = &ir;
  compute({random_sum()}, dump);
  flags().no_push_slices = false;
  EXPECT_TRUE(cached);
  EXPECT_EQ(ir.str().find("; IR after push_slices"), std::string::npos);
  EXPECT_NE(ir.str().find("; IR after simplify"), std::string::npos);
}
