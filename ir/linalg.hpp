// LAPACK library nodes (Op::Linalg): which factorization, and the layout of its packed result.
// A Linalg node's value is one flat array holding every part of the result (Q then R, U then S
// then Vh, ...), each row-major; the frontend returns views of its parts, so the parts of one
// call share one node and compute(u, s, v) factorizes once.
#pragma once
#include <string>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/functions.hpp"

namespace kiln {

enum class LinalgFn : uint8_t {
#define KILN_LINALG(name, np, routines) name,
#include "ir/linalg.def"
#undef KILN_LINALG
};

const char* linalg_name(LinalgFn f);      // NumPy's name: "qr", "svd", ...
const char* linalg_routines(LinalgFn f);  // LAPACK's: "geqrf+orgqr", ...

struct LinalgPart {
  int64_t offset = 0;  // in elements, into the packed result
  Shape shape;
};

// The parts of f's result for a of shape (m, n) and b of shape (m, r) (r = 0 without b): offsets
// in order, each part contiguous. Their total is the packed size.
std::vector<LinalgPart> linalg_parts(LinalgFn f, int64_t m, int64_t n, int64_t r);
int64_t linalg_packed_size(LinalgFn f, int64_t m, int64_t n, int64_t r);

}  // namespace kiln
