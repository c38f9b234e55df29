// Tests for the reference Philox4x32-10 generator and Kiln's element mapping.
#include "support/philox.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace kiln::philox {
namespace {

struct Kat {
  Counter ctr;
  Key key;
  Counter expected;
};

void expect_kat(const Kat& kat) {
  const Counter got = philox4x32_10(kat.ctr, kat.key);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(got[j], kat.expected[j]) << "word " << j;
  }
}

// Random123 tests/kat_vectors, the three "philox4x32 10" lines
// (columns: CTR[4] KEY[2] EXPECTED[4]):
//   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000
//                 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff
//                 408f276d 41c83b0e a20bc7c6 6d5451fd
//   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0
//                 d16cfe09 94fdcceb 5001e420 24126ea1
TEST(Philox4x32_10, KatAllZero) {
  expect_kat({{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}});
}

TEST(Philox4x32_10, KatAllOnes) {
  expect_kat({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
              {0xffffffff, 0xffffffff},
              {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}});
}

TEST(Philox4x32_10, KatPiDigits) {
  expect_kat({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
              {0xa4093822, 0x299f31d0},
              {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}});
}

// Additional vectors from the extended Random123 KAT table (examples/kat_vectors of the Random123
// manual distribution), exercising single-bit counters and keys in each word position.
TEST(Philox4x32_10, KatExtended) {
  const Kat kats[] = {
      {{0x00000001, 0, 0, 0}, {0x00000001, 0}, {0xac08141b, 0xdfc5ccbe, 0x79c07a47, 0xa7f66093}},
      {{0, 0, 0, 0x00000001}, {0x00000001, 0}, {0x127bee41, 0x1e047488, 0x48842b20, 0x0a393496}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0x00000001, 0},
       {0x38527b8f, 0xfad9a48c, 0x20e675c0, 0xf2fea26a}},
      {{0, 0, 0xffffffff, 0}, {0, 0x00000001}, {0x576241af, 0xd3b45bee, 0x619bd94d, 0x15dd8793}},
      {{0, 0, 0, 0x80000000}, {0, 0x80000000}, {0xf7a0b371, 0xe51dc93d, 0x56ce135d, 0x1d4b5580}},
  };
  for (const Kat& kat : kats) expect_kat(kat);
}

