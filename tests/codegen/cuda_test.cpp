// The CUDA backend without a GPU (codegen/cuda): the printed kernels run on cuda-emu (compiled as
// host C++, run serially with the GPU's reduction tree) in each of the printer's work splits and
// must give the interpreter's values; their GPU build must compile with NVRTC for sm_80 and
// sm_90; and asking for the GPU where there is none is a clean kiln::Error. The ops table
// (ops_table_test.cpp) checks every op and dtype on cuda-emu too, and scripts/test.sh runs the
// whole suite on it with KILN_CUDA_CHECK=80,90.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/backend.hpp"
#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/cuda/cuda_printer.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "ir/linalg.hpp"
#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

std::vector<NDArray> on(Device d, const std::vector<Array>& outs, std::string* sources = nullptr) {
  ComputeOptions o;
  o.device = d;
  o.progress = false;
  std::ostringstream dump;
  if (sources) o.kernels = &dump;  // each kernel's IR and printed source
  std::vector<NDArray> r = compute(outs, o);
  if (sources) *sources = dump.str();
  return r;
}

// The work splits (cuda_printer.hpp) of the kernels in a dump: "flat", "owned", "serial", ...
std::set<std::string> modes(const std::string& sources) {
  std::set<std::string> m;
  std::regex re("// kernel 0x[0-9a-f]+ull: ([a-z]+)");
  for (auto it = std::sregex_iterator(sources.begin(), sources.end(), re);
       it != std::sregex_iterator(); ++it)
    m.insert((*it)[1]);
  return m;
}

}  // namespace

TEST(Cuda, WithoutAGpuTheCudaDeviceIsACleanError) {
  std::string why;
  if (cuda::cuda_device_present(&why)) GTEST_SKIP() << "a GPU is present on this machine";
  NDArray data = kt::random_array(DType::Float64, {10}, 1, 0, 1);  // outlives x (zero-copy)
  Array x = kt::lazy(data);
  try {
    on(Device::Cuda, {x + 1});
    FAIL() << "computed on --device cuda without a GPU";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("device cuda: "), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m;
    EXPECT_NE(m.find("cuda-emu"), std::string::npos) << m;
  }
  // The rest of the process is unaffected.
  EXPECT_EQ(on(Device::Cpu, {(x * 0 + 2).sum()})[0].at(0), 20.0);
}

TEST(Cuda, FlatKernelsCombineThreadPartialsLikeTheInterpreter) {
  // 3 x 10^5 elements in one block: 1024 blocks of 256 threads, grid-stride; ties for argmax
  // and argmin across threads and blocks go to the first index, as on the CPU.
  NDArray data = kt::random_array(DType::Float64, {300000}, 5, -1, 1);
  auto* d = static_cast<double*>(data.data());
  for (int64_t k : {7, 123456, 299999}) d[k] = 5.0;  // three ties for the maximum
  d[200000] = -7.0;
  Array x = kt::lazy(data, {300000});
  Array i = (x * 1000).astype(DType::Int64);
  std::vector<Array> outs = {x.argmax(),    x.argmin(),    x.max(), i.sum(),       i.min(),
                             (x > 0).any(), (x < 6).all(), x.sum(), exp(x) * 2 - x};
  std::string src;
  std::vector<NDArray> emu = on(Device::CudaEmu, outs, &src);
  std::vector<NDArray> ref = on(Device::Interp, outs);
  EXPECT_EQ(modes(src), (std::set<std::string>{"flat"})) << src.substr(0, 4000);
  EXPECT_EQ(emu[0].at_int(0), 7);
  EXPECT_EQ(emu[1].at_int(0), 200000);
  for (size_t k = 0; k < 7; ++k) EXPECT_TRUE(kt::same(emu[k], ref[k])) << "output " << k;
  EXPECT_TRUE(kt::same(emu[7], ref[7], 1e-13));  // compensated sums, in another order
  // Kiln's exp on both; libm's against libmvec's with KILN_MATH=libmvec.
  EXPECT_TRUE(kt::same(emu[8], ref[8], 1e-15));
}

