// Where a plan's tasks run in a distributed run, and what moves: each rank (process) runs the same
// plan, owns some of its tasks and sends what they produce to the ranks whose tasks read it.
// Pure functions of the plan and the rank count, independent of the transport
// (runtime/transport.hpp), so that the prediction of what moves is the plan's, and the run's
// counters can be checked against it.
//
// Placement: block-cyclic. Block b of every kernel group and of every library call's result grid
// runs on rank b % ranks (so element-wise chains and the reductions over them move nothing
// between ranks where their grids match), except that a kernel group of one block runs on rank
// g % ranks (group g: TSQR's block slices, each its own group, spread over the ranks); a combine
// task on the rank of its first partial; a LAPACK call where its operand's first element was made
// (TSQR's block factorizations where their blocks are; a Buffer operand, which every rank holds:
// by group); a cuRAND call on rank 0. Start and End tasks are every rank's.
// Data some ranks hold (Buffers with a Residency: persisted arrays, load_npy_shards, a Buffer
// given on one rank) moves the tasks that read it: a kernel block, a GEMM result block (its first
// contraction split, its later chained splits and its LibrarySum) and each GEMM split that makes a
// partial product run on the rank holding most of what they read of it (the block-cyclic rank
// where that is one of those ranks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/distributed.hpp"
#include "runtime/plan.hpp"

namespace kiln {

// One part of what a task produces, sent to the ranks in `to`.
struct Piece {
  enum class Kind : uint8_t {
    Partial,         // a reduction partial (partial_bytes(id) bytes), for the combine that folds it
    Block,           // a blocked array's block (its whole buffer)
    Box,             // elements of a whole array: `base` + sum of i_d * strides[d], i_d < ext[d]
    LibraryPartial,  // a GEMM split's partial product (`bytes`), for its block's LibrarySum
  };
  Kind kind = Kind::Box;
  int id = -1;                        // Partial, LibraryPartial: its id; Block, Box: the PlanArray
  int64_t block = 0;                  // Block: the producer's block
  int64_t base = 0;                   // Box: its first element
  size_t es = 0;                      // Box: element size
  std::vector<int64_t> ext, strides;  // Box
  size_t bytes = 0;
  std::vector<int> to;  // the ranks that receive it, sorted; never the owner
};

// What a run adds to the plan's placement: outputs to keep where their blocks are made, and
// Buffers kept that way by an earlier run (runtime/distributed.hpp's Residency).
struct PlacementInputs {
  std::vector<uint8_t> keep;                  // per compute() output (empty: none)
  std::vector<const dist::Residency*> slots;  // per template slot (empty, or null: everywhere)
  bool empty() const;
};

struct Placement {
  int ranks = 1;
  std::vector<int> owner;                  // per task; -1: Start, End (every rank's)
  std::vector<std::vector<Piece>> pieces;  // per task: what it sends
  std::vector<std::vector<int>> sends_to;  // per task: the ranks it sends a message to, sorted
  // Per rank, what the plan predicts: tasks it runs, messages and payload bytes it sends
  // (gathers included).
  std::vector<int64_t> tasks, messages, bytes;
  // Kept Buffers (their template slots) that some task reads beyond what its rank holds: every
  // rank receives the others' ranges of them before the tasks run, and holds them whole after.
  std::vector<int> gather_slots;
  // Per compute() output asked to be kept: where its elements are (null: on every rank, because
  // its blocks' boxes are not contiguous ranges of it, or it was not asked).
  std::vector<std::shared_ptr<const dist::Residency>> kept;
};

// The placement of plan `p`'s tasks over `ranks` ranks (kept in the plan after the first call
// without inputs; made afresh for each run with them).
std::shared_ptr<const Placement> placement(const Plan& p, int ranks,
                                           const PlacementInputs* in = nullptr);

// For --emit-ir: tasks, messages and bytes per rank.
std::string placement_summary(const Placement& pl);

}  // namespace kiln
