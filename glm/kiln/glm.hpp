// Generalized linear models on Kiln arrays: dask-glm's families, regularizers and solvers as a
// library built on the public API only (kiln/kiln.hpp), so a user can write a solver the same way.
// Each iteration is a few compute() calls whose structure repeats, so after the first iteration
// every plan and kernel comes from the caches; the coefficients, step sizes and penalties reach
// the kernels as parameters (a small buffer and scalars).
//
// Solvers (the algorithms, defaults and stopping rules of dask-glm 0.4.0's dask_glm/algorithms.py,
// written anew): gradient_descent, newton, proximal_grad, admm; and lbfgs, a documented two-loop
// L-BFGS where dask-glm calls scipy's fmin_l_bfgs_b (admm's local solves too). Estimators with
// scikit-learn's API (as dask-ml's) sit on top. Like dask-glm, every solver first
// normalizes X's columns (mean 0, standard deviation 1; a constant column, the intercept, is
// left as it is) unless Options::normalize is false, and returns coefficients for the original
// columns. y chunked unlike X's rows is rechunked to them (as dask-ml aligns them; a view).
#pragma once
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
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
  // The same with a factor per coefficient: the penalty of factor_j * beta_j (glmnet's
  // penalty.factor; 0 leaves a coefficient unpenalized).
  double value(const std::vector<double>& beta, const std::vector<double>& factor) const;
  std::vector<double> proximal(const std::vector<double>& beta, double t,
                               const std::vector<double>& factor) const;
  // The L2 share of the penalty (1 for L2, 1 - weight for ElasticNet, else 0) and whether it
  // has an L1 part (not differentiable).
  double l2_share() const;
  bool has_l1() const;
};
Regularizer regularizer(const std::string& name);  // "none", "l1", "l2", "elastic_net"

struct Options {
  Family family = Family::Logistic;
  // 0: the solver's default: gradient_descent 100, newton 50, proximal_grad 100, lbfgs 100,
  // admm 250 iterations; tol 1e-14, 1e-8, 1e-8, 1e-4 and (admm's abstol) 1e-4.
  int max_iter = 0;
  double tol = 0;
  // The penalty lamduh * penalty(beta). proximal_grad and admm: Penalty::None means L1, dask-glm's
  // default. gradient_descent, newton and lbfgs (which in dask-glm take no penalty, or L2 only)
  // take a differentiable one: None, L2 or ElasticNet with weight 0; an L1 part is refused.
  Regularizer penalty;
  double lamduh = 0.1;
  bool normalize = true;
  // Which coefficients the penalty applies to. false (dask-glm): those of the normalized columns,
  // the constant column's (the intercept) included. true (scikit-learn): those of X's own columns,
  // the constant column's excluded.
  bool penalize_original = false;
  // admm: the augmented Lagrangian's rho, the over-relaxation, and reltol (tol is abstol).
  double rho = 1, over_relax = 1, reltol = 1e-2;
  // > 0: scikit-learn's stopping rule instead of the solver's own (tol, reltol unused; the
  // estimators' tol): the solver stops, converged, at the first iterate where the largest
  // component of the objective's gradient divided by X's number of rows (the gradient of
  // scikit-learn's mean objective; with an L1 part, its minimum-norm subgradient) is <= gtol,
  // the gradient taken with respect to the solver's coefficients (those of X's columns scaled
  // to standard deviation 1, and centered where X has a constant column, unless normalize is
  // false: a measure free of the columns' units). Otherwise it stops at max_iter, or where no
  // step decreases the objective any more, converged false. lbfgs then stops on a relative
  // decrease of 64 eps (scikit-learn's ftol), not scipy's factr; admm's local solves run to
  // min(1e-5, gtol * rows / chunks / 2) (their errors add up in z's gradient).
  double gtol = 0;
  ComputeOptions compute;
};

struct Result {
  std::vector<double> coef;  // for X's original columns
  int n_iter = 0;            // <= max_iter
  std::vector<double> loss;  // the objective (loss + lamduh * penalty) after each iteration
  // Whether the stopping rule (Options::gtol's, or the solver's own) holds at coef: false when
  // stopped by max_iter, or where no step decreases the objective any more (except where a
  // solver's own rule below says that counts).
  bool converged = false;
};

