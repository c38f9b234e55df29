#include "runtime/device.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "support/flags.hpp"

namespace kiln {

namespace {

std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(KILN_SANITIZED)
constexpr bool kPoolBuilt = false;  // reuse would hide a use after free (cuda-emu: host memory)
#else
constexpr bool kPoolBuilt = true;
#endif
constexpr size_t kPoolCap = size_t{1} << 30;  // freed bytes kept, all devices together

// Freed device buffers by (memory, device, rounded size), for the process: never destroyed,
// since buffers may be returned during static destruction.
struct Pool {
  std::mutex mu;
  std::map<std::tuple<backend::DeviceMemory*, int, size_t>, std::vector<void*>> free;
  size_t bytes = 0;
};
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

size_t rounded_size(size_t bytes) { return (std::max<size_t>(bytes, 1) + 255) / 256 * 256; }

void count_in(size_t bytes) {
  int64_t now = g_in_use.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

std::shared_ptr<void> DeviceArena::buffer(int device, size_t bytes) {
  const size_t rounded = rounded_size(bytes);
  const bool pooled = kPoolBuilt && !flags().no_block_pool;
  backend::DeviceMemory* m = &m_;
  void* p = nullptr;
  if (pooled) {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    auto it = pl.free.find({m, device, rounded});
    if (it != pl.free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      pl.bytes -= rounded;
    }
  }
  if (!p) p = m->alloc(device, rounded);
  count_in(rounded);
  return std::shared_ptr<void>(p, [m, device, rounded, pooled](void* q) {
    g_in_use.fetch_sub(static_cast<int64_t>(rounded));
    if (pooled) {
      Pool& pl = pool();
      std::lock_guard<std::mutex> lock(pl.mu);
      if (pl.bytes + rounded <= kPoolCap) {
        pl.free[{m, device, rounded}].push_back(q);
        pl.bytes += rounded;
        return;
      }
    }
    m->free(device, q, rounded);
  });
}

void DeviceArena::to_device(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  m_.to_device(device, dst, src, bytes);
  to_device_.fetch_add(1, std::memory_order_relaxed);
  to_device_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void DeviceArena::to_host(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  m_.to_host(device, dst, src, bytes);
  to_host_.fetch_add(1, std::memory_order_relaxed);
  to_host_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void DeviceArena::between(int to, void* dst, int from, const void* src, size_t bytes) {
  if (bytes == 0) return;
  m_.between(to, dst, from, src, bytes);
  between_.fetch_add(1, std::memory_order_relaxed);
  between_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

Transfers DeviceArena::transfers() const {
  Transfers t;
  t.to_device = to_device_.load();
  t.to_device_bytes = to_device_bytes_.load();
  t.to_host = to_host_.load();
  t.to_host_bytes = to_host_bytes_.load();
  t.between = between_.load();
  t.between_bytes = between_bytes_.load();
  return t;
}

int64_t device_bytes_in_use() { return g_in_use.load(); }
int64_t device_peak_bytes() { return g_peak.load(); }
void reset_device_peak_bytes() { g_peak.store(g_in_use.load()); }

}  // namespace kiln
