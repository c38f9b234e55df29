// Vector math: Kiln's own functions (codegen/math) against glibc's libmvec, the variants JIT
// kernels call (the widest ISA the host has: AVX-512 or AVX2), called in a loop over 4096
// doubles in L1, one core; counter ns_per_elem. Args: function (vm::MathFn), library (0
// libmvec, 1 Kiln).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "codegen/vector_math.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

typedef double d4 __attribute__((vector_size(32)));
typedef double d8 __attribute__((vector_size(64)));

#define KILN_BM_DECLARE(FN)             \
  extern "C" d4 _ZGVdN4v_##FN(d4);      \
  extern "C" d4 _ZGVdN4v_kiln_##FN(d4); \
  extern "C" d8 _ZGVeN8v_##FN(d8);      \
  extern "C" d8 _ZGVeN8v_kiln_##FN(d8);
KILN_BM_DECLARE(exp)
KILN_BM_DECLARE(expm1)
KILN_BM_DECLARE(log)
KILN_BM_DECLARE(log1p)
KILN_BM_DECLARE(tanh)
KILN_BM_DECLARE(sin)
KILN_BM_DECLARE(cos)
KILN_BM_DECLARE(tan)
KILN_BM_DECLARE(atan)
KILN_BM_DECLARE(asin)
KILN_BM_DECLARE(acos)

template <class V, int L>
void loop(V (*fn)(V), const double* x, double* y, int n) {
  for (int i = 0; i < n; i += L) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v = fn(v);
    __builtin_memcpy(y + i, &v, sizeof v);
  }
}

__attribute__((target("avx512f"))) void run_e(kiln::vm::MathFn f, bool kiln, const double* x,
                                              double* y, int n) {
  using kiln::vm::MathFn;
  d8 (*fn)(d8) = nullptr;
  switch (f) {
    case MathFn::Exp:
      fn = kiln ? _ZGVeN8v_kiln_exp : _ZGVeN8v_exp;
      break;
    case MathFn::Expm1:
      fn = kiln ? _ZGVeN8v_kiln_expm1 : _ZGVeN8v_expm1;
      break;
    case MathFn::Log:
      fn = kiln ? _ZGVeN8v_kiln_log : _ZGVeN8v_log;
      break;
    case MathFn::Log1p:
      fn = kiln ? _ZGVeN8v_kiln_log1p : _ZGVeN8v_log1p;
      break;
    case MathFn::Sin:
      fn = kiln ? _ZGVeN8v_kiln_sin : _ZGVeN8v_sin;
      break;
    case MathFn::Cos:
      fn = kiln ? _ZGVeN8v_kiln_cos : _ZGVeN8v_cos;
      break;
    case MathFn::Tan:
      fn = kiln ? _ZGVeN8v_kiln_tan : _ZGVeN8v_tan;
      break;
    case MathFn::Atan:
      fn = kiln ? _ZGVeN8v_kiln_atan : _ZGVeN8v_atan;
      break;
    case MathFn::Asin:
      fn = kiln ? _ZGVeN8v_kiln_asin : _ZGVeN8v_asin;
      break;
    case MathFn::Acos:
      fn = kiln ? _ZGVeN8v_kiln_acos : _ZGVeN8v_acos;
      break;
    default:
      fn = kiln ? _ZGVeN8v_kiln_tanh : _ZGVeN8v_tanh;
      break;
  }
  loop<d8, 8>(fn, x, y, n);
}

