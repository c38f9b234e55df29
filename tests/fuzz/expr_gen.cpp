// Random expression generator for the Kiln / NumPy differential fuzzer (see expr_gen.hpp).
//
// The oracle is NumPy 2 (tests/requirements.txt), whose promotion (NEP 50) Kiln follows. Where
// they legitimately differ, or where older NumPy differed, and what the generator does about it:
//
// 1. Python scalars are weak (NEP 50): `int32_array + 3` is int32, the literal converted to the
//    array's type. Literals are mostly small ([-100, 100], quarter steps, a few decimals), now and
//    then wide: integers up to the limits of the type they are converted to (int32's and int64's
//    extremes, 2^40 + 7, 2^53 - 1, 2^62; exactly representable as doubles, since NumPy converts a
//    Python int to float32 through a double) and floats from 1e-300 to 1e300 (not next to float32
//    arrays: 1e300 becomes inf there, in both). A literal that does not fit is an error on both
//    sides (errors_test covers it), so it is not generated.
// 2. 0-d operands. NumPy 1.x applied value-based casting to 0-d arrays and NumPy scalars; the
//    generator still writes such operands in a form both NumPy 1.24 and 2 promote as Kiln does:
//    when a 0-d array meets an array of rank >= 1 with a different dtype, the NumPy text reshapes
//    the 0-d operand to (1,); when a Python literal meets a 0-d operand, the literal is written as
//    a NumPy scalar of the type Kiln converts it to (`np.int32(2)`).
// 3. float -> int conversion of NaN, +-inf or out-of-range values is implementation-defined (Kiln
//    saturates, NumPy on x86 gives INT_MIN, with a warning; docs/NUMPY_DIFFERENCES.md): never
//    generated. Integer arithmetic wraps around in both (two's complement; Kiln's kernels use no
//    nsw/nuw flags): the generator tracks value bounds, and where + - * // could overflow it
//    either refuses the op or keeps it with the whole type as the bound (apply_binary).
// 4. Precision. sin/cos/exp/log/tanh/pow... use Kiln's vector functions (or libmvec's with
//    KILN_MATH=libmvec; both within 4 ulp) and NumPy's are
//    glibc's or its own SIMD code (within 4 ulp too); float sums/products are reassociated
//    (vectorized blocks, compensated strips, combine trees) while NumPy sums pairwise. Results
//    that went through such an operation are "inexact" and compared within a propagated error
//    bound (Expr::err/rel/inv); a discontinuous operation (comparison, floor/ceil/round/sign,
//    astype to int/bool, %, //, argmin/argmax, all/any, where's condition, logical ops) is only
//    ever applied to exact values, so a last-ulp difference can never turn into a different
//    integer or branch. Float sums/means/products of integer-valued data below 2^53 (2^24 for
//    float32) are exact in any order and stay exact.
// 5. NumPy type quirks Kiln does not copy: float ufuncs (sqrt, sin, ...) and round on bool arrays
//    give float16 in NumPy (Kiln: float64, having no float16); bool % bool, bool ** bool, bool //
//    bool and bool << bool give int8 (Kiln: an error); sign(bool), bool - bool and -bool are
//    errors on both sides. Such operations get a non-bool operand instead.
#include "expr_gen.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "oracle.hpp"

namespace kfuzz {

namespace {

using kiln::Array;
using kiln::BinaryFn;
using kiln::ScalarKind;
using kiln::UnaryFn;

constexpr double kInf = std::numeric_limits<double>::infinity();

double exact_limit(DType t) { return t == DType::Float32 ? 16777216.0 : 9007199254740992.0; }

// k units in the last place of values bounded by b in dtype t (an ulp of v is at most
// 2^-52 |v| in float64, 2^-23 |v| in float32).
double ulps(DType t, double b, double k) {
  return k * (t == DType::Float32 ? 0x1p-23 : 0x1p-52) * std::max(b, 1e-300);
}
// One ulp relative to the value, in dtype t.
double ulp_rel(DType t) { return t == DType::Float32 ? 0x1p-23 : 0x1p-52; }
// The spacing of subnormals: a rounding relative error bounds only above the normal range, and
// a product or quotient that underflows is off by up to this much (absolutely) instead.
double subnormal(DType t) { return t == DType::Float32 ? 0x1p-149 : 0x1p-1074; }

// Transcendental results: Kiln's (and libmvec's) within 4 ulp, NumPy's functions (glibc, or its own
// SIMD code) within 4 too; both sides round.
constexpr double kMathUlps = 10;

// Lipschitz bound of a unary function on [lo, hi] (the operand's range widened by its error),
// or +inf where it has none there.
double lipschitz(kiln::UnaryFn fn, double lo, double hi) {
  using kiln::UnaryFn;
  double b = std::max(std::fabs(lo), std::fabs(hi));
  switch (fn) {
    case UnaryFn::Exp:
    case UnaryFn::Expm1:
      return std::exp(hi);
    case UnaryFn::Log:
      return lo > 0 ? 1 / lo : kInf;
    case UnaryFn::Log1p:
      return lo > -1 ? 1 / (1 + lo) : kInf;
    case UnaryFn::Sqrt:
      return lo > 0 ? 0.5 / std::sqrt(lo) : kInf;
    case UnaryFn::Tan:
      return b < 1.5 ? 1 + std::pow(std::tan(b), 2) : kInf;
    case UnaryFn::Arcsin:
    case UnaryFn::Arccos:
      return b < 1 ? 1 / std::sqrt(1 - b * b) : kInf;
    case UnaryFn::Sigmoid:
      return 0.25;
    default:  // sin, cos, tanh, arctan, abs, negative: 1
      return 1;
  }
}

// Largest magnitude an integer result may reach (no overflow on either side).
double int_limit(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::Int32:
      return 2147483647.0;
    case DType::Int64:
      return 4611686018427387904.0;  // 2^62
    default:
      return kInf;
  }
}

double bnd(double lo, double hi) { return std::max(std::fabs(lo), std::fabs(hi)); }
bool is_integral(double v) { return std::isfinite(v) && std::floor(v) == v; }

std::string fmt_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// "kiln::DType::Float32" from kiln's own name ("float32").
std::string dtype_cpp(DType t) {
  std::string n = kiln::dtype_name(t);
  n[0] = static_cast<char>(std::toupper(n[0]));
  return "kiln::DType::" + n;
}

std::string shape_cpp(const Shape& s) {
  std::string r = "{";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + "}";
}

std::string ints_py(const std::vector<int>& v) {
  std::string r = "(";
  for (size_t k = 0; k < v.size(); ++k) r += (k ? ", " : "") + std::to_string(v[k]);
  return r + (v.size() == 1 ? ",)" : ")");
}
std::string ints_cpp(const std::vector<int>& v) {
  std::string r = "{";
  for (size_t k = 0; k < v.size(); ++k) r += (k ? ", " : "") + std::to_string(v[k]);
  return r + "}";
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// ---- NumPy's result shapes (computed independently of Kiln)
// --------------------------------------
int64_t slice_length(const kiln::Slice& s, int64_t n) {  // Python's slice.indices(n)
  int64_t step = s.step, b, e;
  if (step > 0) {
    b = s.start ? *s.start : 0;
    e = s.stop ? *s.stop : n;
    b = b < 0 ? std::max<int64_t>(b + n, 0) : std::min(b, n);
    e = e < 0 ? std::max<int64_t>(e + n, 0) : std::min(e, n);
    return e > b ? (e - b + step - 1) / step : 0;
  }
  b = s.start ? *s.start : n - 1;
  e = s.stop ? *s.stop : -1;
  bool e_default = !s.stop;
  b = b < 0 ? std::max<int64_t>(b + n, -1) : std::min(b, n - 1);
  if (!e_default) e = e < 0 ? std::max<int64_t>(e + n, -1) : std::min(e, n - 1);
  return b > e ? (b - e - step - 1) / (-step) : 0;
}

Shape sliced_shape(const Shape& in, const std::vector<kiln::Slice>& idx) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (d >= idx.size()) {
      out.push_back(in[d]);
    } else if (!idx[d].is_index) {
      out.push_back(slice_length(idx[d], in[d]));
    }
  }
  return out;
}

int norm_axis(int ax, int rank) { return ax < 0 ? ax + rank : ax; }

Shape reduced_shape(const Shape& in, const std::vector<int>& axes, bool kd) {
  int rank = static_cast<int>(in.size());
  std::vector<bool> red(rank, axes.empty());
  for (int ax : axes) red[norm_axis(ax, rank)] = true;
  Shape out;
  for (int d = 0; d < rank; ++d)
    if (!red[d])
      out.push_back(in[d]);
    else if (kd)
      out.push_back(1);
  return out;
}

// A Python / C++ number literal used as an operand.
struct Lit {
  ScalarKind kind = ScalarKind::Int;
  double f = 0;
  int64_t i = 0;
  double value() const { return kind == ScalarKind::Float ? f : static_cast<double>(i); }
  kiln::Scalar scalar() const {
    switch (kind) {
      case ScalarKind::Bool:
        return kiln::Scalar(i != 0);
      case ScalarKind::Int:
        return kiln::Scalar(i);
      case ScalarKind::Float:
        return kiln::Scalar(f);
    }
    return kiln::Scalar(0);
  }
  std::string text(bool py) const {
    std::string s;
    if (kind == ScalarKind::Bool)
      s = py ? (i ? "True" : "False") : (i ? "true" : "false");
    else if (kind == ScalarKind::Int)
      s = std::to_string(i);
    else
      s = fmt_double(f);
    if (s[0] == '-') s = "(" + s + ")";
    return s;
  }
  // The literal as a NumPy scalar of Kiln's conversion type (see note 2 at the top).
  std::string typed(DType t) const { return dtype_py(t) + "(" + text(true) + ")"; }
  // Kiln's default array type for the literal alone (where(c, 1, 2.5)).
  DType default_dtype() const {
    return kind == ScalarKind::Float ? DType::Float64
           : kind == ScalarKind::Int ? DType::Int64
                                     : DType::Bool;
  }
};

Lit lit_bool(bool b) {
  Lit l;
  l.kind = ScalarKind::Bool;
  l.i = b;
  l.f = b;
  return l;
}
Lit lit_int(int64_t v) {
  Lit l;
  l.kind = ScalarKind::Int;
  l.i = v;
  l.f = static_cast<double>(v);
  return l;
}
Lit lit_float(double v) {
  Lit l;
  l.kind = ScalarKind::Float;
  l.f = v;
  l.i = static_cast<int64_t>(v);
  return l;
}

// An operand of a binary op, where() or clip(): an expression or a literal.
struct Operand {
  Expr e;
  std::optional<Lit> lit;
  bool is_lit() const { return lit.has_value(); }
  double lo() const { return lit ? lit->value() : e.lo; }
  double hi() const { return lit ? lit->value() : e.hi; }
  bool nonfinite() const { return lit ? false : e.nonfinite; }
  bool exact() const { return lit ? true : e.exact; }
  bool integral() const { return lit ? is_integral(lit->value()) : e.integral; }
  bool loose() const { return lit ? false : e.loose; }
  double scale() const { return lit ? std::fabs(lit->value()) : e.scale; }
  double err() const { return lit ? 0 : e.err; }
  double inv() const { return lit ? 0 : e.inv; }
  double rel() const { return lit ? 0 : e.rel; }
  double total_err() const { return lit ? 0 : e.total_err(); }
  Shape shape() const { return lit ? Shape{} : e.shape; }
};
Operand op_of(const Expr& e) {
  Operand o;
  o.e = e;
  return o;
}
Operand op_of(const Lit& l) {
  Operand o;
  o.lit = l;
  return o;
}

// Text of operand `o` next to `other` (value operands of one op), per notes 1 and 2.
std::string np_text(const Operand& o, const Operand& other, DType lit_type) {
  if (o.lit) {
    if (!other.lit && other.e.rank() == 0) return o.lit->typed(lit_type);
    return o.lit->text(true);
  }
  if (!other.lit && o.e.rank() == 0 && other.e.rank() > 0 && o.e.dtype != other.e.dtype)
    return "np.reshape(" + o.e.np + ", (1,))";
  return o.e.np;
}
std::string cpp_text(const Operand& o) { return o.lit ? o.lit->text(false) : o.e.cpp; }