TEST(Cuda, OwnedAndSerialKernelsMatchTheInterpreterBitForBit) {
  // Rows of 256 elements or fewer: one thread per item (cuda::row_group), the interpreter's order.
  NDArray data = kt::random_array(DType::Float64, {37, 5, 256}, 9, -2, 2);
  Array a = kt::lazy(data, {20, 5, 250}), rows = kt::lazy(data, {20, 5, 256});
  Array b = a.astype(DType::Float32);
  struct Case {
    Array out;
    const char* mode;
  };
  std::vector<Case> cases = {
      {a.sum({2}), "owned"},                   // threads over dims 0-1, along the rows
      {a.sum({0}), "owned"},                   // threads over dims 1-2, along the rows
      {b.mean({0, 2}), "owned"},               // threads over dim 1
      {a.argmax(2), "owned"},                  // argmax along rows
      {(a * 2).min({1}), "owned"},             // threads over dims 0 and 2
      {rows - rows.mean({2}, true), "owned"},  // the row stage (row fusion)
      // Reducing both ways over one domain: merged, no dim would be kept by every reduction
      // and one thread would run the block, so for a GPU fuse keeps them two kernels.
      {a.sum({0, 1}) + a.sum({1, 2}).sum(), "owned"},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    std::string src;
    NDArray emu = on(Device::CudaEmu, {cases[k].out}, &src)[0];
    NDArray ref = on(Device::Interp, {cases[k].out})[0];
    EXPECT_TRUE(modes(src).count(cases[k].mode)) << "case " << k << "\n" << src;
    EXPECT_FALSE(modes(src).count("serial")) << "case " << k << "\n" << src;
    if (k == 5) {
      EXPECT_NE(src.find("the row stage"), std::string::npos) << src;
    }
    // Case 6's last sum is a flat kernel's: its partials combine in the GPU's order.
    EXPECT_TRUE(kt::same(emu, ref, k == 6 ? 1e-13 : 0)) << "case " << k;
  }
}

TEST(Cuda, LongColumnsOfFewItemsSplitIntoSegmentsFoldedInOrder) {
  // 5000 x 3 in one block: 3 items, so the rows are cut into segments (cuda_printer.hpp,
  // split_segments: min(ceil(5000 / 64), 131072 / 3, 1024) = 79 segments of 64 rows), which a
  // warp per item folds: lanes 0-14 fold three segments each, the others two.
  EXPECT_EQ(cuda::split_segments(3, 5000), 79);
  EXPECT_EQ(cuda::split_segments(200000, 5000), 1);  // the items fill the device alone
  EXPECT_EQ(cuda::split_segments(3, 256), 1);        // short columns: not split
  EXPECT_EQ(cuda::split_segments(3, 257), 5);
  EXPECT_EQ(cuda::split_segments(1, 1 << 20), 1024);
  EXPECT_EQ(cuda::split_segments(100, 100000), 1024);  // X.T @ r of logistic-gd's blocks
  NDArray data = kt::random_array(DType::Float64, {5000, 3}, 21, -2, 2);
  auto* d = static_cast<double*>(data.data());
  d[3 * 4321 + 1] = 9.0;  // column 1's maximum in a late segment, tied in an earlier one
  d[3 * 17 + 1] = 9.0;
  d[3 * 2500 + 2] = -9.0;
  Array x = kt::lazy(data, {5000, 3});
  Array xi = (x * 1000).astype(DType::Int64);
  // Exact folds (min, max, argmax, argmin, integer sums, any) equal the interpreter's bit for
  // bit; float sums within the reassociation bound; the sum over dims 0 and 2 of a 3-d block
  // folds each row's strip sums into the segment's partial.
  NDArray cube = kt::random_array(DType::Float64, {2000, 2, 70}, 22, -1, 1);
  Array c = kt::lazy(cube, {2000, 2, 70});
  std::vector<Array> outs = {x.max({0}),        x.argmax(0),         x.argmin(0),
                             xi.sum({0}),       (x > 1.99).any({0}), x.sum({0}),
                             (x * x).mean({0}), c.sum({0, 2}),       x * 2};
  std::string src;
  std::vector<NDArray> emu = on(Device::CudaEmu, outs, &src);
  std::vector<NDArray> ref = on(Device::Interp, outs);
  EXPECT_NE(src.find(": owned, split"), std::string::npos) << src.substr(0, 4000);
  EXPECT_EQ(emu[1].at_int(1), 17);
  EXPECT_EQ(emu[2].at_int(2), 2500);
  for (size_t k = 0; k < 5; ++k) EXPECT_TRUE(kt::same(emu[k], ref[k])) << "output " << k;
  for (size_t k = 5; k < 8; ++k) EXPECT_TRUE(kt::same(emu[k], ref[k], 1e-13)) << "output " << k;
  EXPECT_TRUE(kt::same(emu[8], ref[8]));
  // One segment (items enough): the interpreter's order, bit for bit.
  NDArray wide = kt::random_array(DType::Float64, {40, 33000}, 23, -1, 1);
  Array w = kt::lazy(wide, {40, 33000});
  EXPECT_TRUE(kt::same(on(Device::CudaEmu, {w.sum({0})})[0], on(Device::Interp, {w.sum({0})})[0]));
}

