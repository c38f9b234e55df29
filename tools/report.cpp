#include "tools/report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>

#include "support/error.hpp"
#include "support/files.hpp"

namespace kiln::report {

namespace {

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

struct Bar {
  std::string name, cat;
  int64_t tid;
  int row;
  double start, dur;
  int64_t block;
};

using nlohmann::json;

// Times and durations are microseconds; beyond 1e15 (31 years) a trace is not one of Kiln's.
constexpr double kMaxMicros = 1e15;

// At most about `limit` characters of `v` as JSON (ASCII, invalid UTF-8 replaced), for error
// messages: never the whole of a large or deeply nested value.
void preview(const json& v, size_t limit, std::string* out) {
  if (out->size() > limit) return;
  if (v.is_array() || v.is_object()) {
    const bool array = v.is_array();
    *out += array ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out->size() <= limit; ++it) {
      if (!first) *out += ',';
      first = false;
      if (!array) {
        preview(json(it.key().substr(0, limit)), limit, out);
        *out += ':';
      }
      preview(*it, limit, out);
    }
    *out += array ? ']' : '}';
    return;
  }
  const json shown = v.is_string() ? json(v.get_ref<const std::string&>().substr(0, limit)) : v;
  *out += shown.dump(-1, ' ', true, json::error_handler_t::replace);
}

std::string preview(const json* v) {
  if (!v) return "nothing";
  constexpr size_t kShown = 40;
  std::string text;
  preview(*v, kShown, &text);
  if (text.size() > kShown) text = text.substr(0, kShown - 3) + "...";
  return text;
}

[[noreturn]] void bad_field(const std::string& field, const std::string& expected,
                            const json* got) {
  throw Error("kiln report: " + field + ": expected " + expected + ", got " + preview(got));
}

const json* find(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string string_field(const json& e, const std::string& at, const char* key,
                         const std::string& fallback) {
  const json* v = find(e, key);
  if (!v) return fallback;
  if (!v->is_string()) bad_field(at + "." + key, "a string", v);
  return v->get<std::string>();
}

int64_t int_field(const json& e, const std::string& at, const char* key, int64_t fallback) {
  const json* v = find(e, key);
  if (!v) return fallback;
  bool fits = v->is_number_integer() &&
              !(v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
  if (!fits) bad_field(at + "." + key, "an integer (64-bit)", v);
  return v->get<int64_t>();
}

// A required time in microseconds: finite, in [0, kMaxMicros].
double micros_field(const json& e, const std::string& at, const char* key) {
  const json* v = find(e, key);
  double x = v && v->is_number() ? v->get<double>() : -1;
  if (!(std::isfinite(x) && x >= 0 && x <= kMaxMicros))
    bad_field(at + "." + key, "microseconds, a number in [0, 1e15]", v);
  return x;
}

Bar read_bar(const json& e, const std::string& at) {
  Bar b;
  b.name = string_field(e, at, "name", "?");
  b.cat = string_field(e, at, "cat", "");
  b.tid = int_field(e, at, "tid", 0);
  b.row = 0;
  b.start = micros_field(e, at, "ts");
  b.dur = micros_field(e, at, "dur");
  b.block = -1;
  if (const json* args = find(e, "args")) {
    if (!args->is_object()) bad_field(at + ".args", "an object", args);
    b.block = int_field(*args, at + ".args", "block", -1);
  }
  return b;
}

// The complete ("X") events, each checked; `lanes` gets every worker's tid (task events and
// thread_name metadata), so a worker that ran nothing still counts as idle.
std::vector<Bar> read_events(const json& events, std::map<int64_t, int>* lanes) {
  std::vector<Bar> bars;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    std::string at = "traceEvents[" + std::to_string(i) + "]";
    if (!e.is_object()) bad_field(at, "an object", &e);
    std::string ph = string_field(e, at, "ph", "");
    if (ph == "M" && string_field(e, at, "name", "") == "thread_name")
      (*lanes)[int_field(e, at, "tid", 0)] = 0;
    if (ph != "X") continue;
    bars.push_back(read_bar(e, at));
    if (bars.back().cat != "compile") (*lanes)[bars.back().tid] = 0;
  }
  int row = 0;
  for (auto& [tid, r] : *lanes) r = row++;
  return bars;
}

// Text for an SVG (XML 1.0) element: markup characters escaped, and the control characters XML
// forbids (a JSON string may hold any, as "\u0001") shown as U+FFFD.
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
      o += "\xef\xbf\xbd";
    else
      o += c;
  }
  return o;
}

// Time the workers spent in tasks: per lane the union of its task intervals, so overlapping
// events (a malformed or merged trace) cannot make a worker more than 100% busy.
double busy_micros(const std::vector<Bar>& bars) {
  std::map<int, std::vector<std::pair<double, double>>> by_row;
  for (const auto& b : bars)
    if (b.cat != "compile") by_row[b.row].push_back({b.start, b.start + b.dur});
  double busy = 0;
  for (auto& [row, iv] : by_row) {
    std::sort(iv.begin(), iv.end());
    double end = -1;
    for (const auto& [s, e] : iv) {
      busy += std::max(0.0, e - std::max(s, end));
      end = std::max(end, e);
    }
  }
  return busy;
}