const char* binary_op_text(BinaryFn f) {
  switch (f) {
    case BinaryFn::Add:
      return "+";
    case BinaryFn::Sub:
      return "-";
    case BinaryFn::Mul:
      return "*";
    case BinaryFn::Div:
      return "/";
    case BinaryFn::Lt:
      return "<";
    case BinaryFn::Le:
      return "<=";
    case BinaryFn::Gt:
      return ">";
    case BinaryFn::Ge:
      return ">=";
    case BinaryFn::Eq:
      return "==";
    case BinaryFn::Ne:
      return "!=";
    case BinaryFn::BitAnd:
      return "&";
    case BinaryFn::BitOr:
      return "|";
    case BinaryFn::BitXor:
      return "^";
    case BinaryFn::LeftShift:
      return "<<";
    case BinaryFn::RightShift:
      return ">>";
    case BinaryFn::FloorDiv:
      return "//";
    default:
      return nullptr;
  }
}

enum class Red { Sum, Prod, Mean, Min, Max, All, Any, Var, Std };

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class Gen {
 public:
  Gen(uint64_t seed, int64_t index, const Options& opt)
      : opt_(opt), rng_(splitmix(seed ^ splitmix(static_cast<uint64_t>(index) + 1))) {
    c_.seed = seed;
    c_.index = index;
    c_.avoid_known_bugs = opt.avoid_known_bugs;
  }

  Case run() {
    if (coin(0.05)) big_ = true, opt_.max_elements = std::max<int64_t>(opt_.max_elements, 250000);
    make_inputs();
    int nroots = std::min(opt_.max_roots, weighted({70, 20, 10}) + 1);
    for (int r = 0; r < nroots; ++r)
      c_.roots.push_back(gen(static_cast<int>(uni(std::min(2, opt_.max_depth), opt_.max_depth))));
    return std::move(c_);
  }

 private:
  // ---- randomness ------------------------------------------------------------------------------
  int64_t uni(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  double unit() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  bool coin(double p) { return unit() < p; }
  int weighted(std::initializer_list<int> w) {
    int total = 0;
    for (int x : w) total += x;
    int64_t r = uni(0, total - 1);
    int k = 0;
    for (int x : w) {
      if (r < x) return k;
      r -= x;
      ++k;
    }
    return k - 1;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uni(0, static_cast<int64_t>(v.size()) - 1))];
  }

  // ---- inputs ----------------------------------------------------------------------------------
  int64_t random_dim() {
    double u = unit();
    if (u < 0.05) return 0;
    if (u < 0.2) return 1;
    if (u < 0.94) return uni(2, 9);
    return uni(10, 70);
  }

  Shape random_base() {
    int rank = weighted({10, 25, 35, 30});
    Shape s;
    for (int k = 0; k < rank; ++k) s.push_back(random_dim());
    if (big_ && !s.empty()) {  // blocks and intermediates of 20k to 250k elements
      s.back() = uni(20000, 120000);
      while (elements(s) > 240000) *std::max_element(s.begin(), s.end() - 1) /= 2;
      return s;
    }
    while (elements(s) > 3000) *std::max_element(s.begin(), s.end()) /= 2;
    return s;
  }

  // A shape related to the case's base shape (so that broadcasting usually applies).
  Shape derived_shape() {
    if (coin(0.12)) {
      Shape s;
      int rank = static_cast<int>(uni(0, 3));
      for (int k = 0; k < rank; ++k) s.push_back(uni(1, 6));
      return s;
    }
    size_t drop = coin(0.25) ? static_cast<size_t>(uni(0, base_.size())) : 0;
    Shape s(base_.begin() + drop, base_.end());
    for (auto& d : s)
      if (coin(0.2)) d = 1;
    return s;
  }

  Shape random_block(const Shape& s) {
    if (coin(0.1)) return {};  // automatic
    Shape b;
    for (int64_t d : s) b.push_back(d == 0 || coin(0.2) ? 0 : uni(1, d));
    return b;
  }

  NDArray random_values(DType t, const Shape& s) {
    uint32_t seed = static_cast<uint32_t>(rng_());
    if (t == DType::Bool) return kt::random_array(t, s, seed);
    if (kiln::is_int(t)) {
      int64_t r = coin(0.7) ? 5 : 100;
      int64_t lo = coin(0.15) ? 0 : -r;
      return kt::random_array(t, s, seed, static_cast<double>(lo), static_cast<double>(r + 1));
    }
    double lo = -3, hi = 3;
    switch (weighted({60, 15, 15, 10})) {
      case 1:
        lo = 0.5, hi = 4;
        break;
      case 2:
        lo = -1, hi = 1;
        break;
      case 3:
        lo = -100, hi = 100;
        break;
      default:
        break;
    }
    NDArray a = kt::random_array(t, s, seed, lo, hi);
    int mode = weighted({75, 15, 10});  // plain, halves (ties for round/argmax), specials
    for (int64_t k = 0; k < a.size(); ++k) {
      double v = a.at(k);
      if (mode == 1) v = std::floor(v * 2) / 2;
      if (mode == 2 && coin(0.12)) {
        const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0};
        v = specials[uni(0, 5)];
      }
      if (t == DType::Float32)
        static_cast<float*>(a.data())[k] = static_cast<float>(v);
      else
        static_cast<double*>(a.data())[k] = v;
    }
    return a;
  }

  // Value facts of concrete data.
  static void scan(const NDArray& a, Expr* e) {
    e->lo = kInf;
    e->hi = -kInf;
    e->nonfinite = false;
    e->integral = true;
    for (int64_t k = 0; k < a.size(); ++k) {
      double v = a.at(k);
      if (!std::isfinite(v)) {
        e->nonfinite = true;
        continue;
      }
      e->lo = std::min(e->lo, v);
      e->hi = std::max(e->hi, v);
      if (std::floor(v) != v) e->integral = false;
    }
    if (e->lo > e->hi) e->lo = e->hi = 0;
    e->scale = bnd(e->lo, e->hi);
    e->exact = true;
  }

  // A lazy random generator input (uniform, normal or integers) and its values, computed apart
  // (unfused, one thread, automatic chunks); returns its dtype.
  DType random_input(Input* in, DType t, const Shape& s) {
    uint64_t seed = static_cast<uint64_t>(uni(0, 1000000));
    int kind = static_cast<int>(uni(0, 2));
    double lo = static_cast<double>(uni(-3, 0)), hi = lo + static_cast<double>(uni(1, 4));
    int64_t ilo = uni(-50, 0), ihi = ilo + uni(1, 100);
    if (kind == 2 && !kiln::is_int(t)) t = coin(0.5) ? DType::Int32 : DType::Int64;
    if (kind != 2 && !kiln::is_float(t)) t = DType::Float64;
    if (kind == 1) t = DType::Float64;  // normals are float64
    auto make = [&](const Shape& chunks) {
      kiln::random::Generator g(seed);
      if (kind == 0) return g.uniform(lo, hi, s, chunks, t);
      if (kind == 1) return g.normal(lo, hi - lo, s, chunks);
      return g.integers(ilo, ihi, s, chunks, t);
    };
    kiln::ComputeOptions whole;
    whole.fuse = false;
    whole.threads = 1;
    in->data = kiln::compute({make({})}, whole)[0];
    in->array = make(in->block);
    auto num_cpp = [](double v) { return std::to_string(static_cast<int64_t>(v)) + ".0"; };
    std::ostringstream o;
    o << "kiln::random::Generator(" << seed << ")."
      << (kind == 0   ? "uniform(" + num_cpp(lo) + ", " + num_cpp(hi)
          : kind == 1 ? "normal(" + num_cpp(lo) + ", " + num_cpp(hi - lo)
                      : "integers(" + std::to_string(ilo) + ", " + std::to_string(ihi))
      << ", " << shape_cpp(s) << ", " << shape_cpp(in->block)
      << (kind == 1 ? "" : ", " + dtype_cpp(t)) << ")";
    in->source = o.str();
    return t;
  }

  void make_inputs() {
    base_ = random_base();
    int n = weighted({30, 35, 20, 15}) + 1;
    const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
    for (int j = 0; j < n; ++j) {
      Input in;
      in.name = "x" + std::to_string(j);
      DType t = types[weighted({15, 18, 17, 20, 30})];
      Shape s = derived_shape();
      in.block = random_block(s);
      int source = weighted({70, 18, opt_.file_dir.empty() ? 0 : 12});
      if (source == 1) {
        t = random_input(&in, t, s);
      } else {
        in.data = random_values(t, s);
        in.array = kiln::from_buffer(in.data.data(), t, s, in.block);
      }
      if (source == 2) {
        in.file = opt_.file_dir + "/s" + std::to_string(c_.seed) + "_c" + std::to_string(c_.index) +
                  "_" + in.name + ".npy";
        in.data.save_npy(in.file);
        in.array = kiln::load_npy(in.file, in.block);
        in.source = "kiln::load_npy(\"" + in.file + "\", " + shape_cpp(in.block) + ")";
      }
      Expr e;
      e.k = in.array;
      e.np = in.name;
      e.cpp = in.name;
      e.dtype = t;
      e.shape = s;
      scan(in.data, &e);
      c_.inputs.push_back(in);
      input_exprs_.push_back(e);
    }
  }

  // ---- leaves ----------------------------------------------------------------------------------
  Expr leaf() {
    int kind = weighted({62, pool_.empty() ? 0 : 24, 14});
    if (kind == 1) {
      for (int attempt = 0; attempt < 4; ++attempt) {
        const Expr& e = pick(pool_);
        if (e.np.size() < 160) return e;
      }
      kind = 0;
    }
    if (kind == 0) return pick(input_exprs_);
    if (auto e = creation_leaf()) return *e;
    return pick(input_exprs_);
  }

  std::optional<Expr> reshape_created(Expr e, const Shape& s) {
    if (e.shape == s) return e;
    return apply_reshape(e, s);
  }

  std::optional<Expr> creation_leaf() {
    Shape s = derived_shape();
    int64_t n = elements(s);
    Shape block1 = {coin(0.3) ? 0 : uni(1, std::max<int64_t>(1, n))};
    Expr e;
    try {
      switch (weighted({30, 30, 15, 25, 12})) {
        case 0: {  // arange, integer or on a grid of quarters (exact either way)
          if (coin(0.6)) {
            int64_t start = uni(-5, 5), step = pick(std::vector<int64_t>{1, 1, 2, 3, -1, -2});
            int64_t stop = start + step * n;
            e.k = kiln::arange(start, stop, step, block1);
            e.np = "np.arange(" + std::to_string(start) + ", " + std::to_string(stop) + ", " +
                   std::to_string(step) + ")";
            e.cpp = "kiln::arange(" + std::to_string(start) + ", " + std::to_string(stop) + ", " +
                    std::to_string(step) + ", " + shape_cpp(block1) + ")";
            e.dtype = DType::Int64;
            double last = static_cast<double>(start + step * std::max<int64_t>(n - 1, 0));
            e.lo = std::min<double>(start, last);
            e.hi = std::max<double>(start, last);
            e.integral = true;
          } else {
            double start = static_cast<double>(uni(-12, 12)) / 4;
            double step = pick(std::vector<double>{0.25, 0.5, -0.75, 1.5});
            double stop = n == 0 ? start : start + step * static_cast<double>(n) - step / 2;
            e.k = kiln::arange(start, stop, step, block1);
            e.np = "np.arange(" + fmt_double(start) + ", " + fmt_double(stop) + ", " +
                   fmt_double(step) + ")";
            e.cpp = "kiln::arange(" + fmt_double(start) + ", " + fmt_double(stop) + ", " +
                    fmt_double(step) + ", " + shape_cpp(block1) + ")";
            e.dtype = DType::Float64;
            double last = start + step * static_cast<double>(std::max<int64_t>(n - 1, 0));
            e.lo = std::min(start, last);
            e.hi = std::max(start, last);
            e.integral = false;
          }
          e.shape = {n};
          break;
        }
        case 1: {  // full
          const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32,
                                 DType::Float64};
          DType t = types[uni(0, 4)];
          Lit v = t == DType::Bool  ? lit_bool(coin(0.5))
                  : kiln::is_int(t) ? lit_int(uni(-5, 5))
                  : coin(0.3)       ? lit_int(uni(-5, 5))
                                    : lit_float(static_cast<double>(uni(-20, 20)) / 4);
          Shape b = random_block(s);
          e.k = kiln::full(s, v.scalar(), t, b);
          e.np = "np.full(" + shape_py(s) + ", " + v.text(true) + ", dtype=" + dtype_py(t) + ")";
          e.cpp = "kiln::full(" + shape_cpp(s) + ", " + v.text(false) + ", " + dtype_cpp(t) + ", " +
                  shape_cpp(b) + ")";
          e.dtype = t;
          e.shape = s;
          e.lo = e.hi = t == DType::Bool ? (v.value() != 0) : v.value();
          e.integral = is_integral(e.lo);
          return finish_leaf(e);
        }
        case 4: {  // a 0-d array from kiln::scalar (a Scalar node used as an array)
          const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32,
                                 DType::Float64};
          DType t = types[uni(0, 4)];
          Lit v = t == DType::Bool  ? lit_bool(coin(0.5))
                  : kiln::is_int(t) ? lit_int(uni(-5, 5))
                                    : lit_float(static_cast<double>(uni(-20, 20)) / 4);
          e.np = "np.array(" + v.text(true) + ", dtype=" + dtype_py(t) + ")";
          e.cpp = "kiln::scalar(" + v.text(false) + ", " + dtype_cpp(t) + ")";
          e.k = kiln::scalar(v.scalar(), t);
          e.dtype = t;
          e.shape = {};
          e.lo = e.hi = v.value();
          e.integral = is_integral(e.lo);
          return finish_leaf(e);
        }
        case 2: {  // zeros / ones
          const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32,
                                 DType::Float64};
          DType t = types[uni(0, 4)];
          bool one = coin(0.5);
          Shape b = random_block(s);
          e.k = one ? kiln::ones(s, b, t) : kiln::zeros(s, b, t);
          e.np = std::string(one ? "np.ones(" : "np.zeros(") + shape_py(s) +
                 ", dtype=" + dtype_py(t) + ")";
          e.cpp = std::string(one ? "kiln::ones(" : "kiln::zeros(") + shape_cpp(s) + ", " +
                  shape_cpp(b) + ", " + dtype_cpp(t) + ")";
          e.dtype = t;
          e.shape = s;
          e.lo = e.hi = one ? 1 : 0;
          e.integral = true;
          return finish_leaf(e);
        }
        default: {  // linspace: Kiln documents NumPy's exact formula
          double start = static_cast<double>(uni(-8, 8)) / 2;
          double stop = start + static_cast<double>(uni(-16, 16)) / 3;
          bool endpoint = coin(0.7);
          e.k = kiln::linspace(start, stop, n, endpoint, block1);
          e.np = "np.linspace(" + fmt_double(start) + ", " + fmt_double(stop) + ", " +
                 std::to_string(n) + ", endpoint=" + (endpoint ? "True" : "False") + ")";
          e.cpp = "kiln::linspace(" + fmt_double(start) + ", " + fmt_double(stop) + ", " +
                  std::to_string(n) + ", " + (endpoint ? "true" : "false") + ", " +
                  shape_cpp(block1) + ")";
          e.dtype = DType::Float64;
          e.shape = {n};
          e.lo = std::min(start, stop);
          e.hi = std::max(start, stop);
          e.integral = false;
          break;
        }
      }
    } catch (const kiln::Error& err) {
      c_.kiln_errors.push_back(e.cpp + ": " + err.what());
      return std::nullopt;
    }
    finish_leaf(e);
    return reshape_created(e, s);
  }

  Expr finish_leaf(Expr& e) {
    e.scale = bnd(e.lo, e.hi);
    e.exact = true;
    e.nonfinite = false;
    return e;
  }

  // ---- literals --------------------------------------------------------------------------------
  Lit random_lit(DType near) {
    int kind = weighted({near == DType::Bool ? 25 : 8, 50, 42});
    if (kind == 0) return lit_bool(coin(0.6));
    if (kind == 1) {
      if (coin(0.06)) return wide_int_lit(near);
      return lit_int(coin(0.85) ? uni(-5, 5) : uni(-100, 100));
    }
    if (coin(0.04) && near != DType::Float32) {  // float32: 1e300 would be inf (as in NumPy)
      return lit_float(pick(std::vector<double>{1e300, -1e300, 1e-300, 1e10, -2.5e-8, 6.0e4}));
    }
    switch (weighted({70, 30})) {
      case 0:
        return lit_float(static_cast<double>(uni(-24, 24)) / 4);
      default:
        return lit_float(pick(std::vector<double>{0.1, 0.3, -0.7, 2.5, 1e-3, 7.25, -33.5, 100.0}));
    }
  }
  // An integer literal far outside [-100, 100] that fits the type it is converted to (NEP 50: one
  // that does not is an error on both sides), exactly representable as a double (NumPy converts
  // a Python int to float32 through a double).
  Lit wide_int_lit(DType near) {
    if (near == DType::Int32)
      return lit_int(
          pick(std::vector<int64_t>{2147483647, -2147483647 - 1, 1073741824, -123456789, 65536}));
    return lit_int(pick(std::vector<int64_t>{int64_t{1} << 31, -(int64_t{1} << 31) - 1,
                                             (int64_t{1} << 40) + 7, (int64_t{1} << 53) - 1,
                                             int64_t{1} << 62, -(int64_t{1} << 62) + 1}));
  }
  Lit nonzero_lit(DType near) {
    for (;;) {
      Lit l = random_lit(near);
      if (l.value() != 0) return l;
    }
  }

  // ---- generic construction --------------------------------------------------------------------
  // Builds e->k with f(); a kiln::Error, or a shape other than NumPy's `want`, is a finding (and
  // the expression is not used further: later ops would build on a wrong shape).
  template <class F>
  bool build(Expr* e, F&& f, const Shape& want) {
    try {
      e->k = f();
    } catch (const kiln::Error& err) {
      c_.kiln_errors.push_back(e->cpp + "\n    -> " + err.what());
      return false;
    }
    e->dtype = e->k.dtype();
    e->shape = e->k.shape();
    if (e->shape != want) {
      c_.kiln_errors.push_back(e->cpp + "\n    NumPy: " + e->np + "\n    -> Kiln's shape is " +
                               shape_py(e->shape) + ", NumPy's " + shape_py(want));
      return false;
    }
    return true;
  }

  bool too_big(const Shape& s) const {
    return elements(s) > opt_.max_elements || static_cast<int>(s.size()) > 4;
  }

  // ---- element-wise ----------------------------------------------------------------------------
  static void mark_loose(Expr* e, bool inputs) {
    e->loose = inputs || (e->dtype == DType::Float32 && !e->exact);
  }

  static DType promoted(const Operand& x, const Operand& y) {
    if (!x.lit && !y.lit) return kiln::promote(x.e.dtype, y.e.dtype);
    if (x.lit && y.lit) return kiln::promote(x.lit->default_dtype(), y.lit->default_dtype());
    if (x.lit) return kiln::promote_scalar(y.e.dtype, x.lit->kind);
    return kiln::promote_scalar(x.e.dtype, y.lit->kind);
  }

  std::optional<Expr> apply_binary(BinaryFn f, const Operand& x, const Operand& y) {
    if (x.lit && y.lit) return std::nullopt;
    DType p = promoted(x, y);
    DType ct = f == BinaryFn::Div                          ? kiln::float_result(p)
               : (f == BinaryFn::And || f == BinaryFn::Or) ? DType::Bool
                                                           : p;
    bool boolean = kiln::is_comparison(f) || f == BinaryFn::And || f == BinaryFn::Or;
    DType out = boolean ? DType::Bool : ct;
    if (f == BinaryFn::Sub && ct == DType::Bool) return std::nullopt;
    if ((f == BinaryFn::Mod || f == BinaryFn::Pow) && ct == DType::Bool) return std::nullopt;
    bool discontinuous = boolean || f == BinaryFn::Mod || f == BinaryFn::FloorDiv;
    if (discontinuous && !(x.exact() && y.exact())) return std::nullopt;
    auto shape = broadcast(x.shape(), y.shape());
    if (!shape || too_big(*shape)) return std::nullopt;

    double lx = x.lo(), hx = x.hi(), ly = y.lo(), hy = y.hi();
    double lo = 0, hi = 1;
    bool nonfinite = !boolean && (x.nonfinite() || y.nonfinite());
    bool exact = x.exact() && y.exact();
    bool integral = x.integral() && y.integral();
    bool finite_in = std::isfinite(bnd(lx, hx)) && std::isfinite(bnd(ly, hy));
    switch (f) {
      case BinaryFn::Add:
      case BinaryFn::Sub:
      case BinaryFn::Mul:
        if (ct == DType::Bool) break;  // logical or / and
        if (!finite_in) {
          lo = -kInf, hi = kInf;
        } else if (f == BinaryFn::Add) {
          lo = lx + ly, hi = hx + hy;
        } else if (f == BinaryFn::Sub) {
          lo = lx - hy, hi = hx - ly;
        } else {
          double c[] = {lx * ly, lx * hy, hx * ly, hx * hy};
          lo = *std::min_element(c, c + 4), hi = *std::max_element(c, c + 4);
        }
        break;
      case BinaryFn::Div:
        integral = false;
        if (ly <= 0 && hy >= 0) {  // may divide by zero: +-inf or NaN
          lo = -kInf, hi = kInf;
          nonfinite = true;
        } else if (!finite_in) {
          lo = -kInf, hi = kInf;
        } else {
          double c[] = {lx / ly, lx / hy, hx / ly, hx / hy};
          lo = *std::min_element(c, c + 4), hi = *std::max_element(c, c + 4);
        }
        break;
      case BinaryFn::Mod: {
        // Python semantics: the result has the divisor's sign, |result| <= |divisor|.
        double b = bnd(ly, hy), one = kiln::is_float(ct) ? 0 : 1;
        if (ly > 0)
          lo = 0, hi = hy - one;
        else if (hy < 0)
          lo = ly + one, hi = 0;
        else
          lo = -b, hi = b;
        if (kiln::is_float(ct) && ly <= 0 && hy >= 0) nonfinite = true;  // x % 0.0 is NaN
        break;
      }
      case BinaryFn::Pow: {
        // Callers guard the operands; here only the ranges Kiln and NumPy must agree on.
        double bb = bnd(lx, hx);
        if (!finite_in) return std::nullopt;
        if (kiln::is_int(ct)) {
          if (!(ly >= 0 && hy <= 3 && y.integral())) return std::nullopt;
          double m = std::pow(std::max(bb, 1.0), hy);
          if (m > int_limit(ct) / 2) return std::nullopt;
          lo = -m, hi = m;
        } else {
          if (ly < -3 || hy > 3) return std::nullopt;
          if (lx > 0) {
            if (hx > 1e3 || (ly < 0 && lx < 0.25)) return std::nullopt;
            double c[] = {std::pow(lx, ly), std::pow(lx, hy), std::pow(hx, ly), std::pow(hx, hy)};
            lo = *std::min_element(c, c + 4), hi = *std::max_element(c, c + 4);
            lo = std::min(lo, 1.0), hi = std::max(hi, 1.0);
          } else {
            // Non-positive bases only with a literal non-negative integer exponent.
            if (!(y.lit && is_integral(y.lit->value()) && ly >= 0)) return std::nullopt;
            double m = std::pow(std::max(bb, 1.0), hy);
            lo = -m, hi = m;
          }
          // x ** 0 and x ** 1 are exact everywhere. x ** 2 only for an ndarray base, which NumPy
          // squares (fast_scalar_power); a NumPy scalar base goes through glibc's pow/powf, not
          // guaranteed correctly rounded.
          double e = y.lit ? y.lit->value() : -1;
          bool squared = e == 2 && x.e.rank() > 0 && x.e.dtype != DType::Bool;
          exact = exact && y.lit && (e == 0 || e == 1 || squared);
          integral = integral && exact;
        }
        break;
      }
      case BinaryFn::BitAnd:
      case BinaryFn::BitOr:
      case BinaryFn::BitXor: {
        if (kiln::is_float(ct)) return std::nullopt;
        // Within the smallest power of two that holds both operands' magnitudes.
        double m = std::exp2(std::ceil(std::log2(std::max(bnd(lx, hx), bnd(ly, hy)) + 1)));
        lo = -m, hi = m;
        break;
      }
      case BinaryFn::LeftShift:
      case BinaryFn::RightShift: {
        if (kiln::is_float(ct) || ct == DType::Bool || !finite_in) return std::nullopt;
        double bits = ct == DType::Int32 ? 32 : 64;
        // Amounts beyond the width (and negative ones) are defined: 0, or -1 to the right.
        if (f == BinaryFn::LeftShift) {
          if (ly < 0 || hy > 8) return std::nullopt;  // keeps the value's bound
          double m = bnd(lx, hx) * std::exp2(hy);
          lo = -m, hi = m;
        } else {
          if (ly < -bits || hy > 2 * bits) return std::nullopt;
          lo = std::min(lx, -1.0), hi = std::max(hx, 0.0);
        }
        break;
      }
      case BinaryFn::FloorDiv:
        if (ct == DType::Bool) return std::nullopt;
        if (ly <= 0 && hy >= 0) {  // x // 0: 0 on integers, +-inf or NaN on floats
          lo = -kInf, hi = kInf;
          if (kiln::is_float(ct)) nonfinite = true;
        } else if (!finite_in) {
          lo = -kInf, hi = kInf;
        } else {
          double c[] = {lx / ly, lx / hy, hx / ly, hx / hy};
          lo = std::floor(*std::min_element(c, c + 4)), hi = std::ceil(*std::max_element(c, c + 4));
        }
        if (kiln::is_int(ct) && !std::isfinite(bnd(lo, hi))) lo = -bnd(lx, hx), hi = bnd(lx, hx);
        break;
      case BinaryFn::Max:
        lo = std::max(lx, ly), hi = std::max(hx, hy);
        break;
      case BinaryFn::Min:
        lo = std::min(lx, ly), hi = std::min(hx, hy);
        break;
      default:  // comparisons, logical
        lo = 0, hi = 1;
        break;
    }
    if (boolean || ct == DType::Bool) lo = 0, hi = 1;
    if (kiln::is_int(out) && bnd(lo, hi) > int_limit(out)) {
      // Integer overflow wraps around in both (two's complement; INT_MIN // -1 is INT_MIN): now
      // and then the result is kept, bounded by the whole type, so that later integer arithmetic
      // on it is not generated but comparisons, min/max, bitwise ops, casts and roots are.
      bool wraps =
          f == BinaryFn::Add || f == BinaryFn::Sub || f == BinaryFn::Mul || f == BinaryFn::FloorDiv;
      if (!wraps || !finite_in || !coin(0.5)) return std::nullopt;
      double half = out == DType::Int32 ? 2147483648.0 : 9223372036854775808.0;
      lo = -half, hi = half - 1;
    }
    if (kiln::is_float(out)) {
      if (!std::isfinite(bnd(lo, hi))) integral = false;
      if (integral && bnd(lo, hi) >= exact_limit(out)) integral = false;
      if (!exact &&
          !(std::isfinite(x.scale()) && std::isfinite(y.scale()) && std::isfinite(bnd(lo, hi))))
        return std::nullopt;  // an inexact value needs a finite tolerance scale
    } else {
      integral = true;
      exact = true;
    }

    Expr e;
    std::string nx = np_text(x, y, p), ny = np_text(y, x, p);
    std::string cx = cpp_text(x), cy = cpp_text(y);
    // Only 0-d operands (arrays or literals): NumPy 1.24 promotes them by value, typed NumPy
    // scalars included (float32 ** int64 is float32 there, bool ** np.int64(2) is int8; Kiln and
    // NumPy 2 give float64 and int64), and `** 2.0` squares a bool as int8. So NumPy computes on
    // (1,)-shaped arrays, the literal as an array of the type Kiln gives it, and reshapes back.
    bool x0d = x.lit || x.e.rank() == 0, y0d = y.lit || y.e.rank() == 0;
    bool both_0d = x0d && y0d && !(x.lit && y.lit);
    auto as_1d = [&](const Operand& o) {
      return o.lit ? "np.array([" + o.lit->text(true) + "], dtype=" + dtype_py(p) + ")"
                   : "np.reshape(" + o.e.np + ", (1,))";
    };
    if (both_0d) {
      nx = as_1d(x);
      ny = as_1d(y);
    }
    if (const char* o = binary_op_text(f)) {
      e.np = "(" + nx + " " + o + " " + ny + ")";
      e.cpp = "(" + cx + " " + o + " " + cy + ")";
    } else {
      const char *npf = "", *cf = "";
      switch (f) {
        case BinaryFn::Mod:
          npf = "np.remainder", cf = "kiln::mod";
          break;
        case BinaryFn::Pow:
          npf = nullptr, cf = "kiln::pow";
          break;
        case BinaryFn::Max:
          npf = "np.maximum", cf = "kiln::maximum";
          break;
        case BinaryFn::Min:
          npf = "np.minimum", cf = "kiln::minimum";
          break;
        case BinaryFn::And:
          npf = "np.logical_and", cf = "kiln::logical_and";
          break;
        case BinaryFn::Or:
          npf = "np.logical_or", cf = "kiln::logical_or";
          break;
        default:
          break;
      }
      // `**`: for an array base and a literal exponent NumPy takes its fast_scalar_power path
      // (square, sqrt, reciprocal...), the common spelling. Except for a bool array base, which
      // that path squares as int8 (np.square has no bool loop): np.power there.
      if (f == BinaryFn::Pow && !x.lit && x.e.dtype == DType::Bool && (x.e.rank() > 0 || both_0d))
        npf = "np.power";
      e.np = npf ? std::string(npf) + "(" + nx + ", " + ny + ")" : "(" + nx + " ** " + ny + ")";
      e.cpp = std::string(cf) + "(" + cx + ", " + cy + ")";
    }
    if (both_0d) e.np = "np.reshape(" + e.np + ", ())";
    if (!build(
            &e,
            [&] {
              if (x.lit) return kiln::binary(f, x.lit->scalar(), y.e.k);
              if (y.lit) return kiln::binary(f, x.e.k, y.lit->scalar());
              return kiln::binary(f, x.e.k, y.e.k);
            },
            *shape))
      return std::nullopt;
    e.lo = lo, e.hi = hi;
    e.nonfinite = kiln::is_float(e.dtype) && nonfinite;
    e.exact = exact;
    e.integral = integral;
    e.scale = std::max({x.scale(), y.scale(), bnd(lo, hi)});
    mark_loose(&e, x.loose() || y.loose());
    if (!e.exact) {
      binary_tolerance(f, x, y, &e);
      if (!std::isfinite(e.err) || !std::isfinite(e.rel)) return std::nullopt;
    }
    return e;
  }

  // The error bound of f(x, y) (see Expr::err): the operands' errors carried through f
  // (doubled for the second-order terms a first-order bound drops) and f's own rounding.
  static void binary_tolerance(BinaryFn f, const Operand& x, const Operand& y, Expr* e) {
    // The absolute parts: err and a square root's sqrt(inv) (dropping the latter let a std of
    // equal values, 8.9e-17 where NumPy's is exactly 0, fail when multiplied: seed 79, case 135).
    double ex = x.err() + std::sqrt(x.inv()), ey = y.err() + std::sqrt(y.inv());
    double rx = x.rel(), ry = y.rel();
    double ax = x.total_err(), ay = y.total_err();
    double bx = bnd(x.lo(), x.hi()), by = bnd(y.lo(), y.hi());
    double own = 2 * ulp_rel(e->dtype);
    switch (f) {
      case BinaryFn::Add:
      case BinaryFn::Sub:
        e->err = 2 * (ax + ay), e->rel = own;
        return;
      case BinaryFn::Mul:  // (x + dx)(y + dy): relative parts add, absolute parts scale
        e->err = 2 * (ex * (by + ay) + ey * (bx + ax)) + subnormal(e->dtype);
        e->rel = 2 * (rx + ry) + own;
        return;
      case BinaryFn::Div: {
        double m = y.lo() > 0 ? y.lo() : y.hi() < 0 ? -y.hi() : 0;  // min |y|
        if (m - ay <= 0 || ry >= 0.5) {
          e->err = kInf;
          return;
        }
        e->err = 2 * (ex / (m - ay) + (bx + ax) * ey / (m * (m - ay))) + subnormal(e->dtype);
        e->rel = 2 * (rx + ry / (1 - ry)) + own;
        return;
      }
      case BinaryFn::Max:
      case BinaryFn::Min:
        e->err = std::max(ex, ey) +
                 std::max(x.is_lit() ? 0 : std::sqrt(x.e.inv), y.is_lit() ? 0 : std::sqrt(y.e.inv));
        e->rel = std::max(rx, ry);
        return;
      case BinaryFn::Pow: {
        double math = kMathUlps * ulp_rel(e->dtype);
        double ylo = y.lo() - ay, yhi = y.hi() + ay, ym = std::max(std::fabs(ylo), std::fabs(yhi));
        double xlo = x.lo() - ax;
        if (xlo > 0) {  // x^y (1 + y dx/x + dy ln x): relative
          double r =
              ym * ax / xlo + ay * std::max(std::fabs(std::log(xlo)), std::fabs(std::log(bx + ax)));
          e->err = 0, e->rel = (r > 0.1 ? kInf : 2 * r) + math;
          return;
        }
        if (ay > 0) {  // an inexact exponent of a non-positive base
          e->err = kInf;
          return;
        }
        double k = std::fabs(y.lo());  // a literal integer exponent
        e->err = 2 * k * std::pow(bx + ax, std::max(k - 1, 0.0)) * ex;
        e->rel = 2 * k * rx + math;
        return;
      }
      default:  // discontinuous ops (comparisons, %, //, bitwise) are given exact operands only
        e->err = kInf;
        return;
    }
  }

  // abs(e) + 1: a guard that makes e >= 1 (sqrt, log, divisors, pow bases).
  std::optional<Expr> guard_abs1(const Expr& e) {
    auto a = apply_unary(UnaryFn::Abs, e);
    if (!a) return std::nullopt;
    return apply_binary(BinaryFn::Add, op_of(*a), op_of(lit_int(1)));
  }

  std::optional<Expr> guard_clip(const Expr& e, double limit) {
    return apply_clip(e, lit_float(-limit), lit_float(limit));
  }

  // A second operand for `a`: broadcast-compatible with it.
  std::optional<Expr> partner(const Expr& a, int depth) {
    int kind = weighted({15, 15, 70});
    if (kind == 0) return a;
    if (kind == 1 && a.rank() > 0) {
      std::vector<int> axes;
      for (int k = 0; k < a.rank(); ++k)
        if (coin(0.5)) axes.push_back(k);
      const Red reds[] = {Red::Sum, Red::Mean, Red::Max, Red::Min, Red::Any};
      if (auto r = apply_reduce(reds[uni(0, 4)], a, axes, true, 0)) return r;
    }
    for (int attempt = 0; attempt < 5; ++attempt) {
      Expr b = attempt < 3 ? gen(depth) : leaf();
      auto s = broadcast(a.shape, b.shape);
      if (s && !too_big(*s)) return b;
    }
    return std::nullopt;
  }

  std::optional<Expr> op_arith(int depth) {
    const BinaryFn fns[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul,
                            BinaryFn::Div, BinaryFn::Mod, BinaryFn::Pow,
                            BinaryFn::Max, BinaryFn::Min, BinaryFn::FloorDiv};
    BinaryFn f = fns[weighted({6, 4, 5, 4, 3, 3, 2, 2, 2})];
    Expr a = gen(depth - 1);
    int form = weighted({55, 30, 15});  // array-array, array-literal, literal-array
    Operand x = op_of(a), y;
    if (form == 0) {
      if (auto b = partner(a, depth - 1))
        y = op_of(*b);
      else
        form = 1;
    }
    if (form != 0) {
      bool divides = f == BinaryFn::Div || f == BinaryFn::Mod || f == BinaryFn::FloorDiv;
      Lit l = divides && form == 1 ? nonzero_lit(a.dtype) : random_lit(a.dtype);
      if (f == BinaryFn::Pow) {
        if (form == 1)
          l = coin(0.7) ? lit_int(uni(0, 3))
                        : lit_float(pick(std::vector<double>{0.5, -1.0, 1.5, -0.5, 2.0}));
        else
          l = kiln::is_int(a.dtype) || a.dtype == DType::Bool
                  ? lit_int(uni(-2, 3))
                  : lit_float(pick(std::vector<double>{2.0, 0.5, 1.5, 3.0}));
      }
      y = op_of(l);
      if (form == 2) std::swap(x, y);
    }
    if (f == BinaryFn::Div && !y.lit) {
      bool near_zero = y.lo() <= 0.5 && y.hi() >= -0.5;
      if ((near_zero && !y.exact()) || (y.lo() <= 0 && y.hi() >= 0 && coin(0.5)) ||
          !std::isfinite(y.scale())) {
        if (auto g = guard_abs1(y.e)) y = op_of(*g);
      }
    }
    if (f == BinaryFn::Pow) {
      if (!x.lit) {
        bool int_pow = kiln::is_int(promoted(x, y)) || promoted(x, y) == DType::Bool;
        bool need = int_pow ? !std::isfinite(x.scale())
                            : !(x.lo() >= 0.25 && x.hi() <= 1e3) &&
                                  !(y.lit && is_integral(y.lit->value()) && y.lit->value() >= 0);
        if (need) {
          auto g = guard_abs1(x.e);
          if (!g) return std::nullopt;
          if (!int_pow && g->hi > 1e3) g = guard_clip(*g, 50);
          if (!g) return std::nullopt;
          x = op_of(*g);
        }
      }
      if (!y.lit) {
        bool int_pow = kiln::is_int(promoted(x, y));
        double lim = int_pow ? 3 : 2;
        if (y.lo() < (int_pow ? 0 : -lim) || y.hi() > lim || !std::isfinite(y.scale())) {
          auto g = int_pow ? apply_clip(y.e, lit_int(0), lit_int(3)) : guard_clip(y.e, 2);
          if (!g) return std::nullopt;
          y = op_of(*g);
        }
      }
    }
    return apply_binary(f, x, y);
  }

  std::optional<Expr> op_compare(int depth) {
    const BinaryFn fns[] = {BinaryFn::Lt, BinaryFn::Le, BinaryFn::Gt,
                            BinaryFn::Ge, BinaryFn::Eq, BinaryFn::Ne};
    BinaryFn f = fns[uni(0, 5)];
    Expr a = gen(depth - 1);
    if (!a.exact) return std::nullopt;
    Operand x = op_of(a), y;
    auto b = coin(0.6) ? partner(a, depth - 1) : std::nullopt;
    if (b && b->exact)
      y = op_of(*b);
    else
      y = op_of(random_lit(a.dtype));
    if (y.lit && coin(0.3)) std::swap(x, y);
    return apply_binary(f, x, y);
  }

  std::optional<Expr> op_logical(int depth) {
    Expr a = gen(depth - 1);
    if (!a.exact) return std::nullopt;
    bool integer = !kiln::is_float(a.dtype);
    if (coin(0.3)) return apply_unary(integer && coin(0.5) ? UnaryFn::Invert : UnaryFn::Not, a);
    static const BinaryFn kBitwise[] = {BinaryFn::BitAnd, BinaryFn::BitOr, BinaryFn::BitXor,
                                        BinaryFn::LeftShift, BinaryFn::RightShift};
    BinaryFn f = integer && coin(0.6) ? kBitwise[uni(0, 4)]
                 : coin(0.5)          ? BinaryFn::And
                                      : BinaryFn::Or;
    auto b = partner(a, depth - 1);
    if (!b || !b->exact) return std::nullopt;
    return apply_binary(f, op_of(a), op_of(*b));
  }

  std::optional<Expr> apply_unary(UnaryFn fn, const Expr& a) {
    bool boolean_in = a.dtype == DType::Bool;
    double lo = a.lo, hi = a.hi, b = bnd(lo, hi);
    bool finite_bounds = std::isfinite(b);
    bool transcendental = false;
    double rlo = lo, rhi = hi;
    switch (fn) {
      case UnaryFn::Abs:
        rlo = lo >= 0 ? lo : (hi <= 0 ? -hi : 0);
        rhi = b;
        break;
      case UnaryFn::Neg:
        if (boolean_in) return std::nullopt;
        rlo = -hi, rhi = -lo;
        break;
      case UnaryFn::IsNan:
      case UnaryFn::IsFinite:
        if (!a.exact && !finite_bounds) return std::nullopt;
        rlo = 0, rhi = 1;
        break;
      case UnaryFn::Not:
        if (!a.exact) return std::nullopt;
        rlo = 0, rhi = 1;
        break;
      case UnaryFn::Invert:  // ~x == -x - 1 on integers; logical not on bools
        if (kiln::is_float(a.dtype)) return std::nullopt;
        if (boolean_in)
          rlo = 0, rhi = 1;
        else
          rlo = -hi - 1, rhi = -lo - 1;
        break;
      case UnaryFn::Floor:
      case UnaryFn::Ceil:
      case UnaryFn::Round:
      case UnaryFn::Sign:
        if (boolean_in || !a.exact) return std::nullopt;
        if (fn == UnaryFn::Sign)
          rlo = -1, rhi = 1;
        else
          rlo = std::floor(lo) - (fn == UnaryFn::Round),
          rhi = std::ceil(hi) + (fn == UnaryFn::Round);
        break;
      case UnaryFn::Sqrt:
        if (boolean_in || lo < (a.exact ? 0 : 1)) return std::nullopt;
        rlo = std::sqrt(lo), rhi = std::sqrt(hi);
        break;
      case UnaryFn::Log:
        if (boolean_in || lo < (a.exact ? 1e-3 : 1) || !finite_bounds) return std::nullopt;
        rlo = std::log(lo), rhi = std::log(hi), transcendental = true;
        break;
      case UnaryFn::Log1p:
        if (boolean_in || lo < 0 || !finite_bounds) return std::nullopt;
        rlo = std::log1p(lo), rhi = std::log1p(hi), transcendental = true;
        break;
      case UnaryFn::Exp:
      case UnaryFn::Expm1:
        if (boolean_in || b > 30) return std::nullopt;
        rlo = std::exp(lo) - 1, rhi = std::exp(hi), transcendental = true;
        break;
      case UnaryFn::Sin:
      case UnaryFn::Cos:
        if (boolean_in || b > (a.dtype == DType::Float32 ? 100 : 1000)) return std::nullopt;
        rlo = -1, rhi = 1, transcendental = true;
        break;
      case UnaryFn::Tan:
        if (boolean_in || b > 1.2) return std::nullopt;
        rlo = -2.6, rhi = 2.6, transcendental = true;
        break;
      case UnaryFn::Tanh:
      case UnaryFn::Arctan:
        if (boolean_in || !finite_bounds) return std::nullopt;
        rlo = -1.6, rhi = 1.6, transcendental = true;
        break;
      case UnaryFn::Sigmoid:
        if (boolean_in || b > 30) return std::nullopt;
        rlo = 0, rhi = 1, transcendental = true;
        break;
      case UnaryFn::Arcsin:
      case UnaryFn::Arccos:
        if (boolean_in || !a.exact || b > 1) return std::nullopt;
        rlo = -1.6, rhi = 3.2, transcendental = true;
        break;
    }
    Expr e;
    const char* name = kiln::unary_name(fn);  // NumPy's name
    std::string np_name = std::string("np.") + name;
    std::string cpp_name = std::string("kiln::") + name;
    switch (fn) {
      case UnaryFn::Abs:
        np_name = "np.abs", cpp_name = "kiln::abs";
        break;
      case UnaryFn::Neg:
        cpp_name = "-";
        break;
      case UnaryFn::Not:
        cpp_name = "kiln::logical_not";
        break;
      case UnaryFn::Invert:
        np_name = "np.invert", cpp_name = "~";
        break;
      default:
        break;
    }
    // Sigmoid's literals typed: for a float32 NumPy scalar, `1 + np.float32(x)` is float64.
    std::string one = dtype_py(kiln::float_result(a.dtype)) + "(1)";
    e.np = fn == UnaryFn::Sigmoid ? "(" + one + " / (" + one + " + np.exp(-(" + a.np + "))))"
                                  : np_name + "(" + a.np + ")";
    e.cpp = fn == UnaryFn::Sigmoid ? "kiln::sigmoid(" + a.cpp + ")"
            : fn == UnaryFn::Neg   ? "(-" + a.cpp + ")"
                                   : cpp_name + "(" + a.cpp + ")";
    if (!build(
            &e, [&] { return kiln::unary(fn, a.k); }, a.shape))
      return std::nullopt;
    e.lo = rlo, e.hi = rhi;
    bool bool_out = e.dtype == DType::Bool;
    e.nonfinite = !bool_out && kiln::is_float(e.dtype) && a.nonfinite;
    e.exact = bool_out || (a.exact && !transcendental);
    e.integral = !kiln::is_float(e.dtype) || fn == UnaryFn::Floor || fn == UnaryFn::Ceil ||
                 fn == UnaryFn::Round || fn == UnaryFn::Sign ||
                 ((fn == UnaryFn::Abs || fn == UnaryFn::Neg) && a.integral);
    e.scale = std::max(a.scale, bnd(rlo, rhi));
    mark_loose(&e, a.loose);
    if (!e.exact && !std::isfinite(e.scale)) return std::nullopt;
    if (fn == UnaryFn::Abs || fn == UnaryFn::Neg) {
      e.err = a.err, e.rel = a.rel, e.inv = a.inv;  // exact ops: the operand's bound, unchanged
    } else if (!e.exact) {
      unary_tolerance(fn, a, transcendental, &e);
      if (!std::isfinite(e.err) || !std::isfinite(e.rel)) return std::nullopt;
    }
    return e;
  }

  // The error bound of fn(a): exp and log turn relative errors into absolute ones and back;
  // other functions pass the operand's whole error through their Lipschitz bound on its range.
  static void unary_tolerance(UnaryFn fn, const Expr& a, bool transcendental, Expr* e) {
    double ax = a.total_err();
    double own = (transcendental ? kMathUlps : 2) * ulp_rel(e->dtype);
    e->rel = own;
    switch (fn) {
      case UnaryFn::Exp:  // exp(x + d) = exp(x) e^d
        e->err = 0, e->rel += ax > 0.1 ? kInf : 2 * ax;
        return;
      case UnaryFn::Log: {  // log(x (1 + r) + d) = log(x) + log(1 + r + d / x)
        double lo = a.lo - a.err - std::sqrt(a.inv);
        e->err = lo <= 0 ? kInf : 2 * (a.rel + (a.err + std::sqrt(a.inv)) / lo);
        return;
      }
      case UnaryFn::Sqrt:  // sqrt(x (1 + r)) = sqrt(x) (1 + r / 2); an absolute part is Hoelder
        e->rel += a.rel;
        e->err = 2 * std::min(lipschitz(fn, a.lo - ax, a.hi + ax) * (a.err + std::sqrt(a.inv)),
                              std::sqrt(a.err + std::sqrt(a.inv)));
        return;
      default:
        e->err = ax > 0 ? 2 * lipschitz(fn, a.lo - ax, a.hi + ax) * ax : 0;
        return;
    }
  }

  std::optional<Expr> op_unary(int depth) {
    const UnaryFn fns[] = {UnaryFn::Abs,    UnaryFn::Neg,      UnaryFn::Sqrt,   UnaryFn::Log,
                           UnaryFn::Exp,    UnaryFn::Sin,      UnaryFn::Cos,    UnaryFn::Tanh,
                           UnaryFn::Floor,  UnaryFn::Ceil,     UnaryFn::Round,  UnaryFn::Sign,
                           UnaryFn::IsNan,  UnaryFn::IsFinite, UnaryFn::Expm1,  UnaryFn::Log1p,
                           UnaryFn::Tan,    UnaryFn::Arctan,   UnaryFn::Arcsin, UnaryFn::Arccos,
                           UnaryFn::Sigmoid};
    UnaryFn fn = fns[weighted({6, 5, 5, 5, 5, 4, 4, 4, 4, 4, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1})];
    Expr a = gen(depth - 1);
    bool float_fn = !(fn == UnaryFn::Abs || fn == UnaryFn::Neg || fn == UnaryFn::IsNan ||
                      fn == UnaryFn::IsFinite || fn == UnaryFn::Sign || fn == UnaryFn::Round);
    std::optional<Expr> g = a;
    if (a.dtype == DType::Bool &&
        (float_fn || fn == UnaryFn::Neg || fn == UnaryFn::Sign || fn == UnaryFn::Round)) {
      const DType to[] = {DType::Int32, DType::Float32, DType::Float64, DType::Int64};
      g = apply_astype(a, to[uni(0, 3)]);
    }
    if (!g) return std::nullopt;
    switch (fn) {
      case UnaryFn::Sqrt:
      case UnaryFn::Log:
      case UnaryFn::Log1p:
        if (g->lo < (g->exact ? (fn == UnaryFn::Log ? 1e-3 : 0) : 1) || !std::isfinite(g->hi) ||
            coin(0.2))
          g = guard_abs1(*g);
        break;
      case UnaryFn::Exp:
      case UnaryFn::Expm1:
      case UnaryFn::Sigmoid:
        if (bnd(g->lo, g->hi) > 30) g = guard_clip(*g, pick(std::vector<double>{1, 5, 20}));
        break;
      case UnaryFn::Sin:
      case UnaryFn::Cos:
      case UnaryFn::Tanh:
      case UnaryFn::Arctan:
        if (bnd(g->lo, g->hi) > 100) g = guard_clip(*g, 50);
        break;
      case UnaryFn::Tan:
        if (bnd(g->lo, g->hi) > 1.2) g = guard_clip(*g, 1);
        break;
      case UnaryFn::Arcsin:
      case UnaryFn::Arccos:
        if (bnd(g->lo, g->hi) > 1) g = guard_clip(*g, 1);
        break;
      default:
        break;
    }
    if (!g) return std::nullopt;
    return apply_unary(fn, *g);
  }

  std::optional<Expr> apply_astype(const Expr& a, DType t) {
    double lo = a.lo, hi = a.hi;
    bool float_in = kiln::is_float(a.dtype);
    if (t == DType::Bool && a.dtype != DType::Bool) {
      if (!a.exact) return std::nullopt;
      lo = 0, hi = 1;
    } else if (kiln::is_int(t)) {
      if (float_in && (!a.exact || a.nonfinite)) return std::nullopt;
      if (bnd(lo, hi) >= int_limit(t)) return std::nullopt;
      lo = std::trunc(lo), hi = std::trunc(hi);
    }
    Expr e;
    e.np = "(" + a.np + ").astype(" + dtype_py(t) + ")";
    e.cpp = a.cpp + ".astype(" + dtype_cpp(t) + ")";
    if (!build(
            &e, [&] { return a.k.astype(t); }, a.shape))
      return std::nullopt;
    e.lo = lo, e.hi = hi;
    e.nonfinite = kiln::is_float(t) && (a.nonfinite || (t == DType::Float32 && bnd(lo, hi) > 3e38));
    e.exact = !kiln::is_float(t) || a.exact;
    e.integral = !kiln::is_float(t) || a.integral;
    e.scale = std::max(a.scale, bnd(lo, hi));
    mark_loose(&e, a.loose);
    if (!e.exact) {
      e.err = a.err, e.inv = a.inv;
      e.rel = a.rel + (t == DType::Float32 ? ulp_rel(t) : 0);  // rounding to float32
    }
    return e;
  }

  std::optional<Expr> op_astype(int depth) {
    const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
    Expr a = gen(depth - 1);
    return apply_astype(a, types[uni(0, 4)]);
  }

  std::optional<Expr> apply_where(const Expr& c, const Operand& x, const Operand& y) {
    if (!c.exact) return std::nullopt;
    auto s1 = broadcast(c.shape, x.shape());
    if (!s1) return std::nullopt;
    auto s = broadcast(*s1, y.shape());
    if (!s || too_big(*s)) return std::nullopt;
    DType p = promoted(x, y);
    Expr e;
    e.np = "np.where(" + c.np + ", " + np_text(x, y, p) + ", " + np_text(y, x, p) + ")";
    e.cpp = "kiln::where(" + c.cpp + ", " + cpp_text(x) + ", " + cpp_text(y) + ")";
    if (!build(
            &e,
            [&] {
              if (x.lit && y.lit) return kiln::where(c.k, x.lit->scalar(), y.lit->scalar());
              if (x.lit) return kiln::where(c.k, x.lit->scalar(), y.e.k);
              if (y.lit) return kiln::where(c.k, x.e.k, y.lit->scalar());
              return kiln::where(c.k, x.e.k, y.e.k);
            },
            *s))
      return std::nullopt;
    e.lo = std::min(x.lo(), y.lo());
    e.hi = std::max(x.hi(), y.hi());
    if (e.dtype == DType::Bool) e.lo = std::min(e.lo, 0.0), e.hi = std::max(e.hi, 1.0);
    e.nonfinite = kiln::is_float(e.dtype) && (x.nonfinite() || y.nonfinite());
    e.exact = !kiln::is_float(e.dtype) || (x.exact() && y.exact());
    e.integral = !kiln::is_float(e.dtype) || (x.integral() && y.integral());
    e.scale = std::max({c.scale, x.scale(), y.scale(), bnd(e.lo, e.hi)});
    e.err = std::max(x.err(), y.err()), e.rel = std::max(x.rel(), y.rel());
    e.inv = std::max(x.is_lit() ? 0 : x.e.inv, y.is_lit() ? 0 : y.e.inv);
    mark_loose(&e, x.loose() || y.loose());
    return e;
  }

  std::optional<Expr> op_where(int depth) {
    Expr c = gen(depth - 1);
    if (!c.exact) return std::nullopt;
    Operand x, y;
    if (coin(0.8))
      x = op_of(gen(depth - 1));
    else
      x = op_of(random_lit(c.dtype));
    if (!x.lit && coin(0.75)) {
      auto b = partner(x.e, depth - 1);
      if (b)
        y = op_of(*b);
      else
        y = op_of(random_lit(x.e.dtype));
    } else {
      y = op_of(random_lit(x.lit ? DType::Float64 : x.e.dtype));
    }
    if (coin(0.4)) std::swap(x, y);
    return apply_where(c, x, y);
  }

  std::optional<Expr> apply_clip(const Expr& a, const Lit& lo, const Lit& hi) {
    DType t1 = kiln::promote_scalar(a.dtype, lo.kind);
    DType t2 = kiln::promote_scalar(t1, hi.kind);
    bool typed = a.rank() == 0;
    Expr e;
    e.np = "np.clip(" + a.np + ", " + (typed ? lo.typed(t1) : lo.text(true)) + ", " +
           (typed ? hi.typed(t2) : hi.text(true)) + ")";
    e.cpp = "kiln::clip(" + a.cpp + ", " + lo.text(false) + ", " + hi.text(false) + ")";
    if (!build(
            &e, [&] { return kiln::clip(a.k, lo.scalar(), hi.scalar()); }, a.shape))
      return std::nullopt;
    double l = lo.value(), h = hi.value();
    if (lo.kind == ScalarKind::Bool) l = l != 0;
    if (hi.kind == ScalarKind::Bool) h = h != 0;
    if (l <= h) {
      e.lo = std::min(std::max(a.lo, l), h);
      e.hi = std::min(std::max(a.hi, l), h);
    } else {
      e.lo = e.hi = h;
    }
    e.nonfinite = kiln::is_float(e.dtype) && a.nonfinite;
    e.exact = !kiln::is_float(e.dtype) || a.exact;
    e.integral = !kiln::is_float(e.dtype) || (a.integral && is_integral(l) && is_integral(h));
    e.scale = std::max({a.scale, bnd(e.lo, e.hi), std::fabs(l), std::fabs(h)});
    e.err = a.err, e.rel = a.rel, e.inv = a.inv;  // clip: Lipschitz 1
    mark_loose(&e, a.loose);
    return e;
  }

  std::optional<Expr> op_clip(int depth) {
    Expr a = gen(depth - 1);
    Lit lo = random_lit(a.dtype), hi = random_lit(a.dtype);
    if (kiln::is_int(a.dtype) && coin(0.7)) lo = lit_int(uni(-5, 2)), hi = lit_int(uni(-1, 6));
    if (lo.value() > hi.value() && coin(0.8)) std::swap(lo, hi);
    return apply_clip(a, lo, hi);
  }

  // ---- structure -------------------------------------------------------------------------------
  static std::string slice_py(const kiln::Slice& s) {
    if (s.is_index) return std::to_string(*s.start);
    std::string r =
        (s.start ? std::to_string(*s.start) : "") + ":" + (s.stop ? std::to_string(*s.stop) : "");
    if (s.step != 1) r += ":" + std::to_string(s.step);
    return r;
  }
  static std::string slice_cpp(const kiln::Slice& s) {
    if (s.is_index) return "kiln::Slice::index(" + std::to_string(*s.start) + ")";
    if (!s.start && !s.stop && s.step == 1) return "kiln::Slice::all()";
    return "kiln::Slice(" + (s.start ? std::to_string(*s.start) : std::string("{}")) + ", " +
           (s.stop ? std::to_string(*s.stop) : std::string("{}")) + ", " + std::to_string(s.step) +
           ")";
  }

  kiln::Slice random_slice_entry(int64_t n, bool allow_index) {
    if (allow_index && n > 0 && coin(0.25)) return kiln::Slice::index(uni(-n, n - 1));
    if (coin(0.15)) return kiln::Slice::all();
    std::optional<int64_t> b, e;
    if (coin(0.55)) b = uni(-n - 2, n + 2);
    if (coin(0.55)) e = uni(-n - 2, n + 2);
    int64_t step = pick(std::vector<int64_t>{1, 1, 1, 2, 3, -1, -1, -2, -3});
    return kiln::Slice(b, e, step);
  }

  std::optional<Expr> apply_slice(const Expr& a, const std::vector<kiln::Slice>& idx) {
    if (a.rank() == 0 || idx.empty()) return std::nullopt;
    Expr e;
    e.np = "(" + a.np + ")[";
    e.cpp = a.cpp + ".slice({";
    for (size_t k = 0; k < idx.size(); ++k) {
      e.np += (k ? ", " : "") + slice_py(idx[k]);
      e.cpp += (k ? ", " : "") + slice_cpp(idx[k]);
    }
    e.np += "]";
    e.cpp += "})";
    if (!build(
            &e, [&] { return a.k.slice(idx); }, sliced_shape(a.shape, idx)))
      return std::nullopt;
    copy_facts(a, &e);
    return e;
  }

  static void copy_facts(const Expr& a, Expr* e) {
    e->lo = a.lo, e->hi = a.hi;
    e->nonfinite = a.nonfinite;
    e->exact = a.exact;
    e->integral = a.integral;
    e->scale = a.scale;
    e->err = a.err, e->rel = a.rel, e->inv = a.inv;
    e->loose = a.loose;
  }

  std::optional<Expr> op_slice(int depth) {
    Expr a = gen(depth - 1);
    if (a.rank() == 0) return std::nullopt;
    int count = static_cast<int>(uni(1, a.rank()));
    std::vector<kiln::Slice> idx;
    for (int d = 0; d < count; ++d) idx.push_back(random_slice_entry(a.shape[d], true));
    return apply_slice(a, idx);
  }

  std::optional<Expr> apply_transpose(const Expr& a, const std::vector<int>& perm) {
    Expr e;
    e.np = perm.empty() ? "np.transpose(" + a.np + ")"
                        : "np.transpose(" + a.np + ", " + ints_py(perm) + ")";
    e.cpp = perm.empty() ? a.cpp + ".T()" : a.cpp + ".transpose(" + ints_cpp(perm) + ")";
    Shape want;
    for (int k = 0; k < a.rank(); ++k)
      want.push_back(a.shape[perm.empty() ? a.rank() - 1 - k : norm_axis(perm[k], a.rank())]);
    if (!build(
            &e, [&] { return a.k.transpose(perm); }, want))
      return std::nullopt;
    copy_facts(a, &e);
    return e;
  }

  std::optional<Expr> op_transpose(int depth) {
    Expr a = gen(depth - 1);
    if (a.rank() < 2 && coin(0.8)) return std::nullopt;
    if (a.rank() == 0) return std::nullopt;
    std::vector<int> perm;
    if (coin(0.8)) {
      for (int k = 0; k < a.rank(); ++k) perm.push_back(k);
      std::shuffle(perm.begin(), perm.end(), rng_);
      for (auto& p : perm)
        if (coin(0.15)) p -= a.rank();
    }
    return apply_transpose(a, perm);
  }

  Shape random_reshape(int64_t n) {
    Shape s;
    if (n == 0) {
      int rank = static_cast<int>(uni(1, 3));
      for (int k = 0; k < rank; ++k) s.push_back(uni(1, 4));
      s[uni(0, rank - 1)] = 0;
      return s;
    }
    int rank = static_cast<int>(uni(n == 1 ? 0 : 1, 3));
    if (rank == 0) return s;
    s.assign(rank, 1);
    int64_t m = n;
    for (int64_t p = 2; p * p <= m; ++p)
      while (m % p == 0) s[uni(0, rank - 1)] *= p, m /= p;
    if (m > 1) s[uni(0, rank - 1)] *= m;
    if (coin(0.3)) s[uni(0, rank - 1)] = -1;
    return s;
  }

  std::optional<Expr> apply_reshape(const Expr& a, const Shape& target) {
    Expr e;
    e.np = "np.reshape(" + a.np + ", " + shape_py(target) + ")";
    e.cpp = a.cpp + ".reshape(" + shape_cpp(target) + ")";
    Shape want = target;
    int64_t known = 1;
    for (int64_t d : target) known *= d < 0 ? 1 : d;
    for (auto& d : want)
      if (d < 0) d = known ? a.size() / known : 0;
    if (!build(
            &e, [&] { return a.k.reshape(target); }, want))
      return std::nullopt;
    copy_facts(a, &e);
    return e;
  }

  std::optional<Expr> op_reshape(int depth) {
    Expr a = gen(depth - 1);
    return apply_reshape(a, random_reshape(a.size()));
  }

  std::optional<Expr> op_broadcast(int depth) {
    Expr a = gen(depth - 1);
    Shape t;
    int extra = static_cast<int>(uni(0, 1));
    for (int k = 0; k < extra; ++k) t.push_back(uni(1, 3));
    for (int64_t d : a.shape) t.push_back(d == 1 && coin(0.6) ? (coin(0.1) ? 0 : uni(2, 4)) : d);
    if (too_big(t)) return std::nullopt;
    Expr e;
    e.np = "np.broadcast_to(" + a.np + ", " + shape_py(t) + ")";
    e.cpp = a.cpp + ".broadcast_to(" + shape_cpp(t) + ")";
    if (!build(
            &e, [&] { return a.k.broadcast_to(t); }, t))
      return std::nullopt;
    copy_facts(a, &e);
    return e;
  }

  std::optional<Expr> op_rechunk(int depth) {
    Expr a = gen(depth - 1);
    if (a.rank() == 0) return std::nullopt;
    Shape b;
    for (int64_t d : a.shape) b.push_back(d == 0 || coin(0.2) ? 0 : uni(1, d));
    Expr e;
    e.np = a.np;  // only the block grid changes
    e.cpp = a.cpp + ".rechunk(" + shape_cpp(b) + ")";
    if (!build(
            &e, [&] { return a.k.rechunk(b); }, a.shape))
      return std::nullopt;
    copy_facts(a, &e);
    return e;
  }

  std::optional<Expr> apply_concat(const std::vector<Expr>& parts, int axis, bool stack) {
    Expr e;
    std::string np_list = "(", cpp_list = "{";
    for (size_t k = 0; k < parts.size(); ++k) {
      np_list += (k ? ", " : "") + parts[k].np;
      cpp_list += (k ? ", " : "") + parts[k].cpp;
    }
    np_list += parts.size() == 1 ? ",)" : ")";
    cpp_list += "}";
    e.np = std::string(stack ? "np.stack(" : "np.concatenate(") + np_list +
           ", axis=" + std::to_string(axis) + ")";
    e.cpp = std::string(stack ? "kiln::stack(" : "kiln::concatenate(") + cpp_list + ", " +
            std::to_string(axis) + ")";
    std::vector<Array> ks;
    for (const auto& p : parts) ks.push_back(p.k);
    Shape want = parts[0].shape;
    int r = parts[0].rank();
    if (stack) {
      want.insert(want.begin() + norm_axis(axis, r + 1), static_cast<int64_t>(parts.size()));
    } else {
      int ax = norm_axis(axis, r);
      want[ax] = 0;
      for (const auto& p : parts) want[ax] += p.shape[ax];
    }
    if (!build(
            &e, [&] { return stack ? kiln::stack(ks, axis) : kiln::concatenate(ks, axis); }, want))
      return std::nullopt;
    if (too_big(e.shape)) return std::nullopt;
    e.lo = kInf, e.hi = -kInf;
    e.nonfinite = false, e.exact = true, e.integral = true, e.scale = 0;
    for (const auto& p : parts) {
      e.lo = std::min(e.lo, p.lo), e.hi = std::max(e.hi, p.hi);
      e.nonfinite |= p.nonfinite;
      e.exact &= p.exact;
      e.integral &= p.integral;
      e.scale = std::max(e.scale, p.scale);
      e.err = std::max(e.err, p.err), e.rel = std::max(e.rel, p.rel),
      e.inv = std::max(e.inv, p.inv);
      e.loose |= p.loose;
    }
    if (!kiln::is_float(e.dtype)) e.nonfinite = false, e.exact = true, e.integral = true;
    return e;
  }

  // A piece to concatenate/stack with `a` along `axis`: same shape except (concatenate) `axis`.
  Expr piece(const Expr& a, int axis, bool stack, int depth) {
    switch (weighted({25, stack ? 0 : 30, 30, 15})) {
      case 1: {
        std::vector<kiln::Slice> idx(axis + 1, kiln::Slice::all());
        idx[axis] = random_slice_entry(a.shape[axis], false);
        if (auto s = apply_slice(a, idx)) return *s;
        break;
      }
      case 2: {
        std::optional<Expr> v;
        switch (uni(0, 3)) {
          case 0: {
            const UnaryFn fns[] = {UnaryFn::Abs, UnaryFn::Neg, UnaryFn::Floor, UnaryFn::Round,
                                   UnaryFn::Sin};
            v = apply_unary(fns[uni(0, 4)], a);
            break;
          }
          case 1: {
            const BinaryFn fns[] = {BinaryFn::Add, BinaryFn::Mul, BinaryFn::Max, BinaryFn::Sub};
            v = apply_binary(fns[uni(0, 3)], op_of(a), op_of(random_lit(a.dtype)));
            break;
          }
          case 2: {
            const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32,
                                   DType::Float64};
            v = apply_astype(a, types[uni(0, 4)]);
            break;
          }
          default: {
            if (a.rank() == 0) break;
            int d = static_cast<int>(uni(0, a.rank() - 1));
            std::vector<kiln::Slice> idx(d + 1, kiln::Slice::all());
            idx[d] = kiln::Slice(std::nullopt, std::nullopt, -1);
            v = apply_slice(a, idx);
            break;
          }
        }
        if (v) return *v;
        break;
      }
      case 3:
        for (int attempt = 0; attempt < 3; ++attempt) {
          Expr b = gen(depth);
          bool ok = b.rank() == a.rank();
          for (int d = 0; ok && d < a.rank(); ++d)
            ok = b.shape[d] == a.shape[d] || (!stack && d == axis);
          if (ok) return b;
        }
        break;
      default:
        break;
    }
    return a;
  }

  std::optional<Expr> op_concat(int depth, bool stack) {
    Expr a = gen(depth - 1);
    int r = a.rank();
    if (!stack && r == 0) return std::nullopt;
    int axis = static_cast<int>(uni(0, stack ? r : r - 1));
    int n = weighted({10, 60, 30}) + 1;
    std::vector<Expr> parts;
    for (int k = 0; k < n; ++k) parts.push_back(piece(a, axis, stack, depth - 1));
    std::shuffle(parts.begin(), parts.end(), rng_);
    int written = coin(0.3) ? axis - (stack ? r + 1 : r) : axis;
    return apply_concat(parts, written, stack);
  }

  // ---- reductions ------------------------------------------------------------------------------
  std::optional<Expr> apply_reduce(Red r, const Expr& a, const std::vector<int>& axes, bool kd,
                                   int ddof) {
    int rank = a.rank();
    int64_t n = 1;
    if (axes.empty()) {
      n = a.size();
    } else {
      for (int ax : axes) n *= a.shape[ax < 0 ? ax + rank : ax];
    }
    double b = bnd(a.lo, a.hi), nn = static_cast<double>(n);
    bool float_in = kiln::is_float(a.dtype);
    DType acc = a.dtype == DType::Float32 ? DType::Float32 : DType::Float64;
    double lo = a.lo, hi = a.hi, scale = a.scale;
    bool exact = a.exact, integral = a.integral, nonfinite = a.nonfinite;
    switch (r) {
      case Red::Min:
      case Red::Max:
        if (n == 0) return std::nullopt;  // an error on both sides
        break;
      case Red::All:
      case Red::Any:
        if (!a.exact) return std::nullopt;
        lo = 0, hi = 1;
        break;
      case Red::Sum:
        if (a.dtype == DType::Bool) lo = 0, hi = 1;
        lo = std::min(0.0, nn * lo), hi = std::max(0.0, nn * hi);
        scale = std::max(scale, nn * b);
        if (!float_in) {
          if (nn * b > int_limit(DType::Int64)) return std::nullopt;
        } else {
          exact = exact && integral && nn * b < exact_limit(a.dtype);
        }
        break;
      case Red::Prod: {
        if (a.dtype == DType::Bool) lo = 0, hi = 1, b = 1;
        double m = b <= 1 ? 1 : std::pow(b, nn);
        if (!float_in && m > int_limit(DType::Int64)) return std::nullopt;
        if (float_in && m > 1e300) return std::nullopt;
        lo = a.lo >= 0 ? 0 : -m, hi = m;
        scale = std::max(scale, m);
        if (float_in) exact = exact && integral && m < exact_limit(a.dtype);
        break;
      }
      case Red::Mean:
        if (a.dtype == DType::Bool) lo = 0, hi = 1;
        exact = exact && integral && nn * b < exact_limit(acc);
        integral = false;
        nonfinite = nonfinite || n == 0;
        scale = std::max(scale, nn * b);
        break;
      case Red::Var:
      case Red::Std:
        exact = false;
        integral = false;
        nonfinite = nonfinite || n <= ddof;
        lo = 0;
        hi = (r == Red::Var) ? 2 * b * b + 1 : 2 * b + 1;
        scale = std::max({scale, 4 * b * b * std::max(nn, 1.0), hi});
        break;
    }
    if (!exact && !std::isfinite(scale)) return std::nullopt;
    static const char* names[] = {"sum", "prod", "mean", "min", "max", "all", "any", "var", "std"};
    const char* name = names[static_cast<int>(r)];
    std::string axis_py = axes.empty() ? "None" : ints_py(axes);
    Expr e;
    e.np = std::string("np.") + name + "(" + a.np + ", axis=" + axis_py +
           ", keepdims=" + (kd ? "True" : "False") +
           (ddof ? ", ddof=" + std::to_string(ddof) : "") + ")";
    e.cpp = a.cpp + "." + name + "(" + ints_cpp(axes) + ", " + (kd ? "true" : "false") +
            (r == Red::Var || r == Red::Std ? ", " + std::to_string(ddof) : "") + ")";
    if (!build(
            &e,
            [&] {
              switch (r) {
                case Red::Sum:
                  return a.k.sum(axes, kd);
                case Red::Prod:
                  return a.k.prod(axes, kd);
                case Red::Mean:
                  return a.k.mean(axes, kd);
                case Red::Min:
                  return a.k.min(axes, kd);
                case Red::Max:
                  return a.k.max(axes, kd);
                case Red::All:
                  return a.k.all(axes, kd);
                case Red::Any:
                  return a.k.any(axes, kd);
                case Red::Var:
                  return a.k.var(axes, kd, ddof);
                case Red::Std:
                  return a.k.std(axes, kd, ddof);
              }
              return a.k;
            },
            reduced_shape(a.shape, axes, kd)))
      return std::nullopt;
    bool float_out = kiln::is_float(e.dtype);
    e.lo = lo, e.hi = hi;
    e.nonfinite = float_out && nonfinite;
    e.exact = !float_out || exact;
    e.integral = !float_out || integral;
    e.scale = scale;
    mark_loose(&e, a.loose);
    if (!e.exact) {
      reduce_tolerance(r, a, nn, b, ddof, &e);
      if (!std::isfinite(e.err) || !std::isfinite(e.rel) || !std::isfinite(e.inv))
        return std::nullopt;
    }
    return e;
  }

  // Error bound of a reduction of n values bounded by b with a's error bound. Sums: the
  // operands' whole error n times, plus reassociation: any summation order is within
  // (n - 1) u sum|x| of the exact sum, so two orders are within twice that. Products: relative.
  static void reduce_tolerance(Red r, const Expr& a, double n, double b, int ddof, Expr* e) {
    DType out = e->dtype;
    double ax = a.total_err(), reassoc = 2 * ulps(out, n * b, n + 2);
    switch (r) {
      case Red::Min:
      case Red::Max:
        e->err = a.err, e->rel = a.rel, e->inv = a.inv;
        return;
      case Red::Sum:
        e->err = n * ax + reassoc, e->rel = 2 * ulp_rel(out);
        return;
      case Red::Mean:
        e->err = ax + reassoc / std::max(n, 1.0), e->rel = 4 * ulp_rel(out);
        return;
      case Red::Prod: {
        double rel = n * a.rel + (2 * n + 2) * ulp_rel(out);
        double m = std::pow(b + ax, std::max(n - 1, 0.0));
        // Underflow: each of the n roundings may be off by a subnormal spacing, which the later
        // factors scale by at most m (cos(1)^320 in float32: NumPy's sequential product sticks
        // at the smallest subnormal, Kiln's lanes multiply two of them to 0; seed 84, case 328).
        e->err = 2 * n * ((a.err + std::sqrt(a.inv)) * m + subnormal(out) * std::max(m, 1.0));
        e->rel = rel > 0.1 ? kInf : 2 * rel;
        return;
      }
      case Red::Var:
      case Red::Std: {
        // var = sum((x - mean)^2) / (n - ddof): each |x - mean| <= 2b, off by at most 2 ax plus
        // the mean's reassociation; the sum of squares reassociates too.
        double dev = 2 * ax + ulps(out, b, n + 4);
        double var = (n * (4 * b + dev) * dev + 2 * ulps(out, n * 4 * b * b, n + 4)) /
                     std::max(n - ddof, 1.0);
        if (r == Red::Var) {
          e->err = 2 * var, e->rel = 4 * ulp_rel(out);
        } else {  // |sqrt(V) - sqrt(V')| <= |V - V'| / (sqrt(V) + sqrt(V'))
          e->err = 0, e->inv = 2 * var, e->rel = 4 * ulp_rel(out);
        }
        return;
      }
      default:  // all/any: exact operands only
        e->err = kInf;
        return;
    }
  }

  std::vector<int> random_axes(int rank) {
    std::vector<int> axes;
    if (rank == 0 || coin(0.3)) return axes;  // None
    for (int k = 0; k < rank; ++k)
      if (coin(0.5)) axes.push_back(k);
    if (axes.empty()) axes.push_back(static_cast<int>(uni(0, rank - 1)));
    std::shuffle(axes.begin(), axes.end(), rng_);
    for (auto& ax : axes)
      if (coin(0.2)) ax -= rank;
    return axes;
  }

  std::optional<Expr> op_reduce(int depth) {
    const Red reds[] = {Red::Sum, Red::Prod, Red::Mean, Red::Min, Red::Max,
                        Red::All, Red::Any,  Red::Var,  Red::Std};
    Red r = reds[weighted({6, 3, 4, 4, 4, 2, 2, 2, 2})];
    Expr a = gen(depth - 1);
    if (r == Red::Prod && kiln::is_int(a.dtype) && bnd(a.lo, a.hi) > 1 && coin(0.7)) {
      // keep products of many integers small: sign(x) or x % 3 - 1
      auto s = coin(0.5) ? apply_unary(UnaryFn::Sign, a)
                         : apply_binary(BinaryFn::Mod, op_of(a), op_of(lit_int(3)));
      if (s) a = *s;
    }
    int ddof = (r == Red::Var || r == Red::Std) && coin(0.3) ? 1 : 0;
    return apply_reduce(r, a, random_axes(a.rank()), coin(0.4), ddof);
  }

  std::optional<Expr> op_arg(int depth) {
    bool is_max = coin(0.5);
    Expr a = gen(depth - 1);
    if (!a.exact) return std::nullopt;
    std::optional<int> axis;
    if (a.rank() > 0 && coin(0.65)) {
      axis = static_cast<int>(uni(0, a.rank() - 1));
      if (a.shape[*axis] == 0) return std::nullopt;
      if (coin(0.2)) *axis -= a.rank();
    } else if (a.size() == 0) {
      return std::nullopt;
    }
    bool kd = coin(0.4);
    if (opt_.avoid_known_bugs && a.rank() == 0) kd = false;  // see Options::avoid_known_bugs
    const char* name = is_max ? "argmax" : "argmin";
    Expr e;
    std::string ax = axis ? std::to_string(*axis) : "None";
    e.np = std::string("np.") + name + "(" + a.np + ", axis=" + ax +
           ", keepdims=" + (kd ? "True" : "False") + ")";
    e.cpp = a.cpp + "." + name + "(" + (axis ? std::to_string(*axis) : "std::nullopt") + ", " +
            (kd ? "true" : "false") + ")";
    Shape want = reduced_shape(a.shape, axis ? std::vector<int>{*axis} : std::vector<int>{}, kd);
    if (!build(
            &e, [&] { return is_max ? a.k.argmax(axis, kd) : a.k.argmin(axis, kd); }, want))
      return std::nullopt;
    e.lo = 0;
    e.hi = static_cast<double>(std::max<int64_t>(a.size(), 1));
    e.nonfinite = false, e.exact = true, e.integral = true;
    e.scale = std::max(a.scale, e.hi);
    return e;
  }

  // persist(): computed now (default threads, fused), then read back as a buffer by what follows.
  std::optional<Expr> op_persist(int depth) {
    Expr e = gen(depth - 1);
    e.cpp += ".persist()";
    try {
      e.k = e.k.persist();
    } catch (const kiln::Error& err) {
      c_.kiln_errors.push_back(e.cpp + "\n    -> " + err.what());
      return std::nullopt;
    }
    return e;
  }

  // ---- driver ----------------------------------------------------------------------------------
  Expr gen(int depth) {
    if (depth <= 0 || coin(0.1)) return leaf();
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::optional<Expr> e;
      switch (weighted({20, 6, 4, 14, 6, 4, 6, 8, 4, 5, 2, 2, 5, 3, 12, 4, 2})) {
        case 0:
          e = op_arith(depth);
          break;
        case 1:
          e = op_compare(depth);
          break;
        case 2:
          e = op_logical(depth);
          break;
        case 3:
          e = op_unary(depth);
          break;
        case 4:
          e = op_where(depth);
          break;
        case 5:
          e = op_clip(depth);
          break;
        case 6:
          e = op_astype(depth);
          break;
        case 7:
          e = op_slice(depth);
          break;
        case 8:
          e = op_transpose(depth);
          break;
        case 9:
          e = op_reshape(depth);
          break;
        case 10:
          e = op_broadcast(depth);
          break;
        case 11:
          e = op_rechunk(depth);
          break;
        case 12:
          e = op_concat(depth, false);
          break;
        case 13:
          e = op_concat(depth, true);
          break;
        case 14:
          e = op_reduce(depth);
          break;
        case 15:
          e = op_arg(depth);
          break;
        default:
          e = op_persist(depth);
          break;
      }
      if (e && !too_big(e->shape)) {
        if (e->np.size() < 400) pool_.push_back(*e);
        return *e;
      }
    }
    return leaf();
  }

  Options opt_;
  bool big_ = false;  // this case's arrays may reach 250000 elements
  std::mt19937_64 rng_;
  Case c_;
  Shape base_;
  std::vector<Expr> input_exprs_;
  std::vector<Expr> pool_;
};

