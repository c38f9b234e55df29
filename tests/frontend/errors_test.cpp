// Bad input: every user mistake throws kiln::Error when the expression is built, naming the
// operation, the operands and what was expected. The rest of the catalogue: errors raised while
// computing (Power.IntegersToNegativeIntegerPowersAreErrors in bitwise_test.cpp, an allocation
// failing inside a task in runtime/execute_test.cpp), the .npy reader (support/npy_test.cpp),
// and the command line: `kiln run` options out of range, refused options, failed writes
// (Cli.RunRejectsNumbersOutOfRange, Cli.SolverWorkloadsRefuseDotAndTrace,
// Cli.WriteFailuresAreReported) and malformed traces given to `kiln report`
// (Cli.Report* in tools/cli_test.cpp); a KILN_TARGET_CPU that is unknown or needs features the
// host lacks (Target.UnknownCpusAndCpusWithFeaturesTheHostLacksAreRefused, tools/target_test.cpp);
// linear algebra (Linalg.BadInputIsAClearError: mismatched contracted dimensions, 0-d operands,
// tensordot/einsum/vdot shapes; Decompose.BadInputIsAClearError: non-square and non-2-D input,
// right-hand sides of the wrong length, and at compute time a singular matrix in solve/inv, a
// matrix that is not positive definite in cholesky, NaN in a factorization's input, with
// LAPACK's info; both in frontend/), and --cols given to a workload that is N x N
// (Cli.ColsIsForMatrixWorkloads).
#include "oracle.hpp"
#include "support/flags.hpp"

using namespace kiln;

namespace {
// Runs f, expects a kiln::Error of this kind whose message contains every fragment (Type: a dtype
// the operation does not take, where NumPy raises TypeError; Python sees kiln.KilnTypeError).
template <class F>
void expect_error(F&& f, const std::vector<std::string>& fragments,
                  ErrorKind kind = ErrorKind::Value) {
  try {
    f();
    ADD_FAILURE() << "no kiln::Error thrown; expected one mentioning " << fragments[0];
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << "message: " << m;
    for (const auto& frag : fragments)
      EXPECT_NE(m.find(frag), std::string::npos) << "message: " << m << "\nmissing: " << frag;
  }
}
}  // namespace

TEST(Errors, ShapeMismatchInBroadcasting) {
  Array a = zeros({3, 4}), b = zeros({5});
  expect_error([&] { a + b; }, {"add", "(3, 4)", "(5,)", "broadcast"});
  expect_error([&] { where(a > 0, a, zeros({2, 4})); }, {"where", "(2, 4)"});
}

TEST(Errors, AxisOutOfRangeAndDuplicate) {
  Array a = zeros({3, 4});
  expect_error([&] { a.sum({2}); }, {"sum", "axis 2", "rank 2"});
  expect_error([&] { a.max({-3}); }, {"max", "axis -3"});
  expect_error([&] { a.mean({1, -1}); }, {"mean", "duplicate"});
  expect_error([&] { a.transpose({0, 0}); }, {"transpose", "repeated"});
}

TEST(Errors, SlicesAndIndices) {
  Array a = zeros({3, 4});
  expect_error([&] { a.slice({{0, {}, 0}}); }, {"slice", "step", "zero"});
  expect_error([&] { a[3]; }, {"index 3", "axis 0", "size 3"});
  expect_error([&] { a.slice({Slice::all(), Slice::index(-5)}); }, {"index -5", "axis 1"});
  expect_error(
      [&] {
        a.slice({Slice::all(), Slice::all(), Slice::all()});
      },
      {"too many indices", "(3, 4)"});
}

TEST(Errors, ReshapeConcatStack) {
  Array a = zeros({3, 4});
  expect_error([&] { a.reshape({5, 3}); }, {"reshape", "size 12", "(5, 3)"});
  expect_error([&] { a.reshape({-1, -1}); }, {"reshape", "one unknown"});
  expect_error([&] { concatenate({a, zeros({3, 5})}); }, {"concatenate", "(3, 5)", "axis 0"});
  expect_error([&] { concatenate({a, zeros({4})}); }, {"concatenate", "rank"});
  expect_error([&] { stack({a, zeros({4, 3})}); }, {"stack", "same shape"});
  expect_error([&] { a.broadcast_to({4}); }, {"broadcast_to", "(3, 4)"});
}

TEST(Errors, ChunksAndShapes) {
  expect_error([&] { zeros({10, 10}, {5}); }, {"chunks", "rank 2"});
  expect_error([&] { zeros({10, 10}, {5, -1}); }, {"chunk sizes must be positive"});
  expect_error([&] { zeros({-1, 3}); }, {"negative dimension"});
  expect_error([&] { zeros({4}).rechunk({1, 1}); }, {"rechunk", "rank 1"});
}

