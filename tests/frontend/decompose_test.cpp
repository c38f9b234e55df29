// numpy.linalg's factorizations against NumPy: QR and SVD (TSQR over row chunks: uneven, merged
// short chunks, a two-level tree, both dims chunked, one block, wide arrays), cholesky, solve,
// inv, det, slogdet, eigh, lstsq, norm, the randomized SVD; float32 and float64; factorizing
// once for several parts; bad input. Factors with a sign freedom (Q's columns, singular and eigen
// vectors) are checked through their defining identities and compared sign-insensitively.
#include <sstream>

#include "oracle.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

namespace {

double tol(DType t) { return t == DType::Float32 ? 1e-4 : 1e-10; }

// Asserts q has orthonormal columns and |a - q r| is small, r upper triangular.
void expect_qr(const NDArray& a, const NDArray& q, const NDArray& r, DType t, const char* what) {
  auto want =
      kt::numpy({{"a", a}, {"q", q}, {"r", r}},
                {"np.abs(q @ r - a).max() / max(1.0, np.abs(a).max())",
                 "np.abs(q.T @ q - np.eye(q.shape[1])).max()",
                 "np.abs(np.tril(r, -1)).max() if r.size else 0.0",
                 "np.abs(np.abs(r) - np.abs(np.linalg.qr(a.astype(np.float64))[1])).max() / "
                 "max(1.0, np.abs(a).max())"});
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_LT(want[k].at(0), tol(t)) << what << " check " << k;
}

void expect_svd(const NDArray& a, const NDArray& u, const NDArray& s, const NDArray& vh, DType t,
                const char* what) {
  auto want =
      kt::numpy({{"a", a}, {"u", u}, {"s", s}, {"vh", vh}},
                {"np.abs(s - np.linalg.svd(a.astype(np.float64), compute_uv=False)).max() / "
                 "max(1.0, np.abs(a).max())",
                 "np.abs((u * s) @ vh - a).max() / max(1.0, np.abs(a).max())",
                 "np.abs(u.T @ u - np.eye(u.shape[1])).max()",
                 "np.abs(vh @ vh.T - np.eye(vh.shape[0])).max()",
                 "0.0 if s.size < 2 else float(np.any(np.diff(s) > 0))"});
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_LT(want[k].at(0), tol(t) * 10) << what << " check " << k;
}

}  // namespace

TEST(Decompose, QrTsqrAndDirect) {
  for (DType t : {DType::Float64, DType::Float32}) {
    struct Case {
      Shape shape, chunks;
      const char* what;
    };
    for (const Case& c : {Case{{60, 7}, {13, 7}, "TSQR, uneven tail"},
                          Case{{60, 7}, {5, 7}, "TSQR, chunks shorter than n merged"},
                          Case{{60, 7}, {60, 7}, "one block"}, Case{{7, 60}, {7, 20}, "wide"},
                          Case{{40, 9}, {10, 4}, "both dims chunked"},
                          Case{{600, 3}, {10, 3}, "60 blocks: a two-level tree"},
                          Case{{600, 3}, {100, 3}, "tall blocks: LAPACK's own TSQR per block"},
                          Case{{300, 4}, {300, 4}, "one tall block"}}) {
      NDArray a = kt::random_array(t, c.shape, 601);
      linalg::QR f = linalg::qr(lazy(a, c.chunks));
      auto got = compute({f.q, f.r});
      EXPECT_EQ(got[0].dtype(), t);
      expect_qr(a, got[0], got[1], t, c.what);
    }
  }
}

