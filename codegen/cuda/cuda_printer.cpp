// The CUDA printer (cuda_printer.hpp). Element semantics follow docs/KERNEL_IR.md and the
// interpreter (codegen/interp/interp.cpp), whose names the prelude's helpers share; where the
// interpreter folds a row in strips, the printed row loops do the same steps in the same order.
#include "codegen/cuda/cuda_printer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "codegen/vector_math.hpp"
#include "support/error.hpp"

namespace kiln::cuda {

namespace {

constexpr int64_t kStrip = 1024;       // the interpreter's strips of inner float sums
constexpr int64_t kRandomStrip = 256;  // ... in kernels with random leaves

const char* ctype(DType t) {
  switch (t) {
    case DType::Bool:
      return "kiln_u8";
    case DType::Int32:
      return "kiln_i32";
    case DType::Int64:
      return "kiln_i64";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

std::string hex_u64(uint64_t x) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llxull", static_cast<unsigned long long>(x));
  return b;
}

// A double exactly: a hex literal, or its bits where it is not finite.
std::string f64_literal(double f) {
  if (!std::isfinite(f)) {
    uint64_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return "kiln_f64_from_bits(" + hex_u64(bits) + ")";
  }
  char b[48];
  std::snprintf(b, sizeof b, "%a", f);
  return b;
}

std::string literal(DType t, double f, int64_t i) {
  switch (t) {
    case DType::Float64:
      return f64_literal(f);
    case DType::Float32:
      return "(float)" + f64_literal(f);
    case DType::Bool:
      return i != 0 ? "(kiln_u8)1" : "(kiln_u8)0";
    case DType::Int32:
      return "(kiln_i32)(kiln_i64)" + hex_u64(static_cast<uint64_t>(i));
    case DType::Int64:
      return "(kiln_i64)" + hex_u64(static_cast<uint64_t>(i));
  }
  return "?";
}

std::string identity(const kir::Output& o) {
  return literal(o.type, kir::reduce_identity_f(o.fn), kir::reduce_identity_i(o.fn, o.type));
}

const char* fold_fn(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::Sum:
    case ReduceFn::Mean:
      return "kiln_fold_sum";
    case ReduceFn::Prod:
      return "kiln_fold_prod";
    case ReduceFn::Min:
      return "kiln_fold_min";
    case ReduceFn::Max:
      return "kiln_fold_max";
    case ReduceFn::All:
      return "kiln_fold_all";
    case ReduceFn::Any:
      return "kiln_fold_any";
    case ReduceFn::ArgMin:
    case ReduceFn::ArgMax:
      break;
  }
  throw InternalError("cuda printer: argmin/argmax fold through kiln_arg_fold");
}

// The C math function for a float type: sin / sinf.
std::string math_call(const std::string& name, DType t) {
  return name + (t == DType::Float32 ? "f" : "");
}

class Printer {
 public:
  Printer(const kir::Kernel& k, Flavor flavor, bool kiln_math, int64_t rows_from)
      : k_(k), flavor_(flavor), kiln_math_(kiln_math) {
    int r = k.rank;
    for (const auto& l : k.leaves) {
      random_ = random_ || l.kind == kir::LeafKind::Random;
      normals_ = normals_ || (l.kind == kir::LeafKind::Random && l.random == RandomKind::Normal);
    }
    for (const auto& o : k.outputs) {
      bool inner = o.reduce && r > 0 && ((o.reduced_mask >> (r - 1)) & 1u);
      inner_reduced_.push_back(inner);
      compensated_.push_back(o.reduce && is_float(o.type) &&
                             (o.fn == ReduceFn::Sum || o.fn == ReduceFn::Mean));
      inner_compensated_.push_back(inner && compensated_.back());
    }
    for (int row = 0; row < 2; ++row) {
      bool any = false;
      for (size_t o = 0; o < k.outputs.size(); ++o)
        any = any || (inner_compensated_[o] && k.outputs[o].row == (row == 1));
      strips_[row] = r > 0 && (random_ || any);
    }
    need_[0] = k.needed_by_stage(false);
    need_[1] = k.needed_by_stage(true);
    shape_ = classify();
    shape_.rows_from = rows_from;
  }

  Printed run() {
    Printed p;
    p.shape = shape_;
    s_ = "\n// kernel " + hex_u64(k_.hash()) + ": " + mode_name() + "\n";
    print_acc();
    s_ += block_tree(flavor_);
    print_thread();
    if (flavor_ == Flavor::Emu)
      print_emu_entry();
    else
      print_device_entry();
    // The prelude last: it holds only the Kiln math functions the body calls (compiling all of
    // them into every kernel doubled NVRTC's time for kernels that call none).
    p.source = prelude(flavor_, normals_, kiln_fns_) + s_;
    return p;
  }

 private:
  KernelShape classify() const {
    KernelShape sh;
    int r = k_.rank;
    uint32_t all = r > 0 ? ((1u << r) - 1) : 0, keep = all;
    bool any_reduce = false, all_full = true;
    for (const auto& o : k_.outputs) {
      if (!o.reduce) continue;
      any_reduce = true;
      uint32_t kept = all & ~o.reduced_mask;
      keep &= kept;
      all_full = all_full && kept == 0;
    }
    if (!k_.has_row_stage() && all_full) {
      sh.mode = KernelShape::Mode::Flat;
      sh.tree = any_reduce;
    } else {
      for (int d = 0; d < r; ++d)
        if ((keep >> d) & 1u) sh.parallel.push_back(d);
      sh.mode = sh.parallel.empty() ? KernelShape::Mode::Serial : KernelShape::Mode::Owned;
      // The split (KernelShape::split): each reduction's element is one item's, so a thread's
      // partials are one accumulator per reduction; no row stage.
      bool exact = sh.mode == KernelShape::Mode::Owned && !k_.has_row_stage();
      for (const auto& o : k_.outputs)
        exact = exact && (!o.reduce || (all & ~o.reduced_mask) == keep);
      for (int d = 0; exact && d + 1 < r; ++d)
        if (!((keep >> d) & 1u)) {
          sh.split = true;
          sh.split_dim = d;
          break;
        }
      sh.rows =
          sh.mode == KernelShape::Mode::Owned && !sh.split && r > 0 && !((keep >> (r - 1)) & 1u);
    }
    int fields = 1;  // the pad
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      if (k_.outputs[o].reduce) fields += 3;
    sh.acc_bytes = 8 * fields;
    return sh;
  }

  const char* mode_name() const {
    switch (shape_.mode) {
      case KernelShape::Mode::Flat:
        return shape_.tree ? "flat, partials through the block tree" : "flat";
      case KernelShape::Mode::Owned:
        return shape_.split  ? "owned, split (threads over the dims every reduction keeps and "
                               "over segments of the outermost other dim)"
               : shape_.rows ? "owned (threads over the dims every reduction keeps; long rows: a "
                               "warp or a block per item)"
                             : "owned (threads over the dims every reduction keeps)";
      case KernelShape::Mode::Serial:
        return "serial (one thread)";
    }
    return "?";
  }

