// kiln._kiln: Kiln's public C++ API (kiln/kiln.hpp, kiln/glm.hpp) for Python, bound with
// nanobind. It links libkiln.so and uses nothing else of Kiln. The Python package (python/kiln/)
// builds the user's API and NumPy's protocols on these functions; this file converts values only:
// Python scalars to kiln::Scalar, NumPy (any DLPack) arrays to lazy arrays without copying,
// results to NumPy arrays that own Kiln's memory, kiln::Error to kiln.KilnError.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <signal.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/glm.hpp"
#include "kiln/kiln.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using kiln::Array;
using kiln::DType;
using kiln::Error;
using kiln::NDArray;
using kiln::Scalar;
using kiln::Shape;

// ---- names -> Kiln's enums ------------------------------------------------------------------

template <class E>
std::map<std::string, E> names(int count, const char* (*name)(E)) {
  std::map<std::string, E> out;
  for (int i = 0; i < count; ++i) out.emplace(name(static_cast<E>(i)), static_cast<E>(i));
  return out;
}

template <class E>
E lookup(const std::map<std::string, E>& table, const std::string& name, const char* what) {
  auto it = table.find(name);
  if (it == table.end()) throw Error(std::string("kiln: no ") + what + " named '" + name + "'");
  return it->second;
}

kiln::UnaryFn unary_fn(const std::string& name) {
  static const auto table = names<kiln::UnaryFn>(kiln::kNumUnaryFns, kiln::unary_name);
  return lookup(table, name, "unary function");
}
kiln::ReduceFn reduce_fn(const std::string& name) {
  static const auto table = names<kiln::ReduceFn>(kiln::kNumReduceFns, kiln::reduce_name);
  return lookup(table, name, "reduction");
}
DType dtype_named(const std::string& name) {
  for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64})
    if (name == kiln::dtype_name(t)) return t;
  throw Error("kiln: unsupported dtype '" + name +
              "' (Kiln arrays hold bool, int32, int64, float32 or float64)");
}
kiln::Device device_named(const std::optional<std::string>& name) {
  return name ? kiln::device_from_name(*name, "device") : kiln::Device::Default;
}

// ---- values ---------------------------------------------------------------------------------

// A Python bool, int or float as a weak scalar (NEP 50); the Python layer turns NumPy scalars,
// which are strongly typed, into 0-d arrays before they get here.
Scalar scalar_of(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) return Scalar(static_cast<int64_t>(v));
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (!PyErr_Occurred()) return Scalar(static_cast<uint64_t>(u));
    PyErr_Clear();
    std::string msg =
        std::string("kiln: the integer ") + nb::str(h).c_str() + " does not fit in 64 bits";
    throw nb::type_error(msg.c_str());
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AsDouble(o));
  throw nb::type_error(("kiln: expected a kiln array, bool, int or float, got " +
                        std::string(nb::type_name(h.type()).c_str()))
                           .c_str());
}

// DLPack's type of a Kiln dtype, and back.
nb::dlpack::dtype dlpack_of(DType t) {
  switch (t) {
    case DType::Bool:
      return nb::dtype<bool>();
    case DType::Int32:
      return nb::dtype<int32_t>();
    case DType::Int64:
      return nb::dtype<int64_t>();
    case DType::Float32:
      return nb::dtype<float>();
    case DType::Float64:
      return nb::dtype<double>();
  }
  throw Error("kiln: unknown dtype");
}
std::optional<DType> dtype_of(nb::dlpack::dtype d) {
  for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64})
    if (dlpack_of(t) == d) return t;
  return std::nullopt;
}

