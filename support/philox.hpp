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

#include "support/ziggurat_tables.hpp"

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
// Kiln's element mapping: two elements per Philox block.
//
//   key = { uint32(seed), uint32(seed >> 32) }
//   block j of a stream: w = philox4x32_10({ uint32(j), uint32(j >> 32), stream, 0 }, key)
//   element i's words (hi, lo) = (w[0], w[1]) of block i >> 1 for even i, (w[2], w[3]) for odd i
//
// Every distribution below turns an element's pair of words into its value, so one block serves
// two neighbouring elements (the vectorized kernels generate a pair per block: half the
// multiplies of a block per element). standard_normal rarely needs more words: its later pairs
// come from blocks of the element's own, { uint32(i), uint32(i >> 32), stream, k } for k = 1, 2,
// ... (words (w[0], w[1]), then (w[2], w[3]) of each). The last counter word tells the two kinds
// of block apart (0: shared, k >= 1: an element's own), so distinct (stream, i) give distinct
// words, and the values of different elements and different streams are independent draws.
// ---------------------------------------------------------------------------------------------

inline Key key_from_seed(uint64_t seed) { return Key{uint32_t(seed), uint32_t(seed >> 32)}; }

// Block j of stream `stream`: counter (lo(j), hi(j), stream, k), k = 0 for the shared blocks.
inline Counter block(uint64_t seed, uint32_t stream, uint64_t j, uint32_t k = 0) {
  return philox4x32_10(Counter{uint32_t(j), uint32_t(j >> 32), stream, k}, key_from_seed(seed));
}

// Element i's first two words: its half of the shared block i >> 1.
struct Words {
  uint32_t hi, lo;
};
inline Words element_words(uint64_t seed, uint32_t stream, uint64_t i) {
  const Counter w = block(seed, stream, i >> 1);
  return (i & 1) ? Words{w[2], w[3]} : Words{w[0], w[1]};
}

// 53-bit uniform double in [0, 1) from two words:
//   bits = (uint64(hi) << 32) | lo          64 random bits, hi is the most significant word
//   u    = (bits >> 11) * 2^-53             keep the top 53 bits; exact, max is 1 - 2^-53
inline double uniform_from_bits(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t(hi) << 32) | uint64_t(lo);
  return double(bits >> 11) * 0x1.0p-53;
}

// uniform: u = uniform_from_bits(hi, lo) of element i's words, in [0, 1).
inline double uniform(uint64_t seed, uint32_t stream, uint64_t i) {
  const Words w = element_words(seed, stream, i);
  return uniform_from_bits(w.hi, w.lo);
}

// Kiln's own log and exp for the normal generator's rare paths, so a normal is bit-identical
// wherever it is made (vector or scalar code, CPU or GPU): platform libms differ by ulps. Each
// step is one IEEE operation, and every polynomial step a fused multiply-add (std::fma, exactly
// rounded everywhere; build with -ffp-contract=off so nothing else is fused); generated code
// performs exactly the same operations in the same order, or calls these functions.

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

// 1/j!, j = 13 down to 0: exp's Taylor series.
constexpr double kExpCoef[14] = {1.0 / 6227020800.0,
                                 1.0 / 479001600.0,
                                 1.0 / 39916800.0,
                                 1.0 / 3628800.0,
                                 1.0 / 362880.0,
                                 1.0 / 40320.0,
                                 1.0 / 5040.0,
                                 1.0 / 720.0,
                                 1.0 / 120.0,
                                 1.0 / 24.0,
                                 1.0 / 6.0,
                                 0.5,
                                 1.0,
                                 1.0};
constexpr double kLog2E = 0x1.71547652b82fep+0;  // 1 / ln 2

// exp(t) for t in [-700, 0]: t = k ln 2 + r with k = floor(t / ln 2 + 1/2) and |r| <= ~0.35
// (k ln2hi is exact), exp(t) = 2^k * sum_j r^j / j!, j <= 13.
inline double exp_nonpositive(double t) {
  const double k = std::floor(t * kLog2E + 0.5);
  const double r = std::fma(-k, kLn2Lo, std::fma(-k, kLn2Hi, t));
  double p = kExpCoef[0];
  for (int j = 1; j < 14; ++j) p = std::fma(p, r, kExpCoef[j]);
  const uint64_t sbits = uint64_t(int64_t(k) + 1023) << 52;  // 2^k, k >= -1010
  double scale;
  std::memcpy(&scale, &sbits, sizeof scale);
  return p * scale;
}

