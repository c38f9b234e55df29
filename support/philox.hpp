// Reference counter-based random number generator for Kiln.
//
// Kiln's random array constructors (uniform, normal, integers) are defined as pure functions of
// (seed, stream, flat element index), so any chunk of a random array can be produced
// independently, in any order, on any thread, and always yields the same values. The codegen
// re-implements exactly the functions in this header in LLVM IR; this file is the specification
// and the reference against which generated code is tested. Keep every step simple and keep the
// comments in sync with the IR emitter.
//
// The bit generator is Philox4x32-10 from J. K. Salmon, M. A. Moraes, R. O. Dror and D. E. Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC11 (2011), written here from the paper's
// definition and checked against the Random123 known-answer vectors.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::philox {

// ---------------------------------------------------------------------------------------------
// Philox4x32-10 bijection.
// ---------------------------------------------------------------------------------------------

// Round multipliers (paper, Table 2, Philox4x32).
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
// Weyl-sequence key increments ("bumps"): golden ratio and sqrt(3) - 1, as 32-bit fractions.
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

// One Philox S-box round on a 4-word counter with round key k:
//   (hi0, lo0) = 64-bit product kMul0 * x0, split into high and low 32-bit halves
//   (hi1, lo1) = 64-bit product kMul1 * x2
//   x' = { hi1 ^ x1 ^ k0,  lo1,  hi0 ^ x3 ^ k1,  lo0 }
inline Counter philox4x32_round(const Counter& x, const Key& k) {
  const uint64_t p0 = uint64_t(kMul0) * uint64_t(x[0]);
  const uint64_t p1 = uint64_t(kMul1) * uint64_t(x[2]);
  const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  return Counter{hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
}

// Philox4x32 with 10 rounds. Round r (r = 0..9) uses the round key
//   k_r = { key0 + r * kWeyl0, key1 + r * kWeyl1 }   (mod 2^32)
// i.e. the user key for the first round, bumped by the Weyl constants before each later round.
inline Counter philox4x32_10(Counter ctr, Key key) {
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    ctr = philox4x32_round(ctr, key);
  }
  return ctr;
}

// ---------------------------------------------------------------------------------------------
// Kiln's element mapping.
//
//   key = { uint32(seed), uint32(seed >> 32) }
//   ctr = { uint32(i),    uint32(i >> 32),    stream, 0 }     for flat element index i
//   w   = philox4x32_10(ctr, key)
//
// Each element consumes one Philox block (four 32-bit words w[0..3]); the distributions below
// say which words they use. Distinct (stream, i) pairs give distinct counters, so the values of
// different elements and different streams are independent draws.
// ---------------------------------------------------------------------------------------------

inline Key key_from_seed(uint64_t seed) { return Key{uint32_t(seed), uint32_t(seed >> 32)}; }

inline Counter counter_for(uint32_t stream, uint64_t i) {
  return Counter{uint32_t(i), uint32_t(i >> 32), stream, 0u};
}

// The four random words for element i of stream `stream` under `seed`.
inline Counter block(uint64_t seed, uint32_t stream, uint64_t i) {
  return philox4x32_10(counter_for(stream, i), key_from_seed(seed));
}

// 53-bit uniform double in [0, 1) from two words:
//   bits = (uint64(hi) << 32) | lo          64 random bits, hi is the most significant word
//   u    = (bits >> 11) * 2^-53             keep the top 53 bits; exact, max is 1 - 2^-53
inline double uniform_from_bits(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t(hi) << 32) | uint64_t(lo);
  return double(bits >> 11) * 0x1.0p-53;
}

// uniform: u = uniform_from_bits(w[0], w[1]), in [0, 1).
inline double uniform(uint64_t seed, uint32_t stream, uint64_t i) {
  const Counter w = block(seed, stream, i);
  return uniform_from_bits(w[0], w[1]);
}

// uniform_f32: top 24 bits of w[0]:  u = float(w[0] >> 8) * 2^-24, in [0, 1). Exact in float.
inline float uniform_f32(uint64_t seed, uint32_t stream, uint64_t i) {
  const Counter w = block(seed, stream, i);
  return float(w[0] >> 8) * 0x1.0p-24f;
}

// 2*pi as the nearest double (bit pattern 0x401921FB54442D18).
constexpr double kTwoPi = 6.283185307179586476925286766559;

