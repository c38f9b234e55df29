#include "runtime/memory.hpp"

#include <atomic>
#include <string>

#include "support/error.hpp"
#include "support/flags.hpp"
#include "support/pages.hpp"

namespace kiln {

namespace {
std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

void* host_alloc(size_t bytes) {
  int64_t limit = flags().fail_alloc_above;
  void* p = nullptr;
  if (!(limit > 0 && bytes > static_cast<size_t>(limit))) p = page_alloc(bytes);
  if (!p) throw Error("compute: out of memory allocating " + std::to_string(bytes) + " bytes");
  int64_t now = g_in_use.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void host_free(void* p, size_t bytes) {
  if (!p) return;
  page_free(p, bytes);
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
