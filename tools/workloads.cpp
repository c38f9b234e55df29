#include "tools/workloads.hpp"

#include <algorithm>
#include <chrono>

namespace kiln::workloads {

namespace {

// compute() that also counts into `st`.
std::vector<NDArray> run(const std::vector<Array>& outs, const ComputeOptions& opt,
                         SolveStats* st) {
  std::vector<NDArray> r = compute(outs, opt);
  Stats s = stats();
  ++st->computes;
  st->tasks += s.last_tasks;
  st->peak_bytes = std::max(st->peak_bytes, s.last_peak_bytes);
  return r;
}

// A computed 1-D or 2-D array as a lazy leaf again (zero-copy; `keep` must outlive its use).
Array leaf(const NDArray& keep, const Shape& chunks) {
  return from_buffer(keep.data(), keep.dtype(), keep.shape(), chunks);
}

// The logistic regression problem of seed 000 (dask-glm's benchmarks): X ~ N(0, 1), (n, 100)
// in row blocks of c, y = [X w + N(0, 1) > 0] with w_j = (j mod 7 - 3) / 3; then dask-glm's
// gradient descent, 20 iterations at most.
std::vector<double> logistic_gd(int64_t n, int64_t c, int64_t p, const ComputeOptions& opt,
                                SolveStats* st) {
  random::Generator rng(0);
  Array x = rng.normal(0, 1, {n, p}, {c, p});
  std::vector<double> w(p);
  for (int64_t j = 0; j < p; ++j) w[j] = static_cast<double>(j % 7 - 3) / 3;
  Array noise = rng.normal(0, 1, {n}, {c});
  Array label = ((x * from_buffer(w.data(), {1, p})).sum({1}) + noise > 0).astype(DType::Float64);
  std::vector<NDArray> data = compute({x, label}, opt);
  double loss = 0;
  int iterations = 0;
  auto t0 = std::chrono::steady_clock::now();
  logistic_gradient_descent(leaf(data[0], {c, p}), leaf(data[1], {c}), 20, 1e-14, opt, st, &loss,
                            &iterations);
  st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {loss, static_cast<double>(iterations)};
}

// Seed 000's SVD: x = normal(0, 1, (m, k)) in row blocks of c, made before the timed part; then
// u, s, vh = svd(x) (TSQR over the row blocks), timed; results: the first 5 singular values and
// ||u s vh - x|| / ||x||, computed after the timing.
std::vector<double> svd_workload(int64_t m, int64_t c, int64_t k, const ComputeOptions& opt,
                                 SolveStats* st) {
  NDArray data = compute({random::Generator(0).normal(0, 1, {m, k}, {c, k})}, opt)[0];
  Array x = leaf(data, {c, k});
  auto t0 = std::chrono::steady_clock::now();
  linalg::SVD f = linalg::svd(x);
  std::vector<NDArray> r = run({f.u, f.s, f.vh}, opt, st);
  st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Array u = from_buffer(r[0].data(), r[0].dtype(), r[0].shape(), {c, r[0].shape()[1]});
  Array s = from_buffer(r[1].data(), r[1].dtype(), r[1].shape());
  Array vh = from_buffer(r[2].data(), r[2].dtype(), r[2].shape());
  double err =
      compute({linalg::norm(matmul(u * s, vh) - x) / linalg::norm(x)}, opt)[0].item<double>();
  std::vector<double> out;
  for (int64_t q = 0; q < 5; ++q) out.push_back(q < r[1].size() ? r[1].at(q) : 0.0);
  out.push_back(err);
  return out;
}

}  // namespace

std::vector<double> logistic_gradient_descent(const Array& X, const Array& y, int max_iter,
                                              double tol, const ComputeOptions& opt, SolveStats* st,
                                              double* loss, int* iterations) {
  const int64_t p = X.shape()[1];
  const Shape rows = {X.chunks()[0].front()};          // y's and X beta's blocks: X's row blocks
  auto dot_rows = [&](const std::vector<double>& v) {  // X v: one fused pass over X
    return matmul(X, from_buffer(v.data(), {p}));
  };
  // dask-glm's loglike, sum(xb + log1p(exp(-xb))) - y . xb, with the softplus written so that
  // exp's argument stays in [-700, 0]: the line search's first trial steps reach |xb| ~ 1e4,
  // where exp(-xb) is inf or 0 (the same rejection either way), and libmvec's vector exp takes
  // a scalar slow path for every such lane (it was a third of the solver's time).
  auto loglike = [&](const Array& xb) {
    return (maximum(xb, 0.0) + log1p(exp(maximum(-abs(xb), -700.0)))).sum() - (y * xb).sum();
  };
  std::vector<double> beta(p, 0.0), grad(p);
  double step_size = 1.0, backtrack = 0.1, func = 0;
  NDArray xbeta_mem, xgrad_mem;
  Array xbeta;
  int k = 0;
  for (; k < max_iter; ++k) {
    if (k % 10 == 0) {  // X beta afresh (rounding drift), and its loss
      Array xb = dot_rows(beta);
      std::vector<NDArray> r = run({xb, loglike(xb)}, opt, st);
      xbeta_mem = r[0];
      xbeta = leaf(xbeta_mem, rows);
      func = r[1].item<double>();
    }
    // grad = X^T (sigmoid(X beta) - y), one fused pass over X; X grad.
    NDArray g = run({matmul(X.T(), sigmoid(xbeta) - y)}, opt, st)[0];
    std::copy_n(g.data_as<double>(), p, grad.begin());
    xgrad_mem = run({dot_rows(grad)}, opt, st)[0];
    Array xgrad = leaf(xgrad_mem, rows);
    // Backtracking line search (dask-glm's compute_stepsize_dask).
    double steplen = 0;
    for (double v : grad) steplen += v * v;
    const double lf = func;
    double s = step_size;
    for (int ii = 0; ii < 100; ++ii) {
      bool moved = false;
      for (int64_t j = 0; j < p; ++j) moved = moved || beta[j] - s * grad[j] != beta[j];
      if (ii > 0 && !moved) {
        s = 0;
        break;
      }
      func = run({loglike(xbeta - s * xgrad)}, opt, st)[0].item<double>();
      if (lf - func >= 0.1 * s * steplen) break;
      s *= backtrack;
    }
    for (int64_t j = 0; j < p; ++j) beta[j] -= s * grad[j];
    xbeta_mem = run({xbeta - s * xgrad}, opt, st)[0];
    xbeta = leaf(xbeta_mem, rows);
    if (s == 0) {
      ++k;
      break;
    }
    if ((lf - func) / std::max(func, lf) < tol) {
      ++k;
      break;
    }
    step_size = s * 1.25;
    backtrack = 0.5;
  }
  *loss = func;
  *iterations = k;
  return beta;
}

const std::vector<Workload>& all() {
  static const std::vector<Workload> w = {
      {"random-sum",
       "001 (GPU Dask arrays)",
       "x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()",
       20000,
       2000,
       [](int64_t n, int64_t c) {
         return random::Generator(0).normal(10, 1, {n, n}, {c, c});
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
       [](int64_t n, int64_t c) {
         return random::Generator(0).uniform(0, 1, {n, n}, {c, c});
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
       [](int64_t n, int64_t c) {
         return random::Generator(0).uniform(1, 2, {n, n}, {c, c});
       },
       [](const Array& x) { return std::vector<Array>{(exp(x) - 1 / x).sum()}; },
       {"sum"},
       nullptr,
       nullptr},
      {"logistic-gd",
       "000 (Dask-GLM vs scikit-learn), 002 (Dask-GLM scheduler overhead)",
       "X = normal(0, 1, (N, 100), chunks=(C, 100)); y = X w + noise > 0; dask-glm's "
       "gradient_descent (20 iterations): result = final loss",
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
      {"matmul",
       "000 (linear algebra on chunked arrays)",
       "x = uniform(-1, 1, (N, N), chunks=(C, C)); (x @ x).sum(): a gemm per block and "
       "contraction chunk, partials added in order; gflops = 2 N^3 / seconds (use --resident to "
       "time the product alone)",
       4000,
       1000,
       [](int64_t n, int64_t c) {
         return random::Generator(0).uniform(-1, 1, {n, n}, {c, c});
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