TEST(Decompose, TsqrReadsViewsOfItsInputInPlace) {
  // TSQR's block calls read the blocks through their views: reversed rows (a negative row
  // stride), every other row, reversed columns, and a transposed (column-major) matrix.
  NDArray a = kt::random_array(DType::Float64, {240, 6}, 619);
  NDArray b = kt::random_array(DType::Float64, {6, 120}, 620);
  auto views = kt::numpy({{"a", a}, {"b", b}}, {"a[::-1]", "a[::2]", "a[:, ::-1]", "b.T"});
  Array A = lazy(a, {40, 6});
  std::vector<Array> lazy_views = {A.slice({Slice(239, -241, -1), Slice::all()}),
                                   A.slice({Slice(0, 240, 2), Slice::all()}),
                                   A.slice({Slice::all(), Slice(5, -7, -1)}), lazy(b, {6, 30}).T()};
  for (size_t k = 0; k < views.size(); ++k) {
    linalg::QR f = linalg::qr(lazy_views[k]);
    linalg::SVD d = linalg::svd(lazy_views[k]);
    auto got = compute({f.q, f.r, d.u, d.s, d.vh});
    const std::string what = "view " + std::to_string(k);
    expect_qr(views[k], got[0], got[1], DType::Float64, what.c_str());
    expect_svd(views[k], got[2], got[3], got[4], DType::Float64, what.c_str());
  }
}

TEST(Decompose, IllConditionedTallBlocksStayOrthogonal) {
  // Tall blocks are factorized by CholeskyQR2 when well conditioned, and TSQR forms a block's
  // rows of Q (or U) as X_i (R_i^-1 M_i) only then: these columns span 12 orders of magnitude
  // (condition ~1e12), which must take the Householder path instead. Scaled columns alone are
  // benign for X_i R_i^-1 (the scaling cancels), so the mixed cases also rotate them (a random
  // orthogonal H), and the last has well conditioned blocks above ill-conditioned ones. Blocks
  // of 400 and 100 rows (at least 16n) are factorized by latsqr, of 50 by geqrt.
  NDArray g = kt::random_array(DType::Float64, {400, 5}, 617);
  NDArray h = kt::random_array(DType::Float64, {5, 5}, 618);
  auto a = kt::numpy({{"g", g}, {"h", h}},
                     {"g * np.array([1, 1e-3, 1e-6, 1e-9, 1e-12])",
                      "(g * np.array([1, 1e-3, 1e-6, 1e-9, 1e-12])) @ np.linalg.qr(h)[0]",
                      "np.concatenate([g[:200], (g[200:] * np.array([1, 1e-3, 1e-6, 1e-9, "
                      "1e-12])) @ np.linalg.qr(h)[0]])"});
  for (size_t k = 0; k < a.size(); ++k)
    for (Shape chunks : {Shape{400, 5}, Shape{100, 5}, Shape{50, 5}}) {
      linalg::QR f = linalg::qr(lazy(a[k], chunks));
      linalg::SVD d = linalg::svd(lazy(a[k], chunks));
      auto got = compute({f.q, f.r, d.u, d.s, d.vh});
      auto check = kt::numpy(
          {{"a", a[k]}, {"q", got[0]}, {"r", got[1]}, {"u", got[2]}, {"s", got[3]}, {"vh", got[4]}},
          {"np.abs(q.T @ q - np.eye(5)).max()", "np.abs(q @ r - a).max()",
           "np.abs(u.T @ u - np.eye(5)).max()", "np.abs((u * s) @ vh - a).max()"});
      const std::string what = std::to_string(k) + " " + shape_str(chunks);
      EXPECT_LT(check[0].at(0), 1e-12) << what;
      EXPECT_LT(check[1].at(0), 1e-14) << what;
      EXPECT_LT(check[2].at(0), 1e-12) << what;
      EXPECT_LT(check[3].at(0), 1e-13) << what;  // through U S Vh: a few more roundings
    }
}