// A reference to a Python object held by Kiln's graph (the owner of a wrapped buffer). Kiln may
// drop it on any thread: the last release takes the GIL, and leaks instead once Python is
// finalizing (a plan cached until exit).
template <class T>
std::shared_ptr<const void> held_by_kiln(T value) {
  return std::shared_ptr<const void>(new T(std::move(value)), [](const void* p) {
    if (!Py_IsInitialized() ||
#if PY_VERSION_HEX >= 0x030D0000
        Py_IsFinalizing()
#else
        _Py_IsFinalizing()
#endif
    )
      return;
    nb::gil_scoped_acquire gil;
    delete static_cast<const T*>(p);
  });
}

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// A C-contiguous host array of a supported dtype (NumPy, or anything with __dlpack__) as a lazy
// Kiln array over the same memory, holding a reference to it.
Array from_host(HostArray a, const Shape& chunks) {
  auto t = dtype_of(a.dtype());
  if (!t)
    throw nb::type_error(
        "kiln.asarray: unsupported dtype (Kiln arrays hold bool, int32, int64, float32 or "
        "float64; convert with .astype first)");
  Shape shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  const void* data = a.data();
  return kiln::from_buffer(data, *t, shape, chunks, held_by_kiln(std::move(a)));
}

// A capsule holding a copy of `a` (its storage shared): the owner of an ndarray over its memory.
nb::capsule holding(const NDArray& a) {
  return nb::capsule(new NDArray(a), [](void* p) noexcept { delete static_cast<NDArray*>(p); });
}

// A computed host array as a NumPy array that owns it (no copy). Writable: every compute()
// returns memory of its own, as NumPy's functions do.
nb::object to_numpy(const NDArray& computed) {
  NDArray a = computed.on_device() ? computed.to_host() : computed;
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  return nb::ndarray<nb::numpy>(a.data(), shape.size(), shape.data(), holding(a), nullptr,
                                dlpack_of(a.dtype()))
      .cast();
}

