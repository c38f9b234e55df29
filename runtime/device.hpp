// Device memory as the runtime uses it: buffers on a backend's devices (codegen/backend.hpp,
// DeviceMemory), pooled by device and size for reuse across runs (allocating GPU memory is slow
// and synchronizes), counted like host memory (bytes in use, peak), and the copies between the
// host and devices counted per run.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "codegen/backend.hpp"

namespace kiln {

// Copies of one run: how many and their bytes, host to device, device to host, between devices.
struct Transfers {
  int64_t to_device = 0, to_device_bytes = 0;
  int64_t to_host = 0, to_host_bytes = 0;
  int64_t between = 0, between_bytes = 0;
};

// A run's view of a backend's device memory: pooled buffers and counted copies. Thread-safe.
class DeviceArena {
 public:
  explicit DeviceArena(backend::DeviceMemory& m) : m_(m) {}
  // A buffer of `bytes` on `device`, back to the pool when the last reference goes.
  std::shared_ptr<void> buffer(int device, size_t bytes);
  void to_device(int device, void* dst, const void* src, size_t bytes);
  void to_host(int device, void* dst, const void* src, size_t bytes);
  void fill(int device, void* dst, uint64_t pattern, int bytes, size_t count) {
    m_.fill(device, dst, pattern, bytes, count);
  }
  void between(int to, void* dst, int from, const void* src, size_t bytes);
  // Waits for the device's queued work; throws what its kernels raised (DeviceMemory).
  void synchronize(int device) { m_.synchronize(device); }
  Transfers transfers() const;

 private:
  backend::DeviceMemory& m_;
  std::atomic<int64_t> to_device_{0}, to_device_bytes_{0}, to_host_{0}, to_host_bytes_{0},
      between_{0}, between_bytes_{0};
};

// Device bytes held by runs (all devices together; pooled free buffers do not count) and their
// peak since reset_device_peak_bytes().
int64_t device_bytes_in_use();
int64_t device_peak_bytes();
void reset_device_peak_bytes();

}  // namespace kiln
