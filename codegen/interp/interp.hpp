// The reference interpreter (--device interp): evaluates kernel IR in plain C++, no JIT, element
// by element as docs/KERNEL_IR.md defines each op. It is the oracle of every printer: element-wise
// and random values equal the CPU backend's bit for bit (transcendentals go through
// codegen/vector_math.hpp, the functions the LLVM kernels call); float sums, means and products
// fold in a fixed sequential order inside the same strips and so match within rounding error.
// Values are computed a tile of elements at a time, one op over the whole tile, so dispatch costs
// once per op per tile; it is still tens of times slower than compiled kernels.
#pragma once
#include <memory>

#include "codegen/backend.hpp"
#include "codegen/vector_math.hpp"

namespace kiln::interp {

// `math_mode` says which libmvec variant (or glibc's scalar functions) the compiled kernels use,
// asked when each kernel is prepared, so both backends evaluate the same functions.
std::unique_ptr<backend::Backend> make_backend(vm::MathMode (*math_mode)());

}  // namespace kiln::interp
