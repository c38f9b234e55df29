// Kiln's own transcendental functions (kiln_math.inc): the same bits on every CPU vector ISA,
// the host scalar code and GPUs. codegen/vector_math.hpp chooses them (MathMode::kiln) or
// libmvec's or glibc's; the CUDA printer prints their source into every kernel. sin, cos, tan,
// atan, asin, acos and pow too.
#pragma once
#include <string>
#include <utility>
#include <vector>

extern "C" {
double kiln_exp(double x);
double kiln_expm1(double x);
double kiln_log(double x);
double kiln_log1p(double x);
double kiln_tanh(double x);
double kiln_sin(double x);
double kiln_cos(double x);
double kiln_tan(double x);
double kiln_atan(double x);
double kiln_asin(double x);
double kiln_acos(double x);
double kiln_pow(double x, double y);
}

namespace kiln::kmath {

// kiln_math.inc's text, for printers of other languages (CUDA).
const char* source();

// The vector variants' names and addresses (_ZGVeN8v_kiln_exp, ...), for the JIT's symbol table.
std::vector<std::pair<std::string, void*>> vector_symbols();

}  // namespace kiln::kmath
