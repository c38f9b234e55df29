// NVRTC through dlopen (nvrtc.hpp). The few entry points are declared here with NVRTC's C ABI
// (nvrtcResult is an int enum, nvrtcProgram an opaque pointer), so no CUDA header is needed.
#include "codegen/cuda/nvrtc.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "support/cache.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"
#include "support/hash.hpp"

namespace kiln::cuda {

namespace {

using Program = void*;
struct Api {
  int (*version)(int*, int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*,
                const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string why;  // empty: loaded
};

const Api& api() {
  static Api a = [] {
    Api x;
    void* h = open_toolkit_library("libnvrtc", &x.why);
    if (!h) {
      x.why = "NVRTC not found (" + x.why + ")";
      return x;
    }
    auto sym = [&](const char* name) {
      void* s = dlsym(h, name);
      if (!s && x.why.empty()) x.why = std::string("NVRTC lacks ") + name;
      return s;
    };
    x.version = reinterpret_cast<decltype(x.version)>(sym("nvrtcVersion"));
    x.create = reinterpret_cast<decltype(x.create)>(sym("nvrtcCreateProgram"));
    x.compile = reinterpret_cast<decltype(x.compile)>(sym("nvrtcCompileProgram"));
    x.log_size = reinterpret_cast<decltype(x.log_size)>(sym("nvrtcGetProgramLogSize"));
    x.log = reinterpret_cast<decltype(x.log)>(sym("nvrtcGetProgramLog"));
    x.cubin_size = reinterpret_cast<decltype(x.cubin_size)>(sym("nvrtcGetCUBINSize"));
    x.cubin = reinterpret_cast<decltype(x.cubin)>(sym("nvrtcGetCUBIN"));
    x.destroy = reinterpret_cast<decltype(x.destroy)>(sym("nvrtcDestroyProgram"));
    x.error_string = reinterpret_cast<decltype(x.error_string)>(sym("nvrtcGetErrorString"));
    return x;
  }();
  return a;
}

}  // namespace

namespace {

std::mutex g_libraries_mu;
std::vector<std::pair<std::string, std::string>> g_libraries;  // (stem, path) of each loaded

// The file a dlopen handle was loaded from, as the dynamic loader records it.
std::string loaded_from(void* handle) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) return map->l_name;
  return "";
}

std::vector<std::string> globbed(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t k = 0; k < g.gl_pathc; ++k) out.push_back(g.gl_pathv[k]);
  globfree(&g);
  return out;
}

// Where toolkit libraries are looked for, in order ("" stands for the dynamic loader's own
// search: LD_LIBRARY_PATH, the ld.so cache).
std::vector<std::string> library_dirs() {
  std::vector<std::string> dirs;
  const std::string& steer = flags().cuda_lib_dir;
  for (size_t at = 0; at <= steer.size();) {
    size_t colon = std::min(steer.find(':', at), steer.size());
    if (colon > at) dirs.push_back(steer.substr(at, colon - at));
    at = colon + 1;
  }
  dirs.push_back("");
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* h = std::getenv(env); h && h[0] == '/') roots.push_back(h);
  roots.push_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* sub : {"/lib64", "/lib", "/targets/x86_64-linux/lib"}) dirs.push_back(r + sub);
  // NVIDIA's pip wheels (nvidia-cublas, nvidia-cuda-nvrtc, ...: nvidia/<name>/lib, CUDA 13's
  // nvidia/cu13/lib) in the active virtual environment, the user's and the system's Pythons.
  std::vector<std::string> sites;
  if (const char* v = std::getenv("VIRTUAL_ENV"); v && v[0] == '/')
    sites.push_back(std::string(v) + "/lib/python3*/site-packages");
  if (const char* h = std::getenv("HOME"); h && h[0] == '/')
    sites.push_back(std::string(h) + "/.local/lib/python3*/site-packages");
  sites.push_back("/usr/local/lib/python3*/dist-packages");
  sites.push_back("/usr/local/lib/python3*/site-packages");
  sites.push_back("/usr/lib/python3/dist-packages");
  for (const auto& site : sites)
    for (const auto& d : globbed(site + "/nvidia/*/lib")) dirs.push_back(d);
  return dirs;
}

}  // namespace

