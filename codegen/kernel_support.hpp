// Functions kernels call on the host, shared by every host backend so that each computes the
// same values and raises the same errors: the LLVM kernels call them by symbol, the interpreter
// directly.
#pragma once
#include <cstdint>
#include <string>

// Integer power, wrapping modulo 2^64 like NumPy's (the result is truncated to int32 for int32
// operands). A negative exponent returns 0 and records the error for take_kernel_error().
extern "C" int64_t kiln_ipow(int64_t base, int64_t exp);

// standard_normal of support/philox.hpp: the normal generator's rare path, which LLVM kernels
// call for the elements their vectorized ziggurat fast path rejects.
extern "C" double kiln_normal_slow(uint64_t seed, uint64_t stream, uint64_t i);

namespace kiln::kir {

// The run-time error the kernels run on this thread since the last call raised, or "" (then
// nothing happened). Clears it. Backends call it after each launch and throw it as kiln::Error.
std::string take_kernel_error();
// Its text for a negative integer power (also raised by device kernels through their status).
const char* negative_power_message();

}  // namespace kiln::kir
