#include "support/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "support/error.hpp"

// Element data is used in place (mapped, not converted), which is only correct for little-endian
// ('<') descriptors on a little-endian host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "kiln's .npy support needs a little-endian host");

namespace kiln {
namespace {

constexpr char kMagic[] =
    "\x93"
    "NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kVersionLen = 2;  // major and minor version bytes after the magic
// NumPy aligns the start of the data to this many bytes.
constexpr size_t kAlign = 64;
// numpy.save leaves room after the header dict for the first axis to grow to this many digits, so
// that a file can be appended to in place. We do the same to write byte-identical files.
constexpr size_t kGrowthAxisMaxDigits = 21;
// Valid headers for the supported (numeric) dtypes are a few hundred bytes (save_npy writes about 3
// bytes per dimension: 66 KB for 22000 dimensions); anything much larger is corrupt and is
// rejected before allocating a buffer for it or parsing it (each parsed value costs ~100 bytes).
constexpr uint64_t kMaxHeaderLen = uint64_t{1} << 20;
// Bounds the recursion of the header parser on inputs like "((((((...".
constexpr int kMaxNesting = 16;

constexpr const char* kLoad = "load_npy";
constexpr const char* kSave = "save_npy";

[[noreturn]] void fail(const char* op, const std::string& path, const std::string& msg) {
  throw Error(std::string(op) + "('" + path + "'): " + msg);
}

std::string errno_str(int err) { return std::strerror(err); }

// Printable excerpt of (possibly binary) header text for error messages.
std::string excerpt(const std::string& text) {
  constexpr size_t kMaxShown = 120;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

// ---------------------------------------------------------------------------------------------
// dtype descriptors

// Item size in bytes of a numeric descriptor: a byte-order character, a type code among
// b (bool), i/u (signed/unsigned integer), f (float), c (complex), and the item size in decimal
// ("<f8", "|b1", "<c16"). Anything else (objects, strings, datetimes, big-endian multi-byte
// types, ...) is rejected.
size_t descr_itemsize(const std::string& descr, const char* op, const std::string& path) {
  const std::string quoted = "'" + excerpt(descr) + "'";
  const std::string expected =
      " (expected a little-endian numeric descriptor such as '<f8', '<i4' or '|b1')";
  if (descr.size() < 2 || std::string("<>|=").find(descr[0]) == std::string::npos)
    fail(op, path, "unsupported dtype descriptor " + quoted + expected);
  const char kind = descr[1];
  if (std::string("biufc").find(kind) == std::string::npos)
    fail(op, path,
         "dtype " + quoted +
             " is not a numeric type; only bool, integer, floating-point and complex arrays are "
             "supported");
  if (descr.size() < 3 || descr.size() > 4)
    fail(op, path, "unsupported dtype descriptor " + quoted + expected);
  size_t size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9')
      fail(op, path, "unsupported dtype descriptor " + quoted + expected);
    size = size * 10 + static_cast<size_t>(descr[i] - '0');
  }
  bool valid_size = false;
  switch (kind) {
    case 'b':
      valid_size = size == 1;
      break;
    case 'i':
    case 'u':
      valid_size = size == 1 || size == 2 || size == 4 || size == 8;
      break;
    case 'f':
      valid_size = size == 2 || size == 4 || size == 8 || size == 12 || size == 16;
      break;
    case 'c':
      valid_size = size == 8 || size == 16 || size == 24 || size == 32;
      break;
  }
  if (!valid_size) fail(op, path, "invalid item size in dtype descriptor " + quoted + expected);
  if (descr[0] == '>' && size > 1)
    fail(op, path,
         "big-endian dtype " + quoted + " is not supported (convert it with .astype('<" +
             descr.substr(1) + "') before saving)");
  return size;
}

// Element count of `shape` times `itemsize`, rejecting negative dimensions and overflow. As in
// NumPy, the product of the nonzero dimensions must fit even when another dimension is 0: a shape
// such as (0, 2**62, 2**62) is refused rather than made an empty array whose block grid overflows.
size_t array_nbytes(const std::vector<int64_t>& shape, size_t itemsize, const char* op,
                    const std::string& path) {
  // The byte count must fit both size_t and int64_t (Kiln indexes with int64_t).
  const uint64_t limit =
      std::min<uint64_t>(std::numeric_limits<size_t>::max(), std::numeric_limits<int64_t>::max());
  uint64_t nonzero = 1;  // product of the nonzero dimensions
  bool empty = false, overflow = false;
  for (int64_t d : shape) {
    if (d < 0)
      fail(op, path, "negative dimension " + std::to_string(d) + " in shape " + shape_str(shape));
    const uint64_t ud = static_cast<uint64_t>(d);
    if (ud == 0) {
      empty = true;
      continue;
    }
    if (nonzero > limit / ud) overflow = true;
    nonzero *= ud;  // wraps harmlessly when overflow is set: the result is discarded
  }
  if (overflow || (itemsize != 0 && nonzero > limit / itemsize))
    fail(op, path,
         "element count overflow: shape " + shape_str(shape) + " with " + std::to_string(itemsize) +
             "-byte items is too large (more than " + std::to_string(limit) + " bytes)");
  return empty ? 0 : static_cast<size_t>(nonzero * itemsize);
}

// ---------------------------------------------------------------------------------------------
// Header dict parser: the subset of Python literal syntax that headers use (dicts, tuples, lists,
// strings, integers, True/False/None). Lists are only accepted to report structured dtypes clearly.

struct PyValue {
  enum class Kind { None, Bool, Int, Str, Tuple, List, Dict };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::vector<std::string> keys;  // Dict keys, parallel to `items`
  std::vector<PyValue> items;     // Tuple/List elements or Dict values
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  // The whole header: one dict, then only whitespace (the padding).
  PyValue parse() {
    skip_ws();
    if (peek() != '{') error("'{' starting the header dict");
    PyValue v = value(0);
    skip_ws();
    if (pos_ != text_.size()) error("only padding after the header dict");
    return v;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }

