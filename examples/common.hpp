// The examples' command line: N and C (and K where there is one), defaults as `kiln run`'s.
#pragma once
#include <cstdint>
#include <cstdlib>

inline int64_t arg(int argc, char** argv, int k, int64_t fallback) {
  return argc > k ? std::strtoll(argv[k], nullptr, 10) : fallback;
}
