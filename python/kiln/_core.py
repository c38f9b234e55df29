"""kiln.Array and the functions that make, combine and compute lazy arrays.

Everything here builds Kiln's expression graph through the extension module (kiln._kiln, the C++
API); nothing runs until compute(), persist(), or a conversion that needs values (np.asarray,
bool(), float(), printing values) asks for them.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import math
import numbers
import operator
import os
import sys
import warnings

import numpy as np

from . import _kiln

KilnError = _kiln.KilnError  # a ValueError; the two below are also TypeError and MemoryError
KilnTypeError = _kiln.KilnTypeError
KilnMemoryError = _kiln.KilnMemoryError

# The dtypes Kiln arrays hold, by NumPy's name.
_DTYPES = ("bool", "int32", "int64", "float32", "float64")


def _dtype_name(dtype) -> str:
    """NumPy dtype (or anything np.dtype takes) -> Kiln's dtype name; TypeError if unsupported."""
    d = np.dtype(dtype)
    if d.name not in _DTYPES:
        raise TypeError(
            f"kiln: unsupported dtype {d} (Kiln arrays hold bool, int32, int64, float32 or "
            f"float64; convert with .astype first)"
        )
    return d.name


# ---- configuration ------------------------------------------------------------------------------

_config = {"fallback": "error", "device": None, "threads": 0}
_CONFIG_VALUES = {
    "fallback": ("error", "numpy"),
    "device": (None, "cpu", "interp", "cuda-emu", "cuda"),
}


class _ConfigSet(contextlib.AbstractContextManager):
    def __init__(self, old):
        self._old = old

    def __exit__(self, *exc):
        _config.update(self._old)
        return False


class config:
    """Kiln's settings, as dask.config: ``kiln.config.set(fallback="numpy")`` for the rest of
    the program, or ``with kiln.config.set(device="interp"): ...`` for a block.

    - ``fallback``: ``"error"`` (default): a NumPy function Kiln does not implement raises
      TypeError; ``"numpy"``: it computes its Kiln inputs and runs NumPy's function, with a
      warning (the whole arrays are materialized).
    - ``device``: where computes run: None (KILN_DEVICE, else cpu), "cpu", "interp",
      "cuda-emu", "cuda".
    - ``threads``: worker threads (0: KILN_THREADS, else every core).
    """

    @staticmethod
    def set(**settings):
        old = {}
        for key, value in settings.items():
            if key not in _config:
                raise TypeError(f"kiln.config.set: no setting named {key!r} (there are {sorted(_config)})")
            allowed = _CONFIG_VALUES.get(key)
            if allowed is not None and value not in allowed:
                raise ValueError(f"kiln.config.set: {key} must be one of {allowed}, got {value!r}")
            if key == "threads" and (not isinstance(value, numbers.Integral) or value < 0):
                raise ValueError(f"kiln.config.set: threads must be an integer >= 0, got {value!r}")
            old[key] = _config[key]
        _config.update(settings)
        return _ConfigSet(old)

    @staticmethod
    def get(key):
        return _config[key]


# ---- conversions --------------------------------------------------------------------------------


def _is_python_scalar(x) -> bool:
    # NumPy's scalars are strongly typed (NEP 50): they become 0-d arrays, not weak scalars.
    # (np.float64 subclasses float, so test np.generic first.)
    return not isinstance(x, np.generic) and isinstance(x, (bool, int, float))


def _operand(x):
    """A kiln.Array's graph node, a Python scalar (weak, NEP 50), or anything NumPy or DLPack
    can view as an array (wrapped without copying)."""
    if isinstance(x, Array):
        return x._a
    if _is_python_scalar(x):
        return x
    if isinstance(x, np.generic):
        return _kiln.scalar(x.item(), _dtype_name(x.dtype))
    return asarray(x)._a


_BINARY = _kiln.binary_codes()  # NumPy's names of binary functions -> the extension's codes


def _operator(name, reflected=False):
    """Array's operator method for the binary function `name` (`reflected`: the __r*__ form).
    The common operands (kiln arrays, Python scalars) take one call into the extension; building
    one operation is a benchmark (bench/RESULTS.md, "From Python")."""
    code, binary, new = _BINARY[name], _kiln.binary, object.__new__

    def op(self, other):
        t = type(other)
        if t is Array or t is float or t is int or t is bool:
            o = other._a if t is Array else other
            out = new(Array)
            out._a = binary(code, o, self._a) if reflected else binary(code, self._a, o)
            return out
        if not (isinstance(other, (Array, np.ndarray, np.generic)) or _is_python_scalar(other)):
            return NotImplemented
        return _binary(name, other, self) if reflected else _binary(name, self, other)

    op.__doc__ = f"{'other' if reflected else 'self'} {name} {'self' if reflected else 'other'}"
    return op


def _wrap(a) -> "Array":
    out = _new_array(Array)  # (Array's constructor checks its argument; this is Kiln's own)
    out._a = a
    return out


_new_array = object.__new__


def _axes(axis, ndim):
    """NumPy's axis argument -> Kiln's list (None: every axis, which Kiln writes as [])."""
    if axis is None:
        return []
    if isinstance(axis, (tuple, list)):
        return [operator.index(a) for a in axis]
    return [operator.index(axis)]