// dask-glm's gradient_descent, newton and proximal_grad, step for step. Each reads X once per
// iteration where the algorithm allows (row fusion puts X b in the kernel that reads it back):
// gradient_descent computes X grad with the loss and gradient at the line search's first trial
// step (used when that step is taken, as it usually is), proximal_grad each trial's X beta with
// its gradient, newton the loss of each iterate with the next Hessian and gradient.
// None of them increases the objective beyond its rounding (16 eps): gradient_descent's Armijo
// search and proximal_grad's search for a decrease keep beta where they find no such step
// (dask-glm takes the last trial; they then stop, the relative decrease being 0 < tol,
// converged), and newton, which in dask-glm takes every full step (diverging on Poisson data
// with large counts: objective 1e104 after 51 iterations on diabetes), backtracks where the full
// step fails Armijo's condition (c1 = 1e-4, halving, 40 trials; a change within 16 eps of the
// objective passes when the gradient's 1-norm falls, scikit-learn's rule for rounding), so on
// well-behaved problems its iterates are dask-glm's. Their own rules: gradient_descent and
// proximal_grad stop when the relative decrease of the objective is < tol (relative to its
// magnitude: dask-glm's divides by the objective itself, and a negative one, Poisson's on large
// counts, stopped them after 2 iterations at half the optimum's value); newton when no
// coefficient's full step exceeds tol (then takes that last step unless it raises the objective
// beyond rounding), at most max_iter iterations (dask-glm's newton runs max_iter + 1).
Result gradient_descent(const Array& X, const Array& y, const Options& options = {});
Result newton(const Array& X, const Array& y, const Options& options = {});
Result proximal_grad(const Array& X, const Array& y, const Options& options = {});
// L-BFGS on loss + lamduh * penalty (differentiable ones only; for L1 use proximal_grad or
// admm): the two-loop recursion with the last 10 pairs
// (scipy's default maxcor, which dask-glm's lbfgs calls through fmin_l_bfgs_b), an Armijo
// backtracking line search (c1 = 1e-4, halving, 1/|g| as the first step), stopping when the
// largest gradient component is <= tol (default 1e-4, dask-glm's pgtol) or the relative decrease
// of the objective is <= 1e7 * eps (scipy's factr); max_iter default 100.
Result lbfgs(const Array& X, const Array& y, const Options& options = {});
// ADMM (dask-glm's admm): consensus over X's row chunks. Each iteration solves every chunk's local
// problem, loss(X_i b) + rho/2 |b - z + u_i|^2, by L-BFGS from ones (the two-loop recursion of
// lbfgs, scipy's fmin_l_bfgs_b defaults that dask-glm's local_update uses: pgtol 1e-5, at most
// 200 iterations and 250 evaluations); the chunks' solves run side by side, every evaluation of
// all of them one compute() with a task per chunk. Then z = prox(mean(b_i + u_i),
// lamduh / (rho k)), u_i += b_i - z, and it stops when the primal and dual residuals fall below
// sqrt(p k) abstol + reltol * (their scales). loss: the objective at z after each iteration.
// ADMM is not a descent method: that objective may rise between iterations. Its own rule bounds
// the residuals, not the distance to the optimum: with dask-ml's settings on scikit-learn's
// breast_cancer (logistic, L2 on X's own coefficients, lamduh 1, one chunk) it stops after 76
// iterations, the objective 1.4% above the optimum, the coefficients 13% off (relative to the
// largest), Options::gtol's measure 8e-3.
Result admm(const Array& X, const Array& y, const Options& options = {});
// By name: "gradient_descent", "newton", "proximal_grad", "lbfgs", "admm".
Result solve(const std::string& solver, const Array& X, const Array& y,
             const Options& options = {});

