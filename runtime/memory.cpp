#include "runtime/memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln {

namespace {
std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};

// Freed blocks of at least kPoolMin bytes are kept, up to kPoolCap bytes in all, and handed out
// again to an allocation of the same (rounded) size: an iterative solver's blocks, the same
// shapes every iteration, then come from memory already mapped instead of fresh pages that
// fault in one by one (zeroing those pages was a fifth of a Newton step at 1e6 x 100). Off
// under the sanitizers, where reuse would hide a use after free, and with KILN_NO_BLOCK_POOL=1.
constexpr size_t kPoolMin = size_t{1} << 20, kPoolCap = size_t{1} << 30;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(KILN_SANITIZED)
constexpr bool kPoolBuilt = false;
#else
constexpr bool kPoolBuilt = true;
#endif

struct Pool {
  std::mutex mu;
  std::unordered_multimap<size_t, void*> blocks;
  size_t bytes = 0;

  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = blocks.find(rounded);
    if (it == blocks.end()) return nullptr;
    void* p = it->second;
    blocks.erase(it);
    bytes -= rounded;
    return p;
  }

  bool keep(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mu);
    if (bytes + rounded > kPoolCap) return false;
    blocks.emplace(rounded, p);
    bytes += rounded;
    return true;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may be freed during static destruction
  return *p;
}

bool pooled(size_t rounded) { return kPoolBuilt && rounded >= kPoolMin && !flags().no_block_pool; }

size_t rounded_size(size_t bytes) { return (std::max<size_t>(bytes, 1) + 63) / 64 * 64; }
}  // namespace

void* host_alloc(size_t bytes) {
  const size_t rounded = rounded_size(bytes);
  int64_t limit = flags().fail_alloc_above;
  void* p = nullptr;
  if (!(limit > 0 && bytes > static_cast<size_t>(limit))) {
    if (pooled(rounded)) p = pool().take(rounded);
    if (!p) p = std::aligned_alloc(64, rounded);
  }
  if (!p) throw Error("compute: out of memory allocating " + std::to_string(bytes) + " bytes");
  int64_t now = g_in_use.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void host_free(void* p, size_t bytes) {
  if (!p) return;
  const size_t rounded = rounded_size(bytes);
  if (!pooled(rounded) || !pool().keep(p, rounded)) std::free(p);
  g_in_use.fetch_sub(static_cast<int64_t>(bytes));
}

std::shared_ptr<void> host_buffer(size_t bytes) {
  void* p = host_alloc(bytes);
  return std::shared_ptr<void>(p, [bytes](void* q) { host_free(q, bytes); });
}

int64_t bytes_in_use() { return g_in_use.load(); }
int64_t peak_bytes() { return g_peak.load(); }
void reset_peak_bytes() { g_peak.store(g_in_use.load()); }

}  // namespace kiln
