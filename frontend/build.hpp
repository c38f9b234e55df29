// Helpers shared by the frontend's builder files (not part of the public API).
#pragma once
#include <string>
#include <vector>

#include "ir/node.hpp"
#include "kiln/kiln.hpp"
#include "support/checked.hpp"

namespace kiln::detail {

inline Context& ctx() { return Context::global(); }

// Validates a user block shape for `shape` and turns it into a chunk grid; empty or 0 = auto.
Chunks make_chunks(const std::string& op, const Shape& shape, const Shape& block);
// A Scalar node of the given dtype holding the float f (from_float) or the integer i, converted
// as a kernel's Cast converts (ir: convert_scalar).
NodeRef scalar_node(DType dtype, bool from_float, double f, int64_t i);
// A Python-style ("weak") scalar converted to dtype t for operation `op`. NEP 50: an integer that
// does not fit an integer dtype is a kiln::Error, not a silent wrap (int32_array + 2**40).
NodeRef scalar_node(const std::string& op, const Scalar& s, DType t);
NodeRef cast_node(const NodeRef& a, DType t);
NodeRef broadcast_node(const NodeRef& a, const Shape& shape, const Chunks& chunks);
// NumPy's broadcast of two shapes; throws kiln::Error naming op and both shapes.
Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b);
// Output chunks for an element-wise op over operands broadcast to `shape`: each dim takes the
// chunks of the first operand that spans it.
Chunks elementwise_chunks(const Shape& shape, const std::vector<NodeRef>& operands);
// A leaf view over a C-contiguous range of `shape`.
Attrs contiguous_view(const Shape& shape);
int normalize_axis(const std::string& op, int axis, int rank);
// Integer indices (Slice::index) selecting the flat position `flat` of an array of `shape`, in C
// order: one matrix of a stack when `shape` is its batch dims.
std::vector<Slice> index_slices(int64_t flat, const Shape& shape);
// A stack of matrices with batch dims `batch` is handled a matrix at a time (a node each): at
// most kMaxBlocks of them, or a kiln::Error naming op and the batch shape.
void check_stack(const std::string& op, const Shape& batch);

}  // namespace kiln::detail
