// Runs a shell command for the tests of Kiln's programs (the kiln command, kiln_bench).
#pragma once
#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include <sys/wait.h>

namespace kt {

// Runs `command` under `timeout 300` (a hang fails the test with status 124 instead of stalling
// the suite); returns its standard output and sets *rc to its exit status.
inline std::string shell(const std::string& command, int* rc = nullptr) {
  std::string cmd = "timeout 300 " + command;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  int status = pclose(p.release());
  if (rc) *rc = WEXITSTATUS(status);
  return out;
}

}  // namespace kt
