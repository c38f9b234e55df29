// Checked sizes (issue 30): element counts, byte sizes, block counts and offsets that cannot be
// represented or allocated are kiln::Errors naming the array and the size, before anything is
// allocated; plans whose bookkeeping would not fit in memory are refused with the figure; absurd
// blocks (one task of 1e18 elements) are refused up front. Plus two wrong answers found with
// them: norms of stacks of matrices, and reductions of 0-d arrays along axis 0 or -1.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "oracle.hpp"
#include "runtime/memory.hpp"
#include "support/checked.hpp"
#include "support/flags.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A .npy file of `shape` (bool, C order) with no data: the header as NumPy writes it.
std::string empty_npy(const std::string& name, const std::string& shape) {
  std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string path = kt::tmpdir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  const char le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(le, 2);
  f << dict;
  return path;
}

// Pretends the machine has `bytes` of memory for the scope.
struct FakeMemory {
  explicit FakeMemory(int64_t bytes) { set_usable_memory_for_testing(bytes); }
  ~FakeMemory() { set_usable_memory_for_testing(0); }
};

constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

TEST(Checked, ArithmeticReportsOverflowInsteadOfWrapping) {
  EXPECT_EQ(checked::mul<int64_t>(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checked::mul<int64_t>(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(checked::mul<int64_t>(INT64_MAX, 2));
  EXPECT_EQ(checked::add<int64_t>(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checked::add<int64_t>(INT64_MAX, 1));
  EXPECT_EQ(checked::product({3, 4, 5}), 60);
  EXPECT_EQ(checked::product({}), 1);
  EXPECT_EQ(checked::product({0, INT64_MAX, INT64_MAX}), 0);  // empty, whatever the rest
  EXPECT_FALSE(checked::product({INT64_MAX, 2}));
  EXPECT_FALSE(checked::product({int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_FALSE(checked::product({-1, 4}));
  // 2^61 + 1 float64s: 2^64 + 8 bytes, which size_t arithmetic wrapped to 8 (issue 30, case 6).
  EXPECT_FALSE(checked::bytes((int64_t{1} << 61) + 1, 8));
  EXPECT_FALSE(checked::bytes(int64_t{1} << 60, 8));  // 2^63: above what int64 counters hold
  EXPECT_EQ(checked::bytes((int64_t{1} << 60) - 1, 8), (size_t{1} << 63) - 8);
  EXPECT_EQ(checked::bytes(0, 8), 0u);
  EXPECT_FALSE(checked::bytes(-1, 8));
  // ceil(n / d) without n + d - 1 (which wrapped for n near 2^63, case 11).
  EXPECT_EQ(checked::ceil_div(INT64_MAX, int64_t{1} << 22), (int64_t{1} << 41));
  EXPECT_EQ(checked::ceil_div(INT64_MAX, INT64_MAX), 1);
  EXPECT_EQ(checked::ceil_div(10, 5), 2);
  EXPECT_EQ(checked::ceil_div(11, 5), 3);
  EXPECT_EQ(checked::ceil_div(0, 5), 0);
  EXPECT_EQ(bytes_str(17179869184), "17179869184 bytes (16.0 GiB)");
  EXPECT_EQ(bytes_str(1000), "1000 bytes");
}

// Case 6: ones({2^61 + 1}).persist() computed 8 * (2^61 + 1) in size_t, which wraps to 8: an
// 8-byte buffer that the kernel wrote 2^64 bytes into (a heap overflow from legal sizes).
TEST(Sizes, AnArrayWhoseByteCountWrapsIsRefusedBeforeAllocating) {
  const int64_t n = (int64_t{1} << 61) + 1;
  Array big = ones({1}).broadcast_to({n});  // one block: nothing refuses it before the plan
  const int64_t before = bytes_in_use();
  std::string e = kt::error_of([&] { big.persist(); });
  EXPECT_TRUE(has(e, "compute: Broadcast float64 (2305843009213693953,)")) << e;
  EXPECT_TRUE(has(e, "2305843009213693953 x 8 bytes, more than a 64-bit size can hold")) << e;
  EXPECT_EQ(bytes_in_use(), before);
  double one = 1;  // a buffer Kiln would read 2^64 + 8 bytes of
  e = kt::error_of([&] { from_buffer(&one, DType::Float64, {n}); });
  EXPECT_EQ(e,
            "from_buffer: shape (2305843009213693953,) of float64 is 2305843009213693953 x 8 "
            "bytes, more than a 64-bit size can hold");
  e = kt::error_of([&] { (big + 1.0).compute(); });
  EXPECT_TRUE(has(e, "(2305843009213693953,) would need 2305843009213693953 x 8 bytes")) << e;
  // The same array reduced is never materialized: no bytes to count (and its one block is
  // refused as a task of 2^61 elements instead of running for decades).
  e = kt::error_of([&] { big.sum().compute(); });
  EXPECT_TRUE(has(e, "is computed in blocks of (2305843009213693953,)")) << e;
  EXPECT_TRUE(has(e, "more than one block may hold (2^34 = 17179869184)")) << e;
}

TEST(Sizes, AnOutputLargerThanMemoryIsRefusedWithTheFigure) {
  // 2^59 float64s = 2^62 bytes: representable, not allocatable (on the CPU, refused before the
  // kernels are compiled; device plans, cuda and cuda-emu, refuse its 2^59-element block first).
  if (flags().device.rfind("cuda", 0) != 0) {
    std::string e = kt::error_of([] { ones({1}).broadcast_to({int64_t{1} << 59}).compute(); });
    EXPECT_TRUE(has(e,
                    "compute: the output Broadcast float64 (576460752303423488,) needs "
                    "4611686018427387904 bytes (4.0 EiB), more than this machine's memory"))
        << e;
  }
  std::string e;
  {
    FakeMemory memory(kGiB);
    const int64_t before = bytes_in_use();
    e = kt::error_of([] { ones({int64_t{1} << 28}, {int64_t{1} << 27}).compute(); });
    EXPECT_EQ(bytes_in_use(), before);
  }
  EXPECT_EQ(e,
            "compute: the output Broadcast float64 (268435456,) needs 2147483648 bytes (2.0 GiB), "
            "more than this machine's memory (1073741824 bytes (1.0 GiB)); compute a reduction "
            "or a slice of it instead, or use smaller chunks");
  // Two outputs that fit one by one but not together.
  FakeMemory memory(3 * (int64_t{1} << 20));   // 3 MiB
  Array a = ones({1}).broadcast_to({200000});  // 1.6 MB each
  e = kt::error_of([&] { compute({a + 1.0, a + 2.0}); });
  EXPECT_TRUE(has(e,
                  "compute: the outputs together need 3200000 bytes (3.1 MiB), more than "
                  "this machine's memory (3145728 bytes (3.0 MiB))"))
      << e;
  auto got = compute({a + 1.0});  // one fits
  EXPECT_EQ(got[0].at(199999), 2.0);
}

// Case 8: 2^24 blocks (the most a chunking may have) planned 6 GB of tasks, partials and run
// state, then died in std::bad_alloc. The plan's estimate is refused up front, with the figure.
TEST(Sizes, APlanThatWouldNotFitInMemoryIsRefusedWithTheFigure) {
  random::Generator rng(0);
  Array x = rng.uniform(1, 2, {4096, 4096}, {1, 1});
  Array y = (exp(x) - 1 / x).sum();
  std::string e;
  {
    FakeMemory memory(3 * kGiB);
    const int64_t before = bytes_in_use();
    e = kt::error_of([&] { y.compute(); });
    EXPECT_EQ(bytes_in_use(), before);
  }
  // 2^24 kernel blocks of one reduction: 2^24 * (330 + 90) bytes.
  EXPECT_TRUE(has(e,
                  "compute: the plan has 16777216 (1.7e+07) blocks (in 1 fused group) and "
                  "would need about 7046430720 bytes (6.6 GiB) to plan and schedule"))
      << e;
  EXPECT_TRUE(has(e,
                  "more than half of this machine's memory, 3221225472 bytes (3.0 GiB); use "
                  "larger chunks (fewer blocks)"))
      << e;
  // Unfused, each op is a group of 2^24 blocks: the estimate adds them up.
  ComputeOptions o;
  o.fuse = false;
  {
    FakeMemory memory(16 * kGiB);
    e = kt::error_of([&] { compute({y}, o); });
  }
  // 6 groups of 2^24 blocks (uniform as low + (high - low) u, its clamp, exp, 1 / x, the
  // difference, the sum), one reduction.
  EXPECT_TRUE(has(e,
                  "compute: the plan has 100663296 (1e+08) blocks (in 6 fused groups) and "
                  "would need about 34728837120 bytes (32.3 GiB)"))
      << e;
  // A plan of 4096 blocks fits (and is the same expression: nothing else changed).
  Array small = (exp(rng.uniform(1, 2, {256, 256}, {4, 4})) - 1.0).sum();
  FakeMemory memory(3 * kGiB);
  EXPECT_GT(small.compute().item<double>(), 0.0);
}

// Case 14: --size 2147483647 --chunk 2147483647, one task of 4.6e18 elements, was accepted and
// ran forever. A block may hold 2^34 elements (1e9-element blocks keep working).
TEST(Sizes, ABlockOfAbsurdlyManyElementsIsRefusedUpFront) {
  const int64_t n = 2147483647;
  std::string e = kt::error_of([&] { random::Generator(0).normal(10, 1, {n, n}, {n, n}); });
  EXPECT_EQ(e,
            "random: chunks (2147483647, 2147483647) of shape (2147483647, 2147483647) make "
            "blocks of 4611686014132420609 (4.6e+18) elements, more than one block may hold "
            "(2^34 = 17179869184): each block is one task on one core, which would run for hours "
            "(or years); use smaller chunks, or none (automatic blocks of about 4 million "
            "elements)");
  const int64_t limit = int64_t{1} << 34;
  EXPECT_NO_THROW(ones({limit}, {limit}));
  EXPECT_THROW(ones({limit + 1}, {limit + 1}), Error);
  EXPECT_THROW(ones({2, limit}, {2, 0}), Error);  // 0: the whole dim
  EXPECT_NO_THROW(ones({2, limit}, {1, 0}));
  EXPECT_NO_THROW(ones({limit}).rechunk({0}));
  e = kt::error_of([&] { ones({limit + 1}).rechunk({0}); });
  EXPECT_TRUE(has(e, "rechunk: chunks (0,) of shape (17179869185,) make blocks of 17179869185"))
      << e;
  // A block of 1e9 elements is an ordinary task.
  const int64_t g = 1000000000;
  EXPECT_EQ(arange(0, g, 1, Shape{g}).sum().compute().item<int64_t>(), g * (g - 1) / 2);
}

// Case 11: a .npy of shape (0, 2^63 - 1): (shape + b - 1) / b wrapped past the block cap and the
// chunk list grew by 600 MB/s forever. (Bool items: load_npy's reader refuses this shape itself
// for wider items, whose byte count would pass 2^63; one-byte items reach the frontend.)
TEST(Sizes, ANpyWithADimensionBeyondIndexingIsRefused) {
  std::string path = empty_npy("huge_dim.npy", "(0, 9223372036854775807)");
  std::string e = kt::error_of([&] { load_npy(path); });
  EXPECT_EQ(e, "load_npy('" + path +
                   "'): dimension 9223372036854775807 of shape (0, 9223372036854775807) is "
                   "larger than Kiln can index (at most 2^62)");
  EXPECT_THROW(load_npy(path, {0, 0}), Error);
  EXPECT_THROW(load_npy(path, {1, 1}), Error);
  // At 2^62 it is an empty array, one block (nothing to split), computed as NumPy would.
  path = empty_npy("edge_dim.npy", "(0, 4611686018427387904)");
  Array a = load_npy(path);
  EXPECT_EQ(a.shape(), (Shape{0, int64_t{1} << 62}));
  EXPECT_EQ(a.chunks(), (Chunks{{0}, {int64_t{1} << 62}}));
  NDArray s = a.sum().compute();
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.item<int64_t>(), 0);
  EXPECT_EQ(a.any({1}).compute().shape(), Shape{0});
  // Explicit small chunks of that dim still split it past the block cap: refused, not planned.
  e = kt::error_of([&] { load_npy(path, {1, 1024}); });
  EXPECT_TRUE(has(e, "into more than 16777216 blocks; use larger chunks")) << e;
}

// Shapes that other operations derive: broadcasts, concatenations, reshapes, stacks. Each is
// checked where it is built, with the operation's name.
TEST(Sizes, DerivedShapesAndGridsAreChecked) {
  const int64_t big = int64_t{1} << 40;
  Array col = ones({1, 1}).broadcast_to({big, 1}), row = ones({1, 1}).broadcast_to({1, big});
  std::string e = kt::error_of([&] { col + row; });
  EXPECT_EQ(e,
            "add: shapes (1099511627776, 1) and (1, 1099511627776) broadcast to (1099511627776, "
            "1099511627776), which has more elements than Kiln can index (at most 2^62)");
  Array half = ones({1}).broadcast_to({int64_t{1} << 62});
  e = kt::error_of([&] { concatenate({half, half}); });
  EXPECT_TRUE(has(e, "concatenate: the inputs' lengths along axis 0 add up to more than")) << e;
  e = kt::error_of([&] { zeros({0}).reshape({big, big, 0}); });
  EXPECT_EQ(e,
            "reshape: cannot reshape array of size 0 into shape (1099511627776, "
            "1099511627776, 0)");
  // Two grids of 2^13 blocks each broadcast into 2^26 blocks: refused where the sum is built.
  e = kt::error_of([&] { ones({8192, 1}, {1, 1}) + ones({1, 8192}, {1, 1}); });
  EXPECT_TRUE(has(e,
                  "Broadcast: an array of shape (8192, 8192) in chunks (1x8192, 1x8192) has "
                  "67108864 (6.7e+07) blocks, more than a plan may hold (16777216)"))
      << e;
  // A stack of 2^25 matrices would build 2^25 nodes first.
  e = kt::error_of([&] { matmul(ones({1 << 25, 1, 1}), ones({1, 1})); });
  EXPECT_TRUE(has(e, "matmul: a stack of 33554432 (3.4e+07) matrices (batch shape (33554432,))"))
      << e;
  e = kt::error_of([&] { linalg::svd(ones({1 << 25, 1, 1})); });
  EXPECT_TRUE(has(e, "linalg.svd: a stack of 33554432")) << e;
}

// Issue 30, case 21: norm(x, 2 / -2 / 'nuc', axis=(1, 2)) of a stack raised "needs a 2-D
// array"; NumPy gives a norm per matrix (the singular values of each, moved last).
TEST(Sizes, SingularValueNormsOfStacksMatchNumPy) {
  NDArray c = kt::random_array(DType::Float64, {3, 4, 5}, 901);
  NDArray d = kt::random_array(DType::Float32, {2, 3, 6, 4}, 902);
  Array C = lazy(c, {2, 3, 2}), D = lazy(d, {1, 2, 4, 3});
  using linalg::norm;
  auto got = compute({norm(C, 2.0, {1, 2}), norm(C, -2.0, {1, 2}), norm(C, "nuc", {1, 2}),
                      norm(C, 2.0, {-2, -1}), norm(C, "nuc", {2, 1}), norm(C, -2.0, {2, 1}),
                      norm(C, 2.0, {0, 2}), norm(C, "nuc", {1, 2}, true),
                      norm(C, -2.0, {0, -1}, true), norm(D, 2.0, {1, 3}), norm(D, "nuc", {3, 2})});
  auto want = kt::numpy(
      {{"c", c}, {"d", d}},
      {"np.linalg.norm(c, 2, axis=(1, 2))", "np.linalg.norm(c, -2, axis=(1, 2))",
       "np.linalg.norm(c, 'nuc', axis=(1, 2))", "np.linalg.norm(c, 2, axis=(-2, -1))",
       "np.linalg.norm(c, 'nuc', axis=(2, 1))", "np.linalg.norm(c, -2, axis=(2, 1))",
       "np.linalg.norm(c, 2, axis=(0, 2))", "np.linalg.norm(c, 'nuc', axis=(1, 2), keepdims=True)",
       "np.linalg.norm(c, -2, axis=(0, -1), keepdims=True)", "np.linalg.norm(d, 2, axis=(1, 3))",
       "np.linalg.norm(d, 'nuc', axis=(3, 2))"});
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].shape(), want[k].shape()) << k;
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << k;
    double tol = got[k].dtype() == DType::Float32 ? 1e-5 : 1e-12;
    EXPECT_TRUE(same(got[k], want[k], tol, tol)) << k;
  }
  EXPECT_EQ(got[0].shape(), Shape{3});  // one norm per matrix
  EXPECT_EQ(got[9].shape(), (Shape{2, 6}));
}

// Issue 30, case 25: NumPy 2.4's reductions of a 0-d array take axis=0 and axis=-1 (the value
// itself; argmax/argmin: 0), except mean, var and std, which raise as NumPy does; other axes are
// out of bounds in both.
TEST(Sizes, ReductionsOfZeroDimensionalArraysAlongAxisZeroMatchNumPy) {
  NDArray f = kt::make_array(DType::Float64, {}, {3.5});
  NDArray i = kt::make_array(DType::Int32, {}, {5});
  NDArray b = kt::make_array(DType::Bool, {}, {1});
  NDArray z = kt::make_array(DType::Float64, {}, {-0.0});
  Array F = lazy(f), I = lazy(i), B = lazy(b), Z = lazy(z);
  auto got = compute({F.sum({0}), F.sum({-1}), F.prod({0}), F.max({-1}), F.min({0}, true),
                      I.sum({0}), I.prod({-1}), I.max({0}), B.any({0}), B.all({-1}), B.sum({0}),
                      Z.sum({0}), F.argmax(0), F.argmin(-1), I.argmax(0, true),
                      reduce(ReduceFn::ArgMax, F, {}), reduce(ReduceFn::ArgMin, I, {-1})});
  auto want = kt::numpy(
      {{"f", f}, {"i", i}, {"b", b}, {"z", z}},
      {"np.sum(f, axis=0)", "np.sum(f, axis=-1)", "np.prod(f, axis=0)", "np.max(f, axis=-1)",
       "np.min(f, axis=0, keepdims=True)", "np.sum(i, axis=0)", "np.prod(i, axis=-1)",
       "np.max(i, axis=0)", "np.any(b, axis=0)", "np.all(b, axis=-1)", "np.sum(b, axis=0)",
       "np.sum(z, axis=0)", "np.argmax(f, axis=0)", "np.argmin(f, axis=-1)",
       "np.argmax(i, axis=0, keepdims=True)", "np.argmax(f)", "np.argmin(i, axis=-1)"});
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].shape(), Shape{}) << k;
    EXPECT_TRUE(same(got[k], want[k])) << k;
  }
  EXPECT_EQ(got[0].item<double>(), 3.5);
  EXPECT_EQ(got[5].dtype(), DType::Int64);  // int32 sums are int64, as NumPy's
  EXPECT_FALSE(std::signbit(got[11].item<double>()));
  EXPECT_EQ(got[12].item<int64_t>(), 0);
  // NumPy raises for these too.
  EXPECT_EQ(kt::error_of([&] { F.mean({0}); }),
            "mean: axis 0 is out of bounds for an array of rank 0");
  EXPECT_THROW(F.var({-1}), Error);
  EXPECT_THROW(F.sum({1}), Error);
  EXPECT_THROW(F.sum({-2}), Error);
  EXPECT_THROW(F.argmax(1), Error);
  EXPECT_THROW(F.sum({0, 0}), Error);
}

