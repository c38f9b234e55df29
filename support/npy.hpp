// NumPy .npy files: header parsing, read-only memory mapping and writing.
//
// Format (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): the magic
// "\x93NUMPY", a major and a minor version byte, a little-endian header length (uint16 for version
// 1.0, uint32 for 2.0 and 3.0), then the header: a Python dict literal such as
//   {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and ended by '\n', then the raw C-ordered element data.
//
// Only numeric element types (bool, signed/unsigned integers, floats, complex) in little-endian or
// byte-order-free layout and C order are supported. Every problem throws kiln::Error naming the
// operation ("load_npy" or "save_npy"), the path and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct NpyInfo {
  std::string descr;           // NumPy dtype descriptor as stored, e.g. "<f8", "|b1"
  std::vector<int64_t> shape;  // () for a 0-d scalar
  bool fortran_order;          // always false for a successfully read file (true is rejected)
  size_t data_offset;          // byte offset of the element data in the file
};

struct MappedNpy {
  NpyInfo info;
  std::shared_ptr<void> owner;  // keeps the mapping alive; null when the array is empty
  const void* data;             // first element; nullptr when nbytes == 0
  size_t nbytes;                // element count * item size
};

// Reads and validates the header of the .npy file at `path` (including that the file is long
// enough to hold all the data the header announces).
NpyInfo read_npy_header(const std::string& path);

// Memory-maps the .npy file at `path` read-only (private mapping), so data pages are read lazily.
MappedNpy map_npy(const std::string& path);

// Writes a C-ordered array as a .npy file (format 1.0, or 2.0 when the header needs more than
// 65535 bytes), laid out like numpy.save: the data starts at a multiple of 64 bytes. `nbytes`
// must equal the element count of `shape` times the item size of `descr`.
void save_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, size_t nbytes);

}  // namespace kiln
