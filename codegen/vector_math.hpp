// Transcendental functions as kernels compute them, one list for every host backend. Unless
// precise, a kernel evaluates them with one libmvec variant (glibc's vector math library) of
// `lanes` doubles (2, 4 or 8; floats use twice as many) and ISA letter `isa` ('b' SSE4, 'd' AVX2,
// 'e' AVX-512), the same for every element: LLVM kernels call it from their vector loops and on
// a splat in scalar code, and apply() calls it here. Each lane's value depends only on that
// lane's input, so the values do not depend on chunking, fusion or the backend. Precise: glibc's
// scalar functions (sin, sinf, ...).
#pragma once
#include <cstdint>

#include "ir/node.hpp"

namespace kiln::vm {

struct MathMode {
  bool precise = false;
  char isa = 'd';
  int lanes = 4;
};

enum class MathFn : uint8_t { Sin, Cos, Tan, Exp, Log, Expm1, Log1p, Tanh, Asin, Acos, Atan, Pow };
inline constexpr int kNumMathFns = 12;

// For people: "SSE4", "AVX2", "AVX-512" for the ISA letters 'b', 'd', 'e'.
const char* isa_name(char isa);

const char* libm_name(MathFn f);  // glibc's double-precision name: "sin", ..., "pow"
inline int arity(MathFn f) { return f == MathFn::Pow ? 2 : 1; }
// The function a transcendental UnaryFn evaluates (Sigmoid: Exp of -x); throws InternalError
// for the others.
MathFn math_fn(UnaryFn f);

// y[i] = f(x[i]) (or f(x[i], x2[i]) for Pow) for i < n, as a kernel in `mode` computes it.
// Throws kiln::Error if `mode` names an ISA this CPU lacks.
void apply(MathFn f, const MathMode& mode, const double* x, const double* x2, double* y, int64_t n);
void apply(MathFn f, const MathMode& mode, const float* x, const float* x2, float* y, int64_t n);

}  // namespace kiln::vm