TEST(Cuda, LongRowsRunAWarpOrABlockPerItem) {
  // Rows over 256 elements: a warp per item, or the thread block where the items are fewer
  // than 4096 and the rows at least 8192 long (cuda_printer.hpp, row_group).
  EXPECT_EQ(cuda::row_group(5, 256), 1);
  EXPECT_EQ(cuda::row_group(5, 257), 32);
  EXPECT_EQ(cuda::row_group(5, 8191), 32);
  EXPECT_EQ(cuda::row_group(5, 8192), 256);
  EXPECT_EQ(cuda::row_group(4095, 1 << 20), 256);
  EXPECT_EQ(cuda::row_group(4096, 1 << 20), 32);  // the warps fill the device
  EXPECT_EQ(cuda::row_group(1000000, 100), 1);
  // 40 x 3000 (a warp per row) and 3 x 20000 (a block per row), each in one block. Ties and
  // NaNs fall in different lanes: the first index wins, as on the CPU.
  NDArray data = kt::random_array(DType::Float64, {40, 3000}, 41, -2, 2);
  auto* d = static_cast<double*>(data.data());
  d[3000 * 2 + 2999] = 9.0;  // row 2: ties for the maximum, lanes 23 and 17
  d[3000 * 2 + 17] = 9.0;
  d[3000 * 5 + 100] = std::nan("");  // row 5: NaNs, lanes 4 and 18
  d[3000 * 5 + 50] = std::nan("");
  d[3000 * 7 + 1234] = -9.0;
  NDArray long_data = kt::random_array(DType::Float64, {3, 20000}, 42, -1, 1);
  auto* ld = static_cast<double*>(long_data.data());
  ld[20000 + 19999] = 7.0;  // row 1: ties in different warps of the block
  ld[20000 + 300] = 7.0;
  Array x = kt::lazy(data, {40, 3000}), y = kt::lazy(long_data, {3, 20000});
  Array xi = (x * 1000).astype(DType::Int64);
  NDArray cube = kt::random_array(DType::Float64, {6, 3, 5000}, 43, -1, 1);
  Array c = kt::lazy(cube, {6, 3, 5000});
  std::vector<Array> exact = {x.max({1}),  x.argmax(1),         x.argmin(1),
                              xi.sum({1}), (x > 1.99).any({1}), (x < 1.99).all({1}),
                              y.argmax(1), y.min({1}),          x * 2};
  std::vector<Array> sums = {x.sum({1}),
                             (x * x).mean({1}),
                             x - x.mean({1}, true),  // the row stage: its mean to every lane
                             y.sum({1}),
                             c.sum({1, 2}),
                             c.sum({2}),
                             x.astype(DType::Float32).sum({1}),
                             (1 + x * 1e-3).prod({1})};
  std::vector<Array> outs = exact;
  outs.insert(outs.end(), sums.begin(), sums.end());
  std::string src;
  std::vector<NDArray> emu = on(Device::CudaEmu, outs, &src);
  std::vector<NDArray> ref = on(Device::Interp, outs);
  EXPECT_NE(src.find("long rows: a warp or a block per item"), std::string::npos)
      << src.substr(0, 4000);
  EXPECT_FALSE(modes(src).count("serial"));
  EXPECT_EQ(emu[1].at_int(2), 17);
  EXPECT_EQ(emu[1].at_int(5), 50);
  EXPECT_EQ(emu[2].at_int(5), 50);
  EXPECT_EQ(emu[2].at_int(7), 1234);
  EXPECT_EQ(emu[6].at_int(1), 300);
  EXPECT_TRUE(std::isnan(emu[0].at(5)));
  for (size_t k = 0; k < exact.size(); ++k) EXPECT_TRUE(kt::same(emu[k], ref[k])) << "output " << k;
  // Float sums and products: lanes' compensated partials folded by the tree, within the
  // reassociation bound of their values.
  for (size_t k = exact.size(); k < outs.size(); ++k)
    EXPECT_TRUE(kt::same(emu[k], ref[k], 1e-12, 1e-12)) << "output " << k;
  // KILN_CUDA_ROWS_FROM moves the threshold: rows of 100 by a warp each (a GPU experiment's
  // switch); the kernels' own shape carries it to their launches.
  struct RowsFrom {
    int64_t before = flags().cuda_rows_from;
    RowsFrom() { flags().cuda_rows_from = 64; }
    ~RowsFrom() { flags().cuda_rows_from = before; }
  } rows_from;
  EXPECT_EQ(cuda::row_group(10, 100, 64), 32);
  Array s = kt::lazy(data, {40, 100});
  std::vector<Array> short_rows = {(s * 3).sum({1}), (s * 3).argmax(1)};
  emu = on(Device::CudaEmu, short_rows, &src);
  ref = on(Device::Interp, short_rows);
  EXPECT_NE(src.find("if (L <= 64) return 1;"), std::string::npos) << src.substr(0, 4000);
  EXPECT_TRUE(kt::same(emu[0], ref[0], 1e-13, 1e-13));
  EXPECT_TRUE(kt::same(emu[1], ref[1]));
  EXPECT_EQ(emu[1].at_int(2), 17);
}

