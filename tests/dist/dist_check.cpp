// The distributed suite (docs/DISTRIBUTED.md), run by ctest under `mpirun -np 1 ... 4`:
//   same   every expression workload, a set of expressions that move data between ranks in each
//          way the placement knows (partials, blocks, boxes of whole arrays, LAPACK results,
//          outputs), linear algebra and the GLM solvers, computed distributed and on this rank
//          alone: the same bits; and each rank's messages and bytes sent equal to what the
//          plan's placement predicts.
//   error  a task that fails on one rank only (an integer to a negative power in rank 1's block):
//          every rank raises the same kiln::Error, and the next compute works.
//   devices  (KILN_DEVICE=cuda-emu) the expressions, the error and a solver with one device per
//          rank, each rank's device numbered from its place on the machine.
//   wait   (tests/dist/killed_rank.sh) rank 0 prints its pid, then every rank computes
//          forever; the script kills rank 1 and expects the job to end.
// Each rank checks its own results; a failure prints the rank and exits non-zero, which makes
// mpirun's exit status non-zero.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/glm.hpp"
#include "kiln/kiln.hpp"
#include "tools/workloads.hpp"

using namespace kiln;

namespace {

int g_failures = 0, g_checks = 0;

void fail(const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "dist_check: rank %d of %d: FAILED %s\n", distributed::rank(),
               distributed::size(), what.c_str());
}

