// The kiln command: --json fields and results, list, errors.
#include <array>
#include <cstdio>
#include <fstream>
#include <memory>

#include "oracle.hpp"

namespace {
std::string run(const std::string& args, int* rc = nullptr) {
  std::string cmd = std::string(KILN_CLI_PATH) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  int status = pclose(p.release());
  if (rc) *rc = WEXITSTATUS(status);
  return out;
}
}  // namespace

TEST(Cli, RunJsonHasTheDocumentedFields) {
  std::string out = run("run random-sum --size 400 --chunk 100 --json --repeat 2");
  for (const char* f : {"\"workload\":\"random-sum\"", "\"size\":400", "\"chunk\":100",
                        "\"threads\"", "\"fused\":true", "\"result\"", "\"seconds\"",
                        "\"compile_seconds\"", "\"tasks\":19", "\"kernels\":1", "\"peak_bytes\""})
    EXPECT_NE(out.find(f), std::string::npos) << f << " in " << out;
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
}
