// numpy.linalg's factorizations and solvers: each is one Linalg node (a LAPACK call the plan runs
// as a library task, runtime/plan.cpp) whose parts are views of its packed result
// (ir/linalg.hpp), plus TSQR for tall chunked arrays and Dask's randomized SVD, built from Linalg
// and MatMul nodes so that the scheduler runs their blocks in parallel.
#include <cmath>
#include <functional>
#include <limits>

#include "frontend/build.hpp"
#include "ir/linalg.hpp"

namespace kiln::linalg {
using namespace detail;

namespace {

constexpr size_t kTsqrFanIn = 16;  // R factors stacked and factorized together per tree node

DType float_type(DType t) { return t == DType::Float32 ? DType::Float32 : DType::Float64; }

// a is a matrix (stack = false) or a stack of them (..., m, n); square: m == n.
void check_matrix(LinalgFn f, const Array& a, bool square, bool stack = false) {
  const std::string op = std::string("linalg.") + linalg_name(f);
  if (!a.node()) throw Error(op + ": the operand is an empty (default-constructed) Array");
  if (a.ndim() < 2 || (!stack && a.ndim() != 2))
    throw Error(op + ": expected " +
                (stack ? "an array of at least 2 dimensions (a matrix or a stack of them)"
                       : "a 2-D array") +
                ", got shape " + shape_str(a.shape()));
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1];
  if (square && m != n)
    throw Error(op + ": expected square matrices, got shape " + shape_str(a.shape()));
}

// f applied to each matrix of a stack (..., m, n), its parts stacked back behind the batch dims;
// a matrix is one call. An empty stack still calls f once, on its first matrix's shape, to learn
// the parts' shapes.
std::vector<Array> per_matrix(const std::string& op, const Array& a,
                              const std::function<std::vector<Array>(const Array&)>& f) {
  if (a.ndim() == 2) return f(a);
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  check_stack(op, batch);
  const int64_t count = num_elements(batch);
  std::vector<std::vector<Array>> parts;
  for (int64_t q = 0; q < count; ++q) parts.push_back(f(a.slice(index_slices(q, batch))));
  std::vector<Array> out;
  std::vector<Array> shapes =
      count ? parts[0]
            : f(zeros({a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]}, {}, a.dtype()));
  for (size_t k = 0; k < shapes.size(); ++k) {
    Shape s = batch;
    s.insert(s.end(), shapes[k].shape().begin(), shapes[k].shape().end());
    if (count == 0) {
      out.push_back(zeros(s, {}, shapes[k].dtype()));
      continue;
    }
    std::vector<Array> mats;
    for (const auto& p : parts) mats.push_back(p[k]);
    out.push_back(stack(mats, 0).reshape(s));
  }
  return out;
}

// One LAPACK call on a (m, n) and b (m, r; for the Tsqr* steps, b's rows are its own), in dtype
// t: its packed result.
Array packed_call(LinalgFn f, const Array& a, const Array* b, DType t) {
  const int64_t m = a.shape()[0], n = a.shape()[1], r = b ? b->shape()[1] : 0;
  std::vector<NodeRef> ins{cast_node(a.node(), t)};
  if (b) ins.push_back(cast_node(b->node(), t));
  const int64_t size = linalg_packed_size(f, m, n, r);
  Attrs at;
  at.ints = {static_cast<int64_t>(f), r};
  return Array(ctx().make(Op::Linalg, t, {size}, single_chunks({size}), std::move(ins), at));
}

// The same call's parts.
std::vector<Array> call(LinalgFn f, const Array& a, const Array* b, DType t) {
  const int64_t m = a.shape()[0], n = a.shape()[1], r = b ? b->shape()[1] : 0;
  Array packed = packed_call(f, a, b, t);
  std::vector<Array> parts;
  for (const LinalgPart& p : linalg_parts(f, m, n, r))
    parts.push_back(
        packed.slice({Slice(p.offset, p.offset + num_elements(p.shape))}).reshape(p.shape));
  return parts;
}