__attribute__((target("avx2,fma"))) void run_d(kiln::vm::MathFn f, bool kiln, const double* x,
                                               double* y, int n) {
  using kiln::vm::MathFn;
  d4 (*fn)(d4) = nullptr;
  switch (f) {
    case MathFn::Exp:
      fn = kiln ? _ZGVdN4v_kiln_exp : _ZGVdN4v_exp;
      break;
    case MathFn::Expm1:
      fn = kiln ? _ZGVdN4v_kiln_expm1 : _ZGVdN4v_expm1;
      break;
    case MathFn::Log:
      fn = kiln ? _ZGVdN4v_kiln_log : _ZGVdN4v_log;
      break;
    case MathFn::Log1p:
      fn = kiln ? _ZGVdN4v_kiln_log1p : _ZGVdN4v_log1p;
      break;
    case MathFn::Sin:
      fn = kiln ? _ZGVdN4v_kiln_sin : _ZGVdN4v_sin;
      break;
    case MathFn::Cos:
      fn = kiln ? _ZGVdN4v_kiln_cos : _ZGVdN4v_cos;
      break;
    case MathFn::Tan:
      fn = kiln ? _ZGVdN4v_kiln_tan : _ZGVdN4v_tan;
      break;
    case MathFn::Atan:
      fn = kiln ? _ZGVdN4v_kiln_atan : _ZGVdN4v_atan;
      break;
    case MathFn::Asin:
      fn = kiln ? _ZGVdN4v_kiln_asin : _ZGVdN4v_asin;
      break;
    case MathFn::Acos:
      fn = kiln ? _ZGVdN4v_kiln_acos : _ZGVdN4v_acos;
      break;
    default:
      fn = kiln ? _ZGVdN4v_kiln_tanh : _ZGVdN4v_tanh;
      break;
  }
  loop<d4, 4>(fn, x, y, n);
}

// The AVX-512 variants where the CPU has them, unless KILN_BENCH_AVX2=1 asks for the AVX2 ones
// (to measure both on one AVX-512 host).
bool use_avx512() {
  const char* e = std::getenv("KILN_BENCH_AVX2");
  return __builtin_cpu_supports("avx512f") && !(e && std::string(e) == "1");
}

