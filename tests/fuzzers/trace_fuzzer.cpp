// libFuzzer harness for kiln report's trace reader (tools/report.cpp): each input is a trace file.
// read_trace must return its bytes; render_svg must either throw kiln::Error (a short "kiln
// report: ..." message) or return well-formed SVG text with a sane summary. Anything else (another
// exception, a sanitizer report, a stack overflow, a hang) is a bug. Built and run by
// scripts/fuzz.sh; seeds in tests/fuzzers/corpus/trace.
#include <cmath>
#include <cstdint>
#include <string>

#include "memfile.hpp"
#include "support/error.hpp"
#include "tools/report.hpp"

namespace {

using kiln_fuzz::check;

// Lead bytes followed by the right number of continuation bytes (nlohmann::json checks the rest).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    if (c < 0x80)
      n = 0;
    else if ((c >> 5) == 0x6)
      n = 1;
    else if ((c >> 4) == 0xe)
      n = 2;
    else if ((c >> 3) == 0x1e)
      n = 3;
    else
      return false;
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln_fuzz::MemFile file("trace");
  file.set(data, size);
  const std::string text = kiln::report::read_trace(file.path());
  check(text == std::string(reinterpret_cast<const char*>(data), size),
        "read_trace returns the file's bytes");

  kiln::report::Summary s;
  std::string svg;
  try {
    svg = kiln::report::render_svg(text, &s);
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    check(msg.rfind("kiln report: ", 0) == 0, "errors start with 'kiln report: '");
    check(msg.size() < 1000, "error messages are short (no whole values dumped)");
    return 0;
  }
  check(s.workers >= 1 && s.tasks >= 1, "a rendered trace has workers and tasks");
  check(std::isfinite(s.span_us) && s.span_us > 0, "the span is positive and finite");
  check(std::isfinite(s.busy_fraction) && s.busy_fraction >= 0 && s.busy_fraction <= 1 + 1e-9,
        "workers are busy between 0 and 100% of the time");
  check(svg.rfind("<svg ", 0) == 0 && svg.size() >= 7 &&
            svg.compare(svg.size() - 7, 7, "</svg>\n") == 0,
        "the SVG is one <svg> element");
  size_t open = 0, close = 0;
  for (char c : svg) {
    check(static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t' || c == '\r',
          "no control characters XML 1.0 forbids");
    open += c == '<';
    close += c == '>';
  }
  check(open == close, "every '<' in the SVG opens a tag (names are escaped)");
  check(valid_utf8(svg), "the SVG is valid UTF-8");
  return 0;
}
