#include "ir/view.hpp"

#include <algorithm>

#include "support/error.hpp"

namespace kiln {

std::optional<std::vector<int64_t>> reshape_strides(const Shape& shape,
                                                    const std::vector<int64_t>& strides,
                                                    const Shape& new_shape) {
  std::vector<int64_t> out(new_shape.size(), 0);
  if (num_elements(shape) == 0) return out;
  // Drop size-1 dims of the source: they do not constrain the layout.
  Shape os;
  std::vector<int64_t> ost;
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] != 1) {
      os.push_back(shape[k]);
      ost.push_back(strides[k]);
    }
  size_t i = 0, j = 0;
  while (i < os.size() || j < new_shape.size()) {
    if (j < new_shape.size() && new_shape[j] == 1) {
      out[j++] = 0;
      continue;
    }
    if (i >= os.size() || j >= new_shape.size()) return std::nullopt;
    // Grow a group of old dims [i, i2) and new dims [j, j2) with equal element counts.
    size_t i2 = i + 1, j2 = j + 1;
    int64_t po = os[i], pn = new_shape[j];
    while (po != pn) {
      if (po < pn) {
        if (i2 >= os.size()) return std::nullopt;
        po *= os[i2++];
      } else {
        if (j2 >= new_shape.size()) return std::nullopt;
        pn *= new_shape[j2++];
      }
    }
    for (size_t k = i; k + 1 < i2; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt;  // not contiguous in the group
    int64_t s = ost[i2 - 1];
    for (size_t k = j2; k-- > j;) {
      out[k] = s;
      s *= new_shape[k];
    }
    i = i2;
    j = j2;
  }
  return out;
}

std::optional<AffineMap> compose_view(const Node& v, const AffineMap& in) {
  const Shape& in_shape = v.in(0)->shape;
  AffineMap out;
  out.offset = in.offset;
  switch (v.op) {
    case Op::Slice: {
      for (int d = 0; d < v.rank(); ++d) {
        int64_t start = v.attrs.ints[2 * d], step = v.attrs.ints[2 * d + 1];
        if (v.shape[d] > 0) out.offset += start * in.strides[d];
        out.strides.push_back(in.strides[d] * step);
      }
      return out;
    }
    case Op::Broadcast: {
      size_t r = v.shape.size(), ri = in_shape.size();
      for (size_t k = 0; k < r; ++k) {
        if (k + ri < r) {
          out.strides.push_back(0);
          continue;
        }
        size_t j = k + ri - r;
        out.strides.push_back(in_shape[j] == 1 && v.shape[k] != 1 ? 0 : in.strides[j]);
      }
      return out;
    }
    case Op::Transpose:
      for (int64_t p : v.attrs.ints) out.strides.push_back(in.strides[p]);
      return out;
    case Op::Reshape: {
      auto s = reshape_strides(in_shape, in.strides, v.shape);
      if (!s) return std::nullopt;
      out.strides = *s;
      return out;
    }
    case Op::Rechunk:
      return in;
    case Op::Scalar:
    case Op::Buffer:
    case Op::Random:
    case Op::Iota:
    case Op::Unary:
    case Op::Binary:
    case Op::Where:
    case Op::Cast:
    case Op::Reduce:
    case Op::Concat:
    case Op::Linalg:
    case Op::MatMul:
      break;
  }
  throw InternalError(std::string("compose_view on non-view op ") + op_name(v.op));
}

}  // namespace kiln

namespace kiln {

std::optional<ViewBase> resolve_view_base(const Node& n,
                                          const std::function<bool(const Node*)>& materialized) {
  std::vector<const Node*> chain;
  const Node* base = &n;
  while (is_view(base->op) && !materialized(base)) {
    chain.push_back(base);
    base = base->in(0).get();
  }
  ViewBase vb;
  vb.base = base;
  vb.materialized = materialized(base);
  if (vb.materialized)
    vb.map = AffineMap{0, c_strides(base->shape)};
  else if (is_strided_leaf(base->op))
    vb.map = AffineMap{base->attrs.offset, base->attrs.strides};
  else
    return std::nullopt;
  for (size_t k = chain.size(); k-- > 0;) {
    auto next = compose_view(*chain[k], vb.map);
    if (!next) return std::nullopt;
    vb.map = *next;
  }
  return vb;
}

std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, const AffineMap& m) {
  if (m.strides.size() != 2 || m.offset < 0) return std::nullopt;
  MatrixLayout l;
  l.offset = m.offset;
  l.row_stride = m.strides[0];
  l.col_stride = m.strides[1];
  // A dim of extent 1 is never stepped along: any stride serves, so it takes the ideal one.
  int64_t rs = rows == 1 ? std::max<int64_t>(cols, 1) : l.row_stride;
  int64_t cs = cols == 1 ? 1 : l.col_stride;
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    l.ld = rs;
    return l;
  }
  // Column-major: the transposed (cols x rows) matrix is row-major.
  rs = rows == 1 ? 1 : l.row_stride;
  cs = cols == 1 ? std::max<int64_t>(rows, 1) : l.col_stride;
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {
    l.transposed = true;
    l.ld = cs;
    return l;
  }
  return std::nullopt;
}

}  // namespace kiln
