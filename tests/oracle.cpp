#include "oracle.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/npy.hpp"

namespace kt {

const std::string& tmpdir() {
  static std::string dir = [] {
    std::string d = std::filesystem::temp_directory_path().string() + "/kiln-test-" +
                    std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

static NDArray load(const std::string& path) {
  kiln::MappedNpy m = kiln::map_npy(path);
  DType t = kiln::dtype_from_npy_descr(m.info.descr, path);
  NDArray a(t, m.info.shape);
  if (m.nbytes) std::memcpy(a.data(), m.data, m.nbytes);
  return a;
}

std::vector<NDArray> numpy(const std::vector<std::pair<std::string, NDArray>>& inputs,
                           const std::vector<std::string>& exprs) {
  static int counter = 0;
  std::string dir = tmpdir() + "/np" + std::to_string(counter++);
  std::filesystem::create_directories(dir);
  std::ostringstream py;
  py << "import numpy as np, warnings\nwarnings.simplefilter('ignore')\n";
  for (const auto& [name, arr] : inputs) {
    arr.save_npy(dir + "/in_" + name + ".npy");
    py << name << " = np.load('" << dir << "/in_" << name << ".npy')\n";
  }
  for (size_t k = 0; k < exprs.size(); ++k)
    py << "np.save('" << dir << "/out" << k << ".npy', np.asarray(" << exprs[k]
       << ").copy(order='C'))\n";
  std::ofstream(dir + "/script.py") << py.str();
  std::string cmd = "/usr/bin/python3 " + dir + "/script.py";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "python failed:\n" << py.str();
  std::vector<NDArray> out;
  for (size_t k = 0; k < exprs.size(); ++k)
    out.push_back(rc == 0 ? load(dir + "/out" + std::to_string(k) + ".npy") : NDArray());
  std::filesystem::remove_all(dir);
  return out;
}

NDArray random_array(DType t, const Shape& shape, uint32_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> values(static_cast<size_t>(kiln::num_elements(shape)));
  for (double& v : values) {
    v = u(gen);
    if (t == DType::Bool) v = v > (lo + hi) / 2;
    if (kiln::is_int(t)) v = std::floor(v);
  }
  return make_array(t, shape, values);
}

NDArray make_array(DType t, const Shape& shape, const std::vector<double>& values) {
  NDArray a(t, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.size());
  for (int64_t k = 0; k < a.size() && k < static_cast<int64_t>(values.size()); ++k) {
    double v = values[k];
    switch (t) {
      case DType::Bool:
        static_cast<uint8_t*>(a.data())[k] = v != 0;
        break;
      case DType::Int32:
        static_cast<int32_t*>(a.data())[k] = static_cast<int32_t>(v);
        break;
      case DType::Int64:
        static_cast<int64_t*>(a.data())[k] = static_cast<int64_t>(v);
        break;
      case DType::Float32:
        static_cast<float*>(a.data())[k] = static_cast<float>(v);
        break;
      case DType::Float64:
        static_cast<double*>(a.data())[k] = v;
        break;
    }
  }
  return a;
}

::testing::AssertionResult same(const NDArray& got, const NDArray& want, double rtol, double atol) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << kiln::dtype_name(got.dtype())
                                         << " != expected " << kiln::dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << kiln::shape_str(got.shape())
                                         << " != expected " << kiln::shape_str(want.shape());
  int64_t bad = 0, first = -1;
  bool exact = rtol == 0 && atol == 0;
  for (int64_t k = 0; k < got.size(); ++k) {
    bool ok;
    if (kiln::is_float(got.dtype())) {
      double g = got.at(k), w = want.at(k);
      if (std::isnan(g) || std::isnan(w))
        ok = std::isnan(g) && std::isnan(w);
      else if (exact)
        ok = g == w && std::signbit(g) == std::signbit(w);  // -0.0 is not +0.0
      else
        ok = g == w || std::fabs(g - w) <= atol + rtol * std::fabs(w);
    } else {
      ok = got.at_int(k) == want.at_int(k);
    }
    if (!ok && bad++ == 0) first = k;
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << got.size() << " elements differ; first at flat index " << first
           << ": got " << got.at(first) << ", expected " << want.at(first);
  return ::testing::AssertionSuccess();
}

kiln::Array lazy(const NDArray& a, const Shape& chunks) {
  return kiln::from_buffer(a.data(), a.dtype(), a.shape(), chunks);
}

}  // namespace kt
