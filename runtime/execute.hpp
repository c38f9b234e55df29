// Runs a block plan: tasks in dependency order on a oneTBB worker pool (or inline for one
// thread), each block's kernel called with its arguments, reductions folded in fixed trees (so a
// plan's results are bit-identical for any thread count), arrays freed after their last reader.
#pragma once
#include <memory>
#include <vector>

#include "passes/parameterize.hpp"
#include "runtime/plan.hpp"
#include "runtime/trace.hpp"

namespace kiln {

struct RunResult {
  std::vector<std::shared_ptr<void>> outputs;  // per compute() output, the array's storage
  int64_t tasks = 0;                           // Kernel + Combine tasks executed
};

struct RunOptions {
  int threads = 1;
  Trace* trace = nullptr;  // record one event per task
  bool progress = false;   // progress bar on a terminal for long computes
};

RunResult execute(const Plan& plan, const std::vector<ParamValue>& params, const RunOptions& opt);

}  // namespace kiln
