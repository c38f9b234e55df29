#include "runtime/distributed.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln::dist {

namespace {

std::mutex g_mu;
Transport* g_world = nullptr;  // owned (deleted by stop())
std::string g_plugin;
std::atomic<uint64_t> g_epoch{0};
int64_t g_cores = 1;  // plan_cores() while distributed (set by start())

// The directory of the file (libkiln.so or the program) that holds this code.
std::string own_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_dir), &info) || !info.dli_fname) return "";
  std::string f = info.dli_fname;
  auto cut = f.rfind('/');
  return cut == std::string::npos ? std::string(".") : f.substr(0, cut);
}

std::vector<std::string> candidates() {
  if (!flags().mpi_plugin.empty()) return {flags().mpi_plugin};
  std::vector<std::string> c;
  std::string dir = own_dir();
  if (!dir.empty()) c.push_back(dir + "/libkiln_mpi.so");
#ifdef KILN_MPI_BIN_TO_LIB  // an installed kiln: bin/ -> lib/
  if (!dir.empty()) c.push_back(dir + "/" KILN_MPI_BIN_TO_LIB "/libkiln_mpi.so");
#endif
#ifdef KILN_MPI_PLUGIN_BUILT
  c.push_back(KILN_MPI_PLUGIN_BUILT);
#endif
  return c;
}

void stop_at_exit() { stop(); }

}  // namespace

Transport* world() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_world;
}

void start(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) return;
  std::string tried;
  void* handle = nullptr;
  std::string path;
  for (const std::string& c : candidates()) {
    // RTLD_GLOBAL: MPI's own components (Open MPI's plugins) resolve libmpi's symbols.
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle) {
      path = c;
      break;
    }
    const char* e = dlerror();
    tried += "\n  " + c + ": " + (e ? e : "not loaded");
  }
  if (!handle)
    throw Error(
        "distributed: cannot load Kiln's MPI plugin (libkiln_mpi.so; KILN_MPI_PLUGIN names "
        "it). Tried:" +
        tried);
  auto create = reinterpret_cast<KilnTransportCreate>(dlsym(handle, "kiln_transport_create"));
  if (!create) throw Error("distributed: " + path + " has no kiln_transport_create");
  char why[512] = {0};
  Transport* t = create(kTransportAbi, argc, argv, why, sizeof why);
  if (!t) throw Error("distributed: " + path + " did not start: " + why);
  g_world = t;
  g_plugin = path;
  // Plans are shaped by the cores they run on (runtime/plan.cpp): every rank shapes its plans
  // for the fewest any rank has, so that all build the same plan.
  std::vector<int64_t> all(static_cast<size_t>(t->size()), 0);
  all[static_cast<size_t>(t->rank())] =
      std::numeric_limits<int32_t>::max() - std::max(1u, std::thread::hardware_concurrency());
  if (!t->allreduce_max(all.data(), t->size(), timeout_s()))
    throw Error("distributed: the ranks did not all start within KILN_MPI_TIMEOUT");
  g_cores = std::numeric_limits<int32_t>::max() - *std::max_element(all.begin(), all.end());
  static bool registered = false;
  if (!registered) {
    std::atexit(stop_at_exit);
    registered = true;
  }
}

void stop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_world) return;
  g_world->finalize();
  delete g_world;
  g_world = nullptr;
}

std::string plugin_path() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_plugin;
}

uint64_t next_epoch() { return ++g_epoch; }

int64_t plan_cores() {
  if (world()) return g_cores;
  return static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<int64_t> allgather(int64_t value) {
  Transport* w = world();
  if (!w) return {value};
  KILN_CHECK(value >= 0, "distributed allgather of a negative value");
  std::vector<int64_t> all(static_cast<size_t>(w->size()), 0);
  all[static_cast<size_t>(w->rank())] = value;
  if (!w->allreduce_max(all.data(), w->size(), timeout_s())) {
    std::fprintf(stderr,
                 "kiln: rank %d of %d: waited %g s (KILN_MPI_TIMEOUT) for the other "
                 "ranks; one has died or hangs: ending the job\n",
                 w->rank(), w->size(), timeout_s());
    w->abort(1);
  }
  return all;
}

namespace {
std::mutex g_res_mu;
std::map<const void*, std::shared_ptr<const Residency>> g_residency;
std::atomic<int64_t> g_res_count{0};
}  // namespace

int64_t residencies() { return g_res_count.load(std::memory_order_relaxed); }

int Residency::holder(int64_t first, int64_t last) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), first,
                             [](int64_t v, const Range& r) { return v < r.first; });
  if (it == ranges.begin()) return -1;
  --it;
  return first >= it->first && last <= it->last ? it->rank : -1;
}

void Residency::add_bytes(int64_t first, int64_t last, std::vector<int64_t>* per_rank) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), first,
                             [](int64_t v, const Range& r) { return v < r.first; });
  if (it != ranges.begin()) --it;
  for (; it != ranges.end() && it->first <= last; ++it) {
    const int64_t lo = std::max(first, it->first), hi = std::min(last, it->last);
    if (hi >= lo && it->rank >= 0 && static_cast<size_t>(it->rank) < per_rank->size())
      (*per_rank)[static_cast<size_t>(it->rank)] +=
          (hi - lo + 1) * static_cast<int64_t>(element_size);
  }
}

void set_residency(const void* data, std::shared_ptr<const Residency> r) {
  std::lock_guard<std::mutex> lock(g_res_mu);
  g_residency[data] = std::move(r);
  g_res_count = static_cast<int64_t>(g_residency.size());
}

void forget_residency(const void* data) {
  std::lock_guard<std::mutex> lock(g_res_mu);
  g_residency.erase(data);
  g_res_count = static_cast<int64_t>(g_residency.size());
}

std::shared_ptr<const Residency> residency(const void* data) {
  std::lock_guard<std::mutex> lock(g_res_mu);
  auto it = g_residency.find(data);
  return it == g_residency.end() ? nullptr : it->second;
}

double timeout_s() { return static_cast<double>(flags().mpi_timeout); }

}  // namespace kiln::dist