TEST(Decompose, SvdTsqrDirectAndWide) {
  for (DType t : {DType::Float64, DType::Float32}) {
    struct Case {
      Shape shape, chunks;
      const char* what;
    };
    for (const Case& c :
         {Case{{80, 6}, {17, 6}, "TSQR"}, Case{{80, 6}, {80, 6}, "one block"},
          Case{{6, 80}, {6, 30}, "wide"}, Case{{50, 8}, {9, 3}, "both dims"},
          Case{{400, 4}, {12, 4}, "two-level tree"}, Case{{400, 4}, {100, 4}, "tall blocks"}}) {
      NDArray a = kt::random_array(t, c.shape, 602);
      linalg::SVD f = linalg::svd(lazy(a, c.chunks));
      auto got = compute({f.u, f.s, f.vh});
      expect_svd(a, got[0], got[1], got[2], t, c.what);
    }
  }
}

TEST(Decompose, SeveralPartsFactorizeOnce) {
  NDArray a = kt::random_array(DType::Float64, {30, 5}, 603);
  linalg::SVD f = linalg::svd(lazy(a, {30, 5}));
  std::ostringstream ir;
  ComputeOptions opt;
  opt.ir = &ir;
  compute({f.u, f.s, f.vh}, opt);
  std::string s = ir.str();
  size_t first = s.find("= svd of");
  ASSERT_NE(first, std::string::npos) << s;
  EXPECT_EQ(s.find("= svd of", first + 1), std::string::npos) << s;
  EXPECT_NE(s.find("LAPACK gesdd"), std::string::npos) << s;
}

TEST(Decompose, TsqrFactorizesEachBlockThenTheStackedR) {
  // Rows in chunks of 13 (the 8-row tail kept: at least n = 7): 5 block R factors, one QR of
  // them stacked, and Q's blocks formed by one TsqrMix and one TsqrApply call each, written
  // straight into Q (no concatenation kernel).
  NDArray a = kt::random_array(DType::Float64, {60, 7}, 616);
  linalg::QR f = linalg::qr(lazy(a, {13, 7}));
  std::ostringstream ir;
  ComputeOptions opt;
  opt.ir = &ir;
  compute({f.q, f.r}, opt);
  std::string s = ir.str();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("= tsqr_r of A (13, 7)"), 4u) << s;
  EXPECT_EQ(count("= tsqr_r of A (8, 7)"), 1u) << s;
  EXPECT_EQ(count("= qr of A (35, 7)"), 1u) << s;
  EXPECT_EQ(count("= tsqr_mix of A (8, 7) and B (7, 7)"), 5u) << s;
  EXPECT_EQ(count("= tsqr_apply of A (13, 7) and B (8, 7)"), 4u) << s;
  EXPECT_EQ(count("= tsqr_apply of A (8, 7) and B (8, 7)"), 1u) << s;
  EXPECT_EQ(count("result written in place into Concat[0] float64 (60, 7)"), 5u) << s;
  EXPECT_EQ(count("dgemm per block"), 0u) << s;
}

