// Kiln's public API: lazy, chunked, NumPy-style arrays. Nothing runs until compute().
//
//   kiln::random::Generator rng(0);
//   auto x = rng.normal(10, 1, {20000, 20000}, {2000, 2000});
//   double s = (x + 1).slice({{0, {}, 2}, {0, {}, 2}}).sum().compute().item<double>();
#pragma once
#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/functions.hpp"
#include "support/device.hpp"
#include "support/error.hpp"

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
namespace kiln {

// A C++ number used in an array expression. Scalars are weak (NEP 50): `int32_array + 1` stays
// int32, `float32_array * 0.5` stays float32, `int_array + 0.5` becomes float64.
struct Scalar {
  ScalarKind kind;
  double f = 0;
  int64_t i = 0;
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T v) {  // NOLINT: implicit on purpose
    if constexpr (std::is_same_v<T, bool>) {
      kind = ScalarKind::Bool;
      i = v;
      f = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind = ScalarKind::Int;
      i = static_cast<int64_t>(v);
      f = static_cast<double>(v);
      if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
        beyond_int64 = v > static_cast<T>(INT64_MAX);
    } else {
      kind = ScalarKind::Float;
      f = static_cast<double>(v);
      i = f >= -9.2e18 && f <= 9.2e18 ? static_cast<int64_t>(f) : 0;  // no UB out of range
    }
  }
  // An unsigned integer above INT64_MAX: no integer array can hold it (operations with integer
  // arrays raise, as NEP 50's OverflowError; with float arrays `f` is used).
  bool beyond_int64 = false;
};

// One entry of a basic index: start:stop:step (NumPy defaults when omitted) or an integer index.
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  bool is_index = false;
  Slice() = default;
  Slice(std::optional<int64_t> b, std::optional<int64_t> e, int64_t s = 1)
      : start(b), stop(e), step(s) {}
  static Slice all() { return {}; }
  static Slice index(int64_t i) {
    Slice s;
    s.start = i;
    s.is_index = true;
    return s;
  }
};

// A computed array, C-contiguous: in host memory, or (compute with
// ComputeOptions::keep_on_device) in a device's memory, where data() is a device pointer and
// only to_host(), storage() and the shape accessors may be used.
class NDArray {
 public:
  NDArray() = default;
  NDArray(DType dtype, Shape shape);  // allocates, zero-filled
  NDArray(DType dtype, Shape shape, std::shared_ptr<void> storage, void* data,
          MemoryPlace place = {});
  const MemoryPlace& place() const { return place_; }
  bool on_device() const { return !place_.on_host(); }
  // A host copy of a device array (copied); a host array itself (not copied).
  NDArray to_host() const;
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return num_elements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }
  void* data() { return data_; }
  const void* data() const { return data_; }
  template <class T>
  const T* data_as() const {
    check_type(sizeof(T), std::is_floating_point_v<T>, std::is_same_v<T, bool>);
    check_host("NDArray.data_as");
    return static_cast<const T*>(data_);
  }
  // Element at a flat index converted to double / int64 (any dtype).
  double at(int64_t flat) const;
  int64_t at_int(int64_t flat) const;
  // The single element of a size-1 array, converted to T.
  template <class T>
  T item() const {
    if (size() != 1)
      throw Error("NDArray.item: expected an array of size 1, got shape " + shape_str(shape_));
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(at(0));
    else
      return static_cast<T>(at_int(0));
  }
  void save_npy(const std::string& path) const;
  const std::shared_ptr<void>& storage() const { return storage_; }

 private:
  void check_type(size_t size, bool fp, bool boolean) const;
  void check_index(const char* op, int64_t flat) const;
  void check_host(const char* op) const;
  DType dtype_ = DType::Float64;
  Shape shape_;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  MemoryPlace place_;
};

struct Node;  // the graph's node (ir/node.hpp), opaque here
using NodeRef = std::shared_ptr<const Node>;

struct ComputeOptions;

