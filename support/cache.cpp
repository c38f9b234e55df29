#include "support/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "support/files.hpp"
#include "support/flags.hpp"

namespace kiln::cache {

namespace {

// The header, 64 bytes, little-endian as written by this (x86-64) host:
//   0  magic "KILNCCH\0"     8  format version (u32)   12 kind (u32)
//  16  key lo, hi (u64 x2)  32  payload bytes (u64)   40 payload XXH3-128 lo, hi (u64 x2)
//  56  XXH3-64 of bytes 0..55
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'C', 'H', '\0'};
constexpr uint32_t kFormatVersion = 1;

std::atomic<int64_t> g_rejected{0};
std::atomic<bool> g_writable{true};
std::atomic<uint64_t> g_counter{0};
std::once_flag g_warned;

template <class T>
void put(char* at, T v) {
  std::memcpy(at, &v, sizeof v);
}
template <class T>
T get(const char* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

std::string header(Kind kind, const Key& key, std::string_view payload) {
  std::string h(kHeaderBytes, '\0');
  std::memcpy(h.data(), kMagic, 8);
  put<uint32_t>(&h[8], kFormatVersion);
  put<uint32_t>(&h[12], static_cast<uint32_t>(kind));
  put<uint64_t>(&h[16], key.lo);
  put<uint64_t>(&h[24], key.hi);
  put<uint64_t>(&h[32], payload.size());
  XXH128_hash_t ph = XXH3_128bits(payload.data(), payload.size());
  put<uint64_t>(&h[40], ph.low64);
  put<uint64_t>(&h[48], ph.high64);
  put<uint64_t>(&h[56], XXH3_64bits(h.data(), 56));
  return h;
}

// Why an entry is not valid, or "" when it is.
std::string check(const std::string& entry, Kind kind, const Key& key) {
  if (entry.size() < kHeaderBytes) return "shorter than its header";
  const char* h = entry.data();
  if (std::memcmp(h, kMagic, 8) != 0) return "not a Kiln cache entry";
  if (get<uint64_t>(h + 56) != XXH3_64bits(h, 56)) return "header checksum mismatch";
  if (get<uint32_t>(h + 8) != kFormatVersion) return "another format version";
  if (get<uint32_t>(h + 12) != static_cast<uint32_t>(kind)) return "another kind of artifact";
  if (get<uint64_t>(h + 16) != key.lo || get<uint64_t>(h + 24) != key.hi)
    return "built from something else (key mismatch)";
  if (get<uint64_t>(h + 32) != entry.size() - kHeaderBytes)
    return "truncated or extended (length mismatch)";
  XXH128_hash_t ph = XXH3_128bits(h + kHeaderBytes, entry.size() - kHeaderBytes);
  if (get<uint64_t>(h + 40) != ph.low64 || get<uint64_t>(h + 48) != ph.high64)
    return "payload checksum mismatch";
  return "";
}

void warn_unwritable(const std::string& dir, const std::string& why) {
  g_writable = false;
  std::call_once(g_warned, [&] {
    std::fprintf(stderr,
                 "kiln: warning: the kernel cache '%s' cannot be written (%s); compiled kernels "
                 "are kept in memory only\n",
                 dir.c_str(), why.c_str());
  });
}

}  // namespace

std::string Key::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

Key key_of(std::string_view description) {
  XXH128_hash_t h = XXH3_128bits(description.data(), description.size());
  return {h.low64, h.high64};
}

std::string path_of(std::string_view prefix, const Key& key, std::string_view suffix) {
  const std::string& dir = flags().cache_dir;
  if (dir.empty()) return "";
  return dir + "/" + std::string(prefix) + key.hex() + std::string(suffix);
}

std::optional<std::string> load(const std::string& path, Kind kind, const Key& key) {
  if (path.empty()) return std::nullopt;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // not cached (or not readable)
  std::string entry;
  try {
    entry = files::read_regular(path, kMaxEntryBytes, "cache entry");
  } catch (const std::exception& e) {
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= kMaxEntryBytes)
      return std::nullopt;  // unreadable (permissions): compile, do not delete
    reject(path, "not a regular file of a sane size");
    return std::nullopt;
  }
  std::string why = check(entry, kind, key);
  if (!why.empty()) {
    reject(path, why);
    return std::nullopt;
  }
  entry.erase(0, kHeaderBytes);
  return entry;
}

void reject(const std::string& path, const std::string& why) {
  ++g_rejected;
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::fprintf(stderr, "kiln: cache entry '%s' rejected (%s): %s, rebuilding it\n", path.c_str(),
               why.c_str(), ec ? "could not delete it" : "deleted");
}

void store(const std::string& path, Kind kind, const Key& key, std::string_view payload) {
  if (path.empty() || !g_writable) return;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return warn_unwritable(dir, ec.message());
  const std::string tmp =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return warn_unwritable(dir, std::strerror(errno));
  const std::string head = header(kind, key, payload);
  bool ok = files::write_all(fd, head) && files::write_all(fd, payload) && ::fsync(fd) == 0;
  int e = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    warn_unwritable(dir, std::strerror(e));
  }
}

int64_t rejected() { return g_rejected; }

bool writable() { return g_writable; }

}  // namespace kiln::cache
