// A seeded generator of random, well-typed array expressions for differential fuzzing of Kiln
// against NumPy. Each expression is built twice at the same time: as a kiln::Array and as the
// equivalent NumPy source text over the same named inputs (x0..x3), plus a C++ description of the
// Kiln calls so that a mismatch can be replayed by hand.
//
// The generator only emits expressions on which Kiln and NumPy 2 must agree. Where they may
// legitimately differ it either avoids the case or rewrites the NumPy side (all documented in
// expr_gen.cpp):
//   - weak scalars (NEP 50 on both sides): literals are small, now and then wide (up to the
//     limits of their type, floats to 1e+-300); 0-d operands are written so that NumPy 1.x's
//     value-based casting would promote them as Kiln does too;
//   - float -> int conversion of NaN/inf/out-of-range values is never generated; integer + - * //
//     may overflow (both wrap);
//   - transcendental functions (Kiln's or libmvec's, within 4 ulp) and reassociated float
//   reductions are
//     compared within a propagated error bound, and no discontinuous operation (comparison,
//     floor, astype(int), argmax, ...) is applied to such inexact values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kfuzz {

using kiln::DType;
using kiln::NDArray;
using kiln::Shape;

// One named input: host data wrapped zero-copy by from_buffer with the given block shape.
// One named input. NumPy always reads `data`; Kiln's side comes from one of three sources: host
// memory wrapped zero-copy by from_buffer, a memory-mapped .npy file of the same data (load_npy),
// or a lazy random generator whose values `data` holds (computed separately, unfused, one
// thread, whole-array chunks: the lazy one must equal it bit for bit under any slicing, chunking
// and fusion, DESIGN invariant 4).
struct Input {
  std::string name;  // x0 .. x3 (the variable name on both sides)
  NDArray data;
  Shape block;  // the block shape (0 in a dim: the whole dim)
  kiln::Array array;
  std::string source = "from_buffer";  // or the load_npy / random::Generator call, in C++
  std::string file;                    // the .npy file load_npy maps (removed with the Case)
};

// An expression built for Kiln and NumPy side by side, with what the generator knows about its
// values (used to keep later operations well defined and to pick the comparison tolerance).
struct Expr {
  kiln::Array k;
  std::string np;   // NumPy source over the inputs and `np`
  std::string cpp;  // the same expression written with Kiln's C++ API
  DType dtype = DType::Float64;
  Shape shape;
  double lo = 0, hi = 0;   // bounds of the finite values (may be +-inf when unknown)
  bool nonfinite = false;  // may hold NaN or +-inf
  bool exact = true;       // every float op so far is correctly rounded: bit-equal to NumPy
  bool integral = true;    // every finite value is an integer (exact sums/products)
  double scale = 0;        // bound on |value| of every intermediate in the subtree
  bool loose = false;      // an inexact float32 value feeds it (float32 rounding upstream)
  // Bound on |kiln - numpy| for a finite element whose NumPy value is w:
  //   err + rel * |w| + min(sqrt(inv), inv / |w|)
  // propagated op by op from the operands' ranges and error bounds (all 0 when exact). Each op
  // adds its own rounding relative to its result (ulps of the value actually computed) and
  // passes its operands' errors on: relative through products, quotients, exp and log,
  // absolute through sums and Lipschitz bounds; `inv` is a square root's (std's) error, |dV| /
  // (sqrt(V) + sqrt(V')). The test compares inexact values within it (Tolerance::at); an op
  // whose bound would be unbounded is not generated.
  double err = 0, rel = 0, inv = 0;
  // The bound as one absolute number over the whole range (what an operand passes on).
  double total_err() const;
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct Case {
  uint64_t seed = 0;
  int64_t index = 0;
  bool avoid_known_bugs = false;  // the Options flag it was generated with (for the replay line)
  std::vector<Input> inputs;
  std::vector<Expr> roots;  // computed together by one kiln::compute call
  // kiln::Error thrown while building an operation that NumPy accepts (a Kiln bug, or a
  // generator bug: either way a finding).
  std::vector<std::string> kiln_errors;
  // Inputs (values when small), every root in C++ and NumPy: enough to replay.
  std::string describe() const;
};

struct Options {
  int max_depth = 5;
  int max_roots = 3;
  int64_t max_elements = 20000;  // per intermediate array (one case in 20: 250000)
  std::string file_dir;          // where load_npy inputs are written ("" : no load_npy inputs)
  // Steer around Kiln bugs found by the fuzzer that are not fixed yet, so that the fixed CI slice
  // stays useful (campaigns leave this off). Currently: argmin/argmax(axis=None, keepdims=True) of
  // a 0-d array (Kiln returns shape (1,), NumPy ()): generated with keepdims=False instead.
  bool avoid_known_bugs = false;
};

// Case `index` of the campaign with this seed: a pure function of (seed, index, options).
Case generate(uint64_t seed, int64_t index, const Options& options = {});

// Formatting helpers shared with the test.
std::string shape_py(const Shape& s);
std::string dtype_py(DType t);

}  // namespace kfuzz