void BM_VectorMath(benchmark::State& state) {
  auto f = static_cast<kiln::vm::MathFn>(state.range(0));
  bool kiln = state.range(1) != 0;
  bool avx512 = use_avx512();
  const int n = 4096;
  std::mt19937_64 g(3);
  // Arguments where the functions are used: log/log1p in (0, 100], asin/acos in [-1, 1], the
  // others in [-10, 10].
  bool positive = f == kiln::vm::MathFn::Log || f == kiln::vm::MathFn::Log1p;
  bool unit = f == kiln::vm::MathFn::Asin || f == kiln::vm::MathFn::Acos;
  std::uniform_real_distribution<double> u(positive ? 1e-3
                                           : unit   ? -1
                                                    : -10,
                                           positive ? 100
                                           : unit   ? 1
                                                    : 10);
  std::vector<double> x(n), y(n);
  for (double& v : x) v = u(g);
  for (auto _ : state) {
    if (avx512)
      run_e(f, kiln, x.data(), y.data(), n);
    else
      run_d(f, kiln, x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(kiln ? "kiln_" : "") + kiln::vm::libm_name(f) +
                 (avx512 ? " AVX-512" : " AVX2"));
  state.counters["ns_per_elem"] =
      benchmark::Counter(double(n) * double(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

extern "C" d4 _ZGVdN4vv_pow(d4, d4);
extern "C" d4 _ZGVdN4vv_kiln_pow(d4, d4);
extern "C" d8 _ZGVeN8vv_pow(d8, d8);
extern "C" d8 _ZGVeN8vv_kiln_pow(d8, d8);

template <class V, int L>
void loop2(V (*fn)(V, V), const double* x, const double* x2, double* y, int n) {
  for (int i = 0; i < n; i += L) {
    V a, b;
    __builtin_memcpy(&a, x + i, sizeof a);
    __builtin_memcpy(&b, x2 + i, sizeof b);
    V r = fn(a, b);
    __builtin_memcpy(y + i, &r, sizeof r);
  }
}

// The loops inlined into functions compiled for the ISA, as run_d and run_e: compiled without
// it, a caller passes 32- and 64-byte vectors on the stack, and the callee, which takes them in
// registers, computed pow of whatever the registers held (sessions 10-14's pow figures).
__attribute__((target("avx2,fma"))) void run2_d(bool kiln, const double* x, const double* x2,
                                                double* y, int n) {
  loop2<d4, 4>(kiln ? _ZGVdN4vv_kiln_pow : _ZGVdN4vv_pow, x, x2, y, n);
}

__attribute__((target("avx512f"))) void run2_e(bool kiln, const double* x, const double* x2,
                                               double* y, int n) {
  loop2<d8, 8>(kiln ? _ZGVeN8vv_kiln_pow : _ZGVeN8vv_pow, x, x2, y, n);
}

// pow(x, y), x in (0, 100], y in [-10, 10]. Arg: library (0 libmvec, 1 Kiln).
void BM_VectorPow(benchmark::State& state) {
  bool kiln = state.range(0) != 0;
  bool avx512 = use_avx512();
  const int n = 4096;
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> ux(1e-3, 100), uy(-10, 10);
  std::vector<double> x(n), x2(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = ux(g);
    x2[i] = uy(g);
  }
  for (auto _ : state) {
    if (avx512)
      run2_e(kiln, x.data(), x2.data(), y.data(), n);
    else
      run2_d(kiln, x.data(), x2.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(kiln ? "kiln_pow" : "pow") + (avx512 ? " AVX-512" : " AVX2"));
  state.counters["ns_per_elem"] =
      benchmark::Counter(double(n) * double(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

extern "C" void _ZGVdN4v_kiln_sincos(d4, d4*, d4*);
extern "C" void _ZGVeN8v_kiln_sincos(d8, d8*, d8*);

// sin and cos of each element: Kiln's two variants, or the joint one JIT kernels call in their
// place (codegen/cpu/llvm_printer.cpp's join_sincos; the same bits).
template <class V, int L>
void loop_sincos(V (*sin)(V), V (*cos)(V), void (*joint)(V, V*, V*), const double* x, double* s,
                 double* c, int n) {
  for (int i = 0; i < n; i += L) {
    V v, a, b;
    __builtin_memcpy(&v, x + i, sizeof v);
    if (joint) {
      joint(v, &a, &b);
    } else {
      a = sin(v);
      b = cos(v);
    }
    __builtin_memcpy(s + i, &a, sizeof a);
    __builtin_memcpy(c + i, &b, sizeof b);
  }
}

__attribute__((target("avx2,fma"))) void run_sincos_d(bool joint, const double* x, double* s,
                                                      double* c, int n) {
  loop_sincos<d4, 4>(_ZGVdN4v_kiln_sin, _ZGVdN4v_kiln_cos, joint ? _ZGVdN4v_kiln_sincos : nullptr,
                     x, s, c, n);
}

__attribute__((target("avx512f"))) void run_sincos_e(bool joint, const double* x, double* s,
                                                     double* c, int n) {
  loop_sincos<d8, 8>(_ZGVeN8v_kiln_sin, _ZGVeN8v_kiln_cos, joint ? _ZGVeN8v_kiln_sincos : nullptr,
                     x, s, c, n);
}

// Kiln's sin and cos of x in [-10, 10]: ns_per_elem for both. Arg: 0 two calls, 1 the joint one.
void BM_VectorSinCos(benchmark::State& state) {
  bool joint = state.range(0) != 0;
  bool avx512 = use_avx512();
  const int n = 4096;
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> u(-10, 10);
  std::vector<double> x(n), s(n), c(n);
  for (double& v : x) v = u(g);
  for (auto _ : state) {
    if (avx512)
      run_sincos_e(joint, x.data(), s.data(), c.data(), n);
    else
      run_sincos_d(joint, x.data(), s.data(), c.data(), n);
    benchmark::DoNotOptimize(s.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.SetLabel(std::string(joint ? "kiln_sincos" : "kiln_sin + kiln_cos") +
                 (avx512 ? " AVX-512" : " AVX2"));
  state.counters["ns_per_elem"] =
      benchmark::Counter(double(n) * double(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_VectorPow)->Arg(0)->Arg(1)->ArgName("kiln");
BENCHMARK(BM_VectorSinCos)->Arg(0)->Arg(1)->ArgName("joint");
BENCHMARK(BM_VectorMath)
    ->ArgsProduct(
        {{int(kiln::vm::MathFn::Exp), int(kiln::vm::MathFn::Expm1), int(kiln::vm::MathFn::Log),
          int(kiln::vm::MathFn::Log1p), int(kiln::vm::MathFn::Tanh), int(kiln::vm::MathFn::Sin),
          int(kiln::vm::MathFn::Cos), int(kiln::vm::MathFn::Tan), int(kiln::vm::MathFn::Atan),
          int(kiln::vm::MathFn::Asin), int(kiln::vm::MathFn::Acos)},
         {0, 1}})
    ->ArgNames({"fn", "kiln"});
