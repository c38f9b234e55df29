#include "codegen/kernel_support.hpp"

#include "support/philox.hpp"

namespace {
// Set by a kernel on this thread that raised an integer to a negative power (NumPy: ValueError).
thread_local bool t_negative_int_power = false;
}  // namespace

extern "C" int64_t kiln_ipow(int64_t base, int64_t exp) {
  if (exp < 0) {
    t_negative_int_power = true;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  auto e = static_cast<uint64_t>(exp);
  while (e) {  // wraps modulo 2^64 like NumPy's integer power
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

// 0.43% of normals take this path: the mean of 1 - X[l + 1] / X[l] over the ziggurat's layers.
// Its log and exp make 27 std::fma between them, which the baseline x86-64 build calls in libm; a
// clone built for FMA hosts (everything it calls inlined into it) makes them instructions (the same
// correctly rounded value). Not under the sanitizers: ThreadSanitizer's build crashed in the
// clones' ifunc resolver, which runs before its runtime is set up.
extern "C"
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    __attribute__((target_clones("fma", "default"), flatten))
#endif
    double
    kiln_normal_slow(uint64_t seed, uint64_t stream, uint64_t i) {
  return kiln::philox::standard_normal(seed, static_cast<uint32_t>(stream), i);
}

namespace kiln::kir {

std::string take_kernel_error() {
  if (!t_negative_int_power) return "";
  t_negative_int_power = false;
  return negative_power_message();
}

const char* negative_power_message() {
  return "power: integers to negative integer powers are not allowed (an element of the integer "
         "exponent array is negative; use a float base or exponent)";
}

}  // namespace kiln::kir
