// The kiln command under the findings of issue 30 ("nothing a user does can make Kiln lie"): the
// environment parsed strictly, --json saying what ran, outputs that would overwrite an input or
// each other refused, numbers that are not numbers refused, and CPUs that cannot run the code.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "oracle.hpp"
#include "shell.hpp"

namespace fs = std::filesystem;

namespace {

// Runs the kiln command after `env` assignments; stdout and stderr together.
std::string run_env(const std::string& env, const std::string& args, int* rc) {
  return kt::shell("env " + env + " " + kt::kiln_cli() + " " + args + " 2>&1", rc);
}

nlohmann::json json_of(const std::string& env, const std::string& args) {
  int rc = 0;
  std::string out =
      kt::shell("env " + env + " " + kt::kiln_cli() + " " + args + " --json 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0) << args << ": " << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << out;
  return j;
}

const char* kSmall = "run diamond --size 200 --chunk 100";

std::string fresh_dir(const std::string& name) {
  std::string d = kt::tmpdir() + "/" + name + "-" + std::to_string(::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(HostileCli, JsonReportsTheSwitchesTheEnvironmentSet) {
  nlohmann::json plain = json_of("", kSmall);
  EXPECT_EQ(plain["fused"], true);
  EXPECT_EQ(plain["kernels"], 1);
  nlohmann::json j = json_of("KILN_NO_FUSE=1", kSmall);
  EXPECT_EQ(j["fused"], false);
  EXPECT_EQ(j["row_fusion"], false);
  EXPECT_GT(j["kernels"].get<int>(), 1);  // it did run unfused
  // A float sum: unfused, its kernel reads memory (whose blocks may run as one row) where the
  // fused one generates its values, so the two may round apart (KERNEL_IR.md §8.6).
  EXPECT_NEAR(j["result"].get<double>(), plain["result"].get<double>(),
              1e-12 * std::abs(plain["result"].get<double>()));
  EXPECT_EQ(json_of("KILN_NO_FUSE=true", kSmall)["fused"], false);
  EXPECT_EQ(json_of("KILN_NO_FUSE=no", kSmall)["fused"], true);
  EXPECT_EQ(json_of("KILN_NO_PUSH_SLICES=yes", kSmall)["push_slices"], false);
  EXPECT_EQ(json_of("KILN_NO_ROW_FUSION=TRUE", kSmall)["row_fusion"], false);
  EXPECT_EQ(json_of("KILN_THREADS=1", kSmall)["threads"], 1);
  EXPECT_EQ(json_of("KILN_THREADS=1", std::string(kSmall) + " --threads 2")["threads"], 2);
  EXPECT_EQ(json_of("KILN_PRECISE_MATH=true", kSmall)["math"], "precise");
  EXPECT_EQ(json_of("KILN_NO_FUSE=", kSmall)["fused"], true);  // empty: unset
}

TEST(HostileCli, BadEnvironmentValuesAreErrorsNamingTheVariable) {
  const char* cases[][2] = {
      {"KILN_NO_FUSE=maybe", "KILN_NO_FUSE='maybe': expected a boolean"},
      {"KILN_PRECISE_MATH=2", "KILN_PRECISE_MATH='2': expected a boolean"},
      {"KILN_THREADS=abc", "KILN_THREADS='abc': expected an integer in [0, 256]"},
      {"KILN_THREADS=-3", "KILN_THREADS='-3': expected an integer in [0, 256]"},
      {"KILN_THREADS=1024", "KILN_THREADS='1024': expected an integer in [0, 256]"},
      {"KILN_DEVICES=99999999999999999999",
       "KILN_DEVICES='99999999999999999999': expected an "
       "integer in [0, 64]"},
      {"KILN_DEBUG=9", "KILN_DEBUG='9': expected an integer in [0, 5]"},
      {"KILN_MATH=fast", "KILN_MATH='fast': expected one of kiln, libmvec"},
      {"KILN_FAIL_ALLOC_ABOVE=1e9", "KILN_FAIL_ALLOC_ABOVE='1e9': expected an integer"}};
  for (const auto& c : cases) {
    int rc = 0;
    std::string out = run_env(c[0], kSmall, &rc);
    EXPECT_EQ(rc, 2) << c[0] << ": " << out;
    EXPECT_NE(out.find(std::string("kiln: ") + c[1]), std::string::npos) << c[0] << ": " << out;
    EXPECT_EQ(out.find("\"result\""), std::string::npos) << out;
  }
}

TEST(HostileCli, AnEmptyOrRelativeXdgCacheHomeIsIgnored) {
  std::string home = fresh_dir("xdg-home");
  for (const char* xdg : {"XDG_CACHE_HOME=", "XDG_CACHE_HOME=relative/dir"}) {
    fs::remove_all(home + "/.cache");
    int rc = 0;
    std::string out = kt::shell("env -C " + home + " -u KILN_CACHE_DIR KILN_DEVICE=cpu " + xdg +
                                    " HOME=" + home + " " + kt::kiln_cli() + " " + kSmall + " 2>&1",
                                &rc);
    ASSERT_EQ(rc, 0) << xdg << ": " << out;
    int entries = 0;
    for (const auto& e : fs::directory_iterator(home + "/.cache/kiln"))
      entries += e.path().extension() == ".o";
    EXPECT_EQ(entries, 1) << xdg;
    EXPECT_FALSE(fs::exists(home + "/relative")) << xdg;
  }
  fs::remove_all(home);
}

TEST(HostileCli, ToleranceMustBeAFinitePositiveNumber) {
  for (const char* tol : {"nan", "NaN", "inf", "-inf", "0", "-1e-5", "1e400", "abc"}) {
    int rc = 0;
    std::string out = run_env("", std::string("run glm --rows 100 --cols 3 --tol ") + tol, &rc);
    EXPECT_EQ(rc, 2) << tol << ": " << out;
    EXPECT_NE(
        out.find("--tol: expected a finite number greater than 0, got '" + std::string(tol) + "'"),
        std::string::npos)
        << tol << ": " << out;
    EXPECT_LT(out.size(), 200u) << "a one-line error, not the largest double's 309 digits: " << out;
  }
}

TEST(HostileCli, OutputsThatWouldOverwriteAnInputOrEachOtherAreRefused) {
  std::string dir = fresh_dir("overwrite");
  std::string trace = dir + "/t.json";
  int rc = 0;
  std::string out = run_env("", std::string(kSmall) + " --trace " + trace, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string before;
  {
    std::ifstream f(trace);
    before.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (const std::string& o :
       {trace, dir + "/./t.json", dir + "/../" + fs::path(dir).filename().string() + "/t.json"}) {
    out = run_env("", "report " + trace + " -o " + o, &rc);
    EXPECT_EQ(rc, 2) << o << ": " << out;
    EXPECT_NE(out.find("is the trace being read"), std::string::npos) << out;
  }
  std::ifstream f(trace);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()),
            before);
  out = run_env("", std::string(kSmall) + " --trace " + dir + "/same --emit-dot " + dir + "/same",
                &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--emit-dot and --trace name the same file"), std::string::npos) << out;
  for (const char* opt : {"--trace ''", "--emit-dot ''"}) {
    out = run_env("", std::string(kSmall) + " " + opt, &rc);
    EXPECT_EQ(rc, 2) << opt << ": " << out;
    EXPECT_NE(out.find("expected a file name"), std::string::npos) << opt << ": " << out;
  }
  fs::remove_all(dir);
}

TEST(HostileCli, WriteErrorsNameTheReason) {
  std::string long_name = kt::tmpdir() + "/" + std::string(300, 'x');
  int rc = 0;
  std::string out = run_env("", std::string(kSmall) + " --trace " + long_name, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cannot write the trace file '" + long_name + "': File name too long"),
            std::string::npos)
      << out;
  out = run_env("", std::string(kSmall) + " --emit-dot /nonexistent-dir/g.dot", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cannot write the DOT file '/nonexistent-dir/g.dot': No such file or "
                     "directory"),
            std::string::npos)
      << out;
}

TEST(HostileCli, JsonWithEmitIrKeepsStandardOutputJson) {
  int rc = 0;
  std::string out = kt::shell(kt::kiln_cli() + " " + kSmall + " --json --emit-ir 2>/dev/null", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_FALSE(nlohmann::json::parse(out, nullptr, false).is_discarded()) << out;
  std::string err = kt::shell(kt::kiln_cli() + " " + kSmall + " --json --emit-ir 2>&1 >/dev/null");
  EXPECT_NE(err.find("fused graph:"), std::string::npos) << err;
}

TEST(HostileCli, ThirtyTwoBitCpusAreRefusedNotAborted) {
  for (const char* cpu : {"i386", "i686", "pentium4", "yonah", "athlon-xp", "lakemont"}) {
    int rc = 0;
    std::string out =
        run_env(std::string("KILN_CACHE_DIR= KILN_DEVICE=cpu KILN_TARGET_CPU=") + cpu, kSmall, &rc);
    EXPECT_EQ(rc, 2) << cpu << ": " << out;
    EXPECT_NE(out.find(std::string("KILN_TARGET_CPU '") + cpu + "' is a 32-bit CPU"),
              std::string::npos)
        << out;
  }
}

TEST(HostileCli, ThreadsAboveTheWorkerLimitAreRefused) {
  int rc = 0;
  std::string out = run_env("", std::string(kSmall) + " --threads 1024", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--threads: expected an integer in [1, 256]"), std::string::npos) << out;
  out = run_env("", std::string(kSmall) + " --threads 256 --json", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("TBB Warning"), std::string::npos) << out;
}

TEST(HostileCli, ASingleWorkersTraceNamesItWorkerZero) {
  std::string dir = fresh_dir("one-worker");
  int rc = 0;
  std::string out =
      run_env("", std::string(kSmall) + " --threads 1 --trace " + dir + "/t.json", &rc);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream f(dir + "/t.json");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"name\":\"worker 0\""), std::string::npos) << text.substr(0, 300);
  EXPECT_EQ(text.find("worker 00"), std::string::npos);
  fs::remove_all(dir);
}

TEST(HostileCli, SvdReportsNoSingularValuesPastTheColumns) {
  nlohmann::json j = json_of("", "run svd --rows 40 --cols 2 --chunk 20");
  EXPECT_GT(j["result"].get<double>(), 0);  // s0
  EXPECT_GT(j["s1"].get<double>(), 0);
  for (const char* s : {"s2", "s3", "s4"}) EXPECT_TRUE(j[s].is_null()) << s << ": " << j;
}

TEST(HostileCli, ATwoDimensionalYNamesItsFile) {
  std::string dir = fresh_dir("glm-2d-y");
  std::vector<double> x(100 * 3, 0.5), y(100, 1.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 7) / 7;
  kiln::save_npy(dir + "/X.npy", kiln::from_buffer(x.data(), {100, 3}));
  kiln::save_npy(dir + "/y.npy", kiln::from_buffer(y.data(), {100, 1}));
  int rc = 0;
  std::string out = run_env("", "run glm --input " + dir, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("kiln: kiln run glm: '" + dir +
                     "/y.npy' has shape (100, 1); y must be 1-D, one label per row of X.npy"),
            std::string::npos)
      << out;
  fs::remove_all(dir);
}
