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

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
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
