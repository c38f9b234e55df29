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

std::vector<double> values(const NDArray& d) {
  const NDArray a = d.on_device() ? d.to_host() : d;
  std::vector<double> v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[static_cast<size_t>(i)] = a.at(i);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t j = 0; j < a.size(); ++j) s += a[j] * b[j];
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
      // stays in [-700, 0]: the line search's first trials reach |xb| ~ 1e4, where exp(-|xb|)
      // is 0 (exp(-700) adds 1e-304), and libmvec's vector exp takes a scalar slow path for
      // every lane below about -708 (it was a third of a solver's time).
      return (maximum(xb, 0.0) + log1p(exp(maximum(-abs(xb), -700.0)))).sum() - (y * xb).sum();
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
      // exp's argument kept in [-700, 700] as in loss(): sigmoid's values change by < 1e-304,
      // and libmvec's slow path stays out (line-search trials reach |xb| ~ 1e4).
      return matmul(X.T(), sigmoid(clip(xb, -700.0, 700.0)) - y);
    case Family::Normal:
      return matmul(X.T(), 2.0 * (xb - y));
    case Family::Poisson:
      return matmul(X.T(), exp(xb) - y);
  }
  throw Error("glm: unknown family");
}

Array hessian(Family f, const Array& xb, const Array& X) {
  // X^T diag(w) X as B^T B with B = sqrt(w) X: one operand computed per block and streamed into
  // the GEMMs, where X^T (w X) computes two (X^T too, when X is an expression).
  const int64_t n = X.shape()[0];
  Array b;
  switch (f) {
    case Family::Logistic: {
      Array p = sigmoid(xb);
      b = sqrt(p * (1.0 - p)).reshape({n, 1}) * X;
      break;
    }
    case Family::Normal:
      return 2.0 * matmul(X.T(), X);
    case Family::Poisson:
      b = exp(0.5 * xb).reshape({n, 1}) * X;
      break;
  }
  return matmul(b.T(), b);
}

double Regularizer::value(const std::vector<double>& beta) const { return value(beta, {}); }

std::vector<double> Regularizer::proximal(const std::vector<double>& beta, double t) const {
  return proximal(beta, t, {});
}

double Regularizer::l2_share() const {
  return penalty == Penalty::L2 ? 1.0 : penalty == Penalty::ElasticNet ? 1 - weight : 0.0;
}

bool Regularizer::has_l1() const {
  return penalty == Penalty::L1 || (penalty == Penalty::ElasticNet && weight > 0);
}

double Regularizer::value(const std::vector<double>& beta,
                          const std::vector<double>& factor) const {
  double l1 = 0, l2 = 0;
  for (size_t j = 0; j < beta.size(); ++j) {
    double b = beta[j] * (factor.empty() ? 1.0 : factor[j]);
    l1 += std::abs(b);
    l2 += b * b / 2;
  }
  const double l1_share = penalty == Penalty::L1           ? 1.0
                          : penalty == Penalty::ElasticNet ? weight
                                                           : 0.0;
  return l1_share * l1 + l2_share() * l2;
}

