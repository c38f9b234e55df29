// The block plan: what compute() runs. Built once per template graph (then cached): one kernel
// per fused group, one task per block of each group, a tree of combine tasks per reduction, and
// the arrays that must exist in memory with the number of tasks that read each (so each is
// freed at its last use).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "codegen/lower.hpp"
#include "ir/fused.hpp"
#include "ir/linalg.hpp"
#include "ir/view.hpp"
#include "support/error.hpp"

namespace kiln {

struct PlanArray {
  const Node* node = nullptr;
  DType dtype = DType::Float64;
  Shape shape;
  size_t bytes = 0;
  int output = -1;  // index among compute()'s outputs (first one), or -1
  int readers = 0;  // kernel tasks that read it (whole arrays)
  // Blocked arrays live as one buffer per block of the group that writes them, each allocated by
  // its kernel task and freed after its last reader: intermediates that are not outputs, written
  // by one store output over their whole shape, and read by every reader block within a single
  // block (element-wise chains, slices and transposes over matching chunks). Their readers
  // depend on the blocks they read, not on the whole group. Other arrays are one buffer.
  bool blocked = false;
  int producer = -1;               // blocked: the group that writes it
  int64_t block_offset = 0;        // blocked: its first block's slot in the run's block tables
  std::vector<int> block_readers;  // blocked: per block, the kernel tasks that read it
  std::string whole_because;       // not blocked: why (for --emit-ir)
  // Device plans (the backend has DeviceMemory), arrays that are not blocked: why the array's
  // home is the host ("": it stays on the device that writes it, with one device), and whether
  // tasks on devices store into it (kernel blocks, GEMM calls on a backend with DeviceBlas; with
  // several devices such arrays are assembled on the host).
  std::string host_because;
  bool device_stored = false;
};

// Where a kernel block reads a blocked array: one block of it, under a map local to that block
// (built by the plan, stored flat in PlanGroup::block_reads).
struct BlockRead {
  int64_t block = -1;  // -1: the reader block is empty and reads nothing
  int64_t base = 0;
  std::vector<int64_t> strides;
};

struct PlanReduce {  // one reduction output of a group
  int group = 0, output = 0;
  int array = 0;  // PlanArray the result goes to
  ReduceFn fn = ReduceFn::Sum;
  DType acc = DType::Float64;        // the partials' type (float32 sums accumulate in float64)
  DType out = DType::Float64;        // the result's type
  int64_t count = 1;                 // elements folded into each result (for mean)
  std::vector<int64_t> out_strides;  // per domain dim: stride in the result (0 if reduced)
};

// An operand a library call reads in place: a materialized array or a Buffer leaf's memory, under
// a row- or column-major layout (a transposed operand is read with BLAS's transpose flag).
struct LibraryOperand {
  int array = -1;  // PlanArray, or -1: the Buffer leaf whose pointer is in template slot `slot`
  int slot = -1;
  MatrixLayout layout;
  std::string from;                                         // for --emit-ir: what it reads
  bool present() const { return array >= 0 || slot >= 0; }  // Linalg's b may be absent
};

// Where one GEMM call reads an operand that is a blocked array: the producer's block (-1: the
// call reads nothing, an empty region) and the layout of the region within that block's buffer.
struct LibraryRead {
  int64_t block = -1;
  MatrixLayout layout;
};

// A library call (MatMul, C = A @ B): result block (i, j) is the sum over the contraction splits
// q of A[rows of i, split q] @ B[split q, cols of j], one BLAS call each (a Library task). Split 0
// writes the result block. When there are at least as many result blocks as cores, the splits of
// a block run one after the other, each adding its product to the block (BLAS's beta = 1: no
// partials, no extra pass); otherwise they run in parallel into partials that a LibrarySum task
// adds to the block in split order. Either way the result is the same for any thread count.
//
// A LAPACK call (Linalg) is one task over its whole operands: a (m, n), and b (m, k) for solve
// and lstsq; it writes the node's packed result (ir/linalg.hpp).
//
// A cuRAND call (Random with Engine::Curand) is one task with no operands that fills the whole
// array (m elements, C order) from the seed in parameter slot seed_slot.
struct PlanLibrary {
  int group = 0;
  Op op = Op::MatMul;   // MatMul, Linalg or Random (cuRAND)
  LinalgFn fn{};        // Linalg: which
  RandomKind random{};  // Random: normal or uniform doubles
  int64_t stream = 0;   // Random: the Generator's stream (the cuRAND seed: library::curand_seed)
  int seed_slot = -1;   // Random: the parameter slot of the Generator's seed
  // Linalg on device plans: the call runs on device 0 through the backend's DeviceLapack
  // (Plan::device_lapack and DeviceLapack::runs), else on the host, on copies.
  bool on_device = false;
  DType dtype = DType::Float64;
  int64_t m = 0, n = 0, k = 0;
  int64_t b_rows = 0;   // Linalg: b's rows (m for solve and lstsq)
  LibraryOperand a, b;  // Linalg: b.array < 0 && b.slot < 0 when it has no b
  // GEMM operands that are blocked arrays (computed per block, streamed into the calls: a
  // producer's block is freed after the last call that reads it): per task, block * splits +
  // split, where it reads; empty for an operand read whole.
  std::vector<LibraryRead> a_reads, b_reads;
  const Node* call = nullptr;     // the MatMul or Linalg node
  int out = 0;                    // PlanArray of the result (one buffer, row-major)
  int64_t out_offset = 0;         // where the result starts in it (a concatenation's piece)
  std::vector<int64_t> k_starts;  // contraction splits: their starts, then k
  bool chained = false;           // splits of a block accumulate in turn (else: partials)
  // A LAPACK call that runs alone: every other group of the plan is an ancestor (all finished
  // before it starts: its Start waits for their Ends) or a descendant, so it may use every
  // thread of the run without oversubscribing the cores.
  bool exclusive = false;
  std::string routine;  // the BLAS routine of a typical block, for --emit-ir
};

struct PlanGroup {
  int library = -1;  // a PlanLibrary index: this group is a library call, not a kernel
  LoweredGroup lowered;
  std::shared_ptr<const backend::Kernel> kernel;
  Shape domain;
  Chunks chunks;
  std::vector<std::vector<int64_t>> starts;  // per dim, block start offsets
  int64_t blocks = 1;
  std::vector<int> leaf_arrays;    // per kernel leaf: PlanArray index, or -1 (parameter)
  std::vector<int> output_arrays;  // per output: PlanArray index (stores) / PlanReduce (reduces)
  // Per block, per leaf reading a blocked array: the block it reads, the base and the strides
  // (rank of them), flat: entry (block, leaf) at block_read(block, leaf). Empty when no leaf
  // reads a blocked array.
  std::vector<int64_t> block_reads;
  // A kernel that stores or reduces over every dim, over memory and indices: a block whose leaves
  // and stores step through it contiguously across dims runs as one row (PlanBuilder::runs_flat in
  // plan.cpp, Run::fold_contiguous_dims in execute.cpp).
  bool flat = false;
  const int64_t* block_read(int64_t block, size_t leaf) const {
    return block_reads.data() + block_read_at(block, leaf);
  }
  size_t block_read_at(int64_t block, size_t leaf) const {
    return (static_cast<size_t>(block) * leaf_arrays.size() + leaf) * (2 + domain.size());
  }
  double compile_start_s = 0, compile_s = 0;  // when (from the plan build's start) and how long
};

enum class TaskKind : uint8_t { Start, Kernel, Combine, Library, LibrarySum, End };

struct PlanTask {
  explicit PlanTask(TaskKind k) : kind(k) {}
  TaskKind kind;
  int group = 0;
  int64_t block = 0;             // Kernel, Library, LibrarySum: block index in the group's grid
  int split = 0;                 // Library: the contraction split it multiplies
  int reduce = -1;               // Combine: PlanReduce index
  std::vector<int> partials_in;  // Combine: partial ids folded together; LibrarySum: added
  int partial_out = -1;          // Combine, Library: partial id produced, or -1: the result
  int64_t final_block = 0;       // Combine to final: the block whose region it writes
  std::vector<int> next;         // tasks that wait for this one
  int waits = 0;                 // tasks this one waits for
  // In plans that stream (Plan::streams), the executor runs the smallest ready first: kernel
  // tasks block by block across groups (block b of every group before block b + 1 of any), so a
  // chain of groups over blocked arrays streams each block through and frees it; Start first,
  // Combine and End as soon as they are ready.
  int64_t order = 0;
};

struct Plan {
  Device device = Device::Cpu;  // whose backend compiled the kernels
  bool device_blas = false;     // GEMM calls run on the devices (the backend's DeviceBlas)
  bool device_lapack = false;   // LAPACK calls run on device 0 (the backend's DeviceLapack)
  bool device_random = false;   // cuRAND calls run on device 0 (the backend's DeviceRandom)
  FusedGraph fused;
  std::vector<PlanArray> arrays;
  std::vector<PlanGroup> groups;
  std::vector<PlanReduce> reduces;
  std::vector<PlanLibrary> libraries;
  int64_t library_partials = 0;  // partial results of Library tasks (ids 0 ... n-1)
  std::vector<PlanTask> tasks;
  std::vector<int> output_arrays;  // per compute() output
  // Partials: id -> (reduce, block whose shape it has); kernel tasks write partial ids
  // partial_of[group][block][reduce output k].
  std::vector<std::pair<int, int64_t>> partials;
  std::vector<std::vector<std::vector<int>>> partial_of;
  int64_t blocked_blocks = 0;  // blocks of all blocked arrays (PlanArray::block_offset)
  bool streams = false;        // some array is blocked: run ready tasks in PlanTask::order
  int64_t work_tasks = 0;      // Kernel, Combine, Library and LibrarySum tasks
  double compile_seconds = 0;
  std::string summary;  // fusion summary for --emit-ir

