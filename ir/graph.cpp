#include "ir/graph.hpp"

#include "ir/linalg.hpp"

#include "support/error.hpp"

#include <sstream>
#include <unordered_map>

namespace kiln {

NodeRef with_inputs(const Node& n, std::vector<NodeRef> inputs) {
  return n.ctx->make(n.op, n.dtype, n.shape, n.chunks, std::move(inputs), n.attrs);
}

Graph rewrite(const Graph& g, const RewriteFn& fn) {
  std::unordered_map<const Node*, NodeRef> done;
  std::vector<const Node*> order = topo_order(g.outputs);
  // topo_order returns raw pointers; keep the originals alive through their outputs' ownership.
  std::unordered_map<const Node*, NodeRef> self;
  for (const auto& out : g.outputs) self[out.get()] = out;
  for (const Node* n : order) {
    for (const auto& in : n->inputs) self.emplace(in.get(), in);
  }
  for (const Node* n : order) {
    std::vector<NodeRef> ins;
    ins.reserve(n->inputs.size());
    for (const auto& in : n->inputs) ins.push_back(done.at(in.get()));
    done[n] = fn(self.at(n), std::move(ins));
  }
  Graph out;
  for (const auto& o : g.outputs) out.outputs.push_back(done.at(o.get()));
  return out;
}

std::string node_label(const Node& n) {
  std::ostringstream os;
  os << op_name(n.op);
  const Attrs& a = n.attrs;
  switch (n.op) {
    case Op::Unary:
      os << "[" << unary_name(n.unary()) << "]";
      break;
    case Op::Binary:
      os << "[" << binary_name(n.binary()) << "]";
      break;
    case Op::Linalg:
      os << "[" << linalg_name(LinalgFn(a.ints[0])) << "]";
      break;
    case Op::Reduce: {
      os << "[" << reduce_name(n.reduce_fn()) << " axes=";
      auto ax = n.reduce_axes();
      for (size_t k = 0; k < ax.size(); ++k) os << (k ? "," : "") << ax[k];
      if (n.keepdims()) os << " keepdims";
      os << "]";
      break;
    }
    case Op::Scalar:
      if (a.slot >= 0)
        os << "[$" << a.slot
           << (a.cls == 1   ? "=0"
               : a.cls == 2 ? "=1"
               : a.cls == 3 ? "=2"
               : a.cls == 4 ? "=-0"
                            : "")
           << "]";
      else if (is_float(n.dtype))
        os << "[" << a.f << "]";
      else
        os << "[" << a.i << "]";
      break;
    case Op::Random: {
      os << "[" << random_name(RandomKind(a.ints[0])) << " stream=" << a.ints[1];
      if (n.curand_leaf()) os << " cuRAND";
      if (a.slot >= 0)
        os << " seed=$" << a.slot;
      else
        os << " seed=" << a.i;
      break;
    }
    case Op::Buffer:
      os << "[" << (a.slot >= 0 ? "$" + std::to_string(a.slot) : std::string("ptr"));
      break;
    case Op::Iota:
      os << "[";
      break;
    case Op::Slice: {
      os << "[";
      for (size_t d = 0; d * 2 < a.ints.size(); ++d)
        os << (d ? "," : "") << a.ints[2 * d] << "::" << a.ints[2 * d + 1];
      os << "]";
      break;
    }
    case Op::Transpose:
    case Op::Concat: {
      os << "[";
      for (size_t k = 0; k < a.ints.size(); ++k) os << (k ? "," : "") << a.ints[k];
      os << "]";
      break;
    }
    case Op::Where:  // no attributes worth showing
    case Op::MatMul:
    case Op::Cast:
    case Op::Broadcast:
    case Op::Reshape:
    case Op::Rechunk:
      break;
  }
  if ((n.op == Op::Buffer || n.op == Op::Random || n.op == Op::Iota)) {
    os << " off=" << a.offset << " strides=";
    for (size_t k = 0; k < a.strides.size(); ++k) os << (k ? "," : "") << a.strides[k];
    os << "]";
  }
  os << " " << dtype_name(n.dtype) << " " << shape_str(n.shape);
  return os.str();
}

void print_graph(std::ostream& os, const Graph& g) {
  std::unordered_map<const Node*, int> id;
  for (const Node* n : topo_order(g.outputs)) {
    int k = static_cast<int>(id.size());
    id[n] = k;
    os << "  %" << k << " = " << node_label(*n);
    if (!n->shape.empty()) os << " chunks=" << chunks_str(n->chunks);
    for (size_t i = 0; i < n->inputs.size(); ++i)
      os << (i ? ", " : " <- ") << "%" << id.at(n->inputs[i].get());
    os << "\n";
  }
  os << "  outputs:";
  for (const auto& o : g.outputs) os << " %" << id.at(o.get());
  os << "\n";
}

}  // namespace kiln
