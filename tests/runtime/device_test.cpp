// The runtime on a device with its own memory (runtime/execute.cpp, "device plans";
// runtime/device.cpp), checked on cuda-emu: its memory is host memory, but every allocation
// belongs to one emulated device, new memory is filled with 0xff bytes, and each launch and copy
// checks that its pointers are in the right device's memory (codegen/cuda/emu.cpp), so a missing
// or misplaced copy fails here as it would on GPUs. Results must not depend on how many devices
// the blocks are spread over, and the copies are counted exactly.
#include <cstring>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

std::vector<NDArray> on_emu(const std::vector<Array>& outs, int devices, bool fuse = true,
                            bool push_slices = true) {
  ComputeOptions o;
  o.device = Device::CudaEmu;
  o.devices = devices;
  o.fuse = fuse;
  o.push_slices = push_slices;
  o.progress = false;
  return compute(outs, o);
}

void expect_same_bits(const std::vector<NDArray>& a, const std::vector<NDArray>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].shape(), b[k].shape()) << what << " output " << k;
    EXPECT_EQ(std::memcmp(a[k].data(), b[k].data(), a[k].nbytes()), 0) << what << " output " << k;
  }
}

}  // namespace

TEST(Devices, SeveralEmulatedDevicesGiveTheResultsOfOne) {
  // Every way data moves: Buffer leaves read in slices, random leaves, full and partial
  // reductions (argmax ties across blocks), concatenations (whole arrays written by kernels on
  // several devices), a GEMM reading a computed operand block by block and a kernel reading its
  // result, a reversed slice of a computed array (blocks read from another device).
  NDArray data = kt::random_array(DType::Float64, {600, 400}, 3, -2, 2);
  static_cast<double*>(data.data())[5] = 9;
  static_cast<double*>(data.data())[600 * 400 - 3] = 9;
  Array x = kt::lazy(data, {150, 100});
  random::Generator rng(42);
  Array r = rng.normal(1, 2, {600, 400}, {150, 100});
  NDArray wdata = kt::random_array(DType::Float64, {400, 30}, 4, -1, 1);
  Array w = kt::lazy(wdata, {100, 30});
  Array c = concatenate({exp(x.slice({Slice(0, 300)})), x.slice({Slice(300, 600)}) * 2}, 0);
  Array g = matmul(tanh(x), w);
  std::vector<Array> outs = {(x * r).sum(),
                             x.argmax(),
                             x.sum({0}),
                             (r - x).max({1}),
                             c * 3 + 1,
                             (g * g).sum({1}),
                             x.slice({Slice(10, 590, 3), Slice(399, 0, -2)}) + r.mean()};
  std::vector<NDArray> one = on_emu(outs, 1);
  EXPECT_EQ(stats().last_devices, 1);
  EXPECT_EQ(stats().last_between_devices, 0);
  for (int n : {2, 3, 5}) {
    expect_same_bits(one, on_emu(outs, n), std::to_string(n) + " devices");
    EXPECT_EQ(stats().last_devices, n);
  }
  EXPECT_EQ(one[1].at_int(0), 5);
  // And the CPU's values (float sums within rounding).
  std::vector<NDArray> cpu = compute(outs);
  for (size_t k = 0; k < outs.size(); ++k) {
    ASSERT_EQ(cpu[k].size(), one[k].size());
    for (int64_t e = 0; e < cpu[k].size(); ++e)
      EXPECT_NEAR(one[k].at(e), cpu[k].at(e), 1e-9 * (1 + std::abs(cpu[k].at(e))))
          << "output " << k << " element " << e;
  }

  // Unfused, views not pushed to the leaves: every op a kernel, intermediates kept per block on
  // the device that made them; the slice's one block reads the last block of x * 2, made on
  // another device.
  Array y = (x * 2).slice({Slice(450, 600)}) + 1;
  std::vector<NDArray> u1 = on_emu({y, (y * y).sum()}, 1, false, false);
  std::vector<NDArray> u2 = on_emu({y, (y * y).sum()}, 2, false, false);
  expect_same_bits(u1, u2, "unfused, 2 devices");
  EXPECT_GT(stats().last_between_devices, 0);
  EXPECT_EQ(u1[0].at(0), data.at(450 * 400) * 2 + 1);
}

TEST(Devices, CopiesAreOnlyThoseThePlanNeedsAndAreCounted) {
  NDArray data = kt::random_array(DType::Float64, {1000, 100}, 7, -1, 1);
  Array x = kt::lazy(data, {250, 100});  // 4 blocks of 250 rows
  const int64_t whole = 1000 * 100 * 8;

  // A sum: x copied in once (each device its rows), each block's one-element partial copied in
  // (the identity) and out.
  on_emu({(x * 2 + 1).sum()}, 1);
  Stats s = stats();
  EXPECT_EQ(s.last_to_device, 1 + 4);
  EXPECT_EQ(s.last_to_device_bytes, whole + 4 * 8);
  EXPECT_EQ(s.last_to_host, 4);
  EXPECT_EQ(s.last_to_host_bytes, 4 * 8);
  EXPECT_GE(s.last_peak_device_bytes, whole);
  on_emu({(x * 2 + 1).sum()}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_device, 2 + 4);  // half of x on each device
  EXPECT_EQ(s.last_to_device_bytes, whole + 4 * 8);

  // Only the elements read are copied in: rows 100 ... 199.
  on_emu({x.slice({Slice(100, 200)}).sum()}, 1);
  EXPECT_EQ(stats().last_to_device_bytes, 100 * 100 * 8 + 8);

  // An element-wise output: written on the device, copied out once at the end (one device), or
  // block by block as it is made (several: the host assembles it).
  on_emu({sqrt(abs(x))}, 1);
  s = stats();
  EXPECT_EQ(s.last_to_host, 1);
  EXPECT_EQ(s.last_to_host_bytes, whole);
  on_emu({sqrt(abs(x))}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_host, 4);
  EXPECT_EQ(s.last_to_host_bytes, whole);

  // Random data are made on the device: nothing copied in but the partials' identities; device
  // memory holds no more than the partials (nothing is materialized).
  random::Generator rng(1);
  Array big = rng.normal(10, 1, {4000, 4000}, {1000, 1000});
  on_emu({big.slice({Slice(0, 4000, 2)}).sum()}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_device_bytes, 16 * 8);
  EXPECT_EQ(s.last_to_host_bytes, 16 * 8);
  EXPECT_LE(s.last_peak_device_bytes, 16 * 256);  // 16 partials, 256-byte allocations
  EXPECT_EQ(s.last_between_devices, 0);

  // Host devices copy nothing.
  ComputeOptions cpu;
  cpu.progress = false;
  compute({(x * 2).sum()}, cpu);
  EXPECT_EQ(stats().last_devices, 0);
  EXPECT_EQ(stats().last_to_device_bytes, 0);
}

TEST(Devices, BadDeviceCountsAreErrors) {
  NDArray data = kt::random_array(DType::Float64, {10}, 1, 0, 1);  // outlives x (zero-copy)
  Array x = kt::lazy(data);
  EXPECT_THROW(on_emu({x + 1}, -1), Error);
  // More devices than cuda-emu emulates: it uses the 16 it has.
  EXPECT_EQ(on_emu({(x * 0 + 1).sum()}, 100)[0].at(0), 10.0);
  EXPECT_EQ(stats().last_devices, 16);
}
