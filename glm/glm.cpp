// Families, regularizers and solvers of kiln/glm.hpp. Everything on arrays goes through the
// public API; the coefficient vectors (p values) live on the host.
#include <algorithm>
#include <cmath>
#include <memory>

#include "kiln/glm.hpp"

namespace kiln::glm {

namespace {

// A host vector as a lazy array that keeps its own copy alive.
Array vec(const std::vector<double>& v) {
  auto keep = std::make_shared<std::vector<double>>(v);
  return from_buffer(keep->data(), DType::Float64, {static_cast<int64_t>(keep->size())}, {},
                     std::shared_ptr<const void>(keep, keep->data()));
}

std::vector<double> values(const NDArray& a) {
  std::vector<double> v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[static_cast<size_t>(i)] = a.at(i);
  return v;
}

std::string row_chunks(const Array& a) {
  std::string s = "(";
  for (size_t k = 0; k < a.chunks()[0].size(); ++k)
    s += (k ? ", " : "") + std::to_string(a.chunks()[0][k]);
  return s + ")";
}

double sum_sq(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}

}  // namespace

Family family(const std::string& name) {
  if (name == "logistic") return Family::Logistic;
  if (name == "normal") return Family::Normal;
  if (name == "poisson") return Family::Poisson;
  throw Error("glm: unknown family '" + name + "' (known: logistic, normal, poisson)");
}

const char* family_name(Family f) {
  switch (f) {
    case Family::Logistic:
      return "logistic";
    case Family::Normal:
      return "normal";
    case Family::Poisson:
      return "poisson";
  }
  return "?";
}

Array loss(Family f, const Array& xb, const Array& y) {
  switch (f) {
    case Family::Logistic:
      // sum(xb + log1p(exp(-xb))) - y.xb, with the softplus written so that exp's argument
      // stays <= 0 (the line search's first trials reach |xb| ~ 1e4).
      return (maximum(xb, 0.0) + log1p(exp(-abs(xb)))).sum() - (y * xb).sum();
    case Family::Normal:
      return ((y - xb) * (y - xb)).sum();
    case Family::Poisson:
      return (exp(xb) - y * xb).sum();
  }
  throw Error("glm: unknown family");
}

Array gradient(Family f, const Array& xb, const Array& X, const Array& y) {
  switch (f) {
    case Family::Logistic:
      return matmul(X.T(), sigmoid(xb) - y);
    case Family::Normal:
      return matmul(X.T(), 2.0 * (xb - y));
    case Family::Poisson:
      return matmul(X.T(), exp(xb) - y);
  }
  throw Error("glm: unknown family");
}

Array hessian(Family f, const Array& xb, const Array& X) {
  const int64_t n = X.shape()[0];
  Array w;
  switch (f) {
    case Family::Logistic: {
      Array p = sigmoid(xb);
      w = p * (1.0 - p);
      break;
    }
    case Family::Normal:
      return 2.0 * matmul(X.T(), X);
    case Family::Poisson:
      w = exp(xb);
      break;
  }
  return matmul(X.T(), w.reshape({n, 1}) * X);
}

double Regularizer::value(const std::vector<double>& beta) const {
  double l1 = 0;
  for (double b : beta) l1 += std::abs(b);
  double l2 = sum_sq(beta) / 2;
  switch (penalty) {
    case Penalty::None:
      return 0;
    case Penalty::L1:
      return l1;
    case Penalty::L2:
      return l2;
    case Penalty::ElasticNet:
      return weight * l1 + (1 - weight) * l2;
  }
  return 0;
}

std::vector<double> Regularizer::proximal(const std::vector<double>& beta, double t) const {
  std::vector<double> z(beta.size());
  auto soft = [](double b, double g) { return std::max(0.0, b - g) - std::max(0.0, -b - g); };
  for (size_t j = 0; j < beta.size(); ++j) {
    switch (penalty) {
      case Penalty::None:
        z[j] = beta[j];
        break;
      case Penalty::L1:
        z[j] = soft(beta[j], t);
        break;
      case Penalty::L2:
        z[j] = beta[j] / (1 + t);
        break;
      case Penalty::ElasticNet:
        z[j] = soft(beta[j], weight * t) / (1 + (1 - weight) * t);
        break;
    }
  }
  return z;
}

Regularizer regularizer(const std::string& name) {
  Regularizer r;
  if (name == "none")
    r.penalty = Penalty::None;
  else if (name == "l1")
    r.penalty = Penalty::L1;
  else if (name == "l2")
    r.penalty = Penalty::L2;
  else if (name == "elastic_net")
    r.penalty = Penalty::ElasticNet;
  else
    throw Error("glm: unknown penalty '" + name + "' (known: none, l1, l2, elastic_net)");
  return r;
}

namespace {

// The problem as a solver sees it: X normalized lazily (the mean and scale are buffers the
// kernels read), y as float64, and what maps the coefficients back to X's columns.
struct Problem {
  Array X, y;
  std::vector<double> mean, scale;  // per column; the constant column (if any): 0 and 1
  int intercept = -1;               // the constant column
  int64_t p = 0;
  Family family = Family::Logistic;
  ComputeOptions opt;

