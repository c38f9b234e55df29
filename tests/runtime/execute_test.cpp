// The executor: persist, thread-count independence, concurrent computes from user threads,
// memory freed at last use, errors inside tasks.
#include <atomic>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "oracle.hpp"
#include "runtime/memory.hpp"
#include "support/flags.hpp"

using namespace kiln;
using kt::same;

TEST(Execute, PersistKeepsTheBlocksAndIsReadLater) {
  random::Generator rng(5);
  Array x = rng.uniform(0, 1, {300, 200}, {100, 50});
  Array p = (x * 2).persist();
  EXPECT_EQ(p.node()->op, Op::Buffer);  // a leaf now: later expressions do not recompute x
  EXPECT_EQ(p.chunks(), x.chunks());
  NDArray direct = (x * 2 + 1).sum({0}).compute();
  NDArray via = (p + 1).sum({0}).compute();
  EXPECT_TRUE(same(via, direct));
}

TEST(Execute, ResultsAreBitIdenticalForOneAndTwoThreads) {
  random::Generator rng(11);
  Array x = rng.normal(0, 1, {500, 300}, {64, 48});
  std::vector<Array> outs = {x.sum(), (x * x).mean({0}), exp(x).max({1}), x.std(), x.argmax()};
  ComputeOptions one, two;
  one.threads = 1;
  two.threads = 2;
  auto a = compute(outs, one), b = compute(outs, two);
  for (size_t k = 0; k < outs.size(); ++k)
    EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].nbytes())) << k;
}

