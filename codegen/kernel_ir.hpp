// The kernel IR: one fused group on one block, independent of the device. A kernel loops over a
// block of its rank-r iteration domain (extents given at run time) and evaluates, per element, a
// DAG of scalar values in SSA order; every shared node of the array graph is one value, computed
// once per element. Outputs store a value or fold it into per-block reduction partials.
//
// Row stage: an output marked `row` reduces along the innermost dim and is folded in a loop of
// its own over each row, before the rest of the kernel's loop over that row; its per-row result
// (the value its partial holds, then finished as the runtime finishes the reduction: a mean
// divided by the row length, a float32 sum rounded) is the value `VOp::Row` (index: the output)
// for every element of the row. So `X.T @ f(X @ b)` is one pass over X: each row is read twice,
// the second time from cache. Row outputs' values use no Row values (one level).
//
// Run-time arguments (the ABI every printer implements):
//   void kernel(const int64_t* I, const double* F, void* const* P)
//   I = [ext[0..r), then per leaf: base, stride[0..r), then per output: base, stride[0..r),
//        then one int64 per scalar parameter]
//   F = [one double per scalar parameter]
//   P = [one pointer per memory leaf, then one per output]
// A leaf or output element (i_0..i_{r-1}) of the block lives at base + sum_d i_d * stride_d.
// Random and iota leaves use that number as the element's flat index instead of an address.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/node.hpp"

namespace kiln::kir {

enum class LeafKind : uint8_t { Memory, Random, Iota };

struct Leaf {
  LeafKind kind = LeafKind::Memory;
  DType dtype = DType::Float64;
  // Innermost stride known when the kernel is built: 0 or 1 (vectorizable); -1: a run-time value.
  int inner_stride = -1;
  // Random leaves.
  RandomKind random = RandomKind::Uniform;
  int64_t stream = 0, low = 0, high = 0;
  int seed_param = -1;  // scalar parameter holding the seed
  int pointer = -1;     // Memory leaves: index into P
};

enum class VOp : uint8_t { Param, Leaf, Const, Unary, Binary, Select, Cast, Row };

struct Value {
  VOp op;
  DType type;
  int a = -1, b = -1, c = -1;  // operand values
  int index = -1;              // Param: parameter index; Leaf: leaf index; Row: output index
  uint8_t fn = 0;              // UnaryFn / BinaryFn
  double f = 0;                // Const of a float type (exact in the type)
  int64_t i = 0;               // Const of an integer type or bool (0 or 1)
};

struct Output {
  int value = -1;
  int index_value = -1;         // ArgMin/ArgMax: the int64 index of the element (a second partial)
  DType type = DType::Float64;  // element type stored (reductions: the accumulator type)
  bool reduce = false;
  ReduceFn fn = ReduceFn::Sum;
  uint32_t reduced_mask = 0;  // bit d set: domain dim d is reduced (its partial stride is 0)
  bool row = false;           // folded in the row stage (reduces along the innermost dim only)
};

struct Kernel {
  int rank = 0;
  std::vector<Leaf> leaves;
  std::vector<Value> values;
  std::vector<Output> outputs;
  std::vector<DType> params;  // scalar parameters (values in I and F)
  int num_pointers = 0;       // memory leaves

  // Offsets into I.
  int leaf_base(int leaf) const { return rank + leaf * (rank + 1); }
  int output_base(int out) const { return rank + (int(leaves.size()) + out) * (rank + 1); }
  int param_base() const { return rank + int(leaves.size() + outputs.size()) * (rank + 1); }
  int num_ints() const { return param_base() + int(params.size()); }
  // P slots: memory leaves, then one per output, then one index partial per arg output.
  int output_pointer(int out) const { return num_pointers + out; }
  int index_pointer(int out) const {
    int k = num_pointers + int(outputs.size());
    for (int o = 0; o < out; ++o) k += outputs[o].index_value >= 0 ? 1 : 0;
    return k;
  }
  int num_pointer_slots() const { return index_pointer(int(outputs.size())); }

  bool has_row_stage() const {
    for (const auto& o : outputs)
      if (o.row) return true;
    return false;
  }
  // Per value: whether the row stage's outputs (row) or the others' need it (their values, index
  // values and those values' operands).
  std::vector<bool> needed_by_stage(bool row) const;

  std::string str() const;  // text form (KILN_DEBUG=3), also the cache key's source
  uint64_t hash() const;
};

// The identity element a reduction partial starts from, as double or int64.
double reduce_identity_f(ReduceFn fn);
int64_t reduce_identity_i(ReduceFn fn, DType t);

}  // namespace kiln::kir
