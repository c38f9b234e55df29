// Linear algebra on chunked arrays: matmul and the contractions NumPy builds on it (dot, vdot,
// inner, outer, tensordot, einsum). A float matrix product is one MatMul node, a library call
// that the plan runs as BLAS calls per block (runtime/plan.cpp); everything else here is views,
// casts and element-wise ops around it. Integer and bool products never reach BLAS: they are a
// broadcast multiply (and) summed (any) over the contracted axis, which the passes fuse into one
// reduction kernel.
#include <algorithm>
#include <map>
#include <numeric>

#include "frontend/build.hpp"

namespace kiln {
using namespace detail;

namespace {

void check_operand(const char* op, int k, const Array& a) {
  if (!a.node())
    throw Error(std::string(op) + ": operand " + std::to_string(k) +
                " is an empty (default-constructed) Array");
}

// The 2-D product of a (m, k) and b (k, n) in dtype t (shapes already checked). A float product
// of matrices is a MatMul node (gemm per block). Matrix-vector products and integer or bool
// products are a multiply summed (any) over k, which fuses with its producers and consumers
// into one pass: for a matrix-vector product that pass streams the matrix once, as gemv does,
// and measured faster than OpenBLAS's dgemv (bench/RESULTS.md, "Library calls").
Array matmul_2d(const Array& a, const Array& b, DType t) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  if (is_float(t) && m > 1 && n > 1) {
    NodeRef x = cast_node(a.node(), t), y = cast_node(b.node(), t);
    Chunks chunks{a.chunks()[0], b.chunks()[1]};
    return Array(ctx().make(Op::MatMul, t, {m, n}, chunks, {x, y}));
  }
  Array x = a.astype(t), y = b.astype(t);
  auto fold = [&](const Array& prod, int axis) {
    // int32 sums run in int64; the cast wraps as NumPy's int32 accumulation does.
    return t == DType::Bool ? prod.any({axis}) : prod.sum({axis}).astype(t);
  };
  // The matrix's rows run along the kernel's inner dim, so it streams contiguously when it is
  // stored row-major; a transposed view (X.T @ r) is read as X, with the other dim reduced.
  auto transposed = [](const Array& v) { return v.node()->op == Op::Transpose; };
  if (n == 1 && !transposed(x)) return fold(x * y.reshape({1, k}), 1).reshape({m, 1});
  if (n == 1) return fold(x.T() * y, 0).reshape({m, 1});
  if (m == 1 && !transposed(y)) return fold(x.reshape({k, 1}) * y, 0).reshape({1, n});
  if (m == 1) return fold(y.T() * x, 1).reshape({1, n});
  return fold(x.reshape({m, k, 1}) * y.reshape({1, k, n}), 1);
}

// Moves `axes` of a (in that order) to the end (last = true) or the front, the others keeping
// their order; returns the permutation's free axes through `free`.
Array move_axes(const Array& a, const std::vector<int>& axes, bool last, std::vector<int>* free) {
  std::vector<bool> used(a.ndim(), false);
  for (int ax : axes) used[ax] = true;
  free->clear();
  for (int d = 0; d < a.ndim(); ++d)
    if (!used[d]) free->push_back(d);
  std::vector<int> perm = last ? *free : axes;
  const std::vector<int>& rest = last ? axes : *free;
  perm.insert(perm.end(), rest.begin(), rest.end());
  return a.transpose(perm);
}

}  // namespace

