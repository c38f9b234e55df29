// Files read and written defensively: only regular files are read (a FIFO or a device is refused
// before anything blocks on it), reads are capped, every write and the close are checked, and
// every error names the file and the reason (strerror).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::files {

// The whole of a regular file of at most max_bytes, read to its end (a /proc file reports size
// 0). A directory, FIFO, socket or device is refused before it is opened. Throws
// Error("<what> '<path>': <reason>").
std::string read_regular(const std::string& path, uint64_t max_bytes, std::string_view what);

// Writes all of data to fd, retrying short writes and EINTR; false with errno set on failure.
bool write_all(int fd, std::string_view data);

// Creates or truncates path and writes data; every write and the close are checked. Throws
// Error("<what> '<path>': <reason>"), `what` saying who could not write what ("kiln report: cannot
// write").
void write(const std::string& path, std::string_view data, std::string_view what);

// Whether a and b name one existing file (the same device and inode): an output that would
// overwrite an input.
bool same_file(const std::string& a, const std::string& b);

}  // namespace kiln::files