  bool is_arg(size_t o) const { return k_.outputs[o].index_value >= 0; }
  bool is_max(size_t o) const { return k_.outputs[o].fn == ReduceFn::ArgMax; }
  std::string idx(int d) const { return "i" + std::to_string(d); }
  std::string I(int at) const { return "I[" + std::to_string(at) + "]"; }
  std::string v(int value) const { return "v" + std::to_string(value); }
  const char* vt(int value) const { return ctype(k_.values[value].type); }

  // Leaf l's element: its address (or flat index) in the block.
  std::string leaf_at(int l) const {
    int r = k_.rank, b = k_.leaf_base(l);
    std::string a = I(b);
    for (int d = 0; d + 1 < r; ++d) a += " + " + idx(d) + " * " + I(b + 1 + d);
    if (r > 0) {
      int s = k_.leaves[l].inner_stride;
      if (s == 1)
        a += " + " + idx(r - 1);
      else if (s < 0)
        a += " + " + idx(r - 1) + " * " + I(b + r);
    }
    return "(" + a + ")";
  }

  // Output o's element: outer strides from I, the inner one 0 (reduced) or 1.
  std::string out_at(size_t o, bool with_inner) const {
    int r = k_.rank, b = k_.output_base(int(o));
    std::string a = I(b);
    for (int d = 0; d + 1 < r; ++d) a += " + " + idx(d) + " * " + I(b + 1 + d);
    if (r > 0 && with_inner && !inner_reduced_[o]) a += " + " + idx(r - 1);
    return "(" + a + ")";
  }

  // A split kernel's reduction o at the current item: only the parallel dims' indices are in
  // scope; the other dims' strides are 0 (every reduction keeps exactly the parallel dims).
  std::string item_at(size_t o) const {
    int r = k_.rank, b = k_.output_base(int(o));
    std::string a = I(b);
    for (int d : shape_.parallel)
      a += d + 1 < r ? " + " + idx(d) + " * " + I(b + 1 + d) : " + " + idx(d);
    return "(" + a + ")";
  }

  std::string mem(size_t o) const {
    return "((" + std::string(ctype(k_.outputs[o].type)) + "*)P[" +
           std::to_string(k_.output_pointer(int(o))) + "])";
  }
  std::string index_mem(size_t o) const {
    return "((kiln_i64*)P[" + std::to_string(k_.index_pointer(int(o))) + "])";
  }

  std::string expr(int vi) const {
    const kir::Value& x = k_.values[vi];
    switch (x.op) {
      case kir::VOp::Param: {
        DType t = k_.params[x.index];
        std::string iv = I(k_.param_base() + x.index);
        if (is_float(t)) return "(" + std::string(ctype(t)) + ")F[" + std::to_string(x.index) + "]";
        if (t == DType::Bool) return "(kiln_u8)(" + iv + " != 0)";
        return "(" + std::string(ctype(t)) + ")" + iv;
      }
      case kir::VOp::Leaf:
        return leaf(x);
      case kir::VOp::Const:
        return literal(x.type, x.f, x.i);
      case kir::VOp::Unary:
        return unary(x);
      case kir::VOp::Binary:
        return binary(x);
      case kir::VOp::Select:
        return "(" + v(x.a) + " ? " + v(x.b) + " : " + v(x.c) + ")";
      case kir::VOp::Cast:
        return cast(x);
      case kir::VOp::Row:
        return "row" + std::to_string(x.index);
    }
    throw InternalError("cuda printer: unknown value op");
  }

  std::string leaf(const kir::Value& x) const {
    const kir::Leaf& lf = k_.leaves[x.index];
    std::string at = leaf_at(x.index);
    switch (lf.kind) {
      case kir::LeafKind::Memory: {
        std::string load = "((const " + std::string(ctype(lf.dtype)) + "*)P[" +
                           std::to_string(lf.pointer) + "])[" + at + "]";
        return lf.dtype == DType::Bool ? "(kiln_u8)(" + load + " != 0)" : load;
      }
      case kir::LeafKind::Iota:
        return at;
      case kir::LeafKind::Random: {
        std::string args = "(kiln_u64)" + I(k_.param_base() + lf.seed_param) + ", (kiln_u32)" +
                           std::to_string(static_cast<uint32_t>(lf.stream)) + ", (kiln_u64)" + at;
        switch (lf.random) {
          case RandomKind::Uniform:
            return "kiln_uniform(" + args + ")";
          case RandomKind::Normal:
            return "kiln_normal(" + args + ")";
          case RandomKind::Integers:
            return "kiln_integers(" + args + ", (kiln_i64)" + hex_u64(uint64_t(lf.low)) +
                   ", (kiln_i64)" + hex_u64(uint64_t(lf.high)) + ")";
        }
      }
    }
    throw InternalError("cuda printer: unknown leaf kind");
  }

  [[noreturn]] void undefined(const char* op, DType t) const {
    throw InternalError(std::string("cuda printer: kernel IR op ") + op + " is not defined for " +
                        dtype_name(t) + " operands (docs/KERNEL_IR.md)");
  }

  std::string unary(const kir::Value& x) const {
    auto f = static_cast<UnaryFn>(x.fn);
    DType t = k_.values[x.a].type;
    std::string a = v(x.a), T = ctype(t);
    bool fp = is_float(t), boolean = t == DType::Bool;
    switch (f) {
      case UnaryFn::Neg:
        if (fp) return "(-" + a + ")";
        if (boolean) return a;
        return "kiln_wsub((" + T + ")0, " + a + ")";
      case UnaryFn::Abs:
        if (fp) return math_call("fabs", t) + "(" + a + ")";
        if (boolean) return a;
        return "(" + a + " < 0 ? kiln_wsub((" + T + ")0, " + a + ") : " + a + ")";
      case UnaryFn::Floor:
      case UnaryFn::Ceil:
      case UnaryFn::Round:  // rint: half to even in the default rounding mode
        if (!fp) return a;
        return math_call(f == UnaryFn::Floor  ? "floor"
                         : f == UnaryFn::Ceil ? "ceil"
                                              : "rint",
                         t) +
               "(" + a + ")";
      case UnaryFn::Sqrt:
        if (!fp) undefined("sqrt", t);
        return math_call("sqrt", t) + "(" + a + ")";
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
        if (!fp) undefined(unary_name(f), t);
        return math_call(math_name(vm::math_fn(f)), t) + "(" + a + ")";
      case UnaryFn::IsNan:
        return "(kiln_u8)(" + a + " != " + a + ")";
      case UnaryFn::Invert:
        if (boolean) return "(kiln_u8)!" + a;
        if (!fp) return "(" + T + ")~" + a;
        undefined("invert", t);
      case UnaryFn::Sign:
      case UnaryFn::Sigmoid:
      case UnaryFn::IsFinite:
      case UnaryFn::Not:
        break;
    }
    throw InternalError(std::string("cuda printer: ") + unary_name(f) +
                        " reached a printer; codegen/legalize.cpp rewrites it into primitives");
  }

