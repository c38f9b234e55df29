// Task-stream tracing and progress. A Trace collects one event per executed task (worker, kernel,
// block, start, duration, bytes written) plus compile events, and writes them in the Chrome trace
// event format that Perfetto and chrome://tracing open. A Progress prints a one-line bar on a
// terminal for computes that run longer than about a second.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

struct TraceEvent {
  std::string name;  // "kernel 3", "combine 3", "compile kernel 3"
  std::string cat;   // "kernel", "combine", "compile"
  int worker = 0;
  int64_t block = -1;
  double start_us = 0, dur_us = 0;
  int64_t bytes = 0;
};

class Trace {
 public:
  Trace() : t0_(std::chrono::steady_clock::now()) {}
  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_)
        .count();
  }
  void add(TraceEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  const std::vector<TraceEvent>& events() const { return events_; }
  // {"traceEvents": [...]}: complete ("X") events, one thread row per worker.
  void write_chrome_json(std::ostream& os) const;

 private:
  std::chrono::steady_clock::time_point t0_;
  std::mutex mu_;
  std::vector<TraceEvent> events_;
};

class Progress {
 public:
  // Enabled only when stderr is a terminal and `enabled`; prints nothing for the first second.
  // `done` and `total` (may be null): counters for a watcher elsewhere, whatever `enabled` is.
  Progress(int64_t total, bool enabled, std::atomic<int64_t>* done = nullptr,
           std::atomic<int64_t>* total_out = nullptr);
  ~Progress();
  void step();  // one task done (thread-safe, cheap)

 private:
  void draw(int64_t done, bool final);
  int64_t total_;
  bool on_;
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t>* done_out_ = nullptr;
  std::atomic<int64_t> next_draw_ns_{0};
  std::chrono::steady_clock::time_point t0_;
  std::mutex mu_;
  bool drawn_ = false;
};

}  // namespace kiln
