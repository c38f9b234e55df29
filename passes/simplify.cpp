#include "passes/simplify.hpp"

namespace kiln {

namespace {

// Value class of a (possibly broadcast) scalar operand: 1 zero, 2 one, 3 two, 0 other or not a
// scalar.
int scalar_class(const Node& n) {
  const Node* s = &n;
  if (s->op == Op::Broadcast) s = s->in(0).get();
  if (s->op != Op::Scalar) return 0;
  if (s->attrs.slot >= 0) return s->attrs.cls;
  double v = scalar_as_double(*s);
  return v == 0 ? 1 : v == 1 ? 2 : v == 2 ? 3 : 0;
}

// An identity rule: fn(x, c) == x when the scalar operand on `side` has class `cls`.
struct IdentityRule {
  BinaryFn fn;
  int side;  // 0: the scalar is the left operand, 1: the right one
  int cls;
};
constexpr IdentityRule kIdentities[] = {
    {BinaryFn::Add, 1, 1}, {BinaryFn::Add, 0, 1}, {BinaryFn::Sub, 1, 1}, {BinaryFn::Mul, 1, 2},
    {BinaryFn::Mul, 0, 2}, {BinaryFn::Div, 1, 2}, {BinaryFn::Pow, 1, 2},
};

// Involutions: f(f(x)) == x.
constexpr UnaryFn kInvolutions[] = {UnaryFn::Neg, UnaryFn::Not};

NodeRef simplify_node(const NodeRef& n, std::vector<NodeRef> ins) {
  if (n->op == Op::Binary) {
    for (const auto& r : kIdentities) {
      if (r.fn != n->binary() || scalar_class(*ins[r.side]) != r.cls) continue;
      const NodeRef& x = ins[1 - r.side];
      if (x->dtype == n->dtype && x->shape == n->shape && x->chunks == n->chunks) return x;
    }
    // x ** 2 -> x * x (exactly what NumPy computes for a square, and no pow call).
    if (n->binary() == BinaryFn::Pow && scalar_class(*ins[1]) == 3 && ins[0]->dtype == n->dtype) {
      Attrs a;
      a.ints = {static_cast<int64_t>(BinaryFn::Mul)};
      return n->ctx->make(Op::Binary, n->dtype, n->shape, n->chunks, {ins[0], ins[0]}, a);
    }
  }
  if (n->op == Op::Unary && ins[0]->op == Op::Unary && ins[0]->unary() == n->unary()) {
    for (UnaryFn f : kInvolutions) {
      const NodeRef& x = ins[0]->in(0);
      if (f == n->unary() && x->dtype == n->dtype && x->chunks == n->chunks) return x;
    }
  }
  if (n->op == Op::Rechunk) {
    NodeRef x = ins[0]->op == Op::Rechunk ? ins[0]->in(0) : ins[0];
    if (x->chunks == n->chunks) return x;
    ins[0] = x;
  }
  return ins == n->inputs ? n : with_inputs(*n, std::move(ins));
}

}  // namespace

Graph simplify(const Graph& g) { return rewrite(g, simplify_node); }

}  // namespace kiln
