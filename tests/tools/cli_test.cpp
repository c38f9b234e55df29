// The kiln command: --json fields and results, list, errors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/library.hpp"
#include "oracle.hpp"
#include "shell.hpp"

namespace {
// Runs the kiln command; returns what it wrote where `redirect` sends it (default: stdout and
// stderr both).
std::string run(const std::string& args, int* rc = nullptr, const std::string& redirect = "2>&1") {
  return kt::shell(kt::kiln_cli() + " " + args + " " + redirect, rc);
}
}  // namespace

TEST(Cli, RunJsonHasTheDocumentedFields) {
  std::string out = run("run random-sum --size 400 --chunk 100 --json --repeat 2");
  for (const char* f :
       {"\"workload\":\"random-sum\"", "\"size\":400", "\"chunk\":100", "\"threads\"",
        "\"fused\":true", "\"result\"", "\"seconds\"", "\"compile_seconds\"", "\"tasks\":19",
        "\"kernels\":1", "\"peak_bytes\"", "\"push_slices\":true", "\"peak_rss_bytes\""})
    EXPECT_NE(out.find(f), std::string::npos) << f << " in " << out;
}

TEST(Cli, RunJsonReportsThePeakResidentSetOfTheProcess) {
  nlohmann::json j = nlohmann::json::parse(run("run diamond --size 600 --chunk 200 --json"));
  ASSERT_TRUE(j["peak_rss_bytes"].is_number_integer()) << j;
  int64_t rss = j["peak_rss_bytes"].get<int64_t>(), peak = j["peak_bytes"].get<int64_t>();
  // The whole process (the LLVM JIT alone maps tens of MiB), not only Kiln's blocks; in bytes.
  EXPECT_GT(rss, int64_t{8} << 20) << j;
  EXPECT_LT(rss, int64_t{64} << 30) << j;
  EXPECT_GT(rss, peak) << j;
}

TEST(Cli, RunRejectsNumbersOutOfRange) {
  const char* cases[][2] = {{"--size -5", "--size"},
                            {"--size 0", "--size"},
                            {"--size 99999999999999999999", "--size"},
                            {"--size 12abc", "--size"},
                            {"--chunk 0", "--chunk"},
                            {"--chunk -1", "--chunk"},
                            {"--threads -1", "--threads"},
                            {"--threads 0", "--threads"},
                            {"--threads 100000", "--threads"},
                            {"--repeat 0", "--repeat"},
                            {"--repeat 9223372036854775808", "--repeat"}};
  for (const auto& c : cases) {
    int rc = 0;
    std::string out = run(std::string("run random-sum --size 100 --chunk 50 --json ") + c[0], &rc);
    EXPECT_EQ(rc, 2) << c[0] << ": " << out;
    EXPECT_NE(out.find(std::string(c[1]) + ": expected an integer in ["), std::string::npos)
        << c[0] << ": " << out;
    EXPECT_EQ(out.find("\"result\""), std::string::npos) << c[0] << " ran: " << out;
  }
  int rc = 0;
  std::string out = run("seeds --repeat 0", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--repeat: expected an integer in [1, "), std::string::npos) << out;
  // The limits themselves are accepted.
  out = run("run random-sum --size 1 --chunk 1 --threads 1 --repeat 1 --json", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"size\":1,"), std::string::npos) << out;
}

TEST(Cli, SolverWorkloadsRefuseDotAndTrace) {
  for (const char* opt : {"--emit-dot", "--trace"}) {
    std::string file = kt::tmpdir() + "/solver.out";
    std::remove(file.c_str());
    int rc = 0;
    std::string out =
        run(std::string("run logistic-gd --size 1000 --chunk 500 ") + opt + " " + file, &rc);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("--emit-dot and --trace record one compute(); 'logistic-gd' is a solver"),
              std::string::npos)
        << out;
    EXPECT_FALSE(std::ifstream(file).good()) << opt << " wrote " << file;
  }
}