// standard_normal: a 1024-layer ziggurat after Marsaglia and Tsang (tables and their definition
// in support/ziggurat_tables.hpp). It reads element i's word pairs in order (NormalWords): first
// element_words(i), then (w[0], w[1]) and (w[2], w[3]) of block (i, k) for k = 1, 2, ...:
//   (hi, lo) = next pair
//   u     = uniform_from_bits(hi, lo)          in [0, 1), the top 53 of the 64 bits
//   layer = lo & 1023,  negative = (lo >> 10) & 1   (the 11 bits below the 53 used by u)
//   x     = u * kZigX[layer]
//   fast path: x < kZigX[layer + 1]  ->  accept x                     (99.57% of elements)
//   layer 0 (x >= r, the tail): repeat: a = -log(1 - uniform(next pair)) / r,
//     b = -log(1 - uniform(next pair)), until b + b >= a * a; accept x = r + a
//   layer >= 1 (the wedge): y = F[layer] + uniform(next pair) * (F[layer + 1] - F[layer]);
//     accept x if y < exp(-x * x / 2), else start over with the next pair
// and the result is -x if negative, else x. The vectorized kernels run the fast path on the first
// pair and call standard_normal (as kiln_normal_slow) for the elements it rejects.
class NormalWords {
 public:
  NormalWords(uint64_t seed, uint32_t stream, uint64_t i) : seed_(seed), stream_(stream), i_(i) {}
  Words next() {
    const uint32_t n = n_++;
    if (n == 0) return element_words(seed_, stream_, i_);
    if (n & 1) {  // pairs 1, 3, 5, ...: a new block of the element's own, k = 1, 2, 3, ...
      w_ = block(seed_, stream_, i_, (n + 1) / 2);
      return Words{w_[0], w_[1]};
    }
    return Words{w_[2], w_[3]};
  }

 private:
  uint64_t seed_;
  uint32_t stream_;
  uint64_t i_;
  uint32_t n_ = 0;
  Counter w_{};
};

inline double standard_normal(uint64_t seed, uint32_t stream, uint64_t i) {
  NormalWords words(seed, stream, i);
  auto u01 = [&] {
    const Words w = words.next();
    return uniform_from_bits(w.hi, w.lo);
  };
  for (;;) {
    const Words w = words.next();
    const double u = uniform_from_bits(w.hi, w.lo);
    const uint32_t layer = w.lo & (kZigLayers - 1);
    const bool negative = (w.lo >> kZigLayerBits) & 1u;
    const double x = u * kZigX[layer];
    if (x < kZigX[layer + 1]) return negative ? -x : x;
    if (layer == 0) {
      for (;;) {
        const double a = -log_positive(1.0 - u01()) / kZigR;
        const double b = -log_positive(1.0 - u01());
        if (b + b >= a * a) return negative ? -(kZigR + a) : kZigR + a;
      }
    }
    const double y = kZigF[layer] + u01() * (kZigF[layer + 1] - kZigF[layer]);
    if (y < exp_nonpositive(-0.5 * x * x)) return negative ? -x : x;
  }
}

// High 64 bits of the full 128-bit product a * b.
inline uint64_t mulhi64(uint64_t a, uint64_t b) {
  return uint64_t((unsigned __int128)a * (unsigned __int128)b >> 64);
}

// integers: uniform integer in [low, high), requires high > low.
//   r = uint64(high) - uint64(low)           range size, computed modulo 2^64 (no signed overflow)
//   x = (uint64(hi) << 32) | lo               element i's 64 random bits
//   v = low + mulhi64(x, r)                   Lemire's multiply-shift (floor(x * r / 2^64) < r);
//                                             the add is done modulo 2^64, then reinterpreted
// The mapping has a bias of at most r / 2^64 per value, which is negligible for Kiln's use.
inline int64_t integers(uint64_t seed, uint32_t stream, uint64_t i, int64_t low, int64_t high) {
  const Words w = element_words(seed, stream, i);
  const uint64_t r = uint64_t(high) - uint64_t(low);
  const uint64_t x = (uint64_t(w.hi) << 32) | uint64_t(w.lo);
  return int64_t(uint64_t(low) + mulhi64(x, r));
}

}  // namespace kiln::philox