Shape shape_of(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

nb::tuple tuple_of(const Shape& s) {
  nb::list l;
  for (int64_t v : s) l.append(v);
  return nb::tuple(l);
}

struct TaskCounters {
  std::atomic<int64_t> done{0}, total{-1};  // total: -1 until the run starts
};

kiln::ComputeOptions compute_options(const std::optional<std::string>& device, int threads,
                                     bool progress) {
  kiln::ComputeOptions o;
  o.device = device_named(device);
  o.threads = threads;
  o.progress = progress;
  return o;
}

// Ctrl-C during a compute on Python's main thread. Python's SIGINT handler only trips a flag that
// the main thread checks when it runs Python code again, which a long compute would postpone to
// its end; so while Kiln computes there, a handler of Kiln's sets the compute's cancel flag and
// then calls Python's. The compute stops before its next task, and the KeyboardInterrupt Python
// recorded is raised when it returns.
std::atomic<std::atomic<bool>*> g_sigint_cancel{nullptr};
struct sigaction g_python_sigint;

extern "C" void kiln_on_sigint(int sig, siginfo_t* info, void* context) {
  if (std::atomic<bool>* cancel = g_sigint_cancel.load()) cancel->store(true);
  if (g_python_sigint.sa_flags & SA_SIGINFO)
    g_python_sigint.sa_sigaction(sig, info, context);
  else if (g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN)
    g_python_sigint.sa_handler(sig);
}

// Python's own SIGINT handling is in place: signal.default_int_handler, which raises
// KeyboardInterrupt (a program with a handler of its own decides for itself what Ctrl-C means).
bool python_raises_on_sigint() {
  static nb::handle signal_module = nb::module_::import_("signal").release();
  nb::object handler = signal_module.attr("getsignal")(SIGINT);
  return handler.is(signal_module.attr("default_int_handler"));
}

// Installs kiln_on_sigint for its lifetime where Python raises KeyboardInterrupt on SIGINT (not
// where the program ignores it, left the default that ends the process, or handles it itself).
// Called with the GIL held.
class SigintCancels {
 public:
  explicit SigintCancels(std::atomic<bool>* cancel) {
    if (!python_raises_on_sigint()) return;
    if (sigaction(SIGINT, nullptr, &g_python_sigint) != 0) return;
    bool plain = !(g_python_sigint.sa_flags & SA_SIGINFO);
    if (plain && (g_python_sigint.sa_handler == SIG_DFL || g_python_sigint.sa_handler == SIG_IGN))
      return;
    g_sigint_cancel = cancel;
    struct sigaction ours {};
    ours.sa_sigaction = kiln_on_sigint;
    ours.sa_flags = SA_SIGINFO | (g_python_sigint.sa_flags & SA_RESTART);
    sigemptyset(&ours.sa_mask);
    active_ = sigaction(SIGINT, &ours, nullptr) == 0;
  }
  ~SigintCancels() {
    if (!active_) return;
    sigaction(SIGINT, &g_python_sigint, nullptr);
    g_sigint_cancel = nullptr;
  }
  SigintCancels(const SigintCancels&) = delete;
  SigintCancels& operator=(const SigintCancels&) = delete;

 private:
  bool active_ = false;
};

bool on_python_main_thread() {
  static const unsigned long main_ident = [] {
    nb::object threading = nb::module_::import_("threading");
    return nb::cast<unsigned long>(threading.attr("main_thread")().attr("ident"));
  }();
  return PyThread_get_thread_ident() == main_ident;
}

// Runs `run(options)`, a Kiln call that computes (and may take long), without the GIL; on
// Python's main thread with Ctrl-C setting options.cancel (SigintCancels): then the pending
// KeyboardInterrupt is raised once Kiln has stopped (tasks already running finish; nothing
// leaks), whether the compute failed as cancelled or had already finished.
template <class F>
auto interruptible(kiln::ComputeOptions options, F run) -> decltype(run(options)) {
  using R = decltype(run(options));
  if (!on_python_main_thread()) {
    nb::gil_scoped_release release;
    return run(options);
  }
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  std::optional<R> result;
  std::exception_ptr error;
  {
    SigintCancels guard(&cancel);
    nb::gil_scoped_release release;
    try {
      result.emplace(run(options));
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (cancel.load() && PyErr_CheckSignals() != 0) throw nb::python_error();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

std::vector<NDArray> compute_released(const std::vector<Array>& arrays,
                                      const kiln::ComputeOptions& options) {
  return interruptible(
      options, [&arrays](const kiln::ComputeOptions& o) { return kiln::compute(arrays, o); });
}

// One entry of a basic index from Python: (start, stop, step, is_index).
using SliceArg = std::tuple<std::optional<int64_t>, std::optional<int64_t>, int64_t, bool>;

}  // namespace

NB_MODULE(_kiln, m) {
  m.doc() = "Kiln's C++ API, bound with nanobind (use the kiln package, not this module)";
  // No report of instances alive at exit: NumPy 2.4 keeps one reference to the operand for each
  // exception an __array_ufunc__ override raises from a ufunc method (np.add.accumulate(x) on a
  // kiln array: TypeError), so such a program would end with a "leaked" report about Kiln.
  nb::set_leak_warnings(false);

  // kiln::Error by its kind: KilnError (a ValueError), and its subclasses KilnTypeError (also a
  // TypeError: a dtype the operation does not take) and KilnMemoryError (also a MemoryError). The
  // module holds the types for the life of the process.
  static PyObject* const value_error = PyErr_NewExceptionWithDoc(
      "kiln.KilnError",
      "A user error reported by Kiln (bad shape, dtype, axis, slice, file, ...): its message names "
      "the operation and what was expected. A subclass of ValueError; KilnTypeError and "
      "KilnMemoryError are its subclasses for dtypes an operation does not take and for failed "
      "allocations.",
      PyExc_ValueError, nullptr);
  auto subclass = [](const char* name, PyObject* builtin, const char* doc) {
    nb::object bases = nb::make_tuple(nb::handle(value_error), nb::handle(builtin));
    return PyErr_NewExceptionWithDoc(name, doc, bases.ptr(), nullptr);
  };
  static PyObject* const type_error =
      subclass("kiln.KilnTypeError", PyExc_TypeError,
               "A dtype the operation does not take (NumPy raises TypeError there).");
  static PyObject* const memory_error = subclass("kiln.KilnMemoryError", PyExc_MemoryError,
                                                 "An allocation for a computation failed.");
  if (!value_error || !type_error || !memory_error) throw nb::python_error();
  m.attr("KilnError") = nb::handle(value_error);
  m.attr("KilnTypeError") = nb::handle(type_error);
  m.attr("KilnMemoryError") = nb::handle(memory_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      PyObject* type = e.kind() == kiln::ErrorKind::Type     ? type_error
                       : e.kind() == kiln::ErrorKind::Memory ? memory_error
                                                             : value_error;
      PyErr_SetString(type, e.what());
    } catch (const kiln::InternalError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  nb::class_<Array>(m, "Array")
      .def_prop_ro("dtype", [](const Array& a) { return kiln::dtype_name(a.dtype()); })
      .def_prop_ro("shape", [](const Array& a) { return tuple_of(a.shape()); })
      .def_prop_ro("chunks",
                   [](const Array& a) {
                     nb::list dims;
                     for (const auto& c : a.chunks()) dims.append(tuple_of(c));
                     return nb::tuple(dims);
                   })
      .def("slice",
           [](const Array& a, const std::vector<SliceArg>& index) {
             std::vector<kiln::Slice> s;
             for (const auto& [start, stop, step, is_index] : index)
               s.push_back(is_index ? kiln::Slice::index(*start) : kiln::Slice(start, stop, step));
             return a.slice(s);
           })
      .def("astype", [](const Array& a, const std::string& t) { return a.astype(dtype_named(t)); })
      .def("transpose", &Array::transpose, "perm"_a = std::vector<int>{})
      .def("reshape",
           [](const Array& a, const std::vector<int64_t>& s) { return a.reshape(shape_of(s)); })
      .def("rechunk",
           [](const Array& a, const std::vector<int64_t>& s) { return a.rechunk(shape_of(s)); })
      .def(
          "broadcast_to",
          [](const Array& a, const std::vector<int64_t>& s) { return a.broadcast_to(shape_of(s)); })
      .def("var", &Array::var, "axes"_a, "keepdims"_a, "ddof"_a)
      .def("std", &Array::std, "axes"_a, "keepdims"_a, "ddof"_a)
      .def("argmin", &Array::argmin, "axis"_a, "keepdims"_a)
      .def("argmax", &Array::argmax, "axis"_a, "keepdims"_a)
      .def(
          "persist",
          [](const Array& a, std::optional<std::string> device, int threads) {
            return interruptible(compute_options(device, threads, false),
                                 [&a](const kiln::ComputeOptions& o) { return a.persist(o); });
          },
          "device"_a = nb::none(), "threads"_a = 0);

  m.def("unary", [](const std::string& f, const Array& a) { return kiln::unary(unary_fn(f), a); });
  // The function by its code (binary_codes() maps NumPy's names to codes): a str argument and a
  // map lookup were a tenth of building `y + 1` from Python.
  m.def("binary_codes", [] {
    nb::dict codes;
    for (int i = 0; i < kiln::kNumBinaryFns; ++i)
      codes[kiln::binary_name(static_cast<kiln::BinaryFn>(i))] = i;
    return codes;
  });
  m.def("binary", [](int code, nb::handle a, nb::handle b) {
    if (code < 0 || code >= kiln::kNumBinaryFns)
      throw nb::value_error(
          ("kiln.binary: no binary function has code " + std::to_string(code)).c_str());
    auto f = static_cast<kiln::BinaryFn>(code);
    bool ka = nb::isinstance<Array>(a), kb = nb::isinstance<Array>(b);
    if (ka && kb) return kiln::binary(f, nb::cast<const Array&>(a), nb::cast<const Array&>(b));
    if (ka) return kiln::binary(f, nb::cast<const Array&>(a), scalar_of(b));
    if (kb) return kiln::binary(f, scalar_of(a), nb::cast<const Array&>(b));
    throw nb::type_error("kiln.binary: one operand must be a kiln array");
  });
  m.def("reduce", [](const std::string& f, const Array& a, std::vector<int> axes, bool keepdims) {
    return kiln::reduce(reduce_fn(f), a, std::move(axes), keepdims);
  });
  m.def("nanreduce",
        [](const std::string& f, const Array& a, std::vector<int> axes, bool keepdims) {
          return kiln::nanreduce(reduce_fn(f), a, std::move(axes), keepdims);
        });
  m.def("nanvar", &kiln::nanvar, "a"_a, "axes"_a, "keepdims"_a, "ddof"_a);
  m.def("nanstd", &kiln::nanstd, "a"_a, "axes"_a, "keepdims"_a, "ddof"_a);
  m.def("where", [](const Array& c, nb::handle a, nb::handle b) {
    bool ka = nb::isinstance<Array>(a), kb = nb::isinstance<Array>(b);
    if (ka && kb) return kiln::where(c, nb::cast<const Array&>(a), nb::cast<const Array&>(b));
    if (ka) return kiln::where(c, nb::cast<const Array&>(a), scalar_of(b));
    if (kb) return kiln::where(c, scalar_of(a), nb::cast<const Array&>(b));
    return kiln::where(c, scalar_of(a), scalar_of(b));
  });
  m.def("clip", [](const Array& a, nb::handle lo, nb::handle hi) {
    return kiln::clip(a, scalar_of(lo), scalar_of(hi));
  });
  m.def("concatenate", &kiln::concatenate, "arrays"_a, "axis"_a);
  m.def("stack", &kiln::stack, "arrays"_a, "axis"_a);
  m.def("matmul", &kiln::matmul);
  m.def("dot", &kiln::dot);
  m.def("vdot", &kiln::vdot);
  m.def("inner", &kiln::inner);
  m.def("outer", &kiln::outer);
  m.def("tensordot",
        [](const Array& a, const Array& b, int axes) { return kiln::tensordot(a, b, axes); });
  m.def("tensordot_axes", [](const Array& a, const Array& b, std::vector<int> axa,
                             std::vector<int> axb) { return kiln::tensordot(a, b, axa, axb); });
  m.def("einsum", &kiln::einsum);

  // ---- creation ----
  m.def("scalar", [](nb::handle v, const std::string& t) {
    return kiln::scalar(scalar_of(v), dtype_named(t));
  });
  m.def("full", [](const std::vector<int64_t>& shape, nb::handle v, const std::string& t,
                   const std::vector<int64_t>& chunks) {
    return kiln::full(shape_of(shape), scalar_of(v), dtype_named(t), shape_of(chunks));
  });
  m.def("arange",
        [](nb::handle start, nb::handle stop, nb::handle step, const std::vector<int64_t>& chunks) {
          return kiln::arange(scalar_of(start), scalar_of(stop), scalar_of(step), shape_of(chunks));
        });
  m.def("linspace", [](double start, double stop, int64_t num, bool endpoint,
                       const std::vector<int64_t>& chunks) {
    return kiln::linspace(start, stop, num, endpoint, shape_of(chunks));
  });
  m.def("from_host", [](HostArray a, const std::vector<int64_t>& chunks) {
    return from_host(std::move(a), shape_of(chunks));
  });
  // Device memory described by the CUDA array interface (or a DeviceResult's): a lazy array read
  // in place by computes on that device, holding `owner` (the producer) until Kiln is done.
  m.def("from_device", [](uintptr_t ptr, const std::string& dtype,
                          const std::vector<int64_t>& shape, const std::vector<int64_t>& chunks,
                          const std::string& device, int index, nb::object owner) {
    kiln::MemoryPlace place;
    place.device = kiln::device_from_name(device, "kiln.asarray's device");
    place.index = index;
    if (place.on_host())
      throw nb::value_error(("kiln.asarray: device memory on '" + device +
                             "', which is not a GPU device (cuda or cuda-emu)")
                                .c_str());
    return kiln::from_device_buffer(reinterpret_cast<const void*>(ptr), dtype_named(dtype),
                                    shape_of(shape), shape_of(chunks), place,
                                    held_by_kiln(std::move(owner)));
  });
  // A result kept in a GPU's memory (compute(..., keep_on_device=True)): where it is and what
  // it holds; host() copies it back. kiln.DeviceArray wraps it with the CUDA array interface.
  nb::class_<NDArray>(m, "DeviceResult")
      .def_prop_ro("ptr", [](NDArray& a) { return reinterpret_cast<uintptr_t>(a.data()); })
      .def_prop_ro("shape", [](const NDArray& a) { return tuple_of(a.shape()); })
      .def_prop_ro("dtype",
                   [](const NDArray& a) { return std::string(kiln::dtype_name(a.dtype())); })
      .def_prop_ro(
          "device",
          [](const NDArray& a) { return std::string(kiln::device_name(a.place().device)); })
      .def_prop_ro("index", [](const NDArray& a) { return a.place().index; })
      .def("host",
           [](const NDArray& a) {
             NDArray h;
             {
               nb::gil_scoped_release release;
               h = a.to_host();
             }
             return to_numpy(h);
           })
      // The memory as a DLPack producer on kDLCUDA (nanobind's ndarray object: __dlpack__ and
      // __dlpack_device__), holding the result. Only for device cuda: cuda-emu's memory is host
      // memory, which no CUDA consumer may read as device memory.
      .def("dlpack_view", [](NDArray& a) {
        if (a.place().device != kiln::Device::Cuda)
          throw nb::buffer_error("kiln: only results on device cuda export DLPack device memory");
        std::vector<size_t> shape(a.shape().begin(), a.shape().end());
        return nb::ndarray<nb::ro>(a.data(), shape.size(), shape.data(), holding(a), nullptr,
                                   dlpack_of(a.dtype()), nb::device::cuda::value, a.place().index);
      });
  m.def("load_npy", [](const std::string& path, const std::vector<int64_t>& chunks) {
    return kiln::load_npy(path, shape_of(chunks));
  });
  m.def("save_npy", [](const std::string& path, const Array& a) {
    nb::gil_scoped_release release;  // (not interruptible: save_npy takes no options)
    kiln::save_npy(path, a);
  });

  nb::class_<kiln::random::Generator>(m, "Generator")
      .def(nb::init<uint64_t>())
      .def("uniform",
           [](kiln::random::Generator& g, double lo, double hi, const std::vector<int64_t>& shape,
              const std::vector<int64_t>& chunks, const std::string& t) {
             return g.uniform(lo, hi, shape_of(shape), shape_of(chunks), dtype_named(t));
           })
      .def("normal",
           [](kiln::random::Generator& g, double mean, double std,
              const std::vector<int64_t>& shape, const std::vector<int64_t>& chunks) {
             return g.normal(mean, std, shape_of(shape), shape_of(chunks));
           })
      .def("integers",
           [](kiln::random::Generator& g, int64_t lo, int64_t hi, const std::vector<int64_t>& shape,
              const std::vector<int64_t>& chunks, const std::string& t) {
             return g.integers(lo, hi, shape_of(shape), shape_of(chunks), dtype_named(t));
           });

  // ---- evaluation ----
  // A compute's task counters, read by a Python thread while the compute runs without the GIL
  // (the progress bar kiln.compute draws where stderr is not a terminal: notebooks).
  nb::class_<TaskCounters>(m, "TaskCounters")
      .def(nb::init<>())
      .def_prop_ro("done", [](const TaskCounters& c) { return c.done.load(); })
      .def_prop_ro("total", [](const TaskCounters& c) { return c.total.load(); });
  m.def(
      "compute",
      [](const std::vector<Array>& arrays, std::optional<std::string> device, int threads,
         bool progress, const std::string& trace, TaskCounters* counters, bool keep_on_device) {
        kiln::ComputeOptions o = compute_options(device, threads, progress);
        o.trace_file = trace;
        o.keep_on_device = keep_on_device;
        if (counters) {
          o.tasks_done = &counters->done;
          o.tasks_total = &counters->total;
        }
        auto out = compute_released(arrays, o);
        nb::list results;
        for (const NDArray& a : out)
          results.append(a.on_device() ? nb::cast(a) : to_numpy(a));  // a DeviceResult
        return results;
      },
      "arrays"_a, "device"_a = nb::none(), "threads"_a = 0, "progress"_a = false, "trace"_a = "",
      "counters"_a = nb::none(), "keep_on_device"_a = false);
  // What --emit-ir prints for computing `arrays` (the IR after each pass and the fusion summary),
  // and the kernels planned (their IR and code): planned, not computed.
  m.def(
      "explain",
      [](const std::vector<Array>& arrays, std::optional<std::string> device, bool kernels) {
        std::ostringstream ir, code;
        kiln::ComputeOptions o = compute_options(device, 0, false);
        o.ir = &ir;
        if (kernels) o.kernels = &code;
        o.plan_only = true;
        compute_released(arrays, o);
        return ir.str() + code.str();
      },
      "arrays"_a, "device"_a = nb::none(), "kernels"_a = false);
  // The fused graph of computing `arrays`, as Graphviz DOT, written to `path` (planned only).
  m.def("emit_dot", [](const std::vector<Array>& arrays, const std::string& path,
                       std::optional<std::string> device) {
    kiln::ComputeOptions o = compute_options(device, 0, false);
    o.dot_file = path;
    o.plan_only = true;
    compute_released(arrays, o);
  });
  m.def("stats", [] {
    kiln::Stats s = kiln::stats();
    nb::dict d;
    d["plans_built"] = s.plans_built;
    d["plan_cache_hits"] = s.plan_cache_hits;
    d["computes"] = s.computes;
    d["tasks"] = s.tasks;
    d["kernels_compiled"] = s.kernels_compiled;
    d["kernels_from_disk"] = s.kernels_from_disk;
    d["compile_seconds"] = s.compile_seconds;
    d["last_cached"] = s.last_cached;
    d["last_tasks"] = s.last_tasks;
    d["last_kernels"] = s.last_kernels;
    d["last_peak_bytes"] = s.last_peak_bytes;
    d["last_seconds"] = s.last_seconds;
    return d;
  });
  m.def("clear_plan_cache", &kiln::clear_plan_cache);
  m.def(
      "persist_all",
      [](const std::vector<Array>& arrays, std::optional<std::string> device, int threads) {
        return interruptible(
            compute_options(device, threads, false),
            [&](const kiln::ComputeOptions& o) { return kiln::persist(arrays, o); });
      },
      "arrays"_a, "device"_a = nb::none(), "threads"_a = 0);

  // kiln.distributed (python/kiln/distributed.py; docs/DISTRIBUTED.md).
  nb::module_ dm = m.def_submodule("distributed");
  dm.def("init", [] {
    nb::gil_scoped_release release;
    kiln::distributed::init();
  });
  dm.def("active", &kiln::distributed::active);
  dm.def("rank", &kiln::distributed::rank);
  dm.def("size", &kiln::distributed::size);
  dm.def("library", &kiln::distributed::library);
  dm.def("host", &kiln::distributed::host);
  dm.def("finalize", [] {
    nb::gil_scoped_release release;
    kiln::distributed::finalize();
  });
  dm.def("load_npy_shards", [](const std::string& path, const std::vector<int64_t>& chunks) {
    nb::gil_scoped_release release;  // (a collective: waits for the other ranks)
    return kiln::distributed::load_npy_shards(path, shape_of(chunks));
  });
  dm.def(
      "from_buffer_on", [](int rank, std::optional<HostArray> data, const std::string& dtype,
                           const std::vector<int64_t>& shape, const std::vector<int64_t>& chunks) {
        const kiln::DType t = dtype_named(dtype);
        // An array that does not match: null, so that every rank raises (a collective), this
        // one saying why.
        bool matches = data && dtype_of(data->dtype()) == t && data->ndim() == shape.size();
        for (size_t d = 0; matches && d < shape.size(); ++d)
          matches = static_cast<int64_t>(data->shape(d)) == shape[d];
        const void* p = matches ? data->data() : nullptr;
        nb::gil_scoped_release release;  // (a collective; the data is copied)
        try {
          return kiln::distributed::from_buffer_on(rank, p, t, shape_of(shape), shape_of(chunks));
        } catch (const kiln::Error&) {
          if (data && !matches)
            throw kiln::Error(
                "kiln.distributed.from_array_on: the array's dtype or shape "
                "differs from the dtype and shape given");
          throw;
        }
      });
  m.def("compile_target", &kiln::compile_target);
  m.def("device_target", [](const std::string& d) { return kiln::device_target(device_named(d)); });

  // ---- linear algebra ----
  nb::module_ la = m.def_submodule("linalg");
  la.def("qr", [](const Array& a) {
    auto r = kiln::linalg::qr(a);
    return std::make_pair(r.q, r.r);
  });
  la.def("svd", [](const Array& a) {
    auto r = kiln::linalg::svd(a);
    return nb::make_tuple(r.u, r.s, r.vh);
  });
  la.def("svd_compressed", [](const Array& a, int64_t k, int iters, int64_t over, uint64_t seed) {
    auto r = kiln::linalg::svd_compressed(a, k, iters, over, seed);
    return nb::make_tuple(r.u, r.s, r.vh);
  });
  la.def("cholesky", &kiln::linalg::cholesky);
  la.def("solve", &kiln::linalg::solve);
  la.def("inv", &kiln::linalg::inv);
  la.def("det", &kiln::linalg::det);
  la.def("slogdet", [](const Array& a) {
    auto r = kiln::linalg::slogdet(a);
    return std::make_pair(r.sign, r.logabsdet);
  });
  la.def("eigh", [](const Array& a) {
    auto r = kiln::linalg::eigh(a);
    return std::make_pair(r.eigenvalues, r.eigenvectors);
  });
  la.def("lstsq", [](const Array& a, const Array& b) {
    auto r = kiln::linalg::lstsq(a, b);
    return nb::make_tuple(r.x, r.residuals, r.rank, r.s);
  });
  la.def("norm",
         [](const Array& x, std::optional<double> ord, std::vector<int> axis, bool keepdims) {
           return kiln::linalg::norm(x, ord, std::move(axis), keepdims);
         });
  la.def("norm_named",
         [](const Array& x, const std::string& ord, std::vector<int> axis, bool keepdims) {
           return kiln::linalg::norm(x, ord, std::move(axis), keepdims);
         });

  // ---- GLMs ----
  nb::module_ glm = m.def_submodule("glm");
  glm.def(
      "solve",
      [](const std::string& solver, const Array& X, const Array& y, const std::string& family,
         const std::string& penalty, double lamduh, int max_iter, double tol, bool normalize,
         double gtol) {
        kiln::glm::Options o;
        o.family = kiln::glm::family(family);
        o.penalty = kiln::glm::regularizer(penalty);
        o.lamduh = lamduh;
        o.max_iter = max_iter;
        o.tol = tol;
        o.normalize = normalize;
        o.gtol = gtol;
        o.compute.progress = false;
        kiln::glm::Result r = interruptible(o.compute, [&](const kiln::ComputeOptions& c) {
          kiln::glm::Options with = o;
          with.compute = c;
          return kiln::glm::solve(solver, X, y, with);
        });
        nb::dict d;
        d["coef"] = r.coef;
        d["n_iter"] = r.n_iter;
        d["loss"] = r.loss;
        d["converged"] = r.converged;
        return d;
      },
      "solver"_a, "X"_a, "y"_a, "family"_a = "logistic", "penalty"_a = "none", "lamduh"_a = 0.1,
      "max_iter"_a = 0, "tol"_a = 0.0, "normalize"_a = true, "gtol"_a = 0.0);
  // The estimators' fit (kiln::glm::LinearModel): the fitted attributes, as a dict.
  glm.def(
      "fit_model",
      [](const std::string& family, const Array& X, const Array& y, bool fit_intercept,
         const std::string& solver, const std::string& penalty, double C, double l1_ratio,
         int max_iter, double tol, double rho) {
        std::unique_ptr<kiln::glm::LinearModel> model;
        kiln::glm::Family f = kiln::glm::family(family);
        if (f == kiln::glm::Family::Logistic)
          model = std::make_unique<kiln::glm::LogisticRegression>();
        else if (f == kiln::glm::Family::Normal)
          model = std::make_unique<kiln::glm::LinearRegression>();
        else
          model = std::make_unique<kiln::glm::PoissonRegression>();
        model->fit_intercept = fit_intercept;
        model->solver = solver;
        model->penalty = penalty;
        model->C = C;
        model->l1_ratio = l1_ratio;
        model->max_iter = max_iter;
        model->tol = tol;
        model->rho = rho;
        model->compute.progress = false;
        interruptible(model->compute, [&](const kiln::ComputeOptions& c) {
          model->compute = c;
          model->fit(X, y);
          return 0;
        });
        nb::dict d;
        d["coef"] = model->coef_;
        d["intercept"] = model->intercept_;
        d["n_iter"] = model->n_iter_;
        d["loss"] = model->loss_;
        d["converged"] = model->converged_;
        return d;
      },
      "family"_a, "X"_a, "y"_a, "fit_intercept"_a, "solver"_a, "penalty"_a, "C"_a, "l1_ratio"_a,
      "max_iter"_a, "tol"_a, "rho"_a);
}
