#include "ir/linalg.hpp"

#include <algorithm>

namespace kiln {

const char* linalg_name(LinalgFn f) {
  switch (f) {
#define KILN_LINALG(name, np, routines) \
  case LinalgFn::name:                  \
    return np;
#include "ir/linalg.def"
#undef KILN_LINALG
  }
  return "?";
}

const char* linalg_routines(LinalgFn f) {
  switch (f) {
#define KILN_LINALG(name, np, routines) \
  case LinalgFn::name:                  \
    return routines;
#include "ir/linalg.def"
#undef KILN_LINALG
  }
  return "?";
}

std::vector<LinalgPart> linalg_parts(LinalgFn f, int64_t m, int64_t n, int64_t r) {
  const int64_t k = std::min(m, n);
  std::vector<Shape> shapes;
  switch (f) {
    case LinalgFn::Qr:
      shapes = {{m, k}, {k, n}};
      break;
    case LinalgFn::Svd:
      shapes = {{m, k}, {k}, {k, n}};
      break;
    case LinalgFn::Cholesky:
    case LinalgFn::Inv:
      shapes = {{n, n}};
      break;
    case LinalgFn::Solve:
      shapes = {{n, r}};
      break;
    case LinalgFn::Det:
      shapes = {{}};
      break;
    case LinalgFn::Slogdet:
      shapes = {{}, {}};
      break;
    case LinalgFn::Eigh:
      shapes = {{n}, {n, n}};
      break;
    case LinalgFn::Lstsq:
      shapes = {{n, r}, {m > n ? r : 0}, {}, {k}};
      break;
    case LinalgFn::TsqrR:
      shapes = {{n, n}, {n}};
      break;
    case LinalgFn::TsqrMix:
      shapes = {{n, r}, {r}};
      break;
    case LinalgFn::TsqrApply:
      shapes = {{m, r}};
      break;
  }
  std::vector<LinalgPart> parts;
  int64_t at = 0;
  for (auto& s : shapes) {
    parts.push_back({at, s});
    at += num_elements(s);
  }
  return parts;
}

int64_t linalg_packed_size(LinalgFn f, int64_t m, int64_t n, int64_t r) {
  int64_t total = 0;
  for (const auto& p : linalg_parts(f, m, n, r)) total += num_elements(p.shape);
  return total;
}

}  // namespace kiln
