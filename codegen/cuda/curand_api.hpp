// cuRAND (libcurand), loaded at run time like NVRTC and the driver: its host generator serves
// Engine::Curand on the CPU, the interpreter and cuda-emu (codegen/library.hpp: curand_host), its
// device generator the GPU (device.cpp). Types as curand.h declares them; the header is not
// needed to build.
#pragma once
#include <cstdint>
#include <string>

#include "ir/functions.hpp"

namespace kiln::cuda {

using CurandGenerator = struct curandGenerator_st*;
using CurandStream = struct CUstream_st*;  // the driver's CUstream

struct CurandApi {
  int (*create)(CurandGenerator*, int) = nullptr;       // curandCreateGenerator (device)
  int (*create_host)(CurandGenerator*, int) = nullptr;  // curandCreateGeneratorHost
  int (*destroy)(CurandGenerator) = nullptr;
  int (*set_seed)(CurandGenerator, unsigned long long) = nullptr;
  int (*set_offset)(CurandGenerator, unsigned long long) = nullptr;
  int (*set_stream)(CurandGenerator, CurandStream) = nullptr;  // curandSetStream
  int (*normal_double)(CurandGenerator, double*, size_t, double, double) = nullptr;
  int (*uniform_double)(CurandGenerator, double*, size_t) = nullptr;
  std::string why;  // empty: loaded
};
constexpr int kCurandPhilox = 161;  // CURAND_RNG_PSEUDO_PHILOX4_32_10

const CurandApi& curand_api();

// Throws kiln::Error naming the call and cuRAND's status unless it is success.
void check_curand(int status, const char* call);

// Fills out[0, count) with elements offset ... offset + count - 1 of the sequence of `g` (its seed
// set), normal or uniform doubles. cuRAND asks for an even count of normals, so an odd count's
// last element comes through `pair` (two doubles in the generator's memory), which `copy_last`
// then copies to out + count - 1.
template <class CopyLast>
void curand_fill(CurandGenerator g, RandomKind kind, int64_t offset, int64_t count, double* out,
                 double* pair, CopyLast copy_last) {
  const CurandApi& c = curand_api();
  auto generate = [&](int64_t at, int64_t n, double* dst) {
    check_curand(c.set_offset(g, static_cast<unsigned long long>(at)), "curandSetGeneratorOffset");
    if (kind == RandomKind::Normal)
      check_curand(c.normal_double(g, dst, static_cast<size_t>(n), 0.0, 1.0),
                   "curandGenerateNormalDouble");
    else
      check_curand(c.uniform_double(g, dst, static_cast<size_t>(n)), "curandGenerateUniformDouble");
  };
  const int64_t even = count & ~int64_t{1};
  if (even > 0) generate(offset, even, out);
  if (count & 1) {
    generate(offset + even, 2, pair);
    copy_last();
  }
}

}  // namespace kiln::cuda