// Refuses arrays and objects nested deeper than kMaxTraceDepth, before parsing: such values are
// useless in a trace and costly to handle (finding 7: dumping one into an error message overflowed
// the stack). A linear scan rather than a parser callback, whose nlohmann implementation rescans
// the enclosing array at the end of every object (quadratic in the number of events). Brackets in
// strings do not count; on invalid JSON the count may be off, and the parser reports the text.
void check_depth(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, which may be '"'
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTraceDepth)
        throw Error("kiln report: the trace nests arrays and objects more than " +
                    std::to_string(kMaxTraceDepth) + " deep (at byte " + std::to_string(i) +
                    "); a Kiln trace nests 4 deep");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

std::string read_trace(const std::string& path) {
  return files::read_regular(path, kMaxTraceBytes, "kiln report: cannot read the trace");
}

std::string render_svg(const std::string& text, Summary* summary) {
  if (text.size() > kMaxTraceBytes)
    throw Error("kiln report: the trace is " + std::to_string(text.size()) +
                " bytes, larger than " + std::to_string(kMaxTraceBytes) +
                " bytes (1 GiB), the most kiln report reads");
  check_depth(text);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    // The parser's message quotes the token it stopped in, which may be huge.
    std::string why;
    for (const char* p = e.what(); *p != '\0' && why.size() < 300; ++p) {
      const unsigned char c = static_cast<unsigned char>(*p);
      if (c >= 0x20 && c < 0x7f) {
        why += static_cast<char>(c);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        why += hex;
      }
    }
    if (why.size() >= 300) why += "...";
    throw Error("kiln report: the trace is not valid JSON: " + why);
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    throw Error("kiln report: expected a Chrome trace object with a \"traceEvents\" array");
  std::map<int64_t, int> lanes;  // worker tid -> row
  std::vector<Bar> bars = read_events(j["traceEvents"], &lanes);
  int workers = static_cast<int>(lanes.size());
  bool has_compile = false;
  double t_min = 1e300, t_max = 0, task_min = 1e300, task_max = 0;
  int64_t tasks = 0;
  for (auto& b : bars) {
    if (b.cat == "compile") {
      b.row = workers;  // own row below the workers
      has_compile = true;
    } else {
      b.row = lanes.at(b.tid);
      ++tasks;
      task_min = std::min(task_min, b.start);
      task_max = std::max(task_max, b.start + b.dur);
    }
    t_min = std::min(t_min, b.start);
    t_max = std::max(t_max, b.start + b.dur);
  }
  if (tasks == 0) throw Error("kiln report: the trace has no task events");
  double busy = busy_micros(bars);
  double span = std::max(task_max - task_min, 1e-9);
  if (summary) {
    summary->workers = workers;
    summary->tasks = tasks;
    summary->span_us = span;
    summary->busy_fraction = busy / (workers * span);
  }
  // Colours by kernel name.
  std::map<std::string, int> color;
  for (const auto& b : bars)
    if (!color.count(b.name)) {
      int k = static_cast<int>(color.size());
      color[b.name] = k;
    }
  // 64-bit: a trace of tens of millions of lanes or kernel names would overflow int heights.
  const int64_t width = 1200, left = 90, right = 20, top = 40, row_h = 28, legend_h = 22;
  const int64_t rows = workers + (has_compile ? 1 : 0);
  const int64_t height =
      top + rows * row_h + 30 + legend_h * ((static_cast<int64_t>(color.size()) + 3) / 4);
  double scale = (width - left - right) / std::max(t_max - t_min, 1e-9);
  std::ostringstream os;
  char buf[256];
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::snprintf(buf, sizeof buf,
                "Task stream: %lld tasks on %d workers, %.3f ms, workers busy %.0f%%",
                static_cast<long long>(tasks), workers, span / 1000, 100 * busy / (workers * span));
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << buf << "</text>\n";
  std::vector<int64_t> tid_of(workers);
  for (const auto& [tid, r] : lanes) tid_of[r] = tid;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t y = top + r * row_h;
    os << "<text x=\"8\" y=\"" << y + 18 << "\">"
       << (r < workers ? "worker " + std::to_string(tid_of[r]) : std::string("compile"))
       << "</text>\n";
    os << "<rect x=\"" << left << "\" y=\"" << y + 2 << "\" width=\"" << width - left - right
       << "\" height=\"" << row_h - 4 << "\" fill=\"#f4f4f4\"/>\n";
  }
  for (const auto& b : bars) {
    double x = left + (b.start - t_min) * scale;
    double w = std::max(b.dur * scale, 0.5);
    const long long y = top + b.row * row_h + 3;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%lld\" width=\"%.2f\" height=\"%lld\" fill=\"%s\">", x, y,
                  w, static_cast<long long>(row_h - 6), kPalette[color[b.name] % 10]);
    os << buf << "<title>" << esc(b.name) << " block " << b.block << ", " << b.dur << " us"
       << "</title></rect>\n";
  }
  const int64_t axis_y = top + rows * row_h + 14;
  std::snprintf(buf, sizeof buf, "0 ms");
  os << "<text x=\"" << left << "\" y=\"" << axis_y << "\">" << buf << "</text>\n";
  std::snprintf(buf, sizeof buf, "%.3f ms", (t_max - t_min) / 1000);
  os << "<text x=\"" << width - right - 70 << "\" y=\"" << axis_y << "\">" << buf << "</text>\n";
  int64_t k = 0;
  for (const auto& [name, c] : color) {
    const int64_t x = left + (k % 4) * 270, y = axis_y + 10 + (k / 4) * legend_h;
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\""
       << kPalette[c % 10] << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 12 << "\">"
       << esc(name) << "</text>\n";
    ++k;
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace kiln::report
