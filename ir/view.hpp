// Affine index maps. A leaf (Buffer, Random, Iota) reads element (i_0, ..., i_{r-1}) at
// offset + sum_d i_d * strides[d] of its underlying storage or flat index space. Slicing,
// transposing, broadcasting and most reshapes only change that map, so they compose into it.
#pragma once
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