  std::string binary(const kir::Value& x) const {
    auto f = static_cast<BinaryFn>(x.fn);
    DType t = k_.values[x.a].type;
    std::string a = v(x.a), b = v(x.b), T = ctype(t);
    bool fp = is_float(t), boolean = t == DType::Bool, integer = !fp && !boolean;
    auto call = [&](const std::string& fn) { return fn + "(" + a + ", " + b + ")"; };
    auto cmp = [&](const char* op) { return "(kiln_u8)(" + a + " " + op + " " + b + ")"; };
    auto bits = [&](const char* op) { return "(" + T + ")(" + a + " " + op + " " + b + ")"; };
    switch (f) {
      case BinaryFn::Add:
        if (fp) return "(" + a + " + " + b + ")";
        if (boolean) return bits("|");
        return call("kiln_wadd");
      case BinaryFn::Sub:
        if (fp) return "(" + a + " - " + b + ")";
        if (integer) return call("kiln_wsub");
        undefined("subtract", t);
      case BinaryFn::Mul:
        if (fp) return "(" + a + " * " + b + ")";
        if (boolean) return bits("&");
        return call("kiln_wmul");
      case BinaryFn::Div:
        if (fp) return "(" + a + " / " + b + ")";
        undefined("true_divide", t);
      case BinaryFn::FMod:
        if (fp) return call(math_call("fmod", t));
        if (integer) return call("kiln_ifmod");
        undefined("fmod", t);
      case BinaryFn::CopySign:
        if (fp) return call(math_call("copysign", t));
        undefined("copysign", t);
      case BinaryFn::Pow:
        if (fp) return call(math_call(math_name(vm::MathFn::Pow), t));
        if (integer)
          return "(" + T + ")kiln_ipow((kiln_i64)" + a + ", (kiln_i64)" + b + ", kiln_status)";
        undefined("power", t);
      case BinaryFn::Lt:
        return cmp("<");
      case BinaryFn::Le:
        return cmp("<=");
      case BinaryFn::Gt:
        return cmp(">");
      case BinaryFn::Ge:
        return cmp(">=");
      case BinaryFn::Eq:
        return cmp("==");
      case BinaryFn::Ne:
        return cmp("!=");
      case BinaryFn::And:
      case BinaryFn::BitAnd:
        if (!fp) return bits("&");
        undefined(binary_name(f), t);
      case BinaryFn::Or:
      case BinaryFn::BitOr:
        if (!fp) return bits("|");
        undefined(binary_name(f), t);
      case BinaryFn::BitXor:
        if (!fp) return bits("^");
        undefined("bitwise_xor", t);
      case BinaryFn::Max:
        return call("kiln_fold_max");
      case BinaryFn::Min:
        return call("kiln_fold_min");
      case BinaryFn::LeftShift:
      case BinaryFn::RightShift:
        if (integer)
          return std::string("kiln_shift(") + (f == BinaryFn::LeftShift ? "true" : "false") + ", " +
                 a + ", " + b + ")";
        undefined(binary_name(f), t);
      case BinaryFn::FloorDiv:
        if (integer) return call("kiln_floordiv");
        break;
      case BinaryFn::Mod:
        break;
    }
    throw InternalError(std::string("cuda printer: ") + binary_name(f) + " on " + dtype_name(t) +
                        " reached a printer; codegen/legalize.cpp rewrites it into primitives");
  }

  std::string cast(const kir::Value& x) const {
    DType from = k_.values[x.a].type, to = x.type;
    std::string a = v(x.a);
    if (from == to) return a;
    if (to == DType::Bool) return "(kiln_u8)(" + a + " != 0)";
    if (is_float(from) && to == DType::Int64) return "kiln_to_i64((double)" + a + ")";
    if (is_float(from) && to == DType::Int32) return "kiln_to_i32((double)" + a + ")";
    return "(" + std::string(ctype(to)) + ")" + a;
  }

  // --- the accumulator of tree kernels -------------------------------------------------------

  void print_acc() {
    std::string fields, init, combine, store;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const kir::Output& out = k_.outputs[o];
      if (!out.reduce || !(shape_.tree || shape_.split || shape_.rows)) continue;
      std::string n = std::to_string(o), T = ctype(out.type);
      fields += "  " + T + " s" + n + ";\n  " + T + " c" + n + ";\n  kiln_i64 x" + n + ";\n";
      init += "  a.s" + n + " = " + identity(out) + ";\n  a.c" + n + " = (" + T + ")0;\n  a.x" + n +
              " = -1;\n";
      std::string mx = is_max(o) ? "true" : "false";
      if (is_arg(o)) {
        combine += "  kiln_arg_combine(" + mx + ", a.s" + n + ", a.x" + n + ", b.s" + n + ", b.x" +
                   n + ");\n";
        store += "  kiln_arg_fold(" + mx + ", " + mem(o) + "[" + I(k_.output_base(int(o))) + "], " +
                 index_mem(o) + "[" + I(k_.output_base(int(o))) + "], a.s" + n + ", a.x" + n +
                 ");\n";
        continue;
      }
      if (compensated_[o]) {
        combine += "  { " + T + " c = a.c" + n + " + b.c" + n + "; kiln_neumaier(a.s" + n +
                   ", c, b.s" + n + "); a.c" + n + " = c; }\n";
        store += "  { " + T + "* m = &" + mem(o) + "[" + I(k_.output_base(int(o))) +
                 "]; *m = kiln_fold_sum(*m, kiln_compensated(a.s" + n + ", a.c" + n + ")); }\n";
      } else {
        combine += "  a.s" + n + " = " + fold_fn(out.fn) + "(a.s" + n + ", b.s" + n + ");\n";
        store += "  { " + T + "* m = &" + mem(o) + "[" + I(k_.output_base(int(o))) +
                 "]; *m = " + fold_fn(out.fn) + "(*m, a.s" + n + "); }\n";
      }
    }
    s_ += "struct kiln_acc {\n" + fields + "  kiln_i64 pad_;\n};\n";
    s_ += "KILN_FN void kiln_acc_init(kiln_acc& a) {\n" + init + "  a.pad_ = 0;\n}\n";
    s_ += "// a (+)= b, b's elements after a's in the thread order\n";
    s_ += "KILN_FN void kiln_acc_combine(kiln_acc& a, const kiln_acc& b) {\n" + combine + "}\n";
    s_ += "KILN_FN void kiln_acc_store(const kiln_i64* I, void* const* P, const kiln_acc& a) {\n" +
          store + "}\n";
  }