// The rows of `a` in blocks of at least `min_rows` (its row chunks, each one shorter than that
// merged into the next, a short tail into the last).
std::vector<Array> row_blocks(const Array& a, int64_t min_rows) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t start = 0, at = 0;
  for (int64_t c : a.chunks()[0]) {
    at += c;
    if (at - start >= min_rows) {
      ranges.push_back({start, at});
      start = at;
    }
  }
  if (start < at) {
    if (ranges.empty())
      ranges.push_back({start, at});
    else
      ranges.back().second = at;
  }
  std::vector<Array> blocks;
  for (auto [b, e] : ranges) blocks.push_back(a.slice({Slice(b, e), Slice::all()}));
  return blocks;
}

// TSQR over row blocks (each with at least n rows), Q's blocks returned times some n x p matrix
// M: Q_i M = q_i (Q2_i M), where q_i is block i's own Q and Q2_i its rows of the next level's
// Q. The last level, a single block (the stacked R factors, or the whole array), is left to
// `top`, which factorizes it and returns its own Q times M: for qr its Q (M = I, keeping R), for
// svd its U (M = the U of R's SVD; an SVD of the stack directly, which saves forming its Q).
// Below the top, each block is factorized for its R only (TsqrR), and q_i (Q2_i M) is written
// by one call per block (TsqrMix, TsqrApply: codegen/library.cpp), as the product
// X_i (R_i^-1 Q2_i M) when R_i is well conditioned; no q_i is ever stored.
using Top = std::function<Array(const Array& block)>;

std::vector<Array> tsqr(const std::vector<Array>& blocks, DType t, const Top& top) {
  if (blocks.size() == 1) return {top(blocks[0])};
  const int64_t n = blocks[0].shape()[1];
  std::vector<Array> rinfo, r;
  for (const Array& b : blocks) {
    rinfo.push_back(packed_call(LinalgFn::TsqrR, b, nullptr, t).reshape({n + 1, n}));
    r.push_back(rinfo.back().slice({Slice(0, n), Slice::all()}));
  }
  std::vector<Array> stacks;
  for (size_t s = 0; s < r.size(); s += kTsqrFanIn)
    stacks.push_back(concatenate(
        std::vector<Array>(r.begin() + s, r.begin() + std::min(r.size(), s + kTsqrFanIn)), 0));
  std::vector<Array> up = tsqr(stacks, t, top);
  std::vector<Array> q;
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto j = static_cast<int64_t>(i % kTsqrFanIn);
    Array rows = up[i / kTsqrFanIn].slice({Slice(j * n, (j + 1) * n), Slice::all()});
    const int64_t p = rows.shape()[1];
    Array w = packed_call(LinalgFn::TsqrMix, rinfo[i], &rows, t).reshape({n + 1, p});
    q.push_back(
        packed_call(LinalgFn::TsqrApply, blocks[i], &w, t).reshape({blocks[i].shape()[0], p}));
  }
  return q;
}

// Concatenates blocks of rows (one block is itself).
Array rows_of(const std::vector<Array>& blocks) {
  return blocks.size() == 1 ? blocks[0] : concatenate(blocks, 0);
}

}  // namespace

QR qr(const Array& a) {
  check_matrix(LinalgFn::Qr, a, false, true);
  if (a.ndim() > 2) {
    std::vector<Array> p = per_matrix("linalg.qr", a, [](const Array& m) {
      QR f = qr(m);
      return std::vector<Array>{f.q, f.r};
    });
    return {p[0], p[1]};
  }
  DType t = float_type(a.dtype());
  const int64_t m = a.shape()[0], n = a.shape()[1];
  std::vector<Array> blocks = m >= n && n > 0 ? row_blocks(a, n) : std::vector<Array>{a};
  QR out;
  out.q = rows_of(tsqr(blocks, t, [&](const Array& top) {
    std::vector<Array> p = call(LinalgFn::Qr, top, nullptr, t);
    out.r = p[1];
    return p[0];
  }));
  return out;
}

