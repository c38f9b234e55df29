// Tests for support/npy: reference files are written by the oracle's NumPy (kt::python()), and
// files written by save_npy are checked by NumPy itself.
#include "support/npy.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "support/error.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A raw .npy file: magic, version major.0, little-endian header length, `header` and `data`
// (no alignment padding, so headers can be written exactly as a test wants them).
std::string MakeNpy(int major, const std::string& header, const std::string& data, int minor = 0) {
  std::string out = std::string("\x93") + "NUMPY";
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  const size_t len_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < len_bytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// Copies the mapped elements out as T values.
template <class T>
std::vector<T> Values(const MappedNpy& m) {
  EXPECT_EQ(m.nbytes % sizeof(T), 0u);
  std::vector<T> v(m.nbytes / sizeof(T));
  if (m.nbytes != 0) std::memcpy(v.data(), m.data, m.nbytes);
  return v;
}

// Success iff `f` throws kiln::Error whose message contains every string in `parts`.
template <class F>
::testing::AssertionResult ThrowsError(F f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << p << "\"";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no kiln::Error was thrown";
}

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln_npy_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  // Runs `body` with Debian's Python and NumPy; `np`, `sys`, `d` (this test's directory, with a
  // trailing slash) and `check(cond, what)` (exit 1 unless cond) are predefined. Returns the
  // system() status, 0 on success.
  int Python(const std::string& body) {
    const std::string script = Path("script.py");
    WriteFile(script, "import sys\nimport numpy as np\nd = '" + dir_ +
                          "/'\n"
                          "def check(cond, what):\n"
                          "    if not cond:\n"
                          "        print('python check failed:', what, file=sys.stderr)\n"
                          "        sys.exit(1)\n" +
                          body + "\n");
    return std::system((kt::python() + " " + script).c_str());
  }

  std::string dir_;
};

// ---------------------------------------------------------------------------------------------
// Loading files written by NumPy

TEST_F(NpyTest, LoadsFloat64Matrix) {
  ASSERT_EQ(Python("a = (np.arange(12, dtype=np.float64) * 0.25 - 1.0).reshape(3, 4)\n"
                   "a[2, 3] = 1e300\n"
                   "np.save(d + 'a.npy', a)"),
            0);
  const std::string p = Path("a.npy");
  const NpyInfo h = read_npy_header(p);
  EXPECT_EQ(h.descr, "<f8");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(h.fortran_order);
  EXPECT_EQ(h.data_offset, 128u);  // NumPy pads the 10-byte prefix + header to 128
  EXPECT_EQ(fs::file_size(p), 128u + 96u);

  const MappedNpy m = map_npy(p);
  EXPECT_EQ(m.info.descr, "<f8");
  EXPECT_EQ(m.info.shape, h.shape);
  EXPECT_EQ(m.info.data_offset, h.data_offset);
  ASSERT_EQ(m.nbytes, 96u);
  ASSERT_NE(m.data, nullptr);
  EXPECT_NE(m.owner, nullptr);
  std::vector<double> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(i * 0.25 - 1.0);
  expected[11] = 1e300;
  EXPECT_EQ(Values<double>(m), expected);
}

TEST_F(NpyTest, LoadsInt32Vector) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.array([-2**31, -1, 0, 7, 2**31 - 1], dtype=np.int32))"),
            0);
  const MappedNpy m = map_npy(Path("a.npy"));
  EXPECT_EQ(m.info.descr, "<i4");
  EXPECT_EQ(m.info.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(m.info.data_offset % 64, 0u);
  EXPECT_EQ(Values<int32_t>(m), (std::vector<int32_t>{INT32_MIN, -1, 0, 7, INT32_MAX}));
}

