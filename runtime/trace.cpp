#include "runtime/trace.hpp"

#include <unistd.h>

#include <cstdio>

namespace kiln {

namespace {
std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void Trace::write_chrome_json(std::ostream& os) const {
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  int max_worker = 0;
  for (const auto& e : events_) max_worker = std::max(max_worker, e.worker);
  for (int w = 0; w <= max_worker; ++w) {
    os << (first ? "" : ",\n") << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << w
       << ",\"args\":{\"name\":\"worker " << w << "\"}}";
    first = false;
  }
  char buf[64];
  for (const auto& e : events_) {
    os << (first ? "" : ",\n") << "{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << e.cat
       << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << e.worker;
    std::snprintf(buf, sizeof buf, ",\"ts\":%.3f,\"dur\":%.3f", e.start_us, e.dur_us);
    os << buf << ",\"args\":{\"block\":" << e.block << ",\"bytes\":" << e.bytes << "}}";
    first = false;
  }
  os << "\n]}\n";
}

Progress::Progress(int64_t total, bool enabled, std::atomic<int64_t>* done,
                   std::atomic<int64_t>* total_out)
    : total_(total),
      on_(enabled && ::isatty(2) == 1),
      done_out_(done),
      t0_(std::chrono::steady_clock::now()) {
  next_draw_ns_ = 1000000000;  // first draw after one second
  if (done_out_) done_out_->store(0, std::memory_order_relaxed);
  if (total_out) total_out->store(total, std::memory_order_relaxed);
}

Progress::~Progress() {
  if (on_ && drawn_) draw(done_.load(), true);
}

void Progress::step() {
  int64_t done = done_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (done_out_) done_out_->fetch_add(1, std::memory_order_relaxed);
  if (!on_) return;
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_)
          .count();
  int64_t next = next_draw_ns_.load(std::memory_order_relaxed);
  if (ns < next || !next_draw_ns_.compare_exchange_strong(next, ns + 200000000)) return;
  draw(done, false);
}

void Progress::draw(int64_t done, bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  double rate = s > 0 ? done / s : 0;
  double eta = rate > 0 ? (total_ - done) / rate : 0;
  int width = 30;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld tasks  %.0f/s  %s %.1f s ", bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), rate,
               final ? "took" : "ETA", final ? s : eta);
  if (final) std::fprintf(stderr, "\n");
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace kiln
