#include "codegen/legalize.hpp"

#include <limits>

#include "support/error.hpp"

namespace kiln::kir {

namespace {

class Legalizer {
 public:
  explicit Legalizer(const Kernel& k) : in_(k) {
    out_ = k;
    out_.values.clear();
  }

  Kernel run() {
    map_.assign(in_.values.size(), -1);
    for (size_t v = 0; v < in_.values.size(); ++v) map_[v] = rewrite(in_.values[v]);
    for (auto& o : out_.outputs) {
      o.value = map_[o.value];
      if (o.index_value >= 0) o.index_value = map_[o.index_value];
    }
    return std::move(out_);
  }

 private:
  int add(Value v) {
    out_.values.push_back(v);
    return static_cast<int>(out_.values.size()) - 1;
  }
  int constant(DType t, double value) {
    Value v{VOp::Const, t};
    if (is_float(t))
      v.f = t == DType::Float32 ? static_cast<double>(static_cast<float>(value)) : value;
    else
      v.i = static_cast<int64_t>(value);
    return add(v);
  }
  int unary(UnaryFn f, DType t, int a) {
    Value v{VOp::Unary, t};
    v.fn = uint8_t(f);
    v.a = a;
    return add(v);
  }
  int binary(BinaryFn f, DType t, int a, int b) {
    Value v{VOp::Binary, t};
    v.fn = uint8_t(f);
    v.a = a;
    v.b = b;
    return add(v);
  }
  int compare(BinaryFn f, int a, int b) { return binary(f, DType::Bool, a, b); }
  int select(DType t, int c, int a, int b) {
    Value v{VOp::Select, t};
    v.a = c;
    v.b = a;
    v.c = b;
    return add(v);
  }
  int cast(DType t, int a) {
    Value v{VOp::Cast, t};
    v.a = a;
    return add(v);
  }
  int both(int p, int q) { return binary(BinaryFn::And, DType::Bool, p, q); }
  int differ(int p, int q) { return binary(BinaryFn::Ne, DType::Bool, p, q); }  // bools

  // The value for in_.values[v], its operands already rewritten.
  int rewrite(const Value& v) {
    Value w = v;
    for (int* op : {&w.a, &w.b, &w.c})
      if (*op >= 0) *op = map_[*op];
    if (v.op == VOp::Unary) {
      DType t = out_.values[w.a].type;
      if (!is_primitive(UnaryFn(v.fn), t)) return unary_composite(UnaryFn(v.fn), t, w.a);
    } else if (v.op == VOp::Binary) {
      DType t = out_.values[w.a].type;
      if (!is_primitive(BinaryFn(v.fn), t)) return binary_composite(BinaryFn(v.fn), t, w.a, w.b);
    }
    return add(w);
  }

  // The composites (is_primitive false), each in the order of operations docs/KERNEL_IR.md
  // gives, so the bits are the same as evaluating the definition directly.
  int unary_composite(UnaryFn f, DType t, int x) {
    if (f == UnaryFn::Sign) {
      if (t == DType::Bool) return x;
      int zero = constant(t, 0);
      int pos = compare(BinaryFn::Gt, x, zero), neg = compare(BinaryFn::Lt, x, zero);
      if (!is_float(t)) return binary(BinaryFn::Sub, t, cast(t, pos), cast(t, neg));
      // sign(+-0) is +0, sign(NaN) is NaN (x itself).
      int zero_or_nan = select(t, compare(BinaryFn::Ne, x, x), x, zero);
      return select(t, pos, constant(t, 1), select(t, neg, constant(t, -1), zero_or_nan));
    }
    if (f == UnaryFn::Sigmoid) {
      int e = unary(UnaryFn::Exp, t, unary(UnaryFn::Neg, t, x));
      int one = constant(t, 1);
      return binary(BinaryFn::Div, t, one, binary(BinaryFn::Add, t, one, e));
    }
    if (f == UnaryFn::IsFinite) {
      if (!is_float(t)) return constant(DType::Bool, 1);
      return compare(BinaryFn::Lt, unary(UnaryFn::Abs, t, x),
                     constant(t, std::numeric_limits<double>::infinity()));
    }
    if (f == UnaryFn::Not) {
      if (t == DType::Bool) return unary(UnaryFn::Invert, DType::Bool, x);
      return compare(BinaryFn::Eq, x, constant(t, 0));
    }
    throw InternalError(std::string("legalize: no composite form of ") + unary_name(f));
  }