// Kiln's own log and cos for the generator, so a normal is bit-identical wherever it is made
// (vector or scalar code, CPU or GPU): platform libms and their vector variants differ by ulps.
// Each step is one IEEE operation, and every polynomial step a fused multiply-add (std::fma,
// exactly rounded everywhere; build with -ffp-contract=off so nothing else is fused); the
// generated kernels perform exactly the same operations in the same order.

// 1/(2k+1), highest first: log's atanh series.
constexpr double kLogCoef[11] = {1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11,
                                 1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;  // ln 2 split: hi has trailing zero bits
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kSqrtHalf = 0x1.6a09e667f3bcdp-1;

// log(x) for finite normal x > 0: x = m * 2^e with m in [sqrt(1/2), sqrt(2)),
// log(m) = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ... + s^20/21), s = (m - 1) / (m + 1), |s| < 0.172.
inline double log_positive(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int64_t e = int64_t(bits >> 52) - 1023;
  uint64_t mbits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;  // m in [1, 2)
  double m;
  std::memcpy(&m, &mbits, sizeof m);
  if (m > 2 * kSqrtHalf) {
    m = m * 0.5;
    e = e + 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = kLogCoef[0];
  for (int k = 1; k < 11; ++k) p = std::fma(p, z, kLogCoef[k]);
  const double de = double(int32_t(e));
  return std::fma(de, kLn2Hi, std::fma(de, kLn2Lo, 2.0 * s * p));
}

// cos(a) = sum_k (-1)^k a^(2k) / (2k)!, k = 11 down to 0 (z = a^2).
constexpr double kCos[12] = {1.0 / 1124000727777607680000.0,
                             -1.0 / 2432902008176640000.0,
                             1.0 / 6402373705728000.0,
                             -1.0 / 20922789888000.0,
                             1.0 / 87178291200.0,
                             -1.0 / 479001600.0,
                             1.0 / 3628800.0,
                             -1.0 / 40320.0,
                             1.0 / 720.0,
                             -1.0 / 24.0,
                             0.5,
                             -1.0};

// cos(2 pi u) for u in [0, 1): u = q/2 + r with |r| <= 1/4 (exact), cos(2 pi u) = (-1)^q cos(a)
// with a = 2 pi r in [-pi/2, pi/2]. (kCos holds -cos's coefficients; the sign is folded in.)
inline double cos_2pi(double u) {
  const double q = std::floor(u * 2.0 + 0.5);
  const double r = u - q * 0.5;
  const double a = kTwoPi * r;
  const double z = a * a;
  double c = kCos[0];
  for (int k = 1; k < 12; ++k) c = std::fma(c, z, kCos[k]);
  return (int(q) & 1) ? c : -c;
}

// standard_normal: Box-Muller (cosine branch only; one normal per element):
//   u1 = 1 - uniform_from_bits(w[0], w[1])   in [2^-53, 1] (exact subtraction): log is finite
//   u2 = uniform_from_bits(w[2], w[3])       in [0, 1)
//   z  = sqrt(-2 * log_positive(u1)) * cos_2pi(u2)
inline double standard_normal(uint64_t seed, uint32_t stream, uint64_t i) {
  const Counter w = block(seed, stream, i);
  const double u1 = 1.0 - uniform_from_bits(w[0], w[1]);
  const double u2 = uniform_from_bits(w[2], w[3]);
  return std::sqrt(-2.0 * log_positive(u1)) * cos_2pi(u2);
}

// High 64 bits of the full 128-bit product a * b.
inline uint64_t mulhi64(uint64_t a, uint64_t b) {
  return uint64_t((unsigned __int128)a * (unsigned __int128)b >> 64);
}

// integers: uniform integer in [low, high), requires high > low.
//   r = uint64(high) - uint64(low)           range size, computed modulo 2^64 (no signed overflow)
//   x = (uint64(w[0]) << 32) | w[1]           64 random bits
//   v = low + mulhi64(x, r)                   Lemire's multiply-shift (floor(x * r / 2^64) < r);
//                                             the add is done modulo 2^64, then reinterpreted
// The mapping has a bias of at most r / 2^64 per value, which is negligible for Kiln's use.
inline int64_t integers(uint64_t seed, uint32_t stream, uint64_t i, int64_t low, int64_t high) {
  const Counter w = block(seed, stream, i);
  const uint64_t r = uint64_t(high) - uint64_t(low);
  const uint64_t x = (uint64_t(w[0]) << 32) | uint64_t(w[1]);
  return int64_t(uint64_t(low) + mulhi64(x, r));
}

}  // namespace kiln::philox
