// The GPU backend's entry: the CUDA driver API loaded with dlopen (libcuda.so.1), so one binary
// runs on machines with and without a GPU. "No GPU" is decided by cuInit and cuDeviceGetCount,
// not by dlopen alone: the toolkit's stub libcuda loads and then cuInit fails.
#include <dlfcn.h>

#include "codegen/cuda/cuda_backend.hpp"
#include "support/error.hpp"

namespace kiln::cuda {

namespace {

struct Driver {
  int (*init)(unsigned) = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  std::string why;  // empty: a driver with devices
  int devices = 0;
};

const Driver& driver() {
  static Driver d = [] {
    Driver x;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      x.why = "no CUDA driver (libcuda.so.1 cannot be loaded)";
      return x;
    }
    x.init = reinterpret_cast<decltype(x.init)>(dlsym(h, "cuInit"));
    x.device_count = reinterpret_cast<decltype(x.device_count)>(dlsym(h, "cuDeviceGetCount"));
    x.error_string = reinterpret_cast<decltype(x.error_string)>(dlsym(h, "cuGetErrorString"));
    if (!x.init || !x.device_count) {
      x.why = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
      return x;
    }
    int rc = x.init(0);
    if (rc != 0) {
      const char* s = nullptr;
      if (x.error_string) x.error_string(rc, &s);
      x.why = "cuInit failed (" + std::to_string(rc) + (s ? std::string(": ") + s : "") + ")";
      return x;
    }
    if (x.device_count(&x.devices) != 0 || x.devices <= 0) x.why = "no CUDA device is present";
    return x;
  }();
  return d;
}

}  // namespace

bool cuda_device_present(std::string* why) {
  const Driver& d = driver();
  if (why) *why = d.why;
  return d.why.empty();
}

std::unique_ptr<backend::Backend> make_device_backend() {
  std::string why;
  if (!cuda_device_present(&why))
    throw Error("device cuda: " + why +
                "; run on the cpu, or on cuda-emu to test the CUDA kernels without a GPU");
  throw Error(
      "device cuda: a GPU is present, but the GPU device runtime (memory, streams, "
      "launches; issue 11) is not built yet; use cuda-emu for the CUDA kernels");
}

}  // namespace kiln::cuda
