// Linear algebra against NumPy: matmul (library calls: BLAS per block, partial products over the
// contracted chunks), dot, vdot, inner, outer, tensordot, einsum; chunkings that align and that do
// not, uneven last chunks, one-block operands, transposed operands read in place, integer and
// bool products (no BLAS), element-wise work fused around the call, and the errors.
#include <map>
#include <sstream>
#include <thread>

#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;
using kt::lazy;
using kt::same;

namespace {

// rtol for a product of `k` terms of magnitude ~1 in dtype t (BLAS and NumPy's BLAS may order
// the sums differently).
double tol(DType t) { return t == DType::Float32 ? 2e-5 : 1e-12; }

}  // namespace

TEST(Linalg, MatMulMatchesNumPyForEveryChunking) {
  for (DType t : {DType::Float64, DType::Float32}) {
    NDArray a = kt::random_array(t, {37, 23}, 501), b = kt::random_array(t, {23, 19}, 502);
    // (a chunks, b chunks): aligned, one block, contracted chunks that do not align, uneven.
    std::vector<std::pair<Shape, Shape>> chunkings = {{{10, 7}, {7, 5}},
                                                      {{37, 23}, {23, 19}},
                                                      {{10, 5}, {7, 19}},
                                                      {{36, 22}, {3, 18}},
                                                      {{1, 23}, {23, 1}}};
    auto want = kt::numpy({{"a", a}, {"b", b}}, {"a @ b"})[0];
    for (const auto& [ca, cb] : chunkings) {
      NDArray got = matmul(lazy(a, ca), lazy(b, cb)).compute();
      EXPECT_EQ(got.dtype(), t);
      EXPECT_TRUE(same(got, want, tol(t), tol(t))) << shape_str(ca) << " " << shape_str(cb);
    }
  }
}

TEST(Linalg, VectorsStacksAndMixedDtypes) {
  NDArray m = kt::random_array(DType::Float64, {9, 6}, 503);
  NDArray v = kt::random_array(DType::Float64, {6}, 504);
  NDArray w = kt::random_array(DType::Float64, {9}, 505);
  NDArray s = kt::random_array(DType::Float64, {2, 3, 9, 6}, 506);
  NDArray f = kt::random_array(DType::Float32, {6, 4}, 507);
  NDArray i = kt::random_array(DType::Int32, {6, 4}, 508, -5, 5);
  auto want = kt::numpy(
      {{"m", m}, {"v", v}, {"w", w}, {"s", s}, {"f", f}, {"i", i}},
      {"m @ v", "w @ m", "v @ v", "s @ m.T", "m @ f", "m @ i", "f.T @ i", "s @ v", "w @ s"});
  Array M = lazy(m, {4, 5}), V = lazy(v, {4}), W = lazy(w, {5}), S = lazy(s, {1, 2, 4, 6});
  Array F = lazy(f, {5, 3}), I = lazy(i, {6, 4});
  auto got = compute({matmul(M, V), matmul(W, M), matmul(V, V), matmul(S, M.T()), M.matmul(F),
                      matmul(M, I), matmul(F.T(), I), matmul(S, V), matmul(W, S)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-6, 1e-6)) << k;
  EXPECT_EQ(got[2].shape(), Shape{});
  EXPECT_EQ(got[4].dtype(), DType::Float64);  // float64 @ float32
  EXPECT_EQ(got[6].dtype(), DType::Float64);  // float32 @ int32, as NumPy
  for (size_t k : {0, 1, 2, 3, 5, 7, 8}) EXPECT_TRUE(same(got[k], want[k], 1e-12, 1e-12)) << k;
}

TEST(Linalg, IntegerAndBoolProductsAreExactWithoutBlas) {
  NDArray a = kt::random_array(DType::Int64, {11, 7}, 509, -1000000, 1000000);
  NDArray b = kt::random_array(DType::Int64, {7, 5}, 510, -1000000, 1000000);
  NDArray c = kt::random_array(DType::Int32, {11, 7}, 511, -60000, 60000);  // sums wrap int32
  NDArray d = kt::random_array(DType::Int32, {7, 5}, 512, -60000, 60000);
  NDArray p = kt::random_array(DType::Bool, {11, 7}, 513);
  NDArray q = kt::random_array(DType::Bool, {7, 5}, 514);
  auto want = kt::numpy({{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"p", p}, {"q", q}},
                        {"a @ b", "c @ d", "p @ q", "p @ b"});
  Array A = lazy(a, {4, 3}), B = lazy(b, {3, 2}), C = lazy(c, {5, 7}), D = lazy(d, {2, 5});
  Array P = lazy(p, {4, 4}), Q = lazy(q, {4, 5});
  auto got = compute({matmul(A, B), matmul(C, D), matmul(P, Q), matmul(P, B)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k])) << k;
  EXPECT_EQ(got[1].dtype(), DType::Int32);
  EXPECT_EQ(got[2].dtype(), DType::Bool);
}

