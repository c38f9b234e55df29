// The reference interpreter. Section numbers (§) are docs/KERNEL_IR.md's; where a rule names the
// LLVM printer's function that implements it, the code here mirrors that function's steps in
// the same order, so both round the same way.
#include "codegen/interp/interp.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "codegen/kernel_support.hpp"
#include "codegen/reduce_rules.hpp"
#include "ir/element.hpp"
#include "support/error.hpp"
#include "support/philox.hpp"

namespace kiln::interp {

namespace {

constexpr int64_t kTile = 256;         // elements per op dispatch
constexpr int64_t kStrip = 1024;       // strips of inner float sums (Printer::strip_loop)
constexpr int64_t kRandomStrip = 256;  // ... in kernels with random leaves (tiled_inner_loop)

template <class T>
constexpr bool is_fp = std::is_floating_point_v<T>;
template <class T>
constexpr bool is_bool = std::is_same_v<T, uint8_t>;

[[noreturn]] void undefined(const char* op, DType t) {
  throw InternalError(std::string("interp: kernel IR op ") + op + " is not defined for " +
                      dtype_name(t) + " operands (docs/KERNEL_IR.md)");
}

[[noreturn]] void legalized(const char* op) {
  throw InternalError(std::string("interp: ") + op +
                      " reached the interpreter; codegen/legalize.cpp rewrites it into primitives");
}

// Integer arithmetic modulo 2^bits (unsigned, no UB).
template <class T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// Float -> integer: truncation, saturating at the type's limits, NaN -> 0 (fptosi.sat).
template <class I, class T>
I saturate(T x) {
  if (x != x) return 0;
  double t = std::trunc(static_cast<double>(x));
  if (t >= static_cast<double>(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();  // 2^63 itself rounds to the limit's double
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  return static_cast<I>(t);
}

template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_bool<To>) {
    return x != 0 ? 1 : 0;  // floats: NaN != 0 is true
  } else if constexpr (is_bool<From>) {
    return static_cast<To>(x);
  } else if constexpr (is_fp<From> && !is_fp<To>) {
    return saturate<To>(x);
  } else {
    return static_cast<To>(x);  // float<->float, int->float round once; int<->int wraps
  }
}

// fmod of integers (Printer::ifmod): C's truncated remainder; x fmod 0 and x fmod -1 are 0.
template <class T>
T ifmod(T a, T b) {
  return (b == 0 || b == -1) ? T(0) : T(a % b);
}

// Printer::floordiv_int: x // 0 is 0, MIN // -1 wraps to MIN.
template <class T>
T floordiv_int(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(T(0), a);
  T q = a / b;
  if (wrap_mul(q, b) != a && ((a ^ b) < 0)) q = wrap_sub(q, T(1));
  return q;
}

// NumPy's shifts (Printer::shift): amounts outside [0, bits) give 0, or -1 right of a negative.
template <class T>
T shift(bool left, T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr U bits = sizeof(T) * 8;
  if (static_cast<U>(b) >= bits) return left ? T(0) : (a < 0 ? T(-1) : T(0));
  return left ? static_cast<T>(static_cast<U>(a) << b) : static_cast<T>(a >> b);
}

// NaN-propagating maximum/minimum (Printer::min_max), the reductions' fold too.
template <class T>
T min_max(bool is_max, T a, T b) {
  return kir::reduce_fold(is_max ? ReduceFn::Max : ReduceFn::Min, a, b);
}

// A prepared kernel: the kernel IR, a tile slot per value (reused once a value's last reader
// has run), and how inner reductions are strip-mined.
struct Program {
  kir::Kernel k;
  vm::MathMode mode;
  std::vector<int> slot;  // per value
  int slots = 0;
  bool strips[2] = {false, false};  // per stage (rest, row): inner reductions run in strips
  int64_t strip = 0;
  std::vector<bool> inner_reduced, compensated;  // per output
  // The row stage (kernel_ir.hpp): whether there is one; per value, whether the row stage or the
  // rest needs it.
  bool row_stage = false;
  std::vector<bool> need_row, need_main;
};

// 8 bytes of any element type, for accumulators.
struct Cell {
  alignas(8) unsigned char bytes[8] = {};
  template <class T>
  T get() const {
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    return v;
  }
  template <class T>
  void set(T v) {
    std::memcpy(bytes, &v, sizeof(T));
  }
};

struct RowAcc {  // an inner reduction's state (value, index, Neumaier compensation)
  Cell value, comp;
  int64_t index = -1;
};

class Frame {
 public:
  Frame(const Program& p, const int64_t* I, const double* F, void* const* P)
      : p_(p), k_(p.k), I_(I), F_(F), P_(P), tiles_(std::malloc(p.slots * kTile * 8 + 8)) {
    if (!tiles_) throw Error("interp: out of memory for a kernel's tiles", ErrorKind::Memory);
  }
  ~Frame() { std::free(tiles_); }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  void run() {
    int r = k_.rank;
    size_t nl = k_.leaves.size(), no = k_.outputs.size();
    leaf_row_.assign(nl, 0);
    leaf_inner_.assign(nl, 0);
    out_row_.assign(no, 0);
    out_inner_.assign(no, 0);
    state_.resize(no);
    strip_.resize(no);
    row_result_.resize(no);
    for (size_t l = 0; l < nl; ++l)
      if (r > 0) {
        int s = k_.leaves[l].inner_stride;
        leaf_inner_[l] = s >= 0 ? s : I_[k_.leaf_base(int(l)) + r];
      }
    for (size_t o = 0; o < no; ++o)
      if (r > 0) out_inner_[o] = p_.inner_reduced[o] ? 0 : 1;  // as the printer's output maps
    if (r == 0) {
      set_row_bases({});
      row(1);
      return;
    }
    std::vector<int64_t> idx(r - 1, 0);
    for (int d = 0; d + 1 < r; ++d)
      if (I_[d] <= 0) return;
    while (true) {
      set_row_bases(idx);
      row(I_[r - 1]);
      int d = r - 2;
      for (; d >= 0; --d) {
        if (++idx[d] < I_[d]) break;
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }

 private:
  template <class T>
  T* tile(int value) const {
    return reinterpret_cast<T*>(static_cast<char*>(tiles_) + p_.slot[value] * kTile * 8);
  }

  void set_row_bases(const std::vector<int64_t>& idx) {
    auto base = [&](int at) {
      int64_t a = I_[at];
      for (size_t d = 0; d < idx.size(); ++d) a += idx[d] * I_[at + 1 + int(d)];
      return a;
    };
    for (size_t l = 0; l < k_.leaves.size(); ++l) leaf_row_[l] = base(k_.leaf_base(int(l)));
    for (size_t o = 0; o < k_.outputs.size(); ++o) out_row_[o] = base(k_.output_base(int(o)));
  }

  // One row of the innermost dim: n elements (rank 0: one element). With a row stage, the row
  // outputs' pass over the row comes first, then the rest's.
  void row(int64_t n) {
    if (p_.row_stage) {
      row_stage_ = true;
      stage(n);
      row_stage_ = false;
    }
    stage(n);
  }

  bool active(size_t o) const { return k_.outputs[o].row == row_stage_; }
  bool folds_inner(size_t o) const { return active(o) && p_.inner_reduced[o]; }

  void stage(int64_t n) {
    size_t no = k_.outputs.size();
    const std::vector<bool>& need = row_stage_ ? p_.need_row : p_.need_main;
    for (size_t o = 0; o < no; ++o)
      if (folds_inner(o)) state_[o] = identity(o);
    bool strips = p_.strips[row_stage_ ? 1 : 0];
    int64_t step = strips ? p_.strip : std::max<int64_t>(n, 1);
    // Without strips, the elements fold straight into the row's accumulators.
    std::vector<RowAcc>& acc = strips ? strip_ : state_;
    for (int64_t s0 = 0; s0 < n; s0 += step) {
      if (strips)
        for (size_t o = 0; o < no; ++o)
          if (folds_inner(o)) strip_[o] = identity(o);
      int64_t end = std::min(n, s0 + step);
      for (int64_t t0 = s0; t0 < end; t0 += kTile) {
        int64_t m = std::min(kTile, end - t0);
        for (size_t v = 0; v < k_.values.size(); ++v)
          if (need[v]) eval(int(v), t0, m);
        for (size_t o = 0; o < no; ++o)
          if (active(o)) output(o, t0, m, acc[o]);
      }
      if (strips)
        for (size_t o = 0; o < no; ++o)
          if (folds_inner(o)) fold_strip(o, state_[o], strip_[o]);
    }
    for (size_t o = 0; o < no; ++o)
      if (folds_inner(o)) finish(o, state_[o]);
  }

  RowAcc identity(size_t o) const {
    RowAcc a;
    const kir::Output& out = k_.outputs[o];
    with_element_type(out.type, [&](auto z) {
      using T = decltype(z);
      a.value.set(kir::reduce_identity<T>(out.fn, out.type));
      a.comp.set(T(0));
    });
    return a;
  }

  bool is_arg(size_t o) const { return k_.outputs[o].index_value >= 0; }

  // Folds a tile's values into output o: a row accumulator, a partial in memory, or stores.
  void output(size_t o, int64_t t0, int64_t m, RowAcc& acc) {
    const kir::Output& out = k_.outputs[o];
    with_element_type(out.type, [&](auto z) {
      using T = decltype(z);
      const T* v = tile<T>(out.value);
      const int64_t* vi = is_arg(o) ? tile<int64_t>(out.index_value) : nullptr;
      if (p_.inner_reduced[o]) {
        T a = acc.value.get<T>();
        if (vi) {
          for (int64_t j = 0; j < m; ++j) kir::arg_fold(out.fn, a, acc.index, v[j], vi[j]);
        } else {
          for (int64_t j = 0; j < m; ++j) a = kir::reduce_fold(out.fn, a, v[j]);
        }
        acc.value.set(a);
        return;
      }
      T* mem = static_cast<T*>(P_[k_.output_pointer(int(o))]);
      int64_t at = out_row_[o] + t0 * out_inner_[o];
      if (!out.reduce) {
        for (int64_t j = 0; j < m; ++j) mem[at + j * out_inner_[o]] = v[j];
      } else if (vi) {
        auto* mi = static_cast<int64_t*>(P_[k_.index_pointer(int(o))]);
        for (int64_t j = 0; j < m; ++j) {
          int64_t e = at + j * out_inner_[o];
          kir::arg_fold(out.fn, mem[e], mi[e], v[j], vi[j]);
        }
      } else {
        for (int64_t j = 0; j < m; ++j) {
          int64_t e = at + j * out_inner_[o];
          mem[e] = kir::reduce_fold(out.fn, mem[e], v[j]);
        }
      }
    });
  }

  // Printer::fold_strip: Neumaier's step for compensated sums, arg_fold or the fold otherwise.
  void fold_strip(size_t o, RowAcc& state, const RowAcc& strip) {
    const kir::Output& out = k_.outputs[o];
    with_element_type(out.type, [&](auto z) {
      using T = decltype(z);
      T s = state.value.get<T>(), x = strip.value.get<T>();
      if (is_arg(o)) {
        kir::arg_fold(out.fn, s, state.index, x, strip.index);
      } else if (p_.compensated[o]) {
        if constexpr (is_fp<T>) {
          T t = s + x;
          T lost = std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
          state.comp.set(T(state.comp.get<T>() + lost));
          s = t;
        }
      } else {
        s = kir::reduce_fold(out.fn, s, x);
      }
      state.value.set(s);
    });
  }

  // Printer::set_strip_state + finish_inner_reductions: the row's result into the partial.
  void finish(size_t o, RowAcc& state) {
    const kir::Output& out = k_.outputs[o];
    with_element_type(out.type, [&](auto z) {
      using T = decltype(z);
      T s = state.value.get<T>();
      if constexpr (is_fp<T>)
        if (p_.compensated[o]) {
          T c = state.comp.get<T>();
          if (std::fabs(c) < std::numeric_limits<T>::infinity()) s = s + c;
        }
      // A row output's result for VOp::Row: the partial it folds into starts at the identity.
      if (out.row)
        row_result_[o].set(kir::reduce_fold(out.fn, kir::reduce_identity<T>(out.fn, out.type), s));
      T* mem = static_cast<T*>(P_[k_.output_pointer(int(o))]);
      int64_t e = out_row_[o];
      if (is_arg(o)) {
        auto* mi = static_cast<int64_t*>(P_[k_.index_pointer(int(o))]);
        kir::arg_fold(out.fn, mem[e], mi[e], s, state.index);
      } else {
        mem[e] = kir::reduce_fold(out.fn, mem[e], s);
      }
    });
  }

  // Computes value v for the m elements of the current row starting at inner index t0.
  void eval(int v, int64_t t0, int64_t m) {
    const kir::Value& val = k_.values[v];
    switch (val.op) {
      case kir::VOp::Param:
        return param(val, v, m);
      case kir::VOp::Leaf:
        return leaf(val, v, t0, m);
      case kir::VOp::Const:
        return splat(val.type, val.f, val.i, v, m);
      case kir::VOp::Unary:
        return unary(val, v, m);
      case kir::VOp::Binary:
        return binary(val, v, m);
      case kir::VOp::Select:
        return with_element_type(val.type, [&](auto z) {
          using T = decltype(z);
          const uint8_t* c = tile<uint8_t>(val.a);
          const T *a = tile<T>(val.b), *b = tile<T>(val.c);
          T* y = tile<T>(v);
          for (int64_t j = 0; j < m; ++j) y[j] = c[j] ? a[j] : b[j];
        });
      case kir::VOp::Row:
        return with_element_type(val.type, [&](auto z) {
          using T = decltype(z);
          T x = row_result_[val.index].get<T>();
          T* y = tile<T>(v);
          for (int64_t j = 0; j < m; ++j) y[j] = x;
        });
      case kir::VOp::Cast:
        return with_element_type(k_.values[val.a].type, [&](auto zf) {
          using From = decltype(zf);
          with_element_type(val.type, [&](auto zt) {
            using To = decltype(zt);
            const From* x = tile<From>(val.a);
            To* y = tile<To>(v);
            for (int64_t j = 0; j < m; ++j) y[j] = convert<To>(x[j]);
          });
        });
    }
  }

  void param(const kir::Value& val, int v, int64_t m) {
    splat(k_.params[val.index], F_[val.index], I_[k_.param_base() + val.index], v, m);
  }

  // Value v is one scalar for every element: f for float types (rounded to float32 for it), i
  // for the others (int32: its low 32 bits; bool: i != 0).
  void splat(DType t, double f, int64_t i, int v, int64_t m) {
    with_element_type(t, [&](auto z) {
      using T = decltype(z);
      T x;
      if constexpr (is_fp<T>)
        x = static_cast<T>(f);
      else if constexpr (is_bool<T>)
        x = i != 0;
      else
        x = static_cast<T>(i);
      T* y = tile<T>(v);
      for (int64_t j = 0; j < m; ++j) y[j] = x;
    });
  }

  void leaf(const kir::Value& val, int v, int64_t t0, int64_t m) {
    int l = val.index;
    const kir::Leaf& lf = k_.leaves[l];
    int64_t at = leaf_row_[l] + t0 * leaf_inner_[l], step = leaf_inner_[l];
    switch (lf.kind) {
      case kir::LeafKind::Memory:
        return with_element_type(lf.dtype, [&](auto z) {
          using T = decltype(z);
          const T* mem = static_cast<const T*>(P_[lf.pointer]);
          T* y = tile<T>(v);
          for (int64_t j = 0; j < m; ++j) {
            T x = mem[at + j * step];
            if constexpr (is_bool<T>) x = x != 0;
            y[j] = x;
          }
        });
      case kir::LeafKind::Iota: {
        int64_t* y = tile<int64_t>(v);
        for (int64_t j = 0; j < m; ++j) y[j] = at + j * step;
        return;
      }
      case kir::LeafKind::Random: {
        auto seed = static_cast<uint64_t>(I_[k_.param_base() + lf.seed_param]);
        auto stream = static_cast<uint32_t>(lf.stream);
        if (lf.random == RandomKind::Integers) {
          int64_t* y = tile<int64_t>(v);
          for (int64_t j = 0; j < m; ++j)
            y[j] = philox::integers(seed, stream, uint64_t(at + j * step), lf.low, lf.high);
          return;
        }
        double* y = tile<double>(v);
        for (int64_t j = 0; j < m; ++j) {
          auto i = static_cast<uint64_t>(at + j * step);
          y[j] = lf.random == RandomKind::Uniform ? philox::uniform(seed, stream, i)
                                                  : philox::standard_normal(seed, stream, i);
        }
        return;
      }
    }
  }

  void unary(const kir::Value& val, int v, int64_t m) {
    auto f = static_cast<UnaryFn>(val.fn);
    DType in = k_.values[val.a].type;
    with_element_type(in, [&](auto z) {
      using T = decltype(z);
      const T* x = tile<T>(val.a);
      auto map = [&](auto fn) {
        using O = decltype(fn(x[0]));
        O* y = tile<O>(v);
        for (int64_t j = 0; j < m; ++j) y[j] = fn(x[j]);
      };
      switch (f) {
        case UnaryFn::Neg:
          if constexpr (is_fp<T>) return map([](T a) { return T(-a); });
          if constexpr (is_bool<T>) return map([](T a) { return a; });  // i1: -1 is 1
          if constexpr (!is_fp<T> && !is_bool<T>) return map([](T a) { return wrap_sub(T(0), a); });
          break;
        case UnaryFn::Abs:
          if constexpr (is_fp<T>) return map([](T a) { return T(std::fabs(a)); });
          if constexpr (is_bool<T>) return map([](T a) { return a; });
          if constexpr (!is_fp<T> && !is_bool<T>)
            return map([](T a) { return a < 0 ? wrap_sub(T(0), a) : a; });  // abs(MIN) is MIN
          break;
        case UnaryFn::Sqrt:
          if constexpr (is_fp<T>) return map([](T a) { return T(std::sqrt(a)); });
          undefined("sqrt", in);
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
          if constexpr (is_fp<T>)
            return vm::apply(vm::math_fn(f), p_.mode, x, nullptr, tile<T>(v), m);
          undefined(unary_name(f), in);
        case UnaryFn::Floor:  // integers and bools: themselves
          if constexpr (is_fp<T>) return map([](T a) { return T(std::floor(a)); });
          return map([](T a) { return a; });
        case UnaryFn::Ceil:
          if constexpr (is_fp<T>) return map([](T a) { return T(std::ceil(a)); });
          return map([](T a) { return a; });
        case UnaryFn::Round:  // half to even
          if constexpr (std::is_same_v<T, double>) return map([](T a) { return ::roundeven(a); });
          if constexpr (std::is_same_v<T, float>) return map([](T a) { return ::roundevenf(a); });
          return map([](T a) { return a; });
        case UnaryFn::IsNan:
          return map([](T a) { return uint8_t(a != a); });
        case UnaryFn::Sign:  // rewritten into primitives by codegen/legalize.cpp
        case UnaryFn::Sigmoid:
        case UnaryFn::IsFinite:
        case UnaryFn::Not:
          legalized(unary_name(f));
        case UnaryFn::Invert:
          if constexpr (is_bool<T>) return map([](T a) { return T(!a); });
          if constexpr (!is_fp<T> && !is_bool<T>) return map([](T a) { return T(~a); });
          undefined("invert", in);
      }
      throw InternalError("interp: unknown unary op");
    });
  }

  void binary(const kir::Value& val, int v, int64_t m) {
    auto f = static_cast<BinaryFn>(val.fn);
    DType t = k_.values[val.a].type;
    with_element_type(t, [&](auto z) {
      using T = decltype(z);
      constexpr bool fp = is_fp<T>, boolean = is_bool<T>, integer = !fp && !boolean;
      const T *a = tile<T>(val.a), *b = tile<T>(val.b);
      auto map = [&](auto fn) {
        using O = decltype(fn(a[0], b[0]));
        O* y = tile<O>(v);
        for (int64_t j = 0; j < m; ++j) y[j] = fn(a[j], b[j]);
      };
      auto pred = [&](auto fn) { map([&](T p, T q) { return uint8_t(fn(p, q)); }); };
      switch (f) {
        case BinaryFn::Add:
          if constexpr (fp) return map([](T p, T q) { return T(p + q); });
          if constexpr (boolean) return map([](T p, T q) { return T(p | q); });
          if constexpr (integer) return map([](T p, T q) { return wrap_add(p, q); });
          break;
        case BinaryFn::Sub:
          if constexpr (fp) return map([](T p, T q) { return T(p - q); });
          if constexpr (integer) return map([](T p, T q) { return wrap_sub(p, q); });
          undefined("subtract", t);
        case BinaryFn::Mul:
          if constexpr (fp) return map([](T p, T q) { return T(p * q); });
          if constexpr (boolean) return map([](T p, T q) { return T(p & q); });
          if constexpr (integer) return map([](T p, T q) { return wrap_mul(p, q); });
          break;
        case BinaryFn::Div:
          if constexpr (fp) return map([](T p, T q) { return T(p / q); });
          undefined("true_divide", t);
        case BinaryFn::Mod:
          legalized("remainder");
        case BinaryFn::FMod:
          if constexpr (fp) return map([](T p, T q) { return T(std::fmod(p, q)); });
          if constexpr (integer) return map([](T p, T q) { return ifmod(p, q); });
          undefined("fmod", t);
        case BinaryFn::CopySign:
          if constexpr (fp) return map([](T p, T q) { return T(std::copysign(p, q)); });
          undefined("copysign", t);
        case BinaryFn::Pow:
          if constexpr (fp) return vm::apply(vm::MathFn::Pow, p_.mode, a, b, tile<T>(v), m);
          if constexpr (integer)
            return map([](T p, T q) { return static_cast<T>(kiln_ipow(int64_t(p), int64_t(q))); });
          undefined("power", t);
        case BinaryFn::Lt:
          return pred([](T p, T q) { return p < q; });  // ordered: NaN compares false
        case BinaryFn::Le:
          return pred([](T p, T q) { return p <= q; });
        case BinaryFn::Gt:
          return pred([](T p, T q) { return p > q; });
        case BinaryFn::Ge:
          return pred([](T p, T q) { return p >= q; });
        case BinaryFn::Eq:
          return pred([](T p, T q) { return p == q; });
        case BinaryFn::Ne:
          return pred([](T p, T q) { return p != q; });  // unordered: true for NaN
        case BinaryFn::And:
        case BinaryFn::BitAnd:
          if constexpr (!fp) return map([](T p, T q) { return T(p & q); });
          undefined(binary_name(f), t);
        case BinaryFn::Or:
        case BinaryFn::BitOr:
          if constexpr (!fp) return map([](T p, T q) { return T(p | q); });
          undefined(binary_name(f), t);
        case BinaryFn::BitXor:
          if constexpr (!fp) return map([](T p, T q) { return T(p ^ q); });
          undefined("bitwise_xor", t);
        case BinaryFn::Max:
          return map([](T p, T q) { return min_max(true, p, q); });
        case BinaryFn::Min:
          return map([](T p, T q) { return min_max(false, p, q); });
        case BinaryFn::LeftShift:
        case BinaryFn::RightShift:
          if constexpr (integer) {
            bool left = f == BinaryFn::LeftShift;
            return map([left](T p, T q) { return shift(left, p, q); });
          }
          undefined(binary_name(f), t);
        case BinaryFn::FloorDiv:  // floats: rewritten into primitives by legalize
          if constexpr (integer) return map([](T p, T q) { return floordiv_int(p, q); });
          if constexpr (fp) legalized("floor_divide");
          undefined("floor_divide", t);
      }
      throw InternalError("interp: unknown binary op");
    });
  }

  const Program& p_;
  const kir::Kernel& k_;
  const int64_t* I_;
  const double* F_;
  void* const* P_;
  void* tiles_;
  std::vector<int64_t> leaf_row_, leaf_inner_, out_row_, out_inner_;
  std::vector<RowAcc> state_, strip_;  // per output: the row's and the strip's accumulators
  std::vector<Cell> row_result_;       // per row output: the current row's result
  bool row_stage_ = false;             // evaluating the row stage
};

Program prepare(const kir::Kernel& k, const vm::MathMode& mode) {
  Program p;
  p.k = k;
  p.mode = mode;
  size_t nv = k.values.size();
  // Tile slots: a value's slot is free again after its last reader (outputs read at the end).
  std::vector<size_t> last(nv, 0);
  for (size_t v = 0; v < nv; ++v) {
    last[v] = v;
    for (int u : {k.values[v].a, k.values[v].b, k.values[v].c})
      if (u >= 0) last[u] = v;
  }
  for (const auto& o : k.outputs) {
    if (k.values[o.value].type != o.type)
      throw InternalError("interp: an output's value type differs from its stored type");
    last[o.value] = nv;
    if (o.index_value >= 0) last[o.index_value] = nv;
  }
  std::vector<int> free_slots;
  p.slot.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    if (free_slots.empty()) {
      p.slot[v] = p.slots++;
    } else {
      p.slot[v] = free_slots.back();
      free_slots.pop_back();
    }
    const kir::Value& x = k.values[v];
    int ops[3] = {x.a, x.b, x.c};
    for (int q = 0; q < 3; ++q) {
      int u = ops[q];
      bool seen = false;
      for (int r = 0; r < q; ++r) seen = seen || ops[r] == u;
      if (u >= 0 && !seen && last[u] == v) free_slots.push_back(p.slot[u]);
    }
  }
  p.slots = std::max(p.slots, 1);
  bool random = false;
  for (const auto& l : k.leaves) random = random || l.kind == kir::LeafKind::Random;
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const kir::Output& out = k.outputs[o];
    bool inner = out.reduce && k.rank > 0 && ((out.reduced_mask >> (k.rank - 1)) & 1u);
    p.inner_reduced.push_back(inner);
    p.compensated.push_back(inner && is_float(out.type) &&
                            (out.fn == ReduceFn::Sum || out.fn == ReduceFn::Mean));
  }
  // Strips per stage, as the printer's: each stage's loop is strip-mined when it has a
  // compensated sum (or random leaves).
  for (int row = 0; row < 2; ++row) {
    bool any_compensated = false;
    for (size_t o = 0; o < k.outputs.size(); ++o)
      any_compensated = any_compensated || (p.compensated[o] && k.outputs[o].row == (row == 1));
    p.strips[row] = k.rank > 0 && (random || any_compensated);
  }
  p.row_stage = k.has_row_stage();
  p.need_row = k.needed_by_stage(true);
  p.need_main = k.needed_by_stage(false);
  p.strip = random ? kRandomStrip : kStrip;
  return p;
}

class InterpKernel final : public backend::Kernel {
 public:
  explicit InterpKernel(Program p) : p_(std::move(p)) {}
  void launch(const int64_t* I, const double* F, void* const* P, int) const override {
    Frame(p_, I, F, P).run();
    if (std::string e = kir::take_kernel_error(); !e.empty()) throw Error(e);
  }

