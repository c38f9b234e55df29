// The seed workloads, shared by the kiln command and the benchmarks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::workloads {

// What an iterative workload did: its computes, their tasks, its peak, its timed part (from
// kiln::stats(), so a solver that is a library call counts the same).
struct SolveStats {
  int64_t computes = 0, tasks = 0, peak_bytes = 0;
  double seconds = 0;  // the solver's wall time (the problem's data made before it)
};

// What a solver workload runs on: its data's rows, row chunk and columns, and (glm) the model;
// an empty name means the workload's default.
struct SolveArgs {
  int64_t n = 0, c = 0, cols = 0;
  std::string family, solver, penalty;
  std::string input;  // glm: a directory with X.npy and y.npy to fit instead (n, cols from them)
  int max_iter = 0;   // glm: 0: the solver's default
  double tol = 0;     // glm: 0: the solver's default
};

struct Workload {
  std::string name;
  std::string seed;         // which seed document it comes from
  std::string description;  // the expression, NumPy style
  int64_t size, chunk;      // defaults
  // Matrix workloads (solvers): the columns of the (size x cols) data, --cols; 0: not one.
  // Expression workloads: `input` is the random x for size N and chunk C (lazy: a generator of
  // that engine: Kiln's makes x inside the kernels, cuRAND's by a library call), `expr` the lazy
  // outputs over it; the first output is "the result". `kiln run --resident` computes input()
  // once and times expr over the buffer.
  std::function<Array(int64_t n, int64_t c, random::Engine engine)> input;
  std::function<std::vector<Array>(const Array& x)> expr;
  std::vector<std::string> output_names;
  // Iterative workloads (a solver: many computes with host logic between them) set `solve`
  // instead of `build`: it makes the problem, runs the solver with these options and returns
  // the results named by output_names.
  std::function<std::vector<double>(const SolveArgs&, const ComputeOptions&, SolveStats*)> solve;

  // Floating-point operations of one run at size N, when the workload is compute-bound (kiln run
  // --json reports gflops); null otherwise.
  std::function<double(int64_t n)> flops;
  int64_t cols = 0;
  bool model = false;  // takes --family, --solver, --penalty (glm)

  std::vector<Array> build(int64_t n, int64_t c,
                           random::Engine engine = random::Engine::Kiln) const {
    return expr(input(n, c, engine));
  }
};

// Smoke runs (kiln seeds --quick, KILN_BENCH_QUICK=1) divide every workload's default size and
// chunk by this: the same blocks, a fraction of the work.
constexpr int64_t kQuickDivisor = 20;

const std::vector<Workload>& all();
const Workload& find(const std::string& name);  // throws kiln::Error listing the known names

}  // namespace kiln::workloads