TEST(Linalg, DotVdotInnerOuterTensordotEinsum) {
  NDArray a = kt::random_array(DType::Float64, {4, 5, 6}, 515);
  NDArray b = kt::random_array(DType::Float64, {6, 3}, 516);
  NDArray c = kt::random_array(DType::Float64, {5, 4, 2}, 517);
  NDArray v = kt::random_array(DType::Float64, {6}, 518);
  NDArray x = kt::random_array(DType::Float64, {3, 6}, 519);
  Array A = lazy(a, {3, 2, 4}), B = lazy(b, {4, 2}), C = lazy(c, {2, 4, 1}), V = lazy(v, {4});
  Array X = lazy(x, {2, 5});
  auto want =
      kt::numpy({{"a", a}, {"b", b}, {"c", c}, {"v", v}, {"x", x}},
                {"np.dot(a, b)", "np.dot(a, v)", "np.dot(b.T, v)", "np.vdot(a, a)",
                 "np.inner(a, x)", "np.outer(v, b)", "np.tensordot(a, c, axes=([1, 0], [0, 1]))",
                 "np.tensordot(b, x, 1)", "np.einsum('ijk,kl->il', a, b)",
                 "np.einsum('ijk,jil->kl', a, c)", "np.einsum('ij,ij->', x, x)",
                 "np.einsum('ij,kj->ik', x, x)", "np.einsum('ijk->kji', a)", "np.einsum('ijk', a)",
                 "np.einsum('ij,jk', x, b)", "np.einsum('ijk,jik->k', a, c[:, :, :1] * np.ones(6))",
                 "np.einsum('i,j->ij', v, v)", "np.dot(2.0, v)"});
  Array c6 = C.slice({Slice::all(), Slice::all(), Slice(0, 1)}) * ones({6}, {6});
  auto got = compute(
      {dot(A, B), dot(A, V), dot(B.T(), V), vdot(A, A), inner(A, X), outer(V, B),
       tensordot(A, C, {1, 0}, {0, 1}), tensordot(B, X, 1), einsum("ijk,kl->il", {A, B}),
       einsum("ijk,jil->kl", {A, C}), einsum("ij,ij->", {X, X}), einsum("ij,kj->ik", {X, X}),
       einsum("ijk->kji", {A}), einsum("ijk", {A}), einsum("ij,jk", {X, B}),
       einsum("ijk,jik->k", {A, c6}), einsum("i,j->ij", {V, V}), dot(scalar(2.0), V)});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-12, 1e-12)) << k;
}

TEST(Linalg, TransposedOperandsAreReadInPlace) {
  // X.T @ R: X is read with BLAS's transpose flag; no kernel copies it.
  NDArray x = kt::random_array(DType::Float64, {1000, 8}, 520);
  NDArray r = kt::random_array(DType::Float64, {1000, 3}, 521);
  Array X = lazy(x, {300, 8}), R = lazy(r, {300, 3});
  std::ostringstream ir;
  ComputeOptions opt;
  opt.ir = &ir;
  NDArray got = compute({matmul(X.T(), R)}, opt)[0];
  auto want = kt::numpy({{"x", x}, {"r", r}}, {"x.T @ r"})[0];
  EXPECT_TRUE(same(got, want, 1e-12, 1e-12));
  std::string s = ir.str();
  EXPECT_NE(s.find("library call"), std::string::npos) << s;
  EXPECT_NE(s.find("dgemm per block"), std::string::npos) << s;
  EXPECT_NE(s.find("with the transpose flag"), std::string::npos) << s;
  // One result block and 4 splits: in parallel into partials, or (on a one-core machine, where
  // one block is already a block per core) chained.
  bool partials = std::thread::hardware_concurrency() > 1;
  EXPECT_NE(s.find(std::string("4 contraction splits, ") +
                   (partials ? "in parallel into partials added in split order"
                             : "each adding to the block in split order")),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("in a layout BLAS cannot read"), std::string::npos) << s;
  EXPECT_EQ(stats().last_kernels, 1);  // the library call only
}

