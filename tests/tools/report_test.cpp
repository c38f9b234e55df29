// kiln report's trace reader on hostile input (issue 30): deeply nested, huge or non-JSON traces
// and paths that are not regular files give short kiln::Errors naming the path and the reason; the
// fuzzer's corpus (tests/fuzzers/corpus/trace) replays without a crash.
#include "tools/report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "oracle.hpp"
#include "shell.hpp"
#include "support/error.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::report::read_trace;
using kiln::report::render_svg;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "\"" << std::string(text).substr(0, 2000) << "\" lacks \"" << (part) << "\""

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string svg_error(const std::string& text) {
  return kt::error_of([&] { render_svg(text, nullptr); });
}

const std::string kTask =
    R"({"name":"kernel 0","cat":"kernel","ph":"X","tid":0,"ts":0,"dur":10,"args":{"block":0}})";

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        kt::tmpdir() + "/report_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// Finding 7: a trace nesting arrays ~100k deep overflowed the stack dumping the value into the
// error message.
TEST_F(Report, DeepNestingIsRefusedNotDumped) {
  const int n = 100000;
  for (const std::string& text :
       {R"({"traceEvents":[)" + std::string(n, '[') + std::string(n, ']') + "]}",
        R"({"traceEvents":[{"ph":"X","tid":0,"ts":0,"dur":1,"args":)" + std::string(n, '[') +
            std::string(n, ']') + "}]}",
        [&] {  // objects, never closed
          std::string s;
          for (int i = 0; i < n; ++i) s += R"({"a":)";
          return s;
        }(),
        R"({"traceEvents":[)" + std::string(n, '[') /* unterminated */}) {
    const std::string msg = svg_error(text);
    EXPECT_CONTAINS(msg, "kiln report: the trace nests arrays and objects more than 64 deep");
    EXPECT_LT(msg.size(), 200u);
  }
  // Below the cap, a bad value is quoted in a short excerpt only.
  const std::string msg =
      svg_error(R"({"traceEvents":[)" + std::string(60, '[') + std::string(60, ']') + "]}");
  EXPECT_CONTAINS(msg, "kiln report: traceEvents[0]: expected an object, got [[[[");
  EXPECT_LT(msg.size(), 120u);
}

TEST_F(Report, ErrorsQuoteShortExcerptsOfHugeValues) {
  const std::string big(10 << 20, 'a');
  std::string msg =
      svg_error(R"({"traceEvents":[{"ph":"X","ts":0,"dur":1,"name":[")" + big + R"("]}]})");
  EXPECT_CONTAINS(msg, R"(traceEvents[0].name: expected a string, got ["aaaa)");
  EXPECT_LT(msg.size(), 200u);
  msg = svg_error(R"({"traceEvents":[{"ph":"X","ts":0,"dur":1,"tid":{")" + big + R"(":1}}]})");
  EXPECT_CONTAINS(msg, "traceEvents[0].tid: expected an integer (64-bit), got {\"aaa");
  EXPECT_LT(msg.size(), 200u);
  // The JSON parser's own message quotes the token it stopped in: capped too.
  msg = svg_error(R"({"traceEvents":")" + big + "\x01");
  EXPECT_CONTAINS(msg, "kiln report: the trace is not valid JSON: ");
  EXPECT_LT(msg.size(), 500u);
  // Invalid UTF-8 in a quoted value does not make the message itself throw.
  msg = svg_error(std::string(R"({"traceEvents":[{"ph":"X","ts":0,"dur":1,"cat":7,"name":")") +
                  "\xff\xfe" + R"("}]})");
  EXPECT_CONTAINS(msg, "kiln report: the trace is not valid JSON");
}

TEST_F(Report, ControlCharactersInNamesDoNotBreakTheSvg) {
  const std::string svg = render_svg(
      R"({"traceEvents":[{"name":"a<b>&\u0001\u001f","ph":"X","tid":0,"ts":0,"dur":10}]})",
      nullptr);
  EXPECT_CONTAINS(svg, "a&lt;b&gt;&amp;\xef\xbf\xbd\xef\xbf\xbd");
  for (char c : svg) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << int(c);
}

// Findings 13 and 19: read_trace refuses what is not a regular file by name, before reading or
// blocking, and caps the size.
TEST_F(Report, ReadTraceRefusesDirectoriesAndDevices) {
  std::string msg = kt::error_of([&] { read_trace(dir_); });
  EXPECT_CONTAINS(msg, "kiln report: cannot read the trace '" + dir_ + "': it is a directory");
  msg = kt::error_of([] { read_trace("/dev/zero"); });
  EXPECT_CONTAINS(msg, "kiln report: cannot read the trace '/dev/zero': not a regular file");
  const std::string missing = path("missing.json");
  msg = kt::error_of([&] { read_trace(missing); });
  EXPECT_CONTAINS(msg, "'" + missing + "': No such file or directory");
}

