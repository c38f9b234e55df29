#include "codegen/vector_math.hpp"

#include <cmath>
#include <string>

#include "codegen/math/kiln_math.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

// libmvec's variants take and return GCC vector types; their declarations change the ABI only
// for callers without the ISA, and every caller below is compiled for it.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {
typedef double d2 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));
typedef double d8 __attribute__((vector_size(64)));
typedef float f4 __attribute__((vector_size(16)));
typedef float f8 __attribute__((vector_size(32)));
typedef float f16 __attribute__((vector_size(64)));
}  // namespace

// The variants of one ISA: double with ND lanes, float with NF.
#define KILN_VM_DECLARE(ISA, ND, NF, VD, VF)      \
  extern "C" VD _ZGV##ISA##N##ND##v_sin(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_cos(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_tan(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_exp(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_log(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_expm1(VD);    \
  extern "C" VD _ZGV##ISA##N##ND##v_log1p(VD);    \
  extern "C" VD _ZGV##ISA##N##ND##v_tanh(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##v_asin(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##v_acos(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##v_atan(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##vv_pow(VD, VD); \
  extern "C" VF _ZGV##ISA##N##NF##v_sinf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_cosf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_tanf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_expf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_logf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_expm1f(VF);   \
  extern "C" VF _ZGV##ISA##N##NF##v_log1pf(VF);   \
  extern "C" VF _ZGV##ISA##N##NF##v_tanhf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##v_asinf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##v_acosf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##v_atanf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##vv_powf(VF, VF);

KILN_VM_DECLARE(b, 2, 4, d2, f4)
KILN_VM_DECLARE(d, 4, 8, d4, f8)
KILN_VM_DECLARE(e, 8, 16, d8, f16)

// Kiln's own variants (codegen/math/kiln_math.cpp), under the same ABI.
#define KILN_KM_DECLARE(ISA, ND, NF, VD, VF)           \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_exp(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_expm1(VD);    \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_log(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_log1p(VD);    \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_tanh(VD);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_expf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_expm1f(VF);   \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_logf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_log1pf(VF);   \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_tanhf(VF);    \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_sin(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_cos(VD);      \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_tan(VD);      \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_sinf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_cosf(VF);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_tanf(VF);     \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_atan(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_asin(VD);     \
  extern "C" VD _ZGV##ISA##N##ND##v_kiln_acos(VD);     \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_atanf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_asinf(VF);    \
  extern "C" VF _ZGV##ISA##N##NF##v_kiln_acosf(VF);    \
  extern "C" VD _ZGV##ISA##N##ND##vv_kiln_pow(VD, VD); \
  extern "C" VF _ZGV##ISA##N##NF##vv_kiln_powf(VF, VF);

KILN_KM_DECLARE(b, 2, 4, d2, f4)
KILN_KM_DECLARE(d, 4, 8, d4, f8)
KILN_KM_DECLARE(e, 8, 16, d8, f16)