TEST(Linalg, MatrixVectorProductsAreOneFusedPass) {
  // X.T @ (sigmoid(X @ b) - y): each product is a fused reduction, the vector computed inside
  // it (no library call, nothing materialized but the results).
  NDArray x = kt::random_array(DType::Float64, {1000, 8}, 530);
  NDArray b = kt::random_array(DType::Float64, {8}, 531);
  NDArray y = kt::random_array(DType::Float64, {1000}, 532, 0, 1);
  Array X = lazy(x, {300, 8}), B = lazy(b), Y = lazy(y, {300});
  std::ostringstream ir;
  ComputeOptions opt;
  opt.ir = &ir;
  NDArray got = compute({matmul(X.T(), sigmoid(matmul(X, B)) - Y)}, opt)[0];
  auto want = kt::numpy({{"x", x}, {"b", b}, {"y", y}}, {"x.T @ (1 / (1 + np.exp(-(x @ b))) - y)"});
  EXPECT_TRUE(same(got, want[0], 1e-12, 1e-12));
  EXPECT_EQ(ir.str().find("library call"), std::string::npos) << ir.str();
  // One kernel, one pass over X: X @ b is its row stage, X.T @ (...) reads each row's result.
  // Not for a GPU (KILN_DEVICE=cuda, cuda-emu), where that kernel would run each block on one
  // thread (its reductions keep no dim in common): two kernels there, X read twice.
  const bool gpu = flags().device.rfind("cuda", 0) == 0;
  EXPECT_EQ(stats().last_kernels, gpu ? 2 : 1);
  EXPECT_EQ(ir.str().find("row->") != std::string::npos, !gpu) << ir.str();
}

TEST(Linalg, OperandsBlasCannotReadAreComputedFirst) {
  NDArray x = kt::random_array(DType::Float64, {20, 30}, 522);
  NDArray y = kt::random_array(DType::Float64, {15, 7}, 523);
  Array X = lazy(x, {7, 11}), Y = lazy(y, {4, 7});
  // A strided slice, a computed operand, a broadcast operand, a reversed one.
  Array Xs = X.slice({Slice::all(), Slice(0, {}, 2)});
  Array bc = Y.slice({Slice::index(0)}).broadcast_to({15, 7});
  Array rev = Y.slice({Slice({}, {}, -1), Slice::all()});
  auto want = kt::numpy({{"x", x}, {"y", y}},
                        {"x[:, ::2] @ y", "np.exp(x[:, :15]) @ (y * 2)",
                         "x[:, :15] @ np.broadcast_to(y[0], (15, 7))", "x[:, :15] @ y[::-1]"});
  Array X15 = X.slice({Slice::all(), Slice(0, 15)});
  std::ostringstream ir;
  ComputeOptions opt;
  opt.ir = &ir;
  auto got =
      compute({matmul(Xs, Y), matmul(exp(X15), Y * 2.0), matmul(X15, bc), matmul(X15, rev)}, opt);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same(got[k], want[k], 1e-12, 1e-12)) << k;
  EXPECT_NE(ir.str().find("in a layout BLAS cannot read"), std::string::npos);
}

TEST(Linalg, FusedEpilogueEqualsUnfusedAndNumPy) {
  NDArray x = kt::random_array(DType::Float64, {500, 10}, 524);
  NDArray b = kt::random_array(DType::Float64, {10}, 525);
  NDArray y = kt::random_array(DType::Bool, {500}, 526);
  Array X = lazy(x, {120, 10}), B = lazy(b), Y = lazy(y, {120});
  Array z = matmul(X, B);
  Array p = sigmoid(z) - Y.astype(DType::Float64);
  Array g = matmul(X.T(), p);
  Array loss = ((z - 1.0) * (z - 1.0)).sum();
  auto want = kt::numpy({{"x", x}, {"b", b}, {"y", y}},
                        {"1 / (1 + np.exp(-(x @ b))) - y", "x.T @ (1 / (1 + np.exp(-(x @ b))) - y)",
                         "((x @ b - 1) ** 2).sum()"});
  std::vector<NDArray> fused = compute({p, g, loss});
  ComputeOptions unfused;
  unfused.fuse = false;
  std::vector<NDArray> plain = compute({p, g, loss}, unfused);
  for (int threads : {1, 2}) {
    ComputeOptions o;
    o.threads = threads;
    std::vector<NDArray> again = compute({p, g, loss}, o);
    for (size_t k = 0; k < again.size(); ++k) EXPECT_TRUE(same(again[k], fused[k])) << k;
  }
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(same(fused[k], plain[k], 1e-14, 1e-14)) << k;
    EXPECT_TRUE(same(fused[k], want[k], 1e-11, 1e-11)) << k;
  }
}

