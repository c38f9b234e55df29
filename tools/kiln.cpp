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

#include "codegen/backend.hpp"
#include "codegen/library.hpp"
#include "kiln/kiln.hpp"
#include "runtime/distributed.hpp"
#include "support/cache.hpp"
#include "support/files.hpp"
#include "support/flags.hpp"
#include "tools/cli.hpp"
#include "tools/doctor.hpp"
#include "tools/report.hpp"
#include "tools/workloads.hpp"

namespace {

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
  // KILN_CUDA_PROFILE: each device kernel's launches and time over all the repeats.
  std::vector<kiln::backend::KernelTime> kernel_times, host_times;
  int repeat = 1;
  // Distributed (several ranks): per rank, the tasks it ran and the messages and bytes it sent,
  // in the last run (a solver: over its computes).
  std::vector<int64_t> rank_tasks, rank_messages, rank_bytes;
};

int64_t size_of(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o) {
  return o.size > 0 ? o.size : w.size;
}

int64_t cols_of(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o) {
  return o.cols > 0 ? o.cols : w.cols;
}

int64_t chunk_of(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o) {
  return o.chunk > 0 ? o.chunk : w.chunk;
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

kiln::ComputeOptions compute_options(const kiln::cli::RunOptions& o) {
  kiln::ComputeOptions co;
  co.fuse = !o.no_fuse;
  co.row_fusion = !o.no_row_fusion;
  co.push_slices = !o.no_push_slices;
  co.threads = o.threads;
  co.progress = !o.quiet && !o.json;
  return co;
}

// Each rank's counts, gathered on every rank (a collective: every rank calls it).
void distributed_counts(int64_t tasks, int64_t messages, int64_t bytes, Outcome* out) {
  if (kiln::distributed::size() <= 1) return;
  out->rank_tasks = kiln::dist::allgather(tasks);
  out->rank_messages = kiln::dist::allgather(messages);
  out->rank_bytes = kiln::dist::allgather(bytes);
}

// An iterative workload: times its solver, sums its computes' tasks.
void run_solver_once(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o, bool first,
                     std::ostream* ir, Outcome* out, std::vector<double>* times) {
  kiln::ComputeOptions co = compute_options(o);
  co.progress = false;
  if (first) co.ir = ir;
  kiln::Stats before = kiln::stats();
  kiln::workloads::SolveStats st;
  const int64_t messages_before = before.messages_sent, bytes_before = before.bytes_sent;
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
  distributed_counts(st.tasks, after.messages_sent - messages_before,
                     after.bytes_sent - bytes_before, out);
}

// A workload of one compute() over x: the workload's generator, or (--resident) x's buffer.
void run_compute_once(const kiln::workloads::Workload& w, const kiln::Array& x,
                      const kiln::cli::RunOptions& o, bool first, std::ostream* ir, Outcome* out,
                      std::vector<double>* times) {
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
  distributed_counts(s.last_ranks > 1 ? s.last_rank_tasks : s.last_tasks, s.last_messages_sent,
                     s.last_bytes_sent, out);
}

Outcome run_workload(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o,
                     std::ostream* ir) {
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
  if (o.resident) {  // on a GPU, kept in device memory: the timed computes read it there
    kiln::ComputeOptions keep = compute_options(o);
    keep.progress = false;
    keep.keep_on_device = true;
    x = x.persist(keep);
  }
  if (kiln::flags().cuda_profile) kiln::backend::reset_kernel_times();
  for (int r = 0; r < o.repeat; ++r) {
    if (w.solve)
      run_solver_once(w, o, r == 0, ir, &out, &times);
    else
      run_compute_once(w, x, o, r == 0, ir, &out, &times);
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[times.size() / 2];
  out.repeat = o.repeat;
  if (kiln::flags().cuda_profile) {
    out.kernel_times = kiln::backend::kernel_times();
    out.host_times = kiln::backend::host_times();
  }
  return out;
}

nlohmann::json to_json(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o,
                       const Outcome& r) {
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
  const kiln::library::BlasInfo& blas = kiln::library::blas_info();
  j["blas"] = {{"library", blas.library},
               {"version", blas.version},
               {"core", blas.core},
               {"generic", blas.generic}};
  if (r.devices > 0) {
    j["devices"] = r.devices;
    j["to_device_bytes"] = r.to_device_bytes;
    j["to_host_bytes"] = r.to_host_bytes;
    j["between_devices_bytes"] = r.between_bytes;
    j["peak_device_bytes"] = r.peak_device_bytes;
    j["host_fallbacks"] = kiln::host_fallbacks();
  }
  if (!r.rank_tasks.empty()) {
    j["ranks"] = r.rank_tasks.size();
    j["mpi"] = kiln::distributed::library();
    j["rank_tasks"] = r.rank_tasks;
    j["rank_messages_sent"] = r.rank_messages;
    j["rank_bytes_sent"] = r.rank_bytes;
  }
  if (kiln::flags().cuda_profile) {
    // Per run (the repeats' totals divided by their count): the device kernels' time, and its
    // share of the run's wall time (the rest: copies, host work, launch gaps).
    nlohmann::json p, kernels = nlohmann::json::array();
    double busy = 0, moved = 0;
    int64_t launches = 0;
    for (const auto& t : r.kernel_times) {
      busy += t.seconds / r.repeat;
      moved += t.bytes / r.repeat;
      launches += t.launches;
      if (kernels.size() < 8)
        kernels.push_back({{"kernel", t.kernel},
                           {"launches", static_cast<double>(t.launches) / r.repeat},
                           {"seconds", t.seconds / r.repeat},
                           {"bytes", t.bytes / r.repeat},
                           {"gb_per_s", t.seconds > 0 ? t.bytes / t.seconds / 1e9 : 0.0}});
    }
    p["kernel_seconds"] = busy;
    p["kernel_bytes"] = moved;  // cuda::Traffic: what the kernels' leaves and outputs span
    p["gb_per_s"] = busy > 0 ? moved / busy / 1e9 : 0.0;
    p["launches"] = static_cast<double>(launches) / r.repeat;
    p["busy_fraction"] = r.seconds > 0 ? busy / r.seconds : 0.0;
    p["kernels"] = kernels;
    // The host's side, per run: compute()'s phases and the CUDA backend's blocking calls
    // (backend::host_times; phases nest, so their seconds do not add up).
    nlohmann::json host = nlohmann::json::array();
    for (const auto& t : r.host_times)
      host.push_back({{"phase", t.kernel},
                      {"calls", static_cast<double>(t.launches) / r.repeat},
                      {"seconds", t.seconds / r.repeat}});
    p["host"] = host;
    j["profile"] = p;
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

void print_row(const kiln::workloads::Workload& w, const kiln::cli::RunOptions& o,
               const Outcome& r) {
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
  if (!r.rank_tasks.empty()) {
    auto list = [](const std::vector<int64_t>& v) {
      std::string s;
      for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
      return s;
    };
    std::printf("  %zu ranks (%s): tasks %s; messages sent %s; bytes sent %s\n",
                r.rank_tasks.size(), kiln::distributed::library().c_str(),
                list(r.rank_tasks).c_str(), list(r.rank_messages).c_str(),
                list(r.rank_bytes).c_str());
  }
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

void cmd_run(const std::string& name, const kiln::cli::RunOptions& given) {
  const auto& w = kiln::workloads::find(name);
  kiln::cli::RunOptions opt = given;
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
// default size and chunk divided by kQuickDivisor (the same blocks), for smoke tests. Each row is
// flushed when its workload ends: a pipe or a file shows the table as it grows, and an output that
// cannot be written (a full disk, a closed pipe) stops the run at its first row, not at the end.
void cmd_seeds(int repeat, bool quick) {
  std::printf("%-14s %7s %6s %-6s %12s\n", "workload", "N", "C", "fused", "result");
  flush_stdout();
  const int64_t scale = quick ? kiln::workloads::kQuickDivisor : 1;
  for (const auto& w : kiln::workloads::all()) {
    for (bool no_fuse : {false, true}) {
      kiln::cli::RunOptions o;
      o.no_fuse = no_fuse;
      o.repeat = repeat;
      o.size = w.size / scale;
      o.chunk = w.chunk / scale;
      if (no_fuse) o.size /= 2;  // unfused materializes every intermediate
      print_row(w, o, run_workload(w, o, nullptr));
      flush_stdout();
    }
  }
  std::printf("\nfused-graph summary of each workload:\n");
  for (const auto& w : kiln::workloads::all()) {
    std::ostringstream ir;
    kiln::cli::RunOptions o;
    o.size = 2000;
    o.chunk = 1000;
    run_workload(w, o, &ir);
    std::string s = ir.str();
    s = s.substr(s.find("fused graph:"));
    s = s.substr(0, s.find("; IR as built"));  // a solver's first compute only
    std::printf("%s (N=2000, C=1000%s):\n%s", w.name.c_str(), w.solve ? ", its first compute" : "",
                s.c_str());
    flush_stdout();
  }
}

// Whether this process was started by an MPI launcher with other ranks (Open MPI's mpirun, MPICH's
// Hydra, PMIx launchers such as Slurm's srun --mpi=pmix).
bool launched_with_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* n = std::getenv(v); n && std::atoi(n) > 1) return true;
  return false;
}

int kiln_main(int argc, char** argv) {
  kiln::cli::Command c = kiln::cli::parse(argc, argv);
  if (c.exit_code >= 0) return c.exit_code;
  // Under mpirun (or KILN_MPI=1) the ranks share each compute's blocks; rank 0 alone prints.
  if ((kiln::flags().mpi || launched_with_ranks()) &&
      (c.kind == kiln::cli::Command::Run || c.kind == kiln::cli::Command::Seeds ||
       c.kind == kiln::cli::Command::Doctor)) {
    kiln::distributed::init(argc, argv);
    if (kiln::distributed::rank() != 0 && !std::freopen("/dev/null", "w", stdout))
      throw kiln::Error("cannot silence standard output on rank " +
                        std::to_string(kiln::distributed::rank()));
  }
  if (!c.device.empty()) kiln::flags().device = c.device;
  if (c.kind == kiln::cli::Command::List) cmd_list();
  if (c.kind == kiln::cli::Command::Report) cmd_report(c.trace_in, c.svg_out);
  if (c.kind == kiln::cli::Command::Run) cmd_run(c.workload, c.run);
  if (c.kind == kiln::cli::Command::Seeds) cmd_seeds(c.seeds_repeat, c.seeds_quick);
  if (c.kind == kiln::cli::Command::Doctor) {
    int rc = kiln::doctor::run(kiln::Device::Default);
    flush_stdout();
    return rc;
  }
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
