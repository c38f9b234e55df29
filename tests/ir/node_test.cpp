// Interning: structural sharing, equal subexpressions are one node, long chains are linear.
#include <chrono>

#include "oracle.hpp"

using namespace kiln;

TEST(Interning, AddingOneOpCreatesOneNode) {
  Array x = random::Generator(0).uniform(0, 1, {100, 100}, {10, 10});
  size_t before = Context::global().live_nodes();
  Array y = x + 1;  // the scalar 1 (and its broadcast) plus the add
  size_t after = Context::global().live_nodes();
  EXPECT_LE(after - before, 3u);
  EXPECT_EQ(y.node()->in(0).get(), x.node().get());  // shares x, no copy
}

TEST(Interning, EqualSubexpressionsAreOneNode) {
  Array x = random::Generator(0).uniform(0, 1, {10, 10});
  Array a = exp(x) - 1 / x;
  Array b = exp(x) - 1 / x;
  EXPECT_EQ(a.node().get(), b.node().get());
  EXPECT_NE((x + 1).node().get(), (x + 2).node().get());
}

TEST(Interning, LongChainsBuildInLinearTimeAndFreeWithoutRecursion) {
  size_t base = Context::global().live_nodes();
  auto build = [](int n) {
    Array x = zeros({4}, {2});
    for (int k = 0; k < n; ++k) x = x + 1.0;
    return x;
  };
  auto time = [&](int n) {
    auto t0 = std::chrono::steady_clock::now();
    Array x = build(n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LE(Context::global().live_nodes(), base + static_cast<size_t>(n) + 8);
    return s;
  };
  double t1 = time(25000), t4 = time(100000);
  // Linear, not quadratic: 4x the nodes must not take 16x the time (generous for noise).
  EXPECT_LT(t4, 10 * t1 + 0.05);
  // The 100000-node chain was destroyed on return without overflowing the stack.
  EXPECT_LE(Context::global().live_nodes(), base + 8);
}

TEST(Interning, DeepChainComputes) {
  Array x = zeros({8}, {4});
  for (int k = 0; k < 2000; ++k) x = x + 0.5;
  EXPECT_EQ(x.sum().compute().item<double>(), 8 * 1000.0);
}
