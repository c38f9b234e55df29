// How reductions fold, written once for every host-side folder: the interpreter's kernels and the
// runtime's combine tasks call these; the LLVM printer emits the same formulas
// (docs/KERNEL_IR.md §8; tests/codegen/ops_table_test.cpp compares them). T is the accumulator's
// C++ type: double, float, int64_t, int32_t, or uint8_t (0 or 1) for bool.
#pragma once
#include <cstdint>
#include <type_traits>

#include "codegen/kernel_ir.hpp"

namespace kiln::kir {

template <class T>
T reduce_identity(ReduceFn fn, DType t) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(reduce_identity_f(fn));
  else
    return static_cast<T>(reduce_identity_i(fn, t));
}

// The type integer folds compute in (unsigned: wrapping, no UB); floats: themselves.
template <class T, bool = std::is_integral_v<T>>
struct FoldType {
  using type = T;
};
template <class T>
struct FoldType<T, true> {
  using type = std::make_unsigned_t<T>;
};

// `acc (+) v` (§8.3): integer sums and products wrap (unsigned arithmetic, no UB); min and max
// propagate NaN, and a tie gives v.
template <class T>
T reduce_fold(ReduceFn fn, T acc, T v) {
  constexpr bool fp = std::is_floating_point_v<T>;
  using U = typename FoldType<T>::type;
  switch (fn) {
    case ReduceFn::Sum:
    case ReduceFn::Mean:
      return static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(v)));
    case ReduceFn::Prod:
      return static_cast<T>(static_cast<U>(static_cast<U>(acc) * static_cast<U>(v)));
    case ReduceFn::Min:
      if constexpr (fp) return (acc < v || acc != acc) ? acc : v;
      return v < acc ? v : acc;
    case ReduceFn::Max:
      if constexpr (fp) return (acc > v || acc != acc) ? acc : v;
      return v > acc ? v : acc;
    case ReduceFn::All:
      return static_cast<T>(acc && v);
    case ReduceFn::Any:
      return static_cast<T>(acc || v);
    case ReduceFn::ArgMin:
    case ReduceFn::ArgMax:
      break;
  }
  return acc;  // argmin/argmax fold through arg_fold
}

// argmin/argmax: v is strictly better than acc (smaller or larger; for floats also a NaN over a
// number). Integers compare signed, bool (uint8_t) unsigned.
template <class T>
bool arg_better(ReduceFn fn, T v, T acc) {
  bool better = fn == ReduceFn::ArgMax ? v > acc : v < acc;
  if constexpr (std::is_floating_point_v<T>) better = better || (v != v && acc == acc);
  return better;
}

// One step in index order (§8.2): the candidate (v, idx) replaces (acc, acc_idx) if idx >= 0 and
// acc_idx < 0 or v is strictly better, so ties keep the earlier element.
template <class T>
void arg_fold(ReduceFn fn, T& acc, int64_t& acc_idx, T v, int64_t idx) {
  if (idx >= 0 && (acc_idx < 0 || arg_better(fn, v, acc))) {
    acc = v;
    acc_idx = idx;
  }
}

// Partials of blocks in any order (§8.3): as arg_fold, and a tie (equal values, or two NaNs)
// goes to the smaller index.
template <class T>
void arg_combine(ReduceFn fn, T& acc, int64_t& acc_idx, T v, int64_t idx) {
  bool tie = v == acc;
  if constexpr (std::is_floating_point_v<T>) tie = tie || (v != v && acc != acc);
  if (idx >= 0 && (acc_idx < 0 || arg_better(fn, v, acc) || (tie && idx < acc_idx))) {
    acc = v;
    acc_idx = idx;
  }
}

}  // namespace kiln::kir