std::vector<double> Regularizer::proximal(const std::vector<double>& beta, double t,
                                          const std::vector<double>& factor) const {
  std::vector<double> z(beta.size());
  auto soft = [](double b, double g) { return std::max(0.0, b - g) - std::max(0.0, -b - g); };
  for (size_t j = 0; j < beta.size(); ++j) {
    const double f = factor.empty() ? 1.0 : factor[j], tf = t * f;
    switch (penalty) {
      case Penalty::None:
        z[j] = beta[j];
        break;
      case Penalty::L1:
        z[j] = soft(beta[j], tf);
        break;
      case Penalty::L2:
        z[j] = beta[j] / (1 + tf * f);
        break;
      case Penalty::ElasticNet:
        z[j] = soft(beta[j], weight * tf) / (1 + (1 - weight) * tf * f);
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
// kernels read), y as float64, the penalty, and what maps the coefficients back to X's columns.
// Normalized without centering (no intercept column), X's columns times 1/std: then X stays X's
// own columns and the scaling goes on the p-vectors instead, X_n b = X (b / std) and
// X_n^T r = (X^T r) / std (and the Hessian both sides), which spares each pass over X a multiply
// per element and use (`in`, `out`, `out_hessian`).
struct Problem {
  Array X, y;
  std::vector<double> inv;          // non-empty: the solver's columns are X's times inv
  std::vector<double> mean, scale;  // per column; the constant column (if any): 0 and 1
  int intercept = -1;               // the constant column
  int64_t p = 0;
  Family family = Family::Logistic;
  ComputeOptions opt;
  Regularizer reg;
  double lam = 0;              // lamduh, 0 without a penalty
  std::vector<double> factor;  // the penalty's factor per (normalized) coefficient
  double n = 1;                // X's number of rows

  // A computed n-vector (X beta, X grad) as a leaf again, in y's row blocks, keeping its memory
  // (in a GPU's memory where keep_rows left it).
  Array rows(const NDArray& v) const {
    if (v.on_device()) return asarray(v, {y.chunks()[0][0]});
    return from_buffer(v.data(), v.dtype(), v.shape(), {y.chunks()[0][0]}, v.storage());
  }
  // One pass of a solver whose n-vectors are read by its next computes: per output, the
  // n-vector as an array (`rows`) or the value of anything else (`values`, on the host).
  struct Pass {
    std::vector<Array> rows;
    std::vector<NDArray> values;
    Pass pick(std::initializer_list<size_t> outputs) const {
      Pass p;
      for (size_t k : outputs) {
        p.rows.push_back(rows[k]);
        p.values.push_back(values[k]);
      }
      return p;
    }
    bool empty() const { return rows.empty(); }
  };
  // The n-vectors stay where the next computes read them: on a GPU in device memory (otherwise
  // each went to the host and back: at 1e6 rows 8 MB, about 1.2 ms over PCIe from pageable
  // memory, twice per compute); in a distributed program on the ranks that made their row
  // blocks (kiln::persist: X beta does not go to every rank), the small results to every rank.
  Pass keep_rows(const std::vector<Array>& outs) const {
    ComputeOptions o = opt;
    o.keep_on_device = true;  // ignored on host devices
    Pass p;
    p.rows.resize(outs.size());
    p.values.resize(outs.size());
    auto n_vector = [&](const Array& a) { return a.ndim() == 1 && a.shape()[0] == X.shape()[0]; };
    if (o.distributed && distributed::size() > 1) {
      std::vector<Array> kept = persist(outs, o), small;
      std::vector<size_t> at;
      for (size_t k = 0; k < outs.size(); ++k) {
        if (n_vector(outs[k])) {
          p.rows[k] = kept[k];
        } else {
          small.push_back(kept[k]);
          at.push_back(k);
        }
      }
      std::vector<NDArray> v = small.empty() ? std::vector<NDArray>{} : compute(small, opt);
      for (size_t i = 0; i < at.size(); ++i) p.values[at[i]] = v[i].to_host();
      return p;
    }
    std::vector<NDArray> r = compute(outs, o);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (n_vector(outs[k]))
        p.rows[k] = rows(r[k]);
      else
        p.values[k] = r[k].to_host();
    }
    return p;
  }

  std::vector<double> original(std::vector<double> coef) const {  // un-normalize
    double adj = 0;
    for (int64_t j = 0; j < p; ++j) adj += coef[j] * mean[j] / scale[j];
    if (intercept >= 0) coef[intercept] -= adj;
    for (int64_t j = 0; j < p; ++j) coef[j] /= scale[j];
    return coef;
  }

  // The solver's coefficients as coefficients of X's columns (X_n b = X in(b)).
  std::vector<double> in(std::vector<double> b) const {
    for (size_t j = 0; j < inv.size(); ++j) b[j] *= inv[j];
    return b;
  }
  // X_n b, lazily.
  Array times(const std::vector<double>& b) const { return matmul(X, vec(in(b))); }
  // A gradient (X^T r) or Hessian (X^T W X) of X's columns as the solver's.
  std::vector<double> out(std::vector<double> g) const { return in(std::move(g)); }
  std::vector<double> out_hessian(std::vector<double> h) const {
    for (size_t i = 0; i < inv.size(); ++i)
      for (size_t j = 0; j < inv.size(); ++j) h[i * inv.size() + j] *= inv[i] * inv[j];
    return h;
  }

  // loss(X b) + lamduh * penalty(b): one compute.
  double objective(const std::vector<double>& b) const {
    return compute({loss(family, times(b), y)}, opt)[0].item<double>() + penalty(b);
  }

  // lamduh * penalty(b), and its gradient added to g (the smooth solvers: no L1 part).
  double penalty(const std::vector<double>& b) const { return lam * reg.value(b, factor); }
  void add_penalty_gradient(const std::vector<double>& b, std::vector<double>* g) const {
    const double c = lam * reg.l2_share();
    for (int64_t j = 0; j < p; ++j) (*g)[j] += c * factor[j] * factor[j] * b[j];
  }

  // Options::gtol's measure at b, given the loss's gradient there: the largest component of the
  // objective's gradient (its minimum-norm subgradient where the penalty has an L1 part and a
  // coefficient is 0) over the number of rows.
  double optimality(const std::vector<double>& b, const std::vector<double>& loss_gradient) const {
    const double l2 = lam * reg.l2_share();
    const double l1 = !reg.has_l1() ? 0.0 : reg.penalty == Penalty::L1 ? lam : lam * reg.weight;
    double m = 0;
    for (int64_t j = 0; j < p; ++j) {
      const double g = loss_gradient[j] + l2 * factor[j] * factor[j] * b[j], t = l1 * factor[j];
      const double r = b[j] > 0 ? g + t : b[j] < 0 ? g - t : std::max(0.0, std::abs(g) - t);
      m = std::max(m, std::abs(r));
    }
    return m / n;
  }
};

// y in X's row chunks: a rechunk (a view), or for row chunks of different sizes a concatenation
// of y's pieces, each one block.
Array aligned_rows(const Array& y, const std::vector<int64_t>& rows) {
  bool regular = true;
  for (size_t k = 0; k + 1 < rows.size(); ++k) regular = regular && rows[k] == rows[0];
  if (regular && rows.back() <= rows[0]) return y.rechunk({rows[0]});
  std::vector<Array> parts;
  int64_t start = 0;
  for (int64_t size : rows) {
    parts.push_back(y.slice({Slice(start, start + size)}).rechunk({size}));
    start += size;
  }
  return concatenate(parts, 0);
}

// Required: the smooth solvers (gradient_descent, newton, lbfgs), which refuse an L1 part.
// NotRequired: the proximal ones (proximal_grad, admm), whose Penalty::None means L1.
enum class Smooth { Required, NotRequired };

Problem prepare(const char* solver, const Array& X0, const Array& y0, const Options& o,
                Smooth smooth) {
  const std::string op = std::string("glm.") + solver;
  if (!X0.node() || !y0.node()) throw Error(op + ": X or y is an empty Array");
  if (X0.ndim() != 2 || y0.ndim() != 1)
    throw Error(op + ": expected X of 2 dimensions and y of 1, got shapes " +
                shape_str(X0.shape()) + " and " + shape_str(y0.shape()));
  if (X0.shape()[0] != y0.shape()[0])
    throw Error(op + ": X has " + std::to_string(X0.shape()[0]) + " rows, y " +
                std::to_string(y0.shape()[0]));
  if (X0.shape()[0] == 0 || X0.shape()[1] == 0)
    throw Error(op + ": X is empty, shape " + shape_str(X0.shape()));
  if (!(o.gtol >= 0) || !std::isfinite(o.gtol))
    throw Error(op + ": gtol must be finite and >= 0, got " + std::to_string(o.gtol));
  if (!(o.lamduh >= 0) || !std::isfinite(o.lamduh))
    throw Error(op + ": lamduh must be finite and >= 0, got " + std::to_string(o.lamduh));
  if (o.penalty.penalty == Penalty::ElasticNet && !(o.penalty.weight >= 0 && o.penalty.weight <= 1))
    throw Error(op + ": the elastic net's weight must be in [0, 1], got " +
                std::to_string(o.penalty.weight));
  if (smooth == Smooth::Required && o.penalty.has_l1())
    throw Error(op + ": the l1 part of a penalty is not differentiable; use proximal_grad or admm");
  Problem pr;
  pr.reg = o.penalty;
  // The proximal solvers' default penalty, as dask-glm's: L1.
  if (smooth == Smooth::NotRequired && pr.reg.penalty == Penalty::None)
    pr.reg.penalty = Penalty::L1;
  pr.family = o.family;
  pr.opt = o.compute;
  pr.p = X0.shape()[1];
  Array X = X0.astype(DType::Float64), y = y0.astype(DType::Float64);
  if (X.chunks()[0] != y.chunks()[0]) y = aligned_rows(y, X.chunks()[0]);  // as dask-ml
  // One plan for the checks and the column statistics (the latter only where they are used).
  Array labels_ok = o.family == Family::Logistic  ? ((y == 0.0) | (y == 1.0)).all()
                    : o.family == Family::Poisson ? (y >= 0.0).all()
                                                  : isfinite(y).all();
  const bool statistics = o.normalize || o.penalize_original;
  std::vector<Array> wanted = {isfinite(X).all(), isfinite(y).all(), labels_ok};
  if (statistics) {
    wanted.push_back(X.mean({0}));
    wanted.push_back(X.std({0}));
  }
  std::vector<NDArray> r = compute(wanted, pr.opt);
  if (!r[0].item<bool>() || !r[1].item<bool>())
    throw Error(op + ": X or y has non-finite values (NaN or inf)");
  if (!r[2].item<bool>())
    throw Error(op + (o.family == Family::Logistic
                          ? ": the logistic family needs labels y in {0, 1}"
                          : ": the Poisson family needs counts y >= 0"));
  pr.mean = statistics ? values(r[3]) : std::vector<double>(static_cast<size_t>(pr.p), 0.0);
  pr.scale = statistics ? values(r[4]) : std::vector<double>(static_cast<size_t>(pr.p), 1.0);
  for (int64_t j = 0; j < pr.p; ++j) {
    if (pr.scale[j] == 0) {  // a constant column: the intercept
      if (pr.intercept >= 0 && o.normalize)
        throw Error(op + ": more than one constant column in X");
      if (pr.intercept < 0) pr.intercept = static_cast<int>(j);
      pr.mean[j] = 0;
      pr.scale[j] = 1;
    }
    if (!o.normalize) {
      pr.mean[j] = 0;
      pr.scale[j] = 1;
    }
  }
  if (o.normalize && pr.intercept < 0) std::fill(pr.mean.begin(), pr.mean.end(), 0.0);
  // dask-glm's (X - mean) / std, but multiplied by the reciprocal (at most 1 ulp apart): a
  // division per element of X costs more than reading it (Zen 4: 53 -> 38 ms per lbfgs
  // evaluation at 1e6 x 100). Without an intercept the mean is 0 and not subtracted, and the
  // scaling moves to the p-vectors (Problem::in/out).
  pr.X = X;
  if (o.normalize) {
    std::vector<double> inv(pr.scale.size());
    for (size_t j = 0; j < inv.size(); ++j) inv[j] = 1 / pr.scale[j];
    if (pr.intercept >= 0)
      pr.X = (X - vec(pr.mean)) * vec(inv);
    else
      pr.inv = std::move(inv);
  }
  pr.y = y;
  pr.n = static_cast<double>(X.shape()[0]);
  pr.lam = o.lamduh;
  pr.factor.assign(static_cast<size_t>(pr.p), 1.0);
  if (o.penalize_original)
    for (int64_t j = 0; j < pr.p; ++j) pr.factor[j] = j == pr.intercept ? 0.0 : 1 / pr.scale[j];
  return pr;
}

double scalar_of(const NDArray& a) {
  return a.on_device() ? a.to_host().item<double>() : a.item<double>();
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// One L-BFGS minimization driven from outside, so that many can share each compute(): point()
// is where it wants the objective and its gradient next, take() hands them over, done() says it
// stopped. The two-loop recursion with the last 10 pairs (a pair kept only when s.y > 1e-10 y.y),
// the first direction -g / |g|, a restart from the gradient when the direction is not a descent
// one; Armijo backtracking (c1 = 1e-4, halving, 60 trials at most: after that it counts as
// converged, no decrease being possible at this precision); stops when max |g| <= pgtol, the
// relative decrease is <= 1e7 eps (scipy's factr), after max_iter iterations, or at a new iterate
// once max_eval evaluations are spent (0: no limit). strict (Options::gtol): converged only by
// max |g| <= pgtol; the relative decrease stops it at 64 eps (scikit-learn's ftol) and, like 60
// failed trials, leaves converged false.
class Lbfgs {
 public:
  Lbfgs(std::vector<double> x0, double pgtol, int max_iter, int max_eval, bool strict = false)
      : x_(std::move(x0)),
        pgtol_(pgtol),
        factr_(strict ? 64 : 1e7),
        strict_(strict),
        max_iter_(max_iter),
        max_eval_(max_eval) {}

  const std::vector<double>& point() const { return phase_ == Phase::Search ? trial_ : x_; }
  bool done() const { return phase_ == Phase::Done; }
  const std::vector<double>& x() const { return x_; }

  void take(double f, const std::vector<double>& g) {
    ++evals_;
    if (phase_ == Phase::Start) {
      f_ = f;
      g_ = g;
      if (max_abs(g_) <= pgtol_) {
        converged = true;
        phase_ = Phase::Done;
      } else if (max_iter_ <= 0) {
        phase_ = Phase::Done;
      } else {
        search();
      }
      return;
    }
    if (!(f <= f_ + 1e-4 * step_ * slope_)) {  // rejected: halve the step
      step_ *= 0.5;
      if (++trials_ == 60) {
        ++n_iter;
        loss.push_back(f_);
        converged = !strict_;
        phase_ = Phase::Done;
        return;
      }
      for (size_t j = 0; j < x_.size(); ++j) trial_[j] = x_[j] + step_ * d_[j];
      return;
    }
    ++n_iter;
    const size_t p = x_.size();
    std::vector<double> s(p), yv(p);
    for (size_t j = 0; j < p; ++j) {
      s[j] = trial_[j] - x_[j];
      yv[j] = g[j] - g_[j];
    }
    const double sy = dot(s, yv);
    if (sy > 1e-10 * dot(yv, yv)) {
      s_.push_back(std::move(s));
      y_.push_back(std::move(yv));
      rho_.push_back(1 / sy);
      if (s_.size() > 10) {
        s_.erase(s_.begin());
        y_.erase(y_.begin());
        rho_.erase(rho_.begin());
      }
    }
    const double f_old = f_;
    x_ = trial_;
    g_ = g;
    f_ = f;
    loss.push_back(f);
    const bool small = f_old - f_ <= factr_ * 2.220446049250313e-16 *
                                         std::max({std::abs(f_old), std::abs(f_), 1.0});
    converged = max_abs(g_) <= pgtol_ || (small && !strict_);
    if (converged || small || n_iter >= max_iter_ || (max_eval_ > 0 && evals_ >= max_eval_))
      phase_ = Phase::Done;
    else
      search();
  }

  int n_iter = 0;
  bool converged = false;
  std::vector<double> loss;  // the objective after each iteration

 private:
  enum class Phase { Start, Search, Done };

  void search() {  // d = -H g by the two-loop recursion; the first trial x + d
    const size_t p = x_.size(), m = s_.size();
    std::vector<double> q = g_, alpha(m);
    for (size_t i = m; i-- > 0;) {
      alpha[i] = rho_[i] * dot(s_[i], q);
      for (size_t j = 0; j < p; ++j) q[j] -= alpha[i] * y_[i][j];
    }
    const double gamma =
        m == 0 ? 1 / std::sqrt(dot(g_, g_)) : dot(s_.back(), y_.back()) / dot(y_.back(), y_.back());
    for (size_t j = 0; j < p; ++j) q[j] *= gamma;
    for (size_t i = 0; i < m; ++i) {
      const double b = rho_[i] * dot(y_[i], q);
      for (size_t j = 0; j < p; ++j) q[j] += s_[i][j] * (alpha[i] - b);
    }
    d_.resize(p);
    for (size_t j = 0; j < p; ++j) d_[j] = -q[j];
    slope_ = dot(g_, d_);
    if (!(slope_ < 0)) {  // not a descent direction: forget the pairs, follow the gradient
      s_.clear();
      y_.clear();
      rho_.clear();
      const double scale = 1 / std::sqrt(dot(g_, g_));
      for (size_t j = 0; j < p; ++j) d_[j] = -g_[j] * scale;
      slope_ = dot(g_, d_);
    }
    step_ = 1;
    trials_ = 0;
    trial_.resize(p);
    for (size_t j = 0; j < p; ++j) trial_[j] = x_[j] + d_[j];
    phase_ = Phase::Search;
  }

  std::vector<double> x_, g_, d_, trial_;
  double f_ = 0, step_ = 1, slope_ = 0;
  double pgtol_, factr_;
  bool strict_;
  int max_iter_, max_eval_, evals_ = 0, trials_ = 0;
  Phase phase_ = Phase::Start;
  std::vector<std::vector<double>> s_, y_;
  std::vector<double> rho_;
};

}  // namespace

Result gradient_descent(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("gradient_descent", X, y, o, Smooth::Required);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 100;
  const double tol = o.tol > 0 ? o.tol : 1e-14;
  std::vector<double> beta(pr.p, 0.0);
  double step = 1.0, backtrack = 0.1, func = 0;
  Array xb;
  Result res;
  // The loss gradient at the current X beta when the last pass over X computed it ahead: each
  // pass computing X grad also computes the next gradient and loss for the line search's first
  // trial step, which is usually taken; the values are those a separate compute would give, so
  // this is dask-glm's algorithm with one pass over X per iteration instead of two.
  std::vector<double> ahead;
  // Before an iteration that recomputes X beta (every 10th), the pass also computes X beta at
  // the first trial's beta, its loss and gradient (instead of the gradient at the first trial's
  // drifting X beta - s X grad, which that iteration would not use): when that trial is taken,
  // the fresh iteration needs no pass of its own (9 of 10 such passes at 1e6 x 100).
  Problem::Pass fresh_ahead;
  const bool strict = o.gtol > 0;  // Options::gtol's rule, checked at the top of an iteration
  for (int k = 0;; ++k) {
    if (k == max_iter && !strict) break;
    std::vector<double> grad;
    if (k % 10 == 0) {  // X beta afresh (rounding drift), its loss and gradient: one pass
      Problem::Pass r = fresh_ahead;
      if (r.empty()) {
        Array fresh = pr.times(beta);
        r = pr.keep_rows(
            {fresh, loss(pr.family, fresh, pr.y), gradient(pr.family, fresh, pr.X, pr.y)});
      }
      xb = r.rows[0];
      func = scalar_of(r.values[1]) + pr.penalty(beta);
      grad = pr.out(values(r.values[2]));
    } else if (!ahead.empty()) {
      grad = std::move(ahead);
    } else {
      grad = pr.out(values(compute({gradient(pr.family, xb, pr.X, pr.y)}, pr.opt)[0]));
    }
    ahead.clear();
    fresh_ahead = {};
    if (strict && pr.optimality(beta, grad) <= o.gtol) {
      res.converged = true;
      break;
    }
    if (k == max_iter) break;
    pr.add_penalty_gradient(beta, &grad);
    // dask-glm's compute_stepsize_dask: Armijo backtracking, from the step the last took.
    const double steplen = dot(grad, grad), lf = func;
    double s = step;
    std::vector<double> trial(pr.p);
    for (int64_t j = 0; j < pr.p; ++j) trial[j] = beta[j] - s * grad[j];
    // X grad, and the loss and gradient at the first trial (X beta - s X grad, computed inline:
    // stored, it would stand between X grad and the gradient and keep them two passes); before
    // a fresh iteration, X trial and its loss and gradient instead of that gradient.
    const bool fresh_next = (k + 1) % 10 == 0 && k + 1 < max_iter;
    Array xg_lazy = pr.times(grad), first = xb - s * xg_lazy;
    Array xt = fresh_next ? pr.times(trial) : first;
    std::vector<Array> outs{xg_lazy, loss(pr.family, first, pr.y),
                            gradient(pr.family, xt, pr.X, pr.y)};
    // Otherwise also the loss and gradient at the second trial (the step backtracked once),
    // from the same reads of X: at 1e6 x 100, 29 of dask-glm's 100 iterations take it, and each
    // of them would need a pass of its own for its gradient.
    if (fresh_next) {
      outs.insert(outs.end(), {xt, loss(pr.family, xt, pr.y)});
    } else {
      Array second = xb - (s * backtrack) * xg_lazy;
      outs.insert(outs.end(),
                  {loss(pr.family, second, pr.y), gradient(pr.family, second, pr.X, pr.y)});
    }
    Problem::Pass pass = pr.keep_rows(outs);
    Array xg = pass.rows[0];
    int ii = 0;
    for (; ii < 100; ++ii) {
      bool moved = false;
      for (int64_t j = 0; j < pr.p; ++j) {
        trial[j] = beta[j] - s * grad[j];
        moved = moved || trial[j] != beta[j];
      }
      if (ii > 0 && !moved) {
        s = 0;
        break;
      }
      double l = ii == 0 ? scalar_of(pass.values[1])
                 : ii == 1 && !fresh_next
                     ? scalar_of(pass.values[3])
                     : scalar_of(compute({loss(pr.family, xb - s * xg, pr.y)}, pr.opt)[0]);
      func = l + pr.penalty(trial);
      if (lf - func >= 0.1 * s * steplen) break;
      s *= backtrack;
    }
    if (ii == 100) s = 0;  // no trial decreased the objective: beta stays (dask-glm takes the last)
    if (s == 0) func = lf;
    for (int64_t j = 0; j < pr.p; ++j) beta[j] -= s * grad[j];
    if (ii == 0 && fresh_next) {
      fresh_ahead = pass.pick({3, 4, 2});  // X beta, its loss and gradient
    } else {
      xb = pr.keep_rows({xb - s * xg}).rows[0];
      if (ii == 0)
        ahead = pr.out(values(pass.values[2]));  // the first trial taken: its gradient is next
      else if (ii == 1 && !fresh_next)
        ahead = pr.out(values(pass.values[4]));  // the second
    }
    res.loss.push_back(func);
    res.n_iter = k + 1;
    if (s == 0 || (!strict && (lf - func) / std::max(std::abs(func), std::abs(lf)) < tol)) {
      // No step moves beta or decreases the objective any more, or the decrease fell below tol
      // (the own rule; relative to the larger magnitude: dask-glm's max(func, lf) is negative
      // for a negative objective, Poisson's often, and stopped it at once). Under
      // Options::gtol's rule, that rule did not hold at beta (checked above).
      res.converged = !strict;
      break;
    }
    step = s * 1.25;
    backtrack = 0.5;
  }
  res.coef = pr.original(beta);
  return res;
}

Result newton(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("newton", X, y, o, Smooth::Required);
  const int max_iter = o.max_iter > 0 ? o.max_iter : 50;
  const double tol = o.tol > 0 ? o.tol : 1e-8;
  std::vector<double> beta(pr.p, 0.0);
  Result res;
  const int64_t p = pr.p;
  const double c = pr.lam * pr.reg.l2_share();
  // The Hessian, gradient and loss at beta: one pass over X (X beta the row stage of the kernel
  // that writes sqrt(w) X and sums the gradient), then the Gram kernel (B^T B: codegen/gram.cpp).
  // The loss of each iteration's new beta comes with the next iteration's Hessian; only the last
  // needs a compute of its own. The pass runs in row blocks of about 4 MiB of X: each block of
  // sqrt(w) X is written and read back while still in cache (1e6 x 100 in blocks of 1e5 rows:
  // 2.5 s for 10 iterations; of 5242 rows: 2.2 s, with syrk; 2621-row blocks measured no
  // faster with the Gram kernel). A rechunk is a view: nothing is copied.
  const int64_t rows = std::max<int64_t>(1, (int64_t{1} << 19) / p);
  const bool smaller = rows < pr.X.chunks()[0][0];
  Array Xr = smaller ? pr.X.rechunk({rows, p}) : pr.X;
  Array yy = smaller ? pr.y.rechunk({rows}) : pr.y;
  auto at = [&](const std::vector<double>& b) {
    Array xb = matmul(Xr, vec(pr.in(b)));
    return compute(
        {hessian(pr.family, xb, Xr), gradient(pr.family, xb, Xr, yy), loss(pr.family, xb, yy)},
        pr.opt);
  };
  // A backtracking trial's objective and gradient (one pass, no Hessian).
  auto trial_at = [&](const std::vector<double>& b, std::vector<double>* g) {
    Array xb = matmul(Xr, vec(pr.in(b)));
    std::vector<NDArray> t =
        compute({loss(pr.family, xb, yy), gradient(pr.family, xb, Xr, yy)}, pr.opt);
    *g = pr.out(values(t[1]));
    pr.add_penalty_gradient(b, g);
    return scalar_of(t[0]) + pr.penalty(b);
  };
  auto norm1 = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += std::abs(x);
    return s;
  };
  const bool strict = o.gtol > 0;
  std::vector<NDArray> r = at(beta);
  double f = scalar_of(r[2]) + pr.penalty(beta);
  while (true) {
    std::vector<double> h = pr.out_hessian(values(r[0])), g = pr.out(values(r[1]));
    if (strict && pr.optimality(beta, g) <= o.gtol) {
      res.converged = true;
      break;
    }
    if (res.n_iter == max_iter) break;  // dask-glm runs max_iter + 1 iterations
    pr.add_penalty_gradient(beta, &g);
    for (int64_t j = 0; j < p; ++j) h[j * p + j] += c * pr.factor[j] * pr.factor[j];
    // step = lstsq(H, g), as dask-glm (NumPy 2's rcond).
    std::vector<double> step = values(linalg::lstsq(vec(h).reshape({p, p}), vec(g)).x.compute());
    std::vector<double> next(p);
    bool moved = false;
    for (int64_t j = 0; j < p; ++j) {
      next[j] = beta[j] - step[j];
      moved = moved || std::abs(beta[j] - next[j]) > tol;
    }
    ++res.n_iter;
    const double eps = 2.220446049250313e-16;
    if (!moved && !strict) {
      // dask-glm's rule: no coefficient moves more than tol; the last step is taken, unless it
      // raises the objective by more than rounding (a large tol), when it is searched as below.
      // Rounding here is the objective's summation error, which grows with the rows (a
      // sequential sum of n terms: up to n eps; the interpreter's sums are sequential), so the
      // allowance is 1e-9 relative, far above that and far below a real rise.
      const double ft = pr.objective(next);
      if (ft <= f + 1e-9 * std::abs(f)) {
        beta = next;
        res.converged = true;
        res.loss.push_back(ft);
        break;
      }
    }
    // The globalization dask-glm lacks: backtrack from the full step while it fails Armijo's
    // condition; a change of the objective within rounding (16 eps) passes if the gradient's
    // 1-norm falls (scikit-learn's NewtonSolver rule). The full step's Hessian comes with its
    // objective; a shorter step's is computed once the step is accepted.
    const double slope = dot(g, step), g1 = norm1(g);
    if (!(slope > 0)) {  // not a descent direction (a zero step): nothing to search
      res.loss.push_back(f);
      break;
    }
    bool accepted = false;
    double t = 1;
    for (int trial = 0; trial < 40 && !accepted; ++trial, t *= 0.5) {
      if (trial > 0)
        for (int64_t j = 0; j < p; ++j) next[j] = beta[j] - t * step[j];
      std::vector<NDArray> full;
      std::vector<double> gt;
      double ft;
      if (trial == 0) {
        full = at(next);
        gt = pr.out(values(full[1]));
        pr.add_penalty_gradient(next, &gt);
        ft = scalar_of(full[2]) + pr.penalty(next);
      } else {
        ft = trial_at(next, &gt);
      }
      accepted = ft <= f - 1e-4 * t * slope ||
                 (std::abs(ft - f) <= 16 * eps * std::abs(f) && norm1(gt) < g1);
      if (accepted) {
        beta = next;
        f = ft;
        r = trial == 0 ? full : at(beta);
      }
    }
    res.loss.push_back(f);
    if (!accepted) break;  // no step along Newton's direction decreases the objective: stuck
  }
  res.coef = pr.original(beta);
  return res;
}

Result proximal_grad(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("proximal_grad", X, y, o, Smooth::NotRequired);
  // dask-glm 0.4.0 accepts a step, and stops, by the loss alone; with a penalty that makes it
  // stop short of the optimum (an L1 step that trades loss for penalty is never accepted), so
  // here func is the objective, loss + lamduh * penalty.
  const int max_iter = o.max_iter > 0 ? o.max_iter : 100;
  const double tol = o.tol > 0 ? o.tol : 1e-8;
  std::vector<double> beta(pr.p, 0.0);
  double step = 1.0, backtrack = 0.1, func = 0;
  Result res;
  // X beta's loss and gradient at the current beta. dask-glm recomputes X beta every 10
  // iterations against drift, but here every trial's X beta is computed afresh, and each
  // trial's pass over X also computes the gradient there (row fusion: X beta is its row stage),
  // so the next iteration needs no pass of its own: one pass per trial instead of two.
  auto at = [&](const std::vector<double>& b, std::vector<double>* grad) {
    Array fresh = pr.times(b);
    std::vector<NDArray> r =
        compute({loss(pr.family, fresh, pr.y), gradient(pr.family, fresh, pr.X, pr.y)}, pr.opt);
    *grad = pr.out(values(r[1]));
    return scalar_of(r[0]) + pr.penalty(b);
  };
  std::vector<double> grad, next_grad;
  func = at(beta, &grad);
  const bool strict = o.gtol > 0;  // Options::gtol's rule, checked at the top of an iteration
  for (int k = 0;; ++k) {
    if (strict && pr.optimality(beta, grad) <= o.gtol) {
      res.converged = true;
      break;
    }
    if (k == max_iter) break;
    const std::vector<double> obeta = beta;
    const double lf = func;
    double df = 0;
    for (int ii = 0; ii < 100; ++ii) {
      std::vector<double> trial(pr.p);
      for (int64_t j = 0; j < pr.p; ++j) trial[j] = obeta[j] - step * grad[j];
      beta = pr.reg.proximal(trial, step * pr.lam, pr.factor);
      func = at(beta, &next_grad);
      df = lf - func;
      if (df > 0) break;
      step *= backtrack;
    }
    if (!(df > 0)) {  // no trial decreased the objective: beta stays (dask-glm takes the last)
      beta = obeta;
      func = lf;
    }
    res.loss.push_back(func);
    res.n_iter = k + 1;
    if (step == 0) break;
    if (!(df > 0) || (!strict && df / std::max(std::abs(func), std::abs(lf)) < tol)) {
      res.converged = !strict;  // the own rule: the relative decrease fell below tol
      break;
    }
    step *= 1.25;
    backtrack = 0.5;
    grad.swap(next_grad);  // the gradient at beta, the last trial's
  }
  res.coef = pr.original(beta);
  return res;
}

Result lbfgs(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("lbfgs", X, y, o, Smooth::Required);
  // Options::gtol's rule is max |g| <= pgtol on the objective over the rows.
  const bool strict = o.gtol > 0;
  Lbfgs run(std::vector<double>(pr.p, 0.0),
            strict      ? o.gtol * pr.n
            : o.tol > 0 ? o.tol
                        : 1e-4,
            o.max_iter > 0 ? o.max_iter : 100, 0, strict);
  while (!run.done()) {  // the objective and its gradient at the point asked for: one compute
    const std::vector<double>& b = run.point();
    Array xb = pr.times(b);
    std::vector<NDArray> r =
        compute({loss(pr.family, xb, pr.y), gradient(pr.family, xb, pr.X, pr.y)}, pr.opt);
    std::vector<double> g = pr.out(values(r[1]));
    pr.add_penalty_gradient(b, &g);
    run.take(scalar_of(r[0]) + pr.penalty(b), g);
  }
  Result res;
  res.coef = pr.original(run.x());
  res.n_iter = run.n_iter;
  res.loss = run.loss;
  res.converged = run.converged;
  return res;
}

// admm's row pieces per chunk (below): a fixed number, so that results do not depend on the
// thread count.
constexpr int64_t kAdmmPieces = 8;

Result admm(const Array& X, const Array& y, const Options& o) {
  Problem pr = prepare("admm", X, y, o, Smooth::NotRequired);
  if (!(o.rho > 0) || !std::isfinite(o.rho) || !(o.reltol >= 0) || !std::isfinite(o.over_relax))
    throw Error("glm.admm: rho must be finite and > 0, reltol >= 0 and over_relax finite");
  const int max_iter = o.max_iter > 0 ? o.max_iter : 250;
  const double abstol = o.tol > 0 ? o.tol : 1e-4, reltol = o.reltol, rho = o.rho;
  const int64_t p = pr.p;
  // The row chunks and their local problems, each chunk's rows in kAdmmPieces blocks (views).
  // On the host, outside a distributed program, each chunk's local problem is solved to its end
  // before the next chunk's starts, its pieces spread over the threads: the chunk's 20-odd passes
  // then read the same rows, which stay in the last-level cache where they fit (a chunk of
  // 100000 x 100 float64, 80 MB: 2.3 ms a pass from the cache instead of 3.7 from memory on a
  // 2-vCPU Xeon). Elsewhere (GPUs, MPI ranks, each holding chunks of their own) every round is
  // one compute over all the chunks still solving. The local problems do not interact within an
  // iteration and every path folds a chunk's pieces in the same order, so both give the same bits.
  const std::vector<int64_t>& sizes = pr.y.chunks()[0];
  const size_t k = sizes.size();
  std::vector<Array> Xs, ys;
  int64_t start = 0;
  for (int64_t size : sizes) {
    const int64_t piece =
        std::max((size + kAdmmPieces - 1) / kAdmmPieces, std::min<int64_t>(size, 256));
    Xs.push_back(pr.X.slice({Slice(start, start + size), Slice::all()}).rechunk({piece, p}));
    ys.push_back(pr.y.slice({Slice(start, start + size)}).rechunk({piece}));
    start += size;
  }
  const Device device = resolve_device(pr.opt.device);
  const bool chunk_major = (device == Device::Cpu || device == Device::Interp) &&
                           !(pr.opt.distributed && distributed::size() > 1);
  std::vector<double> z(p, 0.0);
  std::vector<std::vector<double>> u(k, std::vector<double>(p, 0.0)), betas(k);
  Result res;
  // Options::gtol's rule, at z after each iteration (its gradient computed with its objective).
  // z's gradient is off by up to the sum of the local solves' errors, so those are solved to
  // gtol * rows / chunks / 2 where that is below dask-glm's 1e-5, and strictly (not stopped by
  // scipy's factr, which leaves them far less accurate).
  const bool strict = o.gtol > 0;
  const double local_pgtol =
      strict ? std::min(1e-5, o.gtol * pr.n / static_cast<double>(k) / 2) : 1e-5;
  for (int it = 0; it < max_iter; ++it) {
    // x-update: every chunk's local L-BFGS from ones (dask-glm never carries betas over), chunk
    // after chunk where chunk_major; otherwise in rounds, each one compute over every chunk, so
    // that every round is the same plan, in which the chunks already done are skipped
    // (ComputeOptions::skip): their kernels do not run.
    std::vector<Lbfgs> local;
    for (size_t i = 0; i < k; ++i)
      local.emplace_back(std::vector<double>(p, 1.0), local_pgtol, 200, 250, strict);
    auto all_done = [&] {
      return std::all_of(local.begin(), local.end(), [](const Lbfgs& l) { return l.done(); });
    };
    // Chunk i's loss and loss gradient at its local point -> its L-BFGS.
    auto take = [&](size_t i, const NDArray& loss_value, const NDArray& loss_gradient) {
      const std::vector<double>& b = local[i].point();
      std::vector<double> g = pr.out(values(loss_gradient)), d(p);
      for (int64_t j = 0; j < p; ++j) {
        d[j] = b[j] - z[j] + u[i][j];
        g[j] += rho * d[j];
      }
      local[i].take(scalar_of(loss_value) + rho / 2 * dot(d, d), g);
    };
    if (chunk_major) {
      for (size_t i = 0; i < k; ++i)
        while (!local[i].done()) {
          Array xb = matmul(Xs[i], vec(pr.in(local[i].point())));
          std::vector<NDArray> r =
              compute({loss(pr.family, xb, ys[i]), gradient(pr.family, xb, Xs[i], ys[i])}, pr.opt);
          take(i, r[0], r[1]);
        }
    }
    ComputeOptions round = pr.opt;
    while (!all_done()) {
      std::vector<Array> outs;
      round.skip.clear();
      for (size_t i = 0; i < k; ++i) {
        Array xb = matmul(Xs[i], vec(pr.in(local[i].point())));
        outs.push_back(loss(pr.family, xb, ys[i]));
        outs.push_back(gradient(pr.family, xb, Xs[i], ys[i]));
        round.skip.insert(round.skip.end(), 2, local[i].done());
      }
      std::vector<NDArray> r = compute(outs, round);
      for (size_t i = 0; i < k; ++i)
        if (!local[i].done()) take(i, r[2 * i], r[2 * i + 1]);
    }
    for (size_t i = 0; i < k; ++i) betas[i] = local[i].x();
    // z-update (the proximal operator of the penalty) and u-update, over-relaxed.
    const std::vector<double> zold = z;
    std::vector<double> ztilde(p, 0.0);
    std::vector<std::vector<double>> hat(k, std::vector<double>(p));
    for (size_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < p; ++j) {
        hat[i][j] = o.over_relax * betas[i][j] + (1 - o.over_relax) * z[j];
        ztilde[j] += (hat[i][j] + u[i][j]) / static_cast<double>(k);
      }
    z = pr.reg.proximal(ztilde, pr.lam / (rho * static_cast<double>(k)), pr.factor);
    double primal = 0, betas_sq = 0, u_sq = 0;
    for (size_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < p; ++j) {
        u[i][j] += hat[i][j] - z[j];
        primal += (betas[i][j] - z[j]) * (betas[i][j] - z[j]);
        betas_sq += betas[i][j] * betas[i][j];
        u_sq += u[i][j] * u[i][j];
      }
    double dual_sq = 0;
    for (int64_t j = 0; j < p; ++j) dual_sq += (z[j] - zold[j]) * (z[j] - zold[j]);
    const double kp = std::sqrt(static_cast<double>(p) * static_cast<double>(k));
    const double eps_pri =
        kp * abstol +
        reltol * std::max(std::sqrt(betas_sq), std::sqrt(static_cast<double>(k) * dot(z, z)));
    const double eps_dual = kp * abstol + reltol * rho * std::sqrt(u_sq);
    ++res.n_iter;
    if (strict) {
      Array xz = pr.times(z);
      std::vector<NDArray> r =
          compute({loss(pr.family, xz, pr.y), gradient(pr.family, xz, pr.X, pr.y)}, pr.opt);
      res.loss.push_back(scalar_of(r[0]) + pr.penalty(z));
      if (pr.optimality(z, pr.out(values(r[1]))) <= o.gtol) {
        res.converged = true;
        break;
      }
      continue;
    }
    res.loss.push_back(pr.objective(z));
    if (std::sqrt(primal) < eps_pri && rho * std::sqrt(dual_sq) < eps_dual) {
      res.converged = true;
      break;
    }
  }
  res.coef = pr.original(z);
  return res;
}

Result solve(const std::string& solver, const Array& X, const Array& y, const Options& o) {
  if (solver == "gradient_descent") return gradient_descent(X, y, o);
  if (solver == "newton") return newton(X, y, o);
  if (solver == "proximal_grad") return proximal_grad(X, y, o);
  if (solver == "lbfgs") return lbfgs(X, y, o);
  if (solver == "admm") return admm(X, y, o);
  throw Error("glm: unknown solver '" + solver +
              "' (known: gradient_descent, newton, proximal_grad, lbfgs, admm)");
}

// ---- estimators --------------------------------------------------------------------------------

namespace {

const char* estimator_name(Family f) {
  switch (f) {
    case Family::Logistic:
      return "glm.LogisticRegression";
    case Family::Normal:
      return "glm.LinearRegression";
    case Family::Poisson:
      return "glm.PoissonRegression";
  }
  return "glm.?";
}

}  // namespace

LinearModel& LinearModel::fit(const Array& X0, const Array& y) {
  const std::string op = std::string(estimator_name(family_)) + ".fit";
  if (!X0.node() || X0.ndim() != 2)
    throw Error(op + ": expected X of 2 dimensions" +
                (X0.node() ? ", got shape " + shape_str(X0.shape()) : std::string()));
  if (!(C > 0) || !std::isfinite(C))
    throw Error(op + ": C must be finite and > 0, got " + std::to_string(C));
  if (max_iter <= 0 || !(tol > 0) || !std::isfinite(tol))
    throw Error(op + ": max_iter must be > 0 and tol finite and > 0, got " +
                std::to_string(max_iter) + " and " + std::to_string(tol));
  Options o;
  o.family = family_;
  o.max_iter = max_iter;
  o.gtol = tol;  // scikit-learn's rule for every solver
  o.rho = rho;
  o.penalty = regularizer(penalty);
  o.penalty.weight = l1_ratio;
  o.lamduh = o.penalty.penalty == Penalty::None ? 0.0 : 1 / C;
  o.penalize_original = true;
  o.compute = compute;
  Array X = X0.astype(DType::Float64);
  const int64_t p = X.shape()[1];
  if (fit_intercept && p > 0)  // a column of ones in X's row chunks (X is checked finite later)
    X = concatenate({X, X.slice({Slice::all(), Slice(0, 1)}) * 0.0 + 1.0}, 1);
  Result r;
  try {
    r = solve(solver, X, y, o);
  } catch (const Error& e) {
    throw Error(op + ": " + e.what());
  }
  coef_.assign(r.coef.begin(), r.coef.begin() + p);
  intercept_ = fit_intercept ? r.coef[static_cast<size_t>(p)] : 0.0;
  n_iter_ = r.n_iter;
  loss_ = r.loss;
  converged_ = r.converged;
  return *this;
}

void LinearModel::check_fitted(const char* what, const Array& X) const {
  const std::string op = std::string(estimator_name(family_)) + "." + what;
  if (coef_.empty()) throw Error(op + ": the model is not fitted (call fit first)");
  if (!X.node() || X.ndim() != 2 || X.shape()[1] != static_cast<int64_t>(coef_.size()))
    throw Error(op + ": expected X of shape (n, " + std::to_string(coef_.size()) + ")" +
                (X.node() ? ", got " + shape_str(X.shape()) : std::string()));
}

Array LinearModel::decision_function(const Array& X) const {
  check_fitted("decision_function", X);
  return matmul(X.astype(DType::Float64), vec(coef_)) + intercept_;
}

Array LogisticRegression::predict_proba(const Array& X) const {
  return sigmoid(decision_function(X));
}

Array LogisticRegression::predict(const Array& X) const { return predict_proba(X) > 0.5; }

double LogisticRegression::score(const Array& X, const Array& y) const {
  return scalar_of(kiln::compute({(predict(X).astype(DType::Float64) == y).mean()}, compute)[0]);
}

Array LinearRegression::predict(const Array& X) const { return decision_function(X); }

double LinearRegression::score(const Array& X, const Array& y0) const {
  Array y = y0.astype(DType::Float64), res = y - predict(X), dev = y - y.mean();
  std::vector<NDArray> r = kiln::compute({(res * res).sum(), (dev * dev).sum()}, compute);
  return 1 - scalar_of(r[0]) / scalar_of(r[1]);
}

Array PoissonRegression::predict(const Array& X) const { return exp(decision_function(X)); }

namespace {

Array poisson_deviance(const Array& y, const Array& mu) {
  return 2.0 * (where(y > 0.0, y * log(y / mu), 0.0) - y + mu).sum();
}

}  // namespace

double PoissonRegression::deviance(const Array& X, const Array& y0) const {
  return scalar_of(
      kiln::compute({poisson_deviance(y0.astype(DType::Float64), predict(X))}, compute)[0]);
}

double PoissonRegression::score(const Array& X, const Array& y0) const {
  Array y = y0.astype(DType::Float64);
  std::vector<NDArray> r = kiln::compute(
      {poisson_deviance(y, predict(X)), poisson_deviance(y, y.mean().broadcast_to(y.shape()))},
      compute);
  return 1 - scalar_of(r[0]) / scalar_of(r[1]);
}

}  // namespace kiln::glm
