// Element-wise ops: NumPy broadcasting and type promotion, made explicit in the graph as
// Broadcast and Cast nodes, so later stages see operands of one shape and one compute type.
#include "frontend/build.hpp"

namespace kiln {
using namespace detail;

namespace {

// Functions with a float result whatever the operand's dtype (ufuncs.def's Result column).
bool is_float_ufunc(UnaryFn f) {
  return unary_result(f) == UnaryResult::Float || unary_result(f) == UnaryResult::Math;
}

// The type both operands are converted to before the op, from the promoted operand type.
DType compute_type(BinaryFn f, DType promoted) {
  switch (binary_result(f)) {
    case BinaryResult::Float:
      return float_result(promoted);
    case BinaryResult::Logical:
      return DType::Bool;
    case BinaryResult::Promoted:
    case BinaryResult::Compare:
      return promoted;
  }
  return promoted;
}

DType result_type(BinaryFn f, DType compute) {
  BinaryResult r = binary_result(f);
  return r == BinaryResult::Compare || r == BinaryResult::Logical ? DType::Bool : compute;
}

bool is_bitwise(BinaryFn f) {
  return f == BinaryFn::BitAnd || f == BinaryFn::BitOr || f == BinaryFn::BitXor ||
         f == BinaryFn::LeftShift || f == BinaryFn::RightShift;
}

// The dtypes an operation refuses, as NumPy does (float bitwise ops) or where NumPy's result
// dtype (int8 for bool // bool, bool % bool, bool ** bool and bool << bool) does not exist in Kiln.
void check_operand_types(BinaryFn f, DType a, DType b, DType ct) {
  auto refuse = [&](const std::string& what, const std::string& advice) {
    throw Error(std::string(binary_name(f)) + ": " + what + " (operands " + dtype_name(a) + ", " +
                    dtype_name(b) + ")" + advice,
                ErrorKind::Type);
  };
  if (f == BinaryFn::Sub && ct == DType::Bool)
    refuse("boolean subtract is not supported",
           "; use logical_xor-style expressions or astype(int)");
  if (is_bitwise(f) && is_float(ct)) refuse("only integer and bool operands are supported", "");
  bool shift = f == BinaryFn::LeftShift || f == BinaryFn::RightShift;
  bool int8_in_numpy = shift || f == BinaryFn::FloorDiv || f == BinaryFn::Mod ||
                       f == BinaryFn::FMod || f == BinaryFn::Pow;
  if (int8_in_numpy && ct == DType::Bool)
    refuse("bool operands are not supported",
           " (NumPy gives int8, which Kiln lacks); use astype(int32) first");
}

Array make_binary(BinaryFn f, NodeRef a, NodeRef b, DType promoted) {
  std::string op = binary_name(f);
  DType ct = compute_type(f, promoted);
  check_operand_types(f, a->dtype, b->dtype, ct);
  Shape shape = broadcast_shapes(op, a->shape, b->shape);
  Chunks chunks = elementwise_chunks(shape, {a, b});
  a = broadcast_node(cast_node(a, ct), shape, chunks);
  b = broadcast_node(cast_node(b, ct), shape, chunks);
  Attrs attrs;
  attrs.ints = {static_cast<int64_t>(f)};
  return Array(ctx().make(Op::Binary, result_type(f, ct), std::move(shape), std::move(chunks),
                          {std::move(a), std::move(b)}, std::move(attrs)));
}

void check_array(const Array& a, const char* op) {
  if (!a.node()) throw Error(std::string(op) + ": operand is an empty (default-constructed) Array");
}

}  // namespace

Array binary(BinaryFn f, const Array& a, const Array& b) {
  check_array(a, binary_name(f));
  check_array(b, binary_name(f));
  return make_binary(f, a.node(), b.node(), promote(a.dtype(), b.dtype()));
}

Array binary(BinaryFn f, const Array& a, Scalar b) {
  check_array(a, binary_name(f));
  DType t = promote_scalar(a.dtype(), b.kind);
  if (f == BinaryFn::Pow && is_int(t) && b.kind == ScalarKind::Int && b.i < 0)
    throw Error("power: integers to negative integer powers are not allowed (" +
                std::string(dtype_name(a.dtype())) + " array ** " + std::to_string(b.i) +
                "); use a float exponent, e.g. ** " + std::to_string(b.i) + ".0");
  return make_binary(f, a.node(), scalar_node(binary_name(f), b, t), t);
}

Array binary(BinaryFn f, Scalar a, const Array& b) {
  check_array(b, binary_name(f));
  DType t = promote_scalar(b.dtype(), a.kind);
  return make_binary(f, scalar_node(binary_name(f), a, t), b.node(), t);
}

Array unary(UnaryFn f, const Array& a) {
  check_array(a, unary_name(f));
  NodeRef in = a.node();
  DType out = in->dtype;
  if (f == UnaryFn::Neg && in->dtype == DType::Bool)
    throw Error("negative: the - operator is not supported for bool arrays (shape " +
                    shape_str(in->shape) + "); use logical_not or ~ instead",
                ErrorKind::Type);
  if (f == UnaryFn::Invert && is_float(in->dtype))
    throw Error(std::string("invert: only integer and bool operands are supported (operand ") +
                    dtype_name(in->dtype) + ", shape " + shape_str(in->shape) + ")",
                ErrorKind::Type);
  if (f == UnaryFn::Sign && in->dtype == DType::Bool)
    throw Error("sign: bool operands are not supported (shape " + shape_str(in->shape) +
                    "; NumPy has no bool loop either); use astype(int32) first",
                ErrorKind::Type);
  // NumPy 2: floor/ceil keep integer and bool dtypes; round of bool is float16 there, float64
  // here (Kiln has no float16, as for sqrt and the other float functions of bool).
  if (is_float_ufunc(f) || (f == UnaryFn::Round && in->dtype == DType::Bool)) {
    out = float_result(in->dtype);
    in = cast_node(in, out);
  } else if (unary_result(f) == UnaryResult::Bool) {
    out = DType::Bool;
  }
  Attrs attrs;
  attrs.ints = {static_cast<int64_t>(f)};
  return Array(ctx().make(Op::Unary, out, in->shape, in->chunks, {in}, attrs));
}

Array where(const Array& cond, const Array& a, const Array& b) {
  check_array(cond, "where");
  check_array(a, "where");
  check_array(b, "where");
  DType t = promote(a.dtype(), b.dtype());
  Shape shape =
      broadcast_shapes("where", broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  Chunks chunks = elementwise_chunks(shape, {cond.node(), a.node(), b.node()});
  NodeRef c = broadcast_node(cast_node(cond.node(), DType::Bool), shape, chunks);
  NodeRef x = broadcast_node(cast_node(a.node(), t), shape, chunks);
  NodeRef y = broadcast_node(cast_node(b.node(), t), shape, chunks);
  return Array(ctx().make(Op::Where, t, shape, chunks, {c, x, y}));
}

Array where(const Array& cond, Scalar a, const Array& b) {
  return where(cond, Array(scalar_node("where", a, promote_scalar(b.dtype(), a.kind))), b);
}
Array where(const Array& cond, const Array& a, Scalar b) {
  return where(cond, a, Array(scalar_node("where", b, promote_scalar(a.dtype(), b.kind))));
}
Array where(const Array& cond, Scalar a, Scalar b) {
  DType ta = a.kind == ScalarKind::Float ? DType::Float64
             : a.kind == ScalarKind::Int ? DType::Int64
                                         : DType::Bool;
  DType tb = b.kind == ScalarKind::Float ? DType::Float64
             : b.kind == ScalarKind::Int ? DType::Int64
                                         : DType::Bool;
  DType t = promote(ta, tb);
  return where(cond, Array(scalar_node("where", a, t)), Array(scalar_node("where", b, t)));
}

// NumPy's clip with scalar bounds: min(max(x, lo), hi) where max and min keep x on a tie, so a
// zero at a bound keeps its own sign and NaN stays NaN (found by the fuzzer: clip(-0.0, 0, 1) is
// -0.0; np.maximum, and NumPy's clip with array bounds, take the bound's zero instead).
Array clip(const Array& a, Scalar lo, Scalar hi) {
  check_array(a, "clip");
  DType t = promote_scalar(promote_scalar(a.dtype(), lo.kind), hi.kind);
  Array x = a.astype(t);
  Array low(scalar_node("clip", lo, t)), high(scalar_node("clip", hi, t));
  Array y = where(x < low, low, x);
  return where(high < y, high, y);
}

Array astype(const Array& a, DType t) { return a.astype(t); }

Array Array::astype(DType t) const {
  check_array(*this, "astype");
  return Array(cast_node(node_, t));
}

}  // namespace kiln
