// Kiln's host allocator: 64-byte aligned blocks, with the bytes in use and their peak tracked
// (the peak_bytes the CLI reports and memory tests bound).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln {

void* host_alloc(size_t bytes);
void host_free(void* p, size_t bytes);
// A buffer freed through host_free when the last reference goes.
std::shared_ptr<void> host_buffer(size_t bytes);

int64_t bytes_in_use();
int64_t peak_bytes();
void reset_peak_bytes();  // peak := current

}  // namespace kiln