  // A computed n-vector (X beta, X grad) as a leaf again, in y's row blocks, keeping its memory.
  Array rows(const NDArray& v) const {
    return from_buffer(v.data(), v.dtype(), v.shape(), {y.chunks()[0][0]}, v.storage());
  }

  std::vector<double> original(std::vector<double> coef) const {  // un-normalize
    double adj = 0;
    for (int64_t j = 0; j < p; ++j) adj += coef[j] * mean[j] / scale[j];
    if (intercept >= 0) coef[intercept] -= adj;
    for (int64_t j = 0; j < p; ++j) coef[j] /= scale[j];
    return coef;
  }
};

Problem prepare(const char* solver, const Array& X0, const Array& y0, const Options& o) {
  const std::string op = std::string("glm.") + solver;
  if (!X0.node() || !y0.node()) throw Error(op + ": X or y is an empty Array");
  if (X0.ndim() != 2 || y0.ndim() != 1)
    throw Error(op + ": expected X of 2 dimensions and y of 1, got shapes " +
                shape_str(X0.shape()) + " and " + shape_str(y0.shape()));
  if (X0.shape()[0] != y0.shape()[0])
    throw Error(op + ": X has " + std::to_string(X0.shape()[0]) + " rows, y " +
                std::to_string(y0.shape()[0]));
  if (X0.chunks()[0] != y0.chunks()[0])
    throw Error(op + ": X's row chunks " + row_chunks(X0) + " differ from y's " + row_chunks(y0) +
                " (rechunk one of them)");
  Problem pr;
  pr.family = o.family;
  pr.opt = o.compute;
  pr.p = X0.shape()[1];
  Array X = X0.astype(DType::Float64), y = y0.astype(DType::Float64);
  // One pass for the checks and the column statistics.
  Array labels_ok = o.family == Family::Logistic  ? ((y == 0.0) | (y == 1.0)).all()
                    : o.family == Family::Poisson ? (y >= 0.0).all()
                                                  : isfinite(y).all();
  std::vector<NDArray> r =
      compute({isfinite(X).all(), isfinite(y).all(), labels_ok, X.mean({0}), X.std({0})}, pr.opt);
  if (!r[0].item<bool>() || !r[1].item<bool>())
    throw Error(op + ": X or y has non-finite values (NaN or inf)");
  if (!r[2].item<bool>())
    throw Error(op + (o.family == Family::Logistic
                          ? ": the logistic family needs labels y in {0, 1}"
                          : ": the Poisson family needs counts y >= 0"));
  pr.mean = values(r[3]);
  pr.scale = values(r[4]);
  for (int64_t j = 0; j < pr.p; ++j) {
    if (!o.normalize) {
      pr.mean[j] = 0;
      pr.scale[j] = 1;
    } else if (pr.scale[j] == 0) {
      if (pr.intercept >= 0) throw Error(op + ": more than one constant column in X");
      pr.intercept = static_cast<int>(j);
      pr.mean[j] = 0;
      pr.scale[j] = 1;
    }
  }
  if (o.normalize && pr.intercept < 0) std::fill(pr.mean.begin(), pr.mean.end(), 0.0);
  pr.X = o.normalize ? (X - vec(pr.mean)) / vec(pr.scale) : X;
  pr.y = y;
  return pr;
}

double scalar_of(const NDArray& a) { return a.item<double>(); }

}  // namespace

Result gradient_descent(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("gradient_descent", X, y, o);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 100;
  const double tol = o.tol > 0 ? o.tol : 1e-14;
  std::vector<double> beta(pr.p, 0.0);
  double step = 1.0, backtrack = 0.1, func = 0;
  Array xb;
  Result res;
  for (int k = 0; k < max_iter; ++k) {
    if (k % 10 == 0) {  // X beta afresh (rounding drift), and its loss
      Array fresh = matmul(pr.X, vec(beta));
      std::vector<NDArray> r = compute({fresh, loss(pr.family, fresh, pr.y)}, pr.opt);
      xb = pr.rows(r[0]);
      func = scalar_of(r[1]);
    }
    std::vector<double> grad = values(compute({gradient(pr.family, xb, pr.X, pr.y)}, pr.opt)[0]);
    Array xg = pr.rows(compute({matmul(pr.X, vec(grad))}, pr.opt)[0]);
    // dask-glm's compute_stepsize_dask: Armijo backtracking.
    const double steplen = sum_sq(grad), lf = func;
    double s = step;
    for (int ii = 0; ii < 100; ++ii) {
      bool moved = false;
      for (int64_t j = 0; j < pr.p; ++j) moved = moved || beta[j] - s * grad[j] != beta[j];
      if (ii > 0 && !moved) {
        s = 0;
        break;
      }
      func = scalar_of(compute({loss(pr.family, xb - s * xg, pr.y)}, pr.opt)[0]);
      if (lf - func >= 0.1 * s * steplen) break;
      s *= backtrack;
    }
    for (int64_t j = 0; j < pr.p; ++j) beta[j] -= s * grad[j];
    xb = pr.rows(compute({xb - s * xg}, pr.opt)[0]);
    res.loss.push_back(func);
    res.n_iter = k + 1;
    if (s == 0 || (lf - func) / std::max(func, lf) < tol) {
      res.converged = true;  // no step moves beta any more, or the decrease fell below tol
      break;
    }
    step = s * 1.25;
    backtrack = 0.5;
  }
  res.coef = pr.original(beta);
  return res;
}

Result newton(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("newton", X, y, o);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 50;
  const double tol = o.tol > 0 ? o.tol : 1e-8;
  std::vector<double> beta(pr.p, 0.0);
  Result res;
  const int64_t p = pr.p;
  while (true) {
    Array xb = matmul(pr.X, vec(beta));
    std::vector<NDArray> r =
        compute({hessian(pr.family, xb, pr.X), gradient(pr.family, xb, pr.X, pr.y)}, pr.opt);
    // step = lstsq(H, g), as dask-glm (NumPy 2's rcond).
    Array h = from_buffer(r[0].data(), DType::Float64, {p, p}, {}, r[0].storage());
    Array g = from_buffer(r[1].data(), DType::Float64, {p}, {}, r[1].storage());
    std::vector<double> step = values(linalg::lstsq(h, g).x.compute());
    bool moved = false;
    for (int64_t j = 0; j < p; ++j) {
      double next = beta[j] - step[j];
      moved = moved || std::abs(beta[j] - next) > tol;
      beta[j] = next;
    }
    ++res.n_iter;
    res.loss.push_back(
        scalar_of(compute({loss(pr.family, matmul(pr.X, vec(beta)), pr.y)}, pr.opt)[0]));
    if (!moved) {
      res.converged = true;
      break;
    }
    if (res.n_iter > max_iter) break;  // dask-glm stops once iter_count > max_iter
  }
  res.coef = pr.original(beta);
  return res;
}

Result proximal_grad(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("proximal_grad", X, y, o);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 100;
  const double tol = o.tol > 0 ? o.tol : 1e-8;
  Regularizer reg = o.penalty;
  if (reg.penalty == Penalty::None) reg.penalty = Penalty::L1;  // dask-glm's default
  std::vector<double> beta(pr.p, 0.0);
  double step = 1.0, backtrack = 0.1, func = 0;
  Array xb;
  Result res;
  for (int k = 0; k < max_iter; ++k) {
    if (k % 10 == 0) {
      Array fresh = matmul(pr.X, vec(beta));
      std::vector<NDArray> r = compute({fresh, loss(pr.family, fresh, pr.y)}, pr.opt);
      xb = pr.rows(r[0]);
      func = scalar_of(r[1]);
    }
    std::vector<double> grad = values(compute({gradient(pr.family, xb, pr.X, pr.y)}, pr.opt)[0]);
    const std::vector<double> obeta = beta;
    const double lf = func;
    double df = 0;
    for (int ii = 0; ii < 100; ++ii) {
      std::vector<double> trial(pr.p);
      for (int64_t j = 0; j < pr.p; ++j) trial[j] = obeta[j] - step * grad[j];
      beta = reg.proximal(trial, step * o.lamduh);
      Array fresh = matmul(pr.X, vec(beta));
      std::vector<NDArray> r = compute({fresh, loss(pr.family, fresh, pr.y)}, pr.opt);
      xb = pr.rows(r[0]);
      func = scalar_of(r[1]);
      df = lf - func;
      if (df > 0) break;
      step *= backtrack;
    }
    res.loss.push_back(func);
    res.n_iter = k + 1;
    if (step == 0) break;
    df /= std::max(func, lf);
    if (df < tol) {
      res.converged = true;
      break;
    }
    step *= 1.25;
    backtrack = 0.5;
  }
  res.coef = pr.original(beta);
  return res;
}

Result lbfgs(const Array& X, const Array& y, const Options& o) {
  const Regularizer& reg = o.penalty;
  if (reg.penalty == Penalty::L1 || (reg.penalty == Penalty::ElasticNet && reg.weight > 0))
    throw Error("glm.lbfgs: the l1 part of a penalty is not differentiable; use proximal_grad");
  Problem pr = prepare("lbfgs", X, y, o);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 100;
  const double tol = o.tol > 0 ? o.tol : 1e-4;
  const double factr = 1e7 * 2.220446049250313e-16;
  const double lam = reg.penalty == Penalty::None ? 0.0 : o.lamduh;
  const int64_t p = pr.p;
  // The objective and its gradient at b: one compute.
  auto evaluate = [&](const std::vector<double>& b, std::vector<double>* g) {
    Array xb = matmul(pr.X, vec(b));
    std::vector<NDArray> r =
        compute({loss(pr.family, xb, pr.y), gradient(pr.family, xb, pr.X, pr.y)}, pr.opt);
    *g = values(r[1]);
    double smooth = 1 - (reg.penalty == Penalty::ElasticNet ? reg.weight : 0);  // L2's share
    for (int64_t j = 0; j < p; ++j) (*g)[j] += lam * smooth * b[j];
    return scalar_of(r[0]) + lam * reg.value(b);
  };
  auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (int64_t j = 0; j < p; ++j) s += a[j] * b[j];
    return s;
  };
  auto max_abs = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
  };
  std::vector<double> beta(p, 0.0), grad;
  double f = evaluate(beta, &grad);
  std::vector<std::vector<double>> s_hist, y_hist;
  std::vector<double> rho_hist;
  Result res;
  if (max_abs(grad) <= tol) res.converged = true;
  for (int k = 0; k < max_iter && !res.converged; ++k) {
    // Two-loop recursion: d = -H g.
    std::vector<double> q = grad, alpha(s_hist.size());
    for (size_t i = s_hist.size(); i-- > 0;) {
      alpha[i] = rho_hist[i] * dot(s_hist[i], q);
      for (int64_t j = 0; j < p; ++j) q[j] -= alpha[i] * y_hist[i][j];
    }
    double gamma = s_hist.empty()
                       ? 1.0 / std::sqrt(dot(grad, grad))
                       : dot(s_hist.back(), y_hist.back()) / dot(y_hist.back(), y_hist.back());
    for (int64_t j = 0; j < p; ++j) q[j] *= gamma;
    for (size_t i = 0; i < s_hist.size(); ++i) {
      double b = rho_hist[i] * dot(y_hist[i], q);
      for (int64_t j = 0; j < p; ++j) q[j] += s_hist[i][j] * (alpha[i] - b);
    }
    std::vector<double> d(p);
    for (int64_t j = 0; j < p; ++j) d[j] = -q[j];
    double slope = dot(grad, d);
    if (!(slope < 0)) {  // not a descent direction: restart from the gradient
      s_hist.clear();
      y_hist.clear();
      rho_hist.clear();
      double scale = 1.0 / std::sqrt(dot(grad, grad));
      for (int64_t j = 0; j < p; ++j) d[j] = -grad[j] * scale;
      slope = dot(grad, d);
    }
    // Armijo backtracking.
    double step = 1.0, f_new = f;
    std::vector<double> trial(p), g_new;
    bool accepted = false;
    for (int ls = 0; ls < 60; ++ls) {
      for (int64_t j = 0; j < p; ++j) trial[j] = beta[j] + step * d[j];
      f_new = evaluate(trial, &g_new);
      if (f_new <= f + 1e-4 * step * slope) {
        accepted = true;
        break;
      }
      step *= 0.5;
    }
    res.n_iter = k + 1;
    if (!accepted) {  // no decrease along d: as converged as this precision allows
      res.loss.push_back(f);
      res.converged = true;
      break;
    }
    std::vector<double> s(p), yv(p);
    for (int64_t j = 0; j < p; ++j) {
      s[j] = trial[j] - beta[j];
      yv[j] = g_new[j] - grad[j];
    }
    double sy = dot(s, yv);
    if (sy > 1e-10 * dot(yv, yv)) {  // keep the pair only where it keeps H positive definite
      s_hist.push_back(s);
      y_hist.push_back(yv);
      rho_hist.push_back(1.0 / sy);
      if (s_hist.size() > 10) {
        s_hist.erase(s_hist.begin());
        y_hist.erase(y_hist.begin());
        rho_hist.erase(rho_hist.begin());
      }
    }
    const double f_old = f;
    beta = trial;
    grad = g_new;
    f = f_new;
    res.loss.push_back(f);
    if (max_abs(grad) <= tol ||
        (f_old - f) <= factr * std::max({std::abs(f_old), std::abs(f), 1.0}))
      res.converged = true;
  }
  res.coef = pr.original(beta);
  return res;
}

Result solve(const std::string& solver, const Array& X, const Array& y, const Options& o) {
  if (solver == "gradient_descent") return gradient_descent(X, y, o);
  if (solver == "newton") return newton(X, y, o);
  if (solver == "proximal_grad") return proximal_grad(X, y, o);
  if (solver == "lbfgs") return lbfgs(X, y, o);
  throw Error("glm: unknown solver '" + solver +
              "' (known: gradient_descent, newton, proximal_grad, lbfgs)");
}

}  // namespace kiln::glm
