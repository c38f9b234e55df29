// Generalized linear models on Kiln arrays: dask-glm's families, regularizers and solvers as a
// library built on the public API only (kiln/kiln.hpp), so a user can write a solver the same way.
// Each iteration is a few compute() calls whose structure repeats, so after the first iteration
// every plan and kernel comes from the caches; the coefficients, step sizes and penalties reach
// the kernels as parameters (a small buffer and scalars).
//
// Solvers (the algorithms, defaults and stopping rules of dask-glm 0.4.0's dask_glm/algorithms.py,
// written anew): gradient_descent, newton, proximal_grad; and lbfgs, a documented two-loop L-BFGS
// where dask-glm calls scipy's fmin_l_bfgs_b. Like dask-glm, every solver first
// normalizes X's columns (mean 0, standard deviation 1; a constant column, the intercept, is
// left as it is) unless Options::normalize is false, and returns coefficients for the original
// columns.
#pragma once
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::glm {

// The negative log-likelihood (loss), its gradient and Hessian in the linear predictor Xbeta.
enum class Family { Logistic, Normal, Poisson };
Family family(const std::string& name);  // "logistic", "normal", "poisson"
const char* family_name(Family f);

// loss(Xbeta, y) (0-d): Logistic sum(xb + log1p(exp(-xb))) - y.xb; Normal sum((y - xb)^2);
// Poisson sum(exp(xb) - y xb). gradient: X^T (dloss/dxb), (p,). hessian: X^T diag(w) X, (p, p).
Array loss(Family f, const Array& xbeta, const Array& y);
Array gradient(Family f, const Array& xbeta, const Array& X, const Array& y);
Array hessian(Family f, const Array& xbeta, const Array& X);

// Penalties on the coefficients and their proximal operators (host vectors: p is small).
enum class Penalty { None, L1, L2, ElasticNet };
struct Regularizer {
  Penalty penalty = Penalty::None;
  double weight = 0.5;  // ElasticNet: the L1 share, weight |b| + (1 - weight) b^2 / 2
  double value(const std::vector<double>& beta) const;  // L1 sum |b|; L2 sum b^2 / 2
  // argmin_z penalty(z) t + |z - beta|^2 / 2. (dask-glm 0.4.0's ElasticNet returns beta
  // unchanged, a bug; this is the operator its derivation gives: soft-threshold by weight t,
  // then divide by 1 + (1 - weight) t.)
  std::vector<double> proximal(const std::vector<double>& beta, double t) const;
};
Regularizer regularizer(const std::string& name);  // "none", "l1", "l2", "elastic_net"

struct Options {
  Family family = Family::Logistic;
  int max_iter = 0;     // 0: the solver's default (gradient_descent 100, newton 50, proximal 100)
  double tol = 0;       // 0: the solver's default (1e-14, 1e-8, 1e-8)
  Regularizer penalty;  // proximal_grad: Penalty::None there means L1, dask-glm's default
  double lamduh = 0.1;  // penalty strength (proximal_grad, lbfgs)
  bool normalize = true;
  ComputeOptions compute;
};

struct Result {
  std::vector<double> coef;  // for X's original columns
  int n_iter = 0;
  std::vector<double> loss;  // the loss after each iteration (lbfgs: plus the penalty)
  bool converged = false;    // false: stopped by max_iter (or, for the line searches, no progress)
};

Result gradient_descent(const Array& X, const Array& y, const Options& options = {});
Result newton(const Array& X, const Array& y, const Options& options = {});
Result proximal_grad(const Array& X, const Array& y, const Options& options = {});
// L-BFGS on loss + lamduh * penalty (None, L2 or ElasticNet's smooth part only when weight = 0;
// L1 is not differentiable: use proximal_grad): the two-loop recursion with the last 10 pairs
// (scipy's default maxcor, which dask-glm's lbfgs calls through fmin_l_bfgs_b), an Armijo
// backtracking line search (c1 = 1e-4, halving, 1/|g| as the first step), stopping when the
// largest gradient component is <= tol (default 1e-4, dask-glm's pgtol) or the relative decrease
// of the objective is <= 1e7 * eps (scipy's factr); max_iter default 100.
Result lbfgs(const Array& X, const Array& y, const Options& options = {});
// By name: "gradient_descent", "newton", "proximal_grad", "lbfgs".
Result solve(const std::string& solver, const Array& X, const Array& y,
             const Options& options = {});

}  // namespace kiln::glm