TEST_F(NpyTest, LoadsBoolMatrix) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.array([[True, False], [False, True]]))"), 0);
  const MappedNpy m = map_npy(Path("a.npy"));
  EXPECT_EQ(m.info.descr, "|b1");
  EXPECT_EQ(m.info.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<uint8_t>(m), (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST_F(NpyTest, LoadsFloat32Scalar) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.float32(3.5))"), 0);
  const MappedNpy m = map_npy(Path("a.npy"));
  EXPECT_EQ(m.info.descr, "<f4");
  EXPECT_TRUE(m.info.shape.empty());
  EXPECT_EQ(Values<float>(m), (std::vector<float>{3.5f}));
}

TEST_F(NpyTest, LoadsEmptyArray) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.zeros((0, 3)))"), 0);
  const MappedNpy m = map_npy(Path("a.npy"));
  EXPECT_EQ(m.info.descr, "<f8");
  EXPECT_EQ(m.info.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(m.nbytes, 0u);
  EXPECT_EQ(m.data, nullptr);
  EXPECT_EQ(m.owner, nullptr);
  EXPECT_EQ(read_npy_header(Path("a.npy")).shape, m.info.shape);
}

TEST_F(NpyTest, LoadsInt64Matrix) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.array([[2**62, -2**62, 1], [-1, 0, 2**63 - 1]], "
                   "dtype=np.int64))"),
            0);
  const MappedNpy m = map_npy(Path("a.npy"));
  EXPECT_EQ(m.info.descr, "<i8");
  EXPECT_EQ(m.info.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>(m),
            (std::vector<int64_t>{int64_t{1} << 62, -(int64_t{1} << 62), 1, -1, 0, INT64_MAX}));
}

TEST_F(NpyTest, ReturnsOtherNumericDescrsAsIs) {
  ASSERT_EQ(Python("np.save(d + 'u2.npy', np.array([1, 2, 65535, 0], dtype='<u2'))\n"
                   "np.save(d + 'c16.npy', np.array([1 + 2j, -3j]))\n"
                   "np.save(d + 'f2.npy', np.zeros(3, dtype=np.float16))\n"
                   "np.save(d + 'i1.npy', np.array([-128, 127], dtype=np.int8))"),
            0);
  const MappedNpy u2 = map_npy(Path("u2.npy"));
  EXPECT_EQ(u2.info.descr, "<u2");
  EXPECT_EQ(Values<uint16_t>(u2), (std::vector<uint16_t>{1, 2, 65535, 0}));
  const MappedNpy c16 = map_npy(Path("c16.npy"));
  EXPECT_EQ(c16.info.descr, "<c16");
  EXPECT_EQ(Values<double>(c16), (std::vector<double>{1, 2, 0, -3}));
  const MappedNpy f2 = map_npy(Path("f2.npy"));
  EXPECT_EQ(f2.info.descr, "<f2");
  EXPECT_EQ(f2.nbytes, 6u);
  const MappedNpy i1 = map_npy(Path("i1.npy"));
  EXPECT_EQ(i1.info.descr, "|i1");
  EXPECT_EQ(Values<int8_t>(i1), (std::vector<int8_t>{-128, 127}));
}

