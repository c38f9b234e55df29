// The on-disk cache of compiled artifacts (CPU objects, cuda-emu shared objects, cubins), one file
// per entry in flags().cache_dir. Nothing read from it is trusted: every entry carries a header
// (format version, artifact kind, the 128-bit key of what it was built from, the payload's length
// and its XXH3-128) that is checked on every load. An entry that fails any check is reported once
// on stderr, counted (rejected()), deleted, and the caller rebuilds it: a damaged cache costs a
// compile, never a result. Entries are written to a temporary file (every write and the close
// checked, fsynced) and renamed into place, so a reader never sees a partial entry and concurrent
// processes may share one directory. A directory that cannot be written (read-only, full, not a
// directory) turns the disk cache off for writing, with one warning; the backends' in-memory
// caches go on working.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cache {

// What an entry holds; part of its header, so an entry of one kind never loads as another.
enum class Kind : uint32_t { CpuObject = 1, EmuLibrary = 2, Cubin = 3 };

// XXH3-128 of everything the artifact depends on (source or kernel IR, target, compiler, mode).
struct Key {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Key& o) const { return lo == o.lo && hi == o.hi; }
  std::string hex() const;  // 32 hex digits: the entry's file name is built from it
};
Key key_of(std::string_view description);

// The entry's path: flags().cache_dir + "/" + prefix + key.hex() + suffix, or "" when the disk
// cache is off (KILN_CACHE_DIR="").
std::string path_of(std::string_view prefix, const Key& key, std::string_view suffix);

// The payload of a valid entry, or nullopt (no entry, or a rejected one, which is deleted).
std::optional<std::string> load(const std::string& path, Kind kind, const Key& key);

// Writes an entry atomically; failures are not errors (a warning, once, and memory-only caching).
void store(const std::string& path, Kind kind, const Key& key, std::string_view payload);

// Reports and deletes an entry whose payload passed the checks but could not be used (a shared
// object that does not load): the caller rebuilds it.
void reject(const std::string& path, const std::string& why);

// Entries rejected by this process so far (kiln run --json: cache_rejected).
int64_t rejected();

// Whether store() still writes (false after a failed write turned the disk cache off).
bool writable();

// The whole file format, for tests that damage entries on purpose.
constexpr size_t kHeaderBytes = 64;
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 31;  // larger files are rejected unread

}  // namespace kiln::cache
