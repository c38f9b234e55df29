// The CPU backend: prints kernel IR as LLVM IR, optimizes it for the host (O3, loop
// vectorization with glibc's libmvec for sin/cos/exp/log/...), compiles it to an object file
// and links it into an ORC LLJIT. Objects are cached on disk by kernel hash + target + LLVM
// version, so a second run of the same program compiles nothing. LLVM headers stay in the .cpp.
#pragma once
#include <cstdint>
#include <string>

#include "codegen/kernel_ir.hpp"

namespace kiln::cpu {

using KernelFn = void (*)(const int64_t* I, const double* F, void* const* P);

struct CompileStats {
  int64_t compiled = 0;        // kernels optimized and code-generated in this process
  int64_t disk_hits = 0;       // kernels loaded from the on-disk object cache
  double compile_seconds = 0;  // time spent in both
};

struct Dumps {
  std::string llvm_ir;       // as printed (KILN_DEBUG=4)
  std::string optimized_ir;  // after O3 (KILN_DEBUG=5)
};

// Compiles (or loads from the disk cache) a kernel and returns its entry point. Thread-safe.
// Throws kiln::Error if compilation fails or KILN_NO_COMPILE is set.
KernelFn compile(const kir::Kernel& k, Dumps* dumps = nullptr);

CompileStats compile_stats();

// The run-time error the kernels run on this thread since the last call raised, or "" (then
// nothing happened): an integer raised to a negative integer power. Clears it. The runtime calls
// this after every kernel call and throws the message as a kiln::Error.
std::string take_kernel_error();
// Target description used in cache keys: CPU name, features and LLVM version.
const std::string& target_id();
// For people: the CPU name and the vector math ISA (kiln::compile_target()).
std::string target_summary();

}  // namespace kiln::cpu
