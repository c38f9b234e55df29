// The CPU backend: prints kernel IR as LLVM IR, optimizes it for the host (O3, loop
// vectorization with glibc's libmvec for sin/cos/exp/log/...), compiles it to an object file
// and links it into an ORC LLJIT. Objects are cached on disk by kernel hash + target + LLVM
// version, so a second run of the same program compiles nothing. LLVM headers stay in the .cpp.
// The runtime reaches it only through codegen/backend.hpp (make_backend).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/backend.hpp"
#include "codegen/vector_math.hpp"

namespace kiln::cpu {

using KernelFn = void (*)(const int64_t* I, const double* F, void* const* P);

// Compiles (or loads from the disk cache) a kernel and returns its entry point. Thread-safe.
// Throws kiln::Error if compilation fails or KILN_NO_COMPILE is set. `dumps`: the LLVM IR as
// printed and after O3.
KernelFn compile(const kir::Kernel& k, backend::KernelDumps* dumps = nullptr);

backend::CompileStats compile_stats();

// Target description used in cache keys: CPU name, features and LLVM version.
const std::string& target_id();
// For people: the CPU name and the vector math ISA (kiln::compile_target()).
std::string target_summary();
// The vector math kernels are compiled with (the target's widest libmvec ISA; precise as
// KILN_PRECISE_MATH says now). Starts the JIT.
vm::MathMode math_mode();

std::unique_ptr<backend::Backend> make_backend();

}  // namespace kiln::cpu
