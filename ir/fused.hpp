// The fused graph: the array graph partitioned into groups, each run as one kernel per block.
// Produced by passes/fuse, consumed by codegen/lower and the runtime's planner.
#pragma once
#include <string>
#include <unordered_map>

#include "ir/graph.hpp"

namespace kiln {

struct GroupOutput {
  NodeRef value;   // the expression the kernel evaluates per element of the domain
  NodeRef target;  // the materialized node it fills: value itself, a Reduce, or a Concat
  bool reduce = false;
  int64_t offset = 0;  // element offset into target (a Concat piece), C order
  // A reduction along the domain's innermost dim that the group's other outputs read row by
  // row: computed in the kernel's row stage (codegen/kernel_ir.hpp). Row outputs come first.
  bool row = false;
};

struct Group {
  std::vector<GroupOutput> outputs;
  // A library call (MatMul, Linalg): one output, computed by BLAS/LAPACK calls instead of a
  // kernel: value is the call, target the call itself or a concatenation the call writes its
  // result into, at offset (passes/fuse.cpp: placed_library_results). Its operands are
  // materialized arrays or Buffer leaves, read in place through their views.
  bool library = false;
  Shape domain;
  Chunks chunks;
  std::vector<int> deps;  // groups whose materialized nodes this group reads
};

struct Boundary {
  const Node* node;
  std::string reason;
};

struct FusedGraph {
  Graph graph;
  std::vector<Group> groups;                                   // in an order where deps come first
  std::unordered_map<const Node*, std::vector<int>> producer;  // materialized node -> its groups
  std::vector<Boundary> boundaries;
  size_t node_count = 0;
};

}  // namespace kiln