  void skip_ws() {
    while (!at_end() && std::strchr(" \t\n\r\f\v", text_[pos_]) != nullptr && text_[pos_] != '\0')
      ++pos_;
  }

  [[noreturn]] void error(const std::string& expected) const {
    std::string found = at_end() ? "end of header" : "'" + excerpt(text_.substr(pos_, 1)) + "'";
    // The header without its padding, which is just noise in a message.
    const size_t end = text_.find_last_not_of(" \n");
    const std::string shown = end == std::string::npos ? "" : text_.substr(0, end + 1);
    fail(kLoad, path_,
         "malformed header dict: expected " + expected + " at byte " + std::to_string(pos_) +
             ", found " + found + " in header \"" + excerpt(shown) + "\"");
  }

  PyValue value(int depth) {
    if (depth > kMaxNesting) error("less deeply nested values");
    skip_ws();
    const char c = peek();
    if (c == '\'' || c == '"') {
      PyValue v;
      v.kind = PyValue::Kind::Str;
      v.s = string_literal();
      return v;
    }
    if (c == '(') return sequence(depth, ')');
    if (c == '[') return sequence(depth, ']');
    if (c == '{') return dict(depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      PyValue v;
      v.kind = PyValue::Kind::Int;
      v.i = integer();
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return name();
    error("a value");
  }

  std::string string_literal() {
    const char quote = text_[pos_++];
    std::string s;
    while (!at_end() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') ++pos_;  // keep the escaped character literally
      if (at_end()) break;
      s += text_[pos_++];
    }
    if (at_end()) error(std::string("closing ") + quote + " of string");
    ++pos_;
    return s;
  }

  int64_t integer() {
    bool negative = false;
    if (peek() == '-' || peek() == '+') negative = text_[pos_++] == '-';
    if (!(peek() >= '0' && peek() <= '9')) error("a digit");
    uint64_t v = 0;
    const uint64_t max = std::numeric_limits<int64_t>::max();
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (v > (max - digit) / 10) error("an integer that fits in 64 bits");
      v = v * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 long suffix, as in "(3L, 4L)"
    return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  }

  PyValue name() {
    const size_t start = pos_;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') ++pos_;
    const std::string word = text_.substr(start, pos_ - start);
    PyValue v;
    if (word == "True" || word == "False") {
      v.kind = PyValue::Kind::Bool;
      v.b = word == "True";
    } else if (word != "None") {
      pos_ = start;
      error("True, False, None, a number, a string, a tuple, a list or a dict");
    }
    return v;
  }

  // A tuple "(...)" or list "[...]", trailing comma allowed. As in Python, a parenthesized single
  // value without a comma, "(5)", is that value rather than a tuple.
  PyValue sequence(int depth, char close) {
    ++pos_;  // '(' or '['
    PyValue v;
    v.kind = close == ')' ? PyValue::Kind::Tuple : PyValue::Kind::List;
    bool saw_comma = false;
    skip_ws();
    while (peek() != close) {
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        saw_comma = true;
        ++pos_;
        skip_ws();
      } else if (peek() != close) {
        error(std::string("',' or '") + close + "'");
      }
    }
    ++pos_;
    if (close == ')' && v.items.size() == 1 && !saw_comma) return v.items[0];
    return v;
  }

