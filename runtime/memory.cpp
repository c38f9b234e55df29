#include "runtime/memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>

#include "support/checked.hpp"
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
  if (!p)
    throw Error("compute: out of memory allocating " + std::to_string(bytes) + " bytes",
                ErrorKind::Memory);
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

namespace {
// The least memory limit of the process's cgroups, from its own up to the root (v2: memory.max;
// v1: memory.limit_in_bytes), or 0 where none is set.
int64_t cgroup_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  int64_t least = 0;
  while (std::getline(self, line)) {
    std::string root, file;
    size_t at;
    if (line.rfind("0::", 0) == 0) {
      root = "/sys/fs/cgroup", file = "memory.max", at = 3;
    } else if ((at = line.find(":memory:")) != std::string::npos) {
      root = "/sys/fs/cgroup/memory", file = "memory.limit_in_bytes", at += 8;
    } else {
      continue;
    }
    std::string path = line.substr(at);
    if (path.empty() || path[0] != '/') continue;
    while (true) {
      std::ifstream f(root + (path == "/" ? std::string() : path) + "/" + file);
      int64_t v = 0;
      if (f >> v && v > 0 && (least == 0 || v < least)) least = v;  // "max": no number
      if (path == "/") break;
      size_t slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return least;
}

int64_t measure_memory() {
  int64_t pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t m = pages > 0 && page > 0 ? checked::mul(pages, page).value_or(INT64_MAX) : INT64_MAX;
  if (int64_t c = cgroup_limit(); c > 0) m = std::min(m, c);
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < static_cast<rlim_t>(m))
    m = static_cast<int64_t>(rl.rlim_cur);
  return m;
}

std::atomic<int64_t> g_memory{0};
}  // namespace

int64_t usable_memory() {
  int64_t m = g_memory.load(std::memory_order_relaxed);
  if (m == 0) {
    m = measure_memory();
    g_memory.store(m, std::memory_order_relaxed);
  }
  return m;
}

void set_usable_memory_for_testing(int64_t bytes) { g_memory.store(bytes); }

int64_t bytes_in_use() { return g_in_use.load(); }
int64_t peak_bytes() { return g_peak.load(); }
void reset_peak_bytes() { g_peak.store(g_in_use.load()); }

}  // namespace kiln
