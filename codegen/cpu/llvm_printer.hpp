// Kernel IR -> LLVM IR (one function per kernel). Used only by codegen/cpu/jit.cpp.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace kiln::cpu {

// Part of every kernel cache key: bump it whenever the printed code changes for the same kernel
// IR, so objects cached on disk by an older printer are not reused.
constexpr int kPrinterVersion = 17;

// How transcendental functions (sin, cos, tan, exp, log, expm1, log1p, tanh, asin, acos, atan,
// pow) are called. Precise: glibc's scalar functions. Otherwise one libmvec
// variant of `lanes` doubles (2, 4 or 8; floats use twice as many) with ISA letter `isa`
// ('b' SSE, 'd' AVX2, 'e' AVX-512): the vectorized loop calls it directly, and scalar code calls a
// wrapper that evaluates the same variant on a splat, so an element's value never depends on
// whether it fell in the vector body or the remainder (that is, on chunking or fusion).
struct MathMode {
  bool precise = false;
  char isa = 'd';
  int lanes = 4;
};

// The names the vectorizer may map: wrapper name -> (vector function, lanes, VFABI prefix).
struct VectorMapping {
  std::string scalar, vector, abi;
  unsigned lanes;
};
std::vector<VectorMapping> vector_mappings(const MathMode& mode);

llvm::Function* print_llvm(const kir::Kernel& k, llvm::Module& m, const std::string& name,
                           const MathMode& mode);
}  // namespace kiln::cpu
