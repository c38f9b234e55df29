#include <dlfcn.h>

#include "codegen/cuda/curand_api.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/library.hpp"
#include "support/error.hpp"

namespace kiln::cuda {

const CurandApi& curand_api() {
  static CurandApi api = [] {
    CurandApi x;
    void* h = open_toolkit_library("libcurand", &x.why);  // libcurand.so.10 in CUDA 11 to 13
    if (!h) {
      x.why = "cuRAND not found (" + x.why + ")";
      return x;
    }
    x.why.clear();
    bool ok = bind(h, "curandCreateGenerator", &x.create) &&
              bind(h, "curandCreateGeneratorHost", &x.create_host) &&
              bind(h, "curandDestroyGenerator", &x.destroy) &&
              bind(h, "curandSetPseudoRandomGeneratorSeed", &x.set_seed) &&
              bind(h, "curandSetGeneratorOffset", &x.set_offset) &&
              bind(h, "curandSetStream", &x.set_stream) &&
              bind(h, "curandGenerateNormalDouble", &x.normal_double) &&
              bind(h, "curandGenerateUniformDouble", &x.uniform_double);
    if (!ok) x.why = "libcurand lacks a function Kiln calls";
    return x;
  }();
  return api;
}

void check_curand(int status, const char* call) {
  if (status != 0)
    throw Error(std::string("random (Engine::Curand): ") + call + " failed (cuRAND status " +
                std::to_string(status) + ")");
}

}  // namespace kiln::cuda

namespace kiln::library {

uint64_t curand_seed(uint64_t seed, int64_t stream) {
  return seed + static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull;
}

bool curand_available(std::string* why) {
  const cuda::CurandApi& c = cuda::curand_api();
  if (why) *why = c.why;
  return c.why.empty();
}

void curand_host(RandomKind kind, uint64_t seed, int64_t offset, int64_t count, double* out) {
  const cuda::CurandApi& c = cuda::curand_api();
  if (!c.why.empty()) throw Error("random (Engine::Curand): " + c.why);
  if (kind != RandomKind::Normal && kind != RandomKind::Uniform)
    throw InternalError(std::string("curand_host: ") + random_name(kind));
  if (count <= 0) return;
  cuda::CurandGenerator g = nullptr;
  cuda::check_curand(c.create_host(&g, cuda::kCurandPhilox), "curandCreateGeneratorHost");
  struct Destroy {
    cuda::CurandGenerator g;
    ~Destroy() { cuda::curand_api().destroy(g); }
  } destroy{g};
  cuda::check_curand(c.set_seed(g, seed), "curandSetPseudoRandomGeneratorSeed");
  double pair[2];
  cuda::curand_fill(g, kind, offset, count, out, pair, [&] { out[count - 1] = pair[0]; });
}

}  // namespace kiln::library
