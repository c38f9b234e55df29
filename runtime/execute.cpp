#include "runtime/execute.hpp"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "codegen/library.hpp"
#include "codegen/reduce_rules.hpp"
#include "ir/element.hpp"
#include "runtime/device.hpp"
#include "runtime/distributed.hpp"
#include "runtime/memory.hpp"
#include "runtime/placement.hpp"
#include "support/checked.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"

namespace kiln {

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kUseTbb = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kUseTbb = false;
#else
constexpr bool kUseTbb = true;
#endif
#else
constexpr bool kUseTbb = true;
#endif

// One arena per thread count, kept for the process: creating an arena per compute() costs more
// than a cached compute is allowed to.
tbb::task_arena& arena_for(int threads) {
  static std::mutex mu;
  static auto* arenas = new std::map<int, std::unique_ptr<tbb::task_arena>>();  // never freed
  static tbb::global_control* allowed = nullptr;  // never freed, like the arenas
  std::lock_guard<std::mutex> lock(mu);
  // oneTBB caps its workers at the hardware's threads: a request for more (oversubscription, on
  // purpose) raises the cap, or the arena would run with fewer threads than asked and oneTBB
  // print a warning. The new cap is made before the old one goes (the smallest active one wins).
  const auto cap = tbb::global_control::max_allowed_parallelism;
  if (static_cast<size_t>(threads) > tbb::global_control::active_value(cap)) {
    auto* raised = new tbb::global_control(cap, static_cast<size_t>(threads));
    delete allowed;
    allowed = raised;
  }
  auto& a = (*arenas)[threads];
  if (!a) a = std::make_unique<tbb::task_arena>(threads);
  return *a;
}

// Ready tasks. Ordered (plans with blocked arrays): smallest PlanTask::order first, entries
// carrying their order so the heap never reads the (large) tasks. Otherwise last in, first out:
// nothing streams, and a stack is cheaper.
class ReadySet {
 public:
  ReadySet(const std::vector<PlanTask>& tasks, bool ordered) : tasks_(tasks), ordered_(ordered) {}
  void push(int t) {
    heap_.push_back({tasks_[t].order, t});
    if (ordered_) std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  int pop() {
    if (ordered_) std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    int t = heap_.back().second;
    heap_.pop_back();
    return t;
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

 private:
  const std::vector<PlanTask>& tasks_;
  bool ordered_;
  std::vector<std::pair<int64_t, int>> heap_;
};

// The buffers of blocked arrays' blocks, reused within one run: a stream frees and allocates
// blocks as fast as kernels run, and blocks above glibc's mmap threshold (32 MiB) would otherwise
// be mapped, faulted in and zeroed by the OS every time (unfused logistic-gd, 80 MB blocks:
// 25.2 s -> 10.4 s). Pooled buffers stay counted as in use until the run ends.
class BlockPool {
 public:
  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() {
    for (auto& [bytes, list] : free_)
      for (void* p : list) host_free(p, bytes);
  }
  std::shared_ptr<void> get(size_t bytes) {
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
      }
    }
    if (!p) p = host_alloc(bytes);
    return std::shared_ptr<void>(p, [this, bytes](void* q) {
      std::lock_guard<std::mutex> lock(mu_);
      free_[bytes].push_back(q);
    });
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
};

class Run {
 public:
  Run(const Plan& p, const std::vector<ParamValue>& params, Trace* trace, Progress* progress,
      int devices, bool keep_on_device)
      : p_(p),
        params_(params),
        trace_(trace),
        progress_(progress),
        data_(p.arrays.size()),
        readers_(new std::atomic<int>[p.arrays.size()]),
        blocks_(static_cast<size_t>(p.blocked_blocks)),
        block_readers_(new std::atomic<int>[p.blocked_blocks]),
        waits_(new std::atomic<int>[p.tasks.size()]),
        ready_(p.tasks, p.streams),
        partial_(p.partials.size(), nullptr),
        library_partial_(static_cast<size_t>(p.library_partials), nullptr) {
    for (size_t a = 0; a < p.arrays.size(); ++a) {
      readers_[a] = p.arrays[a].readers;
      for (size_t b = 0; b < p.arrays[a].block_readers.size(); ++b)
        block_readers_[p.arrays[a].block_offset + b] = p.arrays[a].block_readers[b];
    }
    for (size_t t = 0; t < p.tasks.size(); ++t) waits_[t] = p.tasks[t].waits;
    keep_ = keep_on_device;
    backend::Backend& be = backend::backend_for(p.device);
    backend::DeviceMemory* m = be.memory();
    for (const ParamValue& v : params) {  // Buffer leaves in device memory: on this device kind
      if (!v.ptr || v.place.on_host()) continue;
      if (v.place.device != p.device || v.place.index >= (m ? m->max_count() : 0))
        throw Error(std::string("compute on ") + device_name(p.device) + ": an operand is in " +
                    place_name(v.place) + "'s memory; compute on " + device_name(v.place.device) +
                    ", or copy it to the host (NDArray::to_host)");
    }
    if (m) start_devices(be, *m, devices);
    check_host_memory();
  }

  ~Run() {
    for (size_t k = 0; k < partial_.size(); ++k)
      if (partial_[k]) host_free(partial_[k], partial_bytes(static_cast<int>(k)));
    for (size_t k = 0; p_.library_partials > 0 && k < p_.tasks.size(); ++k) {  // failed runs
      const PlanTask& t = p_.tasks[k];
      if (t.kind == TaskKind::Library && t.partial_out >= 0 && library_partial_[t.partial_out])
        host_free(library_partial_[t.partial_out], library_partial_bytes(t));
    }
  }

