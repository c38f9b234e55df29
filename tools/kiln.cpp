// The kiln command: runs the seed workloads (kiln seeds), one workload with chosen sizes
// (kiln run), and lists them (kiln list).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kiln/kiln.hpp"
#include "support/flags.hpp"
#include "tools/report.hpp"
#include "tools/workloads.hpp"

namespace {

struct RunOptions {
  int64_t size = 0, chunk = 0;
  int threads = 0, repeat = 1;
  bool no_fuse = false, emit_ir = false, json = false;
  std::string dot, trace;
  bool quiet = false;
};

struct Outcome {
  std::vector<double> results;
  double seconds = 0;  // median
  double compile_seconds = 0;
  int64_t tasks = 0, kernels = 0, peak_bytes = 0;
};

Outcome run_workload(const kiln::workloads::Workload& w, const RunOptions& o, std::ostream* ir) {
  int64_t n = o.size > 0 ? o.size : w.size;
  int64_t c = o.chunk > 0 ? o.chunk : w.chunk;
  Outcome out;
  std::vector<double> times;
  for (int r = 0; r < std::max(1, o.repeat); ++r) {
    kiln::ComputeOptions co;
    co.fuse = !o.no_fuse;
    co.threads = o.threads;
    co.progress = !o.quiet && !o.json;
    if (w.solve) {  // an iterative workload: time its solver, sum its computes' tasks
      kiln::Stats before = kiln::stats();
      co.progress = false;
      if (r == 0) co.ir = ir;
      kiln::workloads::SolveStats st;
      out.results = w.solve(n, c, co, &st);
      kiln::Stats after = kiln::stats();
      times.push_back(st.seconds);
      out.compile_seconds += after.compile_seconds - before.compile_seconds;
      out.tasks = st.tasks;
      if (r == 0)
        out.kernels = (after.kernels_compiled + after.kernels_from_disk) -
                      (before.kernels_compiled + before.kernels_from_disk);
      out.peak_bytes = std::max(out.peak_bytes, st.peak_bytes);
      continue;
    }
    if (r == 0) {
      co.ir = ir;
      co.dot_file = o.dot;
      co.trace_file = o.trace;
    }
    std::vector<kiln::NDArray> res = kiln::compute(w.build(n, c), co);
    kiln::Stats s = kiln::stats();
    times.push_back(s.last_seconds);
    out.compile_seconds += s.last_compile_seconds;
    out.tasks = s.last_tasks;
    out.kernels = s.last_kernels;
    out.peak_bytes = std::max(out.peak_bytes, s.last_peak_bytes);
    out.results.clear();
    for (const auto& a : res) out.results.push_back(a.item<double>());
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[times.size() / 2];
  return out;
}

nlohmann::json to_json(const kiln::workloads::Workload& w, const RunOptions& o, const Outcome& r) {
  nlohmann::json j;
  j["workload"] = w.name;
  j["size"] = o.size > 0 ? o.size : w.size;
  j["chunk"] = o.chunk > 0 ? o.chunk : w.chunk;
  j["threads"] = o.threads;
  j["fused"] = !o.no_fuse;
  j["result"] = r.results[0];
  for (size_t k = 1; k < r.results.size(); ++k) j[w.output_names[k]] = r.results[k];
  j["seconds"] = r.seconds;
  j["compile_seconds"] = r.compile_seconds;
  j["tasks"] = r.tasks;
  j["kernels"] = r.kernels;
  j["peak_bytes"] = r.peak_bytes;
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
              static_cast<long long>(o.size > 0 ? o.size : w.size),
              static_cast<long long>(o.chunk > 0 ? o.chunk : w.chunk), o.no_fuse ? "no" : "yes",
              r.results[0]);
  for (size_t k = 1; k < r.results.size(); ++k)
    std::printf(" (%s %.0f)", w.output_names[k].c_str(), r.results[k]);
  std::printf("  %8.3f s  compile %6.3f s  %6lld tasks  %2lld kernels  peak %s\n", r.seconds,
              r.compile_seconds, static_cast<long long>(r.tasks), static_cast<long long>(r.kernels),
              human_bytes(r.peak_bytes).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: lazy chunked arrays, fused and JIT-compiled"};
  app.require_subcommand(1);
  RunOptions opt;
  std::string name;
  auto* run = app.add_subcommand("run", "run one workload");
  run->add_option("workload", name, "workload name (see kiln list)")->required();
  run->add_option("--size", opt.size, "N (arrays are N x N)");
  run->add_option("--chunk", opt.chunk, "C (blocks are C x C)");
  run->add_option("--threads", opt.threads, "worker threads (default: all cores)");
  run->add_option("--repeat", opt.repeat, "repeat R times, report the median");
  run->add_flag("--no-fuse", opt.no_fuse, "every op its own kernel and task");
  run->add_flag("--emit-ir", opt.emit_ir, "print the IR after each pass and the fusion summary");
  run->add_option("--emit-dot", opt.dot, "write the fused graph as Graphviz DOT");
  run->add_flag("--json", opt.json, "one JSON object per line");
  run->add_option("--trace", opt.trace, "write the task stream (Chrome trace format, Perfetto)");
  run->add_flag("--quiet", opt.quiet, "no progress bar");
  run->add_flag(
      "--precise-math", kiln::flags().precise_math,
      "glibc's scalar sin/cos/exp/log (NumPy's results) instead of libmvec's vector ones");
  auto* list = app.add_subcommand("list", "list the workloads");
  auto* report = app.add_subcommand("report", "render a --trace file as an SVG task stream");
  std::string trace_in, svg_out;
  report->add_option("trace", trace_in, "trace file written by kiln run --trace")->required();
  report->add_option("-o,--output", svg_out, "SVG file (default: TRACE with .svg)");
  auto* seeds = app.add_subcommand("seeds", "run the seed workloads with fusion on and off");
  int seeds_repeat = 3;
  seeds->add_option("--repeat", seeds_repeat, "repeats per workload (median reported)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*list) {
      for (const auto& w : kiln::workloads::all())
        std::printf("%-14s seed %-40s N=%lld C=%lld\n    %s\n", w.name.c_str(), w.seed.c_str(),
                    static_cast<long long>(w.size), static_cast<long long>(w.chunk),
                    w.description.c_str());
      return 0;
    }
    if (*report) {
      std::ifstream in(trace_in);
      if (!in) throw kiln::Error("kiln report: cannot read '" + trace_in + "'");
      std::stringstream text;
      text << in.rdbuf();
      kiln::report::Summary s;
      std::string svg = kiln::report::render_svg(text.str(), &s);
      if (svg_out.empty()) svg_out = trace_in + ".svg";
      std::ofstream out(svg_out);
      if (!out) throw kiln::Error("kiln report: cannot write '" + svg_out + "'");
      out << svg;
      std::printf("%s: %lld tasks on %d workers over %.3f ms, workers busy %.0f%%\n",
                  svg_out.c_str(), static_cast<long long>(s.tasks), s.workers, s.span_us / 1000,
                  100 * s.busy_fraction);
      return 0;
    }
    if (*run) {
      const auto& w = kiln::workloads::find(name);
      Outcome r = run_workload(w, opt, opt.emit_ir ? &std::cout : nullptr);
      if (opt.json)
        std::cout << to_json(w, opt, r).dump() << std::endl;
      else
        print_row(w, opt, r);
      return 0;
    }
    if (*seeds) {
      std::printf("%-14s %7s %6s %-6s %12s\n", "workload", "N", "C", "fused", "result");
      for (const auto& w : kiln::workloads::all()) {
        for (bool no_fuse : {false, true}) {
          RunOptions o;
          o.no_fuse = no_fuse;
          o.repeat = seeds_repeat;
          if (no_fuse) o.size = w.size / 2;  // unfused materializes every intermediate
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
        std::printf("%s (N=2000, C=1000%s):\n%s", w.name.c_str(),
                    w.solve ? ", its first compute" : "", s.c_str());
      }
      return 0;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 2;
  }
  return 0;
}
