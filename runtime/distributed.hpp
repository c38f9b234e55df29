// The process's place in a distributed program: the transport that connects it to the other
// ranks (runtime/transport.hpp), started by kiln::distributed::init or, with KILN_MPI=1, by the
// first compute(). Without one, every compute() runs whole in this process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/transport.hpp"

namespace kiln::dist {

// The transport, or null when this process is not part of a distributed program.
Transport* world();

// Loads the MPI plugin (libkiln_mpi.so: KILN_MPI_PLUGIN, else beside the library or program
// holding this code, else the build tree's) and starts it with the program's arguments (may be
// null); its finalize runs at exit. Does nothing when started already. Throws kiln::Error when
// the plugin or MPI cannot start.
void start(int* argc, char*** argv);
// Ends the transport (MPI_Finalize when Kiln started MPI); compute() then runs locally.
void stop();
// Where start() found the plugin ("" before it ran).
std::string plugin_path();

// The number of each distributed run, the same on every rank (they run the same computes):
// checked in every message so that one from another run is never taken for this run's.
uint64_t next_epoch();

// The cores plans are shaped for (runtime/plan.cpp: how a product is split): this machine's
// hardware threads, or while distributed the fewest of any rank's, so every rank builds the same
// plan.
int64_t plan_cores();

// Every rank's `value` (indexed by rank), on every rank: a collective, called by all ranks in the
// same order. {value} when not distributed. Values must not be negative.
std::vector<int64_t> allgather(int64_t value);

// Where the elements of an array kept where its blocks were made live (a persist() of a
// distributed compute, docs/DISTRIBUTED.md): each rank holds its ranges, the memory of the other
// ranges on it is allocated but never written.
struct Residency {
  struct Range {
    int64_t first, last;  // elements, inclusive; all of them the range's
    int rank;
  };
  std::vector<Range> ranges;  // sorted by first, disjoint
  size_t element_size = 8;
  // The rank holding every element of [first, last], or -1 (split over ranges of several).
  int holder(int64_t first, int64_t last) const;
  // Adds to (*per_rank)[r] the bytes of [first, last] that rank r holds.
  void add_bytes(int64_t first, int64_t last, std::vector<int64_t>* per_rank) const;
};
// Registers the residency of the buffer at `data` (persist()), until forget_residency(data).
void set_residency(const void* data, std::shared_ptr<const Residency> r);
void forget_residency(const void* data);
// The buffer's residency, or null: the whole buffer is on every rank (or no rank distributes).
std::shared_ptr<const Residency> residency(const void* data);
// How many buffers are registered (computes look their Buffers up only when some are).
int64_t residencies();

// How long a rank waits for a message or a collective before it decides a rank is lost
// (KILN_MPI_TIMEOUT, seconds) and ends the job.
double timeout_s();

}  // namespace kiln::dist
