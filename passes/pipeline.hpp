// The pass pipeline, in one place. Each step is a function graph -> graph; the runner times it
// (KILN_DEBUG>=1) and prints the IR after it (KILN_DEBUG>=2 or an explicit dump stream).
#pragma once
#include <ostream>

#include "ir/fused.hpp"

namespace kiln {

struct PipelineOptions {
  bool fuse = true;
  bool row_fusion = true;  // fuse's merge_rows
  bool gpu = false;        // the plan's device prints CUDA (fuse: no merge into one-thread kernels)
  bool push_slices = true;
  std::ostream* dump = nullptr;  // IR after each pass and the fusion summary
};

FusedGraph run_pipeline(const Graph& g, const PipelineOptions& opt);

}  // namespace kiln