 private:
  Program p_;
};

class InterpBackend final : public backend::Backend {
 public:
  explicit InterpBackend(vm::MathMode (*math_mode)()) : math_mode_(math_mode) {}
  Device device() const override { return Device::Interp; }
  backend::Capabilities capabilities() const override {
    backend::Capabilities c;
    c.jit = false;
    c.vector_math = !math_mode_().precise;
    return c;
  }
  std::shared_ptr<const backend::Kernel> compile(const kir::Kernel& k,
                                                 backend::KernelDumps* dumps) override {
    auto t0 = std::chrono::steady_clock::now();
    vm::MathMode mode = math_mode_();
    auto kernel = std::make_shared<InterpKernel>(prepare(k, mode));
    if (dumps) dumps->printed = "; interpreted (no code is generated)\n";
    compiled_.fetch_add(1, std::memory_order_relaxed);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nanos_.fetch_add(static_cast<int64_t>(s * 1e9), std::memory_order_relaxed);
    return kernel;
  }
  backend::CompileStats stats() const override {
    backend::CompileStats s;
    s.compiled = compiled_.load(std::memory_order_relaxed);
    s.compile_seconds = static_cast<double>(nanos_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
  }
  std::string target() const override {
    vm::MathMode m = math_mode_();
    if (m.precise) return "interpreter, scalar math (glibc)";
    return std::string("interpreter, vector math ") + vm::isa_name(m.isa);
  }

 private:
  vm::MathMode (*math_mode_)();
  std::atomic<int64_t> compiled_{0}, nanos_{0};
};

}  // namespace

std::unique_ptr<backend::Backend> make_backend(vm::MathMode (*math_mode)()) {
  return std::make_unique<InterpBackend>(math_mode);
}

}  // namespace kiln::interp
