#include "tools/report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "support/error.hpp"

namespace kiln::report {

namespace {

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

struct Bar {
  std::string name, cat;
  int row;
  double start, dur;
  int64_t block;
};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string render_svg(const std::string& text, Summary* summary) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error(std::string("kiln report: the trace is not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    throw Error("kiln report: expected a Chrome trace object with a \"traceEvents\" array");
  std::vector<Bar> bars;
  int max_worker = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    Bar b;
    b.name = e.value("name", "?");
    b.cat = e.value("cat", "");
    b.row = e.value("tid", 0);
    b.start = e.value("ts", 0.0);
    b.dur = e.value("dur", 0.0);
    b.block = e.contains("args") ? e["args"].value("block", int64_t{-1}) : -1;
    if (b.cat != "compile") max_worker = std::max(max_worker, b.row);
    bars.push_back(b);
  }
  if (bars.empty()) throw Error("kiln report: the trace has no task events");
  int workers = max_worker + 1;
  bool has_compile = false;
  double t_min = 1e300, t_max = 0, task_min = 1e300, task_max = 0, busy = 0;
  int64_t tasks = 0;
  for (auto& b : bars) {
    if (b.cat == "compile") {
      b.row = workers;  // own row below the workers
      has_compile = true;
    } else {
      ++tasks;
      busy += b.dur;
      task_min = std::min(task_min, b.start);
      task_max = std::max(task_max, b.start + b.dur);
    }
    t_min = std::min(t_min, b.start);
    t_max = std::max(t_max, b.start + b.dur);
  }
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
  const int width = 1200, left = 90, right = 20, top = 40, row_h = 28, legend_h = 22;
  int rows = workers + (has_compile ? 1 : 0);
  int height = top + rows * row_h + 30 + legend_h * ((static_cast<int>(color.size()) + 3) / 4);
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
  for (int r = 0; r < rows; ++r) {
    int y = top + r * row_h;
    os << "<text x=\"8\" y=\"" << y + 18 << "\">"
       << (r < workers ? "worker " + std::to_string(r) : std::string("compile")) << "</text>\n";
    os << "<rect x=\"" << left << "\" y=\"" << y + 2 << "\" width=\"" << width - left - right
       << "\" height=\"" << row_h - 4 << "\" fill=\"#f4f4f4\"/>\n";
  }
  for (const auto& b : bars) {
    double x = left + (b.start - t_min) * scale;
    double w = std::max(b.dur * scale, 0.5);
    int y = top + b.row * row_h + 3;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">", x, y, w,
                  row_h - 6, kPalette[color[b.name] % 10]);
    os << buf << "<title>" << esc(b.name) << " block " << b.block << ", " << b.dur << " us"
       << "</title></rect>\n";
  }
  int axis_y = top + rows * row_h + 14;
  std::snprintf(buf, sizeof buf, "0 ms");
  os << "<text x=\"" << left << "\" y=\"" << axis_y << "\">" << buf << "</text>\n";
  std::snprintf(buf, sizeof buf, "%.3f ms", (t_max - t_min) / 1000);
  os << "<text x=\"" << width - right - 70 << "\" y=\"" << axis_y << "\">" << buf << "</text>\n";
  int k = 0;
  for (const auto& [name, c] : color) {
    int x = left + (k % 4) * 270, y = axis_y + 10 + (k / 4) * legend_h;
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\""
       << kPalette[c % 10] << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 12 << "\">"
       << esc(name) << "</text>\n";
    ++k;
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace kiln::report
