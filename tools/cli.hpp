// The kiln command's command line: parsed into a Command without running anything (so the
// parser can be fuzzed on its own: tests/fuzzers/cli_fuzzer.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace kiln::cli {

// Limits of the numeric options: sizes and chunks keep N x N within the 2^62 elements Kiln
// indexes.
// Threads stop at 256, as KILN_THREADS does (more than the cores is oversubscription, allowed).
constexpr int64_t kMaxExtent = 2147483647, kMaxThreads = 256, kMaxRepeat = 1000000;

struct RunOptions {
  int64_t size = 0, chunk = 0;          // 0: the workload's default
  int64_t cols = 0;                     // matrix workloads' columns; 0: the default
  std::string family, solver, penalty;  // glm's model; "": its defaults
  std::string input;                    // glm: X.npy and y.npy from this directory
  int max_iter = 0;                     // glm: 0: the solver's default
  double tol = 0;
  int threads = 0, repeat = 1;  // threads 0: all cores
  bool no_fuse = false, no_row_fusion = false, no_push_slices = false, emit_ir = false,
       json = false;
  bool resident = false;  // x computed before the timed computes, which read it from memory
  bool curand = false;    // --rng curand: x from cuRAND's generator (random::Engine::Curand)
  std::string dot, trace;
  bool quiet = false;
};

struct Command {
  enum Kind { None, List, Report, Run, Seeds, Doctor } kind = None;
  int exit_code = -1;  // >= 0: parsing ended (--help, a usage error, already printed): exit so
  RunOptions run;      // kiln run WORKLOAD ...
  std::string workload;
  std::string device;             // run, doctor: --device; "": KILN_DEVICE or cpu
  std::string trace_in, svg_out;  // kiln report TRACE [-o SVG]
  int seeds_repeat = 3;           // kiln seeds [--repeat R] [--quick]
  bool seeds_quick = false;
};

// Parses argv (CLI11). --math, --precise-math and --devices set kiln::flags() directly. Usage
// errors and --help are printed here and come back as exit_code (2 and 0).
Command parse(int argc, const char* const* argv);

}  // namespace kiln::cli
