// kiln doctor, the BLAS it reports (and --json, and the warning for generic kernels), the CUDA
// libraries' discovery (KILN_CUDA_LIB_DIR) and library calls that fall back to the host (a warning
// once, an error with KILN_CUDA_STRICT).
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/backend.hpp"
#include "codegen/cuda/nvrtc.hpp"
#include "codegen/library.hpp"
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
  EXPECT_EQ(count(out, "\nok   ") + count(out, "\nskip "), 9) << out;
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

namespace {
// The version cmake/blas-requirements.txt pins ("scipy-openblas32==0.3.34.481.3").
std::string pinned_blas_version() {
  std::ifstream in(kt::source_dir() + "/cmake/blas-requirements.txt");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("scipy-openblas32==", 0) == 0) return line.substr(line.find("==") + 2);
  return "";
}

// `kiln run matmul` with `env` before it: its --json (stdout) and its stderr.
nlohmann::json matmul_json(const std::string& env, std::string* err) {
  std::string errfile = kt::tmpdir() + "/blas-stderr.txt";
  std::string out = kt::shell("env " + env + " " + kt::kiln_cli() +
                              " run matmul --size 96 --chunk 32 --device cpu --json 2>" + errfile);
  std::ifstream in(errfile);
  std::stringstream ss;
  ss << in.rdbuf();
  *err = ss.str();
  return nlohmann::json::parse(out, nullptr, false);
}
}  // namespace

TEST(Blas, DoctorAndJsonNameThePinnedOpenBlasAndTheCoreItRuns) {
  const std::string version = pinned_blas_version();
  ASSERT_FALSE(version.empty());
  const library::BlasInfo& b = library::blas_info();
  EXPECT_EQ(b.library, "OpenBLAS");
  EXPECT_EQ(b.version, version);
  EXPECT_FALSE(b.core.empty());
  int rc = -1;
  std::string doctor = run("doctor --device cpu", &rc);
  EXPECT_EQ(rc, 0) << doctor;
  EXPECT_NE(doctor.find("\nblas       OpenBLAS " + version + " "), std::string::npos) << doctor;
  EXPECT_NE(doctor.find("; core " + b.core), std::string::npos) << doctor;
  EXPECT_NE(doctor.find("\nthreads    "), std::string::npos) << doctor;
  EXPECT_NE(doctor.find("\ncache      "), std::string::npos) << doctor;
  std::string err;
  nlohmann::json j = matmul_json("", &err);
  ASSERT_TRUE(j.is_object()) << err;
  EXPECT_EQ(j["blas"]["library"], "OpenBLAS");
  EXPECT_EQ(j["blas"]["version"], version);
  EXPECT_EQ(j["blas"]["core"], b.core);
  EXPECT_EQ(j["blas"]["generic"], b.generic);
}

TEST(Blas, KernelsOlderThanTheHostsAvx2WarnOnceAndStillCompute) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "the host has no AVX2";
  // OPENBLAS_CORETYPE makes OpenBLAS pick its kernels as on an SSE3 CPU, as it does on a CPU it
  // does not recognize; then the AVX2 ones, which every AVX2 host runs.
  std::string err;
  nlohmann::json old = matmul_json("OPENBLAS_CORETYPE=Prescott", &err);
  ASSERT_TRUE(old.is_object()) << err;
  EXPECT_EQ(old["blas"]["generic"], true) << old.dump();
  EXPECT_EQ(count(err, "kiln: warning: OpenBLAS "), 1) << err;
  EXPECT_NE(err.find("as OPENBLAS_CORETYPE=Prescott asks"), std::string::npos) << err;
  nlohmann::json avx2 = matmul_json("OPENBLAS_CORETYPE=Haswell", &err);
  ASSERT_TRUE(avx2.is_object()) << err;
  EXPECT_EQ(avx2["blas"]["core"], "Haswell");
  EXPECT_EQ(avx2["blas"]["generic"], false);
  EXPECT_EQ(count(err, "warning"), 0) << err;
  // Both kernel families compute the same product (sums of 96 terms, rounded differently).
  const double a = old["result"], h = avx2["result"];
  EXPECT_NEAR(a, h, 1e-9 * std::fabs(h)) << old.dump() << avx2.dump();
  EXPECT_NE(h, 0.0);
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