class Array {
 public:
  Array() = default;
  explicit Array(NodeRef node) : node_(std::move(node)) {}
  const NodeRef& node() const { return node_; }
  DType dtype() const;
  const Shape& shape() const;
  const Chunks& chunks() const;
  int ndim() const;
  int64_t size() const;

  NDArray compute() const;
  // Computes the array and keeps its blocks: the returned array reads them instead of
  // re-evaluating the expression. In a distributed program (kiln::distributed) each rank keeps
  // the row blocks it made, where several ranks made them (docs/DISTRIBUTED.md).
  Array persist() const;
  // As persist(), computed with `options`: with keep_on_device on a GPU device (cuda, cuda-emu)
  // the blocks stay in device memory, where later computes on that device read them in place.
  Array persist(const ComputeOptions& options) const;

  Array slice(const std::vector<Slice>& index) const;
  Array operator[](int64_t i) const { return slice({Slice::index(i)}); }
  Array astype(DType t) const;
  Array transpose(std::vector<int> perm = {}) const;
  Array T() const { return transpose(); }
  Array reshape(Shape shape) const;  // one entry may be -1
  Array rechunk(Shape block) const;
  Array broadcast_to(Shape shape) const;

  Array sum(std::vector<int> axes = {}, bool keepdims = false) const;
  Array prod(std::vector<int> axes = {}, bool keepdims = false) const;
  Array mean(std::vector<int> axes = {}, bool keepdims = false) const;
  Array min(std::vector<int> axes = {}, bool keepdims = false) const;
  Array max(std::vector<int> axes = {}, bool keepdims = false) const;
  Array all(std::vector<int> axes = {}, bool keepdims = false) const;
  Array any(std::vector<int> axes = {}, bool keepdims = false) const;
  Array var(std::vector<int> axes = {}, bool keepdims = false, int ddof = 0) const;
  Array std(std::vector<int> axes = {}, bool keepdims = false, int ddof = 0) const;
  // Index of the first minimum/maximum (first NaN if any): along `axis`, or into the flattened
  // array when no axis is given (NumPy's argmin/argmax).
  Array argmin(std::optional<int> axis = std::nullopt, bool keepdims = false) const;
  Array argmax(std::optional<int> axis = std::nullopt, bool keepdims = false) const;

  Array matmul(const Array& b) const;  // this @ b (kiln::matmul)

 private:
  NodeRef node_;
};

// ---- creation ----------------------------------------------------------------------------------
// `chunks` is the block shape (like Dask's chunks=(1000, 1000)); empty or 0 in a dim means "auto".
Array scalar(Scalar v);
Array scalar(Scalar v, DType dtype);
Array full(const Shape& shape, Scalar value, const Shape& chunks = {});
Array full(const Shape& shape, Scalar value, DType dtype, const Shape& chunks = {});
Array zeros(const Shape& shape, const Shape& chunks = {}, DType dtype = DType::Float64);
Array ones(const Shape& shape, const Shape& chunks = {}, DType dtype = DType::Float64);
// arange(stop), arange(start, stop, step): int64 when all three are integers, else float64.
Array arange(Scalar stop, const Shape& chunks = {});
Array arange(Scalar start, Scalar stop, Scalar step = 1, const Shape& chunks = {});
Array linspace(double start, double stop, int64_t num, bool endpoint = true,
               const Shape& chunks = {});
// Wraps memory without copying; the caller keeps it alive and unchanged until results are used.
Array from_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks = {});
// The same, and the array (and every expression and plan that reads it) holds `owner`, so the
// memory lives as long as anything may read it: a NumPy array's reference, a std::vector moved
// into a shared_ptr. The caller still must not change the data.
Array from_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks,
                  std::shared_ptr<const void> owner);
template <class T>
Array from_buffer(const T* data, const Shape& shape, const Shape& chunks = {});
// Memory of a device (cuda, cuda-emu; `place`): computes on that kind of device read it where it
// is (no copy to the host; a block on another device gets a copy between devices); a compute on
// any other device is an error. `owner` as above. Kiln's work runs on streams of its own, so the
// data must be ready when compute() is called (its writers synchronized, as CuPy's stream
// handshake asks); compute() returns once the devices ran their share, results written.
Array from_device_buffer(const void* data, DType dtype, const Shape& shape, const Shape& chunks,
                         MemoryPlace place, std::shared_ptr<const void> owner = nullptr);