TEST(Cli, WriteFailuresAreReported) {
  // stderr to the pipe, stdout to a full device.
  const std::string to_full = "2>&1 >/dev/full";
  for (const char* args : {"list", "run random-sum --size 100 --chunk 50 --json",
                           "run random-sum --size 100 --chunk 50", "seeds --quick --repeat 1"}) {
    int rc = 0;
    std::string err = run(args, &rc, to_full);
    EXPECT_EQ(rc, 2) << args << ": " << err;
    EXPECT_NE(err.find("kiln: cannot write to standard output: No space left on device"),
              std::string::npos)
        << args << ": " << err;
  }
  int rc = 0;
  std::string out = run("run random-sum --size 100 --chunk 50 --emit-dot /dev/full", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cannot write the DOT file '/dev/full'"), std::string::npos) << out;
  out = run("run random-sum --size 100 --chunk 50 --trace /dev/full", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cannot write the trace file '/dev/full'"), std::string::npos) << out;
  std::string trace = kt::tmpdir() + "/full.json";
  out = run("run random-sum --size 100 --chunk 50 --trace " + trace, &rc);
  ASSERT_EQ(rc, 0) << out;
  out = run("report " + trace + " -o /dev/full", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("kiln report: cannot write '/dev/full'"), std::string::npos) << out;
}

TEST(Cli, SeedsQuickRunsEveryWorkloadAtATwentiethOfItsSize) {
  int rc = 0;
  std::string out = run("seeds --quick --repeat 1", &rc);
  ASSERT_EQ(rc, 0) << out;
  std::map<std::string, std::vector<std::string>> rows;  // "name fused" -> N, C
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string name, n, c, fused;
    if (f >> name >> n >> c >> fused && (fused == "yes" || fused == "no"))
      rows[name + " " + fused] = {n, c};
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(rows["random-sum yes"], (V{"1000", "100"})) << out;
  EXPECT_EQ(rows["random-sum no"], (V{"500", "100"})) << out;
  EXPECT_EQ(rows["trig-identity yes"], (V{"500", "100"})) << out;
  EXPECT_EQ(rows["diamond no"], (V{"250", "100"})) << out;
  EXPECT_EQ(rows["logistic-gd yes"], (V{"50000", "5000"})) << out;
  EXPECT_EQ(rows["matmul yes"], (V{"200", "50"})) << out;
  EXPECT_EQ(rows["svd yes"], (V{"500", "250"})) << out;
  EXPECT_EQ(rows["glm yes"], (V{"50000", "5000"})) << out;
  EXPECT_EQ(rows.size(), 14u) << out;
  EXPECT_NE(out.find("fused-graph summary of each workload:"), std::string::npos);
}

TEST(Cli, MatmulWorkloadReportsGflopsAndTheSameProductOnEveryDevice) {
  nlohmann::json cpu = nlohmann::json::parse(run("run matmul --size 300 --chunk 70 --json"));
  nlohmann::json in =
      nlohmann::json::parse(run("run matmul --size 300 --chunk 70 --json --device interp"));
  nlohmann::json res =
      nlohmann::json::parse(run("run matmul --size 300 --chunk 70 --json --resident"));
  EXPECT_GT(cpu["gflops"].get<double>(), 0) << cpu;
  // The same BLAS calls; the sums of the product's elements within rounding.
  EXPECT_NEAR(cpu["result"].get<double>(), in["result"].get<double>(),
              1e-12 * std::abs(cpu["result"].get<double>()));
  EXPECT_EQ(cpu["result"].get<double>(), res["result"].get<double>());
  EXPECT_TRUE(std::isfinite(cpu["result"].get<double>()));
}

TEST(Cli, ColsIsForMatrixWorkloads) {
  int rc = 0;
  std::string out = run("run diamond --size 100 --cols 5", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--cols is for the matrix workloads"), std::string::npos) << out;
  nlohmann::json j = nlohmann::json::parse(run("run svd --rows 300 --cols 20 --chunk 70 --json"));
  EXPECT_EQ(j["cols"].get<int64_t>(), 20);
  EXPECT_LT(j["error"].get<double>(), 1e-13) << j;
  EXPECT_GT(j["result"].get<double>(), j["s4"].get<double>()) << j;
}

TEST(Cli, GlmWorkloadFitsEachFamilyWithTheChosenSolver) {
  // Every family converges; the smooth solvers reach the same loss (the same optimum).
  for (const char* family : {"logistic", "normal", "poisson"}) {
    std::string common =
        std::string("run glm --rows 20000 --chunk 4000 --cols 8 --json --family ") + family;
    nlohmann::json nt = nlohmann::json::parse(run(common + " --solver newton"));
    nlohmann::json lb = nlohmann::json::parse(run(common));  // lbfgs, the default
    EXPECT_EQ(nt["family"], family);
    EXPECT_EQ(nt["solver"], "newton");
    EXPECT_EQ(lb["solver"], "lbfgs");
    EXPECT_EQ(nt["converged"].get<double>(), 1.0) << nt;
    EXPECT_EQ(lb["converged"].get<double>(), 1.0) << lb;
    EXPECT_NEAR(lb["result"].get<double>(), nt["result"].get<double>(),
                1e-6 * std::abs(nt["result"].get<double>()))
        << family;
    EXPECT_GT(nt["computes"].get<int64_t>(), nt["iterations"].get<int64_t>()) << nt;
    EXPECT_GT(nt["tasks"].get<int64_t>(), nt["computes"].get<int64_t>()) << nt;
  }
  nlohmann::json l1 = nlohmann::json::parse(
      run("run glm --rows 20000 --chunk 4000 --cols 8 --json --solver proximal_grad --penalty l1"));
  EXPECT_EQ(l1["penalty"], "l1");
  EXPECT_GT(l1["iterations"].get<double>(), 1.0) << l1;
  int rc = 0;
  std::string out = run("run glm --solver sgd", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("sgd"), std::string::npos) << out;
  out = run("run glm --rows 1000 --chunk 500 --cols 4 --solver newton --penalty l1", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("not differentiable"), std::string::npos) << out;
  // --input: a problem from .npy files, fitted to scikit-learn's optimum (the same loss).
  kiln::NDArray x = kt::random_array(kiln::DType::Float64, {3000, 4}, 91, -1, 1);
  auto made =
      kt::numpy({{"x", x}}, {"(lambda r: (x @ [1.0, -2.0, 0.5, 0.0] + "
                             "r.standard_normal(3000) > 0) * 1.0)(np.random.default_rng(5))",
                             "0"});
  std::string dir = kt::tmpdir() + "/glm_input";
  std::filesystem::create_directories(dir);
  x.save_npy(dir + "/X.npy");
  made[0].save_npy(dir + "/y.npy");
  nlohmann::json fit = nlohmann::json::parse(
      run("run glm --input " + dir + " --chunk 700 --solver newton --tol 1e-10 --json"));
  auto sk = kt::numpy(
      {{"x", x}, {"y", made[0]}},
      {"(lambda b: (lambda xb: np.sum(np.logaddexp(0, xb)) - y @ xb)(x @ b))(__import__("
       "'sklearn.linear_model').linear_model.LogisticRegression(C=np.inf, fit_intercept=False, "
       "tol=1e-12, max_iter=10000).fit(x, y).coef_.ravel())"});
  EXPECT_NEAR(fit["result"].get<double>(), sk[0].item<double>(), 1e-9 * sk[0].item<double>())
      << fit;
  EXPECT_EQ(fit["input"], dir);
  EXPECT_EQ(fit["size"].get<int64_t>(), 3000);  // X.npy's shape
  EXPECT_EQ(fit["cols"].get<int64_t>(), 4);
  out = run("run glm --input " + dir + " --rows 10", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("come from --input's X.npy"), std::string::npos) << out;
  out = run("run diamond --size 100 --family poisson", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("are for the glm workload"), std::string::npos) << out;
}

TEST(Cli, UnfusedGivesTheSameResult) {
  std::string a = run("run diamond --size 300 --chunk 100 --json");
  std::string b = run("run diamond --size 300 --chunk 100 --json --no-fuse");
  auto result = [](const std::string& s) {
    size_t p = s.find("\"result\":");
    return std::stod(s.substr(p + 9));
  };
  EXPECT_NEAR(result(a), result(b), 1e-9 * std::abs(result(a)));
  EXPECT_NE(b.find("\"fused\":false"), std::string::npos);
}

TEST(Cli, TheInterpreterDeviceGivesTheCompiledKernelsResults) {
  // Random values and element-wise ops bit for bit; the float sums within rounding.
  for (const char* w : {"random-sum --size 700 --chunk 300", "diamond --size 500 --chunk 200",
                        "trig-identity --size 400 --chunk 150"}) {
    nlohmann::json cpu =
        nlohmann::json::parse(run(std::string("run ") + w + " --json --device cpu"));
    nlohmann::json in =
        nlohmann::json::parse(run(std::string("run ") + w + " --json --device interp"));
    EXPECT_EQ(cpu["device"], "cpu") << w;
    EXPECT_EQ(in["device"], "interp") << w;
    EXPECT_EQ(in["compile_target"].get<std::string>().rfind("interpreter, ", 0), 0u) << in;
    double a = cpu["result"].get<double>(), b = in["result"].get<double>();
    if (std::string(w).rfind("trig", 0) == 0)
      EXPECT_EQ(a, b) << w;  // a count of exact equalities: the same functions, the same bits
    else
      EXPECT_NEAR(a, b, 1e-12 * std::abs(a)) << w;
    EXPECT_EQ(cpu["tasks"], in["tasks"]) << w;
  }
  int rc = 0;
  std::string out = run("run diamond --size 100 --device gpu", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown device 'gpu' (devices: cpu, interp, cuda-emu, cuda)"),
            std::string::npos)
      << out;
  out = kt::shell("env KILN_DEVICE=tpu " + kt::kiln_cli() + " run diamond --size 100 2>&1", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("KILN_DEVICE: unknown device 'tpu'"), std::string::npos) << out;
}

TEST(Cli, ResidentInputGivesTheSameResult) {
  // The same seed and stream: x's values are the same whether the kernel generates them or
  // reads them from the buffer computed before the timed region.
  for (const char* w : {"random-sum", "trig-identity"}) {
    std::string args = std::string("run ") + w + " --size 200 --chunk 50 --json";
    nlohmann::json gen = nlohmann::json::parse(run(args, nullptr, "2>/dev/null"));
    nlohmann::json res = nlohmann::json::parse(run(args + " --resident", nullptr, "2>/dev/null"));
    EXPECT_EQ(gen["resident"], false) << gen;
    EXPECT_EQ(res["resident"], true) << res;
    EXPECT_DOUBLE_EQ(res["result"].get<double>(), gen["result"].get<double>()) << w;
    if (gen.contains("count")) {
      EXPECT_EQ(res["count"], gen["count"]) << w;
    }
  }
  // (x + 1)[::2, ::2].sum() of 100 x 100 draws of N(10, 1): 110000, standard deviation 100.
  nlohmann::json j = nlohmann::json::parse(
      run("run random-sum --resident --size 200 --chunk 50 --json", nullptr, "2>/dev/null"));
  EXPECT_NEAR(j["result"].get<double>(), 110000.0, 500.0) << j;
}

TEST(Cli, RngCurandMakesXWithCuRand) {
  // --rng curand: x from cuRAND's generator (another sample than Kiln's engine), the same on the
  // CPU and on cuda-emu, and --resident reads the same values; refused for a solver workload.
  std::string why;
  if (!kiln::library::curand_available(&why)) GTEST_SKIP() << "no cuRAND: " << why;
  std::string args = "run random-sum --size 200 --chunk 50 --json --rng curand";
  nlohmann::json cpu = nlohmann::json::parse(run(args, nullptr, "2>/dev/null"));
  nlohmann::json emu =
      nlohmann::json::parse(run(args + " --device cuda-emu", nullptr, "2>/dev/null"));
  nlohmann::json res = nlohmann::json::parse(run(args + " --resident", nullptr, "2>/dev/null"));
  nlohmann::json kiln = nlohmann::json::parse(
      run("run random-sum --size 200 --chunk 50 --json", nullptr, "2>/dev/null"));
  EXPECT_EQ(cpu["rng"], "curand") << cpu;
  EXPECT_EQ(kiln["rng"], "kiln") << kiln;
  EXPECT_NEAR(cpu["result"].get<double>(), 110000.0, 500.0) << cpu;
  EXPECT_NE(cpu["result"].get<double>(), kiln["result"].get<double>());
  EXPECT_DOUBLE_EQ(emu["result"].get<double>(), cpu["result"].get<double>()) << emu;
  EXPECT_DOUBLE_EQ(res["result"].get<double>(), cpu["result"].get<double>()) << res;
  int rc = 0;
  std::string out = run("run svd --rng curand --size 400 --cols 20 --chunk 200", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--rng is for workloads that generate x"), std::string::npos) << out;
  rc = 0;
  out = run("run diamond --rng philox", &rc);
  EXPECT_NE(rc, 0) << out;
}

TEST(Cli, MathChoosesTheVectorFunctions) {
  // --math kiln: Kiln's sin and cos give the same bits in compiled kernels, the interpreter and
  // cuda-emu's printed CUDA, so trig-identity counts the same exact identities on each; --math
  // libmvec: glibc's vector functions, which count otherwise. Other names are refused.
  auto json = [](const std::string& extra) {
    return nlohmann::json::parse(
        run("run trig-identity --size 600 --chunk 200 --json " + extra, nullptr, "2>/dev/null"));
  };
  nlohmann::json cpu = json("--math kiln"), interp = json("--math kiln --device interp"),
                 emu = json("--math kiln --device cuda-emu"), glibc = json("--math libmvec"),
                 precise = json("--precise-math");
  EXPECT_EQ(cpu["math"], "kiln") << cpu;
  EXPECT_EQ(glibc["math"], "libmvec") << glibc;
  EXPECT_EQ(precise["math"], "precise") << precise;
  EXPECT_GT(cpu["count"].get<double>(), 0) << cpu;
  EXPECT_EQ(interp["count"], cpu["count"]) << interp;
  EXPECT_EQ(emu["count"], cpu["count"]) << emu;
  EXPECT_NE(glibc["count"], cpu["count"]) << glibc;
  int rc = 0;
  std::string out = run("run diamond --math glibc", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--math: glibc not in {kiln,libmvec}"), std::string::npos) << out;
}

TEST(Cli, KernelsTakingSinAndCosOfOneValueCallTheJointVariant) {
  // Kiln's math: the vectorized loop of trig-identity's kernel calls the joint sin-and-cos variant
  // once per vector instead of the two (the same bits:
  // KilnMath.JointSinCosGivesTheBitsOfSinAndCos). libmvec's math: its two functions (its vector
  // sincos is slower and gives other bits).
  auto optimized_ir = [](const std::string& math) {
    return kt::shell("env KILN_DEBUG=5 KILN_CACHE_DIR= KILN_TARGET_CPU= " + kt::kiln_cli() +
                         " run trig-identity --size 256 --chunk 128 --device cpu --math " + math +
                         " 2>&1",
                     nullptr);
  };
  std::string kiln = optimized_ir("kiln"), glibc = optimized_ir("libmvec");
  EXPECT_NE(kiln.find("call void @_ZGV"), std::string::npos) << kiln.substr(0, 2000);
  EXPECT_NE(kiln.find("v_kiln_sincos(<"), std::string::npos);
  EXPECT_EQ(glibc.find("sincos"), std::string::npos);
  EXPECT_NE(glibc.find("v_sin(<"), std::string::npos);
  EXPECT_NE(glibc.find("v_cos(<"), std::string::npos);
}

TEST(Cli, ResidentIsRefusedForTheSolver) {
  int rc = 0;
  std::string out = run("run logistic-gd --resident --size 1000 --chunk 500", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("'logistic-gd' makes its data before its timed solver already"),
            std::string::npos)
      << out;
  EXPECT_NE(run("run --help").find("--resident"), std::string::npos);
}

TEST(Cli, ListAndUnknownWorkload) {
  std::string out = run("list");
  for (const char* w : {"random-sum", "trig-identity", "diamond"})
    EXPECT_NE(out.find(w), std::string::npos);
  int rc = 0;
  out = run("run nosuch", &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("unknown workload 'nosuch'"), std::string::npos);
}

TEST(Cli, EmitIrAndDot) {
  std::string dot = kt::tmpdir() + "/g.dot";
  std::string out = run("run trig-identity --size 100 --chunk 50 --emit-ir --emit-dot " + dot);
  EXPECT_NE(out.find("; IR after push_slices"), std::string::npos);
  EXPECT_NE(out.find("fusion boundaries"), std::string::npos);
  std::ifstream f(dot);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("digraph"), std::string::npos);
  EXPECT_NE(text.find("kernel 0"), std::string::npos);
  // Unfused, the element-wise intermediates are stored per block; the result is one buffer.
  // push_slices still runs: x + 1 is made over the (50, 50) elements the slice keeps.
  std::string unfused = run("run random-sum --size 100 --chunk 50 --no-fuse --emit-ir");
  EXPECT_NE(unfused.find("Binary[add] float64 (50, 50): per block, each freed at its last "
                         "reader"),
            std::string::npos)
      << unfused;
  EXPECT_EQ(unfused.find("(100, 100): per block"), std::string::npos) << unfused;
  // --no-push-slices leaves the slice where it was built: x + 1 over all (100, 100) elements.
  std::string unpushed =
      run("run random-sum --size 100 --chunk 50 --no-fuse --no-push-slices --emit-ir --json");
  EXPECT_NE(unpushed.find("Binary[add] float64 (100, 100): per block"), std::string::npos)
      << unpushed;
  EXPECT_EQ(unpushed.find("; IR after push_slices"), std::string::npos) << unpushed;
  EXPECT_NE(unpushed.find("\"push_slices\":false"), std::string::npos) << unpushed;
  EXPECT_NE(unfused.find("Reduce[sum axes=0,1] float64 (): one buffer (an output)"),
            std::string::npos);
}

TEST(Cli, TraceIsChromeFormatAndReportDrawsTheTaskStream) {
  std::string trace = kt::tmpdir() + "/rs.json", svg = kt::tmpdir() + "/rs.svg";
  std::string out =
      run("run random-sum --size 4000 --chunk 500 --threads 2 --json --trace " + trace);
  ASSERT_NE(out.find("\"tasks\":"), std::string::npos) << out;
  int64_t tasks = std::stoll(out.substr(out.find("\"tasks\":") + 8));
  std::ifstream f(trace);
  nlohmann::json j = nlohmann::json::parse(f);  // throws (fails the test) if not JSON
  ASSERT_TRUE(j["traceEvents"].is_array());
  int64_t task_events = 0, compile_events = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") continue;
    ASSERT_EQ(e["ph"], "X");
    for (const char* key : {"name", "cat", "ts", "dur", "pid", "tid", "args"})
      ASSERT_TRUE(e.contains(key)) << key;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["cat"] == "compile")
      ++compile_events;
    else
      ++task_events;
  }
  EXPECT_EQ(task_events, tasks);  // one event per executed task
  EXPECT_GE(compile_events, 1);
  int rc = 0;
  out = run("report " + trace + " -o " + svg, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream s(svg);
  std::string text((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  size_t bars = 0;
  for (size_t p = text.find("<rect x="); p != std::string::npos; p = text.find("<rect x=", p + 1))
    ++bars;
  EXPECT_GT(bars, static_cast<size_t>(tasks));  // a bar per task, plus rows and legend
  // The summary line reports how busy the workers were. How busy depends on what else the
  // machine runs, so only the range here; the arithmetic is checked on hand-made traces
  // (Cli.ReportSummarizesAValidTrace, Cli.ReportCountsOverlappingTasksOnceTowardsBusyTime).
  size_t b = out.find("workers busy ");
  ASSERT_NE(b, std::string::npos) << out;
  double busy = std::stod(out.substr(b + 13));
  EXPECT_GT(busy, 0.0) << out;
  EXPECT_LE(busy, 100.0) << out;
}

TEST(Cli, ReportRejectsMalformedTraces) {
  std::string bad = kt::tmpdir() + "/bad.json";
  std::ofstream(bad) << "{\"traceEvents\": 3}";
  int rc = 0;
  std::string out = run("report " + bad, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("traceEvents"), std::string::npos) << out;
}

namespace {
// A trace of two task events on workers 0 and 1 (0-10 us and 5-15 us); the second event's
// fields after "ph" are `fields` (traceEvents[2]).
std::string trace_with(const std::string& fields) {
  std::string path = kt::tmpdir() + "/two.json";
  std::ofstream(path) << R"({"traceEvents":[
{"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"worker 0"}},
{"name":"kernel 0","cat":"kernel","ph":"X","pid":1,"tid":0,"ts":0,"dur":10,"args":{"block":0}},
{"name":"kernel 0","cat":"kernel","ph":"X","pid":1,)"
                      << fields << "}]}";
  return path;
}
}  // namespace

TEST(Cli, ReportSummarizesAValidTrace) {
  int rc = 0;
  std::string svg = kt::tmpdir() + "/two.svg";
  std::string out = run(
      "report " + trace_with(R"("tid":1,"ts":5,"dur":10,"args":{"block":1})") + " -o " + svg, &rc);
  EXPECT_EQ(rc, 0) << out;
  // 20 us of tasks on 2 workers over 15 us.
  EXPECT_NE(out.find("2 tasks on 2 workers over 0.015 ms, workers busy 67%"), std::string::npos)
      << out;
}

TEST(Cli, ReportMapsThreadIdsToLanes) {
  int rc = 0;
  std::string svg = kt::tmpdir() + "/lanes.svg";
  std::string out =
      run("report " + trace_with(R"("tid":2000000000,"ts":5,"dur":10)") + " -o " + svg, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("2 tasks on 2 workers"), std::string::npos) << out;
  std::ifstream f(svg);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(">worker 2000000000<"), std::string::npos);
  EXPECT_NE(text.find(">worker 0<"), std::string::npos);
  EXPECT_LT(text.size(), 10000u);  // two lanes, not two billion rows
}

TEST(Cli, ReportCountsOverlappingTasksOnceTowardsBusyTime) {
  int rc = 0;
  // Worker 0 runs 0-10 us and (overlapping) 5-15 us: busy 15 of 15 us, not 133%.
  std::string out = run("report " + trace_with(R"("tid":0,"ts":5,"dur":10)"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("2 tasks on 1 workers over 0.015 ms, workers busy 100%"), std::string::npos)
      << out;
}

TEST(Cli, ReportNamesTheBadFieldAndEvent) {
  const char* cases[][2] = {
      {R"("tid":1,"ts":"x","dur":10)",
       R"(traceEvents[2].ts: expected microseconds, a number in [0, 1e15], got "x")"},
      {R"("tid":1,"ts":5,"dur":-5)",
       "traceEvents[2].dur: expected microseconds, a number in [0, 1e15], got -5"},
      {R"("tid":1,"ts":5,"dur":1e300)", "traceEvents[2].dur: expected microseconds"},
      {R"("tid":1,"ts":-1,"dur":1)", "traceEvents[2].ts: expected microseconds"},
      {R"("tid":1,"dur":1)",
       "traceEvents[2].ts: expected microseconds, a number in [0, 1e15], got nothing"},
      {R"("tid":"a","ts":5,"dur":1)",
       R"(traceEvents[2].tid: expected an integer (64-bit), got "a")"},
      {R"("tid":1.5,"ts":5,"dur":1)", "traceEvents[2].tid: expected an integer (64-bit), got 1.5"},
      {R"("tid":18446744073709551615,"ts":5,"dur":1)", "traceEvents[2].tid: expected an integer"},
      {R"("tid":1,"ts":5,"dur":1,"name":3)", "traceEvents[2].name: expected a string, got 3"},
      {R"("tid":1,"ts":5,"dur":1,"cat":null)", "traceEvents[2].cat: expected a string, got null"},
      {R"("tid":1,"ts":5,"dur":1,"args":[1])", "traceEvents[2].args: expected an object, got [1]"},
      {R"("tid":1,"ts":5,"dur":1,"args":{"block":"b"})",
       R"(traceEvents[2].args.block: expected an integer (64-bit), got "b")"},
  };
  for (const auto& c : cases) {
    int rc = 0;
    std::string out = run("report " + trace_with(c[0]), &rc);
    EXPECT_EQ(rc, 2) << c[0] << ": " << out;
    EXPECT_NE(out.find(std::string("kiln: kiln report: ") + c[1]), std::string::npos)
        << c[0] << ": " << out;
  }
  std::string bad = kt::tmpdir() + "/notobject.json";
  std::ofstream(bad) << R"({"traceEvents":[{"ph":"X","ts":0,"dur":1},3]})";
  int rc = 0;
  std::string out = run("report " + bad, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("traceEvents[1]: expected an object, got 3"), std::string::npos) << out;
  std::ofstream(bad) << R"({"traceEvents":[{"ph":3}]})";
  out = run("report " + bad, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("traceEvents[0].ph: expected a string, got 3"), std::string::npos) << out;
  std::ofstream(bad) << R"({"traceEvents":[{"ph":"X","cat":"compile","ts":0,"dur":1}]})";
  out = run("report " + bad, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("the trace has no task events"), std::string::npos) << out;
}

TEST(Cli, ResidentOnADeviceKeepsXInItsMemory) {
  // --resident on cuda-emu: x is made once into device memory, and the timed computes read it
  // there (only the partials' starting values go to the device), with the plain run's result.
  auto json = [](const std::string& extra) {
    return nlohmann::json::parse(
        run("run diamond --size 400 --chunk 200 --device cuda-emu --json --quiet " + extra));
  };
  nlohmann::json resident = json("--resident --repeat 2"), plain = json("");
  EXPECT_EQ(resident["result"], plain["result"]) << resident << plain;
  EXPECT_LT(resident["to_device_bytes"].get<int64_t>(), 1000) << resident;
  EXPECT_TRUE(resident["host_fallbacks"].is_array() && resident["host_fallbacks"].empty())
      << resident;
}

TEST(Cli, CudaProfileTimesEachKernelOnTheEmulator) {
  // KILN_CUDA_PROFILE=1 on cuda-emu: each emulated launch timed by the host's clock, per run.
  // diamond 400 / 200: 4 blocks, one fused kernel, one launch each.
  nlohmann::json j = nlohmann::json::parse(
      kt::shell("env KILN_CUDA_PROFILE=1 " + kt::kiln_cli() +
                " run diamond --size 400 --chunk 200 --device cuda-emu --json --quiet --repeat 2"));
  ASSERT_TRUE(j.contains("profile")) << j;
  const nlohmann::json& p = j["profile"];
  EXPECT_EQ(p["launches"].get<double>(), 4.0) << j;
  EXPECT_GT(p["kernel_seconds"].get<double>(), 0.0) << j;
  EXPECT_LE(p["kernel_seconds"].get<double>(), j["seconds"].get<double>() * 1.5) << j;
  ASSERT_EQ(p["kernels"].size(), 1u) << j;
  EXPECT_NE(p["kernels"][0]["kernel"].get<std::string>().find("flat-tree"), std::string::npos) << j;
  // Bytes moved: the random leaf reads nothing; each block writes its one partial (8 bytes).
  EXPECT_EQ(p["kernels"][0]["bytes"].get<double>(), 4 * 8.0) << j;
  EXPECT_EQ(p["kernel_bytes"].get<double>(), 4 * 8.0) << j;
  // The host's phases, once per run each; the run's phases within compute()'s.
  std::map<std::string, nlohmann::json> host;
  for (const auto& h : p["host"]) host[h["phase"].get<std::string>()] = h;
  for (const char* phase :
       {"compute: plan", "compute: run", "run: setup", "run: tasks", "run: results"}) {
    ASSERT_TRUE(host.count(phase)) << phase << " " << j;
    EXPECT_EQ(host[phase]["calls"].get<double>(), 1.0) << phase << " " << j;
    EXPECT_GE(host[phase]["seconds"].get<double>(), 0.0) << phase << " " << j;
  }
  EXPECT_LE(host["run: tasks"]["seconds"].get<double>(),
            host["compute: run"]["seconds"].get<double>())
      << j;
  EXPECT_FALSE(nlohmann::json::parse(run("run diamond --size 400 --chunk 200 --device cuda-emu "
                                         "--json --quiet"))
                   .contains("profile"));
}