Array matmul(const Array& a, const Array& b) {
  check_operand("matmul", 0, a);
  check_operand("matmul", 1, b);
  for (int k : {0, 1})
    if ((k ? b : a).ndim() == 0)
      throw Error("matmul: operand " + std::to_string(k) +
                  " is 0-dimensional; matmul needs arrays of at least one dimension (use "
                  "multiply for scalars)");
  DType t = promote(a.dtype(), b.dtype());
  // NumPy's rules: a 1-D a is a row (1, k), a 1-D b a column (k, 1); the added dim is removed.
  Array x = a.ndim() == 1 ? a.reshape({1, a.shape()[0]}) : a;
  Array y = b.ndim() == 1 ? b.reshape({b.shape()[0], 1}) : b;
  const int64_t k = x.shape()[x.ndim() - 1];
  if (k != y.shape()[y.ndim() - 2])
    throw Error("matmul: the contracted dimensions differ: operand 0 has shape " +
                shape_str(a.shape()) + ", operand 1 has shape " + shape_str(b.shape()) + " (" +
                std::to_string(k) + " != " + std::to_string(y.shape()[y.ndim() - 2]) + ")");
  Array r;
  if (x.ndim() == 2 && y.ndim() == 2) {
    r = matmul_2d(x, y, t);
  } else {
    // Stacks of matrices: batch dims broadcast, one product per matrix of the stack.
    Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
    Shape batch = broadcast_shapes("matmul", bx, by);
    check_stack("matmul", batch);
    auto full = [&](const Array& v) {
      Shape s = batch;
      s.insert(s.end(), v.shape().end() - 2, v.shape().end());
      return v.broadcast_to(s);
    };
    Array xs = full(x), ys = full(y);
    std::vector<Array> parts;
    for (int64_t q = 0; q < num_elements(batch); ++q)
      parts.push_back(
          matmul_2d(xs.slice(index_slices(q, batch)), ys.slice(index_slices(q, batch)), t));
    Shape out = batch;
    out.push_back(x.shape()[x.ndim() - 2]);
    out.push_back(y.shape()[y.ndim() - 1]);
    if (parts.empty()) return zeros(out, {}, t);
    r = stack(parts, 0).reshape(out);
  }
  Shape out = r.shape();
  if (b.ndim() == 1) out.erase(out.end() - 1);
  if (a.ndim() == 1) out.erase(out.end() - (b.ndim() == 1 ? 1 : 2));
  return r.reshape(out);
}

Array Array::matmul(const Array& b) const { return kiln::matmul(*this, b); }

Array tensordot(const Array& a, const Array& b, std::vector<int> axes_a, std::vector<int> axes_b) {
  check_operand("tensordot", 0, a);
  check_operand("tensordot", 1, b);
  if (axes_a.size() != axes_b.size())
    throw Error("tensordot: the axis lists differ in length (" + std::to_string(axes_a.size()) +
                " and " + std::to_string(axes_b.size()) + ")");
  int64_t k = 1;
  for (size_t q = 0; q < axes_a.size(); ++q) {
    axes_a[q] = normalize_axis("tensordot", axes_a[q], a.ndim());
    axes_b[q] = normalize_axis("tensordot", axes_b[q], b.ndim());
    if (a.shape()[axes_a[q]] != b.shape()[axes_b[q]])
      throw Error("tensordot: shape mismatch for a contracted axis: operand 0 has shape " +
                  shape_str(a.shape()) + " (axis " + std::to_string(axes_a[q]) +
                  "), operand 1 has shape " + shape_str(b.shape()) + " (axis " +
                  std::to_string(axes_b[q]) + ")");
    k *= a.shape()[axes_a[q]];
  }
  for (const auto* axes : {&axes_a, &axes_b}) {
    std::vector<int> sorted = *axes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw Error("tensordot: an axis is contracted twice");
  }
  std::vector<int> free_a, free_b;
  Array x = move_axes(a, axes_a, true, &free_a), y = move_axes(b, axes_b, false, &free_b);
  Shape out;
  int64_t m = 1, n = 1;
  for (int d : free_a) m *= a.shape()[d], out.push_back(a.shape()[d]);
  for (int d : free_b) n *= b.shape()[d], out.push_back(b.shape()[d]);
  DType t = promote(a.dtype(), b.dtype());
  return matmul_2d(x.reshape({m, k}), y.reshape({k, n}), t).reshape(out);
}

