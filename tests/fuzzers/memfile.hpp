// An in-memory regular file (memfd) for the fuzz harnesses of readers that take a path: each input
// is written to it and the reader opens /proc/self/fd/N, so no disk is touched.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln_fuzz {

class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the file's contents with `size` bytes at `data`.
  void set(const void* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) {
      std::perror("ftruncate");
      std::abort();
    }
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, static_cast<const char*>(data) + done, size - done,
                                 static_cast<off_t>(done));
      if (n <= 0) {
        std::perror("pwrite");
        std::abort();
      }
      done += static_cast<size_t>(n);
    }
  }

  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// Aborts (a crash libFuzzer reports, with the input) with `what` when `cond` is false.
inline void check(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace kiln_fuzz