bool same_bits(const NDArray& a, const NDArray& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

ComputeOptions local() {
  ComputeOptions o;
  o.distributed = false;
  return o;
}

// The counts of the last compute equal the placement's prediction (and, on several ranks, say
// so).
void check_counts(const std::string& name) {
  Stats s = stats();
  const int ranks = distributed::size();
  if (ranks == 1) return;
  if (s.last_ranks != ranks)
    fail(name + ": last_ranks " + std::to_string(s.last_ranks) + ", expected " +
         std::to_string(ranks));
  if (s.last_messages_sent != s.last_predicted_messages ||
      s.last_bytes_sent != s.last_predicted_bytes)
    fail(name + ": sent " + std::to_string(s.last_messages_sent) + " messages, " +
         std::to_string(s.last_bytes_sent) + " bytes; the placement predicted " +
         std::to_string(s.last_predicted_messages) + ", " + std::to_string(s.last_predicted_bytes));
}

// Distributed results of `arrays` and local results of `reference` (by default the same
// arrays): bit for bit.
void check(const std::string& name, const std::vector<Array>& arrays,
           std::vector<Array> reference = {}) {
  ++g_checks;
  std::vector<NDArray> got = compute(arrays);
  check_counts(name);
  Stats s = stats();
  std::vector<NDArray> want = compute(reference.empty() ? arrays : reference, local());
  for (size_t k = 0; k < arrays.size(); ++k)
    if (!same_bits(got[k], want[k])) fail(name + ": output " + std::to_string(k) + " differs");
  if (distributed::rank() == 0)
    std::printf("  %-28s %6lld tasks here, %4lld messages, %9lld bytes sent\n", name.c_str(),
                static_cast<long long>(s.last_rank_tasks),
                static_cast<long long>(s.last_messages_sent),
                static_cast<long long>(s.last_bytes_sent));
}

// Expressions that move data between ranks in each way the placement knows.
void expressions() {
  random::Generator gen(42);
  Array x = gen.normal(0, 1, {600, 400}, {100, 100});  // 24 blocks
  Array y = gen.uniform(-1, 1, {600, 400}, {100, 100});
  check("element-wise output", {exp(x) * y - 1});
  check("argmax, argmin, min", {x.argmax(), (x * y).argmin(1), x.min({0})});
  check("mean along rows", {x.mean({1}, true), x - x.mean({1}, true)});  // row fusion
  check("rechunked", {(x.rechunk({150, 400}) + 1).sum({1})});            // across grids
  check("slices and transposes", {(x.slice({Slice(10, 590, 3)}).T() * 2).sum({0}),
                                  x.slice({Slice(100, 300), Slice(50, 350)}).max()});
  check("matmul", {matmul(x, y.T()), matmul(x.T(), y).sum()});
  check("concatenate", {concatenate({x, y}, 0).sum({0})});
  Array tall = gen.normal(0, 1, {4000, 20}, {500, 20});
  auto [u, sv, vh] = linalg::svd(tall);
  check("svd (TSQR)", {u, sv, vh});
  auto [q, r] = linalg::qr(tall);
  check("qr (TSQR)", {q, r});
  check("lstsq", {linalg::lstsq(tall, tall.sum({1})).x});
}

// persist() keeps each rank's blocks on it: a compute over the same blocks reads them there,
// nothing of them moves; one that reads across them gathers them first; a compute on one rank
// alone cannot read them (an error, not the other ranks' unwritten memory).
// (Row blocks: whole rows, contiguous ranges of the array. The references read the same array
// persisted on this rank alone: a kernel over random values sums in another order than one
// over memory.)
void persisted() {
  random::Generator gen(43);
  Array rows = gen.normal(0, 1, {600, 400}, {100, 400});
  Array xp = rows.persist();
  const int64_t before = stats().last_bytes_sent;
  Array x = rows.persist(local());
  check("persisted, read where made", {(xp * 2 + 1).sum({1})}, {(x * 2 + 1).sum({1})});
  check("persisted, as an output", {xp, xp.slice({Slice(250, 450)})},
        {x, x.slice({Slice(250, 450)})});
  if (distributed::size() > 1) {
    if (before > 0) fail("persist() sent " + std::to_string(before) + " bytes");
    ++g_checks;
    try {
      (void)compute({xp.sum()}, local());
      fail("a local compute of a persisted array across ranks did not raise");
    } catch (const Error& e) {
      if (std::string(e.what()).find("persisted across the ranks") == std::string::npos)
        fail(std::string("the error reads: ") + e.what());
    }
  }
  check("persisted, read across blocks", {xp.T().rechunk({400, 600}).sum({1})},
        {x.T().rechunk({400, 600}).sum({1})});
  check("persisted, then whole here", {xp.max()}, {x.max()});  // gathered: local works too
  ++g_checks;
  if (!same_bits(compute({xp.sum()}, local())[0], compute({x.sum()}, local())[0]))
    fail("the gathered persisted array differs");
}

// Data some ranks hold: each rank's .npy shard (one rank with no rows on three ranks), a Buffer
// given on rank 0. Blocks run where their data is: nothing of it moves unless a compute reads it
// elsewhere, which gathers it first (after which it is whole on every rank).
void held_data() {
  const int me = distributed::rank(), ranks = distributed::size();
  const int64_t cols = 6;
  std::vector<int64_t> rows(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    rows[static_cast<size_t>(r)] = ranks == 3 && r == 1 ? 0 : 150 + 37 * r;
  int64_t total = 0, first = 0;
  for (int r = 0; r < ranks; ++r) {
    if (r == me) first = total;
    total += rows[static_cast<size_t>(r)];
  }
  std::vector<double> all(static_cast<size_t>(total * cols));
  for (size_t e = 0; e < all.size(); ++e) all[e] = std::sin(0.37 * static_cast<double>(e)) * 5;
  const std::string path =
      "dist_shard_" + std::to_string(ranks) + "_" + std::to_string(me) + ".npy";
  compute({from_buffer(all.data() + first * cols, DType::Float64,
                       {rows[static_cast<size_t>(me)], cols})},
          local())[0]
      .save_npy(path);
  Array xs = distributed::load_npy_shards(path, {64, cols});
  Array whole = from_buffer(all.data(), DType::Float64, {total, cols});
  const int64_t shard_bytes = rows[static_cast<size_t>(me)] * cols * 8;
  ++g_checks;
  std::vector<NDArray> got = compute({xs.sum({0}), (xs * 2 + 1).sum({1}), matmul(xs.T(), xs)});
  check_counts("shards");
  if (stats().last_bytes_sent > 0 && stats().last_bytes_sent >= shard_bytes)  // (row sums: to all)
    fail("shards: sent " + std::to_string(stats().last_bytes_sent) + " bytes of a " +
         std::to_string(shard_bytes) + "-byte shard");
  if (me == 0)
    std::printf("  %-28s %6lld tasks here, %4lld messages, %9lld bytes sent\n",
                "shards, read where held", static_cast<long long>(stats().last_rank_tasks),
                static_cast<long long>(stats().last_messages_sent),
                static_cast<long long>(stats().last_bytes_sent));
  // Given on rank 0 only: its blocks run there, the other ranks run none of them.
  std::vector<double> w(500 * 4);
  for (size_t e = 0; e < w.size(); ++e) w[e] = std::cos(0.11 * static_cast<double>(e));
  Array v = distributed::from_buffer_on(0, me == 0 ? w.data() : nullptr, DType::Float64, {500, 4},
                                        {100, 4});
  check("given on rank 0", {(v * v).sum({1}), v.max()},
        {(from_buffer(w.data(), DType::Float64, {500, 4}, {100, 4}) *
          from_buffer(w.data(), DType::Float64, {500, 4}, {100, 4}))
             .sum({1}),
         from_buffer(w.data(), DType::Float64, {500, 4}, {100, 4}).max()});
  ++g_checks;
  if (me != 0 && stats().last_rank_tasks != 0)
    fail("given on rank 0: rank " + std::to_string(me) + " ran " +
         std::to_string(stats().last_rank_tasks) + " tasks");
  // Read across the shards (whole columns): gathered first; whole on every rank afterwards, the
  // rows where load_npy_shards put them.
  Array small = distributed::from_buffer_on(ranks - 1, me == ranks - 1 ? w.data() : nullptr,
                                            DType::Float64, {cols, 3});
  ++g_checks;
  NDArray across = compute({xs.rechunk({total, cols}) + 1, matmul(xs, small)})[1];
  check_counts("shards, read across");
  if (!same_bits(compute({xs}, local())[0], compute({whole}, local())[0]))
    fail("the shards gathered are not the rows of every rank's file in rank order");
  std::vector<NDArray> want =
      compute({xs.sum({0}), (xs * 2 + 1).sum({1}), matmul(xs.T(), xs), matmul(xs, small)}, local());
  for (size_t k = 0; k < got.size(); ++k)
    if (!same_bits(got[k], want[k])) fail("shards: output " + std::to_string(k) + " differs");
  if (!same_bits(across, want[3])) fail("shards times a matrix given on one rank differ");
  // A collective: every rank passes the same description, or every rank raises.
  if (ranks > 1) {
    ++g_checks;
    try {
      (void)distributed::from_buffer_on(0, w.data(), DType::Float64, {me == 1 ? 5 : 4});
      fail("from_buffer_on with another shape on rank 1 did not raise");
    } catch (const Error& e) {
      if (std::string(e.what()).find("rank 1 passed another") == std::string::npos)
        fail(std::string("the error reads: ") + e.what());
    }
    ++g_checks;  // a file missing on rank 1 only: every rank raises, none waits
    try {
      (void)distributed::load_npy_shards(me == 1 ? "no_such_shard.npy" : path, {64, cols});
      fail("load_npy_shards of a missing file did not raise");
    } catch (const Error& e) {
      const std::string want = me == 1 ? "[on rank 1]" : "rank 1 failed";
      if (std::string(e.what()).find(want) == std::string::npos)
        fail(std::string("the error reads: ") + e.what());
    }
  }
  std::remove(path.c_str());
}

void same() {
  // The seed workloads' expressions, at a twentieth of their default size and chunk.
  for (const workloads::Workload& w : workloads::all()) {
    if (!w.expr) continue;
    const int64_t n = w.size / workloads::kQuickDivisor, c = w.chunk / workloads::kQuickDivisor;
    check(w.name, w.build(n, c));
  }
  expressions();
  persisted();
  held_data();
  random::Generator gen(42);
  Array x = gen.normal(0, 1, {600, 400}, {100, 100});  // 24 blocks
  // The trace: rank 0 writes the file named, rank r "<name>.rank<r>", with the sends and receives.
  if (distributed::size() > 1) {
    ++g_checks;
    ComputeOptions o;
    o.trace_file = "dist_check_trace_" + std::to_string(distributed::size()) + ".json";
    (void)compute({x.sum({0})}, o);
    std::string path = o.trace_file;
    if (distributed::rank() > 0) path += ".rank" + std::to_string(distributed::rank());
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool moved = text.find("\"cat\":\"send\"") != std::string::npos ||
                       text.find("\"cat\":\"receive\"") != std::string::npos;
    if (!moved) fail("the trace " + path + " has no send or receive event");
    std::remove(path.c_str());
  }
  // The solvers: many computes with host logic between them, the same on every rank.
  for (const char* name : {"logistic-gd", "svd"}) {
    const workloads::Workload& w = workloads::find(name);
    workloads::SolveArgs args;
    args.n = 4000;
    args.c = 1000;
    args.cols = 10;
    if (!w.solve) continue;
    ++g_checks;
    workloads::SolveStats st;
    const int64_t before = stats().bytes_sent;
    std::vector<double> got = w.solve(args, {}, &st);
    const int64_t sent = stats().bytes_sent - before;
    std::vector<double> want = w.solve(args, local(), &st);
    if (got != want) fail(std::string(name) + ": the solver's results differ");
    // The solver's n-vectors (X beta, X grad) stay on the ranks that made their row blocks: the
    // whole solve sends less than one of them (before: each pass sent them to every rank).
    if (std::string(name) == "logistic-gd" && distributed::size() > 1 && sent >= args.n * 8)
      fail("logistic-gd sent " + std::to_string(sent) + " bytes, an n-vector or more");
    if (distributed::rank() == 0)
      std::printf("  %-28s the same bits, %lld bytes sent\n", name, static_cast<long long>(sent));
  }
#ifdef KILN_SANITIZED  // (4 ranks on 2 cores under AddressSanitizer: the whole list takes minutes)
  const std::vector<const char*> solvers = {"lbfgs"};
#else
  const std::vector<const char*> solvers = {"lbfgs", "newton", "admm", "gradient_descent",
                                            "proximal_grad"};
#endif
  for (const char* solver : solvers) {
    const workloads::Workload& w = workloads::find("glm");
    workloads::SolveArgs args;
    args.n = 4000;
    args.c = 1000;
    args.cols = 10;
    args.solver = solver;
    ++g_checks;
    workloads::SolveStats st;
    std::vector<double> got = w.solve(args, {}, &st);
    std::vector<double> want = w.solve(args, local(), &st);
    if (got != want) fail(std::string("glm ") + solver + ": the solver's results differ");
    if (distributed::rank() == 0) std::printf("  glm %-24s the same bits\n", solver);
  }
}

void error() {
  // Block 1 of 3 (rank 1's on three ranks) raises a negative power; the others compute.
  Array i = arange(0, 300, 1, {100});
  Array e = where((i >= 100) & (i < 200), -1, 2);
  ++g_checks;
  try {
    (void)compute(pow(i, e).sum());
    fail("expected a kiln::Error");
  } catch (const Error& err) {
    const std::string what = err.what();
    if (what.find("negative integer powers") == std::string::npos ||
        (distributed::size() == 3 && what.find("[on rank 1 of 3]") == std::string::npos))
      fail("the error reads: " + what);
    if (distributed::rank() == 0) std::printf("  every rank raised: %s\n", what.c_str());
  }
  // Ranks that compute different things (another reduction, another scalar on rank 1): every
  // rank raises before the run, none combines what another computed.
  Array z = arange(0, 1000, 1, {100});
  const bool odd = distributed::rank() == 1;
  for (const Array& differs : {odd ? z.sum() : z.max(), (z * (odd ? 3 : 2)).sum()}) {
    if (distributed::size() == 1) break;
    ++g_checks;
    try {
      (void)compute(differs);
      fail("ranks computing different things did not raise");
    } catch (const Error& err) {
      if (std::string(err.what()).find("not computing the same thing") == std::string::npos)
        fail(std::string("the error reads: ") + err.what());
    }
  }
  // The run after a failed one: nothing of the failed run is left in the queues.
  random::Generator gen(7);
  check("after the error", {gen.normal(0, 1, {800, 800}, {100, 100}).sum()});
}

// Run with KILN_DEVICE=cuda-emu (ctest): one device per rank, numbered from the rank's place on
// its machine; the expressions, a kernel's error on one rank's device and a solver, as above.
void devices() {
  ++g_checks;
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int want = (local_rank ? std::atoi(local_rank) : 0) % 16;  // cuda-emu has 16
  const int got = device_ordinal(Device::Default);
  if (got != want)
    fail("device_ordinal " + std::to_string(got) + ", expected " + std::to_string(want));
  expressions();
  persisted();
  held_data();
  {  // persisted in each rank's device memory (whole there), read in place by the next compute
    random::Generator gen(44);
    Array a = gen.normal(0, 1, {600, 400}, {100, 100});
    ComputeOptions o;
    o.keep_on_device = true;
    Array on = a.persist(o);
    check("persisted on the devices", {(on * 3).sum({0}), on.max()},
          {(a.persist(local()) * 3).sum({0}), a.persist(local()).max()});
    ++g_checks;
    NDArray r = compute({on + 1}, o)[0];
    if (!r.on_device() || !same_bits(r.to_host(), compute({on + 1}, local())[0]))
      fail("a result kept on the device differs");
  }
  error();
  const workloads::Workload& w = workloads::find("glm");
  workloads::SolveArgs args;
  args.n = 4000;
  args.c = 1000;
  args.cols = 10;
  args.solver = "lbfgs";
  ++g_checks;
  workloads::SolveStats st;
  if (w.solve(args, {}, &st) != w.solve(args, local(), &st))
    fail("glm lbfgs on the devices: the solver's results differ");
  if (stats().last_devices != 1)
    fail("a distributed compute used " + std::to_string(stats().last_devices) + " devices");
}

[[noreturn]] void wait_forever() {
  if (distributed::rank() == 0) {
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
  }
  random::Generator gen(3);
  for (;;) (void)compute(gen.normal(0, 1, {2000, 2000}, {250, 250}).sum());
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "same";
  try {
    distributed::init(argc, argv);
    if (distributed::rank() == 0)
      std::printf("dist_check %s: %d ranks, %s\n", mode.c_str(), distributed::size(),
                  distributed::library().c_str());
    if (mode == "same")
      same();
    else if (mode == "error")
      error();
    else if (mode == "devices")
      devices();
    else if (mode == "wait")
      wait_forever();
    else
      fail("unknown mode " + mode);
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  if (distributed::rank() == 0)
    std::printf("dist_check %s: %d checks, %d failures on rank 0\n", mode.c_str(), g_checks,
                g_failures);
  distributed::finalize();
  return g_failures == 0 ? 0 : 1;
}
