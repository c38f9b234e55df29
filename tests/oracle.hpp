// Test helpers: NumPy (Debian's /usr/bin/python3) as the oracle, data exchanged as .npy files.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"

namespace kt {

using kiln::DType;
using kiln::NDArray;
using kiln::Shape;

// A fresh temporary directory for this test process.
const std::string& tmpdir();

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

// Wraps an NDArray as a lazy array (zero-copy) with the given block shape.
kiln::Array lazy(const NDArray& a, const Shape& chunks = {});

}  // namespace kt
