// Kiln's Gram kernel (codegen/gram.cpp) against exact sums: A holds small integers, so every
// product and partial sum is exact and any order of summation gives the same doubles. Shapes
// cover every register tile (1 .. 3 vectors, 1 .. W rows, the half vector of AVX-512), several
// panels of rows, row strides past n (their padding is NaN: read, it would show), and c's
// padding columns (sentinels that must survive). The suite's KILN_TARGET_CPU=x86-64-v3 run
// (scripts/test.sh) runs the AVX2 variant on AVX-512 hosts.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/gram.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

TEST(Gram, UpperTriangleEqualsExactSums) {
  if (!library::gram_fits(1)) GTEST_SKIP() << "no AVX2 or AVX-512 here (or KILN_TARGET_CPU)";
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);
  const double nan = std::numeric_limits<double>::quiet_NaN(), sentinel = -12345.0;
  int cases = 0;
  for (int64_t n :
       {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 20, 23, 24, 25, 28, 33, 40, 47, 63, 100, 129, 256})
    for (int64_t k : {0, 1, 6, 700, 2900}) {
      if (n * n * k > 40000000) continue;  // the reference's cost
      const int64_t lda = n + (n % 3), ldc = n + 2;
      std::vector<double> a(size_t(std::max<int64_t>(k, 1) * lda), nan);
      for (int64_t r = 0; r < k; ++r)
        for (int64_t i = 0; i < n; ++i) a[r * lda + i] = small(rng);
      std::vector<double> want(n * n, 0.0), init(n * ldc);
      for (int64_t r = 0; r < k; ++r)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = j; i < n; ++i) want[j * n + i] += a[r * lda + i] * a[r * lda + j];
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < ldc; ++i) init[j * ldc + i] = i < n ? small(rng) : sentinel;
      for (bool accumulate : {false, true}) {
        std::vector<double> c = init;
        library::gram_upper(n, k, a.data(), lda, c.data(), ldc, accumulate);
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t i = j; i < n; ++i)
            ASSERT_EQ(c[j * ldc + i], want[j * n + i] + (accumulate ? init[j * ldc + i] : 0.0))
                << "n " << n << " k " << k << " accumulate " << accumulate << " c[" << j << "]["
                << i << "]";
          for (int64_t i = n; i < ldc; ++i) ASSERT_EQ(c[j * ldc + i], sentinel) << n << " " << k;
        }
        ++cases;
      }
    }
  EXPECT_GT(cases, 200);
}

TEST(Gram, RoundedSumsStayWithinTheirErrorBound) {
  // Random doubles: |c - exact| <= k u sum |a_ri a_rj| (the bound of any summation order).
  if (!library::gram_fits(1)) GTEST_SKIP() << "no AVX2 or AVX-512 here (or KILN_TARGET_CPU)";
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t n = 100, k = 5242;
  std::vector<double> a(k * n);
  for (double& v : a) v = normal(rng) * std::exp2(std::round(normal(rng) * 4));
  std::vector<double> c(n * n);
  library::gram_upper(n, k, a.data(), n, c.data(), n, false);
  const double u = std::ldexp(1.0, -53);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = j; i < n; ++i) {
      long double exact = 0, mag = 0;
      for (int64_t r = 0; r < k; ++r) {
        exact += static_cast<long double>(a[r * n + i]) * a[r * n + j];
        mag += std::fabs(static_cast<long double>(a[r * n + i]) * a[r * n + j]);
      }
      ASSERT_LE(std::fabs(c[j * n + i] - exact), k * u * mag) << j << " " << i;
    }
}

// The tiles read A in place, a vector of columns at a time: the last vector of a row whose n is
// not a multiple of the vector's width is a masked load. A's last row here ends where a page that
// may not be touched begins, for every n up to 3 vectors past a width and both strides, so a
// full-width load there would crash.
TEST(Gram, TheLastRowMayEndAtAnUnreadablePage) {
  if (!library::gram_fits(1)) GTEST_SKIP() << "no AVX2 or AVX-512 here (or KILN_TARGET_CPU)";
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int> small(-8, 8);
  for (int64_t n = 1; n <= 30; ++n)
    for (int64_t lda : {n, n + 1}) {
      const int64_t k = 37;
      const size_t bytes = size_t((k - 1) * lda + n) * sizeof(double);
      const size_t span = (bytes + page - 1) / page * page;
      void* map =
          mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(map, MAP_FAILED);
      char* guard = static_cast<char*>(map) + span;
      ASSERT_EQ(mprotect(guard, page, PROT_NONE), 0);
      double* a = reinterpret_cast<double*>(guard - bytes);
      for (int64_t r = 0; r < k; ++r)
        for (int64_t i = 0; i < n; ++i) a[r * lda + i] = small(rng);
      std::vector<double> c(size_t(n * n)), want(size_t(n * n), 0.0);
      for (int64_t r = 0; r < k; ++r)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = j; i < n; ++i) want[j * n + i] += a[r * lda + i] * a[r * lda + j];
      library::gram_upper(n, k, a, lda, c.data(), n, false);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = j; i < n; ++i)
          ASSERT_EQ(c[j * n + i], want[j * n + i]) << "n " << n << " lda " << lda;
      munmap(map, span + page);
    }
}

TEST(Gram, TheVariantFollowsTheHostAndTheTargetCpu) {
  // KILN_TARGET_CPU narrows the variant as it narrows the JIT's kernels; wider n goes to syrk.
  const std::string t = flags().target_cpu, isa = library::gram_isa();
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  if (t == "x86-64-v2") {
    EXPECT_EQ(isa, "");
  } else if (t == "x86-64-v3") {
    EXPECT_EQ(isa, avx2 ? "avx2" : "");
  } else if (t.empty()) {
    EXPECT_EQ(isa, avx512 ? "avx512" : avx2 ? "avx2" : "");
  }
  EXPECT_EQ(library::gram_fits(256), !isa.empty());
  EXPECT_FALSE(library::gram_fits(257));
  EXPECT_FALSE(library::gram_fits(0));
}

}  // namespace