Array tensordot(const Array& a, const Array& b, int axes) {
  check_operand("tensordot", 0, a);
  check_operand("tensordot", 1, b);
  if (axes < 0 || axes > a.ndim() || axes > b.ndim())
    throw Error("tensordot: cannot contract " + std::to_string(axes) + " axes of shapes " +
                shape_str(a.shape()) + " and " + shape_str(b.shape()));
  std::vector<int> xa, xb;
  for (int q = 0; q < axes; ++q) {
    xa.push_back(a.ndim() - axes + q);
    xb.push_back(q);
  }
  return tensordot(a, b, xa, xb);
}

Array dot(const Array& a, const Array& b) {
  check_operand("dot", 0, a);
  check_operand("dot", 1, b);
  if (a.ndim() == 0 || b.ndim() == 0) return a * b;
  if (a.ndim() <= 2 && b.ndim() <= 2) return matmul(a, b);
  return tensordot(a, b, {a.ndim() - 1}, {b.ndim() == 1 ? 0 : b.ndim() - 2});
}

Array inner(const Array& a, const Array& b) {
  check_operand("inner", 0, a);
  check_operand("inner", 1, b);
  if (a.ndim() == 0 || b.ndim() == 0) return a * b;
  return tensordot(a, b, {a.ndim() - 1}, {b.ndim() - 1});
}

Array vdot(const Array& a, const Array& b) {
  check_operand("vdot", 0, a);
  check_operand("vdot", 1, b);
  if (a.size() != b.size())
    throw Error("vdot: the operands have different sizes: shapes " + shape_str(a.shape()) +
                " and " + shape_str(b.shape()));
  return matmul(a.reshape({a.size()}), b.reshape({b.size()}));
}

Array outer(const Array& a, const Array& b) {
  check_operand("outer", 0, a);
  check_operand("outer", 1, b);
  return a.reshape({a.size(), 1}) * b.reshape({1, b.size()});
}

namespace {

// Parses "ij,jk->ik" (spaces ignored) into operand terms and the output term.
void parse_einsum(const std::string& spec, size_t operands, std::vector<std::string>* in,
                  std::string* out) {
  std::string s;
  for (char c : spec)
    if (c != ' ') s += c;
  size_t arrow = s.find("->");
  std::string lhs = s.substr(0, arrow);
  in->clear();
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    in->push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (in->size() != operands)
    throw Error("einsum: the subscripts '" + spec + "' name " + std::to_string(in->size()) +
                " operands, " + std::to_string(operands) + " were given");
  std::map<char, int> count;
  for (const auto& term : *in)
    for (char c : term) {
      if (c == '.') throw Error("einsum: ellipses ('...') are not supported, in '" + spec + "'");
      if (!std::isalpha(static_cast<unsigned char>(c)))
        throw Error(std::string("einsum: invalid subscript '") + c + "' in '" + spec + "'");
      if (std::count(term.begin(), term.end(), c) > 1)
        throw Error(std::string("einsum: subscript '") + c + "' repeats within operand '" + term +
                    "' (traces and diagonals are not supported)");
      ++count[c];
    }
  if (arrow == std::string::npos) {
    out->clear();
    for (auto& [c, n] : count)
      if (n == 1) *out += c;  // implicit output: the letters seen once, in alphabetical order
  } else {
    *out = s.substr(arrow + 2);
    for (char c : *out) {
      if (!count.count(c))
        throw Error(std::string("einsum: output subscript '") + c +
                    "' does not appear in an operand, in '" + spec + "'");
      if (std::count(out->begin(), out->end(), c) > 1)
        throw Error(std::string("einsum: output subscript '") + c + "' repeats, in '" + spec + "'");
    }
  }
}

// Sums `x` (labelled by `letters`) over the axes whose letters are not in `needed`.
Array sum_unneeded(const Array& x, std::string* letters, const std::string& needed) {
  std::vector<int> axes;
  std::string kept;
  for (size_t d = 0; d < letters->size(); ++d) {
    if (needed.find((*letters)[d]) == std::string::npos)
      axes.push_back(static_cast<int>(d));
    else
      kept += (*letters)[d];
  }
  *letters = kept;
  if (axes.empty()) return x;
  DType t = x.dtype();
  return t == DType::Bool ? x.any(axes) : x.sum(axes).astype(t);
}

// x, labelled by `letters`, with its axes in the order of `to` (a permutation of them).
Array permute_to(const Array& x, const std::string& letters, const std::string& to) {
  std::vector<int> perm;
  for (char c : to) perm.push_back(static_cast<int>(letters.find(c)));
  return x.transpose(perm);
}

}  // namespace