TEST(Decompose, SolversMatchNumPy) {
  for (DType t : {DType::Float64, DType::Float32}) {
    NDArray m = kt::random_array(t, {6, 6}, 604);
    NDArray b = kt::random_array(t, {6, 3}, 605);
    NDArray v = kt::random_array(t, {6}, 606);
    NDArray tall = kt::random_array(t, {20, 4}, 607);
    NDArray y = kt::random_array(t, {20}, 608);
    NDArray wide = kt::random_array(t, {3, 5}, 609);
    NDArray y3 = kt::random_array(t, {3, 2}, 610);
    NDArray spd = kt::numpy({{"m", m}}, {"m @ m.T + 6 * np.eye(6, dtype=m.dtype)"})[0];
    Array M = lazy(m, {4, 4}), B = lazy(b, {3, 3}), V = lazy(v), T = lazy(tall, {7, 4});
    Array Y = lazy(y, {7}), W = lazy(wide), Y3 = lazy(y3), S = lazy(spd, {5, 5});
    linalg::SlogDet sl = linalg::slogdet(M);
    linalg::Eigh eh = linalg::eigh(S);
    linalg::Lstsq ls = linalg::lstsq(T, Y), lw = linalg::lstsq(W, Y3), lm = linalg::lstsq(T, T);
    auto got =
        compute({linalg::solve(M, B), linalg::solve(M, V), linalg::inv(M), linalg::det(M), sl.sign,
                 sl.logabsdet, linalg::cholesky(S), eh.eigenvalues, ls.x, ls.residuals, ls.rank,
                 ls.s, lw.x, lw.residuals, lw.rank, lm.x, lm.residuals});
    auto want = kt::numpy(
        {{"m", m}, {"b", b}, {"v", v}, {"t", tall}, {"y", y}, {"w", wide}, {"y3", y3}, {"s", spd}},
        {"np.linalg.solve(m, b)", "np.linalg.solve(m, v)", "np.linalg.inv(m)", "np.linalg.det(m)",
         "np.linalg.slogdet(m)[0]", "np.linalg.slogdet(m)[1]", "np.linalg.cholesky(s)",
         "np.linalg.eigh(s)[0]", "np.linalg.lstsq(t, y)[0]", "np.linalg.lstsq(t, y)[1]",
         "np.int64(np.linalg.lstsq(t, y)[2])", "np.linalg.lstsq(t, y)[3]",
         "np.linalg.lstsq(w, y3)[0]", "np.linalg.lstsq(w, y3)[1]",
         "np.int64(np.linalg.lstsq(w, y3)[2])", "np.linalg.lstsq(t, t)[0]",
         "np.linalg.lstsq(t, t)[1]"});
    double r = t == DType::Float32 ? 2e-4 : 1e-9;
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].shape(), want[k].shape()) << k;
      EXPECT_TRUE(same(got[k], want[k], r, r)) << dtype_name(t) << " " << k;
    }
    EXPECT_EQ(got[10].dtype(), DType::Int64);
    // Eigenvectors: S V = V diag(w), V orthonormal.
    NDArray vecs = eh.eigenvectors.compute();
    auto check = kt::numpy(
        {{"s", spd}, {"v", vecs}, {"w", got[7]}},
        {"np.abs(s @ v - v * w).max() / np.abs(s).max()", "np.abs(v.T @ v - np.eye(6)).max()"});
    EXPECT_LT(check[0].at(0), 10 * r);
    EXPECT_LT(check[1].at(0), 10 * r);
  }
}

TEST(Decompose, StacksOfMatricesAsNumPy) {
  NDArray a = kt::random_array(DType::Float64, {2, 3, 4, 4}, 618);
  NDArray b = kt::random_array(DType::Float64, {3, 4, 2}, 619);
  NDArray v = kt::random_array(DType::Float64, {4}, 620);
  NDArray spd = kt::numpy({{"a", a}}, {"a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)"})[0];
  NDArray w = kt::random_array(DType::Float64, {3, 6, 2}, 621);
  Array A = lazy(a, {1, 2, 3, 4}), B = lazy(b), V = lazy(v), S = lazy(spd), W = lazy(w, {2, 5, 2});
  linalg::SlogDet sl = linalg::slogdet(A);
  linalg::Eigh eh = linalg::eigh(S);
  linalg::SVD sv = linalg::svd(W);
  linalg::QR qr = linalg::qr(W);
  auto got = compute({linalg::det(A), sl.sign, sl.logabsdet, linalg::inv(A), linalg::solve(A, B),
                      linalg::solve(A, V), linalg::cholesky(S), eh.eigenvalues, sv.s,
                      linalg::det(zeros({0, 3, 3}))});
  auto want =
      kt::numpy({{"a", a}, {"b", b}, {"v", v}, {"s", spd}, {"w", w}},
                {"np.linalg.det(a)", "np.linalg.slogdet(a)[0]", "np.linalg.slogdet(a)[1]",
                 "np.linalg.inv(a)", "np.linalg.solve(a, b)", "np.linalg.solve(a, v)",
                 "np.linalg.cholesky(s)", "np.linalg.eigh(s)[0]",
                 "np.linalg.svd(w, compute_uv=False)", "np.linalg.det(np.zeros((0, 3, 3)))"});
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].shape(), want[k].shape()) << k;
    EXPECT_TRUE(same(got[k], want[k], 1e-10, 1e-10)) << k;
  }
  auto parts = compute({sv.u, sv.s, sv.vh, qr.q, qr.r});
  auto check =
      kt::numpy({{"w", w},
                 {"u", parts[0]},
                 {"s", parts[1]},
                 {"vh", parts[2]},
                 {"q", parts[3]},
                 {"r", parts[4]}},
                {"np.abs((u * s[..., None, :]) @ vh - w).max()", "np.abs(q @ r - w).max()"});
  EXPECT_LT(check[0].at(0), 1e-12);
  EXPECT_LT(check[1].at(0), 1e-12);
}