// An NDArray as a lazy array, without copying (its storage is held): host or device memory.
Array asarray(const NDArray& a, const Shape& chunks = {});
// Memory-maps an .npy file; blocks are read lazily when a kernel touches them. Like NumPy's
// np.load(mmap_mode='r'), the file must stay as it is while the array (or anything computed from
// it lazily) is in use: the header and size are checked here, but a file truncated afterwards
// makes reading the lost pages fail with SIGBUS, and changes to it show up in later results. To
// be independent of the file, compute or persist() the array first (that copies it).
Array load_npy(const std::string& path, const Shape& chunks = {});
void save_npy(const std::string& path, const Array& a);

namespace random {
// Engine::Kiln (the default): Kiln's counter-based Philox4x32-10 stream, computed inside the
// kernels that read it (never stored), the same bits on every device and for any chunking.
// Engine::Curand: NVIDIA cuRAND's Philox4_32_10 generator, for GPU runs that want cuRAND's bulk
// speed rather than Kiln's bits. Its arrays are made whole by one library call (on a GPU its
// device generator; on the CPU, the interpreter and cuda-emu its host generator, which gives the
// same values but is slow: tens of ns per element), then read by kernels like any stored array.
// Element i (C order) of the k-th array a Generator makes is element i of cuRAND's sequence for
// seed + k * 0x9E3779B97F4A7C15, whatever the chunks. normal and standard_normal: cuRAND's normal
// doubles; uniform: 1 - u for cuRAND's uniform doubles u in (0, 1], then scaled as with Kiln's
// engine; integers: not offered (an error). Needs libcurand from the CUDA toolkit at run time: the
// constructor throws kiln::Error saying so when it cannot be loaded.
using Engine = RandomEngine;

class Generator {
 public:
  explicit Generator(uint64_t seed, Engine engine = Engine::Kiln);
  // Floats in [low, high) (where rounding would give high, NumPy's formula can return it; Kiln
  // gives the largest value below high instead). float32: computed in float64, then rounded.
  Array uniform(double low, double high, const Shape& shape, const Shape& chunks = {},
                DType dtype = DType::Float64);
  Array normal(double mean, double std, const Shape& shape, const Shape& chunks = {});
  Array standard_normal(const Shape& shape, const Shape& chunks = {});
  // Integers in [low, high).
  Array integers(int64_t low, int64_t high, const Shape& shape, const Shape& chunks = {},
                 DType dtype = DType::Int64);

 private:
  Array make(RandomKind kind, const Shape& shape, const Shape& chunks, int64_t lo = 0,
             int64_t hi = 0, DType dtype = DType::Float64);
  uint64_t seed_;
  Engine engine_;
  uint32_t next_stream_ = 0;  // each call draws an independent stream
};
}  // namespace random

// ---- element-wise ------------------------------------------------------------------------------
Array unary(UnaryFn f, const Array& a);
Array binary(BinaryFn f, const Array& a, const Array& b);
Array binary(BinaryFn f, const Array& a, Scalar b);
Array binary(BinaryFn f, Scalar a, const Array& b);

#define KILN_DECLARE_BINARY_OP(op, fn)                                         \
  inline Array op(const Array& a, const Array& b) { return binary(fn, a, b); } \
  inline Array op(const Array& a, Scalar b) { return binary(fn, a, b); }       \
  inline Array op(Scalar a, const Array& b) { return binary(fn, a, b); }
