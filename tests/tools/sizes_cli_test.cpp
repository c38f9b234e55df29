// Checked sizes through the kiln command (issue 30): sizes that are documented as legal but
// cannot be run are refused up front, exit status 2 and one line `kiln: ...`, instead of crashing,
// allocating before any check, or running forever.
#include <string>

#include "oracle.hpp"
#include "shell.hpp"

namespace {

// Runs the kiln command (stderr and stdout together); `limit_kib`: under `ulimit -v` (KiB).
std::string run(const std::string& args, int* rc, long limit_kib = 0) {
  std::string cmd = kt::kiln_cli() + " " + args + " --quiet 2>&1";
  if (limit_kib > 0) cmd = "sh -c 'ulimit -v " + std::to_string(limit_kib) + " && " + cmd + "'";
  return kt::shell(cmd, rc);
}

// The output is exactly one line, "kiln: <what>...\n".
::testing::AssertionResult one_error_line(const std::string& out, const std::string& what) {
  if (out.rfind("kiln: " + what, 0) != 0 || out.find('\n') != out.size() - 1)
    return ::testing::AssertionFailure()
           << "expected one line 'kiln: " << what << "...', got '" << out << "'";
  return ::testing::AssertionSuccess();
}

}  // namespace

// Case 6: blocks of 1518500250^2 > 2^61 float64s wrapped their byte count to a few bytes and the
// kernel wrote past them (SIGSEGV in 0.3 s). Case 14: one block of ~1e18 elements ran forever.
TEST(SizesCli, AbsurdBlocksAreRefusedUpFront) {
  for (const char* n : {"1518500250", "2147483647"}) {
    for (const char* extra : {"", " --resident"}) {
      int rc = -1;
      std::string out =
          run(std::string("run random-sum --size ") + n + " --chunk " + n + extra, &rc);
      EXPECT_EQ(rc, 2) << n << extra << ": " << out;
      EXPECT_TRUE(one_error_line(out, std::string("random: chunks (") + n + ", " + n +
                                          ") of shape (" + n + ", " + n + ") make blocks of"))
          << extra;
      EXPECT_NE(out.find("more than one block may hold (2^34 = 17179869184)"), std::string::npos)
          << out;
      EXPECT_NE(out.find("use smaller chunks"), std::string::npos) << out;
    }
  }
}

// Case 10: --rows 2147483647 --cols 2147483647 allocated a 16 GB host vector before any check:
// under a 4 GB address-space limit that was std::bad_alloc ("unexpected error", status 1).
TEST(SizesCli, GlmRefusesImpossibleDataBeforeAllocating) {
#ifdef KILN_SANITIZED
  GTEST_SKIP() << "ulimit -v and the sanitizers' shadow memory do not mix";
#endif
  int rc = -1;
  std::string out = run("run glm --rows 2147483647 --cols 2147483647", &rc, 4000000);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(one_error_line(out,
                             "random: chunks (100000, 2147483647) of shape (2147483647, "
                             "2147483647) make blocks of 214748364700000"));
  // Blocks that may be run, of data that cannot be held: the output X is refused with its size.
  out = run("run glm --rows 2147483647 --cols 100 --chunk 1000000", &rc, 4000000);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(one_error_line(out, "compute: the output"));
  EXPECT_NE(out.find("(2147483647, 100) needs 1717986917600 bytes (1.6 TiB), more than this "
                     "machine's memory"),
            std::string::npos)
      << out;
}

// Case 8: diamond --size 4096 --chunk 1 (2^24 blocks, the most allowed) planned ~6 GB and died in
// std::bad_alloc (SIGABRT) where memory was short. Refused up front with the figure where the
// plan would take more than half of the memory (here: a 3 GB address-space limit).
TEST(SizesCli, APlanLargerThanHalfTheMemoryIsRefusedWithTheFigure) {
#ifdef KILN_SANITIZED
  GTEST_SKIP() << "ulimit -v and the sanitizers' shadow memory do not mix";
#endif
  int rc = -1;
  std::string out = run("run diamond --size 4096 --chunk 1", &rc, 3000000);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(one_error_line(
      out,
      "compute: the plan has 16777216 (1.7e+07) blocks (in 1 fused group) and would need "
      "about 7046430720 bytes (6.6 GiB) to plan and schedule"));
  EXPECT_NE(out.find("more than half of this machine's memory, 3072000000 bytes (2.9 GiB); use "
                     "larger chunks (fewer blocks)"),
            std::string::npos)
      << out;
  // The same limit runs the workload in blocks of 64 x 64 (4096 blocks).
  out = run("run diamond --size 4096 --chunk 64 --json", &rc, 3000000);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"result\""), std::string::npos) << out;
}