TEST(Decompose, IntegerInputsFactorizeInFloat64) {
  NDArray m = kt::make_array(DType::Int64, {2, 2}, {4, 2, 2, 3});
  auto got = compute({linalg::det(lazy(m)), linalg::inv(lazy(m)), linalg::cholesky(lazy(m))});
  EXPECT_EQ(got[0].dtype(), DType::Float64);
  auto want =
      kt::numpy({{"m", m}}, {"np.linalg.det(m)", "np.linalg.inv(m)", "np.linalg.cholesky(m)"});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-14, 1e-14)) << k;
}

TEST(Decompose, NormsMatchNumPy) {
  NDArray x = kt::random_array(DType::Float64, {7, 5}, 611);
  NDArray v = kt::random_array(DType::Float64, {9}, 612);
  NDArray c = kt::random_array(DType::Float64, {3, 4, 5}, 613);
  Array X = lazy(x, {3, 2}), V = lazy(v, {4}), C = lazy(c, {2, 2, 2});
  const double inf = std::numeric_limits<double>::infinity();
  using linalg::norm;
  auto got = compute({norm(V),
                      norm(V, 1.0),
                      norm(V, inf),
                      norm(V, -inf),
                      norm(V, 0.0),
                      norm(V, 3.0),
                      norm(X),
                      norm(X, "fro"),
                      norm(X, "nuc"),
                      norm(X, 2.0),
                      norm(X, -2.0),
                      norm(X, 1.0),
                      norm(X, -1.0),
                      norm(X, inf),
                      norm(X, -inf),
                      norm(X, 2.0, {1}),
                      norm(C, std::nullopt, {0, 2}),
                      norm(C, 1.0, {2, 1}),
                      norm(X, "fro", {}, true),
                      norm(C),
                      norm(X, 2.0, {}, true)});
  auto want = kt::numpy({{"x", x}, {"v", v}, {"c", c}}, {"np.linalg.norm(v)",
                                                         "np.linalg.norm(v, 1)",
                                                         "np.linalg.norm(v, np.inf)",
                                                         "np.linalg.norm(v, -np.inf)",
                                                         "np.linalg.norm(v, 0)",
                                                         "np.linalg.norm(v, 3)",
                                                         "np.linalg.norm(x)",
                                                         "np.linalg.norm(x, 'fro')",
                                                         "np.linalg.norm(x, 'nuc')",
                                                         "np.linalg.norm(x, 2)",
                                                         "np.linalg.norm(x, -2)",
                                                         "np.linalg.norm(x, 1)",
                                                         "np.linalg.norm(x, -1)",
                                                         "np.linalg.norm(x, np.inf)",
                                                         "np.linalg.norm(x, -np.inf)",
                                                         "np.linalg.norm(x, 2, axis=1)",
                                                         "np.linalg.norm(c, axis=(0, 2))",
                                                         "np.linalg.norm(c, 1, axis=(2, 1))",
                                                         "np.linalg.norm(x, 'fro', keepdims=True)",
                                                         "np.linalg.norm(c)",
                                                         "np.linalg.norm(x, 2, keepdims=True)"});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-12, 1e-12)) << k;
}