  PyValue dict(int depth) {
    ++pos_;  // '{'
    PyValue v;
    v.kind = PyValue::Kind::Dict;
    skip_ws();
    while (peek() != '}') {
      if (peek() != '\'' && peek() != '"') error("a string key or '}'");
      std::string key = string_literal();
      if (std::find(v.keys.begin(), v.keys.end(), key) != v.keys.end())
        error("no duplicate key '" + excerpt(key) + "'");
      skip_ws();
      if (peek() != ':') error("':'");
      ++pos_;
      v.keys.push_back(std::move(key));
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != '}') {
        error("',' or '}'");
      }
    }
    ++pos_;
    return v;
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Checks the parsed header dict and extracts descr, fortran_order and shape.
NpyInfo interpret_header(const PyValue& dict, const std::string& path) {
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t k = 0; k < dict.keys.size(); ++k) {
    const std::string& key = dict.keys[k];
    if (key == "descr") {
      descr = &dict.items[k];
    } else if (key == "fortran_order") {
      fortran = &dict.items[k];
    } else if (key == "shape") {
      shape = &dict.items[k];
    } else {
      fail(kLoad, path,
           "unexpected key '" + excerpt(key) +
               "' in header dict (expected exactly 'descr', 'fortran_order' and 'shape')");
    }
  }
  for (auto [name, v] : {std::make_pair("descr", descr), std::make_pair("fortran_order", fortran),
                         std::make_pair("shape", shape)}) {
    if (v == nullptr)
      fail(kLoad, path, std::string("header dict is missing the key '") + name + "'");
  }

  NpyInfo info{};
  if (descr->kind == PyValue::Kind::List)
    fail(kLoad, path, "structured dtypes (a list 'descr') are not supported, only numeric arrays");
  if (descr->kind != PyValue::Kind::Str)
    fail(kLoad, path, "'descr' in the header must be a dtype string such as '<f8'");
  info.descr = descr->s;

  if (fortran->kind != PyValue::Kind::Bool)
    fail(kLoad, path, "'fortran_order' in the header must be True or False");
  if (fortran->b)
    fail(kLoad, path,
         "Fortran-ordered arrays are not supported (fortran_order is True); save a C-ordered copy "
         "made with numpy.ascontiguousarray");
  info.fortran_order = false;

  if (shape->kind != PyValue::Kind::Tuple)
    fail(kLoad, path, "'shape' in the header must be a tuple of integers such as (3, 4)");
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::Kind::Int)
      fail(kLoad, path, "'shape' in the header must be a tuple of integers such as (3, 4)");
    info.shape.push_back(d.i);
  }
  return info;
}