TEST_F(NpyTest, LoadsFormatVersions2And3) {
  ASSERT_EQ(Python("a = np.arange(6, dtype=np.int32).reshape(2, 3)\n"
                   "for v in (2, 3):\n"
                   "    with open(d + 'v%d.npy' % v, 'wb') as f:\n"
                   "        np.lib.format.write_array(f, a, version=(v, 0))"),
            0);
  for (int v : {2, 3}) {
    SCOPED_TRACE("version " + std::to_string(v));
    const std::string p = Path("v" + std::to_string(v) + ".npy");
    ASSERT_EQ(ReadFile(p).at(6), static_cast<char>(v));  // really a version v file
    const MappedNpy m = map_npy(p);
    EXPECT_EQ(m.info.descr, "<i4");
    EXPECT_EQ(m.info.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(m.info.data_offset % 64, 0u);
    EXPECT_EQ(Values<int32_t>(m), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  }
}

TEST_F(NpyTest, ParsesHeaderDictVariants) {
  const std::string data("\x01\x00\x02\x00\x03\x00\xfc\xff\x05\x00\x06\x00", 12);  // 6 x <i2
  const std::vector<std::string> headers = {
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i2'}",
      "{ \"descr\" : \"<i2\" ,\n 'fortran_order':False,'shape':(2,3,),}   \n",
      "{'fortran_order': False, 'descr': '<i2', 'shape': (2L, 3L), }          \n",
      "\t{'descr':'<i2','shape':( 2 ,\t3 ),'fortran_order':False}\n",
      "{'descr': '<i2', 'fortran_order': False, 'shape': ((2), +3,), }\n",
  };
  for (int major : {1, 2, 3}) {
    for (size_t i = 0; i < headers.size(); ++i) {
      SCOPED_TRACE("version " + std::to_string(major) + ", header: " + headers[i]);
      const std::string p = Path("h.npy");
      WriteFile(p, MakeNpy(major, headers[i], data));
      const NpyInfo h = read_npy_header(p);
      EXPECT_EQ(h.descr, "<i2");
      EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
      EXPECT_FALSE(h.fortran_order);
      EXPECT_EQ(h.data_offset, (major == 1 ? 10 : 12) + headers[i].size());
      const MappedNpy m = map_npy(p);
      EXPECT_EQ(Values<int16_t>(m), (std::vector<int16_t>{1, 2, 3, -4, 5, 6}));
    }
  }
}

TEST_F(NpyTest, ParsesShapeTuples) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> cases = {
      {"()", {}},         {"( )", {}},
      {"(5,)", {5}},      {"( 5 , )", {5}},
      {"(3, 4)", {3, 4}}, {"(1,2,3,)", {1, 2, 3}},
      {"(0, 7)", {0, 7}}, {"(7, 0, 9)", {7, 0, 9}},
  };
  for (const auto& [text, shape] : cases) {
    SCOPED_TRACE("shape " + text);
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const std::string p = Path("s.npy");
    WriteFile(p, MakeNpy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': " + text + "}\n",
                         std::string(static_cast<size_t>(count), '\x07')));
    const MappedNpy m = map_npy(p);
    EXPECT_EQ(m.info.shape, shape);
    EXPECT_EQ(m.nbytes, static_cast<size_t>(count));
    EXPECT_EQ(Values<uint8_t>(m), std::vector<uint8_t>(static_cast<size_t>(count), 7));
  }
}

TEST_F(NpyTest, IgnoresBytesAfterTheData) {
  const std::string p = Path("t.npy");
  WriteFile(p, MakeNpy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (1,)}\n",
                       std::string("\x05\x00trailing", 10)));
  const MappedNpy m = map_npy(p);
  EXPECT_EQ(m.nbytes, 2u);
  EXPECT_EQ(Values<int16_t>(m), (std::vector<int16_t>{5}));
}

// ---------------------------------------------------------------------------------------------
// Memory mapping

TEST_F(NpyTest, MappingOutlivesCopiesAndTheFile) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.arange(1000, dtype=np.int64))"), 0);
  MappedNpy copy;
  {
    MappedNpy m = map_npy(Path("a.npy"));
    copy = m;
  }
  fs::remove(Path("a.npy"));  // a private mapping stays readable after the file is unlinked
  std::vector<int64_t> expected(1000);
  for (int i = 0; i < 1000; ++i) expected[i] = i;
  EXPECT_EQ(Values<int64_t>(copy), expected);
}

#ifdef __linux__
// Number of mappings of `path` listed in /proc/self/maps.
int CountMappings(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(path) != std::string::npos;
  return n;
}

TEST_F(NpyTest, ReleasingTheOwnerUnmaps) {
  ASSERT_EQ(Python("np.save(d + 'mapped.npy', np.ones(100))"), 0);
  const std::string p = Path("mapped.npy");
  EXPECT_EQ(CountMappings(p), 0);
  MappedNpy m = map_npy(p);
  EXPECT_EQ(CountMappings(p), 1);
  std::shared_ptr<void> extra = m.owner;
  m.owner.reset();
  EXPECT_EQ(CountMappings(p), 1);  // still owned by `extra`
  extra.reset();
  EXPECT_EQ(CountMappings(p), 0);
}
#endif

