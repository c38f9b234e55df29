// kiln report: renders a Chrome-format task trace (kiln run --trace) as an SVG task stream:
// one row per worker, one bar per task coloured by kernel, compile events on their own row,
// so idle time shows as white space (like the Dask dashboard's task stream).
#pragma once
#include <string>

namespace kiln::report {

struct Summary {
  int workers = 0;
  int64_t tasks = 0;
  double span_us = 0;        // first start to last end of task events
  double busy_fraction = 0;  // sum of task durations / (workers * span)
};

// Reads the trace JSON text, returns the SVG and fills `summary`. Each worker tid gets a row (in
// tid order); busy time counts overlapping tasks of one worker once. Throws kiln::Error on a
// malformed trace, naming the event and field (types; ts and dur finite, in [0, 1e15] us).
std::string render_svg(const std::string& trace_json, Summary* summary);

}  // namespace kiln::report
