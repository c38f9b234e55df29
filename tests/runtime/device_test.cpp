// The runtime on a device with its own memory (runtime/execute.cpp, "device plans";
// runtime/device.cpp), checked on cuda-emu: its memory is host memory, but every allocation
// belongs to one emulated device, new memory is filled with 0xff bytes, and each launch and copy
// checks that its pointers are in the right device's memory (codegen/cuda/emu.cpp), so a missing
// or misplaced copy fails here as it would on GPUs. Results must not depend on how many devices
// the blocks are spread over, and the copies are counted exactly.
#include <cstring>
#include <sstream>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {

ComputeOptions cpu_options() {
  ComputeOptions o;
  o.device = Device::Cpu;
  o.progress = false;
  return o;
}

// KILN_NO_DEVICE_LIBRARY's flag for one test, off again at its end.
struct NoDeviceLibrary {
  void set(bool on) { flags().no_device_library = on; }
  ~NoDeviceLibrary() { set(false); }
};

// cuda-emu on `devices` devices; its --emit-ir text to `ir` when given.
ComputeOptions emu(int devices, std::ostream* ir = nullptr) {
  ComputeOptions o;
  o.device = Device::CudaEmu;
  o.devices = devices;
  o.progress = false;
  o.ir = ir;
  return o;
}

