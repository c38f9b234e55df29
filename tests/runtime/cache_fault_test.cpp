// The kernel cache cannot lie (issue 30): a damaged, truncated, foreign or unwritable entry costs a
// compile, never a result. Entries of every kind (CPU objects, cuda-emu shared objects, cubins) are
// damaged at every header byte and at positions spread over the payload, then loaded; a few
// damages are also run end to end through the kiln command.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "codegen/cuda/nvrtc.hpp"
#include "oracle.hpp"
#include "support/cache.hpp"
#include "support/flags.hpp"
#include "tools/shell.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A path quoted for the shell the tests' commands run in.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Entry {
  std::string path;
  cache::Kind kind;
  cache::Key key;
};

// The cache entries in dir, with the kind and key their names carry (prefix, 32 hex digits: the
// key's high then low half, suffix).
std::vector<Entry> entries_in(const std::string& dir) {
  std::vector<Entry> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    cache::Kind kind;
    size_t at;
    if (name.rfind("cubin-", 0) == 0) {
      kind = cache::Kind::Cubin, at = 6;
    } else if (name.rfind("emu", 0) == 0) {
      kind = cache::Kind::EmuLibrary, at = 3;
    } else if (name.rfind("k", 0) == 0 && e.path().extension() == ".o") {
      kind = cache::Kind::CpuObject, at = 1;
    } else {
      continue;
    }
    if (name.size() < at + 32 || name.find(".tmp") != std::string::npos) continue;
    cache::Key k;
    k.hi = std::stoull(name.substr(at, 16), nullptr, 16);
    k.lo = std::stoull(name.substr(at + 16, 16), nullptr, 16);
    out.push_back({e.path().string(), kind, k});
  }
  return out;
}

// Every damage done to an entry of these bytes: one flipped bit at each header byte and at 200
// positions spread over the payload (its first and last bytes among them), truncations (to 0, to
// the header, by one byte, to half) and one byte appended.
std::vector<std::pair<std::string, std::string>> damages(const std::string& bytes) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<size_t> at;
  for (size_t i = 0; i < cache::kHeaderBytes; ++i) at.push_back(i);
  const size_t payload = bytes.size() - cache::kHeaderBytes;
  for (size_t k = 0; k < 200; ++k) at.push_back(cache::kHeaderBytes + k * (payload - 1) / 199);
  for (size_t i : at) {
    std::string d = bytes;
    d[i] = static_cast<char>(d[i] ^ (1 << (i % 8)));
    out.emplace_back("bit flip at byte " + std::to_string(i), d);
  }
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{cache::kHeaderBytes}, bytes.size() / 2, bytes.size() - 1})
    out.emplace_back("truncated to " + std::to_string(n) + " bytes", bytes.substr(0, n));
  out.emplace_back("one byte appended", bytes + '\0');
  return out;
}

