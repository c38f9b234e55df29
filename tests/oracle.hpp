// Test helpers: NumPy (the version pinned in tests/requirements.txt) as the oracle, data exchanged
// as .npy files.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ir/node.hpp"  // tests look inside the graph too
#include "kiln/kiln.hpp"

namespace kt {

using kiln::DType;
using kiln::NDArray;
using kiln::Shape;

// A fresh temporary directory for this test process.
const std::string& tmpdir();

// The programs the tests run, so that a copied or installed build can run its tests: each is the
// environment variable if set, else the path CMake compiled in.
//   python():     KILN_PYTHON, else the oracle venv scripts/install-deps.sh makes (.venv/oracle)
//   kiln_cli():   KILN_BIN, else the build's `kiln`
//   kiln_bench(): KILN_BENCH_BIN, else the build's `kiln_bench` ("" when it was not built)
//   source_dir(): KILN_SOURCE_DIR, else the checkout the tests were built from
std::string python();
std::string kiln_cli();
std::string kiln_bench();
std::string source_dir();

// Evaluates NumPy expressions over named inputs (visible as variables, with `np`), returning
// each result as an NDArray. Fails the test if Python fails.
std::vector<NDArray> numpy(const std::vector<std::pair<std::string, NDArray>>& inputs,
                           const std::vector<std::string>& exprs);

// Deterministic test data.
NDArray random_array(DType t, const Shape& shape, uint32_t seed, double lo = -3, double hi = 3);
NDArray make_array(DType t, const Shape& shape, const std::vector<double>& values);

// Shape, dtype and values equal: NaN matches NaN only; with rtol = atol = 0 floats must be equal
// with the same sign (-0.0 is not 0.0), otherwise within atol + rtol * |want|.
::testing::AssertionResult same(const NDArray& got, const NDArray& want, double rtol = 0,
                                double atol = 0);

// Float results within `ulps` units in the last place of the expected values (NaN matches NaN,
// infinities must be equal): for functions whose implementations differ by a few ulp between
// libraries and ISAs (libmvec, glibc, NumPy's own SIMD code). Other dtypes: as same().
::testing::AssertionResult same_ulps(const NDArray& got, const NDArray& want, double ulps);

// The message of the kiln::Error that f() throws, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "no error";
}

// Wraps an NDArray as a lazy array (zero-copy) with the given block shape.
kiln::Array lazy(const NDArray& a, const Shape& chunks = {});

}  // namespace kt