KILN_DECLARE_BINARY_OP(operator+, BinaryFn::Add)
KILN_DECLARE_BINARY_OP(operator-, BinaryFn::Sub)
KILN_DECLARE_BINARY_OP(operator*, BinaryFn::Mul)
KILN_DECLARE_BINARY_OP(operator/, BinaryFn::Div)
KILN_DECLARE_BINARY_OP(operator%, BinaryFn::Mod)
KILN_DECLARE_BINARY_OP(operator<, BinaryFn::Lt)
KILN_DECLARE_BINARY_OP(operator<=, BinaryFn::Le)
KILN_DECLARE_BINARY_OP(operator>, BinaryFn::Gt)
KILN_DECLARE_BINARY_OP(operator>=, BinaryFn::Ge)
KILN_DECLARE_BINARY_OP(operator==, BinaryFn::Eq)
KILN_DECLARE_BINARY_OP(operator!=, BinaryFn::Ne)
// &, |, ^, ~ are bitwise on integers and logical on bools, as in NumPy (float operands are an
// error); logical_and/or/not work on any dtype and give bools.
KILN_DECLARE_BINARY_OP(operator&, BinaryFn::BitAnd)
KILN_DECLARE_BINARY_OP(operator|, BinaryFn::BitOr)
KILN_DECLARE_BINARY_OP(operator^, BinaryFn::BitXor)
KILN_DECLARE_BINARY_OP(operator<<, BinaryFn::LeftShift)
KILN_DECLARE_BINARY_OP(operator>>, BinaryFn::RightShift)
// Every binary function by NumPy's name (ir/ufuncs.def): add, subtract, multiply, true_divide,
// remainder, power, less ... not_equal, logical_and, logical_or, maximum, minimum, bitwise_and,
// bitwise_or, bitwise_xor, left_shift, right_shift, floor_divide (Python's //: floor of the
// quotient; see docs/KERNEL_IR.md for x // 0). pow and mod are short names for power, remainder.
#define KILN_BINARY(name, np, result) KILN_DECLARE_BINARY_OP(np, BinaryFn::name)
#include "ir/ufuncs.def"
#undef KILN_BINARY
KILN_DECLARE_BINARY_OP(pow, BinaryFn::Pow)
KILN_DECLARE_BINARY_OP(mod, BinaryFn::Mod)
#undef KILN_DECLARE_BINARY_OP

inline Array operator-(const Array& a) { return unary(UnaryFn::Neg, a); }
inline Array operator!(const Array& a) { return unary(UnaryFn::Not, a); }
inline Array operator~(const Array& a) { return unary(UnaryFn::Invert, a); }
// Every unary function by NumPy's name (ir/ufuncs.def): negative, absolute, sqrt, exp, expm1, log,
// log1p, sin, cos, tan, tanh, arcsin, arccos, arctan, floor, ceil, round, sign, isnan, isfinite,
// sigmoid, logical_not, invert; abs and bitwise_not are short names for absolute and invert.
// Result dtypes as NumPy 2's: the float functions (sqrt ... arctan, sigmoid) give float32 for
// float32 and float64 for everything else (NumPy: float16 for bool, which Kiln lacks);
// floor/ceil/round/abs/sign keep the dtype (round of bool: float64); sign of bool is an error.
#define KILN_UNARY(name, np, result) \
  inline Array np(const Array& a) { return unary(UnaryFn::name, a); }
#include "ir/ufuncs.def"
#undef KILN_UNARY
inline Array abs(const Array& a) { return unary(UnaryFn::Abs, a); }
inline Array bitwise_not(const Array& a) { return unary(UnaryFn::Invert, a); }

Array where(const Array& cond, const Array& a, const Array& b);
Array where(const Array& cond, Scalar a, const Array& b);
Array where(const Array& cond, const Array& a, Scalar b);
Array where(const Array& cond, Scalar a, Scalar b);
Array clip(const Array& a, Scalar lo, Scalar hi);
Array astype(const Array& a, DType t);