  void run(int threads) {
    threads_ = std::max(threads, 1);
    for (size_t t = 0; t < p_.tasks.size(); ++t)
      if (p_.tasks[t].waits == 0) ready_.push(static_cast<int>(t));
    if (threads <= 1) {
      while (!ready_.empty()) {
        int t = ready_.pop();
        execute(t);
        for (int s : p_.tasks[t].next)
          if (--waits_[s] == 0) ready_.push(s);
      }
    } else if (kUseTbb && !p_.streams) {
      arena_for(threads).execute([&] {
        tbb::task_group tg;
        while (!ready_.empty()) {
          int t = ready_.pop();
          tg.run([this, &tg, t] { run_chain(tg, t); });
        }
        tg.wait();
      });
    } else if (kUseTbb) {
      arena_for(threads).execute([&] {
        tbb::task_group tg;
        for (size_t k = ready_.size(); k > 0; --k) tg.run([this, &tg] { run_tasks(tg); });
        tg.wait();
      });
    } else {
      run_on_std_threads(threads);
    }
    // Device work is queued (backend.hpp): the run ends when every device has run its share,
    // and a kernel's error surfaces here (the first error of a run wins).
    for (int d = 0; arena_ && d < ndev_; ++d) {
      try {
        arena_->synchronize(d);
      } catch (...) {
        if (!error_) error_ = std::current_exception();
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

  // The same scheduling on plain std::threads and a condition variable: used where oneTBB's
  // hand-offs cannot be checked (ThreadSanitizer builds), so the sanitizer sees every edge.
  void run_on_std_threads(int threads) {
    std::condition_variable cv;
    size_t left = p_.tasks.size();
    auto worker = [&] {
      std::unique_lock<std::mutex> lock(ready_mu_);
      while (true) {
        cv.wait(lock, [&] { return !ready_.empty() || left == 0; });
        if (left == 0) return;
        int t = ready_.pop();
        lock.unlock();
        execute(t);
        std::vector<int> now_ready;
        for (int s : p_.tasks[t].next)
          if (--waits_[s] == 0) now_ready.push_back(s);
        lock.lock();
        for (int s : now_ready) ready_.push(s);
        --left;
        cv.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (int k = 1; k < threads; ++k) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
  }

  // Only the groups that the outputs not skipped depend on run (skip: per output, or empty).
  void skip_outputs(const std::vector<bool>& skip) {
    if (skip.empty()) return;
    skipped_ = skip;
    needed_.assign(p_.groups.size(), false);
    for (size_t g = p_.groups.size(); g-- > 0;) {  // groups are in topological order
      bool need = needed_[g];
      for (size_t k = 0; k < p_.output_arrays.size() && !need; ++k)
        need = !skip[k] && p_.writes(static_cast<int>(g), p_.output_arrays[k]);
      needed_[g] = need;
      if (need)
        for (int d : p_.fused.groups[g].deps) needed_[d] = true;
    }
  }

  RunResult result() {
    RunResult r;
    for (size_t k = 0; k < p_.output_arrays.size(); ++k) {
      const int a = p_.output_arrays[k];
      if (!skipped_.empty() && skipped_[k]) {
        r.outputs.emplace_back();
        r.places.emplace_back();
        continue;
      }
      if (arena_ && keep_) {  // stays on (or goes to) device 0
        std::shared_ptr<void> d = host_homed_[a] ? nullptr : rep_[rep_at(a, 0)];
        if (!d) {
          ensure_array(a);
          d = arena_->buffer(0, p_.arrays[a].bytes);
          arena_->to_device(0, d.get(), data_[a].get(), p_.arrays[a].bytes);
        }
        r.outputs.push_back(d);
        r.places.push_back({p_.device, 0});
        continue;
      }
      ensure_array(a);
      if (arena_ && !host_homed_[a] && rep_[rep_at(a, 0)]) {  // copy back what stayed on device 0
        arena_->to_host(0, data_[a].get(), rep_[rep_at(a, 0)].get(), p_.arrays[a].bytes);
        rep_[rep_at(a, 0)].reset();
      }
      r.outputs.push_back(data_[a]);
      r.places.emplace_back();
    }
    if (arena_ && keep_) arena_->synchronize(0);  // outputs copied to device 0 above
    if (arena_) r.transfers = arena_->transfers();
    r.devices = ndev_;
    return r;
  }

  int64_t tasks_run() const { return tasks_run_.load(); }

  // A distributed run (runtime/placement.hpp, docs/DISTRIBUTED.md). Every rank walks the plan's
  // tasks in the order one thread runs them (the same on every rank: the same plan, the same
  // ready set). A task of its own it runs, then sends each rank in the placement's list what that
  // rank reads of its products, in one message; another rank's task whose products it reads, it
  // receives; other tasks it only counts off (the reads they release, the partials it holds for
  // them). Sends never wait, and a rank waits only for a message whose task comes earlier in the
  // common order on its sender, so no cycle of waits can form. Results are the same bits as one
  // process's: each task computes what it would there, the reductions fold in the plan's trees.
  // Errors: the rank whose task fails tells every other rank; all stop, agree on the first rank
  // that failed, drain the messages left, and raise that rank's error.
  DistCounts run_distributed(dist::Transport& tr, const Placement& pl, uint64_t fingerprint) {
    tr_ = &tr;
    pl_ = &pl;
    epoch_ = dist::next_epoch();
    const int me = tr.rank(), ranks = tr.size();
    agree_on(hash_mix(fingerprint, epoch_));
    sent_.assign(static_cast<size_t>(ranks), 0);
    got_.assign(static_cast<size_t>(ranks), 0);
    std::vector<int> waits(p_.tasks.size());
    ReadySet ready(p_.tasks, p_.streams);
    for (size_t t = 0; t < p_.tasks.size(); ++t) {
      waits[t] = p_.tasks[t].waits;
      if (waits[t] == 0) ready.push(static_cast<int>(t));
    }
    bool stop = false, own_error = false;
    for (int slot : pl.gather_slots) stop = stop || !gather(slot);
    while (!ready.empty()) {
      const int t = ready.pop();
      for (int s : p_.tasks[t].next)
        if (--waits[s] == 0) ready.push(s);
      const int owner = pl.owner[t];
      if (stop || owner < 0) continue;
      const PlanTask& task = p_.tasks[t];
      const bool skipped = !needed_.empty() && !needed_[task.group];
      if (owner == me || skipped) {
        execute(t);
        if (failed_.load()) {
          own_error = stop = true;
          notify_error();
        } else if (owner == me && !skipped && !pl.sends_to[t].empty()) {
          const double start = trace_ ? trace_->now_us() : 0;
          const int64_t bytes = counts_.bytes_sent;
          send_products(t);
          trace_transfer("send", task, start, counts_.bytes_sent - bytes);
        }
        continue;
      }
      const auto& to = pl.sends_to[t];
      if (std::binary_search(to.begin(), to.end(), me)) {
        const double start = trace_ ? trace_->now_us() : 0;
        const int64_t bytes = counts_.bytes_received;
        bool received = false;
        try {
          received = receive_products(t, owner);
        } catch (...) {  // a failed allocation, a message out of order: this rank's error
          fail(std::current_exception());
          own_error = true;
          notify_error();
        }
        if (!received) {
          stop = true;  // this rank or another failed
          continue;
        }
        trace_transfer("receive", task, start, counts_.bytes_received - bytes);
      }
      forget(task);
      progress_->step();
    }
    if (arena_ && !own_error) {  // what the device's kernels raised counts as this rank's error
      try {
        arena_->synchronize(0);
      } catch (...) {
        fail(std::current_exception());
        own_error = true;
        notify_error();
      }
    }
    finish(own_error);
    if (error_) std::rethrow_exception(error_);
    // Every rank succeeded: the gathered Buffers are whole on every rank now.
    for (int slot : pl.gather_slots) dist::forget_residency(params_[slot].ptr);
    DistCounts c = counts_;
    c.ranks = ranks;
    c.tasks = tasks_run_.load();
    c.predicted_messages = pl.messages[static_cast<size_t>(me)];
    c.predicted_bytes = pl.bytes[static_cast<size_t>(me)];
    return c;
  }

 private:
  struct MessageHead {
    uint64_t epoch;
    int64_t task;
  };

  // Before a distributed run: every rank computes the same thing (`h`: its fingerprint and run
  // number), or every rank raises (each sees that its value is not both the largest and the
  // smallest: 63 bits of h and of its complement, maximized over the ranks).
  void agree_on(uint64_t h) {
    const int64_t mine[2] = {static_cast<int64_t>(h >> 1), static_cast<int64_t>(~h >> 1)};
    int64_t all[2] = {mine[0], mine[1]};
    if (!tr_->allreduce_max(all, 2, dist::timeout_s())) lost(-1);
    if (all[0] != mine[0] || all[1] != mine[1])
      throw Error(
          "distributed: the ranks are not computing the same thing (each rank must build the "
          "same arrays, with the same values and KILN_* settings, and compute them in the same "
          "order; ComputeOptions::distributed = false computes on one rank alone)");
  }

  // A Buffer kept where its blocks were made (persist() of a distributed run), read beyond them
  // by this run: each rank sends its ranges to every other, in the ranges' order; afterwards the
  // buffer is whole on every rank (forgotten as kept once the run succeeded on every rank). Its
  // memory is the persisted array's own, allocated whole on every rank: the ranges received are
  // written in place. False: another rank failed.
  bool gather(int slot) {
    const void* data = params_[slot].ptr;
    std::shared_ptr<const dist::Residency> r = dist::residency(data);
    KILN_CHECK(r, "a gathered Buffer without its residency");
    const int me = tr_->rank();
    int64_t index = 0;
    for (const auto& g : r->ranges) {
      char* at = const_cast<char*>(static_cast<const char*>(data)) +
                 g.first * static_cast<int64_t>(r->element_size);
      const auto bytes = static_cast<size_t>(g.last - g.first + 1) * r->element_size;
      const MessageHead head{epoch_, -1 - index++};
      if (g.rank == me) {
        auto msg = std::make_shared<std::vector<char>>(sizeof head + bytes);
        std::memcpy(msg->data(), &head, sizeof head);
        std::memcpy(msg->data() + sizeof head, at, bytes);
        for (int q = 0; q < tr_->size(); ++q) {
          if (q == me) continue;
          tr_->send(q, dist::kData, msg);
          ++sent_[static_cast<size_t>(q)];
          ++counts_.messages_sent;
          counts_.bytes_sent += static_cast<int64_t>(bytes);
        }
        continue;
      }
      size_t got = 0;
      if (!await(g.rank, dist::kData, &got)) return false;
      std::vector<char> msg(sizeof head + bytes);
      tr_->recv(g.rank, dist::kData, msg.data(), msg.size());
      ++got_[static_cast<size_t>(g.rank)];
      ++counts_.messages_received;
      counts_.bytes_received += static_cast<int64_t>(bytes);
      MessageHead h;
      std::memcpy(&h, msg.data(), sizeof h);
      KILN_CHECK(h.epoch == head.epoch && h.task == head.task,
                 "distributed: a gather's message out of order");
      std::memcpy(at, msg.data() + sizeof head, bytes);
    }
    return true;
  }

  // A distributed run's send or receive of a task's pieces, in the trace (its wait included).
  void trace_transfer(const char* cat, const PlanTask& task, double start_us, int64_t bytes) {
    if (!trace_) return;
    TraceEvent e;
    e.name = std::string(cat) + " " + std::to_string(task.group);
    e.cat = cat;
    e.block = task.kind == TaskKind::Combine ? task.final_block : task.block;
    e.start_us = start_us;
    e.dur_us = trace_->now_us() - start_us;
    e.bytes = bytes;
    trace_->add(std::move(e));
  }

  // Calls f(first element, elements) for each contiguous run of a box's elements.
  template <class F>
  static void box_runs(const Piece& pc, F f) {
    const size_t r = pc.ext.size();
    for (int64_t e : pc.ext)
      if (e <= 0) return;
    const bool inner = r > 0 && pc.strides[r - 1] == 1;
    const size_t outer = inner ? r - 1 : r;
    const int64_t run = inner ? pc.ext[r - 1] : 1;
    std::vector<int64_t> idx(outer, 0);
    while (true) {
      int64_t at = pc.base;
      for (size_t d = 0; d < outer; ++d) at += idx[d] * pc.strides[d];
      f(at, run);
      size_t d = outer;
      while (d > 0 && ++idx[d - 1] == pc.ext[d - 1]) idx[--d] = 0;
      if (d == 0) return;
    }
  }

  void send_products(int t) {
    for (int dest : pl_->sends_to[t]) {
      size_t bytes = 0;
      for (const Piece& pc : pl_->pieces[t])
        if (std::binary_search(pc.to.begin(), pc.to.end(), dest)) bytes += pc.bytes;
      auto msg = std::make_shared<std::vector<char>>(sizeof(MessageHead) + bytes);
      const MessageHead head{epoch_, t};
      std::memcpy(msg->data(), &head, sizeof head);
      char* at = msg->data() + sizeof head;
      for (const Piece& pc : pl_->pieces[t]) {
        if (!std::binary_search(pc.to.begin(), pc.to.end(), dest)) continue;
        pack(pc, at);
        at += pc.bytes;
      }
      tr_->send(dest, dist::kData, std::move(msg));
      ++sent_[static_cast<size_t>(dest)];
      ++counts_.messages_sent;
      counts_.bytes_sent += static_cast<int64_t>(bytes);
    }
  }

  // Device plans (one device per rank: device 0) send from and receive into device memory: the
  // partials and blocks are there, and every whole array that is not host-homed.
  bool on_device(const Piece& pc) const {
    if (pc.kind == Piece::Kind::LibraryPartial) return blas_ != nullptr;  // GEMMs on the device
    return arena_ && (pc.kind != Piece::Kind::Box || !host_homed_[pc.id]);
  }

  void pack(const Piece& pc, char* to) {
    const bool dev = on_device(pc);
    auto copy = [&](char* dst, const char* src, size_t bytes) {
      if (dev)
        arena_->to_host(0, dst, src, bytes);
      else
        std::memcpy(dst, src, bytes);
    };
    switch (pc.kind) {
      case Piece::Kind::Partial:
        copy(to, static_cast<const char*>(dev ? dpart_[pc.id].get() : partial_[pc.id]), pc.bytes);
        return;
      case Piece::Kind::LibraryPartial:
        copy(to,
             static_cast<const char*>(dev ? library_dpart_[pc.id].get() : library_partial_[pc.id]),
             pc.bytes);
        return;
      case Piece::Kind::Block:
        copy(to, static_cast<const char*>(blocks_[p_.arrays[pc.id].block_offset + pc.block].get()),
             pc.bytes);
        return;
      case Piece::Kind::Box: {
        const char* from =
            static_cast<const char*>(dev ? rep_[rep_at(pc.id, 0)].get() : data_[pc.id].get());
        box_runs(pc, [&](int64_t at, int64_t n) {
          copy(to, from + at * static_cast<int64_t>(pc.es), static_cast<size_t>(n) * pc.es);
          to += static_cast<size_t>(n) * pc.es;
        });
        return;
      }
    }
  }

  void unpack(const Piece& pc, const char* from) {
    const bool dev = on_device(pc);
    auto copy = [&](char* dst, const char* src, size_t bytes) {
      if (dev)
        arena_->to_device(0, dst, src, bytes);
      else
        std::memcpy(dst, src, bytes);
    };
    switch (pc.kind) {
      case Piece::Kind::Partial:
        if (dev) {
          dpart_[pc.id] = arena_->buffer(0, pc.bytes);
          dpart_dev_[pc.id] = 0;
          copy(static_cast<char*>(dpart_[pc.id].get()), from, pc.bytes);
        } else {
          partial_[pc.id] = host_alloc(pc.bytes);
          copy(static_cast<char*>(partial_[pc.id]), from, pc.bytes);
        }
        return;
      case Piece::Kind::LibraryPartial:  // (freed by the LibrarySum, as one made here)
        if (dev) {
          library_dpart_[pc.id] = arena_->buffer(0, pc.bytes);
          copy(static_cast<char*>(library_dpart_[pc.id].get()), from, pc.bytes);
        } else {
          library_partial_[pc.id] = host_alloc(pc.bytes);
          copy(static_cast<char*>(library_partial_[pc.id]), from, pc.bytes);
        }
        return;
      case Piece::Kind::Block: {
        const size_t slot = static_cast<size_t>(p_.arrays[pc.id].block_offset + pc.block);
        auto& buf = blocks_[slot];
        if (dev) {
          buf = arena_->buffer(0, pc.bytes);
          block_dev_[slot] = 0;
          block_bytes_[slot] = pc.bytes;
        } else {
          buf = pool_.get(pc.bytes);
        }
        copy(static_cast<char*>(buf.get()), from, pc.bytes);
        return;
      }
      case Piece::Kind::Box: {
        char* to;
        if (dev) {
          to = static_cast<char*>(write_replica(pc.id, 0));
        } else {
          ensure_array(pc.id);
          to = static_cast<char*>(data_[pc.id].get());
        }
        box_runs(pc, [&](int64_t at, int64_t n) {
          copy(to + at * static_cast<int64_t>(pc.es), from, static_cast<size_t>(n) * pc.es);
          from += static_cast<size_t>(n) * pc.es;
        });
        return;
      }
    }
  }

  // Waits until a message from `from` (-1: any rank) is there on `channel`, or (data) another
  // rank's error notice is; false for the latter. A rank silent for timeout_s() is lost: the job
  // ends. Polls, yielding the core between probes (ranks may share cores).
  bool await(int from, int channel, size_t* bytes) {
    const auto start = std::chrono::steady_clock::now();
    int sender = 0;
    for (int spins = 0;; ++spins) {
      if (tr_->probe(from, channel, &sender, bytes)) return true;
      if (channel == dist::kData && tr_->probe(-1, dist::kErrorNotice, &sender, nullptr))
        return false;
      tr_->complete_sends(false);
      if (spins < 64) continue;
      if (spins < 4096) {
        sched_yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if ((spins & 255) == 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
              dist::timeout_s())
        lost(from);
    }
  }

  [[noreturn]] void lost(int from) {
    std::fprintf(stderr,
                 "kiln: rank %d of %d: waited %g s (KILN_MPI_TIMEOUT) for %s; it has died or "
                 "hangs: ending the job\n",
                 tr_->rank(), tr_->size(), dist::timeout_s(),
                 from >= 0 ? ("rank " + std::to_string(from)).c_str() : "the other ranks");
    std::fflush(stderr);
    tr_->abort(1);
    std::abort();  // (abort() does not return)
  }

  bool receive_products(int t, int owner) {
    size_t bytes = 0;
    if (!await(owner, dist::kData, &bytes)) return false;
    const int me = tr_->rank();
    size_t expected = sizeof(MessageHead);
    for (const Piece& pc : pl_->pieces[t])
      if (std::binary_search(pc.to.begin(), pc.to.end(), me)) expected += pc.bytes;
    std::vector<char> msg(expected);
    tr_->recv(owner, dist::kData, msg.data(), expected);
    ++got_[static_cast<size_t>(owner)];
    ++counts_.messages_received;
    counts_.bytes_received += static_cast<int64_t>(expected - sizeof(MessageHead));
    MessageHead head;
    std::memcpy(&head, msg.data(), sizeof head);
    KILN_CHECK(head.epoch == epoch_ && head.task == t,
               "distributed: rank " + std::to_string(owner) + " sent task " +
                   std::to_string(head.task) + " of run " + std::to_string(head.epoch) +
                   " where task " + std::to_string(t) + " of run " + std::to_string(epoch_) +
                   " was due");
    const char* at = msg.data() + sizeof head;
    for (const Piece& pc : pl_->pieces[t]) {
      if (!std::binary_search(pc.to.begin(), pc.to.end(), me)) continue;
      unpack(pc, at);
      at += pc.bytes;
    }
    return true;
  }

  // Another rank's task, here: what it reads is released, what this rank held for it is freed.
  void forget(const PlanTask& task) {
    switch (task.kind) {
      case TaskKind::Kernel:
      case TaskKind::Library:
        release_reads(task);
        return;
      case TaskKind::Combine:
        for (int id : task.partials_in) drop_partial(id);
        return;
      case TaskKind::LibrarySum:  // the partial products made here and sent to its rank
        for (int id : task.partials_in) drop_library_partial(id, task);
        return;
      case TaskKind::Start:
      case TaskKind::End:
        return;
    }
  }

  // Frees GEMM partial product `id` (of LibrarySum `sum`'s block) if this rank holds it.
  void drop_library_partial(int id, const PlanTask& sum) {
    if (arena_) library_dpart_[id].reset();
    if (!library_partial_[id]) return;
    host_free(library_partial_[id], library_partial_bytes(sum));
    library_partial_[id] = nullptr;
  }

  // Frees partial `id` if this rank holds it (on the host or, device plans, on its device).
  void drop_partial(int id) {
    if (arena_) dpart_[static_cast<size_t>(id)].reset();
    if (!partial_[id]) return;
    host_free(partial_[id], partial_bytes(id));
    partial_[id] = nullptr;
  }

  // This rank's error as (kind, text).
  std::pair<ErrorKind, std::string> own_error() const {
    try {
      std::rethrow_exception(error_);
    } catch (const Error& e) {
      return {e.kind(), e.what()};
    } catch (const std::exception& e) {
      return {ErrorKind::Value, e.what()};
    } catch (...) {
      return {ErrorKind::Value, "an unknown exception"};
    }
  }

  void notify_error() {
    auto [kind, text] = own_error();
    auto msg = std::make_shared<std::vector<char>>(1 + text.size());
    (*msg)[0] = static_cast<char>(kind);
    std::memcpy(msg->data() + 1, text.data(), text.size());
    for (int r = 0; r < tr_->size(); ++r)
      if (r != tr_->rank()) tr_->send(r, dist::kErrorNotice, msg);
  }

  // The end of every distributed run: the ranks agree whether one failed; if one did, each
  // drains the notices and data messages meant for it and raises the first failed rank's error.
  void finish(bool own_failed) {
    const int me = tr_->rank(), ranks = tr_->size();
    std::vector<int64_t> failed(static_cast<size_t>(ranks), 0);
    failed[static_cast<size_t>(me)] = own_failed ? 1 : 0;
    if (!tr_->allreduce_max(failed.data(), ranks, dist::timeout_s())) lost(-1);
    int first = -1;
    for (int r = 0; r < ranks && first < 0; ++r)
      if (failed[static_cast<size_t>(r)]) first = r;
    if (first < 0) {
      tr_->complete_sends(true);
      return;
    }
    auto [kind, text] = own_failed ? own_error() : std::pair<ErrorKind, std::string>{};
    for (int r = 0; r < ranks; ++r) {
      if (r == me || !failed[static_cast<size_t>(r)]) continue;
      size_t bytes = 0;
      await(r, dist::kErrorNotice, &bytes);
      const std::vector<char> notice = tr_->recv_any(r, dist::kErrorNotice);
      if (r == first && !notice.empty()) {
        kind = static_cast<ErrorKind>(notice[0]);
        text.assign(notice.data() + 1, notice.size() - 1);
      }
    }
    std::vector<int64_t> due(static_cast<size_t>(ranks), 0);
    tr_->alltoall(sent_.data(), due.data());
    for (int q = 0; q < ranks; ++q)
      for (; got_[static_cast<size_t>(q)] < due[static_cast<size_t>(q)];
           ++got_[static_cast<size_t>(q)]) {
        size_t bytes = 0;
        await(q, dist::kData, &bytes);
        (void)tr_->recv_any(q, dist::kData);  // (dropped)
      }
    tr_->complete_sends(true);
    error_ = std::make_exception_ptr(Error(
        text + " [on rank " + std::to_string(first) + " of " + std::to_string(ranks) + "]", kind));
  }

 public:
 private:
  // Plans that do not stream: runs t, then keeps going with one ready successor on this thread
  // and spawns the others (oneTBB's own deques, no shared ready set).
  void run_chain(tbb::task_group& tg, int t) {
    while (t >= 0) {
      execute(t);
      int cont = -1;
      for (int s : p_.tasks[t].next) {
        if (--waits_[s] != 0) continue;
        if (cont < 0)
          cont = s;
        else
          tg.run([this, &tg, s] { run_chain(tg, s); });
      }
      t = cont;
    }
  }

  // Plans that stream: one oneTBB task per ready task, which takes the best ready task (not
  // necessarily the one it was spawned for), runs it, and keeps going while its run makes tasks
  // ready, spawning one more oneTBB task for each further task made ready.
  void run_tasks(tbb::task_group& tg) {
    int t;
    {
      std::lock_guard<std::mutex> lock(ready_mu_);
      t = ready_.pop();
    }
    while (true) {
      execute(t);
      thread_local std::vector<int> now_ready;
      now_ready.clear();
      for (int s : p_.tasks[t].next)
        if (--waits_[s] == 0) now_ready.push_back(s);
      if (now_ready.empty()) return;
      {
        std::lock_guard<std::mutex> lock(ready_mu_);
        for (int s : now_ready) ready_.push(s);
        t = ready_.pop();
      }
      for (size_t k = 1; k < now_ready.size(); ++k) tg.run([this, &tg] { run_tasks(tg); });
    }
  }

  void execute(int t) {
    // Acquire what every task this one waited for wrote: the decrements of waits_[t] are a
    // release sequence. (TBB's own hand-off gives the same guarantee, but is invisible to
    // ThreadSanitizer, whose runtime does not see inside libtbb.)
    (void)waits_[t].load(std::memory_order_acquire);
    if (failed_.load(std::memory_order_relaxed)) return;
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) {
      fail(std::make_exception_ptr(Error("compute: cancelled")));
      return;
    }
    try {
      const PlanTask& task = p_.tasks[t];
      if (!needed_.empty() && !needed_[task.group]) {  // no wanted output depends on it
        if (task.kind == TaskKind::Kernel || task.kind == TaskKind::Library) release_reads(task);
        if (task.kind != TaskKind::Start && task.kind != TaskKind::End) progress_->step();
        return;
      }
      double start = trace_ ? trace_->now_us() : 0;
      int64_t bytes = 0;
      const char* cat = "";
      switch (task.kind) {
        case TaskKind::Start:
        case TaskKind::End:
          return;
        case TaskKind::Kernel:
          bytes = run_kernel(task);
          cat = "kernel";
          break;
        case TaskKind::Combine:
          bytes = run_combine(task);
          cat = "combine";
          break;
        case TaskKind::Library:
          bytes = run_library(task);
          cat = "library";
          break;
        case TaskKind::LibrarySum:
          bytes = run_library_sum(task);
          cat = "library-sum";
          break;
      }
      tasks_run_.fetch_add(1, std::memory_order_relaxed);
      progress_->step();
      if (trace_) {
        TraceEvent e;
        e.name = std::string(cat) + " " + std::to_string(task.group);
        e.cat = cat;
        e.worker = worker_index();
        e.block = task.kind == TaskKind::Combine ? task.final_block : task.block;
        e.start_us = start;
        e.dur_us = trace_->now_us() - start;
        e.bytes = bytes;
        trace_->add(std::move(e));
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::move(e);
    failed_ = true;
  }

 public:
  void cancel_on(const std::atomic<bool>* cancel) { cancel_ = cancel; }

 private:
  // Allocates array a on first use. Not std::call_once: libstdc++'s call_once never completes
  // when the callable throws (a failed allocation), and other tasks would wait on it forever.
  void ensure_array(int a) {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    if (data_[a]) return;
    const PlanArray& arr = p_.arrays[a];
    data_[a] = host_buffer(arr.bytes);  // a concatenation's pieces cover all of it
  }

  void release_reader(int a) {
    if (--readers_[a] != 0 || p_.arrays[a].output >= 0) return;
    data_[a].reset();
    if (!arena_) return;
    std::lock_guard<std::mutex> lock(dev_mu_);
    for (int d = 0; d < ndev_; ++d) rep_[rep_at(a, d)].reset();
  }
  void release_block_reader(int a, int64_t block) {
    int64_t slot = p_.arrays[a].block_offset + block;
    if (--block_readers_[slot] == 0) blocks_[slot].reset();
  }
  // What a Kernel or Library task reads, released after it ran (or was skipped).
  void release_reads(const PlanTask& task) {
    const PlanGroup& g = p_.groups[task.group];
    if (g.library < 0) {
      for (size_t l = 0; l < g.leaf_arrays.size(); ++l) {
        int a = g.leaf_arrays[l];
        if (a < 0) continue;
        if (!p_.arrays[a].blocked)
          release_reader(a);
        else if (int64_t b = g.block_read(task.block, l)[0]; b >= 0)
          release_block_reader(a, b);
      }
      return;
    }
    const PlanLibrary& l = p_.libraries[g.library];
    const size_t read = static_cast<size_t>(task.block * (l.k_starts.size() - 1) + task.split);
    for (const auto& [op, reads] : {std::pair{&l.a, &l.a_reads}, std::pair{&l.b, &l.b_reads}}) {
      if (op->array < 0) continue;
      if (reads->empty())
        release_reader(op->array);
      else if ((*reads)[read].block >= 0)
        release_block_reader(op->array, (*reads)[read].block);
    }
  }

  // Every buffer this run will allocate on the host fits the machine's memory, and so do the
  // outputs together: checked before anything is allocated, so that a size the machine cannot
  // hold is an error naming the array, not an allocation that fails halfway through the run (or
  // succeeds on overcommitted pages and ends in the OOM killer).
  void check_host_memory() const {
    const uint64_t memory = static_cast<uint64_t>(usable_memory());
    uint64_t outputs = 0;
    for (size_t a = 0; a < p_.arrays.size(); ++a) {
      const PlanArray& arr = p_.arrays[a];
      if (arr.blocked) {  // one buffer per block of its producer (on a device in device plans)
        if (arena_) continue;
        Shape largest;
        for (const auto& c : p_.groups[arr.producer].chunks)
          largest.push_back(c.empty() ? 0 : *std::max_element(c.begin(), c.end()));
        // At most the array's elements: its bytes were checked by the plan.
        uint64_t bytes = static_cast<uint64_t>(num_elements(largest)) * dtype_size(arr.dtype);
        if (bytes > memory)
          throw memory_error("a block " + shape_str(largest) + " of " + node_label(*arr.node),
                             bytes, memory);
        continue;
      }
      const bool host = !arena_ || host_homed_[a] || (arr.output >= 0 && !keep_);
      if (!host) continue;
      if (arr.bytes > memory)
        throw memory_error((arr.output >= 0 ? "the output " : "") + node_label(*arr.node),
                           arr.bytes, memory);
      if (arr.output >= 0) outputs += arr.bytes;  // each below 2^63: no wrap before the check
      if (outputs > memory) throw memory_error("the outputs together", outputs, memory);
    }
  }

  // ---- device plans (the backend has DeviceMemory) ----
  // Kernel blocks run on devices 0 ... ndev_ - 1, contiguous runs of blocks each (block b of
  // every group on the same device when the groups' grids match, so blocked arrays stay where
  // they are made). Where arrays live:
  // - a blocked array's block: on the device of the kernel block that wrote it; a reader on
  //   another device gets a copy between devices;
  // - a whole array written only by kernels, read by none but kernels, with one device: on it
  //   (device-homed), copied to the host at the end if it is an output;
  // - every other whole array (written or read by host tasks: reduction results, library calls;
  //   or written by kernels on several devices) is host-homed: kernel blocks write a replica on
  //   their device and copy their box to the host; kernels read a replica of the whole array,
  //   copied to their device once, at the first read;
  // - Buffer leaves: the elements the plan reads, copied to each device that reads them once;
  // - reduction partials: the identity set on the device (fill); folded there by the backend's
  //   combiner in the combine tree's order (partials on another device copied over), the result
  //   copied to the host by the final combine.
  void start_devices(backend::Backend& be, backend::DeviceMemory& m, int requested) {
    ndev_ = std::max(1, requested > 0 ? std::min(requested, m.max_count()) : m.count());
    arena_ = std::make_unique<DeviceArena>(m);
    for (const PlanReduce& r : p_.reduces) {
      combiners_.push_back(be.combiner(r.fn, r.acc));
      if (!combiners_.back())
        throw InternalError(std::string("device ") + device_name(p_.device) +
                            ": a backend with device memory returned no combiner");
    }
    dpart_.resize(p_.partials.size());
    dpart_dev_.assign(p_.partials.size(), 0);
    const size_t n = p_.arrays.size();
    host_homed_.assign(n, 0);
    gathered_.assign(n, 0);
    rep_.resize(n * static_cast<size_t>(ndev_));
    uploaded_.assign(n * static_cast<size_t>(ndev_), 0);
    block_dev_.assign(blocks_.size(), 0);
    block_bytes_.assign(blocks_.size(), 0);
    for (size_t a = 0; a < n; ++a) {
      const PlanArray& arr = p_.arrays[a];
      host_homed_[a] =
          !arr.blocked && (!arr.host_because.empty() || (ndev_ > 1 && arr.device_stored));
      // An output kept on the device, written on several: assembled on device 0, not the host.
      if (host_homed_[a] && arr.host_because.empty() && keep_ && arr.output >= 0) {
        host_homed_[a] = 0;
        gathered_[a] = 1;
      }
    }
    size_t slots = params_.size() * static_cast<size_t>(ndev_);
    slot_lo_.assign(slots, std::numeric_limits<int64_t>::max());
    slot_hi_.assign(slots, std::numeric_limits<int64_t>::min());
    slot_es_.assign(params_.size(), 0);
    slot_rep_.resize(slots);
    blas_ = p_.device_blas ? be.blas() : nullptr;
    lapack_ = p_.device_lapack ? be.lapack() : nullptr;
    random_ = p_.device_random ? be.random() : nullptr;
    library_dpart_.resize(static_cast<size_t>(p_.library_partials));
    for (const PlanGroup& g : p_.groups) {
      if (g.library >= 0) {
        library_slot_ranges(g);
        continue;
      }
      const kir::Kernel& k = g.lowered.kernel;
      for (size_t l = 0; l < k.leaves.size(); ++l) {
        const LeafBinding& b = g.lowered.leaves[l];
        if (k.leaves[l].kind != kir::LeafKind::Memory || g.leaf_arrays[l] >= 0) continue;
        slot_es_[b.slot] = dtype_size(k.leaves[l].dtype);
        for (int64_t block = 0; block < g.blocks; ++block) {  // the elements each device reads
          int64_t lo[32], ext[32];
          p_.block_box(g, block, lo, ext);
          int64_t first = b.offset, last = b.offset;
          bool empty = false;
          for (size_t d = 0; d < g.domain.size(); ++d) {
            empty |= ext[d] == 0;
            first += lo[d] * b.strides[d];
            last += lo[d] * b.strides[d];
            int64_t span = b.strides[d] * (ext[d] - 1);
            (span < 0 ? first : last) += span;
          }
          if (empty) continue;
          size_t at = slot_at(b.slot, device_of(g, block));
          slot_lo_[at] = std::min(slot_lo_[at], first);
          slot_hi_[at] = std::max(slot_hi_[at], last);
        }
      }
    }
  }

  // The elements of Buffer leaves that GEMM calls on the devices read in place, for the device
  // of each result block: A's rows of the block, B's columns (positive strides, all of k).
  void library_slot_ranges(const PlanGroup& g) {
    const PlanLibrary& l = p_.libraries[g.library];
    if (l.op == Op::Random) return;  // no operands
    if (l.op == Op::Linalg) {        // device 0 reads every element of its Buffer operands
      if (!l.on_device) return;
      for (const LibraryOperand* op : {&l.a, &l.b}) {
        const int64_t rows = op == &l.a ? l.m : l.b_rows, cols = op == &l.a ? l.n : l.k;
        if (!op->present() || op->array >= 0 || op->slot < 0 || rows == 0 || cols == 0) continue;
        const MatrixLayout& m = op->layout;
        const size_t at = slot_at(op->slot, 0);
        slot_es_[op->slot] = dtype_size(l.dtype);
        int64_t first = m.offset, last = m.offset;
        for (int64_t s : {(rows - 1) * m.row_stride, (cols - 1) * m.col_stride})
          (s < 0 ? first : last) += s;
        slot_lo_[at] = std::min(slot_lo_[at], first);
        slot_hi_[at] = std::max(slot_hi_[at], last);
      }
      return;
    }
    if (!blas_ || l.k == 0) return;
    for (int64_t block = 0; block < g.blocks; ++block) {
      int64_t lo[2], ext[2];
      p_.block_box(g, block, lo, ext);
      if (ext[0] == 0 || ext[1] == 0) continue;
      const int dev = device_of(g, block);
      for (const LibraryOperand* op : {&l.a, &l.b}) {
        if (op->array >= 0 || op->slot < 0) continue;
        const bool is_a = op == &l.a;
        const int64_t r0 = is_a ? lo[0] : 0, r1 = is_a ? lo[0] + ext[0] - 1 : l.k - 1;
        const int64_t c0 = is_a ? 0 : lo[1], c1 = is_a ? l.k - 1 : lo[1] + ext[1] - 1;
        const MatrixLayout& m = op->layout;
        const size_t at = slot_at(op->slot, dev);
        slot_es_[op->slot] = dtype_size(l.dtype);
        slot_lo_[at] = std::min(slot_lo_[at], m.offset + r0 * m.row_stride + c0 * m.col_stride);
        slot_hi_[at] = std::max(slot_hi_[at], m.offset + r1 * m.row_stride + c1 * m.col_stride);
      }
    }
  }

  size_t slot_at(int slot, int dev) const {
    return static_cast<size_t>(slot) * static_cast<size_t>(ndev_) + static_cast<size_t>(dev);
  }
  size_t rep_at(int a, int dev) const {
    return static_cast<size_t>(a) * static_cast<size_t>(ndev_) + static_cast<size_t>(dev);
  }
  int device_of(const PlanGroup& g, int64_t block) const {
    return ndev_ == 1 ? 0 : static_cast<int>(block * ndev_ / std::max<int64_t>(g.blocks, 1));
  }

  // Array a's buffer on device dev (allocated on first use; caller holds dev_mu_).
  void* replica(int a, int dev) {
    auto& r = rep_[rep_at(a, dev)];
    if (!r) r = arena_->buffer(dev, p_.arrays[a].bytes);
    return r.get();
  }
  void* write_replica(int a, int dev) {
    std::lock_guard<std::mutex> lock(dev_mu_);
    return replica(a, dev);
  }
  // Array a, whole, on device dev, for a kernel that reads it.
  void* read_replica(int a, int dev) {
    if (host_homed_[a]) ensure_array(a);
    std::lock_guard<std::mutex> lock(dev_mu_);
    void* r = replica(a, dev);
    if (host_homed_[a] && !uploaded_[rep_at(a, dev)]) {
      arena_->to_device(dev, r, data_[a].get(), p_.arrays[a].bytes);
      uploaded_[rep_at(a, dev)] = 1;
    } else if (gathered_[a] && dev != 0 && !uploaded_[rep_at(a, dev)]) {  // whole, from device 0
      arena_->between(dev, r, 0, replica(a, 0), p_.arrays[a].bytes);
      uploaded_[rep_at(a, dev)] = 1;
    }
    return r;
  }
  // Buffer leaf `slot` for device dev: the buffer itself where it is in dev's memory already,
  // else the elements dev's blocks read, slot_lo_ ... slot_hi_, copied in (from the host or the
  // device holding them). Returns the pointer and the element it starts at (readers subtract it
  // from their offsets).
  std::pair<void*, int64_t> slot_on(int slot, int dev) {
    const ParamValue& v = params_[slot];
    if (!v.place.on_host() && v.place.index == dev) return {const_cast<void*>(v.ptr), 0};
    const size_t at = slot_at(slot, dev);
    std::lock_guard<std::mutex> lock(dev_mu_);
    auto& r = slot_rep_[at];
    if (!r) {
      size_t es = slot_es_[slot];
      size_t bytes = static_cast<size_t>(slot_hi_[at] - slot_lo_[at] + 1) * es;
      const char* src = static_cast<const char*>(v.ptr) + slot_lo_[at] * es;
      r = arena_->buffer(dev, bytes);
      if (v.place.on_host())
        arena_->to_device(dev, r.get(), src, bytes);
      else
        arena_->between(dev, r.get(), v.place.index, src, bytes);
    }
    return {r.get(), slot_lo_[at]};
  }

  // Copies the elements base + sum idx[d] * strides[d] (idx < ext) of an array from device memory
  // to the same places in its host copy, in contiguous runs.
  void download_box(int dev, void* host, const void* device, size_t es, int64_t base, int rank,
                    const int64_t* ext, const int64_t* strides) {
    for_runs(base, rank, ext, strides, [&](int64_t at, int64_t run) {
      arena_->to_host(dev, static_cast<char*>(host) + at * es,
                      static_cast<const char*>(device) + at * es, static_cast<size_t>(run) * es);
    });
  }

  // The box (as download_box's) that a task on device dev wrote into its copy of array a, to where
  // a is assembled: the host for host-homed arrays, device 0 for gathered ones.
  void home_box(int a, int dev, const void* device, int64_t base, int rank, const int64_t* ext,
                const int64_t* strides) {
    const size_t es = dtype_size(p_.arrays[a].dtype);
    if (host_homed_[a]) {
      ensure_array(a);
      download_box(dev, data_[a].get(), device, es, base, rank, ext, strides);
    } else if (gathered_[a] && dev != 0) {
      char* home = static_cast<char*>(write_replica(a, 0));
      for_runs(base, rank, ext, strides, [&](int64_t at, int64_t run) {
        arena_->between(0, home + at * es, dev, static_cast<const char*>(device) + at * es,
                        static_cast<size_t>(run) * es);
      });
    }
  }

  static constexpr int64_t kUnitStride[1] = {1};  // a whole 1-D run (LAPACK's, cuRAND's results)

  // Calls f(first element, length) for each contiguous run of the elements base + sum idx[d] *
  // strides[d] (idx < ext).
  template <class F>
  static void for_runs(int64_t base, int rank, const int64_t* ext, const int64_t* strides, F f) {
    int64_t dims[32], str[32];
    int n = 0;
    for (int d = 0; d < rank; ++d) {
      if (ext[d] == 0) return;
      if (ext[d] > 1) {
        dims[n] = ext[d];
        str[n++] = strides[d];
      }
    }
    int64_t run = 1;
    while (n > 0 && str[n - 1] == run) run *= dims[--n];
    int64_t idx[32] = {0};
    while (true) {
      int64_t at = base;
      for (int d = 0; d < n; ++d) at += idx[d] * str[d];
      f(at, run);
      int d = n - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < dims[d]) break;
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }

  static bool is_arg(ReduceFn fn) { return fn == ReduceFn::ArgMin || fn == ReduceFn::ArgMax; }

  int64_t partial_elems(int id) const { return p_.partial_elems(id); }
  size_t partial_bytes(int id) const { return p_.partial_bytes(id); }
  static size_t index_offset(int64_t n, size_t value_size) {
    return Plan::index_offset(n, value_size);
  }

  void* new_partial(int id) {
    const PlanReduce& r = p_.reduces[p_.partials[id].first];
    int64_t n = partial_elems(id);
    void* mem = host_alloc(partial_bytes(id));
    with_element_type(r.acc, [&](auto z) {
      using T = decltype(z);
      std::fill_n(static_cast<T*>(mem), n, kir::reduce_identity<T>(r.fn, r.acc));
      if (is_arg(r.fn)) std::fill_n(arg_indices<T>(mem, n), n, int64_t{-1});
    });
    partial_[id] = mem;
    return mem;
  }

  // A device partial's start: the identity, and -1 indices for argmin/argmax, set on the device.
  void fill_identity(int dev, void* mem, int id) {
    const PlanReduce& r = p_.reduces[p_.partials[id].first];
    const int64_t n = partial_elems(id);
    with_element_type(r.acc, [&](auto z) {
      using T = decltype(z);
      const T identity = kir::reduce_identity<T>(r.fn, r.acc);
      uint64_t bits = 0;
      std::memcpy(&bits, &identity, sizeof(T));
      arena_->fill(dev, mem, bits, static_cast<int>(sizeof(T)), static_cast<size_t>(n));
      if (is_arg(r.fn))
        arena_->fill(dev, arg_indices<T>(mem, n), ~uint64_t{0}, 8, static_cast<size_t>(n));
    });
  }

  template <class T>
  static int64_t* arg_indices(void* partial, int64_t n) {
    return reinterpret_cast<int64_t*>(static_cast<char*>(partial) + index_offset(n, sizeof(T)));
  }

  // A flat group's block (PlanGroup::flat) as one row: each outer dim, innermost first, whose step
  // every leaf and output takes as the rows inside it together (stride = extent x stride of the
  // dims inside; a full reduction's partial has stride 0 everywhere) is folded into the innermost
  // dim's extent, its own extent becoming 1. The addresses the kernel computes are the same; it
  // runs them in one loop (a sum: one strip of 1024 after another).
  static void fold_contiguous_dims(const kir::Kernel& k, int64_t* I) {
    const int inner = k.rank - 1;
    for (int d = inner - 1; d >= 0; --d) {
      auto folds = [&](int base) {  // a map's strides follow its base at I[base]
        return I[base + 1 + d] == I[base + 1 + inner] * I[inner];
      };
      for (size_t l = 0; l < k.leaves.size(); ++l)
        if (!folds(k.leaf_base(static_cast<int>(l)))) return;
      for (size_t o = 0; o < k.outputs.size(); ++o)
        if (!folds(k.output_base(static_cast<int>(o)))) return;
      I[inner] *= I[d];
      I[d] = 1;
    }
  }

  // Runs one block's kernel; returns the bytes it wrote (stores and partials).
  int64_t run_kernel(const PlanTask& task) {
    const PlanGroup& g = p_.groups[task.group];
    const kir::Kernel& k = g.lowered.kernel;
    int r = k.rank;
    int64_t lo[32], ext[32];
    p_.block_box(g, task.block, lo, ext);
    thread_local std::vector<int64_t> I;
    thread_local std::vector<double> F;
    thread_local std::vector<void*> P;
    I.assign(k.num_ints(), 0);
    F.assign(k.params.size(), 0);
    P.assign(k.num_pointer_slots(), nullptr);
    for (int d = 0; d < r; ++d) I[d] = ext[d];
    const int dev = arena_ ? device_of(g, task.block) : 0;
    int64_t block_elems = 1;
    for (int d = 0; d < r; ++d) block_elems *= ext[d];
    // Device plans: copies from other devices this launch reads.
    thread_local std::vector<std::shared_ptr<void>> held;
    held.clear();
    for (size_t l = 0; l < k.leaves.size(); ++l) {
      const LeafBinding& b = g.lowered.leaves[l];
      int at = k.leaf_base(static_cast<int>(l));
      int a = g.leaf_arrays[l];
      if (a >= 0 && p_.arrays[a].blocked) {  // one block of it, under the block's own map
        const int64_t* br = g.block_read(task.block, l);  // block, base, strides
        std::copy(br + 1, br + 2 + r, &I[at]);
        int64_t slot = br[0] >= 0 ? p_.arrays[a].block_offset + br[0] : -1;
        void* ptr = slot >= 0 ? blocks_[slot].get() : nullptr;
        if (arena_ && slot >= 0 && block_dev_[slot] != dev) {  // made on another device
          held.push_back(arena_->buffer(dev, block_bytes_[slot]));
          arena_->between(dev, held.back().get(), block_dev_[slot], ptr, block_bytes_[slot]);
          ptr = held.back().get();
        }
        P[k.leaves[l].pointer] = ptr;
        continue;
      }
      int64_t base = b.offset;
      for (int d = 0; d < r; ++d) {
        base += lo[d] * b.strides[d];
        I[at + 1 + d] = b.strides[d];
      }
      I[at] = base;
      if (k.leaves[l].kind != kir::LeafKind::Memory) continue;
      if (!arena_) {
        P[k.leaves[l].pointer] = a >= 0 ? data_[a].get() : const_cast<void*>(params_[b.slot].ptr);
      } else if (a >= 0) {
        P[k.leaves[l].pointer] = read_replica(a, dev);
      } else if (block_elems > 0) {
        auto [ptr, first] = slot_on(b.slot, dev);
        P[k.leaves[l].pointer] = ptr;
        I[at] -= first;
      }
    }
    for (size_t o = 0; o < k.outputs.size(); ++o) {
      int at = k.output_base(static_cast<int>(o));
      if (k.outputs[o].reduce) {
        int pid = p_.partial_of[task.group][task.block][reduce_index(g, o)];
        void* mem = nullptr;
        if (arena_) {  // the identity set there; the partial stays there (combine_on_device)
          std::shared_ptr<void> d = arena_->buffer(dev, partial_bytes(pid));
          fill_identity(dev, d.get(), pid);
          dpart_[pid] = d;
          dpart_dev_[pid] = dev;
          mem = d.get();
        } else {
          mem = new_partial(pid);
        }
        P[k.output_pointer(o)] = mem;
        if (k.outputs[o].index_value >= 0)
          P[k.index_pointer(o)] = static_cast<char*>(mem) +
                                  index_offset(partial_elems(pid), dtype_size(k.outputs[o].type));
        // Partial layout: the block's extents with reduced dims collapsed, C order.
        uint32_t mask = k.outputs[o].reduced_mask;
        int64_t s = 1;
        for (int d = r - 1; d >= 0; --d) {
          bool red = (mask >> d) & 1u;
          I[at + 1 + d] = red ? 0 : s;
          if (!red) s *= ext[d];
        }
        I[at] = 0;
      } else if (p_.arrays[g.output_arrays[o]].blocked) {  // this block's own buffer, C order
        const PlanArray& arr = p_.arrays[g.output_arrays[o]];
        int64_t elems = 1;
        for (int d = 0; d < r; ++d) elems *= ext[d];
        auto& buf = blocks_[arr.block_offset + task.block];
        // At most the array's bytes, which the plan checked fit (checked::bytes) before any run.
        auto checked_bytes = checked::bytes(elems, dtype_size(arr.dtype));
        KILN_CHECK(checked_bytes && *checked_bytes <= arr.bytes, "a block larger than its array");
        size_t bytes = *checked_bytes;
        if (arena_) {
          buf = arena_->buffer(dev, bytes);
          block_dev_[arr.block_offset + task.block] = dev;
          block_bytes_[arr.block_offset + task.block] = bytes;
        } else {
          buf = pool_.get(bytes);
        }
        P[k.output_pointer(o)] = buf.get();
        int64_t s = 1;
        for (int d = r - 1; d >= 0; --d) {
          I[at + 1 + d] = s;
          s *= ext[d];
        }
        I[at] = 0;
      } else {
        int a = g.output_arrays[o];
        if (arena_) {
          P[k.output_pointer(o)] = write_replica(a, dev);
        } else {
          ensure_array(a);
          P[k.output_pointer(o)] = data_[a].get();
        }
        const OutputBinding& ob = g.lowered.outputs[o];
        int64_t base = ob.offset;
        for (int d = 0; d < r; ++d) {
          base += lo[d] * ob.strides[d];
          I[at + 1 + d] = ob.strides[d];
        }
        I[at] = base;
      }
    }
    for (size_t q = 0; q < k.params.size(); ++q) {
      const ParamValue& v = params_[g.lowered.param_slots[q]];
      F[q] = v.f;
      I[k.param_base() + q] = v.i;
    }
    if (g.flat) fold_contiguous_dims(k, I.data());
    g.kernel->launch(I.data(), F.data(), P.data(), dev);
    if (arena_) {  // the boxes it wrote to where their arrays are assembled (home_box)
      for (size_t o = 0; o < k.outputs.size(); ++o) {
        int a = g.output_arrays[o];
        if (k.outputs[o].reduce || p_.arrays[a].blocked) continue;
        int at = k.output_base(static_cast<int>(o));
        home_box(a, dev, P[k.output_pointer(o)], I[at], r, ext, &I[at + 1]);
      }
      held.clear();
    }
    release_reads(task);
    for (size_t o = 0; o < k.outputs.size(); ++o) {  // blocks nobody reads (sliced away)
      if (k.outputs[o].reduce) continue;
      const PlanArray& arr = p_.arrays[g.output_arrays[o]];
      if (arr.blocked && arr.block_readers[task.block] == 0)
        blocks_[arr.block_offset + task.block].reset();
    }
    int64_t elems = 1, bytes = 0;
    for (int d = 0; d < r; ++d) elems *= ext[d];
    for (size_t o = 0; o < k.outputs.size(); ++o)
      bytes += k.outputs[o].reduce ? static_cast<int64_t>(partial_bytes(
                                         p_.partial_of[task.group][task.block][reduce_index(g, o)]))
                                   : elems * static_cast<int64_t>(dtype_size(k.outputs[o].type));
    return bytes;
  }

  // A library operand's region: in its whole buffer, or (a streamed operand) in one of its blocks.
  struct Region {
    const char* data;
    const MatrixLayout* layout;
  };
  // The blocks one GEMM call reads, copied for it (to the host, or to its device): a block both
  // operands read (a Gram product's) is copied once, so the call still sees one operand.
  struct CallCopies {
    std::shared_ptr<void> mem[2];
    int64_t slot[2] = {-1, -1};
    // Operand o's copy of block `s`, made by copy() unless operand 0 has it already.
    template <class Copy>
    const void* get(int o, int64_t s, Copy copy) {
      if (o == 1 && slot[0] == s)
        mem[1] = mem[0];
      else
        mem[o] = copy();
      slot[o] = s;
      return mem[o].get();
    }
  };

  // One BLAS call of a library task: its result block's rows and columns, its contraction split,
  // into the result (split 0, or every split of a chained call) or a partial. Returns the bytes
  // it wrote.
  int64_t run_library(const PlanTask& task) {
    const PlanGroup& g = p_.groups[task.group];
    const PlanLibrary& l = p_.libraries[g.library];
    if (l.op == Op::Linalg) return run_lapack(task, l);
    if (l.op == Op::Random) return run_curand(task, l);
    if (blas_) return run_library_on_device(task, l);
    int64_t lo[2], ext[2];
    p_.block_box(g, task.block, lo, ext);
    int64_t k0 = l.k_starts[task.split], kn = l.k_starts[task.split + 1] - k0;
    const size_t es = dtype_size(l.dtype);
    const size_t read = static_cast<size_t>(task.block * (l.k_starts.size() - 1) + task.split);
    CallCopies staged;  // device plans without DeviceBlas: blocks copied to the host for the call
    auto region = [&](const LibraryOperand& op, const std::vector<LibraryRead>& reads, int64_t row,
                      int64_t col) -> Region {
      if (!reads.empty()) {
        const LibraryRead& r = reads[read];
        int64_t slot = r.block >= 0 ? p_.arrays[op.array].block_offset + r.block : -1;
        const void* block = slot >= 0 ? blocks_[slot].get() : nullptr;
        if (arena_ && block)
          block = staged.get(&op == &l.a ? 0 : 1, slot, [&] {
            std::shared_ptr<void> h = host_buffer(block_bytes_[slot]);
            arena_->to_host(block_dev_[slot], h.get(), block, block_bytes_[slot]);
            return h;
          });
        const char* data = static_cast<const char*>(block);
        return {data ? data + r.layout.offset * es : nullptr, &r.layout};
      }
      const char* base = static_cast<const char*>(
          operand_data(op, &op == &l.a ? l.m : l.k, &op == &l.a ? l.k : l.n, l.dtype));
      const MatrixLayout& m = op.layout;
      return {base ? base + (m.offset + row * m.row_stride + col * m.col_stride) * es : nullptr,
              &m};
    };
    Region a = region(l.a, l.a_reads, lo[0], k0), b = region(l.b, l.b_reads, k0, lo[1]);
    void* c;
    int64_t ldc;
    if (task.partial_out < 0) {
      ensure_array(l.out);
      c = static_cast<char*>(data_[l.out].get()) + (l.out_offset + lo[0] * l.n + lo[1]) * es;
      ldc = l.n;  // a concatenation it is placed in continues its rows (fuse: contiguous)
    } else {
      c = host_alloc(static_cast<size_t>(ext[0] * ext[1]) * es);
      library_partial_[task.partial_out] = c;
      ldc = ext[1];
    }
    bool accumulate = l.chained && task.split > 0;
    library::gemm(l.dtype, a.layout->transposed, b.layout->transposed, ext[0], ext[1], kn, a.data,
                  a.layout->ld, b.data, b.layout->ld, c, ldc, accumulate);
    release_reads(task);
    return ext[0] * ext[1] * static_cast<int64_t>(es);
  }

  // One GEMM call of a library task on the device of its block (device_of), through the
  // backend's DeviceBlas: operands where they are (a streamed block made on another device, a
  // whole array or a Buffer leaf copied to this device first, as for kernels), the result into
  // the device's replica of the result array or into a partial on the device. A host-homed
  // result (several devices) gets the block's box back once the block is final.
  int64_t run_library_on_device(const PlanTask& task, const PlanLibrary& l) {
    const PlanGroup& g = p_.groups[task.group];
    int64_t lo[2], ext[2];
    p_.block_box(g, task.block, lo, ext);
    const int dev = device_of(g, task.block);
    const int64_t k0 = l.k_starts[task.split], kn = l.k_starts[task.split + 1] - k0;
    const size_t es = dtype_size(l.dtype);
    const size_t read = static_cast<size_t>(task.block * (l.k_starts.size() - 1) + task.split);
    const bool empty = kn == 0 || ext[0] == 0 || ext[1] == 0;  // reads nothing
    CallCopies held;  // blocks made on other devices, copied to this one
    auto region = [&](const LibraryOperand& op, const std::vector<LibraryRead>& reads, int64_t row,
                      int64_t col) -> Region {
      if (empty) return {nullptr, reads.empty() ? &op.layout : &reads[read].layout};
      if (!reads.empty()) {
        const LibraryRead& r = reads[read];
        if (r.block < 0) return {nullptr, &r.layout};
        const int64_t slot = p_.arrays[op.array].block_offset + r.block;
        const void* block = blocks_[slot].get();
        if (block_dev_[slot] != dev)
          block = held.get(&op == &l.a ? 0 : 1, slot, [&] {
            std::shared_ptr<void> d = arena_->buffer(dev, block_bytes_[slot]);
            arena_->between(dev, d.get(), block_dev_[slot], block, block_bytes_[slot]);
            return d;
          });
        return {static_cast<const char*>(block) + r.layout.offset * static_cast<int64_t>(es),
                &r.layout};
      }
      const MatrixLayout& m = op.layout;
      const char* base;
      int64_t first = 0;
      if (op.array >= 0) {
        base = static_cast<const char*>(read_replica(op.array, dev));
      } else {
        auto [ptr, f] = slot_on(op.slot, dev);
        base = static_cast<const char*>(ptr);
        first = f;
      }
      return {base + (m.offset - first + row * m.row_stride + col * m.col_stride) *
                         static_cast<int64_t>(es),
              &m};
    };
    Region a = region(l.a, l.a_reads, lo[0], k0), b = region(l.b, l.b_reads, k0, lo[1]);
    void* c;
    int64_t ldc;
    if (task.partial_out < 0) {
      c = device_result_at(l, dev, lo);
      ldc = l.n;
    } else {
      std::shared_ptr<void> d = arena_->buffer(dev, static_cast<size_t>(ext[0] * ext[1]) * es);
      c = d.get();
      library_dpart_[task.partial_out] = std::move(d);
      ldc = ext[1];
    }
    blas_->gemm(dev, l.dtype, a.layout->transposed, b.layout->transposed, ext[0], ext[1], kn,
                a.data, a.layout->ld, b.data, b.layout->ld, c, ldc, l.chained && task.split > 0);
    const int64_t splits = static_cast<int64_t>(l.k_starts.size()) - 1;
    if (task.partial_out < 0 && (splits == 1 || (l.chained && task.split == splits - 1)))
      download_library_box(l, dev, lo, ext);
    release_reads(task);
    return ext[0] * ext[1] * static_cast<int64_t>(es);
  }

  // Where result block (lo[0], lo[1]) of a library call starts in its array's copy on device dev.
  char* device_result_at(const PlanLibrary& l, int dev, const int64_t* lo) {
    return static_cast<char*>(write_replica(l.out, dev)) +
           (l.out_offset + lo[0] * l.n + lo[1]) * static_cast<int64_t>(dtype_size(l.dtype));
  }

  // A final block of a library result on device dev to where its array is assembled.
  void download_library_box(const PlanLibrary& l, int dev, const int64_t* lo, const int64_t* ext) {
    const int64_t strides[2] = {l.n, 1};
    home_box(l.out, dev, write_replica(l.out, dev), l.out_offset + lo[0] * l.n + lo[1], 2, ext,
             strides);
  }

  // A library operand's memory (rows x cols under its layout): a materialized array or a Buffer
  // leaf's pointer; a Buffer in device memory is copied to the host once per run, what the
  // layout reaches of it.
  const void* operand_data(const LibraryOperand& op, int64_t rows, int64_t cols, DType t) {
    if (op.array >= 0) return data_[op.array].get();
    const ParamValue& v = params_[op.slot];
    if (v.place.on_host() || rows == 0 || cols == 0) return v.ptr;
    const MatrixLayout& m = op.layout;
    size_t bytes =
        static_cast<size_t>(m.offset + (rows - 1) * m.row_stride + (cols - 1) * m.col_stride + 1) *
        dtype_size(t);
    std::lock_guard<std::mutex> lock(dev_mu_);
    auto& h = host_slots_[op.slot];
    if (!h.second || h.first < bytes) {
      h = {bytes, host_buffer(bytes)};
      arena_->to_host(v.place.index, h.second.get(), v.ptr, bytes);
    }
    return h.second.get();
  }

  // A LAPACK call on its whole operands, into the packed result: on the host, or through the
  // backend's DeviceLapack on device 0 (operands copied there as for kernels, the result into
  // the device's copy of its array, and to the host where the array is host-homed). Returns the
  // bytes it wrote.
  int64_t run_lapack(const PlanTask& task, const PlanLibrary& l) {
    constexpr int dev = 0;
    auto ref = [&](const LibraryOperand& op, int64_t rows, int64_t cols) {
      library::MatrixRef r;
      r.rows = rows;
      r.cols = cols;
      r.offset = op.layout.offset;
      r.row_stride = op.layout.row_stride;
      r.col_stride = op.layout.col_stride;
      if (!l.on_device) {
        r.data = operand_data(op, rows, cols, l.dtype);
      } else if (op.array >= 0) {
        r.data = read_replica(op.array, dev);
      } else if (rows > 0 && cols > 0) {
        auto [ptr, first] = slot_on(op.slot, dev);
        r.data = ptr;
        r.offset -= first;
      }
      return r;
    };
    library::MatrixRef a = ref(l.a, l.m, l.n), b;
    if (l.b.present()) b = ref(l.b, l.b_rows, l.k);
    const size_t es = dtype_size(l.dtype);
    const int64_t count = num_elements(l.call->shape);
    const int threads = l.exclusive ? threads_ : 1;
    if (l.on_device) {
      lapack_->lapack(dev, l.fn, l.dtype, a, l.b.present() ? &b : nullptr,
                      static_cast<char*>(write_replica(l.out, dev)) + l.out_offset * es,
                      static_cast<size_t>(count) * es, threads);
      home_box(l.out, dev, write_replica(l.out, dev), l.out_offset, 1, &count, kUnitStride);
    } else {
      ensure_array(l.out);
      library::lapack(l.fn, l.dtype, a, l.b.present() ? &b : nullptr,
                      static_cast<char*>(data_[l.out].get()) + l.out_offset * es, threads);
    }
    release_reads(task);
    return count * static_cast<int64_t>(es);
  }

  // A cuRAND call filling its whole array: through the backend's DeviceRandom on device 0 (the
  // result into the device's copy, and to the host where the array is host-homed), or by cuRAND's
  // host generator. Returns the bytes it wrote.
  int64_t run_curand(const PlanTask& task, const PlanLibrary& l) {
    constexpr int dev = 0;
    const uint64_t seed =
        library::curand_seed(static_cast<uint64_t>(params_[l.seed_slot].i), l.stream);
    const int64_t count = l.m;
    if (random_) {
      auto* out = static_cast<double*>(write_replica(l.out, dev)) + l.out_offset;
      random_->generate(dev, l.random, seed, 0, count, out);
      home_box(l.out, dev, write_replica(l.out, dev), l.out_offset, 1, &count, kUnitStride);
    } else {
      ensure_array(l.out);
      library::curand_host(l.random, seed, 0, count,
                           static_cast<double*>(data_[l.out].get()) + l.out_offset);
    }
    release_reads(task);
    return count * static_cast<int64_t>(sizeof(double));
  }

  // Adds a result block's partials (splits 1, 2, ...) to it, in split order; frees them.
  int64_t run_library_sum(const PlanTask& task) {
    const PlanGroup& g = p_.groups[task.group];
    const PlanLibrary& l = p_.libraries[g.library];
    int64_t lo[2], ext[2];
    p_.block_box(g, task.block, lo, ext);
    const size_t es = dtype_size(l.dtype);
    if (blas_) {  // on the device of the block's calls
      const int dev = device_of(g, task.block);
      void* c = device_result_at(l, dev, lo);
      for (int id : task.partials_in) {
        blas_->add_into(dev, l.dtype, ext[0], ext[1], c, l.n, library_dpart_[id].get());
        library_dpart_[id].reset();
      }
      download_library_box(l, dev, lo, ext);
      return ext[0] * ext[1] * static_cast<int64_t>(es);
    }
    void* c = static_cast<char*>(data_[l.out].get()) + (l.out_offset + lo[0] * l.n + lo[1]) * es;
    for (int id : task.partials_in) {
      library::add_into(l.dtype, ext[0], ext[1], c, l.n, library_partial_[id]);
      drop_library_partial(id, task);
    }
    return ext[0] * ext[1] * static_cast<int64_t>(es);
  }

  size_t library_partial_bytes(const PlanTask& task) const {
    const PlanGroup& g = p_.groups[task.group];
    int64_t lo[2], ext[2];
    p_.block_box(g, task.block, lo, ext);
    return static_cast<size_t>(ext[0] * ext[1]) * dtype_size(p_.libraries[g.library].dtype);
  }

  static int reduce_index(const PlanGroup& g, size_t o) {
    int k = 0;
    for (size_t q = 0; q < o; ++q) k += g.lowered.kernel.outputs[q].reduce ? 1 : 0;
    return k;
  }

  // Folds partials; returns the bytes of one partial (what it produces).
  int64_t run_combine(const PlanTask& task) {
    const PlanReduce& r = p_.reduces[task.reduce];
    int64_t n = partial_elems(task.partials_in[0]);
    auto bytes = static_cast<int64_t>(partial_bytes(task.partials_in[0]));
    size_t folded = task.partials_in.size();  // partials still to fold on the host: 1 ... folded
    if (arena_) {
      if (!combine_on_device(task, n)) return bytes;  // its partial stays on the device
      folded = 1;  // the result is on the host now, in the first partial
    }
    with_element_type(r.acc, [&](auto z) {
      using T = decltype(z);
      void* first = partial_[task.partials_in[0]];
      T* acc = static_cast<T*>(first);
      int64_t* acc_idx = is_arg(r.fn) ? arg_indices<T>(first, n) : nullptr;
      for (size_t q = 1; q < folded; ++q) {
        void* other = partial_[task.partials_in[q]];
        const T* in = static_cast<const T*>(other);
        if (acc_idx) {
          // Blocks are not in flat-index order when an inner dim is chunked: on a tie (equal
          // values, or two NaNs) the smaller index wins, as NumPy returns the first occurrence.
          const int64_t* in_idx = arg_indices<T>(other, n);
          for (int64_t e = 0; e < n; ++e)
            kir::arg_combine(r.fn, acc[e], acc_idx[e], in[e], in_idx[e]);
        } else {
          for (int64_t e = 0; e < n; ++e) acc[e] = kir::reduce_fold(r.fn, acc[e], in[e]);
        }
      }
      if (task.partial_out >= 0) {
        partial_[task.partial_out] = first;  // reuse the first partial's memory
        partial_[task.partials_in[0]] = nullptr;
      } else if (acc_idx) {
        write_result(r, task.final_block, acc_idx);
      } else {
        write_result(r, task.final_block, acc);
      }
    });
    for (size_t q = (task.partial_out >= 0 ? 1 : 0); q < task.partials_in.size(); ++q)
      drop_partial(task.partials_in[q]);
    return bytes;
  }

  // Device plans: folds the task's partials on the device of its first (others
  // copied there from other devices), in the host's order. A combine into a partial leaves it
  // there (returns false); the final one copies the result to the host, into the first partial's
  // host buffer (returns true).
  bool combine_on_device(const PlanTask& task, int64_t n) {
    const PlanReduce& r = p_.reduces[task.reduce];
    const int id0 = task.partials_in[0];
    const int dev = dpart_dev_[id0];
    const size_t bytes = partial_bytes(id0);
    const size_t index_at = is_arg(r.fn) ? index_offset(n, dtype_size(r.acc)) : 0;
    for (size_t q = 1; q < task.partials_in.size(); ++q) {
      int id = task.partials_in[q];
      void* in = dpart_[id].get();
      std::shared_ptr<void> copy;
      if (dpart_dev_[id] != dev) {
        copy = arena_->buffer(dev, bytes);
        arena_->between(dev, copy.get(), dpart_dev_[id], in, bytes);
        in = copy.get();
      }
      combiners_[task.reduce]->combine(dev, dpart_[id0].get(), in, n, index_at);
      dpart_[id].reset();
    }
    if (task.partial_out >= 0) {
      dpart_[task.partial_out] = std::move(dpart_[id0]);
      dpart_dev_[task.partial_out] = dev;
      return false;
    }
    partial_[id0] = host_alloc(bytes);
    arena_->to_host(dev, partial_[id0], dpart_[id0].get(), bytes);
    dpart_[id0].reset();
    return true;
  }

  // Copies a combined partial into the reduction's result array (scaling for mean), a row of
  // the region's innermost dim at a time: a row reduction's result (X b of a GLM pass, 8 bytes a
  // row of X) is as long as the array has rows, and indexing each element through every dim
  // took 5% of a logistic gradient's compute over a 100000 x 100 block.
  template <class T>
  void write_result(const PlanReduce& r, int64_t block, const T* acc) {
    ensure_array(r.array);
    std::vector<int64_t> dims, strides;
    const int64_t base = p_.result_region(r, block, &dims, &strides);
    void* out = data_[r.array].get();
    // float32 sums were accumulated in float64: rounded once, here.
    const bool narrow = std::is_same_v<T, double> && r.out == DType::Float32;
    const int64_t n = num_elements(dims);
    if (n == 0) return;
    if (dims.empty()) {  // a scalar result: one row of one element
      dims = {1};
      strides = {1};
    }
    const int64_t inner = dims.back(), step = strides.back();
    auto row = [&](const T* in, auto* to) {
      using U = std::remove_pointer_t<decltype(to)>;
      if (r.fn == ReduceFn::Mean) {
        if constexpr (std::is_floating_point_v<T>) {
          const T nan = std::numeric_limits<T>::quiet_NaN(), count = static_cast<T>(r.count);
          for (int64_t e = 0; e < inner; ++e)
            to[e * step] = static_cast<U>(r.count > 0 ? static_cast<T>(in[e] / count) : nan);
          return;
        }
      }
      for (int64_t e = 0; e < inner; ++e) to[e * step] = static_cast<U>(in[e]);
    };
    std::vector<int64_t> idx(dims.size(), 0);  // the outer dims' index; the innermost stays 0
    for (int64_t e = 0; e < n; e += inner) {
      int64_t addr = base;
      for (size_t d = 0; d + 1 < dims.size(); ++d) addr += idx[d] * strides[d];
      if (narrow)
        row(acc + e, static_cast<float*>(out) + addr);
      else
        row(acc + e, static_cast<T*>(out) + addr);
      for (size_t d = dims.size() - 1; d-- > 0;) {
        if (++idx[d] < dims[d]) break;
        idx[d] = 0;
      }
    }
  }

  static int worker_index() {
    if (!kUseTbb) {
      static std::atomic<int> next{0};
      thread_local int id = next++;
      return id;
    }
    int i = tbb::this_task_arena::current_thread_index();
    return i == tbb::task_arena::not_initialized ? 0 : i;
  }

  const Plan& p_;
  const std::vector<ParamValue>& params_;
  Trace* trace_;
  Progress* progress_;
  std::vector<std::shared_ptr<void>> data_;
  std::mutex alloc_mu_;
  std::vector<bool> skipped_;  // per output: not computed (ComputeOptions::skip)
  std::vector<bool> needed_;   // per group: runs (empty: every group)
  std::unique_ptr<std::atomic<int>[]> readers_;
  BlockPool pool_;                             // before blocks_: outlives their deleters
  std::vector<std::shared_ptr<void>> blocks_;  // blocked arrays' blocks (PlanArray::block_offset)
  std::unique_ptr<std::atomic<int>[]> block_readers_;
  std::unique_ptr<std::atomic<int>[]> waits_;
  std::mutex ready_mu_;  // guards ready_ when several threads run
  ReadySet ready_;
  std::vector<void*> partial_;
  std::vector<void*> library_partial_;       // Library tasks' partials, until their LibrarySum
  backend::DeviceBlas* blas_ = nullptr;      // device plans: GEMM calls on the devices
  backend::DeviceLapack* lapack_ = nullptr;  // and LAPACK calls on device 0
  backend::DeviceRandom* random_ = nullptr;  // and cuRAND calls on device 0
  std::vector<std::shared_ptr<void>> library_dpart_;  // their partials, on the devices
  // Device plans (start_devices): the arena, and where arrays, blocks and Buffer leaves are.
  std::unique_ptr<DeviceArena> arena_;
  int ndev_ = 1;
  std::mutex dev_mu_;                // guards rep_, uploaded_, slot_rep_
  std::vector<uint8_t> host_homed_;  // per array
  std::vector<uint8_t> gathered_;    // per array: a kept output assembled on device 0 (several)
  std::vector<std::shared_ptr<void>> rep_;  // per array and device (rep_at)
  // Per array and device: the whole array copied in (from the host, or from device 0).
  std::vector<uint8_t> uploaded_;
  std::vector<int> block_dev_;              // per blocked array block: its device
  std::vector<size_t> block_bytes_;         // per blocked array block: its size
  std::vector<int64_t> slot_lo_, slot_hi_;  // per template slot: elements read (Buffer leaves)
  std::vector<size_t> slot_es_;
  std::vector<std::shared_ptr<void>> slot_rep_;                         // per slot and device
  std::map<int, std::pair<size_t, std::shared_ptr<void>>> host_slots_;  // device Buffers, staged
  std::vector<std::shared_ptr<const backend::Combiner>> combiners_;     // per PlanReduce, or null
  std::vector<std::shared_ptr<void>> dpart_;                            // partials on devices
  std::vector<int> dpart_dev_;
  bool keep_ = false;  // keep_on_device
  int threads_ = 1;    // of this run: exclusive LAPACK calls use them all
  std::atomic<bool> failed_{false};
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t> tasks_run_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
  // Distributed runs (run_distributed).
  dist::Transport* tr_ = nullptr;
  const Placement* pl_ = nullptr;
  uint64_t epoch_ = 0;
  std::vector<int64_t> sent_, got_;  // per rank: data messages sent to it, received from it
  DistCounts counts_;
};

}  // namespace

RunResult execute(const Plan& plan, const std::vector<ParamValue>& params, const RunOptions& opt) {
  const bool distributed = opt.transport && opt.transport->size() > 1;
  Progress progress(plan.work_tasks, opt.progress, opt.tasks_done, opt.tasks_total);
  std::optional<backend::HostTimer> setup(std::in_place, "run: setup");
  // A distributed device plan: one device per rank, its device 0 (numbered from the rank's place
  // on its machine: DeviceMemory::ordinal).
  Run run(plan, params, opt.trace, &progress, distributed ? 1 : opt.devices, opt.keep_on_device);
  if (opt.skip) run.skip_outputs(*opt.skip);
  run.cancel_on(opt.cancel);
  setup.reset();
  DistCounts dist;
  std::shared_ptr<const Placement> pl;
  {
    backend::HostTimer timer("run: tasks");
    if (distributed) {
      PlacementInputs in{opt.keep, opt.slot_residency};
      pl = placement(plan, opt.transport->size(), &in);
      dist = run.run_distributed(*opt.transport, *pl, opt.fingerprint);
    } else {
      bool partial = false;
      for (const dist::Residency* r : opt.slot_residency) partial = partial || r;
      if (partial)  // its other ranks' ranges were never written here
        throw Error(
            "compute: an operand was persisted across the ranks of a distributed run (each rank "
            "holds its own blocks of it); compute what reads it on every rank, distributed, or "
            "persist it with ComputeOptions::distributed = false");
      run.run(opt.threads);
    }
  }
  backend::HostTimer timer("run: results");
  RunResult r = run.result();
  r.tasks = run.tasks_run();
  r.dist = dist;
  if (pl) r.kept = pl->kept;
  return r;
}

}  // namespace kiln
