#include "support/pages.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "support/flags.hpp"

namespace kiln {

namespace {
constexpr size_t kHugePage = size_t{2} << 20, kHugePageMin = size_t{4} << 20;
constexpr size_t kPoolMin = size_t{1} << 20, kPoolCap = size_t{1} << 30;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(KILN_SANITIZED)
constexpr bool kPoolBuilt = false;
#else
constexpr bool kPoolBuilt = true;
#endif

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

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
  static Pool* p = new Pool;  // never destroyed: buffers may be freed during static destruction
  return *p;
}

bool pooled(size_t rounded) { return kPoolBuilt && rounded >= kPoolMin && !flags().no_block_pool; }

// The size page_alloc really reserves for `bytes` (64-byte multiples; 2 MiB multiples from 4 MiB
// on). Buffers of one rounded size are interchangeable (the pool's key).
size_t page_rounded(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  return bytes >= kHugePageMin ? round_up(bytes, kHugePage) : round_up(bytes, 64);
}
}  // namespace

void* page_alloc(size_t bytes) {
  const size_t rounded = page_rounded(bytes);
  if (pooled(rounded))
    if (void* p = pool().take(rounded)) return p;
  if (rounded < kHugePageMin) return std::aligned_alloc(64, rounded);
  void* p = std::aligned_alloc(kHugePage, rounded);
  // Advice only: without THP (or under a sanitizer's allocator) the pages stay ordinary.
  if (p) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void page_free(void* p, size_t bytes) {
  if (!p) return;
  const size_t rounded = page_rounded(bytes);
  if (!pooled(rounded) || !pool().keep(p, rounded)) std::free(p);
}

}  // namespace kiln