TEST(Linalg, GramMatricesAreSymmetricAndEqualNumPys) {
  // X^T X of a buffer and of a computed array, with the contraction split over row blocks
  // (partials, or chained on one thread), or over parts of one block when the product has fewer
  // calls than cores (never into row panels, which would be separate GEMMs): the upper triangle
  // (Kiln's Gram kernel up to 256 columns, codegen/gram.cpp; syrk beyond) and its mirror, so
  // exactly symmetric, as NumPy's.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{900, 37}, {900, 100}, {900, 300}, {6000, 64}}) {
    NDArray x = kt::random_array(DType::Float64, {m, n}, 541);
    auto want = kt::numpy({{"x", x}}, {"x.T @ x", "np.exp(x / 4).T @ np.exp(x / 4)"});
    for (int threads : {1, 2})
      for (int64_t rows : {m, int64_t{200}}) {
        Array X = lazy(x, {rows, n}), E = exp(X / 4.0);
        ComputeOptions opt;
        opt.threads = threads;
        std::vector<NDArray> got = compute({matmul(X.T(), X), matmul(E.T(), E)}, opt);
        for (int q = 0; q < 2; ++q) {
          EXPECT_TRUE(same(got[q], want[q], 1e-12, 1e-12))
              << m << "x" << n << " " << q << " " << rows << " " << threads;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < i; ++j)
              ASSERT_EQ(got[q].at(i * n + j), got[q].at(j * n + i))
                  << m << "x" << n << " " << q << " " << rows << " " << i << " " << j;
        }
      }
  }
}

TEST(Linalg, ComputedOperandsStreamIntoTheCallsBlockByBlock) {
  // exp(X / 100) is computed per block of X, each block read by the GEMM calls of its rows (and,
  // transposed, by the contraction split it covers) and freed after them: never one 6.4 MB array.
  NDArray x = kt::random_array(DType::Float64, {2000, 400}, 533);
  NDArray y = kt::random_array(DType::Float64, {400, 3}, 534);
  NDArray z = kt::random_array(DType::Float64, {2000, 3}, 535);
  Array X = lazy(x, {200, 400}), Y = lazy(y), Z = lazy(z, {200, 3});
  Array A = exp(X / 100.0);
  auto want =
      kt::numpy({{"x", x}, {"y", y}, {"z", z}}, {"np.exp(x / 100) @ y", "np.exp(x / 100).T @ z"});
  for (int threads : {1, 2}) {
    for (Array prod : {matmul(A, Y), matmul(A.T(), Z)}) {
      std::ostringstream ir;
      ComputeOptions opt;
      opt.ir = &ir;
      opt.threads = threads;
      NDArray got = compute({prod}, opt)[0];
      int64_t peak = stats().last_peak_bytes;
      bool first = prod.shape()[0] == 2000;
      EXPECT_TRUE(same(got, want[first ? 0 : 1], 1e-12, 1e-12)) << threads;
      // (The transpose stays on the GEMM's operand, read with the transpose flag: exp is
      // computed in X's orientation both times.)
      EXPECT_NE(ir.str().find("Unary[exp] float64 (2000, 400): per block"), std::string::npos)
          << ir.str();
      if (!first) {
        EXPECT_NE(ir.str().find("read in place with the transpose flag"), std::string::npos);
      }
      EXPECT_LT(peak, 2000 * 400 * 8 / 2) << threads << " " << first;
      ComputeOptions unfused;
      unfused.fuse = false;
      unfused.threads = threads;
      // (Unfused, the contraction may be split elsewhere: the sums' order differs.)
      EXPECT_TRUE(same(compute({prod}, unfused)[0], got, 1e-13, 1e-13));
    }
  }
}