TEST(Cuda, TheProfileCountsTheBytesEachKernelMoves) {
  // KILN_CUDA_PROFILE's bytes (cuda::Traffic) on cuda-emu: 4 blocks of 250 x 100 doubles.
  NDArray data = kt::random_array(DType::Float64, {1000, 100}, 31, -1, 1);
  NDArray row = kt::random_array(DType::Float64, {1, 100}, 32, -1, 1);
  Array x = kt::lazy(data, {250, 100}), r = kt::lazy(row, {1, 100});
  struct Profile {
    Profile() { flags().cuda_profile = true; }
    ~Profile() { flags().cuda_profile = false; }
  } on_;
  auto moved = [](const std::vector<Array>& outs) {
    backend::reset_kernel_times();
    on(Device::CudaEmu, outs);
    double bytes = 0;
    for (const auto& t : backend::kernel_times()) bytes += t.bytes;
    return bytes;
  };
  const double block = 250 * 100 * 8;
  // Column sums: each block reads its elements and writes its 100 partial sums.
  EXPECT_EQ(moved({(x * 2).sum({0})}), 4 * (block + 100 * 8));
  // A broadcast row is read once per block; the store writes every element.
  EXPECT_EQ(moved({x + r}), 4 * (block + 100 * 8 + block));
  // argmax along rows: 250 values and their int64 indices per block.
  EXPECT_EQ(moved({x.argmax(1)}), 4 * (block + 250 * 16));
}

TEST(Cuda, RandomArraysAreBitIdenticalToTheCpus) {
  random::Generator g(77);
  std::vector<Array> outs = {g.normal(3, 2, {300, 700}, {128, 256}),
                             g.uniform(-1, 1, {300, 700}, {300, 700}),
                             g.integers(-3, 1LL << 40, {1000}, {300})};
  std::vector<NDArray> emu = on(Device::CudaEmu, outs), cpu = on(Device::Cpu, outs);
  for (size_t k = 0; k < outs.size(); ++k)
    EXPECT_EQ(0,
              std::memcmp(emu[k].data(), cpu[k].data(), emu[k].size() * dtype_size(emu[k].dtype())))
        << "output " << k;
}

TEST(Cuda, NvrtcCompilesTheGpuBuildForSm80AndSm90) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  // NVRTC itself rejects what is not CUDA, with a log: the check below can fail.
  cuda::NvrtcOutput bad = cuda::nvrtc_compile("__global__ void k() { undeclared(); }", 90, "bad");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.log.find("undeclared"), std::string::npos) << bad.log;
  // Kernels of every work split, with normals, argmax, integer errors and the row stage.
  std::string saved = flags().cuda_check;
  flags().cuda_check = "80,90";
  clear_plan_cache();
  random::Generator g(5);
  Array n = g.normal(0, 1, {64, 300}, {32, 300});
  Array k = g.integers(0, 9, {64, 300}, {32, 300});
  std::string src;
  EXPECT_NO_THROW(on(Device::CudaEmu,
                     {n.sum(), n.argmax(1), n - n.mean({1}, true), pow(k, k % 3), n.sum({0}),
                      (k > 4).all({0}), floor_divide(k, k - 4) + (k << 2)},
                     &src));
  // Kiln's own math functions and the device's libm (KILN_MATH=libmvec) in the GPU build too.
  const std::string math = flags().math;
  for (const char* m : {"kiln", "libmvec"}) {
    flags().math = m;
    EXPECT_NO_THROW(on(Device::CudaEmu, {exp(n) + log1p(abs(n)) - tanh(n) * expm1(n) + log(k + 1)}))
        << m;
  }
  flags().math = math;
  flags().cuda_check = saved;
  std::set<std::string> m = modes(src);
  EXPECT_TRUE(m.count("flat") && m.count("owned")) << src.substr(0, 4000);
  EXPECT_FALSE(cuda::nvrtc_version().empty());
}