TEST(Decompose, CompressedSvdRecoversALowRankMatrix) {
  // A rank-4 matrix: the randomized SVD with k = 4 recovers its singular values and itself.
  NDArray p = kt::random_array(DType::Float64, {300, 4}, 614);
  NDArray q = kt::random_array(DType::Float64, {4, 40}, 615);
  NDArray a = kt::numpy({{"p", p}, {"q", q}}, {"p @ q"})[0];
  for (int iters : {0, 2}) {
    linalg::SVD f = linalg::svd_compressed(lazy(a, {50, 40}), 4, iters, 5, 7);
    auto got = compute({f.u, f.s, f.vh});
    EXPECT_EQ(got[0].shape(), (Shape{300, 4}));
    EXPECT_EQ(got[2].shape(), (Shape{4, 40}));
    auto check =
        kt::numpy({{"a", a}, {"u", got[0]}, {"s", got[1]}, {"vh", got[2]}},
                  {"np.abs(s - np.linalg.svd(a, compute_uv=False)[:4]).max() / np.abs(a).max()",
                   "np.abs((u * s) @ vh - a).max() / np.abs(a).max()"});
    EXPECT_LT(check[0].at(0), 1e-10) << iters;
    EXPECT_LT(check[1].at(0), 1e-10) << iters;
  }
}

TEST(Decompose, BadInputIsAClearError) {
  auto has = [&](auto f, const std::string& text) {
    std::string m = kt::error_of(f);
    EXPECT_NE(m.find(text), std::string::npos) << m;
  };
  has([] { linalg::inv(ones({2, 3})); }, "linalg.inv: expected square matrices, got shape (2, 3)");
  has([] { linalg::svd(ones({4})); }, "linalg.svd: expected an array of at least 2 dimensions");
  has([] { linalg::lstsq(ones({2, 3, 4}), ones({3})); }, "linalg.lstsq: expected a 2-D array");
  has([] { linalg::inv(ones({2, 3, 4})); }, "linalg.inv: expected square matrices");
  has(
      [] {
        linalg::solve(ones({3, 3}), ones({4}));
      },
      "linalg.solve: the right-hand side has 4 rows");
  has([] { linalg::solve(zeros({3, 3}), ones({3})).compute(); }, "solve: the matrix is singular");
  has([] { linalg::inv(zeros({3, 3})).compute(); }, "inv: the matrix is singular");
  NDArray notpd = kt::make_array(DType::Float64, {2, 2}, {1, 2, 2, 1});
  has([&] { linalg::cholesky(lazy(notpd)).compute(); },
      "cholesky: the matrix is not positive definite (its leading minor of order 2 is not)");
  NDArray nan = kt::make_array(DType::Float64, {2, 2}, {1, NAN, 0, 1});
  has([&] { linalg::svd(lazy(nan)).s.compute(); }, "svd: the input has non-finite values");
  has([&] { linalg::qr(lazy(nan)).r.compute(); }, "qr: the input has non-finite values");
  has([] { linalg::svd_compressed(ones({10, 5}), 6); }, "k must be in [1, min(m, n)] = [1, 5]");
  has([] { linalg::norm(ones({3, 3}), "bad"); }, "invalid matrix norm order 'bad'");
  has([] { linalg::norm(ones({3}), "fro"); }, "invalid vector norm order 'fro'");
  // A singular matrix's determinant is 0 and its slogdet (0, -inf), as NumPy's.
  auto d = compute({linalg::det(zeros({3, 3})), linalg::slogdet(zeros({3, 3})).logabsdet});
  EXPECT_EQ(d[0].item<double>(), 0.0);
  EXPECT_EQ(d[1].item<double>(), -std::numeric_limits<double>::infinity());
}
