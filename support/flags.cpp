#include "support/flags.hpp"

#include <cstdlib>

namespace kiln {

namespace {
Flags from_env() {
  Flags f;
  if (const char* v = std::getenv("KILN_DEBUG")) f.debug = std::atoi(v);
  if (const char* v = std::getenv("KILN_THREADS")) f.threads = std::atoi(v);
  if (const char* v = std::getenv("KILN_NO_FUSE")) f.no_fuse = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_NO_ROW_FUSION")) f.no_row_fusion = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_NO_PUSH_SLICES")) f.no_push_slices = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_NO_COMPILE")) f.no_compile = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_PRECISE_MATH")) f.precise_math = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_MATH")) f.math = v;
  if (const char* v = std::getenv("KILN_TARGET_CPU")) f.target_cpu = v;
  if (const char* v = std::getenv("KILN_FAIL_ALLOC_ABOVE")) f.fail_alloc_above = std::atoll(v);
  if (const char* v = std::getenv("KILN_NO_BLOCK_POOL")) f.no_block_pool = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_NO_DEVICE_LIBRARY"))
    f.no_device_library = std::atoi(v) != 0;
  if (const char* v = std::getenv("KILN_DEVICE")) f.device = v;
  if (const char* v = std::getenv("KILN_DEVICES")) f.devices = std::atoi(v);
  if (const char* v = std::getenv("KILN_CUDA_CHECK")) f.cuda_check = v;
  if (const char* v = std::getenv("KILN_EMU_CXX")) f.emu_cxx = v;
  if (const char* v = std::getenv("KILN_CACHE_DIR")) {
    f.cache_dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    f.cache_dir = std::string(x) + "/kiln";
  } else if (const char* h = std::getenv("HOME")) {
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
