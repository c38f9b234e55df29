// kiln::glm's estimators (LogisticRegression, LinearRegression, PoissonRegression) against
// scikit-learn fitting the same objective (tests/tools/glm_reference.py sklearn_fit: C = 1 /
// lamduh, the intercept unpenalized), for every family and each penalty scikit-learn has for it;
// ADMM against its NumPy version step by step; predict/score; bad input.
#include <cmath>

#include "kiln/glm.hpp"
#include "oracle.hpp"

using namespace kiln;

namespace {

struct Data {
  NDArray x, y;  // x: 1500 x 5, without the column of ones
};

// x uniform in [-2, 2]; y drawn by NumPy for the family from x w + 0.5, w_j = (j - 2) / 4.
Data make_data(const std::string& family) {
  NDArray x = kt::random_array(DType::Float64, {1500, 5}, 701, -2, 2);
  std::string xw = "(x @ np.array([-0.5, -0.25, 0, 0.25, 0.5]) + 0.5)";
  std::string y = family == "logistic" ? "(" + xw + " + rng.standard_normal(1500) > 0) * 1.0"
                  : family == "normal" ? xw + " + rng.standard_normal(1500)"
                                       : "rng.poisson(np.exp(0.5 * " + xw + ")) * 1.0";
  auto r = kt::numpy({{"x", x}}, {"(lambda rng: " + y + ")(np.random.default_rng(7))"});
  return {x, r[0]};
}

std::string reference(const std::string& call) {
  return "(__import__('sys').path.insert(0, '" + kt::source_dir() +
         "/tests/tools'), __import__('glm_reference')." + call + ")[1]";
}

// coef and intercept within 1e-4 relative (with 1e-6 absolute for coefficients near 0).
void expect_coefficients(const glm::LinearModel& m, const NDArray& want, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(m.coef_.size()) + 1, want.size()) << what;
  for (size_t j = 0; j <= m.coef_.size(); ++j) {
    double got = j < m.coef_.size() ? m.coef_[j] : m.intercept_, w = want.at(j);
    EXPECT_NEAR(got, w, 1e-4 * std::abs(w) + 1e-6) << what << " coefficient " << j;
  }
}

// A fitted model's coef_ and intercept_ as one array, c[:5] and c[5] in NumPy.
NDArray params(const glm::LinearModel& m) {
  std::vector<double> c = m.coef_;
  c.push_back(m.intercept_);
  return kt::make_array(DType::Float64, {static_cast<int64_t>(c.size())}, c);
}

template <class Model>
Model configured(const std::string& solver, const std::string& penalty, double C) {
  Model m;
  m.solver = solver;
  m.penalty = penalty;
  m.C = C;
  m.tol = 1e-10;
  m.reltol = 1e-10;
  m.rho = 50;  // about the local Hessians' scale: ADMM then needs tens of iterations, not 1000s
  m.max_iter = 5000;
  return m;
}

}  // namespace

TEST(GlmEstimators, CoefficientsEqualScikitLearns) {
  struct Case {
    const char* family;
    const char* penalty;
    const char* solver;
  };
  // Each family with the penalties scikit-learn has for it, by a smooth solver where the
  // penalty is smooth and by proximal_grad and admm (to tight tolerances) where it is not.
  const std::vector<Case> cases = {
      {"logistic", "none", "newton"},      {"logistic", "l2", "newton"},
      {"logistic", "l2", "lbfgs"},         {"logistic", "l2", "admm"},
      {"logistic", "l1", "proximal_grad"}, {"logistic", "l1", "admm"},
      {"logistic", "elastic_net", "admm"}, {"normal", "none", "newton"},
      {"normal", "l2", "newton"},          {"normal", "l2", "gradient_descent"},
      {"normal", "l1", "proximal_grad"},   {"normal", "elastic_net", "proximal_grad"},
      {"poisson", "none", "newton"},       {"poisson", "l2", "newton"},
      {"poisson", "l2", "lbfgs"},
  };
  const double C = 0.05;
  for (const char* family : {"logistic", "normal", "poisson"}) {
    Data d = make_data(family);
    std::vector<std::string> calls;
    std::vector<Case> mine;
    for (const Case& c : cases)
      if (std::string(c.family) == family) {
        mine.push_back(c);
        calls.push_back(reference(std::string("sklearn_fit(x, y, '") + family + "', '" + c.penalty +
                                  "', " + std::to_string(C) + ")"));
      }
    auto want = kt::numpy({{"x", d.x}, {"y", d.y}}, calls);
    for (Shape rows : {Shape{400}, Shape{1500}}) {
      Array x = kt::lazy(d.x, {rows[0], 5}), y = kt::lazy(d.y, rows);
      for (size_t i = 0; i < mine.size(); ++i) {
        std::string what = std::string(family) + " " + mine[i].penalty + " by " + mine[i].solver +
                           ", rows " + std::to_string(rows[0]);
        glm::LinearModel m =
            std::string(family) == "logistic"
                ? static_cast<glm::LinearModel>(
                      configured<glm::LogisticRegression>(mine[i].solver, mine[i].penalty, C))
            : std::string(family) == "normal"
                ? static_cast<glm::LinearModel>(
                      configured<glm::LinearRegression>(mine[i].solver, mine[i].penalty, C))
                : static_cast<glm::LinearModel>(
                      configured<glm::PoissonRegression>(mine[i].solver, mine[i].penalty, C));
        m.fit(x, y);
        EXPECT_TRUE(m.converged_) << what;
        expect_coefficients(m, want[i], what);
      }
    }
  }
}

