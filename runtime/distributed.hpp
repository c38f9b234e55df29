// The process's place in a distributed program: the transport that connects it to the other
// ranks (runtime/transport.hpp), started by kiln::distributed::init or, with KILN_MPI=1, by the
// first compute(). Without one, every compute() runs whole in this process.
#pragma once
#include <cstdint>
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

// Every rank's `value` (indexed by rank), on every rank: a collective, called by all ranks in the
// same order. {value} when not distributed. Values must not be negative.
std::vector<int64_t> allgather(int64_t value);

// How long a rank waits for a message or a collective before it decides a rank is lost
// (KILN_MPI_TIMEOUT, seconds) and ends the job.
double timeout_s();

}  // namespace kiln::dist