  // --- per-thread code ----------------------------------------------------------------------

  void line(int depth, const std::string& text) {
    s_.append(size_t(2 * depth), ' ');
    s_ += text;
    s_ += '\n';
  }

  // The values stage `row` needs, in SSA order, for the element at the current indices.
  void values(int depth, bool row) {
    for (size_t x = 0; x < k_.values.size(); ++x)
      if (need_[row ? 1 : 0][x])
        line(depth,
             std::string("const ") + vt(int(x)) + " " + v(int(x)) + " = " + expr(int(x)) + ";");
  }

  // Folds or stores the active outputs of a stage at one element. acc: the name prefix of the
  // inner reductions' accumulators ("sp" strips, "st" the row's), "" in flat kernels.
  void outputs(int depth, bool row, const std::string& acc) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const kir::Output& out = k_.outputs[o];
      if (out.row != row) continue;
      std::string n = std::to_string(o), val = v(out.value);
      std::string mx = is_max(o) ? "true" : "false";
      if (!out.reduce) {
        line(depth, mem(o) + "[" + out_at(o, true) + "] = " + val + ";");
      } else if (shape_.tree) {
        fold_into(depth, o, "acc", val);
      } else if (!group_.empty() && inner_reduced_[o]) {
        fold_into(depth, o, group_, val);
      } else if (shape_.split && !inner_reduced_[o]) {
        if (is_arg(o))
          line(depth, "kiln_arg_fold(" + mx + ", acc.s" + n + ", acc.x" + n + ", " + val + ", " +
                          v(out.index_value) + ");");
        else
          line(depth, "acc.s" + n + " = " + fold_fn(out.fn) + "(acc.s" + n + ", " + val + ");");
      } else if (inner_reduced_[o]) {
        std::string s = acc + "_s" + n;
        if (is_arg(o))
          line(depth, "kiln_arg_fold(" + mx + ", " + s + ", " + acc + "_x" + n + ", " + val + ", " +
                          v(out.index_value) + ");");
        else
          line(depth, s + " = " + fold_fn(out.fn) + "(" + s + ", " + val + ");");
      } else {
        std::string at = out_at(o, true);
        if (is_arg(o))
          line(depth, "kiln_arg_fold(" + mx + ", " + mem(o) + "[" + at + "], " + index_mem(o) +
                          "[" + at + "], " + val + ", " + v(out.index_value) + ");");
        else
          line(depth, "{ " + std::string(ctype(out.type)) + "* m = &" + mem(o) + "[" + at +
                          "]; *m = " + fold_fn(out.fn) + "(*m, " + val + "); }");
      }
    }
  }

  // Output o's element `val` into a kiln_acc (`a`): float sums compensated (Neumaier).
  void fold_into(int depth, size_t o, const std::string& a, const std::string& val) {
    const kir::Output& out = k_.outputs[o];
    std::string n = std::to_string(o);
    if (is_arg(o))
      line(depth, std::string("kiln_arg_fold(") + (is_max(o) ? "true" : "false") + ", " + a + ".s" +
                      n + ", " + a + ".x" + n + ", " + val + ", " + v(out.index_value) + ");");
    else if (compensated_[o])
      line(depth, "kiln_neumaier(" + a + ".s" + n + ", " + a + ".c" + n + ", " + val + ");");
    else
      line(depth, a + ".s" + n + " = " + fold_fn(out.fn) + "(" + a + ".s" + n + ", " + val + ");");
  }

  bool folds_inner(size_t o, bool row) const {
    return k_.outputs[o].row == row && inner_reduced_[o];
  }

  // One stage over the current row (interp's Frame::stage): the inner index runs over I[r-1].
  void stage(int depth, bool row) {
    int r = k_.rank;
    std::string in = idx(r - 1), n = I(r - 1);
    line(depth, row ? "{  // the row stage" : "{");
    ++depth;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o, row)) continue;
      std::string m = std::to_string(o), T = ctype(k_.outputs[o].type);
      line(depth,
           T + " st_s" + m + " = " + identity(k_.outputs[o]) + ", st_c" + m + " = (" + T + ")0;");
      line(depth, "kiln_i64 st_x" + m + " = -1;");
    }
    if (strips_[row ? 1 : 0]) {
      std::string strip = std::to_string(random_ ? kRandomStrip : kStrip);
      line(depth, "for (kiln_i64 s0 = 0; s0 < " + n + "; s0 += " + strip + ") {");
      ++depth;
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        if (!folds_inner(o, row)) continue;
        std::string m = std::to_string(o);
        line(depth, std::string(ctype(k_.outputs[o].type)) + " sp_s" + m + " = " +
                        identity(k_.outputs[o]) + ";");
        line(depth, "kiln_i64 sp_x" + m + " = -1;");
      }
      line(depth,
           "const kiln_i64 end = " + n + " < s0 + " + strip + " ? " + n + " : s0 + " + strip + ";");
      line(depth, "for (kiln_i64 " + in + " = s0; " + in + " < end; ++" + in + ") {");
      values(depth + 1, row);
      outputs(depth + 1, row, "sp");
      line(depth, "}");
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        if (!folds_inner(o, row)) continue;
        std::string m = std::to_string(o);
        std::string mx = is_max(o) ? "true" : "false";
        if (is_arg(o))
          line(depth, "kiln_arg_fold(" + mx + ", st_s" + m + ", st_x" + m + ", sp_s" + m +
                          ", sp_x" + m + ");");
        else if (inner_compensated_[o])
          line(depth, "kiln_neumaier(st_s" + m + ", st_c" + m + ", sp_s" + m + ");");
        else
          line(depth,
               "st_s" + m + " = " + fold_fn(k_.outputs[o].fn) + "(st_s" + m + ", sp_s" + m + ");");
      }
      --depth;
      line(depth, "}");
    } else {
      line(depth, "for (kiln_i64 " + in + " = 0; " + in + " < " + n + "; ++" + in + ") {");
      values(depth + 1, row);
      outputs(depth + 1, row, "st");
      line(depth, "}");
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o, row)) continue;
      std::string m = std::to_string(o);
      finish_row(
          depth, o,
          inner_compensated_[o] ? "kiln_compensated(st_s" + m + ", st_c" + m + ")" : "st_s" + m,
          "st_x" + m, "");
    }
    --depth;
    line(depth, "}");
  }

  // The end of a row for output o, an inner reduction of the stage: its value `s` (argmin/
  // argmax: index `x`) is the row stage's value (row stage) and folds into the output's element
  // (a split kernel's accumulator). guard: the condition of the store ("" none).
  void finish_row(int depth, size_t o, const std::string& s, const std::string& x,
                  const std::string& guard) {
    const kir::Output& out = k_.outputs[o];
    std::string m = std::to_string(o), T = ctype(out.type);
    line(depth, "const " + T + " res" + m + " = " + s + ";");
    if (out.row)
      line(depth, "row" + m + " = " + fold_fn(out.fn) + "(" + identity(out) + ", res" + m + ");");
    std::string at = out_at(o, false), store;
    if (shape_.split && is_arg(o))
      store = "kiln_arg_fold(" + std::string(is_max(o) ? "true" : "false") + ", acc.s" + m +
              ", acc.x" + m + ", res" + m + ", " + x + ");";
    else if (shape_.split)
      store = "acc.s" + m + " = " + fold_fn(out.fn) + "(acc.s" + m + ", res" + m + ");";
    else if (is_arg(o))
      store = "kiln_arg_fold(" + std::string(is_max(o) ? "true" : "false") + ", " + mem(o) + "[" +
              at + "], " + index_mem(o) + "[" + at + "], res" + m + ", " + x + ");";
    else
      store = "{ " + T + "* m = &" + mem(o) + "[" + at + "]; *m = " + fold_fn(out.fn) + "(*m, res" +
              m + "); }";
    line(depth, guard.empty() ? store : "if (" + guard + ") " + store);
  }

  // One stage over the current row run by a group of gs threads (KernelShape::rows): lane j
  // takes the elements j, j + gs, ... into its kiln_acc (float sums compensated); the group's
  // tree (kiln_rows_tree) gives every lane lane 0's fold of them all; lane 0 stores. cuda-emu
  // runs the lanes in turn, each into its own accumulator of gl[], and the same tree serially.
  void group_stage(int depth, bool row) {
    int r = k_.rank;
    std::string in = idx(r - 1), n = I(r - 1);
    bool emu = flavor_ == Flavor::Emu;
    line(depth, row ? "{  // the row stage, a group of threads per row" : "{");
    ++depth;
    line(depth, "kiln_acc ga;");
    if (emu) {
      line(depth, "for (int lane = 0; lane < gs; ++lane) {");
      ++depth;
      group_ = "gl[lane]";
    } else {
      group_ = "ga";
    }
    line(depth, "kiln_acc_init(" + group_ + ");");
    line(depth, "for (kiln_i64 " + in + " = lane; " + in + " < " + n + "; " + in + " += gs) {");
    values(depth + 1, row);
    outputs(depth + 1, row, "");
    line(depth, "}");
    group_.clear();
    if (emu) {
      line(--depth, "}");
      line(depth, "ga = kiln_rows_tree_emu(gl, gs);");
    } else {
      line(depth, "ga = kiln_rows_tree(ga, gs);");
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o, row)) continue;
      std::string m = std::to_string(o);
      finish_row(depth, o,
                 compensated_[o] ? "kiln_compensated(ga.s" + m + ", ga.c" + m + ")" : "ga.s" + m,
                 "ga.x" + m, emu ? "" : "lane == 0");
    }
    line(--depth, "}");
  }

  // Decomposes the flat work item `e` < n over `dims` (outermost first) into their indices: by
  // 32-bit divisions where n fits in 32 bits (a 64-bit one is several times the instructions on
  // a GPU), the branch uniform over the launch.
  void decompose(int depth, const std::vector<int>& dims) {
    if (dims.empty()) return;
    if (dims.size() == 1) {
      line(depth, "const kiln_i64 " + idx(dims[0]) + " = e;");
      return;
    }
    std::string names;
    for (int d : dims) names += (names.empty() ? "" : ", ") + idx(d);
    line(depth, "kiln_i64 " + names + ";");
    for (int wide = 0; wide < 2; ++wide) {
      std::string T = wide ? "kiln_i64" : "kiln_u32";
      line(depth, wide ? "} else {" : "if (n <= 0xffffffffll) {");
      line(depth + 1, T + " q = (" + T + ")e;");
      for (size_t j = dims.size(); j-- > 1;) {
        int d = dims[j];
        line(depth + 1,
             "{ const " + T + " m = (" + T + ")" + I(d) + "; " + idx(d) + " = q % m; q /= m; }");
      }
      line(depth + 1, idx(dims[0]) + " = q;");
    }
    line(depth, "}");
  }

  // The formula of split_segments (cuda_printer.hpp) in the kernel, and the split's sizes.
  void print_split_size() {
    std::string n = "1";
    for (int d : shape_.parallel) n += " * " + I(d);
    s_ += "KILN_FN void kiln_split_size(const kiln_i64* I, kiln_i64& n, kiln_i64& G) {\n";
    s_ += "  n = " + n + ";\n";
    s_ += "  const kiln_i64 L = " + I(shape_.split_dim) + ";\n";
    s_ += "  G = (L + " + std::to_string(kSplitRows - 1) + ") / " + std::to_string(kSplitRows) +
          ";\n";
    s_ += "  const kiln_i64 fill = n < " + std::to_string(kSplitThreads) + " ? " +
          std::to_string(kSplitThreads) + " / n : 1;\n";
    s_ += "  if (G > fill) G = fill;\n";
    s_ += "  if (G > " + std::to_string(kSplitMaxSegments) +
          ") G = " + std::to_string(kSplitMaxSegments) + ";\n";
    s_ += "  if (L <= " + std::to_string(kSplitFrom) + ") G = 1;\n";
    s_ += "  if (G < 1) G = 1;\n}\n";
  }

  // Split owned kernels' fold (a warp per item): lane j folds segments j, j + 32, ... in
  // order; then lane x takes lane x + off's, off = 16, 8, 4, 2, 1 (the flat kernels' warp tree);
  // lane 0 stores. Segment 0's partial continued from the output's value.
  void print_split_fold() {
    s_ += "KILN_FN void kiln_split_combine(kiln_acc& a, const kiln_acc& b) {\n";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].reduce) continue;
      std::string m = std::to_string(o);
      if (is_arg(o))
        s_ += std::string("  kiln_arg_combine(") + (is_max(o) ? "true" : "false") + ", a.s" + m +
              ", a.x" + m + ", b.s" + m + ", b.x" + m + ");\n";
      else
        s_ += "  a.s" + m + " = " + fold_fn(k_.outputs[o].fn) + "(a.s" + m + ", b.s" + m + ");\n";
    }
    s_ += "}\n";
    s_ +=
        "KILN_FN kiln_acc kiln_split_lane(const kiln_acc* parts, kiln_i64 e, kiln_i64 n, "
        "kiln_i64 G, int lane) {\n"
        "  kiln_acc a;\n"
        "  if (lane < G) {\n"
        "    a = parts[lane * n + e];\n"
        "  } else {\n"
        "    kiln_acc_init(a);\n"
        "  }\n"
        "  for (kiln_i64 g = lane + 32; g < G; g += 32) kiln_split_combine(a, parts[g * n + e]);\n"
        "  return a;\n"
        "}\n";
    s_ +=
        "KILN_FN void kiln_split_store(const kiln_i64* I, void* const* P, kiln_i64 e, kiln_i64 n, "
        "const kiln_acc& a) {\n";
    decompose(1, shape_.parallel);
    store_split(1, "a");
    s_ += "}\n";
  }
  // The accumulator `a`'s values into the item's output elements.
  void store_split(int depth, const std::string& a) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].reduce) continue;
      std::string m = std::to_string(o), at = item_at(o);
      line(depth, mem(o) + "[" + at + "] = " + a + ".s" + m + ";");
      if (is_arg(o)) line(depth, index_mem(o) + "[" + at + "] = " + a + ".x" + m + ";");
    }
  }

  // One work item's elements once its parallel indices are set: the other outer dims' loops
  // (but a split's), then each row's stages, by one thread or (group) by a group of threads.
  void item(int depth, bool group) {
    int r = k_.rank;
    const std::vector<int>& par = shape_.parallel;
    auto is_par = [&](int d) { return std::find(par.begin(), par.end(), d) != par.end(); };
    int opened = 0;
    for (int d = 0; d + 1 < r; ++d) {
      if (is_par(d) || (shape_.split && d == shape_.split_dim)) continue;
      line(depth,
           "for (kiln_i64 " + idx(d) + " = 0; " + idx(d) + " < " + I(d) + "; ++" + idx(d) + ") {");
      ++depth;
      ++opened;
    }
    if (r > 0 && !is_par(r - 1)) {
      // A row: the row stage's pass, then the rest's (interp's Frame::row).
      for (size_t o = 0; o < k_.outputs.size(); ++o)
        if (k_.outputs[o].row)
          line(depth, std::string(ctype(k_.outputs[o].type)) + " row" + std::to_string(o) + ";");
      if (k_.has_row_stage()) group ? group_stage(depth, true) : stage(depth, true);
      group ? group_stage(depth, false) : stage(depth, false);
    } else {
      values(depth, false);
      outputs(depth, false, "");
    }
    for (; opened > 0; --opened) line(--depth, "}");
  }

  // Owned kernels over rows (KernelShape::rows): row_group's formula, and kiln_rows, which runs
  // the items w, w + W, ... with a group of gs threads each (this thread: lane `lane`); on
  // cuda-emu it runs every item, each group's lanes in turn.
  void print_rows() {
    int r = k_.rank;
    std::string n = "1";
    for (int d : shape_.parallel) n += " * " + I(d);
    s_ += "KILN_FN int kiln_rows_group(const kiln_i64* I) {\n";
    s_ += "  const kiln_i64 n = " + n + ", L = " + I(r - 1) + ";\n";
    s_ += "  if (L <= " + std::to_string(shape_.rows_from) + ") return 1;\n";
    s_ += "  return n >= " + std::to_string(kRowWarpItems) + " || L < " +
          std::to_string(kRowBlockFrom) + " ? 32 : KILN_BLOCK;\n}\n";
    bool emu = flavor_ == Flavor::Emu;
    s_ +=
        std::string("KILN_FN void kiln_rows(const kiln_i64* I, const double* F, void* const* P, ") +
        (emu ? "" : "kiln_i64 w, kiln_i64 W, int lane, ") + "int gs, unsigned* kiln_status) {\n";
    if (emu)
      s_ += "  static thread_local kiln_acc gl[KILN_BLOCK];\n  const kiln_i64 w = 0, W = 1;\n";
    line(1, "const kiln_i64 n = " + n + ";");
    line(1, "for (kiln_i64 e = w; e < n; e += W) {");
    decompose(2, shape_.parallel);
    item(2, true);
    line(1, "}");
    s_ += "}\n";
  }

  void print_thread() {
    int r = k_.rank;
    if (shape_.rows) print_rows();
    if (shape_.split) {
      print_split_size();
      print_split_fold();
    }
    s_ += std::string(
              "KILN_FN void kiln_thread(const kiln_i64* I, const double* F, void* const* "
              "P, kiln_i64 t, kiln_i64 T, ") +
          (shape_.split ? "kiln_acc* parts" : "kiln_acc& acc") + ", unsigned* kiln_status) {\n";
    int depth = 1;
    if (shape_.mode == KernelShape::Mode::Flat) {
      std::string n = "1";
      std::vector<int> dims;
      for (int d = 0; d < r; ++d) {
        n += " * " + I(d);
        dims.push_back(d);
      }
      line(depth, "const kiln_i64 n = " + n + ";");
      line(depth, "for (kiln_i64 e = t; e < n; e += T) {");
      decompose(depth + 1, dims);
      values(depth + 1, false);
      outputs(depth + 1, false, "");
      line(depth, "}");
      s_ += "}\n";
      return;
    }
    const std::vector<int>& par = shape_.parallel;
    std::string n = "1";
    for (int d : par) n += " * " + I(d);
    if (shape_.split) {
      // Work item w = g * n + e: segment g of the split dim for item e (adjacent threads take
      // adjacent items, so their loads are adjacent).
      int sd = shape_.split_dim;
      line(depth, "kiln_i64 n, G;");
      line(depth, "kiln_split_size(I, n, G);");
      line(depth, "const kiln_i64 per = (" + I(sd) + " + G - 1) / G;");
      line(depth, "for (kiln_i64 w = t; w < n * G; w += T) {");
      ++depth;
      line(depth, "const kiln_i64 e = w % n, g = w / n;");
      decompose(depth, par);
      line(depth, "kiln_acc acc;");
      line(depth, "kiln_acc_init(acc);");
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        if (!k_.outputs[o].reduce) continue;
        std::string m = std::to_string(o), at = item_at(o);
        line(depth, "acc.s" + m + " = g == 0 ? " + mem(o) + "[" + at +
                        "] : " + identity(k_.outputs[o]) + ";");
        if (is_arg(o))
          line(depth, "acc.x" + m + " = g == 0 ? " + index_mem(o) + "[" + at + "] : -1;");
      }
      line(depth, "const kiln_i64 lo = g * per, hi = lo + per < " + I(sd) +
                      " ? lo + per : " + I(sd) + ";");
      line(depth, "for (kiln_i64 " + idx(sd) + " = lo; " + idx(sd) + " < hi; ++" + idx(sd) + ") {");
      ++depth;
    } else {
      line(depth, "const kiln_i64 n = " + n + ";");
      line(depth, "for (kiln_i64 e = t; e < n; e += T) {");
      ++depth;
      decompose(depth, par);
    }
    item(depth, false);
    if (shape_.split) {
      line(--depth, "}");  // the segment
      line(depth, "if (G == 1) {");
      store_split(depth + 1, "acc");
      line(depth, "} else {");
      line(depth + 1, "parts[w] = acc;");
      line(depth, "}");
    }
    line(--depth, "}");
    s_ += "}\n";
  }

  // --- entry points -------------------------------------------------------------------------

  void print_device_entry() {
    const ArgWords w = arg_words(k_);
    s_ += "\nstruct kiln_args {\n  kiln_i64 I[" + std::to_string(w.ints) + "];\n  double F[" +
          std::to_string(w.floats) + "];\n  void* P[" + std::to_string(w.pointers) + "];\n};\n";
    s_ += R"(extern "C" __global__ void __launch_bounds__(KILN_BLOCK)
kiln_kernel(const __grid_constant__ kiln_args args, void* scratch, unsigned* status) {
  const kiln_i64* I = args.I;
  const double* F = args.F;
  void* const* P = args.P;
  const kiln_i64 T = (kiln_i64)gridDim.x * KILN_BLOCK;
)";
    if (shape_.split) {
      // The segments' partials; a second kernel of the module folds them (launch_for's
      // fold_grid), after this one on the stream.
      s_ += R"(  kiln_acc* parts = (kiln_acc*)((char*)scratch + 256);
  kiln_thread(I, F, P, (kiln_i64)blockIdx.x * KILN_BLOCK + threadIdx.x, T, parts, status);
}
extern "C" __global__ void __launch_bounds__(KILN_BLOCK)
kiln_fold(const __grid_constant__ kiln_args args, void* scratch) {
  const kiln_i64* I = args.I;
  void* const* P = args.P;
  kiln_i64 n, G;
  kiln_split_size(I, n, G);
  const kiln_i64 e = ((kiln_i64)blockIdx.x * KILN_BLOCK + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (e >= n) return;  // a whole warp: n * 32 threads are launched, in whole blocks
  kiln_acc a = kiln_split_lane((const kiln_acc*)((char*)scratch + 256), e, n, G, lane);
  for (int off = 16; off > 0; off >>= 1) {
    kiln_acc o = kiln_shfl_down(a, off);
    kiln_split_combine(a, o);
  }
  if (lane == 0) kiln_split_store(I, P, e, n, a);
}
)";
      return;
    }
    s_ += R"(  kiln_acc a;
  kiln_acc_init(a);
  kiln_thread(I, F, P, (kiln_i64)blockIdx.x * KILN_BLOCK + threadIdx.x, T, a, status);
)";
    if (shape_.tree)
      s_ += R"(  a = kiln_block_tree(a);
  __shared__ bool last;
  kiln_acc* parts = (kiln_acc*)((char*)scratch + 256);
  if (threadIdx.x == 0) {
    parts[blockIdx.x] = a;
    __threadfence();
    last = atomicAdd((unsigned*)scratch, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {  // the whole last block folds the blocks' partials: thread t those of blocks
    __threadfence();  // t, t + KILN_BLOCK, ... in order, then the block's tree
    kiln_acc s;
    kiln_acc_init(s);
    for (unsigned b = threadIdx.x; b < gridDim.x; b += KILN_BLOCK) {
      kiln_acc o = kiln_load_cg(parts + b);
      kiln_acc_combine(s, o);
    }
    s = kiln_block_tree(s);
    if (threadIdx.x == 0) {
      kiln_acc_store(I, P, s);
      *(unsigned*)scratch = 0;
    }
  }
)";
    s_ += "}\n";
    if (shape_.rows)  // the entry where rows are long: a group of threads per item (Launch::group)
      s_ += R"(extern "C" __global__ void __launch_bounds__(KILN_BLOCK)
kiln_rows_kernel(const __grid_constant__ kiln_args args, void* scratch, unsigned* status) {
  const kiln_i64* I = args.I;
  const double* F = args.F;
  void* const* P = args.P;
  const int gs = kiln_rows_group(I);
  kiln_rows(I, F, P, (kiln_i64)blockIdx.x * (KILN_BLOCK / gs) + threadIdx.x / gs,
            (kiln_i64)gridDim.x * (KILN_BLOCK / gs), (int)(threadIdx.x & (gs - 1)), gs, status);
}
)";
  }

  void print_emu_entry() {
    s_ += R"(
extern "C" unsigned kiln_emu_launch(const kiln_i64* I, const double* F, void* const* P,
                                    kiln_i64 grid) {
  unsigned status = 0;
  const kiln_i64 T = grid * KILN_BLOCK;
)";
    if (shape_.split)
      s_ += R"(  kiln_i64 n, G;
  kiln_split_size(I, n, G);
  kiln_acc* parts = G > 1 ? new kiln_acc[n * G] : nullptr;
  for (kiln_i64 t = 0; t < T; ++t) kiln_thread(I, F, P, t, T, parts, &status);
  if (G > 1) {  // the GPU's fold kernel: a warp per item, its lanes' tree as kiln_block_tree's
    for (kiln_i64 e = 0; e < n; ++e) {
      kiln_acc lanes[32];
      for (int x = 0; x < 32; ++x) lanes[x] = kiln_split_lane(parts, e, n, G, x);
      for (int off = 16; off > 0; off >>= 1)
        for (int x = 0; x < off; ++x) kiln_split_combine(lanes[x], lanes[x + off]);
      kiln_split_store(I, P, e, n, lanes[0]);
    }
    delete[] parts;
  }
)";
    else if (shape_.tree)
      s_ += R"(  kiln_acc* parts = new kiln_acc[grid];
  kiln_acc* lanes = new kiln_acc[KILN_BLOCK];
  for (kiln_i64 b = 0; b < grid; ++b) {
    for (int x = 0; x < KILN_BLOCK; ++x) {
      kiln_acc_init(lanes[x]);
      kiln_thread(I, F, P, b * KILN_BLOCK + x, T, lanes[x], &status);
    }
    parts[b] = kiln_block_tree_emu(lanes);
  }
  for (int x = 0; x < KILN_BLOCK; ++x) {
    kiln_acc_init(lanes[x]);
    for (kiln_i64 b = x; b < grid; b += KILN_BLOCK) kiln_acc_combine(lanes[x], parts[b]);
  }
  kiln_acc s = kiln_block_tree_emu(lanes);
  kiln_acc_store(I, P, s);
  delete[] lanes;
  delete[] parts;
)";
    else {
      if (shape_.rows)  // long rows: a group per item (kiln_rows_kernel on a GPU)
        s_ += R"(  const int gs = kiln_rows_group(I);
  if (gs > 1) {
    kiln_rows(I, F, P, gs, &status);
    return status;
  }
)";
      s_ += R"(  kiln_acc a;
  kiln_acc_init(a);
  for (kiln_i64 t = 0; t < T; ++t) kiln_thread(I, F, P, t, T, a, &status);
)";
    }
    s_ += "  return status;\n}\n";
  }

  // The name the kernel calls f by: Kiln's function (recorded in kiln_fns_) or the device's libm.
  std::string math_name(vm::MathFn f) const {
    if (!kiln_math_ || !vm::kiln_has(f)) return vm::libm_name(f);
    kiln_fns_ |= 1u << static_cast<int>(f);
    return std::string("kiln_") + vm::libm_name(f);
  }

  const kir::Kernel& k_;
  Flavor flavor_;
  bool kiln_math_;
  mutable uint32_t kiln_fns_ = 0;  // bit f: calls Kiln's vm::MathFn f (found while printing)
  KernelShape shape_;
  bool random_ = false, normals_ = false;
  bool strips_[2] = {false, false};
  std::vector<bool> inner_reduced_, compensated_, inner_compensated_;
  std::vector<bool> need_[2];
  std::string group_;  // while printing group_stage: the lane's kiln_acc
  std::string s_;
};

}  // namespace

