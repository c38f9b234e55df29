// The messages of a distributed run: the processes (ranks) of one program, each running the same
// plan on the blocks it owns (runtime/distributed.hpp), send each other the blocks, partials and
// boxes their tasks produce. The runtime's placement and transfers are written against this
// interface only; MPI implements it in a plugin (runtime/mpi/transport_mpi.cpp, libkiln_mpi.so,
// loaded with dlopen so that libkiln.so needs no MPI), and another transport (Dask's, later) can
// implement it too. Everything here is called from one thread at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::dist {

// Bumped when this interface changes: a plugin built against another version is refused.
constexpr int kTransportAbi = 2;

// Message channels. Data messages between two ranks are received in the order they were sent
// (MPI's non-overtaking rule), which the runtime relies on: both sides walk the plan's tasks in
// the same order.
enum Channel : int { kData = 1, kErrorNotice = 2 };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The library and its version ("Open MPI v4.1.4, ..."), and this process's host name.
  virtual std::string library() const = 0;
  virtual std::string host() const = 0;
  // Starts sending `msg` to rank `to` on `channel` and returns; the transport holds `msg` until
  // it is delivered. Messages of any size (the transport splits what its library cannot send in
  // one piece; the receiver passes the same size to recv()).
  virtual void send(int to, int channel, std::shared_ptr<const std::vector<char>> msg) = 0;
  // Whether a message from `from` (-1: any rank) waits on `channel`; sets its sender and size (of
  // its first piece, where the transport split it: recv() with the size known, or recv_any()).
  virtual bool probe(int from, int channel, int* sender, size_t* bytes) = 0;
  // Receives the next message from `from` on `channel` (`bytes` long) into `data`; waits for it.
  virtual void recv(int from, int channel, void* data, size_t bytes) = 0;
  // Receives the next message from `from` on `channel` whatever its size (probe() gives the size
  // of its first piece only: a failed run's drain, error notices); waits for it.
  virtual std::vector<char> recv_any(int from, int channel) = 0;
  // Frees what was delivered; `all`: waits until every message sent has been delivered.
  virtual void complete_sends(bool all) = 0;
  // Collectives: every rank calls them in the same order. Element-wise maximum of `n` values
  // over the ranks, in place; false if it did not finish within `timeout_s` (a rank is gone).
  virtual bool allreduce_max(int64_t* values, int n, double timeout_s) = 0;
  // Rank r receives send[r] from each rank: recv[q] is what rank q sent it.
  virtual void alltoall(const int64_t* send, int64_t* recv) = 0;
  // Ends every rank's process (the job) with `code`: after a rank was lost.
  [[noreturn]] virtual void abort(int code) = 0;
  // Before exit: ends the library if the transport started it.
  virtual void finalize() = 0;
};

}  // namespace kiln::dist

// The plugin's entry point (extern "C", looked up with dlsym): a transport over the program's
// processes, the library initialized with the program's arguments (or none) if it is not
// already; null with a message in `error` (`error_len` bytes) when it cannot start.
extern "C" typedef kiln::dist::Transport* (*KilnTransportCreate)(int abi, int* argc, char*** argv,
                                                                 char* error, size_t error_len);
