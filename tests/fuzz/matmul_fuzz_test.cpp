// Differential fuzzing of matmul against NumPy: random shapes (empty, 1, vectors, stacks), random
// chunkings of each operand (uneven, single-element, contracted chunks that do not align),
// transposed operands (read in place with BLAS's transpose flag), every dtype pair (float32,
// float64, int32, int64, bool: BLAS, fused reductions and the exact integer paths), operands
// computed per block (a * 2, streamed into the calls), products that a row concatenation takes
// whole (written in place into it: fuse's placement). Each case is
// also computed unfused and with 2 threads, which must give the same bytes (a plan's sums are
// fixed whatever runs them).
//
// Fixed slice (ctest): 120 cases of seed 1. A campaign:
//   KILN_FUZZ_SEED=7 KILN_FUZZ_COUNT=5000 build/release/kiln_tests --gtest_filter='FuzzMatmul.*'
// Integer and bool results must equal NumPy's exactly; float results lie within
// 4 k eps (|a| @ |b|) of NumPy's, the classic bound for a length-k dot product in either order.
#include <cstring>
#include <random>
#include <sstream>

#include "oracle.hpp"

using namespace kiln;

namespace {

struct Case {
  std::string text;  // for failure messages
  NDArray a, b;
  Shape ca, cb;
  bool transpose_b = false;  // b is given as its transpose's transpose
  bool computed_a = false;   // a float a is used as a * 2: computed per block, streamed
  bool computed_b = false;
  bool concat = false;  // a matrix product between rows of zeros: written into the concatenation
};

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}

Shape random_chunks(std::mt19937& rng, const Shape& shape) {
  Shape c;
  for (int64_t d : shape)
    c.push_back(std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(d, 1))(rng));
  return c;
}

Case make_case(std::mt19937& rng, int index) {
  const DType types[] = {DType::Float64, DType::Float32, DType::Int64, DType::Int32, DType::Bool};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto dim = [&] {
    int r = pick(10);
    return r == 0  ? int64_t{0}
           : r < 3 ? int64_t{1}
                   : std::uniform_int_distribution<int64_t>(2, 40)(rng);
  };
  // Mostly floats of one type; sometimes a mixed pair.
  DType ta = pick(3) ? types[pick(2)] : types[pick(5)];
  DType tb = pick(3) ? ta : types[pick(5)];
  int64_t m = dim(), k = dim(), n = dim();
  int shape_kind = pick(8);  // 0: a 1-D, 1: b 1-D, 2: both 1-D, 3: a stack, else matrices
  Shape sa = {m, k}, sb = {k, n};
  if (shape_kind == 0) sa = {k};
  if (shape_kind == 1) sb = {k};
  if (shape_kind == 2) sa = {k}, sb = {k};
  if (shape_kind == 3) sa = {2, m, k};
  Case c;
  c.transpose_b = sb.size() == 2 && pick(3) == 0;
  Shape stored_b = c.transpose_b ? Shape{sb[1], sb[0]} : sb;
  c.computed_a = is_float(ta) && pick(3) == 0;
  c.computed_b = is_float(tb) && pick(3) == 0;
  c.concat = shape_kind >= 4 && pick(3) == 0;
  c.a = kt::random_array(ta, sa, 1000 + index * 2, -2, 2);
  c.b = kt::random_array(tb, stored_b, 1001 + index * 2, -2, 2);
  c.ca = random_chunks(rng, sa);
  c.cb = random_chunks(rng, stored_b);
  std::ostringstream os;
  os << "case " << index << ": a " << dtype_name(ta) << shape_str(sa) << " chunks "
     << shape_str(c.ca) << ", b " << dtype_name(tb) << shape_str(stored_b)
     << (c.transpose_b ? ".T" : "") << " chunks " << shape_str(c.cb)
     << (c.computed_a ? ", a computed" : "") << (c.computed_b ? ", b computed" : "")
     << (c.concat ? ", between rows of zeros" : "");
  c.text = os.str();
  return c;
}

}  // namespace

