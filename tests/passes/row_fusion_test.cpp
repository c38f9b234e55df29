// Row fusion (fuse's merge_rows, the kernels' row stage): a reduction along rows joins the kernel
// that reads it back along those rows. Results against NumPy with row fusion on and off, the
// kernel counts that show the merge, and the cases that must stay apart.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

// For a GPU (KILN_DEVICE=cuda, cuda-emu) fuse makes no kernel whose reductions keep no dim in
// common (the CUDA printer would run its blocks on one thread): X.T @ f(X @ b) and a 1-D row stay
// two kernels there (passes/fuse.cpp, ThreadSplit).
bool gpu() { return flags().device.rfind("cuda", 0) == 0; }

struct Outcome {
  std::vector<NDArray> out;
  int64_t kernels = 0;
  std::string ir;
};

Outcome run(const std::vector<Array>& a, bool rows) {
  ComputeOptions o;
  o.row_fusion = rows;
  std::ostringstream os;
  o.ir = &os;
  Outcome r;
  r.out = compute(a, o);
  r.kernels = stats().last_kernels;
  r.ir = os.str();
  return r;
}

// Computes `outs` with and without row fusion, checks both against NumPy's `exprs` over x, and
// returns the kernel counts (with, without).
std::pair<int64_t, int64_t> check(const NDArray& x, const Shape& chunks,
                                  const std::function<std::vector<Array>(const Array&)>& build,
                                  const std::vector<std::string>& exprs, double rtol,
                                  const std::string& what) {
  auto want = kt::numpy({{"x", x}}, exprs);
  int64_t k[2] = {0, 0};
  for (bool rows : {true, false}) {
    Outcome r = run(build(kt::lazy(x, chunks)), rows);
    k[rows ? 0 : 1] = r.kernels;
    for (size_t i = 0; i < exprs.size(); ++i)
      EXPECT_TRUE(kt::same(r.out[i], want[i], rtol, rtol))
          << what << " rows=" << rows << " " << exprs[i] << "\n"
          << r.ir;
  }
  return {k[0], k[1]};
}

}  // namespace

TEST(RowFusion, CenteringRowsIsOneKernelForEveryRowChunking) {
  for (DType t : {DType::Float64, DType::Float32}) {
    NDArray a = kt::random_array(t, {37, 23}, 701);
    double tol = t == DType::Float32 ? 1e-5 : 1e-13;
    for (Shape chunks : {Shape{10, 23}, Shape{37, 23}, Shape{1, 23}}) {
      auto [with, without] = check(
          a, chunks,
          [](const Array& x) {
            return std::vector<Array>{x - x.mean({1}, true), x / x.sum({1}).reshape({-1, 1})};
          },
          {"x - x.mean(axis=1, keepdims=True)", "x / x.sum(axis=1).reshape(-1, 1)"}, tol,
          shape_str(chunks));
      EXPECT_EQ(with, 1) << shape_str(chunks);
      EXPECT_EQ(without, 2) << shape_str(chunks);  // {mean, sum}, then both outputs
    }
  }
}

TEST(RowFusion, SoftmaxAndRowVarianceAgreeWithNumPy) {
  NDArray a = kt::random_array(DType::Float64, {50, 40}, 702, -20, 20);
  auto [with, without] = check(
      a, {16, 40},
      [](const Array& x) {
        Array e = exp(x - x.max({1}, true));
        Array centered = x - x.mean({1}, true);
        return std::vector<Array>{e / e.sum({1}, true), (centered * centered).sum({1})};
      },
      {"np.exp(x - x.max(axis=1, keepdims=True)) / np.exp(x - x.max(axis=1, "
       "keepdims=True)).sum(axis=1, keepdims=True)",
       "((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)"},
      1e-12, "softmax");
  // Fused: {max, sum(exp)} and {mean, variance} (merged as siblings over x), then the softmax
  // division reading max and sum: a row output's kernel is not absorbed again (one level).
  EXPECT_LT(with, without);
}