ArgWords arg_words(const kir::Kernel& k) {
  ArgWords w;
  w.ints = std::max<int64_t>(k.num_ints(), 1);
  w.floats = std::max<int64_t>(static_cast<int64_t>(k.params.size()), 1);
  w.pointers = std::max<int64_t>(k.num_pointer_slots(), 1);
  return w;
}

Printed print(const kir::Kernel& k, Flavor flavor, bool kiln_math, int64_t rows_from) {
  return Printer(k, flavor, kiln_math, rows_from).run();
}

std::string kernel_label(const kir::Kernel& k, const KernelShape& shape) {
  const char* split = shape.mode == KernelShape::Mode::Flat ? (shape.tree ? "flat-tree" : "flat")
                      : shape.mode == KernelShape::Mode::Owned
                          ? (shape.split ? "owned-split" : "owned")
                          : "serial";
  return hex_u64(k.hash()) + " " + split;
}

std::string print_combine(ReduceFn fn, DType acc, Flavor flavor) {
  bool arg = fn == ReduceFn::ArgMin || fn == ReduceFn::ArgMax;
  std::string T = ctype(acc);
  std::string step = arg ? std::string("kiln_arg_combine(") +
                               (fn == ReduceFn::ArgMax ? "true" : "false") +
                               ", a[e], ai[e], b[e], bi[e]);"
                         : std::string("a[e] = ") + fold_fn(fn) + "(a[e], b[e]);";
  std::string args = "kiln_i64 n, void* acc, const void* in, kiln_i64 index_offset";
  std::string body = "  " + T + "* a = (" + T + "*)acc;\n  const " + T + "* b = (const " + T +
                     "*)in;\n  kiln_i64* ai = (kiln_i64*)((char*)acc + index_offset);\n" +
                     "  const kiln_i64* bi = (const kiln_i64*)((const char*)in + index_offset);\n" +
                     "  (void)ai; (void)bi;\n";
  std::string s = prelude(flavor, false, 0);
  if (flavor == Flavor::Emu)
    return s + "extern \"C\" void kiln_emu_combine(" + args + ") {\n" + body +
           "  for (kiln_i64 e = 0; e < n; ++e) " + step + "\n}\n";
  return s + "extern \"C\" __global__ void kiln_combine(" + args + ") {\n" + body +
         "  for (kiln_i64 e = (kiln_i64)blockIdx.x * blockDim.x + threadIdx.x; e < n;\n" +
         "       e += (kiln_i64)gridDim.x * blockDim.x) " + step + "\n}\n";
}

