// The vocabulary the public API shares with the IR: shapes and chunk grids, the element
// functions, reductions and random distributions (declared in ufuncs.def, reduce.def,
// random.def) and their names and result kinds. kiln/kiln.hpp includes this, not ir/node.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
namespace kiln {

using Shape = std::vector<int64_t>;
using Chunks = std::vector<std::vector<int64_t>>;  // per dim, the block sizes (sum = extent)

int64_t num_elements(const Shape& s);

enum class UnaryFn : uint8_t {
#define KILN_UNARY(name, np, result) name,
#include "ufuncs.def"
#undef KILN_UNARY
};
enum class BinaryFn : uint8_t {
#define KILN_BINARY(name, np, result) name,
#include "ufuncs.def"
#undef KILN_BINARY
};
enum class ReduceFn : uint8_t {
#define KILN_REDUCE(name, np) name,
#include "reduce.def"
#undef KILN_REDUCE
};
enum class RandomKind : uint8_t {
#define KILN_RANDOM(name, np) name,
#include "random.def"
#undef KILN_RANDOM
};
// Who makes a Random leaf's elements. Kiln: its Philox4x32-10 stream and ziggurat, computed inside
// the kernels that read them, the same bits on every device. Curand: NVIDIA cuRAND's
// Philox4_32_10 generator (normal: Box-Muller; uniform: (0, 1]), a library call that fills the
// whole array (on the GPU with the device generator, elsewhere with cuRAND's host generator).
enum class RandomEngine : uint8_t { Kiln, Curand };

// How many there are (for loops over every function).
inline constexpr int kNumUnaryFns = 0
#define KILN_UNARY(name, np, result) +1
#include "ufuncs.def"
#undef KILN_UNARY
    ;
inline constexpr int kNumBinaryFns = 0
#define KILN_BINARY(name, np, result) +1
#include "ufuncs.def"
#undef KILN_BINARY
    ;
inline constexpr int kNumReduceFns = 0
#define KILN_REDUCE(name, np) +1
#include "reduce.def"
#undef KILN_REDUCE
    ;

// The Result column of ufuncs.def.
enum class UnaryResult : uint8_t { Same, Float, Math, Bool };
enum class BinaryResult : uint8_t { Promoted, Float, Compare, Logical };

const char* unary_name(UnaryFn f);  // NumPy's name: "negative", "sqrt", ...
const char* binary_name(BinaryFn f);
const char* reduce_name(ReduceFn f);
const char* random_name(RandomKind k);
UnaryResult unary_result(UnaryFn f);
BinaryResult binary_result(BinaryFn f);
inline bool is_comparison(BinaryFn f) { return binary_result(f) == BinaryResult::Compare; }
// The functions kernels compute with vector math (libmvec, or glibc's scalar libm in precise
// mode): float-valued, and several times the cost of an arithmetic op.
inline bool is_transcendental(UnaryFn f) { return unary_result(f) == UnaryResult::Math; }

}  // namespace kiln
#pragma GCC visibility pop
