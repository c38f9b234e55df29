// Creation: constants, ranges, user memory, .npy files and random generators. Every creator
// makes a leaf whose elements are a pure function of their index, so slices and chunkings of it
// never need the rest of the array.
#include <cmath>

#include "codegen/library.hpp"
#include "frontend/build.hpp"
#include "support/npy.hpp"

namespace kiln {
using namespace detail;

namespace {
DType scalar_dtype(const Scalar& v) {
  switch (v.kind) {
    case ScalarKind::Bool:
      return DType::Bool;
    case ScalarKind::Int:
      return DType::Int64;
    case ScalarKind::Float:
      return DType::Float64;
  }
  return DType::Float64;
}

NodeRef iota(int64_t n, const Shape& chunks, const char* op) {
  Shape shape{n};
  return ctx().make(Op::Iota, DType::Int64, shape, make_chunks(op, shape, chunks), {},
                    contiguous_view(shape));
}
}  // namespace

Array scalar(Scalar v) { return Array(scalar_node("scalar", v, scalar_dtype(v))); }
Array scalar(Scalar v, DType dtype) { return Array(scalar_node("scalar", v, dtype)); }

namespace {
Array filled(const char* op, const Shape& shape, Scalar value, DType dtype, const Shape& chunks) {
  Chunks c = make_chunks(op, shape, chunks);
  return Array(broadcast_node(scalar_node(op, value, dtype), shape, c));
}
}  // namespace

Array full(const Shape& shape, Scalar value, DType dtype, const Shape& chunks) {
  return filled("full", shape, value, dtype, chunks);
}
Array full(const Shape& shape, Scalar value, const Shape& chunks) {
  return filled("full", shape, value, scalar_dtype(value), chunks);
}
Array zeros(const Shape& shape, const Shape& chunks, DType dtype) {
  return filled("zeros", shape, 0, dtype, chunks);
}
Array ones(const Shape& shape, const Shape& chunks, DType dtype) {
  return filled("ones", shape, 1, dtype, chunks);
}

Array arange(Scalar stop, const Shape& chunks) { return arange(0, stop, 1, chunks); }

Array arange(Scalar start, Scalar stop, Scalar step, const Shape& chunks) {
  bool ints = start.kind != ScalarKind::Float && stop.kind != ScalarKind::Float &&
              step.kind != ScalarKind::Float;
  if (step.f == 0) throw Error("arange: step must not be zero");
  if (!std::isfinite(start.f) || !std::isfinite(stop.f) || !std::isfinite(step.f))
    throw Error("arange: start, stop and step must be finite");
  double span = std::ceil((stop.f - start.f) / step.f);
  int64_t n;
  if (ints) {
    int64_t d = stop.i - start.i, s = step.i;
    n = d / s + ((d % s != 0) && ((d > 0) == (s > 0)) ? 1 : 0);
  } else {
    n = static_cast<int64_t>(span);
  }
  if (n < 0) n = 0;
  NodeRef i = iota(n, chunks, "arange");
  if (ints) return Array(i) * step.i + start.i;
  // NumPy fills start + k * (second - first), with the difference taken in floating point.
  double delta = (start.f + step.f) - start.f;
  return Array(i).astype(DType::Float64) * delta + start.f;
}

Array linspace(double start, double stop, int64_t num, bool endpoint, const Shape& chunks) {
  if (num < 0) throw Error("linspace: num must be non-negative, got " + std::to_string(num));
  int64_t div = endpoint ? num - 1 : num;
  Array k = Array(iota(num, chunks, "linspace")).astype(DType::Float64);
  if (div <= 0) return k * (stop - start) + start;
  Array y = k * ((stop - start) / static_cast<double>(div)) + start;
  if (endpoint && num > 1) y = where(k == static_cast<double>(num - 1), scalar(stop), y);
  return y;
}

Array from_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks) {
  return from_buffer(data, dtype, shape, chunks, nullptr);
}

Array from_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks,
                  std::shared_ptr<const void> owner) {
  auto elements = checked::product(shape);  // (make_chunks explains a shape that has none)
  if (elements && !checked::bytes(*elements, dtype_size(dtype)))  // no such buffer can exist
    throw Error("from_buffer: shape " + shape_str(shape) + " of " + dtype_name(dtype) + " is " +
                std::to_string(*elements) + " x " + std::to_string(dtype_size(dtype)) +
                " bytes, more than a 64-bit size can hold");
  Chunks c = make_chunks("from_buffer", shape, chunks);
  if (!data && num_elements(shape) > 0)
    throw Error("from_buffer: data is null for a non-empty shape " + shape_str(shape));
  Attrs a = contiguous_view(shape);
  a.ptr = data;
  a.owner = std::move(owner);
  return Array(ctx().make(Op::Buffer, dtype, shape, c, {}, std::move(a)));
}