// ---------------------------------------------------------------------------------------------
// Saving

TEST_F(NpyTest, SaveRoundTripsThroughNumpyByteForByte) {
  std::vector<double> f8(12);
  for (int i = 0; i < 12; ++i) f8[i] = i * 0.5 - 2.0;
  f8[5] = 1e-300;
  const std::vector<int32_t> i4 = {INT32_MIN, -1, 0, 42, INT32_MAX};
  const uint8_t b1[] = {1, 0, 0, 1};
  const float f4 = 3.5f;
  const std::vector<int64_t> i8 = {int64_t{1} << 62, -3, 0, 1, -(int64_t{1} << 40), INT64_MAX};
  save_npy(Path("f8.npy"), "<f8", {3, 4}, f8.data(), f8.size() * sizeof(double));
  save_npy(Path("i4.npy"), "<i4", {5}, i4.data(), i4.size() * sizeof(int32_t));
  save_npy(Path("b1.npy"), "|b1", {2, 2}, b1, sizeof b1);
  save_npy(Path("f4.npy"), "<f4", {}, &f4, sizeof f4);
  save_npy(Path("empty.npy"), "<f8", {0, 3}, nullptr, 0);
  save_npy(Path("i8.npy"), "<i8", {2, 3}, i8.data(), i8.size() * sizeof(int64_t));

  // np.load must give the same dtype, shape and values, and np.save of those values the same bytes.
  EXPECT_EQ(Python(R"PY(
import io
def same(name, expected, dtype):
    expected = np.asarray(expected, dtype=dtype)
    a = np.load(d + name)
    check(a.dtype == expected.dtype, name + ' dtype ' + str(a.dtype))
    check(a.shape == expected.shape, name + ' shape ' + str(a.shape))
    check(np.array_equal(a, expected), name + ' values ' + repr(a))
    buf = io.BytesIO()
    np.save(buf, expected)
    check(buf.getvalue() == open(d + name, 'rb').read(), name + ' bytes differ from np.save')
f8 = np.arange(12) * 0.5 - 2.0
f8[5] = 1e-300
same('f8.npy', f8.reshape(3, 4), '<f8')
same('i4.npy', [-2**31, -1, 0, 42, 2**31 - 1], '<i4')
same('b1.npy', [[True, False], [False, True]], '|b1')
same('f4.npy', 3.5, '<f4')
same('empty.npy', np.zeros((0, 3)), '<f8')
same('i8.npy', [[2**62, -3, 0], [1, -2**40, 2**63 - 1]], '<i8')
)PY"),
            0);
}

// Header lengths covering every residue modulo 64, including the one where NumPy pads with a full
// 64 spaces rather than none: (0, 1, ..., 1, 10**j) with k ones and j = 0, 1, 2.
TEST_F(NpyTest, SavePadsHeadersLikeNumpy) {
  for (int k = 0; k <= 25; ++k) {
    for (int j = 0; j <= 2; ++j) {
      std::vector<int64_t> shape = {0};
      shape.insert(shape.end(), k, 1);
      shape.push_back(j == 0 ? 1 : j == 1 ? 10 : 100);
      const std::string p = Path("pad_" + std::to_string(k) + "_" + std::to_string(j) + ".npy");
      save_npy(p, "<f8", shape, nullptr, 0);
      const std::string bytes = ReadFile(p);
      const NpyInfo h = read_npy_header(p);
      EXPECT_EQ(h.shape, shape);
      EXPECT_EQ(h.data_offset % 64, 0u);
      EXPECT_EQ(h.data_offset, bytes.size());
      EXPECT_EQ(bytes.at(6), '\x01');
      EXPECT_EQ(bytes.back(), '\n');
    }
  }
  EXPECT_EQ(Python(R"PY(
import io
for k in range(26):
    for j in range(3):
        shape = (0,) + (1,) * k + (10**j,)
        buf = io.BytesIO()
        np.save(buf, np.zeros(shape))
        check(buf.getvalue() == open(d + 'pad_%d_%d.npy' % (k, j), 'rb').read(), str(shape))
)PY"),
            0);
}

