// kiln doctor, the CUDA libraries' discovery (KILN_CUDA_LIB_DIR) and library calls that fall back
// to the host (a warning once, an error with KILN_CUDA_STRICT).
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "codegen/backend.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "oracle.hpp"
#include "shell.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {
std::string run(const std::string& args, int* rc) {
  return kt::shell(kt::kiln_cli() + " " + args + " 2>&1", rc);
}
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST(Doctor, EveryCheckPassesOnTheEmulator) {
  int rc = -1;
  std::string out = run("doctor --device cuda-emu", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("device     cuda-emu"), std::string::npos) << out;
  EXPECT_EQ(count(out, "\nok   ") + count(out, "\nskip "), 8) << out;
  EXPECT_EQ(count(out, "FAIL"), 0) << out;
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

TEST(Doctor, AMissingGpuIsOneFailedLineAndANonZeroExit) {
  int rc = -1;
  std::string out = run("doctor --device cuda", &rc);
  if (out.find("FAIL device: ") == std::string::npos) {  // a machine with a GPU
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
    return;
  }
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(count(out, "FAIL"), 1) << out;
  EXPECT_NE(out.find("device cuda: "), std::string::npos) << out;
  EXPECT_EQ(out.find("\nok   "), std::string::npos) << out;
  run("doctor --device nothing", &rc);
  EXPECT_EQ(rc, 2);
}

TEST(CudaLibraries, KilnCudaLibDirIsSearchedFirst) {
  // A library under a name of this test's, in a directory of its own: found only through the
  // directory named, and recorded with the file it came from.
  void* m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(m, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(dlsym(m, "cos"), &info), 0);
  std::string dir = kt::tmpdir() + "/cuda-lib-dir";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/libkilnprobe.so.12");
  std::filesystem::create_symlink(info.dli_fname, dir + "/libkilnprobe.so.12");
  std::string before = flags().cuda_lib_dir, why;
  flags().cuda_lib_dir = "";
  EXPECT_EQ(cuda::open_toolkit_library("libkilnprobe", &why), nullptr);
  EXPECT_NE(why.find("KILN_CUDA_LIB_DIR"), std::string::npos) << why;
  EXPECT_NE(why.find("/usr/local/cuda/lib64"), std::string::npos) << why;
  flags().cuda_lib_dir = "/nonexistent:" + dir;
  void* h = cuda::open_toolkit_library("libkilnprobe", &why);
  flags().cuda_lib_dir = before;
  ASSERT_NE(h, nullptr) << why;
  EXPECT_NE(dlsym(h, "cos"), nullptr);
  bool listed = false;
  for (const auto& [stem, path] : cuda::loaded_toolkit_libraries())
    listed = listed || (stem == "libkilnprobe" && !path.empty());
  EXPECT_TRUE(listed);
  dlclose(h);
  dlclose(m);
}

TEST(CudaLibraries, AHostFallbackIsWarnedOnceAndRefusedWhenStrict) {
  const std::string why = "cuBLAS not found (a test's reason)";
  testing::internal::CaptureStderr();
  backend::note_host_fallback(Device::Cuda, "GEMM", why);
  backend::note_host_fallback(Device::Cuda, "GEMM", why);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "kiln: warning: device cuda: GEMM calls run on the host"), 1) << err;
  EXPECT_NE(err.find(why), std::string::npos) << err;
  int listed = 0;
  for (const auto& f : host_fallbacks()) listed += f.find(why) != std::string::npos;
  EXPECT_EQ(listed, 1);
  flags().cuda_strict = true;
  try {
    backend::note_host_fallback(Device::Cuda, "LAPACK", "cuSOLVER not found (x)");
    ADD_FAILURE() << "KILN_CUDA_STRICT=1 allowed a fallback";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_CUDA_STRICT=1"), std::string::npos) << e.what();
  }
  flags().cuda_strict = false;
}
