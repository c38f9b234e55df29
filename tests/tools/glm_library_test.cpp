// kiln::glm (glm/kiln/glm.hpp) against the same algorithms written in NumPy step by step
// (tests/tools/glm_reference.py: dask-glm 0.4.0's solvers with its column normalization):
// every family with gradient_descent and newton, proximal_grad with each penalty, lbfgs, admm
// over uneven and single row chunks; chunked and
// one-chunk data; plans and kernels reused from the second fit on; the seed 000 regression;
// bad input.
#include <cmath>

#include "kiln/glm.hpp"
#include "oracle.hpp"

using namespace kiln;

namespace {

struct Data {
  NDArray X, y;
};

// X: 1500 x 5 uniform in [-2, 2] plus a column of ones (the intercept); y drawn by NumPy for
// the family from X w, w_j = (j - 2) / 4, intercept 0.5.
Data make_data(const std::string& family) {
  NDArray x = kt::random_array(DType::Float64, {1500, 5}, 701, -2, 2);
  std::string xw =
      "(np.hstack([x, np.ones((1500, 1))]) @ np.array([-0.5, -0.25, 0, 0.25, 0.5, 0.5]))";
  std::string y = family == "logistic" ? "(" + xw + " + rng.standard_normal(1500) > 0) * 1.0"
                  : family == "normal" ? xw + " + rng.standard_normal(1500)"
                                       : "rng.poisson(np.exp(0.5 * " + xw + ")) * 1.0";
  auto r = kt::numpy({{"x", x}}, {"np.hstack([x, np.ones((1500, 1))])",
                                  "(lambda rng: " + y + ")(np.random.default_rng(7))"});
  return {r[0], r[1]};
}

std::string reference(const std::string& call) {
  return "(__import__('sys').path.insert(0, '" + kt::source_dir() +
         "/tests/tools'), __import__('glm_reference')." + call + ")[1]";
}

void expect_matches(const glm::Result& got, const NDArray& want, const std::string& what) {
  const int64_t p = want.size() - 1;
  ASSERT_EQ(static_cast<int64_t>(got.coef.size()), p) << what;
  EXPECT_EQ(got.n_iter, static_cast<int>(want.at(p))) << what;
  for (int64_t j = 0; j < p; ++j)
    EXPECT_NEAR(got.coef[j], want.at(j), 1e-8 * (1 + std::abs(want.at(j)))) << what << " " << j;
  EXPECT_EQ(got.loss.size(), static_cast<size_t>(got.n_iter)) << what;
}

}  // namespace

TEST(Glm, SolversReproduceTheNumPyAlgorithmsForEveryFamily) {
  for (const char* family : {"logistic", "normal", "poisson"}) {
    Data d = make_data(family);
    std::string f = std::string("'") + family + "'";
    auto want =
        kt::numpy({{"X", d.X}, {"y", d.y}}, {reference("glm_gradient_descent(X, y, " + f + ", 30)"),
                                             reference("glm_newton(X, y, " + f + ")")});
    for (Shape rows : {Shape{400}, Shape{1500}}) {
      Array X = kt::lazy(d.X, {rows[0], 6}), y = kt::lazy(d.y, rows);
      glm::Options o;
      o.family = glm::family(family);
      o.max_iter = 30;
      std::string what = std::string(family) + " rows " + std::to_string(rows[0]);
      expect_matches(glm::gradient_descent(X, y, o), want[0], what + " gradient_descent");
      o.max_iter = 0;
      glm::Result nt = glm::newton(X, y, o);
      expect_matches(nt, want[1], what + " newton");
      EXPECT_TRUE(nt.converged) << what;
    }
  }
}

TEST(Glm, NewtonInCacheSizedRowBlocksMatchesNumPy) {
  // 300 columns: newton's pass runs in blocks of 2^19 / 300 = 1747 rows, here smaller than X's
  // one chunk of 2000 (and uneven: 1747 + 253).
  auto r = kt::numpy({}, {"(lambda rng: np.hstack([rng.uniform(-1, 1, (2000, 299)) / 8, "
                          "np.ones((2000, 1))]))(np.random.default_rng(11))",
                          "(lambda rng: (rng.uniform(-1, 1, (2000, 299)).sum(axis=1) / 8 + "
                          "rng.standard_normal(2000) > 0) * 1.0)(np.random.default_rng(11))"});
  auto want = kt::numpy({{"X", r[0]}, {"y", r[1]}}, {reference("glm_newton(X, y, 'logistic')")});
  glm::Result nt = glm::newton(kt::lazy(r[0], {2000, 300}), kt::lazy(r[1], {2000}));
  expect_matches(nt, want[0], "newton 2000 x 300");
  EXPECT_TRUE(nt.converged);
}

