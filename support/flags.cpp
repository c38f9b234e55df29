#include "support/flags.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "support/error.hpp"

namespace kiln {

namespace {

// One parser for every KILN_* variable: a bad value is an Error naming the variable, never a
// silent default. An empty value counts as unset.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void read_bool(const char* name, bool* out) {
  const char* v = env(name);
  if (!v) return;
  std::string s = lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") {
    *out = true;
  } else if (s == "0" || s == "false" || s == "no" || s == "off") {
    *out = false;
  } else {
    throw Error(std::string(name) + "='" + v + "': expected a boolean (0/1, true/false, yes/no)");
  }
}

template <class T>
void read_int(const char* name, T* out, int64_t lo, int64_t hi) {
  const char* v = env(name);
  if (!v) return;
  int64_t x = 0;
  const char* end = v + std::strlen(v);
  auto [p, ec] = std::from_chars(v, end, x);
  if (ec != std::errc() || p != end || x < lo || x > hi)
    throw Error(std::string(name) + "='" + v + "': expected an integer in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
  *out = static_cast<T>(x);
}

void read_choice(const char* name, std::string* out, std::initializer_list<const char*> choices) {
  const char* v = env(name);
  if (!v) return;
  std::string list;
  for (const char* c : choices) {
    if (std::strcmp(v, c) == 0) {
      *out = v;
      return;
    }
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw Error(std::string(name) + "='" + v + "': expected one of " + list);
}

void read_string(const char* name, std::string* out) {
  if (const char* v = env(name)) *out = v;
}

Flags from_env() {
  Flags f;
  read_int("KILN_DEBUG", &f.debug, 0, 5);
  read_int("KILN_THREADS", &f.threads, 0, 256);
  read_bool("KILN_NO_FUSE", &f.no_fuse);
  read_bool("KILN_NO_ROW_FUSION", &f.no_row_fusion);
  read_bool("KILN_NO_PUSH_SLICES", &f.no_push_slices);
  read_bool("KILN_NO_COMPILE", &f.no_compile);
  read_bool("KILN_PRECISE_MATH", &f.precise_math);
  read_choice("KILN_MATH", &f.math, {"kiln", "libmvec"});
  read_string("KILN_TARGET_CPU", &f.target_cpu);
  read_int("KILN_FAIL_ALLOC_ABOVE", &f.fail_alloc_above, 0, INT64_MAX);
  read_bool("KILN_NO_BLOCK_POOL", &f.no_block_pool);
  read_bool("KILN_NO_DEVICE_LIBRARY", &f.no_device_library);
  read_string("KILN_DEVICE", &f.device);
  read_int("KILN_DEVICES", &f.devices, 0, 64);
  read_string("KILN_CUDA_CHECK", &f.cuda_check);
  read_string("KILN_CUDA_CHECK_DIR", &f.cuda_check_dir);
  read_int("KILN_CUDA_ROWS_FROM", &f.cuda_rows_from, 1, INT64_MAX);
  read_string("KILN_CUDA_LIB_DIR", &f.cuda_lib_dir);
  read_bool("KILN_CUDA_STRICT", &f.cuda_strict);
  read_bool("KILN_CUDA_SYNC", &f.cuda_sync);
  read_bool("KILN_CUDA_PROFILE", &f.cuda_profile);
  read_string("KILN_EMU_CXX", &f.emu_cxx);
  read_bool("KILN_MPI", &f.mpi);
  read_int("KILN_MPI_TIMEOUT", &f.mpi_timeout, 1, 86400);
  read_string("KILN_MPI_PLUGIN", &f.mpi_plugin);
  // KILN_CACHE_DIR set and empty disables the disk cache. XDG_CACHE_HOME empty or relative is
  // ignored, as the XDG base directory specification says.
  if (const char* v = std::getenv("KILN_CACHE_DIR")) {
    f.cache_dir = v;
  } else if (const char* x = env("XDG_CACHE_HOME"); x && x[0] == '/') {
    f.cache_dir = std::string(x) + "/kiln";
  } else if (const char* h = env("HOME"); h && h[0] == '/') {
    f.cache_dir = std::string(h) + "/.cache/kiln";
  }
  return f;
}
}  // namespace

Flags& flags() {
  static Flags f = from_env();
  return f;
}

}  // namespace kiln
