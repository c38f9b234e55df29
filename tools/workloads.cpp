#include "tools/workloads.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "kiln/glm.hpp"
#include "support/npy.hpp"

namespace kiln::workloads {

namespace {

// Runs the solver `fn`, timing it and counting its computes, tasks and peak into `st`.
template <class F>
auto measured(SolveStats* st, F&& fn) {
  reset_peak_stats();
  Stats before = stats();
  auto t0 = std::chrono::steady_clock::now();
  auto out = fn();
  st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Stats after = stats();
  st->computes = after.computes - before.computes;
  st->tasks = after.tasks - before.tasks;
  st->peak_bytes = after.max_peak_bytes;
  return out;
}

// The data a solver is timed over, computed once before it: on a GPU kept in device memory, as
// CuPy's and JAX's arrays are (a GPU run then times the solver, not PCIe copies of its input).
Array made(const Array& a, ComputeOptions opt) {
  opt.keep_on_device = true;  // ignored on host devices
  return a.persist(opt);
}

// Seed 000's GLM problems (dask-glm's benchmarks), made before the timed solver: X ~ N(0, 1),
// (n, p) in row blocks of c; eta = X w, w_j = (j mod 7 - 3) / 3; logistic y = [eta + N(0, 1) >
// 0], normal y = eta + N(0, 1), Poisson y = floor(exp(eta / |w|) + U(0, 1)) (counts of mean about
// exp(eta / |w|); Kiln has no Poisson sampler).
std::pair<Array, Array> glm_data(glm::Family family, int64_t n, int64_t c, int64_t p,
                                 const ComputeOptions& opt) {
  random::Generator rng(0);
  // normal() checks the sizes before anything is allocated.
  Array x = made(rng.normal(0, 1, {n, p}, {c, p}), opt);
  // w is lazy too (no host vector of p doubles: --cols 2147483647 once allocated 16 GB before any
  // check), the same values: int64 j % 7 - 3, converted, divided by 3.
  Array w = ((arange(p) % 7 - 3).astype(DType::Float64) / 3.0).reshape({1, p});
  Array eta = (x * w).sum({1});
  Array y;
  switch (family) {
    case glm::Family::Logistic:
      y = (eta + rng.normal(0, 1, {n}, {c}) > 0).astype(DType::Float64);
      break;
    case glm::Family::Normal:
      y = eta + rng.normal(0, 1, {n}, {c});
      break;
    case glm::Family::Poisson: {
      double norm = 0;  // |w|^2, summed in order on the host (O(p): Poisson only)
      for (int64_t j = 0; j < p; ++j) {
        double wj = static_cast<double>(j % 7 - 3) / 3;
        norm += wj * wj;
      }
      y = floor(exp(eta / std::sqrt(norm)) + rng.uniform(0, 1, {n}, {c}));
      break;
    }
  }
  return {x, made(y, opt)};
}

// The logistic regression of seed 000 by dask-glm's gradient descent (kiln::glm, without the
// column normalization, as the peers' runs), 20 iterations at most.
std::vector<double> logistic_gd(const SolveArgs& a, const ComputeOptions& opt, SolveStats* st) {
  auto [x, y] = glm_data(glm::Family::Logistic, a.n, a.c, a.cols, opt);
  glm::Options o;
  o.max_iter = 20;
  o.tol = 1e-14;
  o.normalize = false;
  o.compute = opt;
  glm::Result r = measured(st, [&] { return glm::gradient_descent(x, y, o); });
  return {r.loss.back(), static_cast<double>(r.n_iter)};
}

// `kiln run glm`: a family, solver and penalty of kiln::glm on seed 000's data or on --input's
// X.npy and y.npy (read into memory before the timed solver), dask-glm's defaults otherwise
// (normalized columns, lamduh 0.1).
std::vector<double> glm_workload(const SolveArgs& a, const ComputeOptions& opt, SolveStats* st) {
  glm::Options o;
  o.family = glm::family(a.family.empty() ? "logistic" : a.family);
  if (!a.penalty.empty())
    o.penalty = glm::regularizer(a.penalty == "elastic" ? "elastic_net" : a.penalty);
  o.max_iter = a.max_iter;
  o.tol = a.tol;
  o.compute = opt;
  const std::string solver = a.solver.empty() ? "lbfgs" : a.solver;
  Array X, y;
  if (!a.input.empty()) {
    X = load_npy(a.input + "/X.npy", {a.c, a.cols}).persist();
    const std::string y_path = a.input + "/y.npy";
    if (NpyInfo h = read_npy_header(y_path); h.shape.size() != 1)
      throw Error("kiln run glm: '" + y_path + "' has shape " + shape_str(h.shape) +
                  "; y must be 1-D, one label per row of X.npy");
    y = load_npy(y_path, {a.c}).persist();
  } else {
    std::tie(X, y) = glm_data(o.family, a.n, a.c, a.cols, opt);
  }
  glm::Result r = measured(st, [&] { return glm::solve(solver, X, y, o); });
  return {r.loss.empty() ? 0.0 : r.loss.back(), static_cast<double>(r.n_iter),
          r.converged ? 1.0 : 0.0};
}

// Seed 000's SVD: x = normal(0, 1, (m, k)) in row blocks of c, made before the timed part; then
// u, s, vh = svd(x) (TSQR over the row blocks), timed (on a GPU, x and the factors stay in device
// memory); results: the first 5 singular values and ||u s vh - x|| / ||x||, computed after the
// timing.
std::vector<double> svd_workload(const SolveArgs& a, const ComputeOptions& opt, SolveStats* st) {
  const int64_t c = a.c, k = a.cols;
  Array x = made(random::Generator(0).normal(0, 1, {a.n, k}, {c, k}), opt);
  ComputeOptions kept = opt;
  kept.keep_on_device = true;
  std::vector<NDArray> r = measured(st, [&] {
    linalg::SVD f = linalg::svd(x);
    return compute({f.u, f.s, f.vh}, kept);
  });
  for (NDArray& f : r)
    if (f.on_device()) f = f.to_host();
  Array u = from_buffer(r[0].data(), r[0].dtype(), r[0].shape(), {c, r[0].shape()[1]});
  Array s = from_buffer(r[1].data(), r[1].dtype(), r[1].shape());
  Array vh = from_buffer(r[2].data(), r[2].dtype(), r[2].shape());
  double err =
      compute({linalg::norm(matmul(u * s, vh) - x) / linalg::norm(x)}, opt)[0].item<double>();
  std::vector<double> out;
  // s0..s4; NaN (JSON null) past the K singular values there are, not a made-up 0.
  for (int64_t q = 0; q < 5; ++q)
    out.push_back(q < r[1].size() ? r[1].at(q) : std::numeric_limits<double>::quiet_NaN());
  out.push_back(err);
  return out;
}

}  // namespace

const std::vector<Workload>& all() {
  static const std::vector<Workload> w = {
      {"random-sum",
       "001 (GPU Dask arrays)",
       "x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()",
       20000,
       2000,
       [](int64_t n, int64_t c, random::Engine e) {
         return random::Generator(0, e).normal(10, 1, {n, n}, {c, c});
       },
       [](const Array& x) {
         return std::vector<Array>{(x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum()};
       },
       {"sum"},
       nullptr,
       nullptr},
      {"trig-identity",
       "004 (GPU PyData roadblocks)",
       "x = uniform(0, 1, (N, N)); (sin(x)**2 + cos(x)**2 == 1).all(), and its count of trues",
       10000,
       2000,
       [](int64_t n, int64_t c, random::Engine e) {
         return random::Generator(0, e).uniform(0, 1, {n, n}, {c, c});
       },
       [](const Array& x) {
         Array y = pow(sin(x), 2) + pow(cos(x), 2) == 1;
         return std::vector<Array>{y.all(), y.sum()};
       },
       {"all", "count"},
       nullptr,
       nullptr},
      {"diamond",
       "002 (Dask-GLM overhead, aggressive fusion)",
       "x = uniform(1, 2, (N, N)); (exp(x) - 1/x).sum()",
       10000,
       2000,
       [](int64_t n, int64_t c, random::Engine e) {
         return random::Generator(0, e).uniform(1, 2, {n, n}, {c, c});
       },
       [](const Array& x) { return std::vector<Array>{(exp(x) - 1 / x).sum()}; },
       {"sum"},
       nullptr,
       nullptr},
      {"logistic-gd",
       "000 (Dask-GLM vs scikit-learn), 002 (Dask-GLM scheduler overhead)",
       "X = normal(0, 1, (N, 100), chunks=(C, 100)); y = X w + noise > 0; dask-glm's "
       "gradient_descent (20 iterations; kiln::glm, columns not normalized): result = final loss",
       1000000,
       100000,
       nullptr,
       nullptr,
       {"loss", "iterations"},
       logistic_gd,
       nullptr,
       100},
      {"svd",
       "000 (SVD of a chunked array with NumPy, Dask and CuPy)",
       "x = normal(0, 1, (N, K), chunks=(C, K)); u, s, vh = svd(x) (TSQR, then gesdd of the K x K "
       "factor): result = s[0], then s[1..4] and ||u s vh - x|| / ||x|| (not timed); --cols K",
       10000,
       5000,
       nullptr,
       nullptr,
       {"s0", "s1", "s2", "s3", "s4", "error"},
       svd_workload,
       nullptr,
       1000},
      {"glm",
       "000 (Dask-GLM vs scikit-learn), 002 (Dask-GLM scheduler overhead)",
       "X = normal(0, 1, (N, K), chunks=(C, K)); y by --family (logistic: X w + noise > 0, normal: "
       "X w + noise, poisson: counts of mean exp(X w / |w|)); kiln::glm's --solver "
       "(gradient_descent, "
       "newton, lbfgs, admm, proximal_grad; default lbfgs) with --penalty (l1, l2, elastic): "
       "result "
       "= final loss, then iterations and converged",
       1000000,
       100000,
       nullptr,
       nullptr,
       {"loss", "iterations", "converged"},
       glm_workload,
       nullptr,
       100,
       true},
      {"matmul",
       "000 (linear algebra on chunked arrays)",
       "x = uniform(-1, 1, (N, N), chunks=(C, C)); (x @ x).sum(): a gemm per block and "
       "contraction chunk, partials added in order; gflops = 2 N^3 / seconds (use --resident to "
       "time the product alone)",
       4000,
       1000,
       [](int64_t n, int64_t c, random::Engine e) {
         return random::Generator(0, e).uniform(-1, 1, {n, n}, {c, c});
       },
       [](const Array& x) { return std::vector<Array>{matmul(x, x).sum()}; },
       {"sum"},
       nullptr,
       [](int64_t n) { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * n; }},
  };
  return w;
}

const Workload& find(const std::string& name) {
  std::string known;
  for (const auto& w : all()) {
    if (w.name == name) return w;
    known += (known.empty() ? "" : ", ") + w.name;
  }
  throw Error("kiln run: unknown workload '" + name + "' (known: " + known + ")");
}

}  // namespace kiln::workloads