// ---- reductions (empty axes: all axes) --------------------------------------------------------
Array reduce(ReduceFn f, const Array& a, std::vector<int> axes = {}, bool keepdims = false);
inline Array sum(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.sum(ax, kd);
}
inline Array prod(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.prod(ax, kd);
}
inline Array mean(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.mean(ax, kd);
}
inline Array min(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.min(ax, kd);
}
inline Array max(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.max(ax, kd);
}
inline Array all(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.all(ax, kd);
}
inline Array any(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return a.any(ax, kd);
}
inline Array argmin(const Array& a, std::optional<int> axis = std::nullopt, bool kd = false) {
  return a.argmin(axis, kd);
}
inline Array argmax(const Array& a, std::optional<int> axis = std::nullopt, bool kd = false) {
  return a.argmax(axis, kd);
}

// NumPy's nan-functions: the reduction of the elements that are not NaN (integer and bool operands
// hold none: the plain reduction). Where every element reduced is NaN (or none is left), nansum
// is 0, nanprod 1, nanmean, nanmin, nanmax, nanvar and nanstd NaN (NumPy warns), and nanargmin
// and nanargmax -1 (NumPy raises ValueError; JAX and CuPy also return an index). nanreduce of
// All or Any is an Error: NumPy has no such function.
Array nanreduce(ReduceFn f, const Array& a, std::vector<int> axes = {}, bool keepdims = false);
inline Array nansum(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return nanreduce(ReduceFn::Sum, a, std::move(ax), kd);
}
inline Array nanprod(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return nanreduce(ReduceFn::Prod, a, std::move(ax), kd);
}
inline Array nanmean(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return nanreduce(ReduceFn::Mean, a, std::move(ax), kd);
}
inline Array nanmin(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return nanreduce(ReduceFn::Min, a, std::move(ax), kd);
}
inline Array nanmax(const Array& a, std::vector<int> ax = {}, bool kd = false) {
  return nanreduce(ReduceFn::Max, a, std::move(ax), kd);
}
Array nanargmin(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array nanargmax(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array nanvar(const Array& a, std::vector<int> axes = {}, bool keepdims = false, int ddof = 0);
Array nanstd(const Array& a, std::vector<int> axes = {}, bool keepdims = false, int ddof = 0);

// ---- structure ---------------------------------------------------------------------------------
Array concatenate(const std::vector<Array>& arrays, int axis = 0);
Array stack(const std::vector<Array>& arrays, int axis = 0);

// Linear algebra (frontend/linalg.cpp), as NumPy's. Float operands run BLAS calls per block
// (library nodes: gemm/gemv, partial products over the contracted chunks added in a fixed order);
// integer and bool operands are promoted as NumPy does and computed without BLAS (a fused
// multiply and sum: exact, wrapping like NumPy's). Chunks of any alignment are accepted.
Array matmul(const Array& a, const Array& b);  // a @ b: 1-D operands, stacks broadcast
Array dot(const Array& a, const Array& b);     // np.dot: sum over a's last, b's second-to-last axis
Array vdot(const Array& a, const Array& b);    // both flattened, equal sizes: a 0-d result
Array inner(const Array& a, const Array& b);   // sum over both last axes
Array outer(const Array& a, const Array& b);   // both flattened: (a.size, b.size)
Array tensordot(const Array& a, const Array& b, int axes = 2);
Array tensordot(const Array& a, const Array& b, std::vector<int> axes_a, std::vector<int> axes_b);
// Two-operand (or one-operand) einsum, explicit or implicit output: "ij,jk->ik", "ij,ij->",
// "bij,bjk->bik", "ij->ji". Letters repeated within one operand (traces, diagonals) and
// ellipses are not supported (kiln::Error).
Array einsum(const std::string& subscripts, const std::vector<Array>& operands);

// numpy.linalg: each factorization is a LAPACK call (a library node) whose parts are views of one
// result, so computing several parts of it (compute({s.u, s.s, s.vh})) factorizes once. qr, svd,
// cholesky, solve, inv, det, slogdet and eigh take stacks of matrices (..., m, n) too, one call
// per matrix (solve broadcasts the batch dims of a and b as NumPy 2); lstsq and svd_compressed
// take matrices. Integer and bool inputs are factorized in
// float64, as NumPy does. Bad input (shapes, a singular matrix, one that is not positive
// definite, NaN or inf in a factorization's input) is a kiln::Error, raised by compute() for
// what depends on the values.
namespace linalg {
struct QR {
  Array q, r;
};
struct SVD {
  Array u, s, vh;
};
struct SlogDet {
  Array sign, logabsdet;
};
struct Eigh {
  Array eigenvalues, eigenvectors;
};
struct Lstsq {
  Array x, residuals, rank, s;
};
// Reduced QR, q (m, k) r (k, n), k = min(m, n). A tall array (m >= n) in several row chunks is
// factorized by TSQR: a QR per block of rows (geqrf + orgqr, in parallel), the R factors stacked
// and factorized again (a tree, 16 at a time), Q's blocks formed by one product each. Row chunks
// shorter than n are merged with their neighbours; column chunks do not matter.
QR qr(const Array& a);
// Thin SVD (full_matrices=False): u (m, k), s (k) descending, vh (k, n). Tall arrays through TSQR
// whose last stack of R factors is factorized by gesdd, u's blocks formed by one product each;
// wide arrays (m < n) as the transpose of the SVD of a.T.
SVD svd(const Array& a);
// Randomized SVD as Dask's svd_compressed: k components, n_oversamples extra columns, power
// iterations each followed by a QR (TSQR) re-orthonormalization; the test matrix is
// standard_normal from Generator(seed).
SVD svd_compressed(const Array& a, int64_t k, int n_power_iter = 0, int64_t n_oversamples = 10,
                   uint64_t seed = 0);
Array cholesky(const Array& a);               // lower L, a = L L^T
Array solve(const Array& a, const Array& b);  // b (n,) or (n, r)
Array inv(const Array& a);
Array det(const Array& a);        // 0-d; 0 for an exactly singular matrix
SlogDet slogdet(const Array& a);  // sign 0 and -inf for a singular matrix
Eigh eigh(const Array& a);        // symmetric a, its lower triangle read (UPLO='L')
// Least squares (gelsd, rcond = eps * max(m, n) as NumPy 2): x, residuals (the squared norm of
// b - a x per column when m > n, else empty; NumPy leaves them empty when rank < n too), rank
// (int64, 0-d), s (the singular values of a).
Lstsq lstsq(const Array& a, const Array& b);
// Vector norms (ord: 2 = default, 1, inf, -inf, 0, any p) over one axis, matrix norms over two
// ("fro" = default, "nuc", 1, -1, 2, -2, inf, -inf; 2, -2 and "nuc" from singular values).
// axis empty: a 1-D input is a vector, a 2-D input a matrix.
Array norm(const Array& x, std::optional<double> ord = std::nullopt, std::vector<int> axis = {},
           bool keepdims = false);
Array norm(const Array& x, const std::string& ord, std::vector<int> axis = {},
           bool keepdims = false);
}  // namespace linalg

// ---- evaluation --------------------------------------------------------------------------------
struct ComputeOptions {
  bool fuse = true;                 // false: every op its own kernel and task (--no-fuse)
  bool row_fusion = true;           // false: reductions along rows stay their own kernels
  bool push_slices = true;          // false: views stay put, leaves make every element
  int threads = 0;                  // 0: KILN_THREADS or all cores
  std::ostream* ir = nullptr;       // IR after each pass + fusion summary (--emit-ir)
  std::ostream* kernels = nullptr;  // newly planned kernels: kernel IR, then the printed code
  std::string dot_file;             // fused graph as Graphviz (--emit-dot)
  std::string trace_file;           // task stream in Chrome trace format (--trace)
  bool progress = true;             // progress bar on stderr (terminals only) after ~1 s
  Device device = Device::Default;  // where it runs: KILN_DEVICE, else cpu (support/device.hpp)
  int devices = 0;  // devices of that kind its blocks are spread over (cuda, cuda-emu; 0:
                    // KILN_DEVICES, else every GPU for cuda, one for cuda-emu)
  // cuda, cuda-emu: the results stay in device memory (device 0), NDArray::on_device(); no
  // copy back to the host (to_host() copies when asked). Ignored on host devices.
  bool keep_on_device = false;
  // Per output (empty, or one per array passed): true = not computed this time, its NDArray
  // empty; only the work the other outputs need runs. The plan is that of all the outputs, so
  // an iterative solver whose rounds drop some outputs (ADMM's chunks that are done) reuses one
  // plan instead of planning each subset.
  std::vector<bool> skip;
  // Set to true from any thread to stop the compute: no task starts after it is seen (those
  // running finish), and compute() throws kiln::Error("compute: cancelled") once they have, its
  // memory released. The Python package sets it on Ctrl-C. Read, never written, by Kiln.
  const std::atomic<bool>* cancel = nullptr;
  // Counters another thread may read while the compute runs (Python's progress bar in
  // notebooks): tasks_total is set to the plan's block tasks when the run starts, tasks_done
  // counts those finished. Written, never read, by Kiln.
  std::atomic<int64_t>* tasks_done = nullptr;
  std::atomic<int64_t>* tasks_total = nullptr;
  // Plan only: the passes, lowering and kernel compiles run (and ir, kernels, dot_file are
  // written), nothing is computed; compute() returns empty NDArrays. The plan is cached, so a
  // later compute() of the same structure starts running at once. Python's kiln.explain().
  bool plan_only = false;
  // In a distributed program (kiln::distributed below): false runs this compute whole on this
  // rank alone, as outside one (each rank may then compute something different).
  bool distributed = true;
};

// Evaluates several arrays in one plan that shares their common work.
std::vector<NDArray> compute(const std::vector<Array>& arrays);
std::vector<NDArray> compute(const std::vector<Array>& arrays, const ComputeOptions& options);
// Array::persist of several arrays in one compute (their shared work done once). In a
// distributed program an array whose row blocks several ranks made stays on those ranks; one
// that a single rank made (a reduction's result, a one-block array) goes to every rank.
std::vector<Array> persist(const std::vector<Array>& arrays, const ComputeOptions& options = {});

// Counters since the process started, and figures of the last compute() on this thread.
struct Stats {
  int64_t plans_built = 0;  // pipeline + lowering runs (plan cache misses)
  int64_t plan_cache_hits = 0;
  int64_t computes = 0;  // compute() calls that ran
  int64_t tasks = 0;     // their tasks, all together (distributed: this rank's)
  int64_t messages_sent = 0, bytes_sent = 0;  // distributed computes: this rank's sends
  int64_t max_peak_bytes = 0;    // the largest last_peak_bytes since then or reset_peak_stats()
  int64_t kernels_compiled = 0;  // LLVM optimizations + code generations (interp: preparations)
  int64_t kernels_from_disk = 0;
  double compile_seconds = 0;
  // Last compute():
  bool last_cached = false;
  int64_t last_tasks = 0;    // kernel + combine tasks executed
  int64_t last_kernels = 0;  // distinct kernels in its plan
  int64_t last_peak_bytes = 0;
  double last_compile_seconds = 0;
  double last_seconds = 0;  // wall time of the whole compute()
  // Last compute() on a device with its own memory (cuda, cuda-emu): the devices it used, the
  // copies host -> device, device -> host and between devices (count, bytes), and the peak of
  // device memory it held (all devices together).
  int last_devices = 0;
  int64_t last_to_device = 0, last_to_device_bytes = 0;
  int64_t last_to_host = 0, last_to_host_bytes = 0;
  int64_t last_between_devices = 0, last_between_devices_bytes = 0;
  int64_t last_peak_device_bytes = 0;
  // Last compute() of a distributed program over several ranks (kiln::distributed): the ranks,
  // the tasks this rank ran, the messages and payload bytes it sent and received, and what the
  // plan's placement predicted it would send.
  int last_ranks = 0;
  int64_t last_rank_tasks = 0;
  int64_t last_messages_sent = 0, last_bytes_sent = 0;
  int64_t last_messages_received = 0, last_bytes_received = 0;
  int64_t last_predicted_messages = 0, last_predicted_bytes = 0;
};
Stats stats();
// Starts Stats::max_peak_bytes afresh (to measure one phase, a solver after its data are made).
void reset_peak_stats();
// Forgets cached plans (kernels stay compiled).
void clear_plan_cache();
// What kernels are compiled for: the LLVM CPU name (the host's, or KILN_TARGET_CPU) and the vector
// math ISA, e.g. "znver3, vector math AVX2". Starts the JIT; throws kiln::Error if
// KILN_TARGET_CPU names a CPU that is unknown or has features the host lacks.
std::string compile_target();
// What a device's kernels are made for, e.g. "interpreter, vector math AVX2" (cpu: as above).
std::string device_target(Device device);
// The machine's number (CUDA's ordinal) of device `index` of a device kind with its own memory
// (cuda, cuda-emu), -1 for the others. A process numbers its devices from its place among the
// processes an MPI launcher started on its machine (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
// ...), so the ranks of a distributed program sharing a machine each run on a device of their own.
int device_ordinal(Device device, int index = 0);
// The library calls device plans ran on the host because the device lacks the library (a GPU
// without cuBLAS or cuSOLVER), one message each, as warned on standard error; empty: none.
std::vector<std::string> host_fallbacks();
// ---- distributed programs (docs/DISTRIBUTED.md) ------------------------------------------------
// The same program on several processes (ranks: `mpirun -np 4 prog`): every rank builds the same
// arrays and calls compute() in the same order; each compute's blocks are spread over the ranks
// (block b on rank b % ranks), each rank runs its own and receives what its tasks read from the
// others, and every rank gets the results, the same bits as one process computes.
namespace distributed {
// Starts MPI with the program's arguments (MPI_Init_thread, unless the program started it) through
// Kiln's MPI plugin, libkiln_mpi.so. KILN_MPI=1 makes the first compute() call init() instead.
// Throws kiln::Error when the plugin or MPI cannot start. Idempotent.
void init(int& argc, char**& argv);
void init();
bool active();          // init() has run (and finalize() has not)
int rank();             // this process's rank (0 when not active)
int size();             // the ranks (1 when not active)
std::string library();  // the MPI library and version ("" when not active)
std::string host();     // this rank's host name
// Ends MPI if Kiln started it (also at exit); compute() then runs in this process alone.
void finalize();
// Data that only some ranks hold: computes run each block where the data it reads is (the rank
// holding most of it), so the data itself does not move; a compute that reads it elsewhere first
// sends each rank's part to every rank (then it is whole everywhere). Both are collectives: every
// rank calls them, in the same order, with the same dtype, shape and chunks, or a kiln::Error
// says which rank differs.
// An array stored as one .npy file per rank, split along its first axis: rank r's `path` holds
// the rows after rank r - 1's (a rank may have none). Each rank reads only its own file. Chunks
// split each rank's rows on their own (`chunks[0]` rows at a time), so no block spans two ranks.
// Without other ranks: load_npy(path, chunks).
Array load_npy_shards(const std::string& path, const Shape& chunks = {});
// An array that rank `rank` holds: `data` there (copied), ignored on the other ranks (null is
// fine). Its blocks run on `rank`.
Array from_buffer_on(int rank, const void* data, DType dtype, const Shape& shape,
                     const Shape& chunks = {});
}  // namespace distributed

template <class... A, class = std::enable_if_t<(std::is_same_v<A, Array> && ...)>>
std::vector<NDArray> compute(const Array& a, const A&... rest) {
  return compute(std::vector<Array>{a, rest...});
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else {
    static_assert(std::is_same_v<T, double>, "Kiln supports bool, int32, int64, float, double");
    return DType::Float64;
  }
}
template <class T>
Array from_buffer(const T* data, const Shape& shape, const Shape& chunks) {
  return from_buffer(static_cast<const void*>(data), dtype_of<T>(), shape, chunks);
}

}  // namespace kiln
#pragma GCC visibility pop
