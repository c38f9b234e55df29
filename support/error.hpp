// Error types. A kiln::Error is a user error (bad shape, dtype, axis, slice, file, ...): its
// message names the operation, the operands and what was expected. An InternalError is a bug in
// Kiln.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
namespace kiln {

// What an Error reports, for bindings that raise typed exceptions (Python: kiln.KilnError is a
// ValueError; its subclasses KilnTypeError and KilnMemoryError are also TypeError and MemoryError).
enum class ErrorKind : unsigned char {
  Value,   // a bad value: shape, axis, slice, chunks, file contents, a failed factorization, ...
  Type,    // an operand's dtype the operation does not take (NumPy raises TypeError there)
  Memory,  // an allocation failed
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::Value)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what)
      : std::logic_error("kiln internal error: " + what) {}
};

// "(3, 4)" for a shape, "(2)" style is avoided: one-element shapes print as "(5,)" like NumPy.
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace kiln
#pragma GCC visibility pop

#define KILN_CHECK(cond, msg)                                                                   \
  do {                                                                                          \
    if (!(cond))                                                                                \
      throw ::kiln::InternalError(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + \
                                  (msg));                                                       \
  } while (0)
