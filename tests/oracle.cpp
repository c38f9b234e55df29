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

static std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string python() { return env_or("KILN_PYTHON", KILN_TEST_PYTHON); }
std::string kiln_cli() { return env_or("KILN_BIN", KILN_CLI_PATH); }
std::string source_dir() { return env_or("KILN_SOURCE_DIR", KILN_SOURCE_DIR); }
std::string kiln_bench() {
#ifdef KILN_BENCH_PATH
  return env_or("KILN_BENCH_BIN", KILN_BENCH_PATH);
#else
  return env_or("KILN_BENCH_BIN", "");
#endif
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
  std::string cmd = python() + " " + dir + "/script.py";
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

// The distance in units in the last place between two finite doubles of the same dtype: the
// number of representable values of that dtype between them.
static double ulp_distance(double g, double w, DType t) {
  if (g == w) return 0;
  if (t == DType::Float32) {
    auto key = [](float f) {
      int32_t i;
      std::memcpy(&i, &f, sizeof i);
      return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
    };
    return std::fabs(static_cast<double>(key(static_cast<float>(g)) - key(static_cast<float>(w))));
  }
  auto key = [](double d) {
    int64_t i;
    std::memcpy(&i, &d, sizeof i);
    return i < 0 ? -static_cast<long double>(i & 0x7fffffffffffffff) : static_cast<long double>(i);
  };
  return static_cast<double>(std::fabs(key(g) - key(w)));
}

::testing::AssertionResult same_ulps(const NDArray& got, const NDArray& want, double ulps) {
  if (!kiln::is_float(got.dtype()) || got.dtype() != want.dtype() || got.shape() != want.shape())
    return same(got, want);
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t k = 0; k < got.size(); ++k) {
    double g = got.at(k), w = want.at(k);
    bool ok;
    if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w))
      ok = (std::isnan(g) && std::isnan(w)) || g == w;
    else
      ok = ulp_distance(g, w, got.dtype()) <= ulps;
    if (!ok) {
      if (bad++ == 0) first = k;
      if (std::isfinite(g) && std::isfinite(w))
        worst = std::max(worst, ulp_distance(g, w, got.dtype()));
    }
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << got.size() << " elements differ by more than " << ulps
           << " ulp (worst " << worst << "); first at flat index " << first << ": got "
           << got.at(first) << ", expected " << want.at(first);
  return ::testing::AssertionSuccess();
}

kiln::Array lazy(const NDArray& a, const Shape& chunks) {
  return kiln::from_buffer(a.data(), a.dtype(), a.shape(), chunks);
}

}  // namespace kt
