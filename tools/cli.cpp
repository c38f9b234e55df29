#include "tools/cli.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>

#include "support/device.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln::cli {

namespace {

// A CLI11 check: the value is a base-10 integer in [lo, hi]; one that overflows is rejected
// (CLI11's own conversion would clamp it).
CLI::Validator int_in(int64_t lo, int64_t hi) {
  std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi) return "";
        return "expected an integer in " + range + ", got '" + s + "'";
      },
      "INT in " + range);
}

// A CLI11 check: a finite number greater than 0 (CLI::PositiveNumber lets nan through and prints
// the largest double in its message).
CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && end == s.data() + s.size() && std::isfinite(v) && v > 0) return "";
        return "expected a finite number greater than 0, got '" + s + "'";
      },
      "NUMBER > 0");
}

// A CLI11 check: a file name, not an empty string (which would silently write nothing).
CLI::Validator file_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.empty() ? "expected a file name, got an empty string" : "";
      },
      "FILE");
}

}  // namespace

Command parse(int argc, const char* const* argv) {
  Command c;
  CLI::App app{"kiln: lazy chunked arrays, fused and JIT-compiled"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "kiln: " + CLI::FailureMessage::simple(a, e);
  });
  RunOptions& opt = c.run;
  std::string& name = c.workload;
  auto* run = app.add_subcommand("run", "run one workload");
  run->add_option("workload", name, "workload name (see kiln list)")->required();
  run->add_option("--size,--rows", opt.size, "N (arrays are N x N; matrix workloads: N rows)")
      ->check(int_in(1, kMaxExtent));
  run->add_option("--cols", opt.cols, "K: the columns of a matrix workload's N x K data")
      ->check(int_in(1, kMaxExtent));
  run->add_option("--family", opt.family, "glm: logistic (default), normal or poisson")
      ->check(CLI::IsMember({"logistic", "normal", "poisson"}));
  run->add_option("--solver", opt.solver,
                  "glm: lbfgs (default), gradient_descent, newton, admm or proximal_grad")
      ->check(CLI::IsMember({"lbfgs", "gradient_descent", "newton", "admm", "proximal_grad"}));
  run->add_option("--penalty", opt.penalty,
                  "glm: l1, l2 or elastic (lamduh 0.1; default none, l1 for admm and "
                  "proximal_grad)")
      ->check(CLI::IsMember({"l1", "l2", "elastic"}));
  run->add_option("--input", opt.input,
                  "glm: fit X.npy (N x K) and y.npy from this directory instead of seed 000's data")
      ->check(CLI::ExistingDirectory);
  run->add_option("--max-iter", opt.max_iter, "glm: the solver's iteration limit")
      ->check(int_in(1, kMaxRepeat));
  run->add_option("--tol", opt.tol, "glm: the solver's tolerance")->check(positive_finite());
  run->add_option("--chunk", opt.chunk, "C (blocks are C x C)")->check(int_in(1, kMaxExtent));
  run->add_option("--threads", opt.threads, "worker threads (default: all cores)")
      ->check(int_in(1, kMaxThreads));
  run->add_option("--repeat", opt.repeat, "repeat R times, report the median")
      ->check(int_in(1, kMaxRepeat));
  run->add_flag("--no-fuse", opt.no_fuse, "every op its own kernel and task");
  run->add_flag("--no-row-fusion", opt.no_row_fusion,
                "a reduction along rows stays its own kernel (not the row stage of its reader)");
  run->add_flag("--no-push-slices", opt.no_push_slices,
                "views stay where they are built (generators make every element)");
  run->add_flag("--emit-ir", opt.emit_ir,
                "print the IR after each pass and the fusion summary (on standard error with "
                "--json)");
  run->add_option("--emit-dot", opt.dot, "write the fused graph as Graphviz DOT")
      ->check(file_name());
  run->add_flag("--resident", opt.resident,
                "compute x once before timing (kept in memory), then time the expression over "
                "it; not for logistic-gd, whose data are made before its solver anyway");
  run->add_flag("--json", opt.json, "one JSON object per line");
  std::string rng = "kiln";
  run->add_option("--rng", rng,
                  "kiln (the default: Kiln's Philox, made inside the kernels) or curand (NVIDIA "
                  "cuRAND's Philox filling x by a library call: its device generator on cuda, its "
                  "host generator elsewhere, which is slow)")
      ->check(CLI::IsMember({"kiln", "curand"}))
      ->each([&](const std::string& v) { opt.curand = v == "curand"; });
  run->add_option("--trace", opt.trace, "write the task stream (Chrome trace format, Perfetto)")
      ->check(file_name());
  run->add_flag("--quiet", opt.quiet, "no progress bar");
  run->add_option("--math", kiln::flags().math,
                  "kiln (the default: Kiln's own vector functions, the same bits on every CPU and "
                  "GPU) or libmvec (glibc's vector functions, which differ between ISAs by a few "
                  "ulp); also KILN_MATH")
      ->check(CLI::IsMember({"kiln", "libmvec"}));
  run->add_flag("--precise-math", kiln::flags().precise_math,
                "glibc's scalar sin/cos/exp/log (NumPy's results) instead of vector functions");
  std::string& device = c.device;
  auto device_check = [](const std::string& d) {
    try {
      kiln::device_from_name(d, "--device");
      return std::string();
    } catch (const kiln::Error& e) {
      return std::string(e.what());
    }
  };
  run->add_option("--device", device,
                  "cpu (compiled kernels, the default), interp (the reference interpreter: "
                  "slow; for checking results), cuda-emu (the CUDA kernels compiled as host C++, "
                  "run serially: for checking them without a GPU) or cuda (a GPU)")
      ->check(device_check);
  run->add_option("--devices", kiln::flags().devices,
                  "cuda, cuda-emu: devices the blocks are spread over (default every GPU; "
                  "cuda-emu: 1)")
      ->check(int_in(1, 64));
  auto* list = app.add_subcommand("list", "list the workloads");
  auto* report = app.add_subcommand("report", "render a --trace file as an SVG task stream");
  std::string &trace_in = c.trace_in, &svg_out = c.svg_out;
  report->add_option("trace", trace_in, "trace file written by kiln run --trace")->required();
  report->add_option("-o,--output", svg_out, "SVG file (default: TRACE with .svg)")
      ->check(file_name());
  auto* seeds = app.add_subcommand("seeds", "run the seed workloads with fusion on and off");
  int& seeds_repeat = c.seeds_repeat;
  bool& seeds_quick = c.seeds_quick;
  seeds->add_option("--repeat", seeds_repeat, "repeats per workload (median reported)")
      ->check(int_in(1, kMaxRepeat));
  seeds->add_flag("--quick", seeds_quick, "1/20 of the default sizes, for smoke tests");
  auto* doctor = app.add_subcommand(
      "doctor", "check the device: what it is, then small computations against a reference");
  doctor
      ->add_option("--device", device,
                   "cpu (the default: KILN_DEVICE or cpu), interp, cuda-emu or cuda")
      ->check(device_check);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    c.exit_code = app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2, as kiln::Error does
    return c;
  }
  c.kind = *list     ? Command::List
           : *report ? Command::Report
           : *run    ? Command::Run
           : *doctor ? Command::Doctor
                     : Command::Seeds;
  return c;
}

}  // namespace kiln::cli