std::string value_py(double v) {
  if (std::isnan(v)) return "np.nan";
  if (std::isinf(v)) return v > 0 ? "np.inf" : "-np.inf";
  return fmt_double(v);
}
std::string value_cpp(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  return fmt_double(v);
}

}  // namespace

std::string shape_py(const Shape& s) {
  std::string r = "(";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + (s.size() == 1 ? ",)" : ")");
}

std::string dtype_py(DType t) {
  return t == DType::Bool ? "np.bool_" : std::string("np.") + kiln::dtype_name(t);
}

double Expr::total_err() const { return err + rel * bnd(lo, hi) + std::sqrt(inv); }

std::string Case::describe() const {
  std::ostringstream o;
  o << "seed " << seed << ", case " << index << " (replay: KILN_FUZZ_SEED=" << seed
    << " KILN_FUZZ_FIRST=" << index << " KILN_FUZZ_COUNT=1"
    << (avoid_known_bugs ? " KILN_FUZZ_AVOID_KNOWN=1" : "") << ")\n";
  for (const auto& in : inputs) {
    const NDArray& a = in.data;
    o << "  " << in.name << ": " << kiln::dtype_name(a.dtype()) << " shape " << shape_py(a.shape())
      << ", " << in.source << " block " << shape_cpp(in.block) << "\n";
    if (a.size() <= 64) {
      std::string py, cpp;
      for (int64_t k = 0; k < a.size(); ++k) {
        double v = a.at(k);
        py += (k ? ", " : "") + value_py(v);
        cpp += (k ? ", " : "") + value_cpp(v);
      }
      o << "    NumPy: " << in.name << " = np.array([" << py << "], dtype=" << dtype_py(a.dtype())
        << ").reshape(" << shape_py(a.shape()) << ")\n";
      o << "    C++:   NDArray " << in.name << "_data = kt::make_array(" << dtype_cpp(a.dtype())
        << ", " << shape_cpp(a.shape()) << ", {" << cpp << "}); auto " << in.name << " = kt::lazy("
        << in.name << "_data, " << shape_cpp(in.block) << ");\n";
    } else {
      o << "    (" << a.size() << " elements: replay the case to get the values)\n";
    }
  }
  for (size_t r = 0; r < roots.size(); ++r) {
    const Expr& e = roots[r];
    o << "  root " << r << ": " << kiln::dtype_name(e.dtype) << " shape " << shape_py(e.shape)
      << (e.exact ? ", exact" : ", with tolerance") << "\n";
    o << "    C++:   " << e.cpp << "\n";
    o << "    NumPy: " << e.np << "\n";
  }
  return o.str();
}

Case generate(uint64_t seed, int64_t index, const Options& options) {
  return Gen(seed, index, options).run();
}

}  // namespace kfuzz
