// kiln report: renders a Chrome-format task trace (kiln run --trace) as an SVG task stream:
// one row per worker, one bar per task coloured by kernel, compile events on their own row,
// so idle time shows as white space (like the Dask dashboard's task stream).
#pragma once
#include <cstdint>
#include <string>

namespace kiln::report {

struct Summary {
  int workers = 0;
  int64_t tasks = 0;
  double span_us = 0;        // first start to last end of task events
  double busy_fraction = 0;  // sum of task durations / (workers * span)
};

// Traces larger than this are refused (by read_trace and render_svg): Kiln writes about 120 bytes
// a task, so this is some 9 million tasks.
constexpr uint64_t kMaxTraceBytes = uint64_t{1} << 30;
// Arrays and objects nested deeper than this are refused (Kiln's traces nest 4 deep).
constexpr int kMaxTraceDepth = 64;

// The text of the trace file at `path`. Throws kiln::Error naming the path and the reason: a
// directory ("is a directory"), a FIFO, device or socket (refused before anything blocks on it), a
// file larger than kMaxTraceBytes (the figure is in the message) or a failed system call
// (strerror).
std::string read_trace(const std::string& path);

// Reads the trace JSON text, returns the SVG and fills `summary`. Each worker tid gets a row (in
// tid order); busy time counts overlapping tasks of one worker once. Throws kiln::Error on a
// malformed trace, naming the event and field (types; ts and dur finite, in [0, 1e15] us), on text
// that is not JSON, on nesting deeper than kMaxTraceDepth and on text larger than kMaxTraceBytes;
// messages quote at most a short excerpt of any value.
std::string render_svg(const std::string& trace_json, Summary* summary);

}  // namespace kiln::report
