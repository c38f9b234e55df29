// fuse: partitions a graph into groups, each of which becomes one kernel run once per block.
// A group computes, per element of its iteration domain, the whole element-wise/view expression
// below its outputs (chains and diamonds: a shared node is computed once per element), and
// either stores the result or folds it into a reduction's per-block partials. Groups end only
// where an array must exist in memory; each such boundary is recorded with its reason.
// Several groups over the same domain that do not depend on each other are merged into one
// kernel with several outputs (compute(x.sum(), x.max()) reads x once). A group that reads a
// reduction along rows back along those rows absorbs its group (row fusion: X.T @ f(X @ b) reads
// X once; docs/KERNEL_IR.md §8.7).
// A group also ends where its estimated size passes a limit (compile time grows faster than the
// kernel): that boundary's reason is "kernel size limit".
// For a GPU (`gpu`: cuda and cuda-emu, whose kernels the CUDA printer splits over threads by the
// dims their reductions keep), merges that would leave a kernel no such dim are not made.
// Requires: push_slices has run (views sit on leaves or on materialized nodes).
#pragma once
#include <string>

#include "ir/fused.hpp"

namespace kiln {

FusedGraph fuse(const Graph& g, bool enabled, bool row_fusion = true, bool gpu = false);

// The summary `--emit-ir` prints: nodes before/after, kernels, every boundary and its reason.
std::string fusion_summary(const FusedGraph& f, size_t nodes_before);

}  // namespace kiln
