// Programs Kiln starts (cuda-emu's host compiler) run through posix_spawnp with an argument vector:
// no path or name ever reaches a shell.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln::process {

struct Result {
  int exit_code = 0;   // the program's exit status; 128 + N when killed by signal N
  std::string output;  // its standard output and standard error, interleaved
};

// Runs argv[0] (looked up in PATH when it has no '/') with argv and waits for it, in the directory
// `cwd` when it is not empty (relative paths in argv are then relative to it). Throws
// Error("<what>: cannot run '<argv[0]>': <reason>") when it cannot be started.
Result run(const std::vector<std::string>& argv, std::string_view what,
           const std::string& cwd = {});

// A command line split at blanks into an argument vector ("ccache c++" -> {"ccache", "c++"});
// no quoting, no expansion.
std::vector<std::string> split_words(std::string_view command);

// This process's place among the processes an MPI launcher started on its machine, as the
// launcher says (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's
// SLURM_LOCALID, PMI_LOCAL_RANK); 0 without one. Device backends start their device numbering
// there, so that ranks sharing a machine use different GPUs (docs/DISTRIBUTED.md).
int launcher_local_rank();

}  // namespace kiln::process