SVD svd(const Array& a) {
  check_matrix(LinalgFn::Svd, a, false, true);
  if (a.ndim() > 2) {
    std::vector<Array> p = per_matrix("linalg.svd", a, [](const Array& m) {
      SVD f = svd(m);
      return std::vector<Array>{f.u, f.s, f.vh};
    });
    return {p[0], p[1], p[2]};
  }
  DType t = float_type(a.dtype());
  const int64_t m = a.shape()[0], n = a.shape()[1];
  if (m < n) {  // a = (a.T)^T = (U S Vh)^T = Vh^T S U^T
    SVD f = svd(a.T());
    return {f.vh.T(), f.s, f.u.T()};
  }
  std::vector<Array> blocks = n > 0 ? row_blocks(a, n) : std::vector<Array>{a};
  SVD out;
  out.u = rows_of(tsqr(blocks, t, [&](const Array& top) {
    std::vector<Array> p = call(LinalgFn::Svd, top, nullptr, t);
    out.s = p[1];
    out.vh = p[2];
    return p[0];
  }));
  return out;
}

SVD svd_compressed(const Array& a, int64_t k, int n_power_iter, int64_t n_oversamples,
                   uint64_t seed) {
  check_matrix(LinalgFn::Svd, a, false);
  const int64_t m = a.shape()[0], n = a.shape()[1];
  if (k < 1 || k > std::min(m, n))
    throw Error("linalg.svd_compressed: k must be in [1, min(m, n)] = [1, " +
                std::to_string(std::min(m, n)) + "], got " + std::to_string(k));
  if (n_power_iter < 0 || n_oversamples < 0)
    throw Error("linalg.svd_compressed: n_power_iter and n_oversamples must be >= 0");
  DType t = float_type(a.dtype());
  Array x = a.astype(t);
  const int64_t comp = std::min(k + n_oversamples, std::min(m, n));
  Array omega = random::Generator(seed).standard_normal({n, comp}, {x.chunks()[1][0], comp});
  Array y = matmul(x, omega.astype(t));
  for (int i = 0; i < n_power_iter; ++i) {
    y = qr(y).q;
    y = matmul(x, qr(matmul(x.T(), y)).q);
  }
  Array q = qr(y).q;                  // (m, comp), orthonormal columns
  SVD small = svd(matmul(q.T(), x));  // (comp, n)
  Array u = matmul(q, small.u);
  return {u.slice({Slice::all(), Slice(0, k)}), small.s.slice({Slice(0, k)}),
          small.vh.slice({Slice(0, k), Slice::all()})};
}

namespace {

// One LAPACK call per matrix of a (a stack allowed), its parts.
std::vector<Array> square_call(LinalgFn f, const Array& a) {
  check_matrix(f, a, true, true);
  DType t = float_type(a.dtype());
  return per_matrix(std::string("linalg.") + linalg_name(f), a,
                    [&](const Array& m) { return call(f, m, nullptr, t); });
}

}  // namespace

Array cholesky(const Array& a) { return square_call(LinalgFn::Cholesky, a)[0]; }

Array inv(const Array& a) { return square_call(LinalgFn::Inv, a)[0]; }

Array det(const Array& a) { return square_call(LinalgFn::Det, a)[0]; }

SlogDet slogdet(const Array& a) {
  std::vector<Array> p = square_call(LinalgFn::Slogdet, a);
  return {p[0], p[1]};
}

Eigh eigh(const Array& a) {
  std::vector<Array> p = square_call(LinalgFn::Eigh, a);
  return {p[0], p[1]};
}

