#include "frontend/build.hpp"

#include <algorithm>

namespace kiln::detail {

namespace {
constexpr int kMaxRank = 32;  // NumPy's limit; kernels index dims in 32 bits

// The block grid of a chunking, refusing grids too large to plan and blocks too large to run.
// Checked arithmetic throughout: a dimension near 2^63 must not wrap a block count (a .npy of
// shape (0, 2^63 - 1) once did, and planned 2^41 chunks forever).
Chunks checked_grid(const std::string& op, const Shape& shape, const Shape& block) {
  int64_t blocks = 1;
  Shape largest(shape.size());  // the largest block
  for (size_t k = 0; k < shape.size(); ++k) {
    largest[k] = block[k] > 0 ? std::min(block[k], shape[k]) : shape[k];
    int64_t n = largest[k] > 0 ? checked::ceil_div(shape[k], largest[k]) : 1;
    auto more = checked::mul(blocks, n);
    if (!more || *more > kMaxBlocks)
      throw Error(op + ": chunks " + shape_str(block) + " split shape " + shape_str(shape) +
                  " into more than " + std::to_string(kMaxBlocks) + " blocks; use larger chunks");
    blocks = *more;
  }
  auto elements = checked::product(largest);
  if (!elements || *elements > kMaxBlockElements)
    throw Error(
        op + ": chunks " + shape_str(block) + " of shape " + shape_str(shape) + " make blocks of " +
        (elements ? count_str(*elements) : "more than 2^63") +
        " elements, more than one block may hold (2^34 = " + std::to_string(kMaxBlockElements) +
        "): each block is one task on one core, which would run for hours (or years); "
        "use smaller chunks, or none (automatic blocks of about 4 million elements)");
  return regular_chunks(shape, block);
}
}  // namespace

Chunks make_chunks(const std::string& op, const Shape& shape, const Shape& block) {
  if (static_cast<int>(shape.size()) > kMaxRank)
    throw Error(op + ": arrays of rank " + std::to_string(shape.size()) +
                " are not supported (at most " + std::to_string(kMaxRank) + " dimensions)");
  for (int64_t d : shape) {
    if (d < 0) throw Error(op + ": negative dimension in shape " + shape_str(shape));
    if (d > kMaxElements)
      throw Error(op + ": dimension " + std::to_string(d) + " of shape " + shape_str(shape) +
                  " is larger than Kiln can index (at most 2^62)");
  }
  auto elements = checked::product(shape);
  if (!elements || *elements > kMaxElements)
    throw Error(op + ": shape " + shape_str(shape) +
                " has more elements than Kiln can index (at most 2^62)");
  if (block.empty()) {
    // Auto: blocks of at most 2^22 elements, splitting the leading dims first; an empty array is
    // one block (nothing to split).
    Shape b(shape.size(), 0);
    if (*elements == 0) return checked_grid(op, shape, b);
    int64_t budget = int64_t{1} << 22;
    for (size_t k = shape.size(); k-- > 0;) {
      int64_t ext = std::max<int64_t>(shape[k], 1);
      b[k] = std::max<int64_t>(1, std::min(ext, budget));
      budget = std::max<int64_t>(1, budget / ext);
    }
    return checked_grid(op, shape, b);
  }
  if (block.size() != shape.size())
    throw Error(op + ": chunks " + shape_str(block) + " has " + std::to_string(block.size()) +
                " entries but the shape " + shape_str(shape) + " has rank " +
                std::to_string(shape.size()));
  for (int64_t b : block)
    if (b < 0)
      throw Error(op + ": chunk sizes must be positive (0 = whole dimension), got " +
                  shape_str(block));
  return checked_grid(op, shape, block);
}

NodeRef scalar_node(DType dtype, bool from_float, double f, int64_t i) {
  ScalarBits v = convert_scalar(from_float, f, i, dtype);
  Attrs a;
  a.f = v.f;
  a.i = v.i;
  return ctx().make(Op::Scalar, dtype, {}, {}, {}, std::move(a));
}

// A Python-style ("weak") scalar converted to the array's dtype t. NEP 50: an integer that does
// not fit an integer dtype is an error, not a silent wrap (int32_array + 2**40).
NodeRef scalar_node(const std::string& op, const Scalar& s, DType t) {
  if (s.kind == ScalarKind::Int && is_int(t)) {
    bool fits = !s.beyond_int64 && (t != DType::Int32 || (s.i >= INT32_MIN && s.i <= INT32_MAX));
    if (!fits)
      throw Error(op + ": the integer scalar " +
                  (s.beyond_int64 ? std::string("above 2^63 - 1") : std::to_string(s.i)) +
                  " is out of bounds for " + dtype_name(t) +
                  " (NEP 50); convert the array first, " + "e.g. astype(int64) or astype(float64)");
  }
  // A Python int meets a float dtype as NumPy converts it: through a double (s.f).
  return scalar_node(t, s.kind == ScalarKind::Float || is_float(t), s.f, s.i);
}

const Attrs kNoAttrs;  // for Context::intern of the ops without attributes

NodeRef cast_node(const NodeRef& a, DType t) {
  if (a->dtype == t) return a;
  if (a->op == Op::Scalar) return scalar_node(t, is_float(a->dtype), a->attrs.f, a->attrs.i);
  return ctx().intern({Op::Cast, t, a->shape, a->chunks, &a, 1, kNoAttrs});
}

NodeRef broadcast_node(const NodeRef& a, const Shape& shape, const Chunks& chunks) {
  if (a->shape == shape) return a;
  return ctx().intern({Op::Broadcast, a->dtype, shape, chunks, &a, 1, kNoAttrs});
}

Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1)
      throw Error(op + ": operands could not be broadcast together with shapes " + shape_str(a) +
                  " " + shape_str(b));
    out[k] = da == 1 ? db : da;
  }
  auto elements = checked::product(out);
  if (!elements || *elements > kMaxElements)
    throw Error(op + ": shapes " + shape_str(a) + " and " + shape_str(b) + " broadcast to " +
                shape_str(out) + ", which has more elements than Kiln can index (at most 2^62)");
  return out;
}

Chunks elementwise_chunks(const Shape& shape, const std::vector<NodeRef>& operands) {
  Chunks out(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    for (const auto& op : operands) {
      size_t r = op->shape.size();
      if (k + r < shape.size()) continue;
      size_t j = k + r - shape.size();
      if (op->shape[j] == shape[k]) {
        out[k] = op->chunks[j];
        break;
      }
    }
    if (out[k].empty()) out[k] = {shape[k]};
  }
  return out;
}

Attrs contiguous_view(const Shape& shape) {
  Attrs a;
  a.offset = 0;
  a.strides = c_strides(shape);
  return a;
}

int normalize_axis(const std::string& op, int axis, int rank) {
  if (axis < -rank || axis >= rank)
    throw Error(op + ": axis " + std::to_string(axis) + " is out of bounds for an array of rank " +
                std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void check_stack(const std::string& op, const Shape& batch) {
  auto count = checked::product(batch);
  if (!count || *count > kMaxBlocks)
    throw Error(op + ": a stack of " + (count ? count_str(*count) : std::string("over 2^63")) +
                " matrices (batch shape " + shape_str(batch) +
                "); Kiln builds a call per matrix and takes at most " + std::to_string(kMaxBlocks) +
                " of them");
}

std::vector<Slice> index_slices(int64_t flat, const Shape& shape) {
  std::vector<Slice> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = Slice::index(flat % shape[d]);
    flat /= shape[d];
  }
  return idx;
}

}  // namespace kiln::detail