// apply for one ISA and element type: groups of N elements (the last one padded with its first
// element's value, whose lane is then dropped), one variant call per group.
#define KILN_VM_APPLY(NAME, TARGET, ISA, LANES, V, T, SUFFIX)                          \
  __attribute__((target(TARGET))) void NAME(kiln::vm::MathFn f, bool kiln, const T* x, \
                                            const T* x2, T* y, int64_t n) {            \
    using kiln::vm::MathFn;                                                            \
    for (int64_t i = 0; i < n; i += LANES) {                                           \
      int64_t m = n - i < LANES ? n - i : LANES;                                       \
      V a, b;                                                                          \
      for (int k = 0; k < LANES; ++k) {                                                \
        a[k] = x[i + (k < m ? k : 0)];                                                 \
        b[k] = x2 ? x2[i + (k < m ? k : 0)] : T(0);                                    \
      }                                                                                \
      V r;                                                                             \
      switch (f) {                                                                     \
        case MathFn::Sin:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_sin##SUFFIX(a)                        \
                   : _ZGV##ISA##N##LANES##v_sin##SUFFIX(a);                            \
          break;                                                                       \
        case MathFn::Cos:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_cos##SUFFIX(a)                        \
                   : _ZGV##ISA##N##LANES##v_cos##SUFFIX(a);                            \
          break;                                                                       \
        case MathFn::Tan:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_tan##SUFFIX(a)                        \
                   : _ZGV##ISA##N##LANES##v_tan##SUFFIX(a);                            \
          break;                                                                       \
        case MathFn::Exp:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_exp##SUFFIX(a)                        \
                   : _ZGV##ISA##N##LANES##v_exp##SUFFIX(a);                            \
          break;                                                                       \
        case MathFn::Log:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_log##SUFFIX(a)                        \
                   : _ZGV##ISA##N##LANES##v_log##SUFFIX(a);                            \
          break;                                                                       \
        case MathFn::Expm1:                                                            \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_expm1##SUFFIX(a)                      \
                   : _ZGV##ISA##N##LANES##v_expm1##SUFFIX(a);                          \
          break;                                                                       \
        case MathFn::Log1p:                                                            \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_log1p##SUFFIX(a)                      \
                   : _ZGV##ISA##N##LANES##v_log1p##SUFFIX(a);                          \
          break;                                                                       \
        case MathFn::Tanh:                                                             \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_tanh##SUFFIX(a)                       \
                   : _ZGV##ISA##N##LANES##v_tanh##SUFFIX(a);                           \
          break;                                                                       \
        case MathFn::Asin:                                                             \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_asin##SUFFIX(a)                       \
                   : _ZGV##ISA##N##LANES##v_asin##SUFFIX(a);                           \
          break;                                                                       \
        case MathFn::Acos:                                                             \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_acos##SUFFIX(a)                       \
                   : _ZGV##ISA##N##LANES##v_acos##SUFFIX(a);                           \
          break;                                                                       \
        case MathFn::Atan:                                                             \
          r = kiln ? _ZGV##ISA##N##LANES##v_kiln_atan##SUFFIX(a)                       \
                   : _ZGV##ISA##N##LANES##v_atan##SUFFIX(a);                           \
          break;                                                                       \
        case MathFn::Pow:                                                              \
          r = kiln ? _ZGV##ISA##N##LANES##vv_kiln_pow##SUFFIX(a, b)                    \
                   : _ZGV##ISA##N##LANES##vv_pow##SUFFIX(a, b);                        \
          break;                                                                       \
      }                                                                                \
      for (int k = 0; k < m; ++k) y[i + k] = r[k];                                     \
    }                                                                                  \
  }

namespace {
KILN_VM_APPLY(apply_b_d, "sse4.2", b, 2, d2, double, )
KILN_VM_APPLY(apply_b_f, "sse4.2", b, 4, f4, float, f)
KILN_VM_APPLY(apply_d_d, "avx2,fma", d, 4, d4, double, )
KILN_VM_APPLY(apply_d_f, "avx2,fma", d, 8, f8, float, f)
KILN_VM_APPLY(apply_e_d, "avx512f", e, 8, d8, double, )
KILN_VM_APPLY(apply_e_f, "avx512f", e, 16, f16, float, f)

template <class T>
T scalar(kiln::vm::MathFn f, T x, T x2) {
  using kiln::vm::MathFn;
  switch (f) {
    case MathFn::Sin:
      return std::sin(x);
    case MathFn::Cos:
      return std::cos(x);
    case MathFn::Tan:
      return std::tan(x);
    case MathFn::Exp:
      return std::exp(x);
    case MathFn::Log:
      return std::log(x);
    case MathFn::Expm1:
      return std::expm1(x);
    case MathFn::Log1p:
      return std::log1p(x);
    case MathFn::Tanh:
      return std::tanh(x);
    case MathFn::Asin:
      return std::asin(x);
    case MathFn::Acos:
      return std::acos(x);
    case MathFn::Atan:
      return std::atan(x);
    case MathFn::Pow:
      return std::pow(x, x2);
  }
  return x;
}

void check_isa(char isa) {
  bool ok = isa == 'b'   ? __builtin_cpu_supports("sse4.2")
            : isa == 'd' ? __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
            : isa == 'e' ? __builtin_cpu_supports("avx512f")
                         : false;
  if (!ok)
    throw kiln::Error(std::string("vector math: this CPU cannot run libmvec's '") + isa +
                      "' variants");
}
}  // namespace

