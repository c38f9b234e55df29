// libFuzzer harness for the kiln command's argument parser (tools/cli.cpp): each input is an
// argument vector, its arguments separated by NUL bytes (at most 64). parse() must return a
// Command (exit_code 0 or 2 when it printed help or a usage error) or throw kiln::Error (a bad
// KILN_* variable); any other exception, a sanitizer report or a hang is a bug. A parsed Command's
// numbers must be within the ranges the options promise. Nothing runs. Built and run by
// scripts/fuzz.sh; seeds in tests/fuzzers/corpus/cli.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/error.hpp"
#include "support/flags.hpp"
#include "tools/cli.hpp"

namespace {
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "cli_fuzzer: broken invariant: %s\n", what);
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"kiln"};
  std::string arg;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  if (args.size() < 64) args.push_back(arg);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  kiln::flags() = kiln::Flags();  // the parser writes some flags; each input starts afresh
  try {
    kiln::cli::Command c = kiln::cli::parse(static_cast<int>(argv.size()), argv.data());
    if (c.exit_code >= 0) {
      check(c.exit_code == 0 || c.exit_code == 2, "exit code 0 or 2");
      return 0;
    }
    check(c.kind != kiln::cli::Command::None, "a parsed command has a kind");
    const kiln::cli::RunOptions& r = c.run;
    check(r.size >= 0 && r.size <= kiln::cli::kMaxExtent, "--size in range");
    check(r.chunk >= 0 && r.chunk <= kiln::cli::kMaxExtent, "--chunk in range");
    check(r.cols >= 0 && r.cols <= kiln::cli::kMaxExtent, "--cols in range");
    check(r.threads >= 0 && r.threads <= kiln::cli::kMaxThreads, "--threads in range");
    check(r.repeat >= 1 && r.repeat <= kiln::cli::kMaxRepeat, "--repeat in range");
    check(r.tol == 0 || (std::isfinite(r.tol) && r.tol > 0), "--tol finite and positive");
    check(c.seeds_repeat >= 1 && c.seeds_repeat <= kiln::cli::kMaxRepeat, "seeds --repeat");
    check(kiln::flags().devices >= 0 && kiln::flags().devices <= 64, "--devices in range");
  } catch (const kiln::Error&) {
  }
  return 0;
}