TEST(GlmEstimators, PredictAndScore) {
  Data d = make_data("logistic");
  Array x = kt::lazy(d.x, {400, 5}), y = kt::lazy(d.y, {400});
  glm::LogisticRegression lr;  // dask-ml's defaults: admm, l2, C = 1
  lr.fit(x, y);
  ASSERT_EQ(lr.coef_.size(), 5u);
  EXPECT_GT(lr.n_iter_, 0);
  EXPECT_EQ(lr.loss_.size(), static_cast<size_t>(lr.n_iter_));
  NDArray proba = lr.predict_proba(x).compute(), label = lr.predict(x).compute();
  auto want = kt::numpy(
      {{"x", d.x}, {"y", d.y}, {"c", params(lr)}},
      {"1 / (1 + np.exp(-(x @ c[:5] + c[5])))", "np.mean(((x @ c[:5] + c[5]) > 0) == y)"});
  EXPECT_TRUE(kt::same(proba, want[0], 0, 1e-12)) << "predict_proba";
  for (int64_t i = 0; i < 1500; ++i) ASSERT_EQ(label.at(i) != 0, want[0].at(i) > 0.5) << i;
  EXPECT_NEAR(lr.score(x, y), want[1].item<double>(), 1e-12);
  EXPECT_GT(lr.score(x, y), 0.6);

  Data n = make_data("normal");
  Array ny = kt::lazy(n.y, {400});
  glm::LinearRegression ols;
  ols.solver = "newton";
  ols.penalty = "none";
  ols.fit(x, ny);
  auto r2 = kt::numpy(
      {{"x", d.x}, {"y", n.y}, {"c", params(ols)}},
      {"(lambda r: 1 - (r @ r) / ((y - y.mean()) @ (y - y.mean())))(y - x @ c[:5] - c[5])"});
  EXPECT_NEAR(ols.score(x, ny), r2[0].item<double>(), 1e-12);
  EXPECT_TRUE(kt::same(ols.predict(x).compute(),
                       kt::numpy({{"x", d.x}, {"c", params(ols)}}, {"x @ c[:5] + c[5]"})[0], 1e-12,
                       1e-12))
      << "LinearRegression.predict";

  Data p = make_data("poisson");
  Array py = kt::lazy(p.y, {400});
  glm::PoissonRegression pr;
  pr.solver = "newton";
  pr.penalty = "none";
  pr.fit(x, py);
  auto dev = kt::numpy(
      {{"x", d.x}, {"y", p.y}, {"c", params(pr)}},
      {"(lambda mu: 2 * np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0) - y + "
       "mu))(np.exp(x @ c[:5] + c[5]))",
       "2 * np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / y.mean()), 0) - y + "
       "y.mean())"});
  EXPECT_NEAR(pr.deviance(x, py), dev[0].item<double>(), 1e-9 * dev[0].item<double>());
  EXPECT_NEAR(pr.score(x, py), 1 - dev[0].item<double>() / dev[1].item<double>(), 1e-12);
  // Without an intercept: coef_ only, intercept_ 0, the same as a fit on X without ones.
  glm::PoissonRegression origin;
  origin.solver = "newton";
  origin.penalty = "none";
  origin.fit_intercept = false;
  origin.fit(x, py);
  EXPECT_EQ(origin.intercept_, 0.0);
  glm::Options o;
  o.family = glm::Family::Poisson;
  o.normalize = false;
  glm::Result plain = glm::newton(x, py, o);
  for (size_t j = 0; j < 5; ++j)
    EXPECT_NEAR(origin.coef_[j], plain.coef[j], 1e-8 * (1 + std::abs(plain.coef[j]))) << j;
}

TEST(GlmEstimators, BadInputIsAClearError) {
  Data d = make_data("logistic");
  Array x = kt::lazy(d.x, {400, 5}), y = kt::lazy(d.y, {400});
  auto has = [](auto f, const std::string& text) {
    std::string m = kt::error_of(f);
    EXPECT_NE(m.find(text), std::string::npos) << m;
  };
  glm::LogisticRegression lr;
  has([&] { lr.predict(x); }, "glm.LogisticRegression.decision_function: the model is not fitted");
  has([&] { lr.fit(x, y * 3.0); }, "glm.LogisticRegression.fit: glm.admm: the logistic family");
  has([&] { lr.fit(x.slice({Slice::all(), Slice(0, 3)}).sum({1}), y); }, "expected X of 2");
  has([&] { lr.fit(x, kt::lazy(d.y, {500})); }, "row chunks");
  glm::LogisticRegression bad_c;
  bad_c.C = 0;
  has([&] { bad_c.fit(x, y); }, "C must be finite and > 0");
  glm::LogisticRegression newton_l1;
  newton_l1.solver = "newton";
  newton_l1.penalty = "l1";
  has([&] { newton_l1.fit(x, y); }, "not differentiable; use proximal_grad or admm");
  glm::LogisticRegression sgd;
  sgd.solver = "sgd";
  has([&] { sgd.fit(x, y); }, "unknown solver 'sgd'");
  glm::LogisticRegression l3;
  l3.penalty = "l3";
  has([&] { l3.fit(x, y); }, "unknown penalty 'l3'");
  glm::PoissonRegression pr;
  has([&] { pr.fit(x, y - 1.0); }, "counts y >= 0");
  lr.solver = "newton";
  lr.penalty = "none";
  lr.fit(x, y);
  has([&] { lr.predict(x.slice({Slice::all(), Slice(0, 4)})); }, "expected X of shape (n, 5)");
  // Stopping at max_iter is reported in converged_, not silent.
  glm::LogisticRegression brief;
  brief.max_iter = 2;
  brief.fit(x, y);
  EXPECT_FALSE(brief.converged_);
  EXPECT_EQ(brief.n_iter_, 2);
}