namespace kiln::vm {

const char* isa_name(char isa) { return isa == 'e' ? "AVX-512" : isa == 'd' ? "AVX2" : "SSE4"; }

const char* libm_name(MathFn f) {
  switch (f) {
    case MathFn::Sin:
      return "sin";
    case MathFn::Cos:
      return "cos";
    case MathFn::Tan:
      return "tan";
    case MathFn::Exp:
      return "exp";
    case MathFn::Log:
      return "log";
    case MathFn::Expm1:
      return "expm1";
    case MathFn::Log1p:
      return "log1p";
    case MathFn::Tanh:
      return "tanh";
    case MathFn::Asin:
      return "asin";
    case MathFn::Acos:
      return "acos";
    case MathFn::Atan:
      return "atan";
    case MathFn::Pow:
      return "pow";
  }
  return "?";
}

bool kiln_math_selected() {
  const std::string& math = kiln::flags().math;
  if (math != "" && math != "libmvec" && math != "kiln")
    throw kiln::Error("KILN_MATH: unknown math library '" + math +
                      "' (kiln, the default, or libmvec)");
  return math != "libmvec";
}

bool kiln_has(MathFn f) {
  return f == MathFn::Exp || f == MathFn::Expm1 || f == MathFn::Log || f == MathFn::Log1p ||
         f == MathFn::Tanh || f == MathFn::Sin || f == MathFn::Cos || f == MathFn::Tan ||
         f == MathFn::Atan || f == MathFn::Asin || f == MathFn::Acos || f == MathFn::Pow;
}

std::string call_name(MathFn f, const MathMode& mode) {
  return (uses_kiln(f, mode) ? "kiln_" : "") + std::string(libm_name(f));
}

MathFn math_fn(UnaryFn f) {
  switch (f) {
    case UnaryFn::Sin:
      return MathFn::Sin;
    case UnaryFn::Cos:
      return MathFn::Cos;
    case UnaryFn::Tan:
      return MathFn::Tan;
    case UnaryFn::Exp:
    case UnaryFn::Sigmoid:
      return MathFn::Exp;
    case UnaryFn::Log:
      return MathFn::Log;
    case UnaryFn::Expm1:
      return MathFn::Expm1;
    case UnaryFn::Log1p:
      return MathFn::Log1p;
    case UnaryFn::Tanh:
      return MathFn::Tanh;
    case UnaryFn::Arcsin:
      return MathFn::Asin;
    case UnaryFn::Arccos:
      return MathFn::Acos;
    case UnaryFn::Arctan:
      return MathFn::Atan;
    case UnaryFn::Neg:
    case UnaryFn::Abs:
    case UnaryFn::Sqrt:
    case UnaryFn::Floor:
    case UnaryFn::Ceil:
    case UnaryFn::Round:
    case UnaryFn::Sign:
    case UnaryFn::IsNan:
    case UnaryFn::IsFinite:
    case UnaryFn::Not:
    case UnaryFn::Invert:
      break;
  }
  throw InternalError(std::string("vector math: ") + unary_name(f) +
                      " is not a transcendental function");
}

void apply(MathFn f, const MathMode& mode, const double* x, const double* x2, double* y,
           int64_t n) {
  if (mode.precise) {
    for (int64_t i = 0; i < n; ++i) y[i] = scalar(f, x[i], x2 ? x2[i] : 0.0);
    return;
  }
  check_isa(mode.isa);
  bool kiln = uses_kiln(f, mode);
  switch (mode.isa) {
    case 'b':
      return apply_b_d(f, kiln, x, x2, y, n);
    case 'd':
      return apply_d_d(f, kiln, x, x2, y, n);
    case 'e':
      return apply_e_d(f, kiln, x, x2, y, n);
  }
  throw InternalError(std::string("vector math: no ISA '") + mode.isa + "'");
}

void apply(MathFn f, const MathMode& mode, const float* x, const float* x2, float* y, int64_t n) {
  if (mode.precise) {
    for (int64_t i = 0; i < n; ++i) y[i] = scalar(f, x[i], x2 ? x2[i] : 0.0f);
    return;
  }
  check_isa(mode.isa);
  bool kiln = uses_kiln(f, mode);
  switch (mode.isa) {
    case 'b':
      return apply_b_f(f, kiln, x, x2, y, n);
    case 'd':
      return apply_d_f(f, kiln, x, x2, y, n);
    case 'e':
      return apply_e_f(f, kiln, x, x2, y, n);
  }
  throw InternalError(std::string("vector math: no ISA '") + mode.isa + "'");
}

}  // namespace kiln::vm
