// The block plan: what compute() runs. Built once per template graph (then cached): one kernel
// per fused group, one task per block of each group, a tree of combine tasks per reduction, and
// the arrays that must exist in memory with the number of tasks that read each (so each is
// freed at its last use).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/jit.hpp"
#include "codegen/lower.hpp"
#include "ir/fused.hpp"

namespace kiln {

struct PlanArray {
  const Node* node = nullptr;
  DType dtype = DType::Float64;
  Shape shape;
  size_t bytes = 0;
  int output = -1;  // index among compute()'s outputs (first one), or -1
  int readers = 0;  // kernel tasks that read it
};

struct PlanReduce {  // one reduction output of a group
  int group = 0, output = 0;
  int array = 0;  // PlanArray the result goes to
  ReduceFn fn = ReduceFn::Sum;
  DType acc = DType::Float64;
  int64_t count = 1;                 // elements folded into each result (for mean)
  std::vector<int64_t> out_strides;  // per domain dim: stride in the result (0 if reduced)
};

struct PlanGroup {
  LoweredGroup lowered;
  cpu::KernelFn fn = nullptr;
  Shape domain;
  Chunks chunks;
  std::vector<std::vector<int64_t>> starts;  // per dim, block start offsets
  int64_t blocks = 1;
  std::vector<int> leaf_arrays;    // per kernel leaf: PlanArray index, or -1 (parameter)
  std::vector<int> output_arrays;  // per output: PlanArray index (stores) / PlanReduce (reduces)
  double compile_start_s = 0, compile_s = 0;  // when (from the plan build's start) and how long
};

enum class TaskKind : uint8_t { Start, Kernel, Combine, End };

struct PlanTask {
  explicit PlanTask(TaskKind k) : kind(k) {}
  TaskKind kind;
  int group = 0;
  int64_t block = 0;             // Kernel: block index in the group's grid
  int reduce = -1;               // Combine: PlanReduce index
  std::vector<int> partials_in;  // Combine: partial ids folded together
  int partial_out = -1;          // Combine: partial id produced, or -1 for the final result
  int64_t final_block = 0;       // Combine to final: the block whose region it writes
  std::vector<int> next;         // tasks that wait for this one
  int waits = 0;                 // tasks this one waits for
};

struct Plan {
  FusedGraph fused;
  std::vector<PlanArray> arrays;
  std::vector<PlanGroup> groups;
  std::vector<PlanReduce> reduces;
  std::vector<PlanTask> tasks;
  std::vector<int> output_arrays;  // per compute() output
  // Partials: id -> (reduce, block whose shape it has); kernel tasks write partial ids
  // partial_of[group][block][reduce output k].
  std::vector<std::pair<int, int64_t>> partials;
  std::vector<std::vector<std::vector<int>>> partial_of;
  std::vector<int> arrays_started_by;  // per array: the group whose Start task allocates it
  int64_t work_tasks = 0;              // Kernel + Combine tasks
  double compile_seconds = 0;
  std::string summary;  // fusion summary for --emit-ir

  // Block geometry helpers.
  void block_box(const PlanGroup& g, int64_t block, int64_t* lo, int64_t* ext) const;
};

// Builds (and compiles) the plan for a fused template graph.
std::unique_ptr<Plan> build_plan(FusedGraph fused, std::ostream* kernel_dump);

}  // namespace kiln
