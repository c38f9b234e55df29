// The seed workloads, shared by the kiln command and the benchmarks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::workloads {

struct Workload {
  std::string name;
  std::string seed;         // which seed document it comes from
  std::string description;  // the expression, NumPy style
  int64_t size, chunk;      // defaults
  // Builds the lazy outputs for size N and chunk C; the first output is "the result".
  std::function<std::vector<Array>(int64_t n, int64_t c)> build;
  std::vector<std::string> output_names;
};

const std::vector<Workload>& all();
const Workload& find(const std::string& name);  // throws kiln::Error listing the known names

}  // namespace kiln::workloads
