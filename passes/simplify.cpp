#include "passes/simplify.hpp"

namespace kiln {

namespace {

// Value class of a (possibly broadcast) scalar operand; Other when it is not a scalar.
ScalarClass scalar_class(const Node& n) {
  const Node* s = &n;
  if (s->op == Op::Broadcast) s = s->in(0).get();
  if (s->op != Op::Scalar) return ScalarClass::Other;
  if (s->attrs.slot >= 0) return ScalarClass(s->attrs.cls);
  return scalar_class_of(*s);
}

// An identity rule: fn(x, c) == x, bit for bit, when the scalar operand on `side` has class `cls`
// (and, for `ints_only`, the operation is on integers or bools). Reviewed for IEEE special values:
//   x + -0.0 == x for every float x (NaN payloads included), but x + 0.0 turns -0.0 into +0.0, so
//   adding +0 is an identity on integers only; x - 0.0 == x (-0.0 - 0.0 is -0.0) but x - -0.0 is
//   x + 0.0; x * 1, x / 1 and x ** 1 are exact for NaN, infinities and signed zeros, and on
//   integers cannot overflow.
struct IdentityRule {
  BinaryFn fn;
  int side;  // 0: the scalar is the left operand, 1: the right one
  ScalarClass cls;
  bool ints_only;
};
constexpr IdentityRule kIdentities[] = {
    {BinaryFn::Add, 1, ScalarClass::Zero, true},
    {BinaryFn::Add, 0, ScalarClass::Zero, true},
    {BinaryFn::Add, 1, ScalarClass::NegZero, false},
    {BinaryFn::Add, 0, ScalarClass::NegZero, false},
    {BinaryFn::Sub, 1, ScalarClass::Zero, false},
    {BinaryFn::Mul, 1, ScalarClass::One, false},
    {BinaryFn::Mul, 0, ScalarClass::One, false},
    {BinaryFn::Div, 1, ScalarClass::One, false},
    {BinaryFn::Pow, 1, ScalarClass::One, false},
};

// Involutions: f(f(x)) == x.
constexpr UnaryFn kInvolutions[] = {UnaryFn::Neg, UnaryFn::Not, UnaryFn::Invert};

NodeRef simplify_node(const NodeRef& n, std::vector<NodeRef> ins) {
  if (n->op == Op::Binary) {
    for (const auto& r : kIdentities) {
      if (r.fn != n->binary() || scalar_class(*ins[r.side]) != r.cls) continue;
      if (r.ints_only && is_float(ins[r.side]->dtype)) continue;
      const NodeRef& x = ins[1 - r.side];
      if (x->dtype == n->dtype && x->shape == n->shape && x->chunks == n->chunks) return x;
    }
    // x ** 2 -> x * x (exactly what NumPy computes for a square, and no pow call).
    if (n->binary() == BinaryFn::Pow && scalar_class(*ins[1]) == ScalarClass::Two &&
        ins[0]->dtype == n->dtype) {
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