def _no_out(name, out):
    if out is not None:
        raise TypeError(
            f"kiln.{name}: out= is not supported (Kiln arrays are immutable, lazy expressions; "
            f"use the returned array)"
        )


def _shape_arg(shape):
    if isinstance(shape, numbers.Integral):
        return [int(shape)]
    return [operator.index(s) for s in shape]


def _chunks_arg(chunks, shape):
    """Dask's chunks for an array of `shape` -> Kiln's block shape: a tuple with an int per dim
    (-1 or None: the whole dim), one int for every dim, "auto" or None (Kiln picks)."""
    ndim = len(shape)
    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        return []
    if isinstance(chunks, numbers.Integral):
        chunks = (int(chunks),) * ndim
    if isinstance(chunks, dict):
        raise TypeError("kiln: chunks as a dict is not supported; give the block shape, e.g. (1000, 1000)")
    if isinstance(chunks, str) or len(chunks) != ndim:
        raise ValueError(f"kiln: chunks {chunks!r} for an array of {ndim} dims (give one block "
                         f"size per dim, -1 for a whole dim)")
    out = []
    for c, n in zip(chunks, shape):
        if isinstance(c, (tuple, list)):
            sizes = set(c[:-1]) if len(c) > 1 else set(c)
            if len(sizes) != 1 or (len(c) > 1 and c[-1] > c[0]):
                raise ValueError(
                    f"kiln: chunks {tuple(chunks)}: Kiln's blocks are regular (equal blocks, the "
                    f"last one shorter); give the block shape"
                )
            out.append(int(c[0]))
        elif c is None or c == -1:
            out.append(builtins.max(int(n), 1))
        elif isinstance(c, str) and c == "auto":
            out.append(0)
        else:
            c = operator.index(c)
            if c <= 0:
                raise ValueError(f"kiln: chunks {tuple(chunks)}: a block size must be positive "
                                 f"(-1: the whole dim)")
            out.append(c)
    return out


# ---- the array ----------------------------------------------------------------------------------


