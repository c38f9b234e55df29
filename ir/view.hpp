// Affine index maps. A leaf (Buffer, Random, Iota) reads element (i_0, ..., i_{r-1}) at
// offset + sum_d i_d * strides[d] of its underlying storage or flat index space. Slicing,
// transposing, broadcasting and most reshapes only change that map, so they compose into it.
#pragma once
#include <functional>
#include <optional>

#include "ir/node.hpp"

namespace kiln {

struct AffineMap {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// The map of view node `v` (Slice, Broadcast, Transpose, Reshape, Rechunk) given the map of its
// input. nullopt when a reshape cannot be expressed as strides over the input's map.
std::optional<AffineMap> compose_view(const Node& v, const AffineMap& input);

// Strides for reshaping an array with `strides` over `shape` into `new_shape` without copying,
// or nullopt when the elements are not laid out compatibly.
std::optional<std::vector<int64_t>> reshape_strides(const Shape& shape,
                                                    const std::vector<int64_t>& strides,
                                                    const Shape& new_shape);

inline bool is_view(Op op) { return op_category(op) == OpCategory::View; }
inline bool is_strided_leaf(Op op) {
  return op == Op::Buffer || op == Op::Random || op == Op::Iota;
}

}  // namespace kiln

namespace kiln {

// Where a view chain ends: `n` itself when `materialized(n)` or it is a strided leaf, else the
// base below its views, with the composed map over the base's storage (a materialized base is
// read C-contiguously). nullopt when a view does not compose (a reshape of a non-contiguous view)
// or the chain ends at a computed array. Used for operands that library calls read in place.
struct ViewBase {
  const Node* base = nullptr;
  bool materialized = false;
  AffineMap map;
};
std::optional<ViewBase> resolve_view_base(const Node& n,
                                          const std::function<bool(const Node*)>& materialized);

// How BLAS reads a rows x cols matrix stored under `m` (element offset, then strides per dim):
// row-major with leading dimension ld, or (transposed) the row-major cols x rows matrix, i.e. its
// columns are contiguous. nullopt when neither dim has unit stride, a stride is negative, or a
// non-trivial dim is broadcast (stride 0). Sub-blocks keep ld.
struct MatrixLayout {
  int64_t offset = 0;
  int64_t row_stride = 0, col_stride = 0;  // of the logical rows x cols matrix, in elements
  bool transposed = false;
  int64_t ld = 1;
};
std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, const AffineMap& m);

}  // namespace kiln