// Block j is philox4x32_10({j_lo, j_hi, stream, k}, {seed_lo, seed_hi}); element i's words are
// (w0, w1) of block i >> 1 for even i, (w2, w3) for odd i.
TEST(PhiloxMapping, BlockMatchesDefinition) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  const uint64_t j = 0x05a308d3243f6a88ull;
  const uint32_t stream = 0x13198a2e;
  const Counter w = philox4x32_10({uint32_t(j), uint32_t(j >> 32), stream, 0},
                                  {uint32_t(seed), uint32_t(seed >> 32)});
  EXPECT_EQ(block(seed, stream, j), w);
  EXPECT_EQ(block(seed, stream, j, 3), philox4x32_10({uint32_t(j), uint32_t(j >> 32), stream, 3},
                                                     {uint32_t(seed), uint32_t(seed >> 32)}));
  // Seed 0, stream 0, block 0 is the all-zero KAT.
  EXPECT_EQ(block(0, 0, 0), (Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  // Elements 2j and 2j + 1 share block j; the value functions use the documented words.
  const Words even = element_words(seed, stream, 2 * j),
              odd = element_words(seed, stream, 2 * j + 1);
  EXPECT_EQ(even.hi, w[0]);
  EXPECT_EQ(even.lo, w[1]);
  EXPECT_EQ(odd.hi, w[2]);
  EXPECT_EQ(odd.lo, w[3]);
  EXPECT_EQ(uniform(seed, stream, 2 * j), uniform_from_bits(w[0], w[1]));
  EXPECT_EQ(uniform(seed, stream, 2 * j + 1), uniform_from_bits(w[2], w[3]));
  EXPECT_EQ(uniform(0, 0, 0), 0x1.989fa35785a70p-2);  // docs/KERNEL_IR.md section 9
}

// standard_normal reads the element's half of its shared block, then the element's own blocks
// k = 1, 2, ... a pair of words at a time.
TEST(PhiloxMapping, NormalWordsComeInTheDocumentedOrder) {
  const uint64_t seed = 99, i = 12345;
  const uint32_t stream = 4;
  NormalWords s(seed, stream, i);
  const Words first = s.next();
  EXPECT_EQ(first.hi, element_words(seed, stream, i).hi);
  EXPECT_EQ(first.lo, element_words(seed, stream, i).lo);
  for (uint32_t k = 1; k <= 3; ++k) {
    const Counter w = block(seed, stream, i, k);
    const Words a = s.next(), b = s.next();
    EXPECT_EQ(a.hi, w[0]) << k;
    EXPECT_EQ(a.lo, w[1]) << k;
    EXPECT_EQ(b.hi, w[2]) << k;
    EXPECT_EQ(b.lo, w[3]) << k;
  }
}

// A normal whose first pair lands in a wedge: the wedge's y comes from block (i, 1)'s first
// words, and, when it rejects, the next attempt from that block's last two; computed by hand
// from the definition for the first such elements of a stream.
TEST(PhiloxMapping, NormalWedgesUseTheElementsOwnBlocks) {
  int wedges = 0, retried = 0;
  for (uint64_t i = 0; i < 400000 && (wedges < 20 || retried < 3); ++i) {
    const Words w = element_words(11, 2, i);
    const uint32_t layer = w.lo & (kZigLayers - 1);
    const double x = uniform_from_bits(w.hi, w.lo) * kZigX[layer];
    if (x < kZigX[layer + 1] || layer == 0) continue;
    const double sign = (w.lo >> kZigLayerBits) & 1u ? -1.0 : 1.0;
    const Counter own = block(11, 2, i, 1);
    const double y =
        kZigF[layer] + uniform_from_bits(own[0], own[1]) * (kZigF[layer + 1] - kZigF[layer]);
    if (y < exp_nonpositive(-0.5 * x * x)) {
      if (wedges == 20) continue;
      ++wedges;
      EXPECT_EQ(standard_normal(11, 2, i), sign * x) << i;
      continue;
    }
    const uint32_t layer2 = own[3] & (kZigLayers - 1);
    const double x2 = uniform_from_bits(own[2], own[3]) * kZigX[layer2];
    if (!(x2 < kZigX[layer2 + 1]) || retried == 3) continue;  // a second rejection: rarer
    ++retried;
    EXPECT_EQ(standard_normal(11, 2, i), (own[3] >> kZigLayerBits) & 1u ? -x2 : x2) << i;
  }
  EXPECT_EQ(wedges, 20);
  EXPECT_EQ(retried, 3);
}

// The two elements of a block are independent draws: no correlation between neighbours, even
// pairs or odd pairs.
TEST(PhiloxMapping, ElementsSharingABlockAreUncorrelated) {
  const uint64_t n = 1000000;
  double sxy_shared = 0, sxy_across = 0;
  for (uint64_t j = 0; j < n; ++j) {
    const double a = uniform(3, 1, 2 * j) - 0.5, b = uniform(3, 1, 2 * j + 1) - 0.5;
    const double c = uniform(3, 1, 2 * j + 2) - 0.5;
    sxy_shared += a * b;
    sxy_across += b * c;
  }
  // Each product has mean 0 and sd 1/12; 6 sd of the mean of n of them.
  EXPECT_LT(std::fabs(sxy_shared / n), 6 / (12 * std::sqrt(double(n))));
  EXPECT_LT(std::fabs(sxy_across / n), 6 / (12 * std::sqrt(double(n))));
}

TEST(PhiloxMapping, UniformFromBitsEdges) {
  EXPECT_EQ(uniform_from_bits(0, 0), 0.0);
  EXPECT_EQ(uniform_from_bits(0xffffffff, 0xffffffff), 1.0 - 0x1.0p-53);
  EXPECT_LT(uniform_from_bits(0xffffffff, 0xffffffff), 1.0);
  EXPECT_EQ(uniform_from_bits(0x80000000, 0), 0.5);
  // The low 11 bits are discarded.
  EXPECT_EQ(uniform_from_bits(0, 0x7ff), 0.0);
  EXPECT_EQ(uniform_from_bits(0, 0x800), 0x1.0p-53);
}

TEST(PhiloxMapping, UniformRangeAndMean) {
  const uint64_t n = 1000000;
  double sum = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    const double u = uniform(12345, 0, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / double(n), 0.5, 0.002);
}

TEST(PhiloxMapping, NormalMomentsAndFinite) {
  const uint64_t n = 1000000;
  double sum = 0.0, sum_sq = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    const double z = standard_normal(42, 1, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
  }
  const double mean = sum / double(n);
  const double var = sum_sq / double(n) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.01);
}

