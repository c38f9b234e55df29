#include "tools/workloads.hpp"

namespace kiln::workloads {

const std::vector<Workload>& all() {
  static const std::vector<Workload> w = {
      {"random-sum",
       "001 (GPU Dask arrays)",
       "x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()",
       20000,
       2000,
       [](int64_t n, int64_t c) {
         random::Generator rng(0);
         Array x = rng.normal(10, 1, {n, n}, {c, c});
         return std::vector<Array>{(x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum()};
       },
       {"sum"}},
      {"trig-identity",
       "004 (GPU PyData roadblocks)",
       "x = uniform(0, 1, (N, N)); (sin(x)**2 + cos(x)**2 == 1).all(), and its count of trues",
       10000,
       2000,
       [](int64_t n, int64_t c) {
         random::Generator rng(0);
         Array x = rng.uniform(0, 1, {n, n}, {c, c});
         Array y = pow(sin(x), 2) + pow(cos(x), 2) == 1;
         return std::vector<Array>{y.all(), y.sum()};
       },
       {"all", "count"}},
      {"diamond",
       "002 (Dask-GLM overhead, aggressive fusion)",
       "x = uniform(1, 2, (N, N)); (exp(x) - 1/x).sum()",
       10000,
       2000,
       [](int64_t n, int64_t c) {
         random::Generator rng(0);
         Array x = rng.uniform(1, 2, {n, n}, {c, c});
         return std::vector<Array>{(exp(x) - 1 / x).sum()};
       },
       {"sum"}},
  };
  return w;
}

const Workload& find(const std::string& name) {
  std::string known;
  for (const auto& w : all()) {
    if (w.name == name) return w;
    known += (known.empty() ? "" : ", ") + w.name;
  }
  throw Error("kiln run: unknown workload '" + name + "' (known: " + known + ")");
}

}  // namespace kiln::workloads