TEST(Linalg, ProductsConcatenatedByRowsAreWrittenInPlace) {
  // A product that only a concatenation reads, whole, as a contiguous run of its rows, is written
  // straight into it (no array of its own, no copy kernel): a @ b, c @ b and h @ b below. One
  // also read elsewhere (d @ b), a column piece (e @ b, g @ b) or one of another dtype (f @ b) is
  // not. Values equal NumPy's either way, with products of one block and of several blocks and
  // contraction splits (each writes its rows).
  std::map<std::string, NDArray> in;
  uint64_t seed = 521;
  for (const char* name : {"a", "c", "d", "e", "g", "h"})
    in[name] = kt::random_array(DType::Float64, {10 + static_cast<int64_t>(seed % 7), 8}, seed++);
  in["b"] = kt::random_array(DType::Float64, {8, 6}, seed++);
  in["f"] = kt::random_array(DType::Float32, {5, 8}, seed++);
  auto want =
      kt::numpy({in.begin(), in.end()}, {"np.concatenate([a @ b, c @ b, d @ b])", "(d @ b).sum()",
                                         "np.concatenate([(e @ b).T, (g @ b).T], axis=1)",
                                         "np.concatenate([h @ b, f @ b.astype(np.float32)])"});
  for (Shape chunks : {Shape{30, 8}, Shape{4, 3}}) {
    auto x = [&](const char* name) { return lazy(in[name], chunks); };
    Array b = lazy(in["b"], {3, 6}), db = matmul(x("d"), b);
    std::ostringstream ir;
    ComputeOptions opt;
    opt.ir = &ir;
    auto got = compute(
        {concatenate({matmul(x("a"), b), matmul(x("c"), b), db}, 0), db.sum(),
         concatenate({matmul(x("e"), b).T(), matmul(x("g"), b).T()}, 1),
         concatenate({matmul(x("h"), b), matmul(lazy(in["f"]), b.astype(DType::Float32))}, 0)},
        opt);
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(same(got[k], want[k], 1e-5, 1e-12)) << k << " " << shape_str(chunks);
    std::string s = ir.str();
    size_t placed = 0;
    for (size_t at = s.find("result written in place"); at != std::string::npos;
         at = s.find("result written in place", at + 1))
      ++placed;
    EXPECT_EQ(placed, 3u) << s;
  }
}

TEST(Linalg, EmptyProductsAreZeros) {
  Array a = zeros({0, 3}), b = ones({3, 4}), c = ones({2, 0}), d = ones({0, 5});
  auto got = compute({matmul(a, b), matmul(c, d), matmul(ones({0}), ones({0}))});
  EXPECT_EQ(got[0].shape(), (Shape{0, 4}));
  EXPECT_TRUE(same(got[1], kt::make_array(DType::Float64, {2, 5}, std::vector<double>(10, 0.0))));
  EXPECT_EQ(got[2].item<double>(), 0.0);
}

TEST(Linalg, PlansAreCachedAcrossNewData) {
  NDArray x = kt::random_array(DType::Float64, {64, 16}, 527);
  std::vector<double> beta(16, 0.5), beta2(16, -0.25);
  auto run = [&](const std::vector<double>& bv) {
    return matmul(lazy(x, {16, 16}), from_buffer(bv.data(), {16})).compute();
  };
  run(beta);
  Stats before = stats();
  NDArray got = run(beta2);
  EXPECT_TRUE(stats().last_cached);
  EXPECT_EQ(stats().kernels_compiled, before.kernels_compiled);
  NDArray b2 = kt::make_array(DType::Float64, {16}, beta2);
  EXPECT_TRUE(same(got, kt::numpy({{"x", x}, {"b", b2}}, {"x @ b"})[0], 1e-13, 1e-13));
}

TEST(Linalg, BadInputIsAClearError) {
  Array a = ones({3, 4}), b = ones({5, 2});
  EXPECT_NE(kt::error_of([&] { matmul(a, b); }).find("matmul: the contracted dimensions differ"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { matmul(scalar(1.0), b); }).find("0-dimensional"), std::string::npos);
  EXPECT_NE(kt::error_of([&] {
              matmul(ones({2, 3, 4}), ones({3, 4, 2}));
            }).find("matmul"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { vdot(a, b); }).find("vdot: the operands have different sizes"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { tensordot(a, b, {1}, {0}); }).find("tensordot: shape mismatch"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { tensordot(a, b, 3); }).find("tensordot: cannot contract 3 axes"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] {
              einsum("ii->i", {ones({3, 3})});
            }).find("repeats within operand"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] {
              einsum("ij,jk->ik", {a, b});
            }).find("subscript 'j' has size 4 and 5"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { einsum("ij->k", {a}); }).find("output subscript 'k'"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { einsum("ij,jk->ik", {a}); }).find("name 2 operands"),
            std::string::npos);
  EXPECT_NE(kt::error_of([&] { einsum("...i,i", {a, b}); }).find("ellipses"), std::string::npos);
  EXPECT_NE(kt::error_of([&] { matmul(Array(), b); }).find("empty"), std::string::npos);
}
