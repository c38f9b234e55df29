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

// The memory this process can use, in bytes: the machine's physical memory, or less where a
// cgroup (memory.max, a container's limit) or RLIMIT_AS (ulimit -v) allows less. Measured once.
// Sizes are checked against it before anything is allocated: a buffer larger than it, or a plan
// whose bookkeeping would take half of it, is a kiln::Error.
int64_t usable_memory();
// Tests: pretend the machine has `bytes` of memory (0: measure it again).
void set_usable_memory_for_testing(int64_t bytes);

int64_t bytes_in_use();
int64_t peak_bytes();
void reset_peak_bytes();  // peak := current

}  // namespace kiln