Array from_device_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks,
                         MemoryPlace place, std::shared_ptr<const void> owner) {
  if (place.on_host())
    throw Error(std::string("from_device_buffer: ") + device_name(place.device) +
                " has no memory of its own (use from_buffer for host memory)");
  if (place.index < 0)
    throw Error("from_device_buffer: device index " + std::to_string(place.index) + " is negative");
  Array a = from_buffer(data, dtype, shape, chunks, std::move(owner));
  Attrs at = a.node()->attrs;
  at.place = place;
  return Array(ctx().make(Op::Buffer, dtype, shape, a.chunks(), {}, std::move(at)));
}

Array asarray(const NDArray& a, const Shape& chunks) {
  if (a.on_device())
    return from_device_buffer(a.data(), a.dtype(), a.shape(), chunks, a.place(), a.storage());
  return from_buffer(a.data(), a.dtype(), a.shape(), chunks, a.storage());
}

Array load_npy(const std::string& path, const Shape& chunks) {
  MappedNpy m = map_npy(path);
  DType t = dtype_from_npy_descr(m.info.descr, "load_npy('" + path + "')");
  Chunks c = make_chunks("load_npy('" + path + "')", m.info.shape, chunks);
  Attrs a = contiguous_view(m.info.shape);
  a.ptr = m.data;
  a.owner = m.owner;
  return Array(ctx().make(Op::Buffer, t, m.info.shape, c, {}, std::move(a)));
}

void save_npy(const std::string& path, const Array& a) { a.compute().save_npy(path); }

namespace random {

Generator::Generator(uint64_t seed, Engine engine) : seed_(seed), engine_(engine) {
  std::string why;
  if (engine == Engine::Curand && !library::curand_available(&why))
    throw Error("random.Generator: Engine::Curand needs NVIDIA cuRAND at run time: " + why +
                "; use Engine::Kiln (the default)");
}

Array Generator::make(RandomKind kind, const Shape& shape, const Shape& chunks, int64_t lo,
                      int64_t hi, DType dtype) {
  Chunks c = make_chunks("random", shape, chunks);
  Attrs a = contiguous_view(shape);
  a.ints = {static_cast<int64_t>(kind), next_stream_++, lo, hi, static_cast<int64_t>(engine_)};
  a.i = static_cast<int64_t>(seed_);
  return Array(ctx().make(Op::Random, dtype, shape, c, {}, std::move(a)));
}

Array Generator::uniform(double low, double high, const Shape& shape, const Shape& chunks,
                         DType dtype) {
  if (!is_float(dtype))
    throw Error(
        std::string("random.uniform: dtype must be float32 or float64, got ") + dtype_name(dtype),
        ErrorKind::Type);
  if (!std::isfinite(low) || !std::isfinite(high) || !std::isfinite(high - low))
    throw Error("random.uniform: low, high and high - low must be finite, got low " +
                std::to_string(low) + ", high " + std::to_string(high));
  Array u = make(RandomKind::Uniform, shape, chunks);
  // cuRAND's u in (0, 1] to [0, 1]: 1 - u rounds to 1 for the smallest u (below, the clamp).
  if (engine_ == Engine::Curand) u = 1.0 - u;
  if (dtype == DType::Float64 && low == 0 && high == 1 && engine_ == Engine::Kiln)
    return u;  // u < 1 exactly
  Array r = (low == 0 && high == 1 ? u : u * (high - low) + low).astype(dtype);
  if (!(low < high)) return r;
  // Rounding (of u * (high - low) + low, and to float32) can give `high` itself, which NumPy
  // allows; Kiln keeps [low, high): such elements become the largest value below high.
  float high32 = static_cast<float>(high);
  double below = dtype == DType::Float64 ? std::nextafter(high, -INFINITY)
                 : high32 < high         ? high32
                                         : std::nextafter(high32, -INFINITY);
  return minimum(r, below);
}

Array Generator::standard_normal(const Shape& shape, const Shape& chunks) {
  return make(RandomKind::Normal, shape, chunks);
}

Array Generator::normal(double mean, double std, const Shape& shape, const Shape& chunks) {
  if (!(std >= 0) || !std::isfinite(std) || !std::isfinite(mean))
    throw Error("random.normal: expected finite mean and std >= 0, got mean " +
                std::to_string(mean) + ", std " + std::to_string(std));
  return standard_normal(shape, chunks) * std + mean;
}

Array Generator::integers(int64_t low, int64_t high, const Shape& shape, const Shape& chunks,
                          DType dtype) {
  if (engine_ == Engine::Curand)
    throw Error(
        "random.integers: Engine::Curand makes normal and uniform floats only; use a "
        "Generator with Engine::Kiln for integers");
  if (high <= low)
    throw Error("random.integers: expected low < high, got low " + std::to_string(low) + ", high " +
                std::to_string(high));
  if (!is_int(dtype))
    throw Error(
        std::string("random.integers: dtype must be int32 or int64, got ") + dtype_name(dtype),
        ErrorKind::Type);
  if (dtype == DType::Int32 && (low < INT32_MIN || high - 1 > INT32_MAX))
    throw Error("random.integers: low " + std::to_string(low) + " and high " +
                std::to_string(high) + " must lie within int32's range for dtype int32");
  return make(RandomKind::Integers, shape, chunks, low, high, DType::Int64).astype(dtype);
}

}  // namespace random
}  // namespace kiln