namespace {

// b as a 2-D right-hand side with a's row count: (m,) becomes (m, 1).
Array rhs(LinalgFn f, const Array& a, const Array& b) {
  const std::string op = std::string("linalg.") + linalg_name(f);
  if (!b.node()) throw Error(op + ": the right-hand side is an empty (default-constructed) Array");
  if (b.ndim() != 1 && b.ndim() != 2)
    throw Error(op + ": the right-hand side must be 1-D or 2-D, got shape " + shape_str(b.shape()));
  if (b.shape()[0] != a.shape()[0])
    throw Error(op + ": the right-hand side has " + std::to_string(b.shape()[0]) +
                " rows, the matrix " + std::to_string(a.shape()[0]) + " (shapes " +
                shape_str(a.shape()) + " and " + shape_str(b.shape()) + ")");
  return b.ndim() == 1 ? b.reshape({b.shape()[0], 1}) : b;
}

}  // namespace

Array solve(const Array& a, const Array& b) {
  check_matrix(LinalgFn::Solve, a, true, true);
  if (!b.node())
    throw Error("linalg.solve: the right-hand side is an empty (default-constructed) Array");
  if (a.ndim() > 2 || b.ndim() > 2) {
    // Stacks, as NumPy 2: a 1-D b is one vector for every matrix; otherwise b is (..., m, k) and
    // the batch dims of a and b broadcast.
    const int64_t m = a.shape()[a.ndim() - 1];
    Shape ba(a.shape().begin(), a.shape().end() - 2), bb;
    if (b.ndim() >= 2) bb.assign(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes("linalg.solve", ba, bb);
    check_stack("linalg.solve", batch);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {m, m});
    if (b.ndim() >= 2) sb.insert(sb.end(), b.shape().end() - 2, b.shape().end());
    Array af = a.broadcast_to(sa), bf = b.ndim() == 1 ? b : b.broadcast_to(sb);
    std::vector<Array> xs;
    for (int64_t q = 0; q < num_elements(batch); ++q) {
      std::vector<Slice> idx = index_slices(q, batch);
      xs.push_back(solve(af.slice(idx), b.ndim() == 1 ? b : bf.slice(idx)));
    }
    Shape out = batch;
    if (b.ndim() == 1)
      out.push_back(m);
    else
      out.insert(out.end(), b.shape().end() - 2, b.shape().end());
    DType t = float_type(promote(a.dtype(), b.dtype()));
    return xs.empty() ? zeros(out, {}, t) : stack(xs, 0).reshape(out);
  }
  Array b2 = rhs(LinalgFn::Solve, a, b);
  DType t = float_type(promote(a.dtype(), b.dtype()));
  Array x = call(LinalgFn::Solve, a, &b2, t)[0];
  return b.ndim() == 1 ? x.reshape({a.shape()[1]}) : x;
}

Lstsq lstsq(const Array& a, const Array& b) {
  check_matrix(LinalgFn::Lstsq, a, false);
  Array b2 = rhs(LinalgFn::Lstsq, a, b);
  DType t = float_type(promote(a.dtype(), b.dtype()));
  std::vector<Array> p = call(LinalgFn::Lstsq, a, &b2, t);
  Array x = b.ndim() == 1 ? p[0].reshape({a.shape()[1]}) : p[0];
  return {x, p[1], p[2].astype(DType::Int64), p[3]};
}