// ---- estimators --------------------------------------------------------------------------------
// scikit-learn's estimator API on these solvers, as dask-ml's dask_ml.linear_model: fit(X, y)
// appends a column of ones to X when fit_intercept (the intercept, never penalized), fits with
// lamduh = 1 / C and the penalty on X's own coefficients (Options::penalize_original), so the
// objective is scikit-learn's: sum(loss) + penalty(coef) / C. Logistic: equal to
// sklearn.linear_model.LogisticRegression(C=C); Normal (loss sum((y - Xb)^2)): Ridge(alpha =
// 1 / (2 C)) and Lasso(alpha = 1 / (2 n C)); Poisson (loss sum(exp(Xb) - y Xb)):
// PoissonRegressor(alpha = 1 / (n C)).
// Every solver stops by one rule, scikit-learn's (PoissonRegressor's documented one): converged
// when the largest component of the gradient of the mean objective, objective / n, is <= tol
// (with an L1 part, the minimum-norm subgradient), with respect to the coefficients of X's
// columns standardized (Options::gtol); n_iter_ <= max_iter. A fit that stops at max_iter, or
// where no step decreases the objective any more, leaves converged_ false (scikit-learn warns
// there). tol bounds the gradient, not the coefficients' error: that depends on the problem's
// conditioning, as in scikit-learn. On breast_cancer (logistic, l2, C = 1; collinear columns)
// tol = 1e-4 leaves the objective 1e-5 (newton, 7 iterations) to 1e-4 (admm, 228 iterations)
// above the optimum, relative, and the coefficients 0.3 to 0.5% off, relative to the largest
// (dask-ml's defaults, admm with max_iter 100, report converged_ false there); tol = 1e-8 gives
// them to 1e-6 (newton: 9 iterations, admm: 921). gradient_descent, proximal_grad and lbfgs,
// whose line searches compare objectives, stop where a step's decrease falls within the
// objective's rounding, which can leave a small tol unmet (lbfgs: 3e-6 on diabetes' Poisson
// fit): converged_ false there.
// X and y may be chunked differently: y is rechunked to X's row chunks (a view, no copy). Bad
// input, unknown names and a penalty the solver cannot take (an L1 part with gradient_descent,
// newton or lbfgs) throw kiln::Error.
class LinearModel {
 public:
  bool fit_intercept = true;
  std::string solver = "admm";  // dask-ml's default
  std::string penalty = "l2";   // "none", "l1", "l2", "elastic_net"
  double C = 1.0;
  double l1_ratio = 0.5;  // elastic_net: the L1 share
  int max_iter = 100;
  double tol = 1e-4;  // > 0: the gradient rule above, for every solver
  double rho = 1;     // admm: the augmented Lagrangian's weight (dask-glm's default)
  ComputeOptions compute;

  // Fitted: the coefficients of X's columns, the intercept (0 without fit_intercept), the
  // solver's iterations, its objective after each, and whether the gradient rule holds.
  std::vector<double> coef_;
  double intercept_ = 0;
  int n_iter_ = 0;
  std::vector<double> loss_;
  bool converged_ = false;

  LinearModel& fit(const Array& X, const Array& y);
  Array decision_function(const Array& X) const;  // X coef_ + intercept_ (lazy)

 protected:
  explicit LinearModel(Family f) : family_(f) {}
  void check_fitted(const char* what, const Array& X) const;
  Family family_;
};

class LogisticRegression : public LinearModel {
 public:
  LogisticRegression() : LinearModel(Family::Logistic) {}
  Array predict_proba(const Array& X) const;           // sigmoid(X coef_ + intercept_), (n,)
  Array predict(const Array& X) const;                 // predict_proba > 0.5 (bool)
  double score(const Array& X, const Array& y) const;  // accuracy
};

class LinearRegression : public LinearModel {
 public:
  LinearRegression() : LinearModel(Family::Normal) {}
  Array predict(const Array& X) const;                 // X coef_ + intercept_
  double score(const Array& X, const Array& y) const;  // R^2
};

class PoissonRegression : public LinearModel {
 public:
  PoissonRegression() : LinearModel(Family::Poisson) {}
  Array predict(const Array& X) const;  // exp(X coef_ + intercept_)
  // D^2, the share of the Poisson deviance explained (scikit-learn's PoissonRegressor.score).
  double score(const Array& X, const Array& y) const;
  double deviance(const Array& X, const Array& y) const;  // 2 sum(y log(y / mu) - y + mu)
};

}  // namespace kiln::glm
#pragma GCC visibility pop
