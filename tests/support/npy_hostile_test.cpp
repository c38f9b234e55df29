// The .npy reader on hostile paths and files (issue 30): a FIFO or a device is refused before
// anything blocks on it, absurd headers and shapes are clean errors naming the file, and the
// fuzzer's corpus (tests/fuzzers/corpus/npy, seeds and the regressions fuzzing found) replays
// without a crash.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "support/error.hpp"
#include "support/npy.hpp"

namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A version 1.0 (or 2.0, for longer headers) .npy file with `dict` as its header.
std::string npy(const std::string& dict, const std::string& data = "") {
  const std::string header = dict + "\n";
  const bool v2 = header.size() > 0xffff;
  std::string out = std::string("\x93") + "NUMPY" + (v2 ? '\x02' : '\x01') + '\0';
  for (int i = 0; i < (v2 ? 4 : 2); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string dict(const std::string& shape, const std::string& descr = "<f8") {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

// The message of the kiln::Error both read_npy_header and map_npy throw for `path` (they must
// agree), or a note that there was none.
std::string load_error(const std::string& path) {
  const std::string a = kt::error_of([&] { kiln::read_npy_header(path); });
  const std::string b = kt::error_of([&] { kiln::map_npy(path); });
  EXPECT_EQ(a, b) << path;
  return a;
}

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "\"" << (text) << "\" lacks \"" << (part) << "\""

class NpyHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kt::tmpdir() + "/npy_hostile_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// Finding 12: open() on a FIFO waited for a writer forever, before the regular-file check.
TEST_F(NpyHostile, FifoIsRefusedWithoutBlocking) {
  const std::string p = path("pipe.npy");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << std::strerror(errno);
  auto result = std::async(std::launch::async, [&] { return load_error(p); });
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Unblock the reader (a writer arrives) so that the test can end, then fail.
    const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    result.wait();
    FAIL() << "load_npy blocked on a FIFO";
  }
  const std::string msg = result.get();
  EXPECT_CONTAINS(msg, "load_npy('" + p + "')");
  EXPECT_CONTAINS(msg, "not a regular file (it is a FIFO)");
}

TEST_F(NpyHostile, DirectoriesAndDevicesAreNamed) {
  EXPECT_CONTAINS(load_error(dir_),
                  "load_npy('" + dir_ + "'): not a regular file (it is a directory)");
  EXPECT_CONTAINS(load_error("/dev/zero"),
                  "load_npy('/dev/zero'): not a regular file (it is a character device)");
  EXPECT_CONTAINS(load_error("/dev/null"), "character device");
  const std::string missing = path("missing.npy");
  EXPECT_CONTAINS(load_error(missing),
                  "load_npy('" + missing + "'): cannot open file: No such file or directory");
  const std::string under_file = path("file.npy") + "/x.npy";
  write_file(path("file.npy"), npy(dict("(1,)"), std::string(8, '\0')));
  EXPECT_CONTAINS(load_error(under_file), "Not a directory");
}

TEST_F(NpyHostile, SymlinkToARegularFileIsRead) {
  write_file(path("a.npy"), npy(dict("(2,)"), std::string(16, '\0')));
  fs::create_symlink(path("a.npy"), path("link.npy"));
  EXPECT_EQ(kiln::map_npy(path("link.npy")).info.shape, (std::vector<int64_t>{2}));
  fs::create_symlink("/dev/zero", path("dev.npy"));
  EXPECT_CONTAINS(load_error(path("dev.npy")), "character device");
}

// Shapes whose element or byte count does not fit int64 are errors naming the file, also when
// another dimension is 0 (NumPy refuses those too: "array is too big").
TEST_F(NpyHostile, ShapeProductsThatOverflowAreRefused) {
  const std::string p = path("big.npy");
  for (const std::string& shape :
       {std::string("(3037000500, 3037000500)"), std::string("(2305843009213693952,)"),
        std::string("(1152921504606846976, 2)"), std::string("(0, 4611686018427387904, 4)"),
        std::string("(4611686018427387904, 4611686018427387904, 0)"),
        std::string("(9223372036854775807, 9223372036854775807)")}) {
    SCOPED_TRACE(shape);
    write_file(p, npy(dict(shape)));
    const std::string msg = load_error(p);
    EXPECT_CONTAINS(msg, "load_npy('" + p + "')");
    EXPECT_CONTAINS(msg, "element count overflow");
  }
  // 2**60 one-byte items fit: the file is merely too short.
  write_file(p, npy(dict("(1152921504606846976,)", "|b1")));
  EXPECT_CONTAINS(load_error(p), "truncated: expected 1152921504606846976 data bytes, found 0");
  // A zero dimension with small others is an empty array.
  write_file(p, npy(dict("(0, 1000000, 1000000)")));
  EXPECT_EQ(kiln::map_npy(p).nbytes, 0u);
}

TEST_F(NpyHostile, AbsurdHeaderLengthsAreRefused) {
  const std::string p = path("header.npy");
  // A valid dict padded to 2 MiB: more than the reader parses.
  std::string d = dict("(1,)");
  d.append((size_t{2} << 20) - d.size(), ' ');
  write_file(p, npy(d, std::string(8, '\0')));
  EXPECT_CONTAINS(load_error(p), "load_npy('" + p +
                                     "'): corrupt header: implausible header "
                                     "length 2097153 bytes (at most 1048576 are read)");
  // A header length beyond the end of the file is refused before any allocation.
  std::string bytes = npy(dict("()"), std::string(8, '\0'));
  bytes[6] = '\x03';  // version 3.0: a 4-byte length
  bytes.insert(10, 2, '\0');
  bytes[8] = bytes[9] = bytes[10] = bytes[11] = '\xff';
  write_file(p, bytes);
  EXPECT_CONTAINS(load_error(p), "truncated header: expected 4294967295 header bytes");
  // 300000 dimensions of 1 (a 1 MiB header at most): parsed, bounded.
  std::string shape = "(";
  for (int i = 0; i < 300000; ++i) shape += "1,";
  shape += ")";
  write_file(p, npy(dict(shape), std::string(8, '\0')));
  EXPECT_EQ(kiln::read_npy_header(p).shape.size(), 300000u);
}

// Every way of being a bad file gives an Error that names load_npy, the path and a reason.
TEST_F(NpyHostile, EveryErrorNamesThePathAndTheReason) {
  const std::string p = path("bad.npy");
  const std::vector<std::string> files = {
      "",
      "\x93NUMPY",
      std::string("\x93NUMPY\x01\x00\x05\x00{}   ", 15),
      npy("{'descr': '<f8'}"),
      npy(dict("(1,)", "<f7")),
      npy(dict("((((1,),),),)")),
      npy(dict("(1,)"), "1234"),
      npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'shape': (2,)}"),
      npy(dict("(1,)") + "\x01"),
  };
  for (const std::string& f : files) {
    write_file(p, f);
    const std::string msg = load_error(p);
    SCOPED_TRACE(msg);
    EXPECT_EQ(msg.rfind("load_npy('" + p + "'): ", 0), 0u);
    EXPECT_GT(msg.size(), ("load_npy('" + p + "'): ").size() + 10);
    EXPECT_LT(msg.size(), 600u);
  }
}

// Replays the fuzzer's corpus: each input is read, or refused with an Error naming the path.
TEST_F(NpyHostile, FuzzCorpusReplays) {
  const fs::path corpus = fs::path(kt::source_dir()) / "tests/fuzzers/corpus/npy";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  int files = 0, accepted = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    const std::string p = e.path().string();
    SCOPED_TRACE(p);
    ++files;
    try {
      const kiln::MappedNpy m = kiln::map_npy(p);
      ++accepted;
      EXPECT_LE(m.info.data_offset + m.nbytes, fs::file_size(p));
    } catch (const kiln::Error& err) {
      EXPECT_CONTAINS(err.what(), "load_npy('" + p + "')");
    }
  }
  EXPECT_GE(files, 10);
  EXPECT_GE(accepted, 5);
}

}  // namespace