Array einsum(const std::string& spec, const std::vector<Array>& operands) {
  if (operands.empty() || operands.size() > 2)
    throw Error("einsum: one or two operands are supported, got " +
                std::to_string(operands.size()));
  for (size_t k = 0; k < operands.size(); ++k)
    check_operand("einsum", static_cast<int>(k), operands[k]);
  std::vector<std::string> in;
  std::string out;
  parse_einsum(spec, operands.size(), &in, &out);
  std::map<char, int64_t> dim;
  for (size_t k = 0; k < operands.size(); ++k) {
    const Array& x = operands[k];
    if (static_cast<int>(in[k].size()) != x.ndim())
      throw Error("einsum: operand " + std::to_string(k) + " has shape " + shape_str(x.shape()) +
                  " but subscripts '" + in[k] + "'");
    for (size_t d = 0; d < in[k].size(); ++d) {
      auto [it, added] = dim.emplace(in[k][d], x.shape()[d]);
      if (!added && it->second != x.shape()[d])
        throw Error(std::string("einsum: subscript '") + in[k][d] + "' has size " +
                    std::to_string(it->second) + " and " + std::to_string(x.shape()[d]) + " in '" +
                    spec + "'");
    }
  }
  if (operands.size() == 1) {
    std::string letters = in[0];
    Array x = sum_unneeded(operands[0], &letters, out);
    return permute_to(x, letters, out);
  }
  // Letters one operand alone has and the output lacks are summed away first.
  std::string la = in[0], lb = in[1];
  Array a = sum_unneeded(operands[0], &la, out + lb);
  Array b = sum_unneeded(operands[1], &lb, out + la);
  std::string batch, contracted;
  for (char c : la) {
    bool in_b = lb.find(c) != std::string::npos, in_out = out.find(c) != std::string::npos;
    if (in_b) (in_out ? batch : contracted) += c;
  }
  if (batch.empty()) {
    std::vector<int> xa, xb;
    for (char c : contracted) {
      xa.push_back(static_cast<int>(la.find(c)));
      xb.push_back(static_cast<int>(lb.find(c)));
    }
    std::string result;
    for (char c : la + lb)
      if (contracted.find(c) == std::string::npos) result += c;
    return permute_to(tensordot(a, b, xa, xb), result, out);
  }
  // Letters in both operands and the output (a batch): multiply broadcast over every letter, then
  // sum the contracted ones (one fused reduction kernel; no BLAS).
  std::string all = out + contracted;
  auto spread = [&](const Array& x, const std::string& letters) {
    std::string mine;
    for (char c : all)
      if (letters.find(c) != std::string::npos) mine += c;
    Array p = permute_to(x, letters, mine);
    Shape s;
    for (char c : all) s.push_back(letters.find(c) != std::string::npos ? dim.at(c) : 1);
    return p.reshape(s);
  };
  Array prod = spread(a, la) * spread(b, lb);
  if (contracted.empty()) return prod;
  std::vector<int> axes(contracted.size());
  std::iota(axes.begin(), axes.end(), static_cast<int>(out.size()));
  DType t = prod.dtype();
  return t == DType::Bool ? prod.any(axes) : prod.sum(axes).astype(t);
}

}  // namespace kiln