namespace {

Array vector_norm(const Array& x, double ord, int axis, bool keepdims) {
  std::vector<int> ax{axis};
  Array v = abs(x);
  if (std::isinf(ord)) return ord > 0 ? v.max(ax, keepdims) : v.min(ax, keepdims);
  if (ord == 0) return (x != 0.0).astype(x.dtype()).sum(ax, keepdims);
  if (ord == 1) return v.sum(ax, keepdims);
  if (ord == 2) return sqrt((x * x).sum(ax, keepdims));
  return pow(pow(v, ord).sum(ax, keepdims), 1.0 / ord);
}

// Matrix norms over axes (r, c) of x, one per matrix of a stack (NumPy's norm with axis=(r, c)).
Array matrix_norm(const Array& x, const std::string& ord, int r, int c, bool keepdims) {
  if (ord == "fro") return sqrt((x * x).sum({r, c}, keepdims));
  if (ord == "nuc" || ord == "2" || ord == "-2") {
    // NumPy's _multi_svd_norm: the singular values of each matrix, axes (r, c) moved last (in
    // either order: a matrix and its transpose have the same), then their sum, max or min.
    std::vector<int> perm;
    for (int d = 0; d < x.ndim(); ++d)
      if (d != r && d != c) perm.push_back(d);
    perm.push_back(r);
    perm.push_back(c);
    Array s = svd(x.transpose(perm)).s;  // (batch..., min(m, n))
    Array v = ord == "nuc" ? s.sum({-1}) : ord == "2" ? s.max({-1}) : s.min({-1});
    if (!keepdims) return v;
    Shape kept = x.shape();
    kept[r] = kept[c] = 1;
    return v.reshape(kept);
  }
  // 1, -1: the largest/smallest column sum of |x|; inf, -inf: the same over rows.
  bool cols = ord == "1" || ord == "-1";
  bool largest = ord == "1" || ord == "inf";
  if (!cols && ord != "inf" && ord != "-inf")
    throw Error("linalg.norm: invalid matrix norm order '" + ord +
                "' (expected 'fro', 'nuc', 1, -1, 2, -2, inf or -inf)");
  int summed = cols ? r : c, other = cols ? c : r;
  Array sums = abs(x).sum({summed}, true);
  Array ext = largest ? sums.max({other}, true) : sums.min({other}, true);
  if (keepdims) return ext;
  return ext.reshape([&] {
    Shape s;
    for (int d = 0; d < x.ndim(); ++d)
      if (d != r && d != c) s.push_back(x.shape()[d]);
    return s;
  }());
}

std::string ord_name(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  if (ord == 1 || ord == -1 || ord == 2 || ord == -2) return std::to_string(static_cast<int>(ord));
  return "";
}

Array norm_of(const Array& x0, std::optional<double> num, const std::string* name,
              std::vector<int> axis, bool keepdims) {
  if (!x0.node()) throw Error("linalg.norm: the operand is an empty (default-constructed) Array");
  Array x = x0.astype(is_float(x0.dtype()) ? x0.dtype() : DType::Float64);
  for (int& a : axis) a = normalize_axis("linalg.norm", a, x.ndim());
  if (axis.empty()) {
    if (!num && !name) {  // the 2-norm of everything, flattened
      std::vector<int> all(x.ndim());
      for (int d = 0; d < x.ndim(); ++d) all[d] = d;
      return sqrt((x * x).sum(all, keepdims));
    }
    if (x.ndim() != 1 && x.ndim() != 2)
      throw Error("linalg.norm: with an ord, the input must be 1-D or 2-D, got shape " +
                  shape_str(x.shape()));
    for (int d = 0; d < x.ndim(); ++d) axis.push_back(d);
  }
  if (axis.size() == 1) {
    if (name)
      throw Error("linalg.norm: invalid vector norm order '" + *name + "' (a number expected)");
    return vector_norm(x, num.value_or(2), axis[0], keepdims);
  }
  if (axis.size() != 2 || axis[0] == axis[1])
    throw Error("linalg.norm: axis must name one or two distinct axes");
  std::string ord = name ? *name : num ? ord_name(*num) : "fro";
  if (ord.empty())
    throw Error("linalg.norm: invalid matrix norm order " + std::to_string(*num) +
                " (expected 'fro', 'nuc', 1, -1, 2, -2, inf or -inf)");
  return matrix_norm(x, ord, axis[0], axis[1], keepdims);
}

}  // namespace

Array norm(const Array& x, std::optional<double> ord, std::vector<int> axis, bool keepdims) {
  return norm_of(x, ord, nullptr, std::move(axis), keepdims);
}

Array norm(const Array& x, const std::string& ord, std::vector<int> axis, bool keepdims) {
  return norm_of(x, std::nullopt, &ord, std::move(axis), keepdims);
}

}  // namespace kiln::linalg
