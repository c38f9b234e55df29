// Kernel IR -> LLVM IR (one function per kernel). Used only by codegen/cpu/jit.cpp.
#pragma once
#include <string>

#include "codegen/kernel_ir.hpp"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace kiln::cpu {

// Part of every kernel cache key: bump it whenever the printed code changes for the same kernel
// IR, so objects cached on disk by an older printer are not reused.
constexpr int kPrinterVersion = 4;

llvm::Function* print_llvm(const kir::Kernel& k, llvm::Module& m, const std::string& name);
}  // namespace kiln::cpu
