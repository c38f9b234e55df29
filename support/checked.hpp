// Checked size arithmetic: every element count, byte size, block count and offset that Kiln
// derives from user sizes goes through these helpers (__builtin_*_overflow), from the frontend's
// shapes and chunk grids to the plan's arrays and blocks and the executor's allocations. They run
// where sizes are decided (building nodes, planning, allocating), never per element.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "support/error.hpp"

namespace kiln {

// The most elements an array may have, and the largest dimension: Kiln indexes elements with
// signed 64-bit offsets and strides, with room for a stride times an extent.
constexpr int64_t kMaxElements = int64_t{1} << 62;
// The most blocks a chunk grid may have: a plan holds a task (and its bookkeeping) per block.
constexpr int64_t kMaxBlocks = int64_t{1} << 24;
// The most elements one block may have: a block is one task on one core (or one kernel launch),
// and a task of 2^34 (1.7e10) elements already runs for tens of seconds on a CPU core; the seeds'
// blocks hold 1e8 elements. Beyond this a chunking is a mistake (it would run for hours, years at
// 1e18), not a workload.
constexpr int64_t kMaxBlockElements = int64_t{1} << 34;  // messages say "2^34"

namespace checked {

// a * b and a + b, or nullopt where the exact result does not fit T.
template <class T>
std::optional<T> mul(T a, T b) {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
template <class T>
std::optional<T> add(T a, T b) {
  T r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of `dims` (an element count, a block count), or nullopt where it does not fit
// int64 or a dimension is negative. A zero anywhere gives 0, whatever the other dimensions.
inline std::optional<int64_t> product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (overflow) return std::nullopt;
  return n;
}

// elements * itemsize as a byte count, or nullopt where it does not fit size_t (or int64, which
// byte counters and offsets use) or elements is negative.
inline std::optional<size_t> bytes(int64_t elements, size_t itemsize) {
  if (elements < 0) return std::nullopt;
  size_t r;
  if (__builtin_mul_overflow(static_cast<size_t>(elements), itemsize, &r) ||
      r > static_cast<size_t>(INT64_MAX))
    return std::nullopt;
  return r;
}

// ceil(n / d) for n >= 0, d > 0, without forming n + d - 1.
inline int64_t ceil_div(int64_t n, int64_t d) { return n / d + (n % d != 0 ? 1 : 0); }

}  // namespace checked

// A byte count for people: "17179869184 bytes (16.0 GiB)".
inline std::string bytes_str(uint64_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::string s = std::to_string(bytes) + " bytes";
  if (bytes < 1024) return s;
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%.1f %s)", v, units[u]);
  return s + buf;
}

// A count for people: "4611686014132420609 (4.6e18)" ("123" below a million).
inline std::string count_str(int64_t n) {
  std::string s = std::to_string(n);
  if (n < 1000000) return s;
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%.2g)", static_cast<double>(n));
  return s + buf;
}

}  // namespace kiln
