// NVRTC, loaded at run time (dlopen), so that Kiln builds and runs without the CUDA toolkit and
// one binary serves machines with and without it. Compiles printed CUDA source to a cubin for
// one architecture: NVRTC parses and optimizes, ptxas (inside NVRTC) assembles, so a successful
// compile checks that the printed code is valid for that GPU.
#pragma once
#include <dlfcn.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

struct NvrtcOutput {
  bool ok = false;
  bool cached = false;  // nvrtc_cubin: from the memory or disk cache, not compiled
  std::string log;      // NVRTC's program log (errors, warnings)
  std::string cubin;    // the machine code, when ok
  double seconds = 0;
};

// dlopen of a CUDA toolkit library by its stem ("libnvrtc", "libcublas"), its CUDA 13 to 10
// sonames then the bare name, in: KILN_CUDA_LIB_DIR's directories (colon-separated), the dynamic
// loader's search, lib64/, lib/ and targets/x86_64-linux/lib/ of $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda, then NVIDIA's pip wheels (site-packages/nvidia/*/lib). Returns the handle, or
// nullptr with `why` naming the directories searched.
void* open_toolkit_library(const std::string& stem, std::string* why);
// (stem, file) of each library open_toolkit_library has loaded, in load order (kiln doctor).
std::vector<std::pair<std::string, std::string>> loaded_toolkit_libraries();

// *f = the function `name` of the dlopen handle h; false when the library lacks it.
template <class F>
bool bind(void* h, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(h, name));
  return *f != nullptr;
}

// Whether NVRTC could be loaded; if not, why (the paths tried).
bool nvrtc_available(std::string* why = nullptr);
// "13.0", or "" without NVRTC.
std::string nvrtc_version();
// Compiles `source` for sm_<arch> (80, 90, ...) with the options every Kiln kernel uses
// (C++17, no contraction of a * b + c into FMA, as on the CPU). Throws kiln::Error without NVRTC.
NvrtcOutput nvrtc_compile(const std::string& source, int arch, const std::string& name);

// nvrtc_compile through the cubin caches: in memory, then on disk (KILN_CACHE_DIR, files
// cubin-<key>.cubin), keyed by the source's hash, the NVRTC version and the architecture. Only
// successful compiles are cached.
NvrtcOutput nvrtc_cubin(const std::string& source, int arch, const std::string& name);
// Empties the in-memory cubin cache (tests of the disk cache).
void nvrtc_forget_memory_cache();

}  // namespace kiln::cuda