TEST(Execute, ConcurrentComputesFromUserThreads) {
  std::vector<std::thread> threads;
  std::vector<double> results(4), expected(4);
  for (int t = 0; t < 4; ++t) {
    expected[t] = 1000.0 * 40 * (t + 1);
    threads.emplace_back([t, &results] {
      // Each thread builds its own expressions (sharing interned nodes and caches).
      Array x = ones({1000, 40}, {100, 10});
      double s = 0;
      for (int rep = 0; rep < 5; ++rep) s = (x * (t + 1)).sum().compute().item<double>();
      results[t] = s;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(results, expected);
}

TEST(Execute, IntermediatesAreFreedAndPeakIsBounded) {
  // x - mean(x) materializes only the small mean; x itself is regenerated per block.
  random::Generator rng(2);
  Array x = rng.uniform(0, 1, {2000, 2000}, {250, 250});
  NDArray r = (x - x.mean({0}, true)).sum().compute();
  EXPECT_NEAR(r.item<double>(), 0.0, 1e-6);
  Stats s = stats();
  EXPECT_LT(s.last_peak_bytes, 1 << 20);  // the 32 MB array is never held
}

TEST(Memory, FreedLargeBlocksAreReusedAndCounted) {
  const size_t big = 4 << 20;
  const int64_t before = bytes_in_use();
  void* a = host_alloc(big);
  EXPECT_EQ(bytes_in_use() - before, static_cast<int64_t>(big));
  host_free(a, big);
  EXPECT_EQ(bytes_in_use(), before);
  void* b = host_alloc(big);
#ifndef KILN_SANITIZED
  if (!flags().no_block_pool) {
    EXPECT_EQ(a, b);  // the pool's block, already mapped
  }
#endif
  std::memset(b, 1, big);
  host_free(b, big);
  const bool saved = flags().no_block_pool;
  flags().no_block_pool = true;  // then every block goes back to the system
  void* c = host_alloc(big);
  host_free(c, big);
  flags().no_block_pool = saved;
  EXPECT_EQ(bytes_in_use(), before);
}

TEST(Execute, SkippedOutputsRunNothingOfTheirOwnAndKeepThePlan) {
  // Outputs: two independent reductions of different data, one over a blocked intermediate
  // that a third (skipped) output also reads, and a library product. Skipping outputs empties
  // their results, runs only the work the others need (fewer tasks), reuses the plan of all
  // outputs, and the others' values are those of the full compute, bit for bit.
  NDArray a = kt::random_array(DType::Float64, {400, 30}, 41);
  NDArray b = kt::random_array(DType::Float64, {400, 30}, 42);
  for (const ComputeOptions& base : {ComputeOptions{}, [] {
                                       ComputeOptions o;
                                       o.fuse = false;
                                       return o;
                                     }()}) {
    Array A = kt::lazy(a, {100, 30}), B = kt::lazy(b, {100, 30});
    Array t = exp(A * 0.5);  // blocked when unfused: read by two outputs' groups
    std::vector<Array> outs = {(t + 1.0).sum({0}), (t * B).sum(), B.max({1}), matmul(B.T(), A)};
    auto all = compute(outs, base);
    const Stats before = stats();
    const int64_t full_tasks = before.last_tasks;
    for (std::vector<bool> skip :
         {std::vector<bool>{false, true, false, true}, std::vector<bool>{true, false, true, false},
          std::vector<bool>{false, false, false, true},
          std::vector<bool>{true, true, true, true}}) {
      ComputeOptions o = base;
      o.skip = skip;
      auto got = compute(outs, o);
      const Stats s = stats();
      EXPECT_TRUE(s.last_cached);
      // (Fused, outputs 0-2 share one kernel: it runs when any of them is wanted.)
      EXPECT_LE(s.last_tasks, full_tasks);
      if (skip[3]) {
        EXPECT_LT(s.last_tasks, full_tasks);
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        if (skip[k]) {
          EXPECT_EQ(got[k].data(), nullptr) << k;
        } else {
          EXPECT_TRUE(same(got[k], all[k])) << k;
        }
      }
    }
    EXPECT_EQ(stats().plans_built, before.plans_built);
    ComputeOptions none = base;
    none.skip = {true, true, true, true};
    compute(outs, none);
    EXPECT_EQ(stats().last_tasks, 0);
    none.skip = {true};
    EXPECT_THROW(compute(outs, none), Error);
  }
}

TEST(Execute, StatsTotalComputesTasksAndTheLargestPeak) {
  Array x = random::Generator(3).uniform(0, 1, {1000, 1000}, {250, 250});
  Stats start = stats();
  NDArray big = (x + 1).compute();  // an 8 MB result
  Stats one = stats();
  reset_peak_stats();
  NDArray small = x.sum().compute();
  Stats two = stats();
  EXPECT_EQ(two.computes - start.computes, 2);
  EXPECT_EQ(two.tasks - start.tasks, one.last_tasks + two.last_tasks);
  EXPECT_GE(one.max_peak_bytes, 8000000);
  EXPECT_EQ(two.max_peak_bytes, two.last_peak_bytes);  // reset: the 8 MB result's peak is gone
  EXPECT_LT(two.max_peak_bytes, 1 << 20);
}

// Unfused, every op is its own group and its result an intermediate array. Those read block by
// block (element-wise ops, slices, transposes over square chunks, broadcasts) are stored per
// block and freed at each block's last reader, and the executor runs block by block across
// groups: the peak stays a few blocks (500 KB each) where whole arrays are 32 MB each.
TEST(Execute, UnfusedChainsStreamBlockByBlock) {
  auto build = [](const Shape& chunks, bool transpose) {
    random::Generator rng(21);
    Array x = rng.normal(0, 1, {2000, 2000}, chunks);
    Array row = rng.uniform(0, 1, {1, 2000}, {1, chunks[1]});
    Array y = ((x + 1) * 2 - x) + row;  // element-wise and a broadcast
    // A transpose of a materialized array: block (i, j) reads block (j, i), so about half of
    // y's blocks wait for their partner.
    Array z = transpose ? (y * 0.5).transpose() + y : y * 0.5 + y;
    Array w = z.slice({{0, {}, 2}, {{}, {}, -1}});  // a strided, reversed slice
    return std::vector<Array>{w.sum(), w.argmax(), z.slice({{0, 500}, {0, 500}}).sum()};
  };
  ComputeOptions fused, one, two;
  one.fuse = two.fuse = false;
  one.threads = 1;
  two.threads = 2;
  for (bool transpose : {false, true}) {
    auto want = compute(build({250, 250}, transpose), fused);
    auto got1 = compute(build({250, 250}, transpose), one);
    EXPECT_LT(stats().last_peak_bytes, (transpose ? 24 : 6) << 20) << transpose;
    auto got2 = compute(build({250, 250}, transpose), two);
    EXPECT_LT(stats().last_peak_bytes, (transpose ? 32 : 8) << 20) << transpose;
    // Non-square chunks: a transposed block spans several blocks, so y * 0.5 stays one array.
    auto rect = compute(build({250, 400}, transpose), one);
    for (const auto& got : {got1, got2, rect}) {
      EXPECT_NEAR(got[0].item<double>(), want[0].item<double>(), 1e-6) << transpose;
      EXPECT_EQ(got[1].item<int64_t>(), want[1].item<int64_t>()) << transpose;
      EXPECT_NEAR(got[2].item<double>(), want[2].item<double>(), 1e-6) << transpose;
    }
  }
}

TEST(Execute, LargeLogicalArrayReducesInBoundedMemory) {
  // 8 GiB logical (float64), never materialized.
  random::Generator rng(3);
  Array x = rng.uniform(0, 1, {32768, 32768}, {4096, 4096});
  double mean = x.slice({{0, {}, 64}, {0, {}, 64}}).mean().compute().item<double>();
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_LT(stats().last_peak_bytes, 1 << 20);
}

TEST(Execute, AnErrorInsideATaskReachesTheCallerAndKilnStaysUsable) {
  // A failed block allocation inside the first block's task (injected: a real one would need an
  // allocation that fails, which overcommit may grant and then kill the process for).
  Array big = zeros({4096, 4096}, {1024, 4096}) + 1;
  int64_t saved = flags().fail_alloc_above;
  flags().fail_alloc_above = int64_t{1} << 20;  // the output is 128 MiB
  try {
    big.compute();
    ADD_FAILURE() << "the injected allocation failure did not reach the caller";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute: out of memory allocating"), std::string::npos)
        << e.what();
    EXPECT_TRUE(e.kind() == ErrorKind::Memory) << e.what();  // Python: kiln.KilnMemoryError
  }
  flags().fail_alloc_above = saved;
  EXPECT_EQ((ones({100}, {10}) * 2).sum().compute().item<double>(), 200.0);
  EXPECT_EQ(big.sum().compute().item<double>(), 4096.0 * 4096);
}

TEST(Execute, ACancelledComputeStopsBetweenTasksAndKilnStaysUsable) {
  // Set before the compute: no task runs, the caller gets the error.
  std::atomic<bool> cancel{true};
  ComputeOptions o;
  o.cancel = &cancel;
  Array x = random::Generator(3).normal(0, 1, {4000, 4000}, {250, 250});
  try {
    x.sum().compute();  // without the flag: it completes (below)
    compute({x.sum()}, o);
    ADD_FAILURE() << "a cancelled compute returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "compute: cancelled");
  }
  // Set from another thread while it runs (256 tasks on a 16000 x 16000 array: about a second on
  // two cores, after a compile): it stops before the end, whatever the device.
  cancel = false;
  Array big = random::Generator(4).normal(0, 1, {16000, 16000}, {1000, 1000});
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cancel = true;
  });
  bool threw = false;
  try {
    compute({(big * 2).sum()}, o);
  } catch (const Error& e) {
    threw = std::string(e.what()) == "compute: cancelled";
  }
  canceller.join();
  EXPECT_TRUE(threw);
  cancel = false;
  EXPECT_EQ(compute({(ones({100}, {10}) * 2).sum()}, o)[0].item<double>(), 200.0);
}

TEST(Execute, TaskCountersFollowTheRun) {
  // ComputeOptions::tasks_done/tasks_total: what Python's notebook progress bar reads.
  Array y = (random::Generator(3).uniform(0, 1, {400, 400}, {100, 100}) * 2).sum();
  std::atomic<int64_t> done{-5}, total{-5};
  ComputeOptions o;
  o.tasks_done = &done;
  o.tasks_total = &total;
  double v = compute({y}, o)[0].item<double>();
  EXPECT_NEAR(v, 400 * 400, 400 * 400 * 0.01);
  EXPECT_GE(total.load(), 16);  // the 16 blocks' tasks, and the reduction's
  EXPECT_EQ(done.load(), total.load());
  compute({y}, o);  // reset at the start of each run
  EXPECT_EQ(done.load(), total.load());
}

TEST(Execute, PlanOnlyPlansAndCachesWithoutComputing) {
  Array x = random::Generator(9).uniform(0, 1, {300, 300}, {100, 100});
  Array y = (sin(x) * 3 + 1).sum({1});
  std::ostringstream ir;
  ComputeOptions o;
  o.plan_only = true;
  o.ir = &ir;
  int64_t computes = stats().computes;
  std::vector<NDArray> none = compute({y}, o);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].data(), nullptr);  // empty: nothing ran
  EXPECT_EQ(stats().computes, computes);
  EXPECT_NE(ir.str().find("fused"), std::string::npos) << ir.str();
  NDArray r = y.compute();  // the plan made above
  EXPECT_TRUE(stats().last_cached);
  EXPECT_EQ(r.size(), 300);
}