TEST_F(NpyTest, SaveUsesVersion2ForHugeHeaders) {
  const std::vector<int64_t> shape(22000, 1);  // "1, " x 22000 > 65535 header bytes
  const double value = 42.0;
  const std::string p = Path("big.npy");
  save_npy(p, "<f8", shape, &value, sizeof value);
  const std::string bytes = ReadFile(p);
  EXPECT_EQ(bytes.at(6), '\x02');
  EXPECT_EQ(bytes.at(7), '\x00');
  const MappedNpy m = map_npy(p);
  EXPECT_EQ(m.info.shape, shape);
  EXPECT_GT(m.info.data_offset, 65535u);
  EXPECT_EQ(m.info.data_offset % 64, 0u);
  EXPECT_EQ(Values<double>(m), (std::vector<double>{42.0}));
}

TEST_F(NpyTest, SaveRejectsBadArguments) {
  const std::string p = Path("x.npy");
  const double v[2] = {1, 2};
  EXPECT_TRUE(ThrowsError([&] { save_npy(p, "<f8", {3}, v, sizeof v); },
                          {"save_npy", p, "mismatch", "24", "16"}));
  EXPECT_TRUE(ThrowsError([&] { save_npy(p, "<f8", {-2}, v, sizeof v); },
                          {"save_npy", p, "negative dimension -2"}));
  EXPECT_TRUE(
      ThrowsError([&] { save_npy(p, ">f8", {2}, v, sizeof v); }, {"save_npy", p, "big-endian"}));
  EXPECT_TRUE(ThrowsError([&] { save_npy(p, "|O", {2}, v, sizeof v); },
                          {"save_npy", p, "not a numeric type"}));
  EXPECT_TRUE(
      ThrowsError([&] { save_npy(p, "<f8", {2}, nullptr, sizeof v); }, {"save_npy", p, "null"}));
  EXPECT_TRUE(ThrowsError(
      [&] {
        save_npy(p, "<f8", {int64_t{1} << 32, int64_t{1} << 32}, v, sizeof v);
      },
      {"save_npy", p, "overflow"}));
  EXPECT_FALSE(fs::exists(p));  // nothing is written for invalid arguments

  const std::string bad_dir = Path("no/such/dir/x.npy");
  EXPECT_TRUE(ThrowsError([&] { save_npy(bad_dir, "<f8", {2}, v, sizeof v); },
                          {"save_npy", bad_dir, "No such file or directory"}));
}

// ---------------------------------------------------------------------------------------------
// Errors when loading

// Both entry points must reject the file at `p` with a message containing `word` and the path.
#define EXPECT_LOAD_ERROR(p, word)                                                    \
  do {                                                                                \
    EXPECT_TRUE(ThrowsError([&] { read_npy_header(p); }, {"load_npy", (p), (word)})); \
    EXPECT_TRUE(ThrowsError([&] { map_npy(p); }, {"load_npy", (p), (word)}));         \
  } while (0)

TEST_F(NpyTest, MissingFile) {
  const std::string p = Path("missing.npy");
  EXPECT_LOAD_ERROR(p, "No such file or directory");
  EXPECT_LOAD_ERROR(p, "cannot open");
}

TEST_F(NpyTest, DirectoryIsNotAFile) { EXPECT_LOAD_ERROR(dir_, "not a regular file"); }

TEST_F(NpyTest, BadMagic) {
  const std::string p = Path("zip.npy");
  WriteFile(p, "PK\x03\x04 this is not an npy file at all");
  EXPECT_LOAD_ERROR(p, "bad magic");
  WriteFile(p, "");
  EXPECT_LOAD_ERROR(p, "not an .npy file");
  WriteFile(p, "\x93NUM");
  EXPECT_LOAD_ERROR(p, "bad magic");
}