TEST(Cuda, TheGpusGemmPartsLoadAndCompileWithoutAGpu) {
  // What the GPU's library calls need that can be checked here: cuBLAS loads from the toolkit
  // with every entry point the calls bind, and the Gram product's mirror kernel compiles for
  // sm_80 and sm_90 with both of its element sizes. (The calls' argument mapping is checked on
  // cuda-emu by Devices.MatrixProductsRunOnTheDevicesWhereTheirOperandsAre; not on a GPU yet.)
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_TRUE(cuda::cublas_available(&why)) << why;
  std::string src = cuda::gram_mirror_source();
  for (int arch : {80, 90}) {
    cuda::NvrtcOutput out = cuda::nvrtc_compile(src, arch, "mirror");
    EXPECT_TRUE(out.ok) << out.log;
  }
  for (const char* fn : {"kiln_mirror8", "kiln_mirror4"})
    EXPECT_NE(src.find(std::string("extern \"C\" __global__ void ") + fn), std::string::npos);
}

TEST(Cuda, TheGpusLapackPartsLoadAndCompileWithoutAGpu) {
  // The GPU's LAPACK calls (GpuLapack): cuSOLVER loads with every routine they bind, in both
  // precisions, and their operand/result copy kernel compiles for sm_80 and sm_90 with both
  // element sizes. Which calls run there: all but lstsq. (The routines' argument mapping has not
  // run on a GPU yet.)
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_TRUE(cuda::cusolver_available(&why)) << why;
  std::string src = cuda::lapack_copy_source();
  for (int arch : {80, 90}) {
    cuda::NvrtcOutput out = cuda::nvrtc_compile(src, arch, "lapack_copy");
    EXPECT_TRUE(out.ok) << out.log;
  }
  for (const char* fn : {"kiln_copy8", "kiln_copy4"})
    EXPECT_NE(src.find(std::string("extern \"C\" __global__ void ") + fn), std::string::npos);
  for (LinalgFn f : {LinalgFn::Qr, LinalgFn::Svd, LinalgFn::Cholesky, LinalgFn::Solve,
                     LinalgFn::Inv, LinalgFn::Det, LinalgFn::Slogdet, LinalgFn::Eigh,
                     LinalgFn::TsqrR, LinalgFn::TsqrMix, LinalgFn::TsqrApply})
    EXPECT_TRUE(cuda::gpu_lapack_runs(f)) << linalg_name(f);
  EXPECT_FALSE(cuda::gpu_lapack_runs(LinalgFn::Lstsq));
}

TEST(Cuda, CubinsAreCachedInMemoryAndOnDisk) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  std::string saved = flags().cache_dir;
  std::string dir = kt::tmpdir() + "/cubin-cache-" + std::to_string(::getpid());
  flags().cache_dir = dir;
  // A source no other test compiles.
  std::string src = "extern \"C\" __global__ void k(double* p) { p[threadIdx.x] *= " +
                    std::to_string(::getpid()) + ".5; }";
  cuda::NvrtcOutput first = cuda::nvrtc_cubin(src, 90, "k.cu");
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  cuda::NvrtcOutput again = cuda::nvrtc_cubin(src, 90, "k.cu");
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.cubin, first.cubin);
  cuda::nvrtc_forget_memory_cache();
  cuda::NvrtcOutput disk = cuda::nvrtc_cubin(src, 90, "k.cu");
  EXPECT_TRUE(disk.cached);
  EXPECT_EQ(disk.cubin, first.cubin);
  // Another architecture is another entry.
  cuda::NvrtcOutput other = cuda::nvrtc_cubin(src, 80, "k.cu");
  EXPECT_TRUE(other.ok && !other.cached);
  EXPECT_NE(other.cubin, first.cubin);
  flags().cache_dir = saved;
  std::filesystem::remove_all(dir);
}

