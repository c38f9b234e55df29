// Element types and NumPy's promotion rules.
#pragma once
#include <cstdint>
#include <string>

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
namespace kiln {

enum class DType : uint8_t { Bool, Int32, Int64, Float32, Float64 };

inline constexpr int kNumDTypes = 5;

const char* dtype_name(DType t);  // "bool", "int32", ...
size_t dtype_size(DType t);       // bytes per element
inline bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }
inline bool is_int(DType t) { return t == DType::Int32 || t == DType::Int64; }

// The kind of a scalar written in user code: a C++ bool, integer or floating-point value. Scalars
// are "weak" (NEP 50): they take the array's type when the array's kind can hold them.
enum class ScalarKind : uint8_t { Bool, Int, Float };

// NumPy's result_type for two arrays (int32 + float32 -> float64, bool + int32 -> int32, ...).
DType promote(DType a, DType b);
// Result type of array (dtype a) op weak scalar (kind k).
DType promote_scalar(DType a, ScalarKind k);
// The float type a float ufunc (sin, exp, true division, ...) computes in for input type t.
DType float_result(DType t);

// NumPy's .npy descriptor ("<f8", "|b1", ...) and back; throws kiln::Error for unsupported ones.
std::string dtype_npy_descr(DType t);
DType dtype_from_npy_descr(const std::string& descr, const std::string& what);

}  // namespace kiln
#pragma GCC visibility pop
