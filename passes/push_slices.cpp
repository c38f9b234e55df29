#include "passes/push_slices.hpp"

#include <map>
#include <set>

#include "ir/view.hpp"

namespace kiln {

namespace {

class Pusher {
 public:
  // The result of applying view `v` (an op over an input shaped like x) to x.
  NodeRef apply(const Node& v, const NodeRef& x) {
    auto key = std::make_pair(&v, x.get());
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    NodeRef r = apply_uncached(v, x);
    memo_.emplace(key, r);
    return r;
  }

 private:
  NodeRef apply_uncached(const Node& v, const NodeRef& x) {
    Context& ctx = *v.ctx;
    // A scalar broadcast is still a scalar broadcast, to the view's shape.
    const Node* s = x->op == Op::Broadcast ? x->in(0).get() : x.get();
    if (s->op == Op::Scalar) {
      NodeRef scalar = x->op == Op::Broadcast ? x->in(0) : x;
      if (v.shape.empty()) return scalar;
      return ctx.make(Op::Broadcast, x->dtype, v.shape, v.chunks, {scalar});
    }
    switch (op_category(x->op)) {
      case OpCategory::Leaf: {
        if (x->curand_leaf()) break;  // made whole by a library call: the view stays above it
        AffineMap in{x->attrs.offset, x->attrs.strides};
        auto m = compose_view(v, in);
        if (!m) break;
        Attrs a = x->attrs;
        a.offset = m->offset;
        a.strides = m->strides;
        return ctx.make(x->op, x->dtype, v.shape, v.chunks, {}, std::move(a));
      }
      case OpCategory::Elementwise: {
        std::vector<NodeRef> ins;
        for (const auto& in : x->inputs) ins.push_back(apply(v, in));
        return ctx.make(x->op, x->dtype, v.shape, v.chunks, std::move(ins), x->attrs);
      }
      case OpCategory::View:  // views compose at the leaves; the others stay materialized
      case OpCategory::Reduce:
      case OpCategory::Other:
        break;
    }
    return ctx.make(v.op, x->dtype, v.shape, v.chunks, {x}, v.attrs);
  }

  std::map<std::pair<const Node*, const Node*>, NodeRef> memo_;
};

// Transposes that are operands of a matrix product stay where they are: the GEMM reads a
// transposed operand in place, while pushing the transpose into an expression would compute the
// expression twice when the product reads it both ways (X^T X of a computed X: two operands
// materialized instead of one).
std::set<const Node*> transposed_gemm_operands(const Graph& g) {
  std::set<const Node*> keep;
  for (const Node* n : topo_order(g.outputs))
    if (n->op == Op::MatMul)
      for (const auto& in : n->inputs)
        if (in->op == Op::Transpose && op_category(in->in(0)->op) != OpCategory::Leaf)
          keep.insert(in.get());
  return keep;
}

}  // namespace

Graph push_slices(const Graph& g) {
  Pusher pusher;
  const std::set<const Node*> keep = transposed_gemm_operands(g);
  return rewrite(g, [&](const NodeRef& n, std::vector<NodeRef> ins) -> NodeRef {
    if (is_view(n->op) && !keep.count(n.get())) return pusher.apply(*n, ins[0]);
    return ins == n->inputs ? n : with_inputs(*n, std::move(ins));
  });
}

}  // namespace kiln