TEST(Glm, ProximalGradientWithEachPenalty) {
  Data d = make_data("logistic");
  Array X = kt::lazy(d.X, {500, 6}), y = kt::lazy(d.y, {500});
  for (const char* penalty : {"l1", "l2", "elastic_net"}) {
    auto want = kt::numpy({{"X", d.X}, {"y", d.y}},
                          {reference(std::string("glm_proximal_grad(X, y, 'logistic', '") +
                                     penalty + "', 0.1, 40)")});
    glm::Options o;
    o.penalty = glm::regularizer(penalty);
    o.max_iter = 40;
    expect_matches(glm::proximal_grad(X, y, o), want[0], penalty);
  }
  // A large L1 penalty zeroes coefficients (in the normalized problem; the intercept's is then
  // shifted by un-normalizing, the others stay 0).
  glm::Options strong;
  strong.lamduh = 1e4;
  glm::Result r = glm::proximal_grad(X, y, strong);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(r.coef[j], 0.0) << j;
}

TEST(Glm, LbfgsReproducesItsNumPyAlgorithmAndFindsNewtonsOptimum) {
  for (const char* family : {"logistic", "normal", "poisson"}) {
    Data d = make_data(family);
    std::string f = std::string("'") + family + "'";
    auto want =
        kt::numpy({{"X", d.X}, {"y", d.y}}, {reference("glm_lbfgs(X, y, " + f + ")"),
                                             reference("glm_lbfgs(X, y, " + f + ", 'l2', 0.5)")});
    Array X = kt::lazy(d.X, {400, 6}), y = kt::lazy(d.y, {400});
    glm::Options o;
    o.family = glm::family(family);
    glm::Result plain = glm::lbfgs(X, y, o);
    expect_matches(plain, want[0], std::string(family) + " lbfgs");
    EXPECT_TRUE(plain.converged) << family;
    EXPECT_GT(plain.n_iter, 3) << family;
    o.penalty = glm::regularizer("l2");
    o.lamduh = 0.5;
    expect_matches(glm::lbfgs(X, y, o), want[1], std::string(family) + " lbfgs l2");
    // The same optimum as Newton's method, to lbfgs's tolerance.
    glm::Options n;
    n.family = o.family;
    glm::Result nt = glm::newton(X, y, n);
    for (size_t j = 0; j < nt.coef.size(); ++j)
      EXPECT_NEAR(plain.coef[j], nt.coef[j], 1e-3 * (1 + std::abs(nt.coef[j]))) << family << j;
  }
}

TEST(Glm, AdmmReproducesItsNumPyAlgorithm) {
  // ADMM's iterates depend on the row chunks (one local problem per chunk): uneven chunks of
  // 400 (the last 300) and one chunk, each against NumPy with the same chunks. rho = 20, nearer
  // the local Hessians' scale than dask-glm's 1 (with which some of these take 250+ iterations).
  struct Case {
    const char* family;
    const char* penalty;
  };
  for (Case c : {Case{"logistic", "l1"}, Case{"logistic", "l2"}, Case{"normal", "elastic_net"},
                 Case{"poisson", "l1"}}) {
    Data d = make_data(c.family);
    std::string args = std::string("'") + c.family + "', %d, '" + c.penalty + "', rho=20)";
    std::vector<std::string> calls;
    for (int rows : {400, 1500}) {
      char call[200];
      std::snprintf(call, sizeof call, ("glm_admm(X, y, " + args).c_str(), rows);
      calls.push_back(reference(call));
    }
    auto want = kt::numpy({{"X", d.X}, {"y", d.y}}, calls);
    for (int i = 0; i < 2; ++i) {
      int64_t rows = i == 0 ? 400 : 1500;
      glm::Options o;
      o.family = glm::family(c.family);
      o.penalty = glm::regularizer(c.penalty);
      o.rho = 20;
      glm::Result r = glm::admm(kt::lazy(d.X, {rows, 6}), kt::lazy(d.y, {rows}), o);
      std::string what =
          std::string(c.family) + " " + c.penalty + " admm rows " + std::to_string(rows);
      expect_matches(r, want[static_cast<size_t>(i)], what);
      EXPECT_TRUE(r.converged) << what;
      EXPECT_GT(r.n_iter, 1) << what;
    }
  }
}

TEST(Glm, ProximalOperators) {
  std::vector<double> b = {-3, -0.5, 0, 0.5, 3};
  auto l1 = glm::regularizer("l1").proximal(b, 1);
  auto l2 = glm::regularizer("l2").proximal(b, 1);
  auto en = glm::regularizer("elastic_net").proximal(b, 1);
  std::vector<double> want_l1 = {-2, 0, 0, 0, 2}, want_l2 = {-1.5, -0.25, 0, 0.25, 1.5};
  std::vector<double> want_en = {-2.5 / 1.5, 0, 0, 0, 2.5 / 1.5};  // soft by 0.5, / (1 + 0.5)
  for (size_t j = 0; j < b.size(); ++j) {
    EXPECT_DOUBLE_EQ(l1[j], want_l1[j]) << j;
    EXPECT_DOUBLE_EQ(l2[j], want_l2[j]) << j;
    EXPECT_DOUBLE_EQ(en[j], want_en[j]) << j;
  }
  EXPECT_DOUBLE_EQ(glm::regularizer("elastic_net").value(b), 0.5 * 7 + 0.5 * (9 + 0.25) * 2 / 2);
}

