#include <cstring>

#include "codegen/backend.hpp"
#include "ir/node.hpp"
#include "kiln/kiln.hpp"
#include "runtime/memory.hpp"
#include "support/npy.hpp"

namespace kiln {

DType Array::dtype() const { return node_->dtype; }
const Shape& Array::shape() const { return node_->shape; }
const Chunks& Array::chunks() const { return node_->chunks; }
int Array::ndim() const { return node_->rank(); }
int64_t Array::size() const { return node_->size(); }

NDArray::NDArray(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("NDArray: negative dimension in shape " + shape_str(shape_));
  size_t bytes = nbytes();
  storage_ = host_buffer(bytes);
  data_ = storage_.get();
  std::memset(data_, 0, bytes);
}

NDArray::NDArray(DType dtype, Shape shape, std::shared_ptr<void> storage, void* data,
                 MemoryPlace place)
    : dtype_(dtype),
      shape_(std::move(shape)),
      storage_(std::move(storage)),
      data_(data),
      place_(place) {}

void NDArray::check_host(const char* op) const {
  if (on_device())
    throw Error(std::string(op) + ": the array is in " + place_name(place_) +
                "'s memory; copy it to the host first (NDArray::to_host)");
}

NDArray NDArray::to_host() const {
  if (!on_device()) return *this;
  NDArray h(dtype_, shape_);
  if (size_t bytes = nbytes())
    backend::backend_for(place_.device).memory()->to_host(place_.index, h.data(), data_, bytes);
  return h;
}

void NDArray::check_type(size_t size, bool fp, bool boolean) const {
  bool ok =
      size == dtype_size(dtype_) && fp == is_float(dtype_) && boolean == (dtype_ == DType::Bool);
  if (!ok)
    throw Error(std::string("NDArray.data_as: the array's dtype is ") + dtype_name(dtype_) +
                    ", which does not match the requested element type",
                ErrorKind::Type);
}

namespace {
// Element `flat` of a C array of dtype t, converted to R.
template <class R>
R element_as(DType t, const void* data, int64_t flat) {
  switch (t) {
    case DType::Bool:
      return static_cast<R>(static_cast<const uint8_t*>(data)[flat]);
    case DType::Int32:
      return static_cast<R>(static_cast<const int32_t*>(data)[flat]);
    case DType::Int64:
      return static_cast<R>(static_cast<const int64_t*>(data)[flat]);
    case DType::Float32:
      return static_cast<R>(static_cast<const float*>(data)[flat]);
    case DType::Float64:
      return static_cast<R>(static_cast<const double*>(data)[flat]);
  }
  return R{};
}
}  // namespace

void NDArray::check_index(const char* op, int64_t flat) const {
  if (flat < 0 || flat >= size())
    throw Error(std::string(op) + ": index " + std::to_string(flat) + " out of range for size " +
                std::to_string(size()));
}

double NDArray::at(int64_t flat) const {
  check_host("NDArray.at");
  check_index("NDArray.at", flat);
  return element_as<double>(dtype_, data_, flat);
}

int64_t NDArray::at_int(int64_t flat) const {
  check_host("NDArray.at_int");
  check_index("NDArray.at_int", flat);
  return element_as<int64_t>(dtype_, data_, flat);
}

void NDArray::save_npy(const std::string& path) const {
  check_host("NDArray.save_npy");
  kiln::save_npy(path, dtype_npy_descr(dtype_), shape_, data_, nbytes());
}

}  // namespace kiln
