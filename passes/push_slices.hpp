// push_slices: moves every view (slice, transpose, broadcast, reshape, rechunk) down through
// element-wise ops until it reaches a leaf, where it composes into the leaf's index map. After
// it, a random generator, iota or buffer produces/reads only the elements the expression uses:
// (x + 1)[::2, ::2] becomes x'[...] + 1 with x' a generator over the kept quarter.
// Guarantees: views remain only above nodes that are materialized anyway (reductions,
// concatenations) or where a reshape is not expressible as strides over its input.
#pragma once
#include "ir/graph.hpp"

namespace kiln {
Graph push_slices(const Graph& g);
}
