#include "ir/dtype.hpp"

#include "support/error.hpp"

namespace kiln {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
  }
  return 0;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_int(a) && is_int(b)) return DType::Int64;
  if (is_float(a) && is_float(b)) return DType::Float64;
  // One integer, one float: float32 cannot hold int32/int64 exactly, so NumPy goes to float64.
  return DType::Float64;
}

DType promote_scalar(DType a, ScalarKind k) {
  switch (k) {
    case ScalarKind::Bool:
      return a;
    case ScalarKind::Int:
      return a == DType::Bool ? DType::Int64 : a;
    case ScalarKind::Float:
      return is_float(a) ? a : DType::Float64;
  }
  return a;
}

DType float_result(DType t) { return t == DType::Float32 ? DType::Float32 : DType::Float64; }

std::string dtype_npy_descr(DType t) {
  switch (t) {
    case DType::Bool:
      return "|b1";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
  }
  return "";
}

DType dtype_from_npy_descr(const std::string& d, const std::string& what) {
  if (d == "|b1") return DType::Bool;
  if (d == "<i4") return DType::Int32;
  if (d == "<i8") return DType::Int64;
  if (d == "<f4") return DType::Float32;
  if (d == "<f8") return DType::Float64;
  throw Error(what + ": unsupported dtype descriptor '" + d +
                  "' (expected one of |b1 <i4 <i8 <f4 <f8: bool, int32, int64, float32, float64)",
              ErrorKind::Type);
}

}  // namespace kiln
