// Reductions with axis and keepdims. var/std are built from mean, as NumPy computes them
// (two passes: the mean, then the mean squared deviation). The nan-functions (nansum ... nanstd)
// are expressions of the same reductions over `where(isnan(x), fill, x)`, which fuse into the
// reductions' kernels: one pass over x (two for nanvar), on every device, with no new fold.
#include <algorithm>
#include <limits>

#include "frontend/build.hpp"

namespace kiln {
using namespace detail;

namespace {
DType reduce_dtype(ReduceFn f, DType in) {
  switch (f) {
    case ReduceFn::Sum:
    case ReduceFn::Prod:
      return (in == DType::Bool || in == DType::Int32) ? DType::Int64 : in;
    case ReduceFn::Mean:
      return float_result(in);
    case ReduceFn::Min:
    case ReduceFn::Max:
      return in;
    case ReduceFn::All:
    case ReduceFn::Any:
      return DType::Bool;
    case ReduceFn::ArgMin:
    case ReduceFn::ArgMax:
      return DType::Int64;
  }
  return in;
}

// reduce(), its errors naming `op` (a nan-function names itself).
Array reduce_as(const std::string& op, ReduceFn f, const Array& a, std::vector<int> axes,
                bool keepdims) {
  if (!a.node()) throw Error(op + ": operand is an empty (default-constructed) Array");
  int rank = a.ndim();
  const bool arg = f == ReduceFn::ArgMin || f == ReduceFn::ArgMax;
  if (rank == 0) {
    // NumPy 2's reductions of a 0-d array take the integer axis 0 or -1 as no axis (the value
    // itself: np.sum(np.float64(3), axis=0) is 3.0, np.argmax(..., axis=-1) is 0), except mean
    // (and var, std), which raise.
    if (axes.size() == 1 && (axes[0] == 0 || axes[0] == -1) && f != ReduceFn::Mean) axes.clear();
    if (arg && axes.empty()) return reduce_as(op, f, a.reshape({1}), {}, false);  // index 0
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int ax : axes) {
    int k = normalize_axis(op, ax, rank);
    if (reduced[k]) throw Error(op + ": duplicate value in axes: " + std::to_string(ax));
    reduced[k] = true;
  }
  Shape folded;  // the reduced dims (whose product passes 2^62 only when a kept dim is 0)
  for (int k = 0; k < rank; ++k)
    if (reduced[k]) folded.push_back(a.shape()[k]);
  const int64_t count = checked::product(folded).value_or(INT64_MAX);
  if (count == 0 && (f == ReduceFn::Min || f == ReduceFn::Max || arg))
    throw Error(op + ": zero-size reduction over array of shape " + shape_str(a.shape()) +
                ", which has no identity");
  Shape shape;
  Chunks chunks;
  Attrs attrs;
  attrs.ints = {static_cast<int64_t>(f), keepdims ? 1 : 0};
  for (int k = 0; k < rank; ++k) {
    if (reduced[k]) {
      attrs.ints.push_back(k);
      if (keepdims) {
        shape.push_back(1);
        chunks.push_back({1});
      }
    } else {
      shape.push_back(a.shape()[k]);
      chunks.push_back(a.chunks()[k]);
    }
  }
  if (attrs.ints.size() == 2) {  // a 0-d operand: nothing to reduce but the conversion
    Array r = a.astype(reduce_dtype(f, a.dtype()));
    // NumPy's sum and mean start from the identity +0.0: sum(-0.0) is +0.0 (found by the fuzzer).
    bool adds = f == ReduceFn::Sum || f == ReduceFn::Mean;
    return adds && is_float(r.dtype()) ? r + 0.0 : r;
  }
  return Array(ctx().make(Op::Reduce, reduce_dtype(f, a.dtype()), shape, chunks, {a.node()},
                          std::move(attrs)));
}

std::vector<int> axis_list(std::optional<int> axis) {
  return axis ? std::vector<int>{*axis} : std::vector<int>{};
}

// num / count (an int64 count of elements) in the float type t: computed in float64 and cast, as
// NumPy's nan-functions divide (np.true_divide(..., out=, casting='unsafe')).
Array divide_by_count(const Array& num, const Array& count, DType t) {
  Array q = num.astype(DType::Float64) / count;
  return t == DType::Float64 ? q : q.astype(t);
}
}  // namespace

Array reduce(ReduceFn f, const Array& a, std::vector<int> axes, bool keepdims) {
  return reduce_as(reduce_name(f), f, a, std::move(axes), keepdims);
}

Array nanreduce(ReduceFn f, const Array& a, std::vector<int> axes, bool keepdims) {
  const std::string op = std::string("nan") + reduce_name(f);
  if (f == ReduceFn::All || f == ReduceFn::Any)
    throw Error(op + ": NumPy has no nan-variant of " + reduce_name(f) +
                " (NaN is true there); use " + reduce_name(f));
  if (!a.node()) throw Error(op + ": operand is an empty (default-constructed) Array");
  // Integers and bools hold no NaN: the plain reduction (as NumPy's nan-functions do).
  if (!is_float(a.dtype())) return reduce_as(op, f, a, std::move(axes), keepdims);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Array isnan_a = kiln::isnan(a);
  switch (f) {
    case ReduceFn::Sum:
      return reduce_as(op, f, where(isnan_a, 0.0, a), std::move(axes), keepdims);
    case ReduceFn::Prod:
      return reduce_as(op, f, where(isnan_a, 1.0, a), std::move(axes), keepdims);
    case ReduceFn::Mean: {  // NaN where every element is NaN (0 / 0), as NumPy
      Array sum = reduce_as(op, ReduceFn::Sum, where(isnan_a, 0.0, a), axes, keepdims);
      return divide_by_count(sum, kiln::logical_not(isnan_a).sum(axes, keepdims), a.dtype());
    }
    case ReduceFn::Min:
    case ReduceFn::Max: {  // NaN where every element is NaN, as NumPy (which also warns)
      Array folded =
          reduce_as(op, f, where(isnan_a, f == ReduceFn::Max ? -inf : inf, a), axes, keepdims);
      return where(isnan_a.all(axes, keepdims), nan, folded);
    }
    case ReduceFn::ArgMin:
    case ReduceFn::ArgMax: {  // -1 where every element is NaN (NumPy raises ValueError; JAX: -1)
      Array at =
          reduce_as(op, f, where(isnan_a, f == ReduceFn::ArgMax ? -inf : inf, a), axes, keepdims);
      return where(isnan_a.all(axes, keepdims), int64_t{-1}, at);
    }
    case ReduceFn::All:
    case ReduceFn::Any:
      break;
  }
  throw Error(op + ": no nan-variant");
}

Array nanargmin(const Array& a, std::optional<int> axis, bool keepdims) {
  return nanreduce(ReduceFn::ArgMin, a, axis_list(axis), keepdims);
}
Array nanargmax(const Array& a, std::optional<int> axis, bool keepdims) {
  return nanreduce(ReduceFn::ArgMax, a, axis_list(axis), keepdims);
}

// NumPy's _nanvar: the mean of the non-NaN elements, then the sum of their squared deviations over
// (count - ddof); NaN where that is 0 or less.
Array nanvar(const Array& a, std::vector<int> axes, bool keepdims, int ddof) {
  if (!a.node()) throw Error("nanvar: operand is an empty (default-constructed) Array");
  if (!is_float(a.dtype())) return a.var(std::move(axes), keepdims, ddof);
  Array isnan_a = kiln::isnan(a);
  Array sum = reduce_as("nanvar", ReduceFn::Sum, where(isnan_a, 0.0, a), axes, true);
  Array count = kiln::logical_not(isnan_a).sum(axes, true);  // with the sum, in the first pass
  Array d = where(isnan_a, 0.0, a - divide_by_count(sum, count, a.dtype()));
  Array squares = (d * d).sum(axes, keepdims);
  Array dof = (keepdims ? count : count.reshape(squares.shape())) - int64_t{ddof};
  Array v = divide_by_count(squares, dof, a.dtype());
  return where(dof <= int64_t{0}, std::numeric_limits<double>::quiet_NaN(), v);
}

Array nanstd(const Array& a, std::vector<int> axes, bool keepdims, int ddof) {
  return kiln::sqrt(nanvar(a, std::move(axes), keepdims, ddof));
}

Array Array::sum(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Sum, *this, ax, kd);
}
Array Array::prod(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Prod, *this, ax, kd);
}
Array Array::mean(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Mean, *this, ax, kd);
}
Array Array::min(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Min, *this, ax, kd);
}
Array Array::max(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Max, *this, ax, kd);
}
Array Array::all(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::All, *this, ax, kd);
}
Array Array::any(std::vector<int> ax, bool kd) const {
  return reduce(ReduceFn::Any, *this, ax, kd);
}

Array Array::argmin(std::optional<int> axis, bool kd) const {
  return reduce(ReduceFn::ArgMin, *this, axis_list(axis), kd);
}
Array Array::argmax(std::optional<int> axis, bool kd) const {
  return reduce(ReduceFn::ArgMax, *this, axis_list(axis), kd);
}

Array Array::var(std::vector<int> ax, bool kd, int ddof) const {
  Array x = astype(float_result(dtype()));
  Array d = x - x.mean(ax, true);
  Array v = (d * d).mean(ax, kd);
  if (ddof == 0) return v;
  int64_t n = size() / std::max<int64_t>(1, v.size());
  return v * (static_cast<double>(n) / static_cast<double>(std::max<int64_t>(n - ddof, 0)));
}

Array Array::std(std::vector<int> ax, bool kd, int ddof) const {
  return kiln::sqrt(var(ax, kd, ddof));
}

}  // namespace kiln
