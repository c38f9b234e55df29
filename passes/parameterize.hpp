// parameterize: strips the values that change between calls (scalar values, buffer pointers,
// random seeds) out of a graph, leaving a *template* graph that only holds structure, plus the
// list of values. Structurally equal expressions give the same (interned) template, which is the
// key of the plan cache; the values flow into the cached plan's kernels as parameters.
#pragma once
#include <memory>

#include "ir/graph.hpp"

namespace kiln {

struct ParamValue {
  double f = 0;
  int64_t i = 0;
  const void* ptr = nullptr;
  std::shared_ptr<const void> owner;
  MemoryPlace place;  // Buffer: where ptr points
};

// Slots are numbered in a deterministic order (topological order of the graph).
Graph parameterize(const Graph& g, std::vector<ParamValue>* params);

}  // namespace kiln
