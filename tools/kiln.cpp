// The kiln command: runs the seed workloads (kiln seeds), one workload with chosen sizes
// (kiln run), and lists them (kiln list).
#include <sys/resource.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "kiln/kiln.hpp"
#include "support/cache.hpp"
#include "support/files.hpp"
#include "support/flags.hpp"
#include "tools/report.hpp"
#include "tools/workloads.hpp"

namespace {

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

struct Outcome {
  std::vector<double> results;
  double seconds = 0;  // median
  double compile_seconds = 0;
  int64_t tasks = 0, kernels = 0, peak_bytes = 0;
  int64_t computes = 1;  // a solver's compute() calls
  // Devices with their own memory (cuda, cuda-emu), the last compute(): devices used, bytes
  // copied in, out and between devices, peak device memory.
  int devices = 0;
  int64_t to_device_bytes = 0, to_host_bytes = 0, between_bytes = 0, peak_device_bytes = 0;
};

int64_t size_of(const kiln::workloads::Workload& w, const RunOptions& o) {
  return o.size > 0 ? o.size : w.size;
}

int64_t cols_of(const kiln::workloads::Workload& w, const RunOptions& o) {
  return o.cols > 0 ? o.cols : w.cols;
}

int64_t chunk_of(const kiln::workloads::Workload& w, const RunOptions& o) {
  return o.chunk > 0 ? o.chunk : w.chunk;
}

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

// The process's peak resident set (the whole process, not only Kiln's block allocations).
int64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

// Flushes standard output; throws if anything written to it was lost (a full disk, a closed pipe).
void flush_stdout() {
  errno = 0;
  std::cout.flush();
  bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (failed)
    throw kiln::Error(std::string("cannot write to standard output") +
                      (errno ? std::string(": ") + std::strerror(errno) : std::string()));
}

// Throws if a write to standard output has failed, naming errno as the failing write left it:
// called right after printing, since a long output fails inside printf, not at the last flush.
void check_stdout() {
  int e = errno;
  if (std::ferror(stdout))
    throw kiln::Error(std::string("cannot write to standard output") +
                      (e ? std::string(": ") + std::strerror(e) : std::string()));
}

kiln::ComputeOptions compute_options(const RunOptions& o) {
  kiln::ComputeOptions co;
  co.fuse = !o.no_fuse;
  co.row_fusion = !o.no_row_fusion;
  co.push_slices = !o.no_push_slices;
  co.threads = o.threads;
  co.progress = !o.quiet && !o.json;
  return co;
}

// An iterative workload: times its solver, sums its computes' tasks.
void run_solver_once(const kiln::workloads::Workload& w, const RunOptions& o, bool first,
                     std::ostream* ir, Outcome* out, std::vector<double>* times) {
  kiln::ComputeOptions co = compute_options(o);
  co.progress = false;
  if (first) co.ir = ir;
  kiln::Stats before = kiln::stats();
  kiln::workloads::SolveStats st;
  kiln::workloads::SolveArgs args;
  args.n = size_of(w, o);
  args.c = chunk_of(w, o);
  args.cols = cols_of(w, o);
  args.family = o.family;
  args.solver = o.solver;
  args.penalty = o.penalty;
  args.input = o.input;
  args.max_iter = o.max_iter;
  args.tol = o.tol;
  out->results = w.solve(args, co, &st);
  kiln::Stats after = kiln::stats();
  times->push_back(st.seconds);
  out->compile_seconds += after.compile_seconds - before.compile_seconds;
  out->tasks = st.tasks;
  out->computes = st.computes;
  if (first)
    out->kernels = (after.kernels_compiled + after.kernels_from_disk) -
                   (before.kernels_compiled + before.kernels_from_disk);
  out->peak_bytes = std::max(out->peak_bytes, st.peak_bytes);
}

// A workload of one compute() over x: the workload's generator, or (--resident) x's buffer.
void run_compute_once(const kiln::workloads::Workload& w, const kiln::Array& x, const RunOptions& o,
                      bool first, std::ostream* ir, Outcome* out, std::vector<double>* times) {
  kiln::ComputeOptions co = compute_options(o);
  if (first) {
    co.ir = ir;
    co.dot_file = o.dot;
    co.trace_file = o.trace;
  }
  std::vector<kiln::NDArray> res = kiln::compute(w.expr(x), co);
  kiln::Stats s = kiln::stats();
  times->push_back(s.last_seconds);
  out->compile_seconds += s.last_compile_seconds;
  out->tasks = s.last_tasks;
  out->kernels = s.last_kernels;
  out->peak_bytes = std::max(out->peak_bytes, s.last_peak_bytes);
  out->devices = s.last_devices;
  out->to_device_bytes = s.last_to_device_bytes;
  out->to_host_bytes = s.last_to_host_bytes;
  out->between_bytes = s.last_between_devices_bytes;
  out->peak_device_bytes = std::max(out->peak_device_bytes, s.last_peak_device_bytes);
  out->results.clear();
  for (const auto& a : res) out->results.push_back(a.item<double>());
}

Outcome run_workload(const kiln::workloads::Workload& w, const RunOptions& o, std::ostream* ir) {
  if (w.solve && (!o.dot.empty() || !o.trace.empty()))
    throw kiln::Error("kiln run: --emit-dot and --trace record one compute(); '" + w.name +
                      "' is a solver of many computes (use --emit-ir to see them)");
  if (o.cols > 0 && w.cols == 0)
    throw kiln::Error("kiln run: --cols is for the matrix workloads (svd, logistic-gd, glm); '" +
                      w.name + "' is N x N");
  if (!w.model && !(o.family.empty() && o.solver.empty() && o.penalty.empty() && o.input.empty() &&
                    o.max_iter == 0 && o.tol == 0))
    throw kiln::Error(
        "kiln run: --family, --solver, --penalty, --input, --max-iter and --tol are for the glm "
        "workload, not '" +
        w.name + "'");
  if (w.solve && o.resident)
    throw kiln::Error("kiln run: --resident is for workloads that generate x; '" + w.name +
                      "' makes its data before its timed solver already");
  if (w.solve && o.curand)
    throw kiln::Error("kiln run: --rng is for workloads that generate x; '" + w.name +
                      "' makes its data with Kiln's generator");
  Outcome out;
  std::vector<double> times;
  kiln::Array x;  // --resident: computed here, once, outside the timed computes
  if (!w.solve)
    x = w.input(size_of(w, o), chunk_of(w, o),
                o.curand ? kiln::random::Engine::Curand : kiln::random::Engine::Kiln);
  if (o.resident) x = x.persist();
  for (int r = 0; r < o.repeat; ++r) {
    if (w.solve)
      run_solver_once(w, o, r == 0, ir, &out, &times);
    else
      run_compute_once(w, x, o, r == 0, ir, &out, &times);
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[times.size() / 2];
  return out;
}

nlohmann::json to_json(const kiln::workloads::Workload& w, const RunOptions& o, const Outcome& r) {
  nlohmann::json j;
  j["workload"] = w.name;
  j["size"] = size_of(w, o);
  j["chunk"] = chunk_of(w, o);
  if (w.cols > 0) j["cols"] = cols_of(w, o);
  if (w.model) {
    j["family"] = o.family.empty() ? "logistic" : o.family;
    j["solver"] = o.solver.empty() ? "lbfgs" : o.solver;
    j["penalty"] = o.penalty.empty() ? "default" : o.penalty;
    if (!o.input.empty()) j["input"] = o.input;
  }
  // What ran: the command line's switches and the environment's (KILN_NO_FUSE, KILN_THREADS, ...).
  const kiln::Flags& f = kiln::flags();
  const bool fused = !o.no_fuse && !f.no_fuse;
  j["threads"] = o.threads > 0 ? o.threads
                 : f.threads > 0
                     ? f.threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  j["fused"] = fused;
  j["row_fusion"] = fused && !o.no_row_fusion && !f.no_row_fusion;
  j["push_slices"] = !o.no_push_slices && !f.no_push_slices;
  j["resident"] = o.resident;
  j["rng"] = o.curand ? "curand" : "kiln";
  j["math"] = kiln::flags().precise_math        ? "precise"
              : kiln::flags().math == "libmvec" ? "libmvec"
                                                : "kiln";
  j["result"] = r.results[0];
  for (size_t k = 1; k < r.results.size(); ++k) j[w.output_names[k]] = r.results[k];
  j["seconds"] = r.seconds;
  if (w.flops) j["gflops"] = w.flops(size_of(w, o)) / r.seconds / 1e9;
  j["compile_seconds"] = r.compile_seconds;
  j["cache_rejected"] = kiln::cache::rejected();
  j["tasks"] = r.tasks;
  if (w.solve) j["computes"] = r.computes;
  j["kernels"] = r.kernels;
  j["peak_bytes"] = r.peak_bytes;
  j["peak_rss_bytes"] = peak_rss_bytes();
  kiln::Device device = kiln::resolve_device(kiln::Device::Default);
  j["device"] = kiln::device_name(device);
  j["compile_target"] = kiln::device_target(device);
  if (r.devices > 0) {
    j["devices"] = r.devices;
    j["to_device_bytes"] = r.to_device_bytes;
    j["to_host_bytes"] = r.to_host_bytes;
    j["between_devices_bytes"] = r.between_bytes;
    j["peak_device_bytes"] = r.peak_device_bytes;
  }
  return j;
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

void print_row(const kiln::workloads::Workload& w, const RunOptions& o, const Outcome& r) {
  std::printf("%-14s %7lld %6lld %-6s %12.6g", w.name.c_str(),
              static_cast<long long>(size_of(w, o)), static_cast<long long>(chunk_of(w, o)),
              o.no_fuse ? "no" : "yes", r.results[0]);
  for (size_t k = 1; k < r.results.size(); ++k)
    std::printf(" (%s %.6g)", w.output_names[k].c_str(), r.results[k]);
  std::printf("  %8.3f s  compile %6.3f s  %6lld tasks  %2lld kernels  peak %s\n", r.seconds,
              r.compile_seconds, static_cast<long long>(r.tasks), static_cast<long long>(r.kernels),
              human_bytes(r.peak_bytes).c_str());
  if (r.devices > 0)
    std::printf("  %d device%s: copied in %s, out %s, between devices %s; device peak %s\n",
                r.devices, r.devices == 1 ? "" : "s", human_bytes(r.to_device_bytes).c_str(),
                human_bytes(r.to_host_bytes).c_str(), human_bytes(r.between_bytes).c_str(),
                human_bytes(r.peak_device_bytes).c_str());
  check_stdout();
}

void cmd_list() {
  for (const auto& w : kiln::workloads::all())
    std::printf("%-14s seed %-40s N=%lld C=%lld\n    %s\n", w.name.c_str(), w.seed.c_str(),
                static_cast<long long>(w.size), static_cast<long long>(w.chunk),
                w.description.c_str());
}

void cmd_report(const std::string& trace_in, std::string svg_out) {
  if (svg_out.empty()) svg_out = trace_in + ".svg";
  if (svg_out == trace_in || kiln::files::same_file(svg_out, trace_in))
    throw kiln::Error("kiln report: the output '" + svg_out + "' is the trace being read");
  std::string text = kiln::report::read_trace(trace_in);
  kiln::report::Summary s;
  std::string svg = kiln::report::render_svg(text, &s);
  kiln::files::write(svg_out, svg, "kiln report: cannot write");
  std::printf("%s: %lld tasks on %d workers over %.3f ms, workers busy %.0f%%\n", svg_out.c_str(),
              static_cast<long long>(s.tasks), s.workers, s.span_us / 1000, 100 * s.busy_fraction);
}

void cmd_run(const std::string& name, const RunOptions& given) {
  const auto& w = kiln::workloads::find(name);
  RunOptions opt = given;
  if (!opt.dot.empty() && (opt.dot == opt.trace || kiln::files::same_file(opt.dot, opt.trace)))
    throw kiln::Error("kiln run: --emit-dot and --trace name the same file '" + opt.dot +
                      "'; give each its own");
  if (!opt.input.empty() && w.model) {  // the problem's size is X.npy's
    if (opt.size > 0 || opt.cols > 0)
      throw kiln::Error("kiln run: --rows and --cols come from --input's X.npy");
    kiln::Array x = kiln::load_npy(opt.input + "/X.npy");
    if (x.ndim() != 2)
      throw kiln::Error("kiln run: " + opt.input + "/X.npy has shape " +
                        kiln::shape_str(x.shape()) + ", not a matrix");
    opt.size = x.shape()[0];
    opt.cols = x.shape()[1];
  }
  // With --json, standard output is JSON only: the IR goes to standard error.
  Outcome r = run_workload(w, opt, opt.emit_ir ? (opt.json ? &std::cerr : &std::cout) : nullptr);
  if (opt.json)
    std::cout << to_json(w, opt, r).dump() << "\n";
  else
    print_row(w, opt, r);
}

// The seed workloads fused and unfused, then each one's fused graph. `quick`: every workload's
// default size and chunk divided by kQuickDivisor (the same blocks), for smoke tests.
void cmd_seeds(int repeat, bool quick) {
  std::printf("%-14s %7s %6s %-6s %12s\n", "workload", "N", "C", "fused", "result");
  const int64_t scale = quick ? kiln::workloads::kQuickDivisor : 1;
  for (const auto& w : kiln::workloads::all()) {
    for (bool no_fuse : {false, true}) {
      RunOptions o;
      o.no_fuse = no_fuse;
      o.repeat = repeat;
      o.size = w.size / scale;
      o.chunk = w.chunk / scale;
      if (no_fuse) o.size /= 2;  // unfused materializes every intermediate
      print_row(w, o, run_workload(w, o, nullptr));
    }
  }
  std::printf("\nfused-graph summary of each workload:\n");
  for (const auto& w : kiln::workloads::all()) {
    std::ostringstream ir;
    RunOptions o;
    o.size = 2000;
    o.chunk = 1000;
    run_workload(w, o, &ir);
    std::string s = ir.str();
    s = s.substr(s.find("fused graph:"));
    s = s.substr(0, s.find("; IR as built"));  // a solver's first compute only
    std::printf("%s (N=2000, C=1000%s):\n%s", w.name.c_str(), w.solve ? ", its first compute" : "",
                s.c_str());
    check_stdout();
  }
}

int kiln_main(int argc, char** argv) {
  CLI::App app{"kiln: lazy chunked arrays, fused and JIT-compiled"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "kiln: " + CLI::FailureMessage::simple(a, e);
  });
  RunOptions opt;
  std::string name;
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
  std::string device;
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
  std::string trace_in, svg_out;
  report->add_option("trace", trace_in, "trace file written by kiln run --trace")->required();
  report->add_option("-o,--output", svg_out, "SVG file (default: TRACE with .svg)")
      ->check(file_name());
  auto* seeds = app.add_subcommand("seeds", "run the seed workloads with fusion on and off");
  int seeds_repeat = 3;
  bool seeds_quick = false;
  seeds->add_option("--repeat", seeds_repeat, "repeats per workload (median reported)")
      ->check(int_in(1, kMaxRepeat));
  seeds->add_flag("--quick", seeds_quick, "1/20 of the default sizes, for smoke tests");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2, as kiln::Error does
  }
  if (!device.empty()) kiln::flags().device = device;
  if (*list) cmd_list();
  if (*report) cmd_report(trace_in, svg_out);
  if (*run) cmd_run(name, opt);
  if (*seeds) cmd_seeds(seeds_repeat, seeds_quick);
  flush_stdout();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return kiln_main(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: unexpected error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "kiln: unexpected error (an exception of unknown type)\n");
    return 1;
  }
}
