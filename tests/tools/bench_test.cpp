// kiln_bench: the seed-workload suite runs every workload, the solver (logistic-gd) included.
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <map>

#include "oracle.hpp"
#include "shell.hpp"

#ifdef KILN_BENCH_PATH  // defined when CMakeLists.txt builds kiln_bench
TEST(Bench, QuickWorkloadSuiteRunsTheSolverToo) {
  // A copy of the test binary elsewhere (the GPU machine's pack) may travel without kiln_bench.
  if (access(kt::kiln_bench().c_str(), X_OK) != 0)
    GTEST_SKIP() << "no kiln_bench at '" << kt::kiln_bench() << "' (KILN_BENCH_BIN)";
  int rc = 0;
  std::string out = kt::shell(
      "env KILN_BENCH_QUICK=1 " + kt::kiln_bench() +
          " --benchmark_filter='BM_Workload/(logistic-gd|diamond)/' --benchmark_min_time=0.001"
          " --benchmark_format=json 2>/dev/null",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  std::map<std::string, nlohmann::json> runs;
  for (const auto& b : j["benchmarks"]) runs[b["run_name"].get<std::string>()] = b;
  ASSERT_EQ(runs.size(), 6u) << out;  // 3 settings each, at 1/20 of the default sizes
  const auto& gd = runs.at("BM_Workload/logistic-gd/N:25000/C:5000/unfused/manual_time");
  EXPECT_FALSE(gd.value("error_occurred", false)) << gd;
  EXPECT_GT(gd["real_time"].get<double>(), 0.0) << gd;
  // 20 iterations of gradient descent: a dozen-odd computes per stretch of ten, many tasks.
  EXPECT_GE(gd["computes"].get<double>(), 40.0) << gd;
  EXPECT_GT(gd["tasks"].get<double>(), gd["computes"].get<double>()) << gd;
  const auto& d = runs.at("BM_Workload/diamond/N:500/C:100/fused/real_time");
  EXPECT_EQ(d["tasks"].get<double>(), 25.0 + 4 + 1) << d;  // 25 blocks, a fan-in-8 tree
}
#endif