// Runs the kiln command with an environment; its --json output parsed, or null on failure.
nlohmann::json run_json(const std::string& env, const std::string& args, int* rc,
                        std::string* err = nullptr) {
  std::string errfile = kt::tmpdir() + "/cache-fault-stderr-" + std::to_string(::getpid());
  std::string out =
      kt::shell("env " + env + " " + kt::kiln_cli() + " " + args + " --json 2>" + errfile, rc);
  if (err) *err = slurp(errfile);
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// A fresh directory under the tests' temporary directory.
std::string fresh_dir(const std::string& name) {
  std::string d = kt::tmpdir() + "/" + name + "-" + std::to_string(::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const char* kWorkload = "run diamond --size 200 --chunk 100";

// The CUDA check builds (cubins) where NVRTC is installed.
std::string cuda_check_env() {
  std::string why;
  return cuda::nvrtc_available(&why) ? "KILN_CUDA_CHECK=90" : "KILN_CUDA_CHECK=";
}

// The environment that runs on a device ("cpu" or "cuda-emu", with its NVRTC check builds).
std::string device_env(const std::string& device) {
  return "KILN_DEVICE=" + device +
         " KILN_DEVICES= " + (device == "cpu" ? std::string("KILN_CUDA_CHECK=") : cuda_check_env());
}

// The workload's result on a device with no disk cache.
double uncached_result(const std::string& device) {
  int rc = 0;
  nlohmann::json j = run_json(device_env(device) + " KILN_CACHE_DIR=", kWorkload, &rc);
  EXPECT_EQ(rc, 0);
  return j.is_null() ? 0 : j["result"].get<double>();
}

// A cache directory filled by one CPU run and one cuda-emu run.
std::string filled_cache() {
  std::string dir = fresh_dir("cache-fault");
  for (const char* device : {"cpu", "cuda-emu"}) {
    int rc = 0;
    run_json(device_env(device) + " KILN_CACHE_DIR=" + dir, kWorkload, &rc);
    EXPECT_EQ(rc, 0) << device;
  }
  return dir;
}

}  // namespace

TEST(CacheFaults, EveryDamagedEntryOfEveryKindIsRejectedDeletedAndNeverLoaded) {
  std::string dir = filled_cache();
  std::vector<Entry> entries = entries_in(dir);
  std::map<cache::Kind, int> kinds;
  for (const auto& e : entries) ++kinds[e.kind];
  EXPECT_EQ(kinds[cache::Kind::CpuObject], 1);
  EXPECT_GE(kinds[cache::Kind::EmuLibrary], 1);
  std::string why;
  if (cuda::nvrtc_available(&why)) {
    EXPECT_GE(kinds[cache::Kind::Cubin], 1);
  }
  for (const auto& e : entries) {
    const std::string pristine = slurp(e.path);
    auto payload = cache::load(e.path, e.kind, e.key);
    ASSERT_TRUE(payload) << e.path;
    ASSERT_EQ(payload->size() + cache::kHeaderBytes, pristine.size());
    int checked = 0;
    for (const auto& [what, bytes] : damages(pristine)) {
      spit(e.path, bytes);
      int64_t before = cache::rejected();
      EXPECT_FALSE(cache::load(e.path, e.kind, e.key)) << e.path << ": " << what;
      EXPECT_EQ(cache::rejected(), before + 1) << e.path << ": " << what;
      EXPECT_FALSE(fs::exists(e.path)) << e.path << ": " << what << " was not deleted";
      ++checked;
    }
    EXPECT_GE(checked, 200);
    // The intact entry still loads; as another kind, or under another key, it does not.
    spit(e.path, pristine);
    EXPECT_TRUE(cache::load(e.path, e.kind, e.key) == payload) << e.path;
    cache::Kind other =
        e.kind == cache::Kind::CpuObject ? cache::Kind::Cubin : cache::Kind::CpuObject;
    EXPECT_FALSE(cache::load(e.path, other, e.key));
    spit(e.path, pristine);
    cache::Key wrong = e.key;
    wrong.lo ^= 1;
    EXPECT_FALSE(cache::load(e.path, e.kind, wrong));
  }
  fs::remove_all(dir);
}

TEST(CacheFaults, ARunOverADamagedEntryGivesTheResultOfAnEmptyCacheAndOneRejection) {
  std::map<std::string, double> expected;
  for (const char* device : {"cpu", "cuda-emu"}) expected[device] = uncached_result(device);
  std::string dir = filled_cache();
  for (const auto& e : entries_in(dir)) {
    const std::string pristine = slurp(e.path);
    const size_t n = pristine.size();
    const std::string device = e.kind == cache::Kind::CpuObject ? "cpu" : "cuda-emu";
    const std::string env = device_env(device);
    for (auto [what, bytes] : std::vector<std::pair<std::string, std::string>>{
             {"header", pristine},
             {"middle", pristine},
             {"tail", pristine},
             {"truncated", pristine.substr(0, n - 100)},
             {"empty", ""}}) {
      size_t flip = what == "header" ? 20 : what == "middle" ? n / 2 : n - 1;
      if (what == "header" || what == "middle" || what == "tail") bytes[flip] ^= 0x10;
      spit(e.path, bytes);
      int rc = 0;
      std::string err;
      nlohmann::json j = run_json(env + " KILN_CACHE_DIR=" + dir, kWorkload, &rc, &err);
      ASSERT_EQ(rc, 0) << e.path << " " << what << ": " << err;
      ASSERT_FALSE(j.is_null()) << err;
      EXPECT_EQ(j["result"].get<double>(), expected[device]) << e.path << " " << what;
      EXPECT_EQ(j["cache_rejected"].get<int>(), 1) << e.path << " " << what << ": " << err;
      EXPECT_NE(err.find("rejected"), std::string::npos) << err;
      // Rebuilt: a valid entry again (not always the same bytes: a shared object holds its
      // source file's temporary name).
      EXPECT_TRUE(cache::load(e.path, e.kind, e.key)) << e.path << " " << what;
    }
  }
  fs::remove_all(dir);
}

TEST(CacheFaults, ConcurrentProcessesShareOneCache) {
  std::string dir = fresh_dir("cache-shared");
  std::string cmd;
  for (int p = 0; p < 4; ++p)
    cmd += "env KILN_DEVICE=cpu KILN_CACHE_DIR=" + dir + " " + kt::kiln_cli() + " " + kWorkload +
           " --json > " + dir + "/out" + std::to_string(p) + " 2>&1 & ";
  int rc = 0;
  kt::shell("sh -c " + sh_quote(cmd + "wait"), &rc);
  ASSERT_EQ(rc, 0);
  double first = 0;
  for (int p = 0; p < 4; ++p) {
    std::string out = slurp(dir + "/out" + std::to_string(p));
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    if (p == 0) first = j["result"].get<double>();
    EXPECT_EQ(j["result"].get<double>(), first);
    EXPECT_EQ(j["cache_rejected"].get<int>(), 0) << out;
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "a temporary file left: " << name;
  }
  for (const auto& e : entries_in(dir)) {
    ++entries;
    EXPECT_TRUE(cache::load(e.path, e.kind, e.key)) << e.path;
  }
  EXPECT_EQ(entries, 1);
  fs::remove_all(dir);
}

// Runs the workload with `prefix` before the kiln command (inside sh -c); asserts the result of
// an uncached run, one warning that the cache cannot be written (for `reason`), and no file left
// in dir.
static void expect_full_cache_degrades(const std::string& device, const std::string& dir,
                                       const std::string& prefix, const std::string& reason) {
  double expected = uncached_result(device);
  int rc = 0;
  std::string out =
      kt::shell("sh -c " +
                    sh_quote(prefix + "exec env " + device_env(device) + " KILN_CACHE_DIR=" + dir +
                             " " + kt::kiln_cli() + " " + kWorkload + " --json") +
                    " 2>&1",
                &rc);
  EXPECT_EQ(rc, 0) << device << ": " << out;
  const size_t brace = out.find('{');
  ASSERT_NE(brace, std::string::npos) << device << ": no JSON: " << out;
  nlohmann::json j = nlohmann::json::parse(out.substr(brace), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["result"].get<double>(), expected) << device;
  size_t warn = out.find("cannot be written (" + reason + ")");
  EXPECT_NE(warn, std::string::npos) << device << ": " << out;
  EXPECT_EQ(out.find("cannot be written", warn + 1), std::string::npos) << "warned twice: " << out;
  for (const auto& e : fs::directory_iterator(dir))
    ADD_FAILURE() << device << ": left " << e.path() << " (" << fs::file_size(e.path())
                  << " bytes)";
}

TEST(CacheFaults, AFullDiskLeavesNoPartialEntryAndOneWarning) {
#ifndef __SANITIZE_THREAD__  // ThreadSanitizer's runtime faults under a file-size limit
  // CPU objects: a file-size limit makes every write past 4 KiB fail (EFBIG) as a full disk would
  // (ENOSPC), with no mount; SIGXFSZ is ignored so the write fails instead of killing the process.
  std::string dir = fresh_dir("cache-full");
  expect_full_cache_degrades("cpu", dir, "ulimit -f 4; trap '' XFSZ; ", "File too large");
  // With space again, the next run fills the cache and the one after compiles nothing.
  int rc = 0;
  run_json("KILN_DEVICE=cpu KILN_CACHE_DIR=" + dir, kWorkload, &rc);
  EXPECT_EQ(rc, 0);
  run_json("KILN_DEVICE=cpu KILN_NO_COMPILE=1 KILN_CACHE_DIR=" + dir, kWorkload, &rc);
  EXPECT_EQ(rc, 0);
  fs::remove_all(dir);
#endif
  // A real full disk, where this machine lets the test mount one (root in a VM; CI's machines):
  // a 4 KiB tmpfs, smaller than any entry. cuda-emu needs it (its host compiler writes files,
  // which a file-size limit would stop too).
  std::string small = fresh_dir("cache-tmpfs");
  if (kt::shell("mount -t tmpfs -o size=4k tmpfs " + small + " 2>&1 && echo mounted")
          .find("mounted") == std::string::npos)
    GTEST_SKIP() << "cannot mount a tmpfs here: the ENOSPC cases not checked";
  for (const char* device : {"cpu", "cuda-emu"})
    expect_full_cache_degrades(device, small, "", "No space left on device");
  kt::shell("umount " + small);
  fs::remove_all(small);
}

TEST(CacheFaults, AnUnwritableCacheDirectoryDegradesToMemoryOnEveryDevice) {
  std::string base = fresh_dir("cache-unwritable");
  spit(base + "/file", "x");
  for (const char* device : {"cpu", "cuda-emu"}) {
    double expected = uncached_result(device);
    int rc = 0;
    std::string err;
    nlohmann::json j = run_json(device_env(device) + " KILN_CACHE_DIR=" + base + "/file/cache",
                                kWorkload, &rc, &err);
    ASSERT_EQ(rc, 0) << device << ": " << err;
    EXPECT_EQ(j["result"].get<double>(), expected) << device;
    EXPECT_NE(err.find("kiln: warning: the kernel cache '" + base +
                       "/file/cache' cannot be written (Not a directory)"),
              std::string::npos)
        << device << ": " << err;
  }
  fs::remove_all(base);
}

TEST(CacheFaults, ShellMetacharactersInTheCachePathRunNothing) {
  std::string base = fresh_dir("cache-shell");
  std::string dir = base + "/a';touch PWNED1;'b $(touch PWNED2) `touch PWNED3` \"c\" d;e";
  double expected = uncached_result("cuda-emu");
  int rc = 0;
  std::string out = kt::shell("env -C " + base + " " + device_env("cuda-emu") +
                                  " KILN_CACHE_DIR=" + sh_quote(dir) + " " + kt::kiln_cli() + " " +
                                  kWorkload + " --json",
                              &rc);
  EXPECT_EQ(rc, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["result"].get<double>(), expected);
  for (const char* f : {"PWNED1", "PWNED2", "PWNED3"}) EXPECT_FALSE(fs::exists(base + "/" + f));
  EXPECT_GE(entries_in(dir).size(), 1u);
  fs::remove_all(base);
}

TEST(CacheFaults, AMissingHostCompilerIsACleanError) {
  int rc = 0;
  std::string out = kt::shell(
      "env KILN_DEVICE=cuda-emu KILN_DEVICES= KILN_CACHE_DIR= "
      "KILN_EMU_CXX=/nonexistent/c++ " +
          kt::kiln_cli() + " " + kWorkload + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("kiln: cuda-emu (the host compiler, KILN_EMU_CXX): cannot run "
                     "'/nonexistent/c++': No such file or directory"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("internal error"), std::string::npos) << out;
}

TEST(CacheFaults, UnderCcacheEachKernelIsCompiledThenLinkedByTheSameCommandInEveryProcess) {
  // A stand-in for ccache named ccache (the name cuda-emu checks) that logs each command line and
  // runs it. Two processes without a disk cache compile the same kernels: the command lines must
  // be equal (what lets ccache hit), a compile (-c) then a link (-shared) per kernel, on files
  // named after the kernel's key in the private directory the compiler runs in.
  std::string dir = fresh_dir("emu-ccache"), log = dir + "/log";
  spit(dir + "/ccache", "#!/bin/sh\necho \"$*\" >> " + sh_quote(log) + "\nexec \"$@\"\n");
  fs::permissions(dir + "/ccache", fs::perms::owner_all);
  const double expected = uncached_result("cuda-emu");
  std::vector<std::vector<std::string>> runs;
  for (int run = 0; run < 2; ++run) {
    fs::remove(log);
    int rc = 0;
    nlohmann::json j = run_json(
        device_env("cuda-emu") + " KILN_CACHE_DIR= KILN_EMU_CXX=" + sh_quote(dir + "/ccache c++"),
        kWorkload, &rc);
    ASSERT_EQ(rc, 0) << run;
    EXPECT_EQ(j["result"].get<double>(), expected) << run;
    std::vector<std::string> lines;
    std::istringstream in(slurp(log));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    runs.push_back(lines);
  }
  ASSERT_FALSE(runs[0].empty());
  EXPECT_EQ(runs[0], runs[1]);
  size_t compiles = 0, links = 0;
  const std::regex compile(R"(^c\+\+ .* -x c\+\+ -c (k[0-9a-f]{32})\.cpp -o \1\.o$)");
  const std::regex link(R"(^c\+\+ -shared (k[0-9a-f]{32})\.o -o \1\.so$)");
  for (const std::string& line : runs[0]) {
    compiles += std::regex_match(line, compile);
    links += std::regex_match(line, link);
  }
  EXPECT_GE(compiles, 1u);
  EXPECT_EQ(compiles, links);
  EXPECT_EQ(compiles + links, runs[0].size());
  // The stand-in named by a path relative to where kiln runs (not to the private directory the
  // compiler runs in).
  fs::remove(log);
  int rc = 0;
  nlohmann::json j = run_json("-C " + sh_quote(dir) + " " + device_env("cuda-emu") +
                                  " KILN_CACHE_DIR= KILN_EMU_CXX=" + sh_quote("./ccache c++"),
                              kWorkload, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(j["result"].get<double>(), expected);
  const std::string logged = slurp(log);
  EXPECT_EQ(static_cast<size_t>(std::count(logged.begin(), logged.end(), '\n')), runs[0].size());
  fs::remove_all(dir);
}
