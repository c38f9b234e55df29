#include "passes/pipeline.hpp"

#include <chrono>
#include <iostream>

#include "passes/fuse.hpp"
#include "passes/push_slices.hpp"
#include "passes/simplify.hpp"
#include "support/flags.hpp"

namespace kiln {

namespace {

std::ostream* dump_stream(const PipelineOptions& opt) {
  if (opt.dump) return opt.dump;
  return flags().debug >= 2 ? &std::cerr : nullptr;
}

template <class F>
Graph run_pass(const char* name, const Graph& g, const PipelineOptions& opt, F&& pass) {
  auto t0 = std::chrono::steady_clock::now();
  Graph out = pass(g);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (flags().debug >= 1) std::cerr << "kiln: pass " << name << ": " << ms << " ms\n";
  if (std::ostream* os = dump_stream(opt)) {
    *os << "; IR after " << name << "\n";
    print_graph(*os, out);
  }
  return out;
}

}  // namespace

FusedGraph run_pipeline(const Graph& input, const PipelineOptions& opt) {
  size_t nodes_before = topo_order(input.outputs).size();
  if (std::ostream* os = dump_stream(opt)) {
    *os << "; IR as built\n";
    print_graph(*os, input);
  }
  Graph g = input;
  // 1. Identities first, so later passes see fewer nodes.
  g = run_pass("simplify", g, opt, simplify);
  // 2. Views sink into leaves (needs no fusion decisions; must precede fuse). Skipped with
  //    --no-push-slices only: fuse materializes the input of a view left on a computed array.
  if (opt.push_slices) g = run_pass("push_slices", g, opt, push_slices);
  // 3. Partition into kernels.
  FusedGraph f = fuse(g, opt.fuse, opt.row_fusion, opt.gpu);
  if (std::ostream* os = dump_stream(opt)) *os << fusion_summary(f, nodes_before);
  return f;
}

}  // namespace kiln