TEST_F(NpyTest, UnsupportedVersion) {
  const std::string p = Path("v.npy");
  const std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n";
  WriteFile(p, MakeNpy(4, header, std::string(8, '\0')));
  EXPECT_LOAD_ERROR(p, "unsupported .npy format version 4.0");
  WriteFile(p, MakeNpy(1, header, std::string(8, '\0'), 1));
  EXPECT_LOAD_ERROR(p, "version 1.1");
  WriteFile(p, MakeNpy(0, header, std::string(8, '\0')));
  EXPECT_LOAD_ERROR(p, "version 0.0");
}

TEST_F(NpyTest, TruncatedData) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.ones((3, 4)))"), 0);
  const std::string p = Path("a.npy");
  fs::resize_file(p, fs::file_size(p) - 8);
  EXPECT_LOAD_ERROR(p, "truncated: expected 96 data bytes, found 88");
}

TEST_F(NpyTest, TruncatedHeader) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.ones((3, 4)))"), 0);
  const std::string full = ReadFile(Path("a.npy"));
  const std::string p = Path("cut.npy");
  for (size_t len : {7, 9, 50, 127}) {
    SCOPED_TRACE("length " + std::to_string(len));
    WriteFile(p, full.substr(0, len));
    EXPECT_LOAD_ERROR(p, "truncated header");
  }
}

TEST_F(NpyTest, EveryTruncationIsRejected) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.arange(5, dtype=np.int16))"), 0);
  const std::string full = ReadFile(Path("a.npy"));
  const std::string p = Path("cut.npy");
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("length " + std::to_string(len));
    WriteFile(p, full.substr(0, len));
    EXPECT_THROW(read_npy_header(p), Error);
    EXPECT_THROW(map_npy(p), Error);
  }
}

TEST_F(NpyTest, CorruptHeaders) {
  const std::string ok_descr = "'descr': '<f8', ";
  const std::string ok_order = "'fortran_order': False, ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + ok_descr + ok_order + "}", "missing the key 'shape'"},
      {"{" + ok_order + "'shape': (2,)}", "missing the key 'descr'"},
      {"{" + ok_descr + ok_order + "'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{" + ok_descr + ok_descr + ok_order + "'shape': (2,)}", "duplicate key 'descr'"},
      {"{'descr': '<f8, 'fortran_order': False, 'shape': (2,)}", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (2,}", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (2,)", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (2,)} junk", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (,)}", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (2 3)}", "malformed header dict"},
      {"{" + ok_descr + "'fortran_order': Flase, 'shape': (2,)}", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': (2,), 'x", "malformed header dict"},
      {"{" + ok_descr + std::string("\0", 1) + ok_order + "'shape': (2,)}", "malformed"},
      {"{" + ok_descr + ok_order + "'shape': (2,), 5: 1}", "malformed header dict"},
      {"not a dict", "malformed header dict"},
      {"", "malformed header dict"},
      {"{" + ok_descr + ok_order + "'shape': 2}", "tuple of integers"},
      {"{" + ok_descr + ok_order + "'shape': (2)}", "tuple of integers"},
      {"{" + ok_descr + ok_order + "'shape': [2]}", "tuple of integers"},
      {"{" + ok_descr + ok_order + "'shape': (2, 'a')}", "tuple of integers"},
      {"{" + ok_descr + "'fortran_order': 0, 'shape': (2,)}", "True or False"},
      {"{" + ok_descr + "'fortran_order': True, 'shape': (2,)}", "Fortran-ordered"},
      {"{" + ok_descr + ok_order + "'shape': (-2,)}", "negative dimension -2"},
      {"{" + ok_descr + ok_order + "'shape': (99999999999999999999,)}", "64 bits"},
      {"{" + ok_descr + ok_order + "'shape': (4294967296, 4294967296)}", "overflow"},
      {"{" + ok_descr + ok_order + "'shape': (4611686018427387904,)}", "overflow"},
      {"{'descr': '|O', " + ok_order + "'shape': (2,)}", "not a numeric type"},
      {"{'descr': '<U5', " + ok_order + "'shape': (2,)}", "not a numeric type"},
      {"{'descr': '<M8[ns]', " + ok_order + "'shape': (2,)}", "not a numeric type"},
      {"{'descr': [('a', '<f8')], " + ok_order + "'shape': (2,)}", "structured"},
      {"{'descr': '>f8', " + ok_order + "'shape': (2,)}", "big-endian"},
      {"{'descr': '<f3', " + ok_order + "'shape': (2,)}", "invalid item size"},
      {"{'descr': 'f8', " + ok_order + "'shape': (2,)}", "unsupported dtype descriptor"},
      {"{'descr': 8, " + ok_order + "'shape': (2,)}", "must be a dtype string"},
      {"{'descr': " + std::string(1000, '(') + "}", "nested"},
  };
  const std::string p = Path("corrupt.npy");
  for (const auto& [header, word] : cases) {
    SCOPED_TRACE("header: " + header);
    WriteFile(p, MakeNpy(1, header + "\n", std::string(16, '\0')));
    EXPECT_LOAD_ERROR(p, word);
  }
}

