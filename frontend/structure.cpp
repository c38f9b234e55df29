// Structure: slicing, transpose, reshape, rechunk, broadcast_to, concatenate, stack. These only
// re-index; the passes push them into the leaves so no element is produced that is not needed.
#include <algorithm>
#include <numeric>

#include "frontend/build.hpp"

namespace kiln {
using namespace detail;

namespace {

// NumPy's slice normalisation (start/stop clamped, defaults by step sign); returns the count.
int64_t normalize_slice(const Slice& s, int64_t n, int64_t* start) {
  int64_t step = s.step;
  int64_t b, e;
  if (step > 0) {
    b = s.start ? *s.start : 0;
    e = s.stop ? *s.stop : n;
    if (b < 0) b = std::max<int64_t>(b + n, 0);
    if (e < 0) e = std::max<int64_t>(e + n, 0);
    b = std::min(b, n);
    e = std::min(e, n);
    *start = b;
    return e > b ? checked::ceil_div(e - b, step) : 0;  // (e - b + step - 1) wrapped near 2^63
  }
  b = s.start ? *s.start : n - 1;
  e = s.stop ? *s.stop : -n - 1;
  if (b < 0) b = std::max<int64_t>(b + n, -1);
  if (e < 0) e = std::max<int64_t>(e + n, -1);
  b = std::min(b, n - 1);
  e = std::min(e, n - 1);
  *start = b;
  if (b <= e) return 0;
  // -step in unsigned arithmetic: step may be INT64_MIN, whose negation overflows int64.
  const uint64_t down = 0 - static_cast<uint64_t>(step), span = static_cast<uint64_t>(b - e);
  return static_cast<int64_t>(span / down + (span % down != 0 ? 1 : 0));
}

// The chunks of a strided selection: each source block keeps the elements it holds.
std::vector<int64_t> sliced_chunks(const std::vector<int64_t>& src, int64_t start, int64_t step,
                                   int64_t count) {
  std::vector<int64_t> bounds{0};
  for (int64_t c : src) bounds.push_back(bounds.back() + c);
  std::vector<int64_t> out;
  int64_t cur_block = -1, run = 0;
  for (int64_t k = 0; k < count; ++k) {
    int64_t idx = start + k * step;
    int64_t blk = std::upper_bound(bounds.begin(), bounds.end(), idx) - bounds.begin() - 1;
    if (blk != cur_block) {
      if (run) out.push_back(run);
      cur_block = blk;
      run = 0;
    }
    ++run;
  }
  if (run) out.push_back(run);
  if (out.empty()) out.push_back(0);
  return out;
}

}  // namespace

Array Array::slice(const std::vector<Slice>& index) const {
  if (!node_) throw Error("slice: operand is an empty Array");
  int rank = ndim();
  if (static_cast<int>(index.size()) > rank)
    throw Error("slice: too many indices (" + std::to_string(index.size()) +
                ") for an array of shape " + shape_str(shape()));
  Shape out_shape;
  Chunks out_chunks;
  Attrs attrs;
  Shape kept;  // shape after dropping integer-indexed dims
  Chunks kept_chunks;
  bool identity = true;
  for (int d = 0; d < rank; ++d) {
    Slice s = d < static_cast<int>(index.size()) ? index[d] : Slice::all();
    int64_t n = shape()[d];
    int64_t start = 0, count;
    int64_t step = s.step;
    if (s.is_index) {
      int64_t i = *s.start;
      if (i < -n || i >= n)
        throw Error("slice: index " + std::to_string(i) + " is out of bounds for axis " +
                    std::to_string(d) + " with size " + std::to_string(n));
      start = i < 0 ? i + n : i;
      step = 1;
      count = 1;
    } else {
      if (step == 0)
        throw Error("slice: slice step cannot be zero (axis " + std::to_string(d) + ")");
      count = normalize_slice(s, n, &start);
    }
    if (count == 0) start = 0;
    // A selection of at most one element has no step: keeping a huge one (x[::2**62]) would make
    // the passes multiply it into strides, where it overflows.
    if (count <= 1) step = 1;
    identity &= (start == 0 && step == 1 && count == n);
    attrs.ints.push_back(start);
    attrs.ints.push_back(step);
    out_shape.push_back(count);
    out_chunks.push_back(sliced_chunks(chunks()[d], start, step, count));
    if (!s.is_index) {
      kept.push_back(count);
      kept_chunks.push_back(out_chunks.back());
    }
  }
  NodeRef n =
      identity ? node_ : ctx().make(Op::Slice, dtype(), out_shape, out_chunks, {node_}, attrs);
  if (kept.size() == out_shape.size()) return Array(n);
  return Array(ctx().make(Op::Reshape, dtype(), kept, kept_chunks, {n}));
}

Array Array::transpose(std::vector<int> perm) const {
  if (!node_) throw Error("transpose: operand is an empty Array");
  int rank = ndim();
  if (perm.empty()) {
    perm.resize(rank);
    for (int k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
  }
  if (static_cast<int>(perm.size()) != rank)
    throw Error("transpose: axes has " + std::to_string(perm.size()) +
                " entries for an array of rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  Attrs attrs;
  Shape shape;
  Chunks chunks;
  bool identity = true;
  for (int k = 0; k < rank; ++k) {
    int p = normalize_axis("transpose", perm[k], rank);
    if (seen[p]) throw Error("transpose: repeated axis " + std::to_string(perm[k]));
    seen[p] = true;
    identity &= p == k;
    attrs.ints.push_back(p);
    shape.push_back(this->shape()[p]);
    chunks.push_back(this->chunks()[p]);
  }
  if (identity) return *this;
  return Array(ctx().make(Op::Transpose, dtype(), shape, chunks, {node_}, attrs));
}

Array Array::reshape(Shape new_shape) const {
  if (!node_) throw Error("reshape: operand is an empty Array");
  int infer = -1;
  int64_t known = 1;
  for (size_t k = 0; k < new_shape.size(); ++k) {
    if (new_shape[k] == -1) {
      if (infer >= 0) throw Error("reshape: can only specify one unknown dimension (-1)");
      infer = static_cast<int>(k);
    } else if (new_shape[k] < 0) {
      throw Error("reshape: negative dimension in shape " + shape_str(new_shape));
    } else {
      auto more = checked::mul(known, new_shape[k]);
      if (!more || *more > kMaxElements)  // (an inferred dim could not make it size() then)
        throw Error("reshape: cannot reshape array of size " + std::to_string(size()) +
                    " into shape " + shape_str(new_shape));
      known = *more;
    }
  }
  if (infer >= 0) {
    if (known == 0 || size() % known != 0)
      throw Error("reshape: cannot reshape array of size " + std::to_string(size()) +
                  " into shape " + shape_str(new_shape));
    new_shape[infer] = size() / known;
  }
  if (num_elements(new_shape) != size())
    throw Error("reshape: cannot reshape array of size " + std::to_string(size()) + " into shape " +
                shape_str(new_shape));
  if (new_shape == shape()) return *this;
  // A reshape of a reshape is one reshape of the first one's input (C order either way).
  if (node_->op == Op::Reshape) return Array(node_->in(0)).reshape(new_shape);
  // Keep the block size (in elements) of the source, splitting from the last dim.
  int64_t block = 1;
  for (const auto& c : chunks()) block *= *std::max_element(c.begin(), c.end());
  Shape b(new_shape.size(), 0);
  int64_t budget = std::max<int64_t>(block, 1);
  for (size_t k = new_shape.size(); k-- > 0;) {
    int64_t ext = std::max<int64_t>(new_shape[k], 1);
    b[k] = std::max<int64_t>(1, std::min(ext, budget));
    budget = std::max<int64_t>(1, budget / ext);
  }
  return Array(ctx().make(Op::Reshape, dtype(), new_shape, regular_chunks(new_shape, b), {node_}));
}

Array Array::rechunk(Shape block) const {
  if (!node_) throw Error("rechunk: operand is an empty Array");
  Chunks c = make_chunks("rechunk", shape(), block);
  if (c == chunks()) return *this;
  return Array(ctx().make(Op::Rechunk, dtype(), shape(), c, {node_}));
}

Array Array::broadcast_to(Shape target) const {
  if (!node_) throw Error("broadcast_to: operand is an empty Array");
  if (target.size() < shape().size())
    throw Error("broadcast_to: cannot broadcast shape " + shape_str(shape()) +
                " to the lower-rank shape " + shape_str(target));
  Shape b = broadcast_shapes("broadcast_to", shape(), target);
  if (b != target)
    throw Error("broadcast_to: cannot broadcast shape " + shape_str(shape()) + " to " +
                shape_str(target));
  return Array(broadcast_node(node_, target, elementwise_chunks(target, {node_})));
}

Array concatenate(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) throw Error("concatenate: need at least one array");
  const Array& first = arrays[0];
  int rank = first.ndim();
  if (rank == 0) throw Error("concatenate: zero-dimensional arrays cannot be concatenated");
  axis = normalize_axis("concatenate", axis, rank);
  DType t = first.dtype();
  for (size_t k = 1; k < arrays.size(); ++k) {
    const Array& a = arrays[k];
    if (a.ndim() != rank)
      throw Error("concatenate: all inputs must have the same rank; input 0 has shape " +
                  shape_str(first.shape()) + ", input " + std::to_string(k) + " has shape " +
                  shape_str(a.shape()));
    for (int d = 0; d < rank; ++d)
      if (d != axis && a.shape()[d] != first.shape()[d])
        throw Error("concatenate: input shapes must match except on axis " + std::to_string(axis) +
                    "; input 0 has shape " + shape_str(first.shape()) + ", input " +
                    std::to_string(k) + " has shape " + shape_str(a.shape()));
    t = promote(t, a.dtype());
  }
  if (arrays.size() == 1) return first;
  Shape shape = first.shape();
  Chunks chunks = first.chunks();
  shape[axis] = 0;
  chunks[axis].clear();
  std::vector<NodeRef> inputs;
  for (const auto& a : arrays) {
    auto more = checked::add(shape[axis], a.shape()[axis]);
    if (!more || *more > kMaxElements)
      throw Error("concatenate: the inputs' lengths along axis " + std::to_string(axis) +
                  " add up to more than Kiln can index (at most 2^62)");
    shape[axis] = *more;
    for (int64_t c : a.chunks()[axis])
      if (c > 0) chunks[axis].push_back(c);
    inputs.push_back(cast_node(a.node(), t));
  }
  if (chunks[axis].empty()) chunks[axis].push_back(0);
  Attrs attrs;
  attrs.ints = {axis};
  return Array(ctx().make(Op::Concat, t, shape, chunks, inputs, attrs));
}

Array stack(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) throw Error("stack: need at least one array");
  int rank = arrays[0].ndim();
  axis = normalize_axis("stack", axis, rank + 1);
  std::vector<Array> expanded;
  for (size_t k = 0; k < arrays.size(); ++k) {
    if (arrays[k].shape() != arrays[0].shape())
      throw Error("stack: all input arrays must have the same shape; input 0 has shape " +
                  shape_str(arrays[0].shape()) + ", input " + std::to_string(k) + " has shape " +
                  shape_str(arrays[k].shape()));
    Shape s = arrays[k].shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(arrays[k].reshape(s));
  }
  return concatenate(expanded, axis);
}

}  // namespace kiln