TEST(FuzzMatmul, ShapesChunkingsAndDtypesMatchNumPy) {
  const int64_t seed = env_int("KILN_FUZZ_SEED", 1), count = env_int("KILN_FUZZ_COUNT", 120);
  std::mt19937 rng(static_cast<uint32_t>(seed) * 7919u + 17u);
  constexpr int64_t kBatch = 40;  // cases per NumPy run
  int64_t failures = 0;
  for (int64_t first = 0; first < count; first += kBatch) {
    std::vector<Case> cases;
    std::vector<std::pair<std::string, NDArray>> inputs;
    std::vector<std::string> exprs;
    std::vector<Array> got;
    for (int64_t q = first; q < std::min(count, first + kBatch); ++q) {
      cases.push_back(make_case(rng, static_cast<int>(q)));
      const Case& c = cases.back();
      std::string a = "a" + std::to_string(q), b = "b" + std::to_string(q);
      std::string aa = c.computed_a ? "(" + a + " * 2)" : a;
      std::string bb = (c.computed_b ? "(" + b + " * 2)" : b) + (c.transpose_b ? ".T" : "");
      inputs.push_back({a, c.a});
      inputs.push_back({b, c.b});
      auto framed = [&](const std::string& x) {  // between a row of zeros and two more
        return c.concat ? "(lambda p: np.concatenate([np.zeros((1, p.shape[1]), p.dtype), p, "
                          "np.zeros((2, p.shape[1]), p.dtype)]))(" +
                              x + ")"
                        : x;
      };
      exprs.push_back(framed(aa + " @ " + bb));
      exprs.push_back(framed("np.asarray(np.abs(" + aa + ".astype(np.float64)) @ np.abs(" + bb +
                             ".astype(np.float64)))"));
      Array A = kt::lazy(c.a, c.ca), B = kt::lazy(c.b, c.cb);
      if (c.computed_a) A = A * 2.0;
      if (c.computed_b) B = B * 2.0;
      Array P = matmul(A, c.transpose_b ? B.T() : B);
      if (c.concat) {
        const int64_t n = P.shape()[1];
        P = concatenate({zeros({1, n}, {}, P.dtype()), P, zeros({2, n}, {}, P.dtype())}, 0);
      }
      got.push_back(P);
    }
    std::vector<NDArray> want = kt::numpy(inputs, exprs);
    std::vector<NDArray> res = compute(got);
    ComputeOptions unfused;
    unfused.fuse = false;
    ComputeOptions two;
    two.threads = 2;
    std::vector<NDArray> res_unfused = compute(got, unfused), res_two = compute(got, two);
    for (size_t q = 0; q < cases.size(); ++q) {
      const NDArray &r = res[q], &w = want[2 * q], &bound = want[2 * q + 1];
      const Case& c = cases[q];
      bool ok = r.dtype() == w.dtype() && r.shape() == w.shape();
      EXPECT_TRUE(ok) << c.text << ": dtype " << dtype_name(r.dtype()) << " shape "
                      << shape_str(r.shape()) << ", NumPy " << dtype_name(w.dtype()) << " "
                      << shape_str(w.shape());
      if (!ok) {
        ++failures;
        continue;
      }
      EXPECT_EQ(std::memcmp(r.data(), res_two[q].data(), r.nbytes()), 0) << c.text << ": threads";
      if (is_float(r.dtype())) {
        const int64_t k = c.a.shape().back();
        const double eps = r.dtype() == DType::Float32 ? 0x1p-24 : 0x1p-53;
        for (int64_t e = 0; e < r.size(); ++e) {
          double tol = 4.0 * static_cast<double>(k + 1) * eps * bound.at(e) + 1e-300;
          if (std::abs(r.at(e) - w.at(e)) > tol) {
            ADD_FAILURE() << c.text << ": element " << e << " is " << r.at(e) << ", NumPy "
                          << w.at(e) << " (bound " << tol << ")";
            ++failures;
            break;
          }
          // Unfused, the same plan's library calls: equal within the same bound.
          if (std::abs(res_unfused[q].at(e) - w.at(e)) > tol) {
            ADD_FAILURE() << c.text << ": unfused element " << e;
            ++failures;
            break;
          }
        }
      } else {
        bool same = kt::same(r, w) && kt::same(res_unfused[q], w);
        EXPECT_TRUE(same) << c.text;
        failures += same ? 0 : 1;
      }
    }
  }
  std::printf("FuzzMatmul: seed %lld, %lld cases, %lld failing\n", static_cast<long long>(seed),
              static_cast<long long>(count), static_cast<long long>(failures));
}