TEST(PhiloxMapping, IntegersInRangeAndHitBothEnds) {
  const int64_t low = -3, high = 4;  // seven values, -3..3
  std::set<int64_t> seen;
  for (uint64_t i = 0; i < 10000; ++i) {
    const int64_t v = integers(9, 2, i, low, high);
    ASSERT_GE(v, low);
    ASSERT_LT(v, high);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_TRUE(seen.count(low));
  EXPECT_TRUE(seen.count(high - 1));
}

TEST(PhiloxMapping, IntegersSingletonAndWideRanges) {
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(integers(1, 0, i, 17, 18), 17);
    // Full signed range: r = 2^64 - 1, must not overflow.
    const int64_t lo = std::numeric_limits<int64_t>::min();
    const int64_t hi = std::numeric_limits<int64_t>::max();
    const int64_t v = integers(1, 0, i, lo, hi);
    EXPECT_LT(v, hi);
  }
  // Mean of a moderately large range is close to the midpoint.
  const uint64_t n = 200000;
  double sum = 0.0;
  for (uint64_t i = 0; i < n; ++i) sum += double(integers(5, 0, i, 1000, 2000));
  EXPECT_NEAR(sum / double(n), 1499.5, 2.0);
}

TEST(PhiloxMapping, IntegersDocumentedFormula) {
  const Counter w = block(77, 4, 123456789 >> 1);  // an odd element: the block's last words
  const uint64_t x = (uint64_t(w[2]) << 32) | w[3];
  const uint64_t r = 1000;
  const int64_t expected = -500 + int64_t(uint64_t((unsigned __int128)x * r >> 64));
  EXPECT_EQ(integers(77, 4, 123456789, -500, 500), expected);
}

TEST(PhiloxMapping, Deterministic) {
  for (uint64_t i : {uint64_t(0), uint64_t(1), uint64_t(1) << 40, ~uint64_t(0)}) {
    EXPECT_EQ(uniform(2024, 5, i), uniform(2024, 5, i));
    EXPECT_EQ(standard_normal(2024, 5, i), standard_normal(2024, 5, i));
    EXPECT_EQ(integers(2024, 5, i, -10, 10), integers(2024, 5, i, -10, 10));
  }
}

TEST(PhiloxMapping, SeedsStreamsAndIndicesDiffer) {
  int same_seed = 0, same_stream = 0, same_index = 0, same_hi_index = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    const double base = uniform(1, 0, i);
    same_seed += base == uniform(2, 0, i);
    same_stream += base == uniform(1, 1, i);
    same_index += base == uniform(1, 0, i + 1);
    // The high seed word and high index word matter too.
    same_hi_index += uniform(1ull << 32, 0, i) == uniform(0, 0, i);
    same_hi_index += uniform(1, 0, i | (1ull << 32)) == base;
  }
  EXPECT_EQ(same_seed, 0);
  EXPECT_EQ(same_stream, 0);
  EXPECT_EQ(same_index, 0);
  EXPECT_EQ(same_hi_index, 0);
}

}  // namespace
}  // namespace kiln::philox

TEST(PhiloxMapping, OwnLogAndExpAreAccurate) {
  using namespace kiln::philox;
  // Within a few ulp of glibc over the generator's domains.
  uint64_t state = 1;
  for (int k = 0; k < 200000; ++k) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = double(state >> 11) * 0x1.0p-53;
    const double x = 1.0 - u;  // (0, 1]
    const double lg = std::log(x);
    EXPECT_NEAR(log_positive(x), lg, 4e-16 * std::fabs(lg) + 2.3e-16) << x;  // ~2 ulp
    const double t = -700.0 * u * u;  // [-700, 0], denser near 0 (the ziggurat's wedges)
    const double e = std::exp(t);
    EXPECT_NEAR(exp_nonpositive(t), e, 4.5e-16 * e) << t;  // ~2 ulp
  }
  EXPECT_EQ(log_positive(1.0), 0.0);
  EXPECT_EQ(exp_nonpositive(0.0), 1.0);
  EXPECT_NEAR(log_positive(0x1.0p-53), -53 * std::log(2.0), 1e-13);
}

