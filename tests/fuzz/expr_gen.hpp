// A seeded generator of random, well-typed array expressions for differential fuzzing of Kiln
// against NumPy. Each expression is built twice at the same time: as a kiln::Array and as the
// equivalent NumPy source text over the same named inputs (x0..x3), plus a C++ description of the
// Kiln calls so that a mismatch can be replayed by hand.
//
// The generator only emits expressions on which Kiln and NumPy 1.24 must agree. Where they may
// legitimately differ it either avoids the case or rewrites the NumPy side (all documented in
// expr_gen.cpp):
//   - weak scalars: Kiln follows NEP 50, NumPy 1.24 value-based casting. Python literals stay small
//     (no int32 overflow, float literals representable in float16 range), and where NumPy 1.24
//     would treat a 0-d array or a NumPy scalar as "weak" the NumPy text makes the types explicit;
//   - float -> int conversion of NaN/inf/out-of-range values is never generated;
//   - transcendental functions (libmvec, within 4 ulp) and reassociated float reductions are
//     compared with a tolerance, and no discontinuous operation (comparison, floor, astype(int),
//     argmax, ...) is applied to such inexact values.
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
struct Input {
  std::string name;  // x0 .. x3 (the variable name on both sides)
  NDArray data;
  Shape block;  // from_buffer's block shape (0 in a dim: the whole dim)
  kiln::Array array;
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
  bool loose = false;      // an inexact float32 value feeds it: float32 tolerance
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
  int64_t max_elements = 20000;  // per intermediate array
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
