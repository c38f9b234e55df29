#include "support/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "support/error.hpp"

namespace kiln::files {

std::string read_regular(const std::string& path, uint64_t max_bytes, std::string_view what) {
  auto fail = [&](const std::string& why) {
    throw Error(std::string(what) + " '" + path + "': " + why);
  };
  const std::string too_large =
      "larger than the " + std::to_string(max_bytes) + " bytes this reader accepts";
  // Checked before opening (opening a FIFO for reading waits for a writer; a device may do
  // anything on open) and again on the descriptor (the path may have changed in between).
  auto check = [&](const struct stat& st) {
    if (S_ISDIR(st.st_mode)) fail("it is a directory");
    if (!S_ISREG(st.st_mode)) fail("not a regular file (a FIFO, socket or device)");
    if (static_cast<uint64_t>(st.st_size) > max_bytes)
      fail("the file is " + std::to_string(st.st_size) + " bytes, " + too_large);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(std::strerror(errno));
  check(st);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) fail(std::strerror(errno));
  check(st);
  // To the end of the file, which may hold more than st_size said (it grew, or it is a /proc
  // file that reports size 0), but never more than the cap.
  std::string out(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      if (got > max_bytes) fail(too_large);
      out.resize(std::min<uint64_t>(std::max<size_t>(2 * got, 4096), max_bytes + 1));
    }
    const ssize_t n = ::read(fd, &out[got], out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) fail(too_large);
  out.resize(got);
  return out;
}

bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void write(const std::string& path, std::string_view data, std::string_view what) {
  auto fail_write = [&](int e) {
    throw Error(std::string(what) + " '" + path + "': " + std::strerror(e));
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_write(errno);
  if (!write_all(fd, data)) {
    int e = errno;
    ::close(fd);
    fail_write(e);
  }
  if (::close(fd) != 0) fail_write(errno);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace kiln::files
