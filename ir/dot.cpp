#include "ir/dot.hpp"

#include "ir/linalg.hpp"

// GCC 12 finds a -Wmaybe-uninitialized inside Boost.Graph's edge iterator when the graphviz
// writer is instantiated: Boost's code, not ours, so it is silenced for these headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#pragma GCC diagnostic pop
#include <unordered_map>

namespace kiln {

void write_dot(std::ostream& os, const FusedGraph& f) {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  std::vector<const Node*> order = topo_order(f.graph.outputs);
  std::unordered_map<const Node*, size_t> id;
  for (size_t k = 0; k < order.size(); ++k) id[order[k]] = k;
  G g(order.size());
  for (const Node* n : order)
    for (const auto& in : n->inputs) boost::add_edge(id.at(in.get()), id.at(n), g);
  // Kernel of each node: the group whose expression reaches it first (inputs of materialized
  // nodes belong to the group that computes that node).
  std::unordered_map<const Node*, int> kernel;
  for (size_t gi = 0; gi < f.groups.size(); ++gi)
    for (const auto& o : f.groups[gi].outputs) {
      std::vector<const Node*> stack{o.value.get()};
      if (o.target != o.value) kernel.emplace(o.target.get(), static_cast<int>(gi));
      while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (n != o.value.get() && f.producer.count(n)) continue;
        if (!kernel.emplace(n, static_cast<int>(gi)).second) continue;
        if (f.groups[gi].library) continue;  // its operands are read in place, not computed
        for (const auto& in : n->inputs) stack.push_back(in.get());
      }
    }
  std::unordered_map<const Node*, std::string> reason;
  for (const auto& b : f.boundaries) reason[b.node] = b.reason;
  static const char* colors[] = {"#fde2e4", "#e2ece9", "#dfe7fd", "#fff1e6",
                                 "#eae4e9", "#f0efeb", "#cddafd", "#bee1e6"};
  auto vertex_writer = [&](std::ostream& out, size_t v) {
    const Node* n = order[v];
    auto k = kernel.find(n);
    std::string label = node_label(*n);
    std::string r = reason.count(n) ? "\\n[" + reason.at(n) + "]" : "";
    bool library = k != kernel.end() && f.groups[k->second].library &&
                   (n->op == Op::MatMul || n->op == Op::Linalg || n->curand_leaf());
    std::string routine = n->op == Op::MatMul ? std::string("BLAS gemm")
                          : n->op == Op::Linalg
                              ? std::string("LAPACK ") + linalg_routines(LinalgFn(n->attrs.ints[0]))
                          : n->curand_leaf() ? std::string("cuRAND Philox4_32_10")
                                             : std::string();
    std::string where = k == kernel.end() ? ""
                        : library
                            ? "\\nlibrary call " + std::to_string(k->second) + " (" + routine + ")"
                            : "\\nkernel " + std::to_string(k->second);
    std::string quoted;
    for (char c : label + where + r) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
    out << "[label=\"" << quoted << "\", shape="
        << (library           ? "component"
            : reason.count(n) ? "box"
                              : "ellipse")
        << ", style=filled, fillcolor=\"" << (k != kernel.end() ? colors[k->second % 8] : "#ffffff")
        << "\"]";
  };
  boost::write_graphviz(os, g, vertex_writer);
}

}  // namespace kiln
