#include "codegen/kernel_ir.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "support/hash.hpp"

namespace kiln::kir {

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel rank=" << rank << "\n";
  for (size_t k = 0; k < leaves.size(); ++k) {
    const Leaf& l = leaves[k];
    os << "  leaf " << k << ": " << dtype_name(l.dtype) << " ";
    switch (l.kind) {
      case LeafKind::Memory:
        os << "memory P[" << l.pointer << "]";
        break;
      case LeafKind::Random:
        os << "random " << random_name(l.random) << " stream=" << l.stream << " seed=$"
           << l.seed_param;
        if (l.random == RandomKind::Integers) os << " [" << l.low << "," << l.high << ")";
        break;
      case LeafKind::Iota:
        os << "iota";
        break;
    }
    os << " inner_stride=" << l.inner_stride << "\n";
  }
  for (size_t k = 0; k < params.size(); ++k)
    os << "  param $" << k << ": " << dtype_name(params[k]) << "\n";
  for (size_t k = 0; k < values.size(); ++k) {
    const Value& v = values[k];
    os << "  v" << k << " = " << dtype_name(v.type) << " ";
    switch (v.op) {
      case VOp::Param:
        os << "param $" << v.index;
        break;
      case VOp::Leaf:
        os << "leaf " << v.index;
        break;
      case VOp::Const:
        if (is_float(v.type)) {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%a", v.f);  // exact
          os << "const " << buf;
        } else {
          os << "const " << v.i;
        }
        break;
      case VOp::Unary:
        os << unary_name(UnaryFn(v.fn)) << " v" << v.a;
        break;
      case VOp::Binary:
        os << binary_name(BinaryFn(v.fn)) << " v" << v.a << ", v" << v.b;
        break;
      case VOp::Select:
        os << "select v" << v.a << ", v" << v.b << ", v" << v.c;
        break;
      case VOp::Cast:
        os << "cast v" << v.a;
        break;
      case VOp::Row:
        os << "row out " << v.index;
        break;
    }
    os << "\n";
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Output& o = outputs[k];
    os << "  out " << k << ": " << (o.reduce ? std::string("reduce ") + reduce_name(o.fn) : "store")
       << " " << dtype_name(o.type) << " v" << o.value;
    if (o.reduce) os << " mask=" << o.reduced_mask;
    if (o.index_value >= 0) os << " index=v" << o.index_value;
    if (o.row) os << " row";
    os << "\n";
  }
  return os.str();
}

std::vector<bool> Kernel::needed_by_stage(bool row) const {
  std::vector<bool> need(values.size(), false);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].row != row) continue;
    need[outputs[o].value] = true;
    if (outputs[o].index_value >= 0) need[outputs[o].index_value] = true;
  }
  for (size_t v = values.size(); v-- > 0;)  // operands come before their users
    if (need[v])
      for (int u : {values[v].a, values[v].b, values[v].c})
        if (u >= 0) need[u] = true;
  return need;
}

uint64_t Kernel::hash() const {
  std::string s = str();
  return hash_bytes(0x6b696c6e, s);  // "kiln"
}

double reduce_identity_f(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::Prod:
      return 1.0;
    case ReduceFn::Min:
    case ReduceFn::ArgMin:
      return std::numeric_limits<double>::infinity();
    case ReduceFn::Max:
    case ReduceFn::ArgMax:
      return -std::numeric_limits<double>::infinity();
    case ReduceFn::All:
      return 1.0;
    case ReduceFn::Sum:
    case ReduceFn::Mean:
    case ReduceFn::Any:
      return 0.0;
  }
  return 0.0;
}

int64_t reduce_identity_i(ReduceFn fn, DType t) {
  bool i32 = t == DType::Int32;
  switch (fn) {
    case ReduceFn::Prod:
      return 1;
    case ReduceFn::Min:
    case ReduceFn::ArgMin:
      if (t == DType::Bool) return 1;
      return i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
    case ReduceFn::Max:
    case ReduceFn::ArgMax:
      if (t == DType::Bool) return 0;
      return i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    case ReduceFn::All:
      return 1;
    case ReduceFn::Sum:
    case ReduceFn::Mean:
    case ReduceFn::Any:
      return 0;
  }
  return 0;
}

}  // namespace kiln::kir