  // Whether group `group` stores or reduces into array `array` (a library call: its result).
  bool writes(int group, int array) const;

  // Block geometry helpers.
  void block_box(const PlanGroup& g, int64_t block, int64_t* lo, int64_t* ext) const;

  // Partial `id`: its elements (its block's extents with the reduced dims collapsed) and bytes
  // (the values, then for argmin/argmax their int64 indices at an 8-byte aligned offset).
  int64_t partial_elems(int id) const;
  size_t partial_bytes(int id) const;
  // Where reduction r's result for the block `block` of its group lies in its array: the first
  // element (returned), and the extents and strides of the dims it keeps.
  int64_t result_region(const PlanReduce& r, int64_t block, std::vector<int64_t>* dims,
                        std::vector<int64_t>* strides) const;
  static size_t index_offset(int64_t n, size_t value_size) {
    return (static_cast<size_t>(n) * value_size + 7) / 8 * 8;
  }

  // Distributed runs: the tasks' placement over the ranks (runtime/placement.hpp), made by the
  // first run over that many ranks and kept (read and replaced with std::atomic_load/store).
  mutable std::shared_ptr<const struct Placement> placement;
};

// Builds the plan for a fused template graph, its kernels compiled by the device's backend.
std::unique_ptr<Plan> build_plan(FusedGraph fused, Device device, std::ostream* kernel_dump);

// The kiln::Error for a buffer of `bytes` (named by `what`: "the output <node>", "a block ... of
// <node>", "the outputs together") that the machine's memory, `memory` bytes, cannot hold.
Error memory_error(const std::string& what, uint64_t bytes, uint64_t memory);

// How each materialized array is stored (per block, or one buffer and why), and what each library
// call runs, for --emit-ir.
std::string storage_summary(const Plan& p);

}  // namespace kiln