TEST(Errors, DtypesAndGenerators) {
  Array b = zeros({3}, {}, DType::Bool);
  expect_error([&] { -b; }, {"negative", "bool"}, ErrorKind::Type);
  expect_error([&] { b - b; }, {"subtract", "bool"}, ErrorKind::Type);
  expect_error([&] { random::Generator(0).integers(5, 5, {3}); }, {"integers", "low < high"});
  expect_error([&] { random::Generator(0).integers(0, int64_t{1} << 40, {3}, {}, DType::Int32); },
               {"integers", "1099511627776", "int32"});
  expect_error([&] { random::Generator(0).uniform(-1e308, 1e308, {3}); },
               {"uniform", "high - low", "finite"});
  expect_error([&] { random::Generator(0).normal(0, -1, {3}); }, {"normal", "std"});
  expect_error([&] { random::Generator(0).uniform(0, 1, {3}, {}, DType::Int32); },
               {"uniform", "float32 or float64"}, ErrorKind::Type);
  expect_error([&] { arange(0, 10, 0); }, {"arange", "step"});
  expect_error([&] { zeros({0}).min(); }, {"min", "zero-size"});
}

TEST(Errors, NumPy2IntegerRules) {
  Array i32 = ones({3}, {}, DType::Int32), f = ones({3});
  expect_error([&] { i32 + (int64_t{1} << 40); }, {"add", "1099511627776", "int32"});
  expect_error([&] { pow(i32, -2); }, {"power", "negative integer powers", "-2"});
  expect_error([&] { f& i32; }, {"bitwise_and", "float64", "int32"}, ErrorKind::Type);
  expect_error([&] { ~f; }, {"invert", "float64"}, ErrorKind::Type);
  Array b = ones({2}, {}, DType::Bool);
  expect_error([&] { b << b; }, {"left_shift", "bool", "int8"}, ErrorKind::Type);
  expect_error([&] { b % b; }, {"remainder", "bool", "int8"}, ErrorKind::Type);
  expect_error([&] { pow(b, b); }, {"power", "bool", "int8"}, ErrorKind::Type);
  expect_error([&] { sign(b); }, {"sign", "bool"}, ErrorKind::Type);
  EXPECT_EQ((b << 1).dtype(), DType::Int64);  // a Python int promotes bool (NEP 50)
}

TEST(Errors, NumPy2RoundingKeepsIntegerDtypes) {
  // NumPy 2: floor/ceil of integers and bools keep their dtype (NumPy 1.x gave float64).
  NDArray i = kt::make_array(DType::Int32, {4}, {-2147483648.0, -3, 0, 2147483647.0});
  NDArray b = kt::make_array(DType::Bool, {2}, {1, 0});
  auto want = kt::numpy({{"i", i}, {"b", b}},
                        {"np.floor(i)", "np.ceil(i)", "np.round(i)", "np.floor(b)", "np.ceil(b)"});
  auto got = compute({floor(kt::lazy(i, {3})), ceil(kt::lazy(i, {3})), round(kt::lazy(i, {3})),
                      floor(kt::lazy(b)), ceil(kt::lazy(b))});
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(kt::same(got[k], want[k])) << k;
  // round(bool): NumPy's float16, Kiln's float64.
  EXPECT_EQ(round(kt::lazy(b)).dtype(), DType::Float64);
}

TEST(Errors, FilesAndResults) {
  expect_error([&] { load_npy("/nonexistent/x.npy"); }, {"load_npy", "/nonexistent/x.npy"});
  expect_error([&] { zeros({2}).compute().item<double>(); }, {"item", "size 1"});
  expect_error([&] { compute({Array()}); }, {"compute", "empty"});
  expect_error([&] { zeros({2}).compute().data_as<int32_t>(); }, {"float64"}, ErrorKind::Type);
}

TEST(Errors, OverflowingSizesAndTooManyBlocks) {
  int64_t big = int64_t{1} << 40;
  expect_error([&] { zeros({big, big}); }, {"zeros", "more elements"});
  expect_error(
      [&] {
        random::Generator(0).normal(0, 1, {1000000, 1000000}, {10, 10});
      },
      {"random", "blocks", "larger chunks"});
  expect_error([&] { zeros(Shape(33, 1)); }, {"rank 33", "at most 32"});
}

TEST(Errors, AFailedComputeLeavesKilnUsable) {
  // A kernel that cannot be compiled (compiling is forbidden here) is reported to the caller...
  // (on the CPU backend, the one that compiles, whatever KILN_DEVICE says)
  Array x = random::Generator(77).uniform(0, 1, {10, 10}, {5, 5});
  Array y = (tanh(x) * 3.25 - 0.125).max();
  ComputeOptions cpu;
  cpu.device = Device::Cpu;
  std::string cache = flags().cache_dir;
  flags().cache_dir = "";  // no object from an earlier run on disk
  flags().no_compile = true;
  expect_error([&] { compute({y}, cpu); }, {"KILN_NO_COMPILE"});
  flags().no_compile = false;
  flags().cache_dir = cache;
  // ...and the same expression computes once compiling is allowed again.
  double v = compute({y}, cpu)[0].item<double>();
  EXPECT_GT(v, -0.125);
  EXPECT_LT(v, 3.25);
}