Traffic::Traffic(const kir::Kernel& k) : rank_(k.rank) {
  const uint32_t all = k.rank > 0 ? (1u << k.rank) - 1 : 0;
  for (size_t l = 0; l < k.leaves.size(); ++l) {
    if (k.leaves[l].kind != kir::LeafKind::Memory) continue;
    Part p;
    p.base = k.leaf_base(static_cast<int>(l));
    p.size = static_cast<int64_t>(dtype_size(k.leaves[l].dtype));
    p.inner = k.leaves[l].inner_stride;
    p.leaf = true;
    parts_.push_back(p);
  }
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const kir::Output& out = k.outputs[o];
    Part p;
    p.size = static_cast<int64_t>(dtype_size(out.type)) + (out.index_value >= 0 ? 8 : 0);
    p.kept = out.reduce ? all & ~out.reduced_mask : all;
    parts_.push_back(p);
  }
}

int64_t Traffic::bytes(const int64_t* I) const {
  int64_t total = 0;
  for (const Part& p : parts_) {
    int64_t elems = 1;
    for (int d = 0; d < rank_; ++d) {
      bool spans;
      if (!p.leaf)
        spans = (p.kept >> d) & 1u;
      else if (d + 1 < rank_ || p.inner < 0)
        spans = I[p.base + 1 + d] != 0;
      else
        spans = p.inner != 0;
      if (spans) elems *= I[d];
    }
    total += elems * p.size;
  }
  return total;
}