  int binary_composite(BinaryFn f, DType t, int a, int b) {
    if (f == BinaryFn::Mod) {
      // The remainder with the divisor's sign: fmod's, moved by b where their signs differ.
      int zero = constant(t, 0);
      int r = binary(BinaryFn::FMod, t, a, b);
      int r_neg = compare(BinaryFn::Lt, r, zero), b_neg = compare(BinaryFn::Lt, b, zero);
      // r != 0, ordered (a NaN r is not fixed): r < 0 or r > 0.
      int nonzero = binary(BinaryFn::Or, DType::Bool, r_neg, compare(BinaryFn::Gt, r, zero));
      int fixed = select(t, both(nonzero, differ(r_neg, b_neg)), binary(BinaryFn::Add, t, r, b), r);
      if (!is_float(t)) return fixed;
      // A zero remainder has the divisor's sign (np.remainder(-5.0, 2.5) is +0.0).
      int signed_zero = binary(BinaryFn::CopySign, t, zero, b);
      return select(t, compare(BinaryFn::Eq, r, zero), signed_zero, fixed);
    }
    if (f == BinaryFn::FloorDiv && is_float(t)) {
      // NumPy's npy_floor_divide: a / b when b is 0; else the quotient of a - fmod(a, b)
      // (adjusted to Python's remainder sign), snapped to the nearest integer, and a signed
      // zero (the sign of a / b) when it is zero.
      int zero = constant(t, 0), one = constant(t, 1);
      int quotient = binary(BinaryFn::Div, t, a, b);
      int mod = binary(BinaryFn::FMod, t, a, b);
      int div = binary(BinaryFn::Div, t, binary(BinaryFn::Sub, t, a, mod), b);
      int adjust = both(compare(BinaryFn::Ne, mod, zero),  // unordered: a NaN mod adjusts
                        differ(compare(BinaryFn::Lt, b, zero), compare(BinaryFn::Lt, mod, zero)));
      div = select(t, adjust, binary(BinaryFn::Sub, t, div, one), div);
      int fl = unary(UnaryFn::Floor, t, div);
      int up = compare(BinaryFn::Gt, binary(BinaryFn::Sub, t, div, fl), constant(t, 0.5));
      fl = select(t, up, binary(BinaryFn::Add, t, fl, one), fl);
      int signed_zero = binary(BinaryFn::CopySign, t, zero, quotient);
      int r = select(t, compare(BinaryFn::Ne, div, zero), fl, signed_zero);
      return select(t, compare(BinaryFn::Eq, b, zero), quotient, r);
    }
    throw InternalError(std::string("legalize: no composite form of ") + binary_name(f));
  }

  const Kernel& in_;
  Kernel out_;
  std::vector<int> map_;  // in_'s value -> out_'s
};

}  // namespace

bool is_primitive(UnaryFn f, DType t) {
  switch (f) {
    case UnaryFn::Sign:
    case UnaryFn::Sigmoid:
    case UnaryFn::IsFinite:
    case UnaryFn::Not:
      return false;
    case UnaryFn::Neg:
    case UnaryFn::Abs:
    case UnaryFn::Sqrt:
    case UnaryFn::Exp:
    case UnaryFn::Expm1:
    case UnaryFn::Log:
    case UnaryFn::Log1p:
    case UnaryFn::Sin:
    case UnaryFn::Cos:
    case UnaryFn::Tan:
    case UnaryFn::Tanh:
    case UnaryFn::Arcsin:
    case UnaryFn::Arccos:
    case UnaryFn::Arctan:
    case UnaryFn::Floor:
    case UnaryFn::Ceil:
    case UnaryFn::Round:
    case UnaryFn::IsNan:
    case UnaryFn::Invert:
      return true;
  }
  return true;
}

bool is_primitive(BinaryFn f, DType t) {
  switch (f) {
    case BinaryFn::Mod:
      return false;
    case BinaryFn::FloorDiv:
      return !is_float(t);  // integer floor division is a primitive (x // 0 is 0)
    case BinaryFn::Add:
    case BinaryFn::Sub:
    case BinaryFn::Mul:
    case BinaryFn::Div:
    case BinaryFn::Pow:
    case BinaryFn::Lt:
    case BinaryFn::Le:
    case BinaryFn::Gt:
    case BinaryFn::Ge:
    case BinaryFn::Eq:
    case BinaryFn::Ne:
    case BinaryFn::And:
    case BinaryFn::Or:
    case BinaryFn::Max:
    case BinaryFn::Min:
    case BinaryFn::BitAnd:
    case BinaryFn::BitOr:
    case BinaryFn::BitXor:
    case BinaryFn::LeftShift:
    case BinaryFn::RightShift:
    case BinaryFn::FMod:
    case BinaryFn::CopySign:
      return true;
  }
  return true;
}

Kernel legalize(const Kernel& k) { return Legalizer(k).run(); }

}  // namespace kiln::kir