TEST_F(Report, ReadTraceRefusesAFifoWithoutBlocking) {
  const std::string p = path("pipe.json");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << std::strerror(errno);
  auto result =
      std::async(std::launch::async, [&] { return kt::error_of([&] { read_trace(p); }); });
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);  // a writer unblocks the reader
    if (fd >= 0) ::close(fd);
    result.wait();
    FAIL() << "read_trace blocked on a FIFO";
  }
  EXPECT_CONTAINS(result.get(), "'" + p + "': not a regular file (a FIFO, socket or device)");
}

TEST_F(Report, ReadTraceCapsTheSize) {
  const std::string p = path("huge.json");
  { std::ofstream(p).put('{'); }
  fs::resize_file(p, kiln::report::kMaxTraceBytes + 1);  // sparse: no disk used
  const std::string msg = kt::error_of([&] { read_trace(p); });
  EXPECT_CONTAINS(msg, "'" + p +
                           "': the file is 1073741825 bytes, larger than the 1073741824 bytes "
                           "this reader accepts");
}

TEST_F(Report, ReadTraceReadsFilesWholeIncludingProcFiles) {
  const std::string p = path("t.json");
  const std::string text = R"({"traceEvents":[)" + kTask + "]}\n";
  write_file(p, text);
  EXPECT_EQ(read_trace(p), text);
  write_file(p, "");
  EXPECT_EQ(read_trace(p), "");
  // /proc files are regular but report size 0: read to the end anyway.
  EXPECT_CONTAINS(read_trace("/proc/self/status"), "Name:");
  if (::geteuid() != 0) {  // root reads anything
    write_file(p, text);
    ASSERT_EQ(::chmod(p.c_str(), 0), 0);
    EXPECT_CONTAINS(kt::error_of([&] { read_trace(p); }), "'" + p + "': Permission denied");
  }
}

// The findings end to end, through `kiln report` (cmd_report reads with read_trace): each is exit
// status 2 with the reason, never a crash, a hang or an unbounded read.
TEST_F(Report, CommandRefusesHostileTraces) {
  auto report = [](const std::string& trace, int* rc) {
    return kt::shell(kt::kiln_cli() + " report " + trace + " -o /dev/null 2>&1", rc);
  };
  int rc = 0;
  std::string out = report(dir_, &rc);  // finding 19: not "not valid JSON"
  EXPECT_EQ(rc, 2) << out;
  EXPECT_CONTAINS(out, "'" + dir_ + "': it is a directory");
  out = report("/dev/zero", &rc);  // finding 13: read 4.4 GB in 6 s
  EXPECT_EQ(rc, 2) << out;
  EXPECT_CONTAINS(out, "'/dev/zero': not a regular file");
  const std::string fifo = path("pipe.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  out = report(fifo, &rc);  // a hang would be timeout's status 124
  EXPECT_EQ(rc, 2) << out;
  EXPECT_CONTAINS(out, "not a regular file");
  const std::string deep = path("deep.json");  // finding 7: a stack overflow
  write_file(deep,
             R"({"traceEvents":[)" + std::string(100000, '[') + std::string(100000, ']') + "]}");
  out = report(deep, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_CONTAINS(out, "nests arrays and objects more than 64 deep");
  EXPECT_LT(out.size(), 300u);
}

// Replays the fuzzer's corpus: each input renders or is refused with a short kiln report error.
TEST_F(Report, FuzzCorpusReplays) {
  const fs::path corpus = fs::path(kt::source_dir()) / "tests/fuzzers/corpus/trace";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  int files = 0, rendered = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    SCOPED_TRACE(e.path().string());
    ++files;
    const std::string text = read_trace(e.path().string());
    try {
      kiln::report::Summary s;
      const std::string svg = render_svg(text, &s);
      ++rendered;
      EXPECT_EQ(svg.rfind("<svg", 0), 0u);
      EXPECT_GE(s.workers, 1);
      EXPECT_LE(s.busy_fraction, 1.0 + 1e-9);
    } catch (const kiln::Error& err) {
      EXPECT_EQ(std::string(err.what()).rfind("kiln report: ", 0), 0u) << err.what();
      EXPECT_LT(std::string(err.what()).size(), 1000u);
    }
  }
  EXPECT_GE(files, 5);
  EXPECT_GE(rendered, 2);
}

}  // namespace
