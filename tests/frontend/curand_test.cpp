// random::Engine::Curand: arrays filled by cuRAND's Philox4_32_10 generator in one library call
// (its host generator here: the CPU, the interpreter and cuda-emu; the device generator on a GPU).
#include <cstring>
#include <limits>
#include <sstream>

#include "codegen/library.hpp"
#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;
using kt::same;

namespace {

// Skips the test, saying why, where libcurand cannot be loaded (a machine without the CUDA
// toolkit); there the constructor must refuse instead.
#define KILN_NEED_CURAND()                                                               \
  do {                                                                                   \
    std::string why;                                                                     \
    if (!library::curand_available(&why)) {                                              \
      EXPECT_THROW(random::Generator(1, random::Engine::Curand), Error);                 \
      GTEST_SKIP() << "cuRAND cannot be loaded (" << why << "): Engine::Curand refuses"; \
    }                                                                                    \
  } while (0)

std::vector<double> host_sequence(RandomKind kind, uint64_t seed, int64_t offset, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  library::curand_host(kind, seed, offset, n, v.data());
  return v;
}

ComputeOptions on(Device d, int devices = 0, std::ostream* ir = nullptr) {
  ComputeOptions o;
  o.device = d;
  o.devices = devices;
  o.progress = false;
  o.ir = ir;
  return o;
}

NDArray on_cpu(const Array& a) { return compute({a}, on(Device::Cpu))[0]; }

// With KILN_DEVICE=cuda a GPU's cuRAND makes the arrays with its device generator, whose normals
// are not bit for bit the host generator's (an H100 with CUDA 13.0: element 2 of seed 42 differs
// in its last bits; its uniforms agree): there the tests below check the bits on the CPU and the
// GPU's elements within a few ulp of them.
bool device_generator() { return flags().device == "cuda"; }

}  // namespace