int64_t split_segments(int64_t items, int64_t extent) {
  if (extent <= kSplitFrom) return 1;
  int64_t g = (extent + kSplitRows - 1) / kSplitRows;
  g = std::min(g, items < kSplitThreads ? kSplitThreads / items : int64_t{1});
  return std::max<int64_t>(std::min(g, kSplitMaxSegments), 1);
}

int row_group(int64_t items, int64_t extent, int64_t rows_from) {
  if (extent <= rows_from) return 1;
  return items >= kRowWarpItems || extent < kRowBlockFrom ? 32 : 256;
}

Launch launch_for(int rank, const KernelShape& s, const int64_t* I) {
  Launch l;
  for (int d = 0; d < rank; ++d)
    if (I[d] <= 0) return l;
  int64_t items = 1;
  switch (s.mode) {
    case KernelShape::Mode::Flat:
      for (int d = 0; d < rank; ++d) items *= I[d];
      break;
    case KernelShape::Mode::Owned:
      for (int d : s.parallel) items *= I[d];
      if (s.split) {
        const int64_t g = split_segments(items, I[s.split_dim]);
        if (g > 1) {
          l.scratch_bytes = 256 + items * g * s.acc_bytes;
          l.fold_grid = (items * 32 + s.block - 1) / s.block;  // a warp per item
        }
        items *= g;
      } else if (s.rows) {
        l.group = row_group(items, I[rank - 1], s.rows_from);
        items *= l.group;
      }
      break;
    case KernelShape::Mode::Serial:
      break;
  }
  l.items = items;
  l.grid = std::min<int64_t>((items + s.block - 1) / s.block, s.max_grid);
  if (s.tree) l.scratch_bytes = 256 + l.grid * s.acc_bytes;
  return l;
}

}  // namespace kiln::cuda