class Array:
    """A lazy, chunked array: an expression of Kiln's graph. Operators, methods and NumPy's
    functions (through ``__array_function__`` and ``__array_ufunc__``) build new expressions;
    ``compute()`` fuses and runs them and returns a NumPy array."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100.0  # ndarray <op> kiln.Array defers to Kiln

    def __init__(self, node):
        if not isinstance(node, _kiln.Array):
            raise TypeError("kiln.Array is made by kiln.asarray, kiln.zeros, ..., not directly")
        self._a = node

    # ---- attributes ----
    @property
    def shape(self) -> tuple:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._a.dtype)

    @property
    def ndim(self) -> int:
        return len(self._a.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self._a.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def chunks(self) -> tuple:
        """The block sizes along each dim, as Dask's: ((1000, 1000, 500), (800,))."""
        return self._a.chunks

    @property
    def chunksize(self) -> tuple:
        return tuple(builtins.max(c) if c else 0 for c in self._a.chunks)

    @property
    def numblocks(self) -> tuple:
        return tuple(len(c) for c in self._a.chunks)

    # No `npartitions`: code written for Dask reads it to decide that it can call to_delayed()
    # (dask-glm's admm), which a kiln array does not have.

    @property
    def device(self) -> str:
        return _config["device"] or "cpu"

    def to_device(self, device, /, *, stream=None):
        _check_device(device)
        return self

    @property
    def T(self) -> "Array":
        return self.transpose()

    @property
    def mT(self) -> "Array":
        if self.ndim < 2:
            raise ValueError(f"kiln: mT needs an array of 2 or more dims, got shape {self.shape}")
        perm = list(range(self.ndim))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return self.transpose(perm)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d kiln array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return (
            f"kiln.Array<shape={self.shape}, dtype={self.dtype}, chunksize={self.chunksize}, "
            f"blocks={self.numblocks}>"
        )

    def _repr_html_(self) -> str:
        from ._repr import array_html

        return array_html(self)

    # ---- evaluation ----
    def compute(self, **options) -> np.ndarray:
        """Fuses, compiles and runs the expression; a new NumPy array (C order)."""
        return compute(self, **options)[0]

    def visualize(self, filename=None) -> str:
        """The fused graph of computing this array, as Graphviz DOT (kiln.visualize)."""
        return visualize(self, filename=filename)

    def persist(self, **options) -> "Array":
        """Computes the array and keeps its blocks: the returned array reads them instead of
        evaluating the expression again."""
        device = options.get("device", _config["device"])
        threads = options.get("threads", _config["threads"])
        return _wrap(self._a.persist(device=device, threads=threads))

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError(
                "kiln: np.asarray(..., copy=False) cannot view a lazy kiln array; computing it "
                "makes a new array (use copy=None or True)"
            )
        out = self.compute()
        return out if dtype is None else out.astype(dtype, copy=False)

    def _scalar(self, kind, name):
        if self.size != 1:
            raise ValueError(
                f"kiln: {name} of an array of shape {self.shape} is ambiguous (it needs exactly "
                f"one element; use .any() or .all() for truth values)"
            )
        return kind(self.compute().reshape(()).item())

    def __bool__(self):
        return self._scalar(bool, "bool()")

    def __int__(self):
        return self._scalar(int, "int()")

    def __float__(self):
        return self._scalar(float, "float()")

    def __complex__(self):
        return self._scalar(complex, "complex()")

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise TypeError(f"kiln: only integer arrays can be used as an index, not {self.dtype}")
        return self._scalar(int, "operator.index()")

    def item(self):
        """The single element as a Python scalar (computes)."""
        return self._scalar(lambda v: v, "item()")

    def tolist(self):
        return self.compute().tolist()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Computes the array and exports the result through DLPack (NumPy's capsule)."""
        if copy is False:
            raise BufferError("kiln: a lazy array has no buffer to share without computing it")
        kwargs = {}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        return self.compute().__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: results are computed into host memory

    # ---- Dask's collection protocol: dask.compute(x) and dask.persist(x) compute kiln arrays
    # through Kiln (one task each), so code written for Dask arrays (dask-glm's solvers) runs on
    # them; dask's own functions still do not take them as dask arrays. ----
    def _dask_key(self):
        return f"kiln-{id(self):x}"

    def __dask_graph__(self):
        return {self._dask_key(): (_compute_one, self)}

    def __dask_keys__(self):
        return [self._dask_key()]

    def __dask_layers__(self):
        return (self._dask_key(),)

    def __dask_tokenize__(self):
        return ("kiln.Array", self._dask_key())

    @staticmethod
    def __dask_optimize__(dsk, keys, **kwargs):
        return dsk

    @staticmethod
    def __dask_scheduler__(dsk, keys, **kwargs):
        from dask.local import get_sync  # Kiln computes in parallel itself

        return get_sync(dsk, keys, **kwargs)

    def __dask_postcompute__(self):
        return _first, ()

    def __dask_postpersist__(self):
        return _from_persisted, (self._dask_key(), self.chunksize)

    # ---- NumPy's protocols ----
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from ._numpy_api import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from ._numpy_api import array_function

        return array_function(func, types, args, kwargs)

    def __array_namespace__(self, *, api_version=None):
        if api_version not in (None, "2024.12", "2023.12", "2022.12", "2021.12"):
            raise ValueError(f"kiln: unsupported array API version {api_version!r}")
        import kiln

        return kiln

    # ---- operators ----
    __add__ = _operator("add")
    __radd__ = _operator("add", True)
    __sub__ = _operator("subtract")
    __rsub__ = _operator("subtract", True)
    __mul__ = _operator("multiply")
    __rmul__ = _operator("multiply", True)
    __truediv__ = _operator("true_divide")
    __rtruediv__ = _operator("true_divide", True)
    __floordiv__ = _operator("floor_divide")
    __rfloordiv__ = _operator("floor_divide", True)
    __mod__ = _operator("remainder")
    __rmod__ = _operator("remainder", True)
    __pow__ = _operator("power")
    __rpow__ = _operator("power", True)
    __and__ = _operator("bitwise_and")
    __rand__ = _operator("bitwise_and", True)
    __or__ = _operator("bitwise_or")
    __ror__ = _operator("bitwise_or", True)
    __xor__ = _operator("bitwise_xor")
    __rxor__ = _operator("bitwise_xor", True)
    __lshift__ = _operator("left_shift")
    __rlshift__ = _operator("left_shift", True)
    __rshift__ = _operator("right_shift")
    __rrshift__ = _operator("right_shift", True)
    __lt__ = _operator("less")
    __le__ = _operator("less_equal")
    __gt__ = _operator("greater")
    __ge__ = _operator("greater_equal")
    __eq__ = _operator("equal")
    __ne__ = _operator("not_equal")
    __hash__ = None  # == builds an array, as NumPy's

    def __matmul__(self, other):
        if not isinstance(other, (Array, np.ndarray)):
            return NotImplemented
        return matmul(self, other)

    def __rmatmul__(self, other):
        if not isinstance(other, (Array, np.ndarray)):
            return NotImplemented
        return matmul(other, self)

    def __neg__(self):
        return _wrap(_kiln.unary("negative", self._a))

    def __pos__(self):
        return self

    def __abs__(self):
        return _wrap(_kiln.unary("absolute", self._a))

    def __invert__(self):
        return _wrap(_kiln.unary("invert", self._a))

    def __setitem__(self, key, value):
        """x[key] = value as Dask arrays do: x takes a new expression (where(selected, value,
        x)); arrays built from x before keep the old values (no views). _indexing.setitem."""
        from ._indexing import setitem

        self._a = setitem(self, key, value)._a

    # ---- indexing ----
    def __getitem__(self, key):
        from ._indexing import getitem

        return getitem(self, key)

    # ---- methods ----
    def astype(self, dtype, copy=True):
        name = _dtype_name(dtype)
        if name == self._a.dtype and not copy:
            return self
        return _wrap(self._a.astype(name))

    def reshape(self, *shape, order="C"):
        if order != "C":
            raise ValueError("kiln: reshape supports order='C' only")
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = shape[0]
        return _wrap(self._a.reshape(_shape_arg(shape)))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0] or ()
        return _wrap(self._a.transpose([operator.index(a) for a in axes]))

    def swapaxes(self, a, b):
        perm = list(range(self.ndim))
        a, b = _normalize_axis(a, self.ndim), _normalize_axis(b, self.ndim)
        perm[a], perm[b] = perm[b], perm[a]
        return self.transpose(perm)

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def rechunk(self, chunks="auto"):
        """New block shape (Dask's rechunk with regular chunks): a tuple of ints, one int for
        every dim, -1 or None for a whole dim."""
        block = _chunks_arg(chunks, self.shape)
        block = [self.shape[i] if b == 0 else b for i, b in enumerate(block)] if block else []
        return _wrap(self._a.rechunk(block))

    def copy(self):
        return self  # immutable: a copy is the same expression

    def conj(self):
        return self

    def round(self, decimals=0):
        return round(self, decimals)

    def clip(self, min=None, max=None):
        return clip(self, min, max)

    def dot(self, other):
        return dot(self, other)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return min(self, axis=axis, out=out, keepdims=keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return max(self, axis=axis, out=out, keepdims=keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return all(self, axis=axis, out=out, keepdims=keepdims)

    def any(self, axis=None, out=None, keepdims=False):
        return any(self, axis=axis, out=out, keepdims=keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return argmin(self, axis=axis, out=out, keepdims=keepdims)

    def argmax(self, axis=None, out=None, keepdims=False):
        return argmax(self, axis=axis, out=out, keepdims=keepdims)


def _compute_one(x):
    return x.compute()


def _first(results):
    return results[0]


def _from_persisted(dsk, key, chunks, rename=None):
    return asarray(dsk[key], chunks=chunks)


def _normalize_axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


# ---- making arrays ------------------------------------------------------------------------------

_DEVICES = (None, "cpu", "interp", "cuda-emu", "cuda")


def _check_device(device):
    """The array API's device= argument: a Kiln device name (where computes run is chosen by
    kiln.config, not by the array)."""
    if device not in _DEVICES:
        raise ValueError(f"kiln: unknown device {device!r} (Kiln's: cpu, interp, cuda-emu, cuda)")


def asarray(a, dtype=None, chunks="auto", *, copy=None, device=None):
    """A kiln array over ``a``: a kiln array (returned as is, or cast), a NumPy array or any
    object with ``__dlpack__``/``__array__`` on the host (viewed without copying when it is
    C-contiguous in a dtype Kiln holds; Kiln then reads it lazily, so it must not change while
    anything computed from it is in use), or a Python scalar or nested list (copied).
    ``chunks`` is the block shape (Dask's chunks=(1000, 1000)), "auto" by default."""
    _check_device(device)
    if isinstance(a, Array):
        out = a if dtype is None else a.astype(dtype, copy=False)
        return out if chunks == "auto" else out.rechunk(chunks)
    if not isinstance(a, np.ndarray) and (
        hasattr(type(a), "__kiln_device_interface__") or hasattr(a, "__cuda_array_interface__")
    ):  # GPU memory (CuPy, a DeviceArray): read in place by computes on that device
        from ._device import device_input

        if copy:
            raise ValueError("kiln.asarray: copy=True of GPU memory is not supported (copy it "
                             "with its own library first)")
        out = _wrap(device_input(a, lambda shape: _chunks_arg(chunks, shape)))
        return out if dtype is None else out.astype(dtype, copy=False)
    if copy is False and not isinstance(a, np.ndarray) and not hasattr(a, "__dlpack__"):
        raise ValueError("kiln.asarray: copy=False needs an array to view")
    if isinstance(a, np.ndarray) or hasattr(a, "__array_interface__"):
        arr = np.asarray(a)
    elif hasattr(a, "__dlpack__"):
        arr = np.from_dlpack(a)
    else:
        arr = np.asarray(a)
    if arr.dtype.kind == "O":
        raise TypeError(f"kiln.asarray: cannot make an array of Python objects ({type(a).__name__})")
    if dtype is not None:
        arr = arr.astype(_dtype_name(dtype), copy=False)
    elif arr.dtype.name not in _DTYPES:
        raise TypeError(
            f"kiln.asarray: unsupported dtype {arr.dtype} (Kiln arrays hold bool, int32, int64, "
            f"float32 or float64; convert with .astype first)"
        )
    if copy:
        arr = arr.copy()
    elif not arr.flags.c_contiguous:
        if copy is False:
            raise ValueError("kiln.asarray: copy=False, but the array is not C-contiguous")
        arr = np.ascontiguousarray(arr)
    return _wrap(_kiln.from_host(arr, _chunks_arg(chunks, arr.shape)))


def from_array(x, chunks="auto"):
    """Dask's name for asarray."""
    return asarray(x, chunks=chunks)


def from_npy(path, chunks="auto"):
    """An .npy file, memory-mapped and read lazily by the kernels that touch it (the file must
    stay as it is while the array is in use)."""
    shape = np.load(str(path), mmap_mode="r").shape if chunks != "auto" else ()
    return _wrap(_kiln.load_npy(str(path), _chunks_arg(chunks, shape)))


def to_npy(path, a):
    """Computes ``a`` into an .npy file, block by block."""
    _kiln.save_npy(str(path), asarray(a)._a)


def full(shape, fill_value, dtype=None, chunks="auto", *, device=None):
    _check_device(device)
    shape = _shape_arg(shape)
    if dtype is None:
        if isinstance(fill_value, np.generic):
            dtype = fill_value.dtype
        elif isinstance(fill_value, bool):
            dtype = bool
        elif isinstance(fill_value, numbers.Integral):
            dtype = np.int64
        else:
            dtype = np.float64
    value = fill_value.item() if isinstance(fill_value, np.generic) else fill_value
    return _wrap(_kiln.full(shape, value, _dtype_name(dtype), _chunks_arg(chunks, shape)))


def zeros(shape, dtype=float, chunks="auto", *, device=None):
    return full(shape, 0, float if dtype is None else dtype, chunks, device=device)


def ones(shape, dtype=float, chunks="auto", *, device=None):
    return full(shape, 1, float if dtype is None else dtype, chunks, device=device)


def empty(shape, dtype=float, chunks="auto", *, device=None):
    """As zeros: Kiln has no uninitialized memory to hand out."""
    return full(shape, 0, float if dtype is None else dtype, chunks, device=device)


def _like(a, dtype, shape, chunks):
    a = a if isinstance(a, Array) else asarray(a)
    shape = a.shape if shape is None else shape
    dtype = a.dtype if dtype is None else dtype
    if chunks == "auto" and tuple(_shape_arg(shape)) == a.shape:
        chunks = a.chunksize
    return shape, dtype, chunks


def full_like(a, fill_value, dtype=None, chunks="auto", shape=None, *, device=None):
    _check_device(device)
    shape, dtype, chunks = _like(a, dtype, shape, chunks)
    return full(shape, fill_value, dtype, chunks)


def zeros_like(a, dtype=None, chunks="auto", shape=None, *, device=None):
    _check_device(device)
    return full_like(a, 0, dtype, chunks, shape)


def ones_like(a, dtype=None, chunks="auto", shape=None, *, device=None):
    _check_device(device)
    return full_like(a, 1, dtype, chunks, shape)


def empty_like(a, dtype=None, chunks="auto", shape=None, *, device=None):
    _check_device(device)
    return full_like(a, 0, dtype, chunks, shape)


def arange(start, stop=None, step=1, dtype=None, chunks="auto", *, device=None):
    _check_device(device)
    if stop is None:
        start, stop = 0, start
    if builtins.all(isinstance(v, numbers.Integral) for v in (start, stop, step)):
        n = len(range(start, stop, step))
    else:
        n = builtins.max(0, math.ceil((stop - start) / step))
    out = _wrap(_kiln.arange(start, stop, step, _chunks_arg(chunks, [n])))
    return out if dtype is None else out.astype(dtype, copy=False)


def linspace(start, stop, num=50, endpoint=True, dtype=None, chunks="auto", *, device=None):
    _check_device(device)
    out = _wrap(_kiln.linspace(float(start), float(stop), int(num), bool(endpoint), _chunks_arg(chunks, [int(num)])))
    return out if dtype is None else out.astype(dtype, copy=False)


# ---- element-wise -------------------------------------------------------------------------------


def _binary(name, a, b):
    a, b = _operand(a), _operand(b)
    if not isinstance(a, _kiln.Array) and not isinstance(b, _kiln.Array):
        a = _operand(np.asarray(a))
    return _wrap(_kiln.binary(_BINARY[name], a, b))


def _unary(name, x):
    return _wrap(_kiln.unary(name, _operand(x) if not _is_python_scalar(x) else asarray(x)._a))


def where(condition, x=None, y=None):
    if x is None or y is None:
        raise TypeError("kiln.where: the one-argument form (nonzero) is not supported; give x and y")
    c = _operand(condition)
    if not isinstance(c, _kiln.Array):
        c = asarray(condition)._a
    return _wrap(_kiln.where(c, _operand(x), _operand(y)))


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    _no_out("clip", out)
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    x = asarray(a)
    if isinstance(lo, (Array, np.ndarray)) or isinstance(hi, (Array, np.ndarray)):
        if lo is not None:
            x = maximum(x, lo)
        if hi is not None:
            x = minimum(x, hi)
        return x
    if lo is None and hi is None:
        raise ValueError("kiln.clip: give a_min, a_max or both")
    if lo is None:
        return minimum(x, hi)
    if hi is None:
        return maximum(x, lo)
    lo = lo.item() if isinstance(lo, np.generic) else lo
    hi = hi.item() if isinstance(hi, np.generic) else hi
    return _wrap(_kiln.clip(x._a, lo, hi))


def round(a, decimals=0, out=None):
    _no_out("round", out)
    if decimals != 0:
        raise TypeError("kiln.round: only decimals=0 is supported")
    return _unary("round", a)


around = round


def astype(x, dtype, /, *, copy=True, device=None):
    return asarray(x).astype(dtype, copy=copy)


# ---- reductions ---------------------------------------------------------------------------------


def _reduce(fn, a, axis, dtype, out, keepdims):
    _no_out(fn, out)
    x = asarray(a)
    if axis == ():
        return x if dtype is None else x.astype(dtype)
    if dtype is not None:
        x = x.astype(dtype)
    out = _wrap(_kiln.reduce(fn, x._a, _axes(axis, x.ndim), bool(keepdims)))
    # sum(int32 array, dtype=int32) is int32 in NumPy (the int64 sum wraps to the same bits)
    return out if dtype is None or fn == "mean" else out.astype(dtype, copy=False)


def sum(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("sum", a, axis, dtype, out, keepdims)


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("prod", a, axis, dtype, out, keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("mean", a, axis, dtype, out, keepdims)


def min(a, axis=None, out=None, keepdims=False):
    return _reduce("min", a, axis, None, out, keepdims)


def max(a, axis=None, out=None, keepdims=False):
    return _reduce("max", a, axis, None, out, keepdims)


amin, amax = min, max


def all(a, axis=None, out=None, keepdims=False):
    return _reduce("all", a, axis, None, out, keepdims)


def any(a, axis=None, out=None, keepdims=False):
    return _reduce("any", a, axis, None, out, keepdims)


def _moment(fn, a, axis, dtype, out, ddof, keepdims, correction):
    _no_out(fn, out)
    x = asarray(a) if dtype is None else asarray(a).astype(dtype)
    ddof = int(correction if correction is not None else ddof)
    x, axes, keepdims = _each_element_if_no_axis(x, axis, keepdims)
    impl = getattr(_kiln, fn) if fn.startswith("nan") else getattr(_kiln.Array, fn)
    return _wrap(impl(x._a, axes, keepdims, ddof))


def _each_element_if_no_axis(x, axis, keepdims):
    """axis=() reduces over no axis (each element alone), not over every axis as Kiln's []: a new
    trailing axis of length 1 is reduced instead."""
    if axis == ():
        return x.reshape(x.shape + (1,)), [-1], False
    return x, _axes(axis, x.ndim), bool(keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    return _moment("var", a, axis, dtype, out, ddof, keepdims, correction)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    return _moment("std", a, axis, dtype, out, ddof, keepdims, correction)


def argmin(a, axis=None, out=None, *, keepdims=False):
    _no_out("argmin", out)
    x = asarray(a)
    return _wrap(x._a.argmin(None if axis is None else operator.index(axis), bool(keepdims)))


def argmax(a, axis=None, out=None, *, keepdims=False):
    _no_out("argmax", out)
    x = asarray(a)
    return _wrap(x._a.argmax(None if axis is None else operator.index(axis), bool(keepdims)))


# ---- NumPy's nan-functions: the reductions of the elements that are not NaN ----------------------
# (kiln::nanreduce: one fused pass, two for nanvar). An all-NaN slice gives NaN (nanmean, nanmin,
# nanmax, nanvar, nanstd; NumPy also warns), 0 (nansum), 1 (nanprod), or -1 (nanargmin,
# nanargmax: NumPy raises ValueError, which a lazy array cannot before it is computed).


def _nanreduce(fn, a, axis, dtype, out, keepdims):
    _no_out("nan" + fn, out)
    x = asarray(a)
    if dtype is not None:
        x = x.astype(dtype)
    x, axes, keepdims = _each_element_if_no_axis(x, axis, keepdims)  # nansum's NaN is then 0
    out = _wrap(_kiln.nanreduce(fn, x._a, axes, keepdims))
    return out if dtype is None or fn == "mean" else out.astype(dtype, copy=False)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    return _nanreduce("sum", a, axis, dtype, out, keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    return _nanreduce("prod", a, axis, dtype, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    return _nanreduce("mean", a, axis, dtype, out, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    return _nanreduce("min", a, axis, None, out, keepdims)


def nanmax(a, axis=None, out=None, keepdims=False):
    return _nanreduce("max", a, axis, None, out, keepdims)


def nanargmin(a, axis=None, out=None, *, keepdims=False):
    _no_out("nanargmin", out)
    x = asarray(a)
    axes = [] if axis is None else [operator.index(axis)]  # one axis, as NumPy's
    return _wrap(_kiln.nanreduce("argmin", x._a, axes, bool(keepdims)))


def nanargmax(a, axis=None, out=None, *, keepdims=False):
    _no_out("nanargmax", out)
    x = asarray(a)
    axes = [] if axis is None else [operator.index(axis)]  # one axis, as NumPy's
    return _wrap(_kiln.nanreduce("argmax", x._a, axes, bool(keepdims)))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    return _moment("nanvar", a, axis, dtype, out, ddof, keepdims, correction)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    return _moment("nanstd", a, axis, dtype, out, ddof, keepdims, correction)


# ---- structure ----------------------------------------------------------------------------------


def reshape(a, shape, order="C", *, newshape=None, copy=None):
    return asarray(a).reshape(shape if newshape is None else newshape, order=order)


def ravel(a, order="C"):
    return asarray(a).reshape(-1, order=order)


def transpose(a, axes=None):
    return asarray(a).transpose(axes)


def permute_dims(a, axes=None):
    return asarray(a).transpose(axes)


def swapaxes(a, axis1, axis2):
    return asarray(a).swapaxes(axis1, axis2)


def moveaxis(a, source, destination):
    x = asarray(a)
    src = [_normalize_axis(s, x.ndim) for s in ([source] if isinstance(source, numbers.Integral) else source)]
    dst = [_normalize_axis(d, x.ndim) for d in ([destination] if isinstance(destination, numbers.Integral) else destination)]
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.transpose(order)


def squeeze(a, axis=None):
    x = asarray(a)
    if axis is None:
        drop = {i for i, s in enumerate(x.shape) if s == 1}
    else:
        drop = {_normalize_axis(i, x.ndim) for i in _axes(axis, x.ndim)}
        for i in drop:
            if x.shape[i] != 1:
                raise ValueError(f"kiln.squeeze: axis {i} has size {x.shape[i]}, not 1")
    return x.reshape([s for i, s in enumerate(x.shape) if i not in drop])


def expand_dims(a, axis):
    x = asarray(a)
    axes = _axes(axis, x.ndim)
    ndim = x.ndim + len(axes)
    new = {_normalize_axis(i, ndim) for i in axes}
    shape, it = [], iter(x.shape)
    for i in range(ndim):
        shape.append(1 if i in new else next(it))
    return x.reshape(shape)


def broadcast_to(a, shape):
    return _wrap(asarray(a)._a.broadcast_to(_shape_arg(shape)))


def concatenate(arrays, axis=0, out=None, dtype=None):
    _no_out("concatenate", out)
    xs = [asarray(x) if dtype is None else asarray(x).astype(dtype) for x in arrays]
    if axis is None:
        xs, axis = [x.reshape(-1) for x in xs], 0
    return _wrap(_kiln.concatenate([x._a for x in xs], operator.index(axis)))


concat = concatenate


def stack(arrays, axis=0, out=None, dtype=None):
    _no_out("stack", out)
    xs = [asarray(x) if dtype is None else asarray(x).astype(dtype) for x in arrays]
    return _wrap(_kiln.stack([x._a for x in xs], operator.index(axis)))


def vstack(tup, dtype=None):
    xs = [asarray(x) for x in tup]
    xs = [x.reshape(1, -1) if x.ndim == 1 else x for x in xs]
    return concatenate(xs, 0, dtype=dtype)


def hstack(tup, dtype=None):
    xs = [asarray(x) for x in tup]
    return concatenate(xs, 0 if xs and xs[0].ndim == 1 else 1, dtype=dtype)


# ---- linear algebra -----------------------------------------------------------------------------


def matmul(a, b):
    return _wrap(_kiln.matmul(asarray(a)._a, asarray(b)._a))


def dot(a, b, out=None):
    _no_out("dot", out)
    return _wrap(_kiln.dot(asarray(a)._a, asarray(b)._a))


def vdot(a, b):
    return _wrap(_kiln.vdot(asarray(a)._a, asarray(b)._a))


def inner(a, b):
    return _wrap(_kiln.inner(asarray(a)._a, asarray(b)._a))


def outer(a, b, out=None):
    _no_out("outer", out)
    return _wrap(_kiln.outer(asarray(a)._a, asarray(b)._a))


def tensordot(a, b, axes=2):
    a, b = asarray(a), asarray(b)
    if isinstance(axes, numbers.Integral):
        return _wrap(_kiln.tensordot(a._a, b._a, int(axes)))
    axa, axb = axes
    axa = [axa] if isinstance(axa, numbers.Integral) else list(axa)
    axb = [axb] if isinstance(axb, numbers.Integral) else list(axb)
    return _wrap(_kiln.tensordot_axes(a._a, b._a, axa, axb))


def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    _no_out("einsum", out)
    if kwargs:
        raise TypeError(f"kiln.einsum: unsupported arguments {sorted(kwargs)}")
    return _wrap(_kiln.einsum(subscripts, [asarray(x)._a for x in operands]))


# ---- evaluation ---------------------------------------------------------------------------------


def compute(*arrays, device=None, threads=None, progress=False, trace=None, keep_on_device=False):
    """Computes several arrays in one plan that shares their common work (a factorization's
    parts, a shared input read once); a tuple of NumPy arrays. Arguments that are not kiln
    arrays are returned as they are, as dask.compute does. trace: a file to write the task
    stream to (Chrome's trace format, as `kiln run --trace`). progress: a bar of block tasks
    done for computes longer than a second, drawn by Kiln on a terminal's stderr, and from
    Python elsewhere (notebooks: a bar in the cell's output; other streams: text lines).
    keep_on_device: on a GPU device (cuda, cuda-emu), kiln.DeviceArray results that stay in
    device memory (the CUDA array interface and DLPack on cuda: cupy.asarray(r) takes them
    without a copy) instead of NumPy arrays."""
    nodes = [x._a for x in arrays if isinstance(x, Array)]
    if not nodes:
        return tuple(arrays)
    run = functools.partial(
        _kiln.compute,
        nodes,
        device=device if device is not None else _config["device"],
        threads=threads if threads is not None else _config["threads"],
        trace="" if trace is None else str(trace),
        keep_on_device=bool(keep_on_device),
    )
    if progress and not _stderr_is_terminal():
        from ._progress import watched

        results = iter(watched(run))
    else:
        results = iter(run(progress=bool(progress)))
    out = tuple(next(results) if isinstance(x, Array) else x for x in arrays)
    if keep_on_device:
        from ._device import DeviceArray

        out = tuple(DeviceArray(r) if isinstance(r, _kiln.DeviceResult) else r for r in out)
    return out


def _stderr_is_terminal() -> bool:
    """Whether Kiln's own bar (C++, on file descriptor 2) reaches a terminal that shows it."""
    try:
        return os.isatty(2) and sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def persist(*arrays, **options):
    """Computes the Kiln arrays among ``arrays`` together (their shared work once) and keeps
    their blocks, as Array.persist; other arguments are returned as they are."""
    device = options.get("device", _config["device"])
    threads = options.get("threads", _config["threads"])
    lazy = [x._a for x in arrays if isinstance(x, Array)]
    done = iter(_kiln.persist_all(lazy, device=device, threads=threads) if lazy else [])
    return tuple(_wrap(next(done)) if isinstance(x, Array) else x for x in arrays)


def explain(*arrays, kernels=False) -> str:
    """What ``kiln run --emit-ir`` prints for computing ``arrays``: the IR after each pass and
    the fusion summary (and with kernels=True, each newly planned kernel's IR and printed code).
    Plans without computing (the plan is cached for the compute that follows)."""
    return _kiln.explain([asarray(x)._a for x in arrays], device=_config["device"], kernels=kernels)


def visualize(*arrays, filename=None) -> str:
    """The fused graph of computing ``arrays`` (groups = kernels, with the reasons their
    boundaries exist) as Graphviz DOT source, planned without computing. With ``filename``, also
    written there: DOT for .dot/.gv, else rendered by Graphviz's ``dot`` (SVG, PNG, PDF by the
    file's extension), which must be installed."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "graph.dot")
        _kiln.emit_dot([asarray(x)._a for x in arrays], path, _config["device"])
        with open(path) as f:
            dot = f.read()
    if filename is not None:
        filename = str(filename)
        ext = os.path.splitext(filename)[1].lstrip(".").lower()
        if ext in ("dot", "gv", ""):
            with open(filename, "w") as f:
                f.write(dot)
        else:
            try:
                subprocess.run(["dot", f"-T{ext}", "-o", filename], input=dot, text=True,
                               check=True, capture_output=True)
            except FileNotFoundError:
                raise RuntimeError(
                    f"kiln.visualize: rendering {filename} needs Graphviz's `dot` (apt install "
                    f"graphviz); the DOT source is returned and can be saved as .dot"
                ) from None
    return dot


def stats() -> dict:
    """Kiln's counters: plans built and reused, computes, tasks, kernels compiled, and figures of
    the last compute."""
    return _kiln.stats()


# The element-wise functions by NumPy's name, made from the extension's tables.
_UNARY_NAMES = (
    "negative", "absolute", "sqrt", "exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh",
    "arcsin", "arccos", "arctan", "floor", "ceil", "sign", "isnan", "isfinite", "logical_not",
    "invert",
)  # fmt: skip
_BINARY_NAMES = (
    "add", "subtract", "multiply", "true_divide", "remainder", "power", "less", "less_equal",
    "greater", "greater_equal", "equal", "not_equal", "logical_and", "logical_or", "maximum",
    "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "floor_divide", "fmod", "copysign",
)  # fmt: skip


def _make_unary(name):
    def f(x, /, out=None, **kwargs):
        _no_out(name, out)
        if kwargs:
            raise TypeError(f"kiln.{name}: unsupported arguments {sorted(kwargs)}")
        return _unary(name, x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Element-wise {name}, as numpy.{name} (lazy)."
    return f


def _make_binary(name):
    def f(x1, x2, /, out=None, **kwargs):
        _no_out(name, out)
        if kwargs:
            raise TypeError(f"kiln.{name}: unsupported arguments {sorted(kwargs)}")
        return _binary(name, x1, x2)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Element-wise {name}, as numpy.{name} (lazy)."
    return f


_ELEMENTWISE = {n: _make_unary(n) for n in _UNARY_NAMES}
_ELEMENTWISE.update({n: _make_binary(n) for n in _BINARY_NAMES})
globals().update(_ELEMENTWISE)
divide = _ELEMENTWISE["true_divide"]
mod = _ELEMENTWISE["remainder"]
abs = _ELEMENTWISE["absolute"]
pow = _ELEMENTWISE["power"]
bitwise_not = _ELEMENTWISE["invert"]
rint = _make_unary("round")
rint.__name__ = rint.__qualname__ = "rint"


def positive(x, /):
    return asarray(x)


def square(x, /):
    x = asarray(x)
    return x * x


def isinf(x, /):
    x = asarray(x)
    return logical_not(logical_or(isfinite(x), isnan(x)))  # noqa: F821 (made above)


def logical_xor(x1, x2, /):
    return not_equal(asarray(x1).astype(bool), asarray(x2).astype(bool))  # noqa: F821


def sigmoid(x, /):
    """1 / (1 + exp(-x)) (scipy.special.expit), one element function."""
    return _unary("sigmoid", x)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = asarray(a), asarray(b)
    close = absolute(a - b) <= atol + rtol * absolute(b)  # noqa: F821
    exact = equal(a, b)  # noqa: F821 (infinities of one sign)
    out = logical_or(close, exact)  # noqa: F821
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))  # noqa: F821
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return all(isclose(a, b, rtol, atol, equal_nan))


__all__ = [
    n
    for n in list(globals())
    if not n.startswith("_")
    and n not in ("annotations", "builtins", "contextlib", "functools", "math", "numbers", "operator",
                  "os", "sys", "warnings", "np")
]