TEST(Curand, ElementsAreCuRandsSequence) {
  KILN_NEED_CURAND();
  // cuRAND's first normal doubles for seed 42 (Philox4_32_10, printed by a C program calling
  // curandCreateGeneratorHost + curandGenerateNormalDouble directly, CUDA 13.0).
  const double first[4] = {1.0360235505368471, -0.6653743849976409, 0.42328043627196804,
                           -1.4338887543449035};
  random::Generator rng(42, random::Engine::Curand);
  NDArray x = on_cpu(rng.standard_normal({3, 5}));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(x.at(k), first[k]) << k;
  std::vector<double> want = host_sequence(RandomKind::Normal, 42, 0, 15);
  EXPECT_EQ(std::memcmp(x.data(), want.data(), 15 * sizeof(double)), 0);
  // The generator's second array: the seed moved by the stream's constant.
  NDArray y = on_cpu(rng.standard_normal({7}));
  want = host_sequence(RandomKind::Normal, library::curand_seed(42, 1), 0, 7);
  EXPECT_EQ(library::curand_seed(42, 1), 42 + 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(std::memcmp(y.data(), want.data(), 7 * sizeof(double)), 0);
  // Any offset and count (odd ones too) give the elements of one generation of the sequence.
  std::vector<double> whole = host_sequence(RandomKind::Normal, 9, 0, 101);
  for (int64_t off : {0, 1, 2, 7, 50})
    for (int64_t n : {1, 2, 3, 8, 51}) {
      std::vector<double> part = host_sequence(RandomKind::Normal, 9, off, n);
      EXPECT_EQ(std::memcmp(part.data(), whole.data() + off, n * sizeof(double)), 0)
          << off << " " << n;
    }
  if (device_generator()) {
    // Box-Muller's error is absolute (the radius times the cosine's): within 16 ulp of
    // max(|x|, 1). Relative ulps fail near 0: the H100 gave -0.05630522921044083 for the host's
    // -0.056305229210441211, 55 ulp of the value and 1.7 of 1.
    random::Generator gpu(42, random::Engine::Curand);
    const double tol = 16 * std::numeric_limits<double>::epsilon();
    EXPECT_TRUE(kt::same(gpu.standard_normal({3, 5}).compute(), x, tol, tol));
    EXPECT_TRUE(kt::same(gpu.standard_normal({7}).compute(), y, tol, tol));
  }
}

TEST(Curand, IndependentOfChunkingSliceThreadsAndDevice) {
  KILN_NEED_CURAND();
  auto make = [](const Shape& chunks) {
    random::Generator rng(7, random::Engine::Curand);
    return rng.normal(10, 2, {64, 48}, chunks);
  };
  NDArray ref = on_cpu(make({64, 48}));
  if (device_generator()) {
    const double tol = 16 * std::numeric_limits<double>::epsilon();  // as above
    EXPECT_TRUE(kt::same(make({64, 48}).compute(), ref, tol, tol));
  }
  std::vector<double> raw = host_sequence(RandomKind::Normal, 7, 0, 64 * 48);
  for (int64_t i = 0; i < 64 * 48; ++i) ASSERT_EQ(ref.at(i), raw[i] * 2 + 10) << i;
  EXPECT_TRUE(same(on_cpu(make({5, 7})), ref));
  // Slices stay above the call (push_slices does not move them into a cuRAND leaf).
  NDArray sliced = on_cpu(make({9, 9}).slice({{3, {}, 2}, {{}, {}, -3}}));
  for (int64_t r = 0; r < sliced.shape()[0]; ++r)
    for (int64_t c = 0; c < sliced.shape()[1]; ++c)
      ASSERT_EQ(sliced.at(r * sliced.shape()[1] + c), ref.at((3 + 2 * r) * 48 + (47 - 3 * c)));
  // A diamond and a transpose over one cuRAND array: it is made once and read by the kernel.
  Array x = make({16, 16}).slice({{{}, 48}, {}});
  NDArray sym = on_cpu(x + x.T());
  for (int64_t r = 0; r < 48; ++r)
    for (int64_t c = 0; c < 48; ++c)
      ASSERT_EQ(sym.at(r * 48 + c), ref.at(r * 48 + c) + ref.at(c * 48 + r)) << r << " " << c;
  ComputeOptions one = on(Device::Cpu), two = on(Device::Cpu);
  one.threads = 1;
  two.threads = 2;
  Array s = make({8, 8}).sum();
  const double total = compute({s}, one)[0].item<double>();
  EXPECT_EQ(compute({s}, two)[0].item<double>(), total);
  // The same bits on every device: the interpreter, cuda-emu on one and three devices, and
  // cuda-emu with the call on the host (KILN_NO_DEVICE_LIBRARY: the array copied to the device).
  struct HostLibrary {
    ~HostLibrary() { flags().no_device_library = false; }
  } reset;
  for (auto [d, n, host] : {std::tuple{Device::Interp, 0, false},
                            {Device::CudaEmu, 1, false},
                            {Device::CudaEmu, 3, false},
                            {Device::CudaEmu, 1, true}}) {
    flags().no_device_library = host;
    std::ostringstream ir;
    auto r = compute({make({16, 16}), make({16, 16}).sum()}, on(d, n, &ir));
    EXPECT_TRUE(same(r[0], ref)) << device_name(d) << " " << n;
    EXPECT_NEAR(r[1].item<double>(), total, 1e-9 * std::abs(total)) << device_name(d) << " " << n;
    EXPECT_EQ(ir.str().find("on device 0 (cuRAND") == std::string::npos,
              host || d == Device::Interp)
        << ir.str();
  }
  flags().no_device_library = false;
  // Without fusion or slice pushing: the same elements.
  ComputeOptions plain = on(Device::Cpu);
  plain.fuse = false;
  plain.push_slices = false;
  EXPECT_TRUE(same(compute({make({9, 9})}, plain)[0], ref));
  NDArray plain_sliced = compute({make({9, 9}).slice({{3, {}, 2}, {{}, {}, -3}})}, plain)[0];
  EXPECT_TRUE(same(plain_sliced, sliced));
}

TEST(Curand, DistributionsAndUniformRange) {
  KILN_NEED_CURAND();
  random::Generator rng(99, random::Engine::Curand);
  Array x = rng.normal(10, 2, {500, 400}, {250, 200});
  auto r = compute({x.mean(), x.std()});
  EXPECT_NEAR(r[0].item<double>(), 10.0, 0.02);
  EXPECT_NEAR(r[1].item<double>(), 2.0, 0.02);
  Array u = rng.uniform(-1, 3, {500, 400});
  auto q = compute({u.min(), u.max(), u.mean()});
  EXPECT_GE(q[0].item<double>(), -1.0);
  EXPECT_LT(q[1].item<double>(), 3.0);
  EXPECT_NEAR(q[2].item<double>(), 1.0, 0.02);
  // uniform(0, 1) is 1 - u for cuRAND's u in (0, 1]: in [0, 1), element for element.
  random::Generator again(5, random::Engine::Curand);
  NDArray v = again.uniform(0, 1, {1001}).compute();
  std::vector<double> raw = host_sequence(RandomKind::Uniform, 5, 0, 1001);
  for (int64_t i = 0; i < 1001; ++i) {
    ASSERT_EQ(v.at(i), std::min(1.0 - raw[i], std::nextafter(1.0, 0.0))) << i;
    ASSERT_LT(v.at(i), 1.0);
  }
  NDArray f = random::Generator(5, random::Engine::Curand)
                  .uniform(0, 1, {1001}, {}, DType::Float32)
                  .compute();
  EXPECT_EQ(f.dtype(), DType::Float32);
  for (int64_t i = 0; i < 1001; ++i) ASSERT_LT(f.at(i), 1.0);
}

TEST(Curand, IntegersAreRefusedAndTheCallIsShown) {
  KILN_NEED_CURAND();
  random::Generator rng(3, random::Engine::Curand);
  try {
    rng.integers(0, 10, {4});
    FAIL() << "integers with Engine::Curand must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("random.integers: Engine::Curand"), std::string::npos)
        << e.what();
  }
  Array x = rng.standard_normal({32, 32}, {8, 8});
  Array y = (x * 2).slice({{0, {}, 2}, {0, {}, 2}}).sum();
  std::ostringstream cpu_ir, emu_ir;
  compute({y}, on(Device::Cpu, 0, &cpu_ir));
  EXPECT_NE(cpu_ir.str().find("library call (cuRAND)"), std::string::npos) << cpu_ir.str();
  EXPECT_NE(cpu_ir.str().find("on the host (cuRAND's host generator)"), std::string::npos)
      << cpu_ir.str();
  compute({y}, on(Device::CudaEmu, 1, &emu_ir));
  EXPECT_NE(emu_ir.str().find("on device 0 (cuRAND's host generator on emulated device memory)"),
            std::string::npos)
      << emu_ir.str();
}