std::vector<NDArray> on_emu(const std::vector<Array>& outs, int devices, bool fuse = true,
                            bool push_slices = true) {
  ComputeOptions o = emu(devices);
  o.fuse = fuse;
  o.push_slices = push_slices;
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
  ComputeOptions on_cpu;
  on_cpu.device = Device::Cpu;
  on_cpu.progress = false;
  std::vector<NDArray> cpu = compute(outs, on_cpu);
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

  // A sum: x copied in once (each device its rows), each block's one-element partial set to the
  // identity on the device (DeviceMemory::fill, no copy), the partials combined on the device,
  // the result copied out.
  on_emu({(x * 2 + 1).sum()}, 1);
  Stats s = stats();
  EXPECT_EQ(s.last_to_device, 1);
  EXPECT_EQ(s.last_to_device_bytes, whole);
  EXPECT_EQ(s.last_to_host, 1);
  EXPECT_EQ(s.last_to_host_bytes, 8);
  EXPECT_GE(s.last_peak_device_bytes, whole);
  on_emu({(x * 2 + 1).sum()}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_device, 2);  // half of x on each device
  EXPECT_EQ(s.last_to_device_bytes, whole);

  // Only the elements read are copied in: rows 100 ... 199.
  on_emu({x.slice({Slice(100, 200)}).sum()}, 1);
  EXPECT_EQ(stats().last_to_device_bytes, 100 * 100 * 8);

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

  // Random data are made on the device: nothing copied in; device memory holds no more than the
  // partials (nothing is materialized).
  random::Generator rng(1);
  Array big = rng.normal(10, 1, {4000, 4000}, {1000, 1000});
  // The 16 partials are combined where they are, 8 on each device, then device 1's result is
  // copied to device 0 for the last step.
  on_emu({big.slice({Slice(0, 4000, 2)}).sum()}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_device_bytes, 0);
  EXPECT_EQ(s.last_to_host_bytes, 8);
  EXPECT_LE(s.last_peak_device_bytes, 17 * 256);  // 16 partials and a copy, 256-byte allocations
  EXPECT_EQ(s.last_between_devices, 1);
  EXPECT_EQ(s.last_between_devices_bytes, 8);

  // Host devices copy nothing.
  ComputeOptions cpu;
  cpu.device = Device::Cpu;  // not KILN_DEVICE's
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

TEST(Devices, ResultsCanStayOnTheDeviceAndBeReadFromThere) {
  NDArray data = kt::random_array(DType::Float64, {1000, 100}, 9, -1, 1);
  Array x = kt::lazy(data, {250, 100});
  const int64_t whole = 1000 * 100 * 8;
  ComputeOptions keep;
  keep.device = Device::CudaEmu;
  keep.keep_on_device = true;
  keep.devices = 1;  // not KILN_DEVICES
  keep.progress = false;

  // y = exp(x) stays on device 0: nothing copied out; the sum (a host-homed reduction result)
  // goes to the device too.
  std::vector<NDArray> r = compute({exp(x), exp(x).sum()}, keep);
  Stats s = stats();
  EXPECT_EQ(s.last_to_host_bytes, 8);            // the combined partial only
  EXPECT_EQ(s.last_to_device_bytes, whole + 8);  // x, and the sum back (partials set there)
  ASSERT_TRUE(r[0].on_device());
  EXPECT_EQ(r[0].place().device, Device::CudaEmu);
  EXPECT_EQ(place_name(r[1].place()), "cuda-emu:0");
  try {
    r[0].at(0);
    FAIL() << "read a device array's element on the host";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda-emu:0's memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(r[1].item<double>(), Error);
  ComputeOptions copied_back = keep;  // the same kernels, results copied to the host
  copied_back.keep_on_device = false;
  std::vector<NDArray> host = compute({exp(x), exp(x).sum()}, copied_back);
  NDArray y = r[0].to_host(), total = r[1].to_host();
  EXPECT_FALSE(y.on_device());
  EXPECT_EQ(std::memcmp(y.data(), host[0].data(), host[0].nbytes()), 0);
  EXPECT_EQ(total.at(0), host[1].at(0));

  // On three devices: exp(x)'s blocks made on devices 1 and 2 are gathered on device 0, device to
  // device; nothing but the sum's result goes through the host.
  ComputeOptions three = keep;
  three.devices = 3;
  std::vector<NDArray> r3 = compute({exp(x), exp(x).sum()}, three);
  s = stats();
  EXPECT_EQ(s.last_devices, 3);
  EXPECT_EQ(s.last_to_host_bytes, 8);
  EXPECT_EQ(s.last_to_device_bytes, whole + 8);
  const int64_t block = 250 * 100 * 8;
  // At least the blocks made on devices 1 and 2 (the sum's kernel blocks there read the whole
  // of exp(x) from device 0 too).
  EXPECT_GE(s.last_between_devices_bytes, 2 * block);
  ASSERT_TRUE(r3[0].on_device());
  EXPECT_EQ(place_name(r3[0].place()), "cuda-emu:0");
  NDArray y3 = r3[0].to_host();
  EXPECT_EQ(std::memcmp(y3.data(), host[0].data(), host[0].nbytes()), 0);
  EXPECT_EQ(r3[1].to_host().at(0), host[1].at(0));

  // The device array read by the next compute where it is: nothing copied in (the partials'
  // identities are set there), for an element-wise reader and a GEMM (a host library call: y
  // copied out once).
  Array yd = asarray(r[0], {250, 100});
  ComputeOptions emu = keep;
  emu.keep_on_device = false;
  NDArray m = compute({(yd * 2).sum({1})}, emu)[0];
  s = stats();
  EXPECT_EQ(s.last_to_device_bytes, 0);
  EXPECT_FALSE(m.on_device());
  NDArray mh = compute({(asarray(y, {250, 100}) * 2).sum({1})}, cpu_options())[0];
  for (int64_t e = 0; e < 1000; ++e)
    EXPECT_NEAR(m.at(e), mh.at(e), 1e-12 * (1 + std::abs(mh.at(e))));
  NDArray wdata = kt::random_array(DType::Float64, {100, 20}, 10, -1, 1);
  Array w = kt::lazy(wdata, {100, 20});
  NDArray g = compute({matmul(yd, w)}, emu)[0];
  // (On the CPU, whatever KILN_DEVICE says: a real GPU's cuBLAS rounds otherwise.)
  NDArray gh = compute({matmul(asarray(y, {250, 100}), w)}, cpu_options())[0];
  EXPECT_EQ(std::memcmp(g.data(), gh.data(), gh.nbytes()), 0);

  // Views of it (a slice, a transpose) read it in place too.
  NDArray v = compute({yd.slice({Slice(100, 300), Slice(10, 60)}).T() * 3}, emu)[0];
  NDArray vh = compute({asarray(y, {250, 100}).slice({Slice(100, 300), Slice(10, 60)}).T() * 3},
                       cpu_options())[0];
  EXPECT_EQ(std::memcmp(v.data(), vh.data(), vh.nbytes()), 0);

  // On two devices, blocks on device 1 get their rows of y by a copy between devices.
  emu.devices = 2;
  NDArray m2 = compute({(yd * 2).sum({1})}, emu)[0];
  EXPECT_EQ(stats().last_between_devices_bytes, whole / 2);
  EXPECT_EQ(std::memcmp(m2.data(), m.data(), m.nbytes()), 0);

  // A device array on the CPU, or on another device kind, is an error naming both.
  ComputeOptions cpu;
  cpu.device = Device::Cpu;  // not KILN_DEVICE's
  try {
    compute({yd + 1}, cpu);
    FAIL() << "computed on the cpu from device memory";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("compute on cpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda-emu:0"), std::string::npos) << msg;
  }
  EXPECT_THROW(from_device_buffer(data.data(), DType::Float64, {1000, 100}, {}, MemoryPlace{}),
               Error);
}

TEST(Devices, MatrixProductsRunOnTheDevicesWhereTheirOperandsAre) {
  // GEMM library calls on a backend with DeviceBlas (cuda-emu: the host's BLAS on the emulated
  // memory, every operand's extent checked to be the device's): the CPU's bits for every way a
  // call reads and writes, on 1 and 3 devices, with the copies a GPU would need and no others.
  const ComputeOptions cpu = cpu_options();
  NDArray ad = kt::random_array(DType::Float64, {600, 400}, 11, -1, 1);
  NDArray wd = kt::random_array(DType::Float64, {400, 30}, 12, -1, 1);
  NDArray td = kt::random_array(DType::Float64, {4000, 50}, 13, -1, 1);
  NDArray fd = kt::random_array(DType::Float32, {300, 40}, 14, -1, 1);
  NDArray bd = kt::random_array(DType::Float64, {100, 400}, 15, -1, 1);
  Array a = kt::lazy(ad, {150, 100}), w = kt::lazy(wd, {100, 30});
  Array t = kt::lazy(td, {500, 50}), f = kt::lazy(fd, {100, 40});
  Array t1 = kt::lazy(td, {4000, 50});  // one chunk: a Gram product split into partials
  Array tb = t.slice({Slice(0, 4000), Slice(0, 20)});
  Array y = t * 2 - 1;  // computed block by block, on every device
  std::vector<Array> outs = {
      matmul(a, w),          // Buffer operands read in place
      matmul(a * 2 + 1, w),  // a computed operand, block by block
      matmul(t.T(), tb),     // 1 result block: partials summed
      matmul(t.T(), t),      // Gram: syrk, exactly symmetric
      matmul(t1.T(), t1),    // one chunk: contraction partials
      matmul(kt::lazy(td, {250, 50}), t.T().slice({Slice(0, 50), Slice(0, 40)})),  // 16 x 1
      (matmul(a, w) * 3).sum({0}),  // a kernel reads the result
      concatenate({matmul(a, w), matmul(kt::lazy(bd).slice({Slice(60, 90)}), w)}, 0),  // placed
      matmul(f.T(), f),                                                                // float32
      matmul(y.T(), y),  // a Gram product of blocks made on other devices: one copy each
      matmul(kt::lazy(ad).slice({Slice(0, 5), Slice(0, 0)}),
             kt::lazy(wd).slice({Slice(0, 0)})),      // k = 0: zeros, nothing read
      matmul(kt::lazy(ad).slice({Slice(0, 0)}), w)};  // no rows
  std::vector<NDArray> want = compute(outs, cpu);
  for (int devices : {1, 3}) {
    std::ostringstream ir;
    std::vector<NDArray> got = compute(outs, emu(devices, &ir));
    expect_same_bits(got, want, std::to_string(devices) + " devices");
    EXPECT_NE(ir.str().find("on the devices (the host's BLAS on emulated device memory)"),
              std::string::npos);
    EXPECT_NE(ir.str().find("in parallel into partials added in split order"), std::string::npos);
    EXPECT_EQ(ir.str().find("the result of a library call"), std::string::npos) << ir.str();
  }
  const double* g = static_cast<const double*>(want[3].data());
  for (int64_t i = 0; i < 50; ++i)
    for (int64_t j = 0; j < i; ++j) ASSERT_EQ(g[i * 50 + j], g[j * 50 + i]);

  // Copies: the operands in once, the result out once; nothing staged on the host.
  on_emu({matmul(a, w)}, 1);
  Stats s = stats();
  EXPECT_EQ(s.last_to_device_bytes, (600 * 400 + 400 * 30) * 8);
  EXPECT_EQ(s.last_to_host, 1);
  EXPECT_EQ(s.last_to_host_bytes, 600 * 30 * 8);
  // Two devices: each gets its blocks' rows of a and all of w, and copies its blocks out.
  on_emu({matmul(a, w)}, 2);
  s = stats();
  EXPECT_EQ(s.last_to_device_bytes, (600 * 400 + 2 * 400 * 30) * 8);
  EXPECT_EQ(s.last_to_host, 4);
  EXPECT_EQ(s.last_to_host_bytes, 600 * 30 * 8);
  // Operands already on the device and a result kept there: nothing copied at all.
  ComputeOptions keep = emu(1);
  keep.keep_on_device = true;
  std::vector<NDArray> resident = compute({a * 1, w * 1}, keep);
  NDArray p =
      compute({matmul(asarray(resident[0], {150, 100}), asarray(resident[1], {100, 30}))}, keep)[0];
  s = stats();
  EXPECT_EQ(s.last_to_device_bytes, 0);
  EXPECT_EQ(s.last_to_host_bytes, 0);
  EXPECT_TRUE(p.on_device());
  NDArray ph = p.to_host();
  EXPECT_EQ(std::memcmp(ph.data(), want[0].data(), want[0].nbytes()), 0);
}

TEST(Devices, WithoutDeviceBlasMatrixProductsRunOnTheHostOnCopies) {
  // The path of a GPU without cuBLAS (KILN_NO_DEVICE_LIBRARY=1 forces it on cuda-emu): GEMM calls
  // run on the host, their operands made on the devices copied to the host and their results
  // copied to the devices of the kernels that read them; the CPU's bits, on 1 and 3 devices.
  NoDeviceLibrary host_library;
  const ComputeOptions cpu = cpu_options();
  NDArray ad = kt::random_array(DType::Float64, {600, 400}, 21, -1, 1);
  NDArray wd = kt::random_array(DType::Float64, {400, 30}, 22, -1, 1);
  NDArray td = kt::random_array(DType::Float64, {4000, 50}, 23, -1, 1);
  Array a = kt::lazy(ad, {150, 100}), w = kt::lazy(wd, {100, 30});
  Array t = kt::lazy(td, {500, 50});
  Array y = t * 2 - 1;
  std::vector<Array> outs = {matmul(a, w), matmul(a * 2 + 1, w), matmul(t.T(), t),
                             (matmul(a, w) * 3).sum({0}), matmul(y.T(), y)};
  std::vector<NDArray> want = compute(outs, cpu);
  host_library.set(true);
  for (int devices : {1, 3}) {
    std::ostringstream ir;
    expect_same_bits(compute(outs, emu(devices, &ir)), want, std::to_string(devices) + " devices");
    EXPECT_EQ(ir.str().find("on the devices ("), std::string::npos) << ir.str();
    EXPECT_NE(ir.str().find("the result of a library call, which runs on the host"),
              std::string::npos)
        << ir.str();
  }
  // matmul(a * 2 + 1, w): a's blocks copied in and made on the device, copied out for the call.
  on_emu({matmul(a * 2 + 1, w)}, 1);
  Stats s = stats();
  EXPECT_EQ(s.last_to_device_bytes, 600 * 400 * 8);
  EXPECT_EQ(s.last_to_host, 16);
  EXPECT_EQ(s.last_to_host_bytes, 600 * 400 * 8);
  // The same product with the flag off again: on the device, a plan of its own (the flag is part
  // of the plan cache's key).
  host_library.set(false);
  std::ostringstream ir;
  expect_same_bits(compute({matmul(a * 2 + 1, w)}, emu(1, &ir)), {want[1]}, "flag off");
  EXPECT_NE(ir.str().find("on the devices ("), std::string::npos);
}

TEST(Devices, LapackCallsRunOnDeviceZero) {
  // LAPACK calls on a backend with DeviceLapack (cuda-emu: the GPU's cuSOLVER call sequences on
  // the host's LAPACK, on the emulated memory, every copy's extent checked): the same bits on 1
  // and 3 devices, and the CPU's values within rounding, for TSQR (per-block calls and their
  // tree), calls reading a Buffer leaf in place (a slice at an offset) and a computed operand,
  // and a kernel reading a call's result; and the copies.
  NDArray td = kt::random_array(DType::Float64, {2000, 40}, 31, -1, 1);
  NDArray sd = kt::random_array(DType::Float64, {60, 50}, 32, -1, 1);
  NDArray bd = kt::random_array(DType::Float64, {50, 3}, 33, -1, 1);
  Array t = kt::lazy(td, {500, 40});
  Array s = kt::lazy(sd).slice({Slice(10, 60), Slice(0, 50)});  // 50 x 50 at an offset
  Array spd = matmul(s.T(), s);  // positive definite: s has full rank
  linalg::QR qr = linalg::qr(t);
  linalg::SVD sv = linalg::svd(t * 2);
  std::vector<Array> outs = {qr.q,
                             qr.r,
                             sv.s,
                             linalg::solve(s, kt::lazy(bd)),
                             linalg::cholesky(spd),
                             linalg::det(s),
                             linalg::inv(s) * 3 + 1};
  const ComputeOptions cpu = cpu_options();
  std::vector<NDArray> want = compute(outs, cpu);
  std::vector<NDArray> first;
  for (int devices : {1, 3}) {
    std::ostringstream ir;
    std::vector<NDArray> got = compute(outs, emu(devices, &ir));
    if (first.empty()) first = got;
    expect_same_bits(got, first, std::to_string(devices) + " devices");
    EXPECT_NE(ir.str().find("on device 0 (the GPU's cuSOLVER calls on the host's LAPACK"),
              std::string::npos)
        << ir.str();
    EXPECT_EQ(ir.str().find("on a copy"), std::string::npos) << ir.str();
  }
  // Householder QR (geqrf) there, CholeskyQR2 on the CPU: Q's columns and R's rows may differ in
  // sign, so those compare in magnitude.
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(first[k].shape(), want[k].shape()) << k;
    for (int64_t i = 0; i < want[k].size(); ++i) {
      double g = first[k].at(i), w = want[k].at(i);
      if (k < 2) g = std::abs(g), w = std::abs(w);
      ASSERT_NEAR(g, w, 1e-9 * (1 + std::abs(w))) << "output " << k << " element " << i;
    }
  }
  // On one device: the 50 rows of s's memory the call reads copied in once, and b; the result
  // out once; nothing else.
  on_emu({linalg::solve(s, kt::lazy(bd))}, 1);
  Stats st = stats();
  EXPECT_EQ(st.last_to_device_bytes, (50 * 50 + 50 * 3) * 8);
  EXPECT_EQ(st.last_to_host, 1);
  EXPECT_EQ(st.last_to_host_bytes, 50 * 3 * 8);

  // lstsq runs on the host, on copies, as on a GPU (cuSOLVER has no gelsd), beside calls on
  // device 0 in the same plan, and a kernel on the device reads its result.
  std::vector<Array> mixed = {linalg::lstsq(s, kt::lazy(bd)).x * 2, linalg::solve(s, kt::lazy(bd))};
  std::vector<NDArray> mixed_want = compute(mixed, cpu);
  for (int devices : {1, 3}) {
    std::ostringstream ir;
    std::vector<NDArray> got = compute(mixed, emu(devices, &ir));
    EXPECT_TRUE(kt::same(got[0], mixed_want[0])) << "lstsq on the host: the CPU's bits";
    EXPECT_TRUE(kt::same(got[1], mixed_want[1], 1e-10)) << devices << " devices";
    EXPECT_NE(
        ir.str().find("lstsq of A (50, 50) and B (50, 3), LAPACK gelsd in one task, on a copy"),
        std::string::npos)
        << ir.str();
    EXPECT_NE(
        ir.str().find("solve of A (50, 50) and B (50, 3), LAPACK gesv in one task, on device 0"),
        std::string::npos)
        << ir.str();
  }

  // KILN_NO_DEVICE_LIBRARY: the same calls on the host, on copies, with the same bits.
  NoDeviceLibrary host_library;
  host_library.set(true);
  std::ostringstream ir;
  expect_same_bits(compute(outs, emu(3, &ir)), want, "on the host");
  EXPECT_NE(ir.str().find("on a copy"), std::string::npos);
}
