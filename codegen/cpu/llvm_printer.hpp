// Kernel IR -> LLVM IR (one function per kernel). Used only by codegen/cpu/jit.cpp.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"
#include "codegen/vector_math.hpp"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace kiln::cpu {

// Part of every kernel cache key: bump it whenever the printed code changes for the same kernel
// IR, so objects cached on disk by an older printer are not reused.
constexpr int kPrinterVersion = 30;

// How transcendental functions are called: codegen/vector_math.hpp. Scalar code calls a wrapper
// that evaluates the one libmvec variant on a splat, and the vectorized loop calls the variant
// directly, so an element's value never depends on whether it fell in the vector body or the
// remainder (that is, on chunking or fusion).
using vm::MathMode;

// The names the vectorizer may map: wrapper name -> (vector function, lanes, VFABI prefix).
struct VectorMapping {
  std::string scalar, vector, abi;
  unsigned lanes;
};
std::vector<VectorMapping> vector_mappings(const MathMode& mode);

// After the vectorizer: each pair of calls of Kiln's vector sin and cos variants on one operand in
// one basic block becomes one call of the joint variant (_ZGVeN8v_kiln_sincos: the same bits,
// one call's work shared; codegen/math/kiln_math.inc). Returns the number of pairs joined.
int join_sincos(llvm::Module& m);

// What the target's tuning asks of loops, beyond its ISA (jit.cpp reads it from LLVM's target).
struct Tuning {
  // Vector bytes of the loops that stream memory through a body without vector math (see
  // Printer::stream_hints); 0: as wide as the target's vectors.
  int stream_vector_bytes = 0;
};

llvm::Function* print_llvm(const kir::Kernel& k, llvm::Module& m, const std::string& name,
                           const MathMode& mode, const Tuning& tuning);
}  // namespace kiln::cpu
