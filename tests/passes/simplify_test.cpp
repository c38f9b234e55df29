// simplify: identities must hold bit for bit for every value, signed zeros and NaN included.
#include <cmath>
#include <sstream>

#include "oracle.hpp"

using namespace kiln;

namespace {
// One float64 result of `f(x)` for x = [-0.0, +0.0, NaN, -inf, 2.5], fused and unfused (which must
// agree bit for bit).
NDArray eval(Array (*f)(const Array&)) {
  static double data[] = {-0.0, 0.0, NAN, -INFINITY, 2.5};
  Array x = from_buffer(data, DType::Float64, {5});
  ComputeOptions fused, unfused;
  unfused.fuse = false;
  NDArray a = compute({f(x)}, fused)[0];
  NDArray b = compute({f(x)}, unfused)[0];
  EXPECT_TRUE(kt::same(b, a));
  return a;
}
}  // namespace

TEST(Simplify, AddingPositiveZeroTurnsNegativeZeroPositive) {
  // NumPy: 1 / (-0.0 + 0.0) == +inf. Rewriting x + 0 to x gave -inf.
  NDArray r = eval([](const Array& x) { return 1.0 / (x + 0.0); });
  EXPECT_EQ(r.at(0), INFINITY);
  r = eval([](const Array& x) { return 1.0 / (0.0 + x); });
  EXPECT_EQ(r.at(0), INFINITY);
  r = eval([](const Array& x) { return x - (-0.0); });
  EXPECT_FALSE(std::signbit(r.at(0)));
}

TEST(Simplify, IdentitiesThatHoldKeepEveryBit) {
  for (auto f :
       {+[](const Array& x) { return x + (-0.0); }, +[](const Array& x) { return x - 0.0; },
        +[](const Array& x) { return x * 1.0; }, +[](const Array& x) { return 1.0 * x; },
        +[](const Array& x) { return x / 1.0; }, +[](const Array& x) { return pow(x, 1.0); },
        +[](const Array& x) { return -(-x); }}) {
    NDArray r = eval(f);
    EXPECT_TRUE(std::signbit(r.at(0)));
    EXPECT_FALSE(std::signbit(r.at(1)));
    EXPECT_TRUE(std::isnan(r.at(2)));
    EXPECT_EQ(r.at(3), -INFINITY);
    EXPECT_EQ(r.at(4), 2.5);
  }
}

TEST(Simplify, SignedZeroScalarsDoNotShareAPlan) {
  // A parameterized scalar keeps its value class: x + 0.0 and x + -0.0 are different plans, so the
  // second is not run with the first one's simplification (or the other way round).
  static double data[] = {-0.0};
  Array x = from_buffer(data, DType::Float64, {1});
  EXPECT_FALSE(std::signbit((x + 0.0).compute().at(0)));
  EXPECT_TRUE(std::signbit((x + -0.0).compute().at(0)));
  EXPECT_FALSE(std::signbit((x + 0.0).compute().at(0)));
}

TEST(Simplify, IntegerAdditionOfZeroIsStillRemoved) {
  std::ostringstream ir;
  static int64_t data[] = {-3, 7};
  Array x = from_buffer(data, DType::Int64, {2});
  ComputeOptions o;
  o.ir = &ir;
  NDArray r = compute({(x + 0) * 1}, o)[0];
  EXPECT_EQ(r.at_int(0), -3);
  EXPECT_EQ(r.at_int(1), 7);
  std::string text = ir.str();
  size_t from = text.find("; IR after simplify");
  std::string after = text.substr(from, text.find("fused graph", from) - from);
  EXPECT_EQ(after.find("Binary"), std::string::npos) << after;
}