// ---------------------------------------------------------------------------------------------
// Reading

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads up to `n` bytes at `offset`; returns fewer only at end of file.
size_t read_at(int fd, uint64_t offset, void* buf, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(kLoad, path, "read error: " + errno_str(errno));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

struct OpenedNpy {
  NpyInfo info;
  size_t nbytes;
};

// Rejects anything but a regular file, saying what it is instead.
void check_regular(const struct stat& st, const std::string& path) {
  if (S_ISREG(st.st_mode)) return;
  const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                                            : "not a file";
  fail(kLoad, path, std::string("not a regular file (it is ") + what + ")");
}

// Reads and validates the header of the open file `fd`, including that the data is all there.
OpenedNpy read_header(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) fail(kLoad, path, "cannot stat file: " + errno_str(errno));
  check_regular(st, path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  // Magic, version, and a header length of 2 (version 1.0) or 4 (versions 2.0 and 3.0) bytes.
  unsigned char prefix[kMagicLen + kVersionLen + 4];
  const size_t got = read_at(fd, 0, prefix, sizeof prefix, path);
  if (got < kMagicLen || std::memcmp(prefix, kMagic, kMagicLen) != 0)
    fail(kLoad, path, "not an .npy file (bad magic: it does not start with \"\\x93NUMPY\")");
  if (got < kMagicLen + kVersionLen)
    fail(kLoad, path, "truncated header: the file is only " + std::to_string(got) + " bytes long");
  const int major = prefix[kMagicLen];
  const int minor = prefix[kMagicLen + 1];
  if (major < 1 || major > 3 || minor != 0)
    fail(kLoad, path,
         "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
             " (expected 1.0, 2.0 or 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix_len = kMagicLen + kVersionLen + len_bytes;
  if (got < prefix_len)
    fail(kLoad, path, "truncated header: the file is only " + std::to_string(got) + " bytes long");
  uint64_t header_len = 0;  // little-endian
  for (size_t i = 0; i < len_bytes; ++i)
    header_len |= uint64_t{prefix[kMagicLen + kVersionLen + i]} << (8 * i);
  // (`got` can exceed the stat size only if the file grew meanwhile.)
  const uint64_t after_prefix = file_size > prefix_len ? file_size - prefix_len : 0;
  if (header_len > after_prefix)
    fail(kLoad, path,
         "truncated header: expected " + std::to_string(header_len) + " header bytes, found " +
             std::to_string(after_prefix));
  if (header_len > kMaxHeaderLen)
    fail(kLoad, path,
         "corrupt header: implausible header length " + std::to_string(header_len) +
             " bytes (at most " + std::to_string(kMaxHeaderLen) + " are read)");

  std::string header(static_cast<size_t>(header_len), '\0');
  if (read_at(fd, prefix_len, &header[0], header.size(), path) != header.size())
    fail(kLoad, path, "truncated header: the file shrank while being read");

  OpenedNpy out;
  out.info = interpret_header(HeaderParser(header, path).parse(), path);
  out.info.data_offset = static_cast<size_t>(prefix_len + header_len);
  const size_t itemsize = descr_itemsize(out.info.descr, kLoad, path);
  out.nbytes = array_nbytes(out.info.shape, itemsize, kLoad, path);
  const uint64_t available =
      file_size > out.info.data_offset ? file_size - out.info.data_offset : 0;
  if (available < out.nbytes)
    fail(kLoad, path,
         "truncated: expected " + std::to_string(out.nbytes) + " data bytes, found " +
             std::to_string(available));
  return out;
}

// Opens only a regular file: the type is checked before opening, since opening a FIFO for reading
// blocks until a writer comes and opening a device can have effects, and O_NONBLOCK covers a path
// replaced in between (read_header checks the descriptor's type again).
int open_for_reading(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(kLoad, path, "cannot open file: " + errno_str(errno));
  check_regular(st, path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(kLoad, path, "cannot open file: " + errno_str(errno));
  return fd;
}

// ---------------------------------------------------------------------------------------------
// Writing

// The complete header (magic, version, length, dict, padding, '\n') as numpy.save writes it.
std::string make_header(const std::string& descr, const std::vector<int64_t>& shape,
                        const std::string& path) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  if (!shape.empty()) dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');

  for (const int major : {1, 2}) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    const uint64_t max_len = major == 1 ? 0xffff : 0xffffffff;
    const size_t text_len = dict.size() + 1;  // + '\n'
    // Like NumPy, pad with 1 to 64 spaces (never 0) so that the data starts at a multiple of 64.
    const size_t pad = kAlign - (kMagicLen + kVersionLen + len_bytes + text_len) % kAlign;
    const uint64_t header_len = text_len + pad;
    if (header_len > max_len) continue;

    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  fail(kSave, path, "header too large (" + std::to_string(dict.size()) + " bytes)");
}

}  // namespace

NpyInfo read_npy_header(const std::string& path) {
  FileDescriptor fd(open_for_reading(path));
  return read_header(fd.get(), path).info;
}

MappedNpy map_npy(const std::string& path) {
  FileDescriptor fd(open_for_reading(path));
  OpenedNpy opened = read_header(fd.get(), path);

  MappedNpy m{std::move(opened.info), nullptr, nullptr, opened.nbytes};
  if (m.nbytes == 0) return m;  // nothing to map (mmap rejects a length of 0)

  // Map from the start of the file: mmap offsets must be page-aligned, the data offset is not.
  const size_t map_len = m.info.data_offset + m.nbytes;
  void* base = ::mmap(nullptr, map_len, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (base == MAP_FAILED) fail(kLoad, path, "mmap failed: " + errno_str(errno));
  // If allocating the control block throws, shared_ptr calls the deleter, so nothing leaks.
  m.owner = std::shared_ptr<void>(base, [map_len](void* p) { ::munmap(p, map_len); });
  m.data = static_cast<const char*>(base) + m.info.data_offset;
  return m;  // the mapping stays valid after the descriptor is closed
}

void save_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, size_t nbytes) {
  const size_t itemsize = descr_itemsize(descr, kSave, path);
  const size_t expected = array_nbytes(shape, itemsize, kSave, path);
  if (nbytes != expected)
    fail(kSave, path,
         "data size mismatch: shape " + shape_str(shape) + " of '" + descr + "' needs " +
             std::to_string(expected) + " bytes, got " + std::to_string(nbytes));
  if (nbytes != 0 && data == nullptr) fail(kSave, path, "data pointer is null");
  const std::string header = make_header(descr, shape, path);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail(kSave, path, "cannot open file for writing: " + errno_str(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  if (ok && nbytes != 0) ok = std::fwrite(data, 1, nbytes, f) == nbytes;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {  // fclose flushes: late errors (e.g. ENOSPC) surface here
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(path.c_str());  // do not leave a truncated file behind
    fail(kSave, path, "write failed: " + errno_str(err));
  }
}

}  // namespace kiln