void* open_toolkit_library(const std::string& stem, std::string* why) {
  // CUDA 13's sonames (cuBLAS 13, cuSOLVER 12, cuRAND 10, NVRTC 13), 12's, then the bare name.
  static const char* const kVersions[] = {".so.13", ".so.12", ".so.11", ".so.10", ".so"};
  std::string tried;
  for (const auto& dir : library_dirs()) {
    tried += dir.empty() ? " (the loader's search path)" : " " + dir;
    for (const char* v : kVersions) {
      std::string path = dir.empty() ? stem + v : dir + "/" + stem + v;
      if (!dir.empty() && access(path.c_str(), R_OK) != 0) continue;
      // NVRTC opens its builtins by soname at its first compile: from a directory the loader
      // does not search, they are loaded first from the same directory (RTLD_GLOBAL).
      if (stem == "libnvrtc" && !dir.empty())
        for (const auto& b : globbed(dir + "/libnvrtc-builtins.so.*"))
          dlopen(b.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        std::lock_guard<std::mutex> lock(g_libraries_mu);
        g_libraries.emplace_back(stem, loaded_from(h));
        return h;
      }
    }
  }
  if (why)
    *why = "looked for " + stem + ".so.{13,12,11,10,} in" + tried +
           "; KILN_CUDA_LIB_DIR adds directories";
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> loaded_toolkit_libraries() {
  std::lock_guard<std::mutex> lock(g_libraries_mu);
  return g_libraries;
}

bool nvrtc_available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.why;
  return a.why.empty();
}

std::string nvrtc_version() {
  const Api& a = api();
  int major = 0, minor = 0;
  if (!a.why.empty() || a.version(&major, &minor) != 0) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcOutput nvrtc_compile(const std::string& source, int arch, const std::string& name) {
  const Api& a = api();
  if (!a.why.empty()) throw Error("cuda: cannot compile kernels: " + a.why);
  auto t0 = std::chrono::steady_clock::now();
  NvrtcOutput out;
  Program prog = nullptr;
  int rc = a.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != 0) throw Error(std::string("cuda: nvrtcCreateProgram: ") + a.error_string(rc));
  std::string gpu = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {gpu.c_str(), "--std=c++17", "--fmad=false"};
  rc = a.compile(prog, 3, opts);
  size_t n = 0;
  if (a.log_size(prog, &n) == 0 && n > 1) {
    out.log.resize(n);
    a.log(prog, out.log.data());
    out.log.resize(n - 1);
  }
  if (rc == 0 && a.cubin_size(prog, &n) == 0) {
    out.cubin.resize(n);
    out.ok = a.cubin(prog, out.cubin.data()) == 0;
  } else if (out.log.empty()) {
    out.log = a.error_string(rc);
  }
  a.destroy(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

namespace {
std::mutex g_cache_mu;
std::unordered_map<uint64_t, std::string> g_cubins;  // key -> cubin
}  // namespace

void nvrtc_forget_memory_cache() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_cubins.clear();
}

NvrtcOutput nvrtc_cubin(const std::string& source, int arch, const std::string& name) {
  uint64_t key = 0x6b696c6e63756269ULL;
  key = hash_bytes(hash_bytes(key, source), nvrtc_version());
  key = hash_mix(key, static_cast<uint64_t>(arch));
  NvrtcOutput out;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    if (auto it = g_cubins.find(key); it != g_cubins.end()) {
      out.ok = out.cached = true;
      out.cubin = it->second;
      return out;
    }
  }
  cache::Key disk_key =
      cache::key_of("cubin\n" + nvrtc_version() + "\nsm_" + std::to_string(arch) + "\n" + source);
  std::string path = cache::path_of("cubin-", disk_key, ".cubin");
  if (auto payload = cache::load(path, cache::Kind::Cubin, disk_key)) {
    out.ok = out.cached = true;
    out.cubin = std::move(*payload);
    std::lock_guard<std::mutex> lock(g_cache_mu);
    g_cubins[key] = out.cubin;
    return out;
  }
  out = nvrtc_compile(source, arch, name);
  if (!out.ok) return out;
  cache::store(path, cache::Kind::Cubin, disk_key, out.cubin);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_cubins[key] = out.cubin;
  return out;
}

}  // namespace kiln::cuda
