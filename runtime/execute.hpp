// Runs a block plan: tasks in dependency order on a oneTBB worker pool (or inline for one
// thread), each block's kernel called with its arguments, reductions folded in fixed trees (so a
// plan's results are bit-identical for any thread count), arrays freed after their last reader.
#pragma once
#include <atomic>
#include <memory>
#include <vector>

#include "passes/parameterize.hpp"
#include "runtime/device.hpp"
#include "runtime/distributed.hpp"
#include "runtime/plan.hpp"
#include "runtime/trace.hpp"
#include "runtime/transport.hpp"

namespace kiln {

// A distributed run's counts on this rank (runtime/placement.hpp predicts the sends).
struct DistCounts {
  int ranks = 1;
  int64_t tasks = 0;  // tasks this rank ran
  int64_t messages_sent = 0, bytes_sent = 0, messages_received = 0, bytes_received = 0;
  int64_t predicted_messages = 0, predicted_bytes = 0;  // the placement's, for this rank
};

struct RunResult {
  std::vector<std::shared_ptr<void>> outputs;  // per compute() output, the array's storage
  std::vector<MemoryPlace> places;             // per output, where that storage is
  int64_t tasks = 0;                           // Kernel + Combine tasks executed
  int devices = 1;                             // devices its kernels ran on
  Transfers transfers;                         // copies to, from and between devices
  DistCounts dist;                             // distributed runs
  // Distributed runs, per output asked to be kept where its blocks were made: where its elements
  // are (null: on every rank).
  std::vector<std::shared_ptr<const dist::Residency>> kept;
};

struct RunOptions {
  int threads = 1;
  Trace* trace = nullptr;  // record one event per task
  bool progress = false;   // progress bar on a terminal for long computes
  int devices = 0;         // devices to use, for backends with device memory (0: their default)
  bool keep_on_device = false;  // such backends: outputs stay in device 0's memory
  // Per output: true = not computed (its result empty); only what the others need runs.
  const std::vector<bool>* skip = nullptr;
  const std::atomic<bool>* cancel = nullptr;   // ComputeOptions::cancel
  std::atomic<int64_t>* tasks_done = nullptr;  // ComputeOptions::tasks_done and tasks_total
  std::atomic<int64_t>* tasks_total = nullptr;
  // A distributed program's transport (runtime/distributed.hpp): with more than one rank, each
  // rank runs the tasks the placement gives it, one at a time, and receives what it reads from
  // the others; every rank gets the outputs. Null: the whole plan runs here.
  dist::Transport* transport = nullptr;
  // Distributed runs: per output, whether its blocks stay on the ranks that made them instead of
  // going to every rank (persist(): its residency in RunResult::kept); per template slot, a
  // Buffer kept that way by an earlier run (null: whole on every rank).
  std::vector<uint8_t> keep;
  std::vector<const dist::Residency*> slot_residency;
  // Distributed runs: what this rank computes (the plan's key, its parameters' values), which
  // every rank must agree on before the run (a rank that built another compute is an error on
  // every rank, not a run whose messages do not match).
  uint64_t fingerprint = 0;
};

RunResult execute(const Plan& plan, const std::vector<ParamValue>& params, const RunOptions& opt);

}  // namespace kiln
