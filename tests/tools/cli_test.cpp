// The kiln command: --json fields and results, list, errors.
#include <array>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

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
  // Unfused, the element-wise intermediates are stored per block; the result is one buffer.
  std::string unfused = run("run random-sum --size 100 --chunk 50 --no-fuse --emit-ir");
  EXPECT_NE(unfused.find("Binary[add] float64 (100, 100): per block, each freed at its last "
                         "reader"),
            std::string::npos)
      << unfused;
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
  // The summary line reports how busy the workers were: random-sum keeps both busy.
  size_t b = out.find("workers busy ");
  ASSERT_NE(b, std::string::npos) << out;
  EXPECT_GT(std::stod(out.substr(b + 13)), 50.0) << out;
}

TEST(Cli, ReportRejectsMalformedTraces) {
  std::string bad = kt::tmpdir() + "/bad.json";
  std::ofstream(bad) << "{\"traceEvents\": 3}";
  int rc = 0;
  std::string out = run("report " + bad, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("traceEvents"), std::string::npos) << out;
}