// Slice steps near 2^63: (stop - start + step - 1) / step wrapped, -INT64_MIN overflowed, and a
// huge step of a one-element selection was multiplied into the leaves' strides by the passes.
TEST(Sizes, SlicesWithStepsNear2To63MatchNumPy) {
  NDArray a = kt::random_array(DType::Float64, {3, 4}, 903);
  const int64_t max = INT64_MAX, min = INT64_MIN;
  Array A = lazy(a, {2, 3});
  auto got = compute({A.slice({Slice({}, {}, max)}), A.slice({Slice({}, {}, min)}),
                      A.slice({Slice(1, 3, int64_t{1} << 62), Slice({}, {}, min)}),
                      A.slice({Slice(min, max, max)}), A.slice({Slice::all(), Slice(3, min, min)}),
                      (A.slice({Slice({}, {}, max)}) * 2.0).sum()});
  auto want = kt::numpy({{"a", a}}, {"a[::2**63-1]", "a[::-2**63]", "a[1:3:2**62, ::-2**63]",
                                     "a[-2**63:2**63-1:2**63-1]", "a[:, 3:-2**63:-2**63]",
                                     "(a[::2**63-1] * 2).sum()"});
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
  EXPECT_EQ(got[1].shape(), (Shape{1, 4}));
  EXPECT_EQ(got[1].at(0), a.at(8));  // the last row
}
