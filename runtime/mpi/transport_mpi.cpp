// libkiln_mpi.so: Kiln's distributed runs over MPI (runtime/transport.hpp). A plugin, loaded by
// runtime/distributed.cpp with dlopen, so that libkiln.so and the kiln command need no MPI library
// unless a program runs under mpirun. Nonblocking sends held until delivered, probes and
// receives on a communicator of Kiln's own (a duplicate of MPI_COMM_WORLD, so Kiln's messages
// never match a program's), and two collectives that the runtime calls at the end of each run.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/transport.hpp"

namespace {

// The largest piece one MPI call sends (counts are ints): 1 GiB, or KILN_MPI_PIECE bytes (tests
// send messages in many pieces). A message is its pieces of that size, then one shorter piece
// (perhaps empty): a receiver that does not know a message's size reads pieces to the short one.
size_t piece_bytes() {
  const char* v = std::getenv("KILN_MPI_PIECE");
  const long long n = v ? std::atoll(v) : 0;
  return n >= 1 && n <= (1LL << 30) ? static_cast<size_t>(n) : size_t{1} << 30;
}

class MpiTransport final : public kiln::dist::Transport {
 public:
  MpiTransport(bool owns) : owns_(owns) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiTransport() override = default;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(v, &n);
    std::string s(v, static_cast<size_t>(std::max(n, 0)));
    if (auto cut = s.find_first_of(std::string("\r\n\0", 3)); cut != std::string::npos)
      s.resize(cut);
    return s;
  }
  std::string host() const override {
    char name[MPI_MAX_PROCESSOR_NAME];
    int n = 0;
    MPI_Get_processor_name(name, &n);
    return std::string(name, static_cast<size_t>(std::max(n, 0)));
  }

  void send(int to, int channel, std::shared_ptr<const std::vector<char>> msg) override {
    const char* data = msg->data();
    size_t left = msg->size();
    while (true) {  // full pieces, then a short one (an empty message: one empty piece)
      const size_t n = std::min(left, piece_);
      MPI_Request req;
      MPI_Isend(data, static_cast<int>(n), MPI_BYTE, to, channel, comm_, &req);
      pending_.push_back({req, msg});
      data += n;
      left -= n;
      if (n < piece_) break;
    }
    complete_sends(false);
  }

  bool probe(int from, int channel, int* sender, size_t* bytes) override {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, channel, comm_, &flag, &st);
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (sender) *sender = st.MPI_SOURCE;
    if (bytes) *bytes = static_cast<size_t>(count);
    return true;
  }

  void recv(int from, int channel, void* data, size_t bytes) override {
    char* p = static_cast<char*>(data);
    size_t left = bytes;
    while (true) {
      const size_t n = std::min(left, piece_);
      MPI_Recv(p, static_cast<int>(n), MPI_BYTE, from, channel, comm_, MPI_STATUS_IGNORE);
      p += n;
      left -= n;
      if (n < piece_) break;
    }
  }

  std::vector<char> recv_any(int from, int channel) override {
    std::vector<char> msg;
    while (true) {
      MPI_Status st;
      MPI_Probe(from, channel, comm_, &st);
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      const size_t at = msg.size(), n = static_cast<size_t>(std::max(count, 0));
      msg.resize(at + n);
      MPI_Recv(msg.data() + at, count, MPI_BYTE, from, channel, comm_, MPI_STATUS_IGNORE);
      if (n < piece_) return msg;
    }
  }

  void complete_sends(bool all) override {
    if (all) {
      for (auto& s : pending_) MPI_Wait(&s.first, MPI_STATUS_IGNORE);
      pending_.clear();
      return;
    }
    auto done = std::remove_if(pending_.begin(), pending_.end(), [](auto& s) {
      int flag = 0;
      MPI_Test(&s.first, &flag, MPI_STATUS_IGNORE);
      return flag != 0;
    });
    pending_.erase(done, pending_.end());
  }

  bool allreduce_max(int64_t* values, int n, double timeout_s) override {
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, MPI_MAX, comm_, &req);
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      int flag = 0;
      MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      if (flag) return true;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          timeout_s)
        return false;
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void alltoall(const int64_t* send, int64_t* recv) override {
    MPI_Alltoall(send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, comm_);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  void finalize() override {
    complete_sends(true);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    if (owns_) MPI_Finalize();
  }

 private:
  bool owns_;
  const size_t piece_ = piece_bytes();
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<std::pair<MPI_Request, std::shared_ptr<const std::vector<char>>>> pending_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) kiln::dist::Transport* kiln_transport_create(
    int abi, int* argc, char*** argv, char* error, size_t error_len) {
  auto fail = [&](const std::string& why) -> kiln::dist::Transport* {
    if (error && error_len > 0) std::snprintf(error, error_len, "%s", why.c_str());
    return nullptr;
  };
  if (abi != kiln::dist::kTransportAbi)
    return fail("libkiln_mpi.so was built for transport interface " +
                std::to_string(kiln::dist::kTransportAbi) + ", this Kiln uses " +
                std::to_string(abi));
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return fail("MPI was finalized already");
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      return fail("MPI_Init_thread failed");
    owns = true;
  }
  try {
    return new MpiTransport(owns);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
