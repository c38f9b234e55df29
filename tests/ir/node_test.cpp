// Interning: structural sharing, equal subexpressions are one node, long chains are linear.
#include <thread>

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

TEST(Interning, LongChainsBuildInLinearWorkAndFreeWithoutRecursion) {
  // Work is counted, not timed: interning compares about one candidate per new node, and the
  // graph holds one node per step (plus the shared scalar), so n steps cost O(n).
  Context& ctx = Context::global();
  size_t base = ctx.live_nodes();
  for (int n : {25000, 100000}) {
    uint64_t probes0 = ctx.probes();
    {
      Array x = zeros({4}, {2});
      for (int k = 0; k < n; ++k) x = x + 1.0;
      EXPECT_LE(ctx.live_nodes(), base + static_cast<size_t>(n) + 8);
    }  // the n-node chain is destroyed here without overflowing the stack
    uint64_t probes = ctx.probes() - probes0;
    EXPECT_LE(probes, 3u * static_cast<uint64_t>(n)) << n;  // equal nodes are found, not scanned
    EXPECT_LE(ctx.live_nodes(), base + 8);
  }
}

TEST(Interning, DeepChainComputes) {
  Array x = zeros({8}, {4});
  for (int k = 0; k < 2000; ++k) x = x + 0.5;
  EXPECT_EQ(x.sum().compute().item<double>(), 8 * 1000.0);
}

TEST(Interning, NodesLeaveTheTableInAnyOrderAndTheOthersAreStillFound) {
  // The table is open-addressed: deleting a node shifts later entries of its probe run back. Drop
  // two thirds of 6000 nodes in a scrambled order, then ask for every node again: the kept ones
  // must be found (the same node), the dropped ones made anew, and nothing may be left behind.
  Context& ctx = Context::global();
  size_t base = ctx.live_nodes();
  Array x = zeros({6}, {3});
  const int n = 6000;
  std::vector<Array> ys;
  for (int k = 0; k < n; ++k) ys.push_back(x + static_cast<double>(k));
  std::vector<const Node*> kept(n, nullptr);
  for (int k = 0; k < n; ++k) {
    int j =
        static_cast<int>((static_cast<uint64_t>(k) * 7919) % n);  // 7919 is prime: a permutation
    if (j % 3 == 0)
      kept[j] = ys[j].node().get();
    else
      ys[j] = Array();
  }
  for (int k = 0; k < n; ++k) {
    Array again = x + static_cast<double>(k);
    if (kept[k]) EXPECT_EQ(again.node().get(), kept[k]) << k;
    EXPECT_EQ(again.node()->in(0).get(), x.node().get());
  }
  ys.clear();
  EXPECT_LE(ctx.live_nodes(), base + 4);  // x, and at most the last scalar's nodes
  EXPECT_EQ((x + 17.0).sum().compute().item<double>(), 6 * 17.0);
}

TEST(Interning, ThreadsBuildingTheSameExpressionsGetOneNode) {
  Array x = zeros({4}, {2});
  std::vector<Array> held[2];
  auto build = [&](int t) {
    for (int k = 0; k < 3000; ++k) {
      Array y = (x + static_cast<double>(k % 500)) * 2.0;
      if (k < 500) held[t].push_back(y);  // the first 500 stay alive on both threads
    }
  };
  std::thread a(build, 0), b(build, 1);
  a.join();
  b.join();
  for (int k = 0; k < 500; ++k) EXPECT_EQ(held[0][k].node().get(), held[1][k].node().get()) << k;
}
