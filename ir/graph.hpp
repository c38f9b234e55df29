// A graph is the list of output nodes; everything reachable from them belongs to it.
#pragma once
#include <functional>
#include <ostream>
#include <string>

#include "ir/node.hpp"

namespace kiln {

struct Graph {
  std::vector<NodeRef> outputs;
};

// Rebuilds a graph bottom-up: fn(node, new_inputs) returns the node's replacement. Nodes whose
// inputs did not change and for which fn returns the node itself are shared, not copied.
using RewriteFn = std::function<NodeRef(const NodeRef& node, std::vector<NodeRef> inputs)>;
Graph rewrite(const Graph& g, const RewriteFn& fn);

// The same node with other inputs (and optionally another shape/chunks), interned.
NodeRef with_inputs(const Node& n, std::vector<NodeRef> inputs);

// Text form, one node per line in topological order: "%3 = Binary[add] f64 (4, 4) c(2x2, 2x2) %1,
// %2".
void print_graph(std::ostream& os, const Graph& g);
std::string node_label(const Node& n);  // "Binary[add] f64 (4, 4)"

}  // namespace kiln