TEST(Glm, LaterFitsCompileAndPlanNothing) {
  Data d = make_data("logistic");
  Array X = kt::lazy(d.X, {500, 6}), y = kt::lazy(d.y, {500});
  glm::Options o;
  o.max_iter = 12;
  glm::gradient_descent(X, y, o);  // plans and compiles everything it needs
  Stats before = stats();
  glm::Result again = glm::gradient_descent(X, y, o);
  Stats after = stats();
  EXPECT_EQ(after.kernels_compiled, before.kernels_compiled);
  EXPECT_EQ(after.plans_built, before.plans_built);
  EXPECT_GE(after.plan_cache_hits - before.plan_cache_hits, 2 * again.n_iter);
  // Every solver: a short fit plans and compiles what it needs, a longer one nothing more (ADMM:
  // every round of the chunks' local solves is one plan, the same in every iteration).
  for (const char* solver : {"newton", "lbfgs", "proximal_grad", "admm"}) {
    glm::Options s;
    s.max_iter = 2;
    s.tol = 1e-30;  // runs every iteration
    glm::solve(solver, X, y, s);
    before = stats();
    s.max_iter = 5;
    glm::Result longer = glm::solve(solver, X, y, s);
    after = stats();
    EXPECT_GE(longer.n_iter, 3) << solver;
    EXPECT_EQ(after.kernels_compiled, before.kernels_compiled) << solver;
    EXPECT_EQ(after.plans_built, before.plans_built) << solver;
    EXPECT_GT(after.plan_cache_hits - before.plan_cache_hits, longer.n_iter) << solver;
  }
}

TEST(Glm, Seed000LinearRegressionRecoversItsCoefficients) {
  // x = 1000 * uniform, y = 0.5 x + 1 + noise (seed 000), X = [x, 1].
  auto r = kt::numpy({}, {"(lambda rng: (lambda x: np.stack([x, np.ones_like(x)], 1))"
                          "(1000 * rng.uniform(size=10000)))(np.random.default_rng(3))",
                          "(lambda rng: 0.5 * (1000 * rng.uniform(size=10000)) + 1 + "
                          "rng.standard_normal(10000))(np.random.default_rng(3))"});
  glm::Options o;
  o.family = glm::Family::Normal;
  glm::Result fit = glm::newton(kt::lazy(r[0], {2500, 2}), kt::lazy(r[1], {2500}), o);
  EXPECT_NEAR(fit.coef[0], 0.5, 1e-3);
  EXPECT_NEAR(fit.coef[1], 1.0, 0.1);
  EXPECT_TRUE(fit.converged);
  // As the seed writes it: LinearRegression(solver='lbfgs') on x alone (the estimator adds the
  // intercept; its default L2 penalty with C = 1 is negligible against 10000 squared errors).
  glm::LinearRegression est;
  est.solver = "lbfgs";
  Array x = kt::lazy(r[0], {2500, 2}).slice({Slice::all(), Slice(0, 1)});
  est.fit(x, kt::lazy(r[1], {2500}));
  EXPECT_TRUE(est.converged_);
  EXPECT_NEAR(est.coef_[0], 0.5, 1e-3);
  EXPECT_NEAR(est.intercept_, 1.0, 0.1);
  EXPECT_NEAR(est.coef_[0], fit.coef[0], 1e-6);
}

TEST(Glm, BadInputIsAClearError) {
  Data d = make_data("logistic");
  Array X = kt::lazy(d.X, {500, 6}), y = kt::lazy(d.y, {500});
  auto has = [](auto f, const std::string& text) {
    std::string m = kt::error_of(f);
    EXPECT_NE(m.find(text), std::string::npos) << m;
  };
  has([&] { glm::newton(X, y.slice({Slice(0, 1000)})); }, "X has 1500 rows, y 1000");
  glm::Options bad_gtol;
  bad_gtol.gtol = -1;
  has([&] { glm::newton(X, y, bad_gtol); }, "gtol must be finite and >= 0");
  has([&] { glm::newton(X, y * 2.0); }, "labels y in {0, 1}");
  glm::Options poisson;
  poisson.family = glm::Family::Poisson;
  has([&] { glm::newton(X, y - 1.0, poisson); }, "counts y >= 0");
  has([&] { glm::newton(X / 0.0, y); }, "non-finite values");
  has([&] { glm::solve("sgd", X, y); }, "unknown solver 'sgd'");
  glm::Options l1;
  l1.penalty = glm::regularizer("l1");
  has([&] { glm::lbfgs(X, y, l1); }, "not differentiable; use proximal_grad");
  has([] { glm::regularizer("l3"); }, "unknown penalty 'l3'");
  has([] { glm::family("gamma"); }, "unknown family 'gamma'");
  Array two_constant = concatenate({X, ones({1500, 1}, {500, 1})}, 1);
  has([&] { glm::newton(two_constant, y); }, "more than one constant column");
  // Not converging within max_iter is reported.
  glm::Options short_run;
  short_run.max_iter = 2;
  EXPECT_FALSE(glm::gradient_descent(X, y, short_run).converged);
}
