// libFuzzer harness for the .npy reader (support/npy.cpp): each input is a whole file. The reader
// must either throw kiln::Error (naming "load_npy" and the path) or return a header whose data lies
// inside the file; an accepted file must survive save_npy and reload to the same header and bytes.
// Anything else (another exception, a sanitizer report, a hang) is a bug. Built and run by
// scripts/fuzz.sh; seeds in tests/fuzzers/corpus/npy.
#include <cstdint>
#include <cstring>
#include <string>

#include "memfile.hpp"
#include "support/error.hpp"
#include "support/npy.hpp"

namespace {

using kiln_fuzz::check;

bool mentions_path(const kiln::Error& e, const std::string& path) {
  const std::string msg = e.what();
  return msg.find("load_npy('" + path + "')") != std::string::npos ||
         msg.find("save_npy('" + path + "')") != std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln_fuzz::MemFile in("npy_in");
  static kiln_fuzz::MemFile out("npy_out");
  in.set(data, size);

  kiln::NpyInfo header;
  try {
    header = kiln::read_npy_header(in.path());
  } catch (const kiln::Error& e) {
    check(mentions_path(e, in.path()), "read_npy_header error names load_npy and the path");
    // map_npy reads the same header: it must refuse the file too.
    bool refused = false;
    try {
      kiln::map_npy(in.path());
    } catch (const kiln::Error& e2) {
      refused = true;
      check(std::string(e.what()) == e2.what(), "map_npy and read_npy_header agree");
    }
    check(refused, "map_npy refuses what read_npy_header refuses");
    return 0;
  }

  const kiln::MappedNpy m = kiln::map_npy(in.path());
  check(m.info.descr == header.descr && m.info.shape == header.shape &&
            m.info.data_offset == header.data_offset,
        "map_npy and read_npy_header agree");
  check(!m.info.fortran_order, "fortran_order is false");
  check(m.info.data_offset <= size && m.nbytes <= size - m.info.data_offset,
        "the data lies inside the file");
  check((m.nbytes == 0) == (m.data == nullptr), "data is null exactly when empty");
  uint64_t count = 1;
  for (int64_t d : m.info.shape) {
    check(d >= 0, "dimensions are not negative");
    count *= static_cast<uint64_t>(d);
  }
  if (m.nbytes != 0) {
    check(m.nbytes % count == 0, "nbytes is a multiple of the element count");
    check(std::memcmp(m.data, data + m.info.data_offset, m.nbytes) == 0,
          "the mapping holds the file's bytes");
  }

  // Round trip: what was accepted is written back by save_npy and reads back the same.
  try {
    kiln::save_npy(out.path(), m.info.descr, m.info.shape, m.data, m.nbytes);
  } catch (const kiln::Error& e) {
    check(mentions_path(e, out.path()), "save_npy error names save_npy and the path");
    return 0;  // a descriptor save_npy refuses (none known) would land here
  }
  const kiln::MappedNpy back = kiln::map_npy(out.path());
  check(
      back.info.descr == m.info.descr && back.info.shape == m.info.shape && back.nbytes == m.nbytes,
      "save_npy round-trips the header");
  check(back.info.data_offset % 64 == 0, "save_npy aligns the data to 64 bytes");
  if (m.nbytes != 0)
    check(std::memcmp(back.data, m.data, m.nbytes) == 0, "save_npy round-trips the data");
  return 0;
}
