// Transcendental functions as kernels compute them, one list for every host backend. Unless
// precise, a kernel evaluates them with one vector variant of `lanes` doubles (2, 4 or 8; floats
// use twice as many) and ISA letter `isa` ('b' SSE4, 'd' AVX2, 'e' AVX-512), the same for every
// element: LLVM kernels call it from their vector loops and on a splat in scalar code, and
// apply() calls it here. Each lane's value depends only on that lane's input, so the values do
// not depend on chunking, fusion or the backend. The variants: Kiln's own functions (the default;
// codegen/math), whose values are also the same on every ISA and in GPU kernels, or glibc's
// libmvec (KILN_MATH=libmvec), whose values differ between ISAs by a few ulp. Precise: glibc's
// scalar functions (sin, sinf, ...).
#pragma once
#include <cstdint>

#include "ir/node.hpp"

namespace kiln::vm {

struct MathMode {
  bool precise = false;
  char isa = 'd';
  int lanes = 4;
  bool kiln = true;  // Kiln's own functions where it has them (codegen/math), else libmvec's
};

enum class MathFn : uint8_t { Sin, Cos, Tan, Exp, Log, Expm1, Log1p, Tanh, Asin, Acos, Atan, Pow };
inline constexpr int kNumMathFns = 12;

// For people: "SSE4", "AVX2", "AVX-512" for the ISA letters 'b', 'd', 'e'.
const char* isa_name(char isa);

const char* libm_name(MathFn f);  // glibc's double-precision name: "sin", ..., "pow"
// Whether Kiln has its own f (codegen/math/kiln_math.inc): all of them now.
bool kiln_has(MathFn f);
// Whether `mode` evaluates f with Kiln's function (kiln, not precise, and Kiln has it).
inline bool uses_kiln(MathFn f, const MathMode& mode) {
  return mode.kiln && !mode.precise && kiln_has(f);
}
// Whether KILN_MATH (flags().math) leaves Kiln's functions on: "" and "kiln" do, "libmvec" asks
// for glibc's; any other value is a kiln::Error naming the choices.
bool kiln_math_selected();
// The double-precision name kernels call f by in `mode`: "kiln_exp" where uses_kiln, else libm's.
std::string call_name(MathFn f, const MathMode& mode);
inline int arity(MathFn f) { return f == MathFn::Pow ? 2 : 1; }
// The function a transcendental UnaryFn evaluates (Sigmoid: Exp of -x); throws InternalError
// for the others.
MathFn math_fn(UnaryFn f);

// y[i] = f(x[i]) (or f(x[i], x2[i]) for Pow) for i < n, as a kernel in `mode` computes it.
// Throws kiln::Error if `mode` names an ISA this CPU lacks.
void apply(MathFn f, const MathMode& mode, const double* x, const double* x2, double* y, int64_t n);
void apply(MathFn f, const MathMode& mode, const float* x, const float* x2, float* y, int64_t n);

}  // namespace kiln::vm