TEST(Cuda, NegativeIntegerPowersAreTheSameErrorOnTheEmulator) {
  static int64_t b[] = {2, 3, 4}, e[] = {1, -1, 2};
  Array x = from_buffer(b, {3}), y = from_buffer(e, {3});
  EXPECT_THROW(on(Device::CudaEmu, {pow(x, y)}), Error);
  EXPECT_EQ(on(Device::CudaEmu, {pow(x, abs(y))})[0].at_int(2), 16);
  // Kernels only queue their work, so the error is raised when the run waits for its devices:
  // here by the block on the second of three, and cleared there for the next run.
  Array xc = from_buffer(b, {3}, {1}), yc = from_buffer(e, {3}, {1});
  ComputeOptions o;
  o.device = Device::CudaEmu;
  o.devices = 3;
  o.progress = false;
  try {
    (void)compute({pow(xc, yc)}, o);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("negative integer powers"), std::string::npos);
  }
  EXPECT_EQ(compute({pow(xc, abs(yc))}, o)[0].at_int(2), 16);
  EXPECT_EQ(stats().last_devices, 3);
}

TEST(Cuda, EmulatedDevicesQueueTheirWorkAsAGpusStreamsDo) {
  // backend.hpp's contract for device memory, on cuda-emu's queues: a copy to the device has read
  // its source when it returns (the host may reuse it), the device runs its queue in order
  // (copy, then a combine), and a copy to the host waits for all of it.
  backend::Backend& be = backend::backend_for(Device::CudaEmu);
  backend::DeviceMemory& m = *be.memory();
  const int dev = 2;
  double acc0[] = {1, 2, 3, 4}, in0[] = {10, 20, 30, 40}, out[4] = {};
  void* acc = m.alloc(dev, sizeof acc0);
  void* in = m.alloc(dev, sizeof in0);
  m.to_device(dev, acc, acc0, sizeof acc0);
  m.to_device(dev, in, in0, sizeof in0);
  std::fill(std::begin(acc0), std::end(acc0), -1.0);  // after the calls: must not be seen
  std::fill(std::begin(in0), std::end(in0), -1.0);
  std::shared_ptr<const backend::Combiner> sum = be.combiner(ReduceFn::Sum, DType::Float64);
  sum->combine(dev, acc, in, 4, 0);
  sum->combine(dev, acc, in, 4, 0);
  m.to_host(dev, out, acc, sizeof out);
  EXPECT_EQ(std::vector<double>(out, out + 4), (std::vector<double>{21, 42, 63, 84}));
  EXPECT_NO_THROW(m.synchronize(dev));
  // Another device's copy of it, after the source's queue.
  void* copy = m.alloc(0, sizeof out);
  sum->combine(dev, acc, in, 4, 0);
  m.between(0, copy, dev, acc, sizeof out);
  m.to_host(0, out, copy, sizeof out);
  EXPECT_EQ(out[3], 124);
  // Memory of another device, or none, is refused when the work is queued.
  EXPECT_THROW(sum->combine(1, acc, in, 4, 0), InternalError);
  m.free(0, copy, sizeof out);
  m.free(dev, in, sizeof in0);
  m.free(dev, acc, sizeof acc0);
}

TEST(Cuda, CombineKernelsCompileWithNvrtc) {
  // The device combiners (codegen/cuda print_combine): every reduction and accumulator type the
  // plans use, GPU build through NVRTC for sm_90; cuda-emu runs their host build in every test
  // that reduces on it (Devices.*, the suite with KILN_DEVICE=cuda-emu).
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  int compiled = 0;
  for (ReduceFn fn : {ReduceFn::Sum, ReduceFn::Prod, ReduceFn::Min, ReduceFn::Max, ReduceFn::All,
                      ReduceFn::Any, ReduceFn::ArgMin, ReduceFn::ArgMax})
    for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
      bool logical = fn == ReduceFn::All || fn == ReduceFn::Any;
      if (logical != (t == DType::Bool)) continue;
      std::string src = cuda::print_combine(fn, t, cuda::Flavor::Device);
      cuda::NvrtcOutput out = cuda::nvrtc_compile(src, 90, "combine.cu");
      EXPECT_TRUE(out.ok) << out.log << "\n" << src.substr(src.size() - 800);
      ++compiled;
    }
  EXPECT_EQ(compiled, 6 * 4 + 2);
}