TEST(RowFusion, GradientOfALogisticLossReadsXOnce) {
  NDArray x = kt::random_array(DType::Float64, {1003, 17}, 703);
  NDArray b = kt::random_array(DType::Float64, {17}, 704, -0.5, 0.5);
  NDArray y = kt::random_array(DType::Float64, {1003}, 705, 0, 1);
  auto want = kt::numpy({{"x", x}, {"b", b}, {"y", y}},
                        {"x.T @ (1 / (1 + np.exp(-(x @ b))) - y)", "x @ b"});
  for (Shape chunks : {Shape{100, 17}, Shape{1003, 17}, Shape{334, 17}}) {
    Array X = kt::lazy(x, chunks), B = kt::lazy(b), Y = kt::lazy(y, {chunks[0]});
    Array eta = matmul(X, B);
    for (bool rows : {true, false}) {
      Outcome r = run({matmul(X.T(), sigmoid(eta) - Y), eta}, rows);
      EXPECT_TRUE(kt::same(r.out[0], want[0], 1e-12, 1e-12)) << shape_str(chunks) << r.ir;
      // The row output is also stored for other readers: X @ b itself.
      EXPECT_TRUE(kt::same(r.out[1], want[1], 1e-13, 1e-13)) << shape_str(chunks);
      EXPECT_EQ(r.kernels, rows && !gpu() ? 1 : 2) << r.ir;
      EXPECT_EQ(r.ir.find("row->") != std::string::npos, rows && !gpu()) << r.ir;
    }
  }
}

// A row-fused kernel prefetches the rows a few KiB ahead of the one it reads (llvm_printer.cpp,
// prefetch_ahead): at a block's end those lie past its buffer. X here ends at a page that may not
// be touched at all, so a prefetch that were a load would crash; the results stay NumPy's.
TEST(RowFusion, PrefetchesPastTheLastRowTouchNothing) {
  for (DType t : {DType::Float64, DType::Float32}) {
    NDArray x = kt::random_array(t, {1003, 17}, 707);
    NDArray b = kt::random_array(t, {17}, 708, -0.5, 0.5);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t span = (x.nbytes() + page - 1) / page * page;
    void* map =
        mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    char* guard = static_cast<char*>(map) + span;
    ASSERT_EQ(mprotect(guard, page, PROT_NONE), 0);
    void* at = guard - x.nbytes();
    std::memcpy(at, x.data(), x.nbytes());
    auto want = kt::numpy({{"x", x}, {"b", b}}, {"x.T @ (x @ b - 1)", "x @ b"});
    for (Shape chunks : {Shape{1003, 17}, Shape{250, 17}}) {
      Array X = from_buffer(at, t, {1003, 17}, chunks);
      Array eta = matmul(X, kt::lazy(b));
      Outcome r = run({matmul(X.T(), eta - 1.0), eta}, true);
      const double tol = t == DType::Float32 ? 1e-4 : 1e-12;
      EXPECT_TRUE(kt::same(r.out[0], want[0], tol, tol)) << shape_str(chunks) << r.ir;
      EXPECT_TRUE(kt::same(r.out[1], want[1], tol, tol)) << shape_str(chunks);
      EXPECT_EQ(r.ir.find("row->") != std::string::npos, !gpu()) << r.ir;
    }
    munmap(map, span + page);
  }
}

// A row-fused kernel's rest runs 4 rows per innermost loop where it folds nothing along the row
// (llvm_printer.cpp, jam_rest): each partial must still take its rows in order. Sums over rows
// of values 10^12 apart show any other order in their bits; tiles of 16 and 10 rows leave 0 and
// 2 rows after the groups of 4, blocks of 37 rows a tile of 5. The row stage is max and min, the
// same bits in any order (a float sum along the row may be reassociated: vectorized).
TEST(RowFusion, JammedRowsFoldEachColumnInRowOrder) {
  NDArray data = kt::random_array(DType::Float64, {37, 23}, 709);
  auto* d = static_cast<double*>(data.data());
  for (int64_t i = 0; i < 37; i += 3) d[i * 23 + i % 23] *= 1e12;
  for (Shape chunks : {Shape{37, 23}, Shape{10, 23}, Shape{16, 23}}) {
    Array x = kt::lazy(data, chunks);
    Array hi = x - x.max({1}, true), lo = x.min({1}, true);
    std::vector<Array> outs = {hi.sum({0}),  (lo * x).sum({0}), (lo * x * x).sum({0}),
                               hi.argmax(0), (x - lo).max({0}), hi * 2};
    std::vector<NDArray> got, want;
    std::ostringstream dump;
    for (Device dev : {Device::Cpu, Device::Interp}) {
      ComputeOptions o;
      o.device = dev;
      if (dev == Device::Cpu) o.kernels = &dump;
      (dev == Device::Cpu ? got : want) = compute(outs, o);
    }
    // The row stage (`row out`) and the jammed rest's loop in the printed LLVM IR.
    if (!gpu()) {
      EXPECT_NE(dump.str().find("row out"), std::string::npos) << dump.str();
      EXPECT_NE(dump.str().find("rowjam.head"), std::string::npos) << dump.str();
    }
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_TRUE(kt::same(got[k], want[k])) << shape_str(chunks) << " output " << k;
  }
}

