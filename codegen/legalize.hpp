// legalize: rewrites the NumPy-level element functions that are compositions of simpler ones
// into those, once, in kernel IR, so that every printer implements only the primitives
// (docs/KERNEL_IR.md §3, "Legalized functions"). Runs at the end of lower_group; the values are
// the same bits as the composite definitions give (tests/codegen/ops_table_test.cpp).
//
//   sign(x)           floats: x > 0 ? 1 : x < 0 ? -1 : x != x ? x : 0
//                     integers: int(x > 0) - int(x < 0); bool: x
//   sigmoid(x)        1 / (1 + exp(-x))
//   isfinite(x)       floats: |x| < inf; others: true
//   logical_not(x)    bool: invert(x); others: x == 0
//   remainder(a, b)   r = fmod(a, b); r + b where r and b have opposite signs and r != 0;
//                     floats: a zero r takes b's sign (copysign(0, b))
//   floor_divide(a, b) floats: NumPy's npy_floor_divide from fmod, floor and copysign
//                     (integers stay a primitive: floor_divide with x // 0 = 0)
#pragma once
#include "codegen/kernel_ir.hpp"

namespace kiln::kir {

Kernel legalize(const Kernel& k);

// Whether a printer ever sees this function on operands of type t (false: legalize rewrote it).
bool is_primitive(UnaryFn f, DType t);
bool is_primitive(BinaryFn f, DType t);

}  // namespace kiln::kir
