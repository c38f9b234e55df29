// The C++ type of a dtype's elements in memory (bool: uint8_t, 0 or 1), for code that handles
// elements on the host: with_element_type(t, [&](auto zero) { using T = decltype(zero); ... }).
#pragma once
#include <cstdint>

#include "ir/dtype.hpp"

namespace kiln {

template <class F>
void with_element_type(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(uint8_t{});
    case DType::Int32:
      return f(int32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
  }
}

}  // namespace kiln