TEST(RowFusion, IntegerBoolAndNaNRows) {
  NDArray i = kt::random_array(DType::Int64, {21, 9}, 706, -50, 50);
  auto [wi, wo] = check(
      i, {5, 9},
      [](const Array& x) {
        return std::vector<Array>{
            x - x.sum({1}, true), x * x.min({1}, true),
            (x > x.mean({1}, true)).any({1}) & (x >= x.min({1}, true)).all({1})};
      },
      {"x - x.sum(axis=1, keepdims=True)", "x * x.min(axis=1, keepdims=True)",
       "(x > x.mean(axis=1, keepdims=True)).any(axis=1) & (x >= x.min(axis=1, "
       "keepdims=True)).all(axis=1)"},
      0, "int64");
  EXPECT_LT(wi, wo);
  // NaN in a row propagates through max and sum to that row only.
  NDArray f =
      kt::make_array(DType::Float64, {3, 4}, {1, 2, 3, 4, 5, NAN, 7, 8, -0.0, -0.0, -0.0, -0.0});
  check(
      f, {2, 4},
      [](const Array& x) {
        return std::vector<Array>{x - x.max({1}, true), x * x.prod({1}, true),
                                  x + x.sum({1}, true)};
      },
      {"x - x.max(axis=1, keepdims=True)", "x * x.prod(axis=1, keepdims=True)",
       "x + x.sum(axis=1, keepdims=True)"},
      0, "nan");
}

TEST(RowFusion, OneDimensionalArraysFuseOnlyInOneBlock) {
  NDArray a = kt::random_array(DType::Float64, {1000}, 707);
  auto build = [](const Array& x) { return std::vector<Array>{x - x.mean()}; };
  auto one = check(a, {1000}, build, {"x - x.mean()"}, 1e-13, "one block");
  EXPECT_EQ(one.first, gpu() ? 2 : 1);
  EXPECT_EQ(one.second, 2);
  auto many = check(a, {300}, build, {"x - x.mean()"}, 1e-13, "four blocks");
  EXPECT_EQ(many.first, 2);  // a row split over blocks has no per-block result
}

TEST(RowFusion, CasesThatStayApart) {
  NDArray a = kt::random_array(DType::Float64, {30, 24}, 708);
  // Rows split over column chunks: the row's sum needs every column block.
  auto split = check(
      a, {10, 8}, [](const Array& x) { return std::vector<Array>{x - x.sum({1}, true)}; },
      {"x - x.sum(axis=1, keepdims=True)"}, 1e-13, "column chunks");
  EXPECT_EQ(split.first, split.second);
  // Read along columns (a transpose), not along its rows: stays apart.
  NDArray s = kt::random_array(DType::Float64, {24, 24}, 709);
  auto transposed = check(
      s, {8, 24}, [](const Array& x) { return std::vector<Array>{x - x.sum({1}, true).T()}; },
      {"x - x.sum(axis=1, keepdims=True).T"}, 1e-13, "transposed read");
  EXPECT_EQ(transposed.first, transposed.second);
  // Argmax's result is an index, not a row value.
  auto arg = check(
      a, {10, 24},
      [](const Array& x) {
        return std::vector<Array>{x * argmax(x, 1).reshape({-1, 1})};
      },
      {"x * np.argmax(x, axis=1).reshape(-1, 1)"}, 1e-13, "argmax");
  EXPECT_EQ(arg.first, arg.second);
  // Random leaves run in tiles, which have no row stage: computed apart, same values.
  random::Generator g1(5), g2(5);
  Array r1 = g1.uniform(0, 1, {40, 30}, {10, 30}), r2 = g2.uniform(0, 1, {40, 30}, {10, 30});
  Outcome fused = run({r1 - r1.sum({1}, true)}, true);
  Outcome apart = run({r2 - r2.sum({1}, true)}, false);
  EXPECT_EQ(fused.kernels, apart.kernels);
  EXPECT_TRUE(kt::same(fused.out[0], apart.out[0]));
}