TEST_F(NpyTest, HeaderLengthBeyondTheFile) {
  const std::string p = Path("long.npy");
  std::string bytes = MakeNpy(2, "{'descr': '<f8', 'fortran_order': False, 'shape': ()}\n", "");
  bytes[8] = bytes[9] = bytes[10] = bytes[11] = '\xff';  // header length 4 GiB - 1
  WriteFile(p, bytes);
  EXPECT_LOAD_ERROR(p, "truncated header: expected 4294967295 header bytes");
}

TEST_F(NpyTest, RejectsFortranOrderFromNumpy) {
  ASSERT_EQ(Python("np.save(d + 'f.npy', np.asfortranarray(np.ones((2, 3))))"), 0);
  EXPECT_LOAD_ERROR(Path("f.npy"), "Fortran-ordered arrays are not supported");
}

TEST_F(NpyTest, RejectsBigEndianFromNumpy) {
  ASSERT_EQ(Python("np.save(d + 'be.npy', np.arange(3, dtype='>f8'))"), 0);
  EXPECT_LOAD_ERROR(Path("be.npy"), "big-endian dtype '>f8'");
}

TEST_F(NpyTest, RejectsObjectAndStructuredArraysFromNumpy) {
  ASSERT_EQ(Python("np.save(d + 'o.npy', np.array([1, None], dtype=object), allow_pickle=True)\n"
                   "np.save(d + 's.npy', np.zeros(2, dtype=[('a', '<f8'), ('b', '<i4')]))"),
            0);
  EXPECT_LOAD_ERROR(Path("o.npy"), "'|O' is not a numeric type");
  EXPECT_LOAD_ERROR(Path("s.npy"), "structured dtypes");
}

// Overwriting each header byte with characters that matter to the parser must give either a valid
// result that stays within the file or a kiln::Error; never a crash or an out-of-bounds read
// (the sanitizer build checks the latter).
TEST_F(NpyTest, CorruptedHeaderBytesNeverCrash) {
  ASSERT_EQ(Python("np.save(d + 'a.npy', np.ones((3, 4)))"), 0);
  const std::string full = ReadFile(Path("a.npy"));
  const size_t data_offset = read_npy_header(Path("a.npy")).data_offset;
  const std::string p = Path("mutated.npy");
  int accepted = 0;
  for (size_t pos = 0; pos < data_offset; ++pos) {
    for (char c : std::string("\0\xff(),'9-{}:[] \n", 16)) {
      std::string bytes = full;
      bytes[pos] = c;
      WriteFile(p, bytes);
      try {
        const MappedNpy m = map_npy(p);
        ++accepted;
        EXPECT_LE(m.info.data_offset + m.nbytes, bytes.size());
        unsigned sum = 0;  // touch every mapped byte
        for (size_t i = 0; i < m.nbytes; ++i) sum += static_cast<const unsigned char*>(m.data)[i];
        (void)sum;
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(accepted, 0);  // e.g. padding spaces replaced by '\n' are still valid
}

}  // namespace
}  // namespace kiln