TEST(PhiloxMapping, ZigguratTablesAreConsistent) {
  using namespace kiln::philox;
  // Layers of equal area v (support/ziggurat_tables.hpp): the base strip plus the tail, then
  // rectangles X[i] x (F[i+1] - F[i]).
  const double tail = std::sqrt(std::acos(-1.0) / 2) * std::erfc(kZigR / std::sqrt(2.0));
  EXPECT_NEAR(kZigR * kZigF[1] + tail, kZigV, 1e-15);
  EXPECT_NEAR(kZigX[0] * kZigF[1], kZigV, 1e-15);
  EXPECT_EQ(kZigX[1], kZigR);
  EXPECT_EQ(kZigX[kZigLayers], 0.0);
  EXPECT_EQ(kZigF[kZigLayers], 1.0);
  for (int i = 1; i < kZigLayers; ++i) {
    EXPECT_GT(kZigX[i], kZigX[i + 1]) << i;
    EXPECT_NEAR(kZigX[i] * (kZigF[i + 1] - kZigF[i]), kZigV, 1e-12 * kZigV) << i;
    // X[i] is rounded: its relative error (<= 2^-53) moves exp(-X^2/2) by up to X^2 2^-53.
    const double x2 = kZigX[i] * kZigX[i];
    EXPECT_NEAR(kZigF[i], std::exp(-0.5 * x2), 2.3e-16 * (2 + x2) * kZigF[i]) << i;
  }
}

TEST(PhiloxMapping, NormalFollowsTheNormalDistribution) {
  using namespace kiln::philox;
  // 4M draws against the normal CDF: 160 bins over [-4, 4] plus both tails beyond 4 (chi-square),
  // the tails beyond r (the ziggurat's tail path), and how often the fast path accepts.
  const uint64_t n = 4000000;
  const int bins = 160;
  std::vector<double> count(bins + 2, 0.0);
  uint64_t beyond_r = 0, fast = 0, negative = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double z = standard_normal(7, 3, i);
    ASSERT_TRUE(std::isfinite(z));
    const int b = z < -4 ? 0 : z >= 4 ? bins + 1 : 1 + std::min(bins - 1, int((z + 4) * 20));
    count[b] += 1;
    beyond_r += std::fabs(z) > kZigR;
    negative += std::signbit(z);
    const Words w = element_words(7, 3, i);
    const uint32_t layer = w.lo & (kZigLayers - 1);
    fast += uniform_from_bits(w.hi, w.lo) * kZigX[layer] < kZigX[layer + 1];
  }
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  double chi2 = 0;
  for (int b = 0; b < bins + 2; ++b) {
    const double lo = b == 0 ? -INFINITY : -4 + (b - 1) / 20.0;
    const double hi = b == bins + 1 ? INFINITY : -4 + b / 20.0;
    const double expected = double(n) * (cdf(hi) - cdf(lo));
    chi2 += (count[b] - expected) * (count[b] - expected) / expected;
  }
  // 161 degrees of freedom: mean 161, sd 18; 161 + 6 sd is exceeded with probability < 1e-6.
  EXPECT_LT(chi2, 161 + 6 * 18.0);
  const double p_r = 2 * (1 - cdf(kZigR));  // 2.58e-4
  EXPECT_NEAR(double(beyond_r), n * p_r, 6 * std::sqrt(n * p_r));
  EXPECT_NEAR(double(negative), n / 2.0, 6 * std::sqrt(n / 4.0));
  // The fast path accepts layer i's draw with probability X[i+1] / X[i] (99.57% on average).
  double p_fast = 0;
  for (int i = 0; i < kZigLayers; ++i) p_fast += kZigX[i + 1] / kZigX[i] / kZigLayers;
  EXPECT_NEAR(double(fast), n * p_fast, 6 * std::sqrt(n * p_fast * (1 - p_fast)));
}
