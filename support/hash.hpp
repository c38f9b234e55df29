// Hash combining used by interning and cache keys.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln {

inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  // A 64-bit variant of boost::hash_combine with a murmur-style finaliser on the value.
  v *= 0xff51afd7ed558ccdULL;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ULL;
  v ^= v >> 33;
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

// Every byte of s, in order.
inline uint64_t hash_bytes(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = hash_mix(h, c);
  return h;
}

inline uint64_t hash_double(uint64_t h, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return hash_mix(h, bits);
}

}  // namespace kiln
