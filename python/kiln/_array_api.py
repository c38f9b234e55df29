"""The Python array API standard's names (2024.12) for what Kiln computes: aliases of NumPy's names
(asin, bitwise_left_shift, ...), functions made exactly from Kiln's operations (flip, roll, tril,
eye, diff, ...), the dtype functions, and __array_namespace_info__. docs/PYTHON.md lists what is
missing and why."""

from __future__ import annotations

import builtins
import numbers
import operator
from collections import namedtuple

import numpy as np

from . import _core
from ._core import Array, asarray

__all__ = [
    "asin", "acos", "atan", "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift",
    "matrix_transpose", "vecdot", "trunc", "reciprocal", "signbit", "flip", "roll", "tril", "triu",
    "eye", "diff", "count_nonzero", "broadcast_arrays", "broadcast_shapes", "meshgrid", "unstack",
    "tile", "repeat", "take", "searchsorted", "nonzero", "unique_values", "unique_counts", "unique_inverse", "unique_all",
    "isdtype", "result_type", "can_cast", "finfo", "iinfo", "from_dlpack",
    "__array_namespace_info__",
]  # fmt: skip

asin = _core.arcsin  # noqa: F821 (made in _core)
acos = _core.arccos  # noqa: F821
atan = _core.arctan  # noqa: F821
bitwise_invert = _core.invert  # noqa: F821
bitwise_left_shift = _core.left_shift  # noqa: F821
bitwise_right_shift = _core.right_shift  # noqa: F821


def matrix_transpose(x, /):
    return asarray(x).mT


def vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = asarray(x1), asarray(x2)
    return _core.sum(x1 * x2, axis=axis, dtype=np.result_type(x1.dtype, x2.dtype))


def trunc(x, /):
    x = asarray(x)
    if x.dtype.kind != "f":
        return x
    return _core.where(x < 0, _core.ceil(x), _core.floor(x))  # noqa: F821


def reciprocal(x, /):
    x = asarray(x)
    return 1.0 / x if x.dtype.kind == "f" else 1.0 / x.astype(np.float64)


def signbit(x, /):
    x = asarray(x)
    if x.dtype.kind != "f":
        return x < 0
    return _core.copysign(1.0, x) < 0  # noqa: F821 (-0.0 and NaNs with the sign bit count)


def flip(x, /, *, axis=None):
    x = asarray(x)
    axes = range(x.ndim) if axis is None else [
        _core._normalize_axis(a, x.ndim) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    key = [slice(None)] * x.ndim
    for a in axes:
        key[a] = slice(None, None, -1)
    return x[tuple(key)]


def roll(x, /, shift, *, axis=None):
    x = asarray(x)
    if axis is None:
        return roll(x.reshape(-1), shift, axis=0).reshape(x.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else [shift]
    axes = axis if isinstance(axis, (tuple, list)) else [axis]
    if len(shifts) != len(axes):
        raise ValueError("kiln.roll: shift and axis must have the same length")
    for s, a in zip(shifts, axes):
        a = _core._normalize_axis(a, x.ndim)
        n = x.shape[a]
        if n == 0:
            continue
        s = operator.index(s) % n
        if s == 0:
            continue
        head = [slice(None)] * x.ndim
        tail = [slice(None)] * x.ndim
        head[a], tail[a] = slice(n - s, None), slice(None, n - s)
        x = _core.concatenate([x[tuple(head)], x[tuple(tail)]], axis=a)
    return x


def _band(x, k, lower):
    x = asarray(x)
    if x.ndim < 2:
        raise ValueError(f"kiln.{'tril' if lower else 'triu'}: needs 2 or more dims, got {x.shape}")
    n, m = x.shape[-2:]
    rows = _core.arange(n).reshape(n, 1)
    cols = _core.arange(m).reshape(1, m)
    keep = cols - rows <= k if lower else cols - rows >= k
    return _core.where(keep, x, _core.zeros((), dtype=x.dtype))


def tril(x, /, *, k=0):
    return _band(x, operator.index(k), True)


def triu(x, /, *, k=0):
    return _band(x, operator.index(k), False)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None, chunks="auto"):
    n_cols = n_rows if n_cols is None else n_cols
    rows = _core.arange(n_rows, chunks=chunks if chunks == "auto" else chunks[0]).reshape(n_rows, 1)
    cols = _core.arange(n_cols).reshape(1, n_cols)
    return (cols - rows == k).astype(np.float64 if dtype is None else dtype)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    x = asarray(x)
    a = _core._normalize_axis(axis, x.ndim)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = _core.concatenate([asarray(p) for p in parts], axis=a)
    for _ in range(operator.index(n)):
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[a], lo[a] = slice(1, None), slice(None, -1)
        x = _core.not_equal(x[tuple(hi)], x[tuple(lo)]) if x.dtype == np.bool_ else x[tuple(hi)] - x[tuple(lo)]  # noqa: F821,E501
    return x


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return _core.sum(asarray(x) != 0, axis=axis, dtype=np.int64, keepdims=keepdims)


def broadcast_shapes(*shapes):
    return np.broadcast_shapes(*shapes)


def broadcast_arrays(*arrays):
    xs = [asarray(a) for a in arrays]
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    return [_core.broadcast_to(x, shape) for x in xs]


def meshgrid(*arrays, indexing="xy"):
    xs = [asarray(a) for a in arrays]
    if indexing not in ("xy", "ij"):
        raise ValueError("kiln.meshgrid: indexing must be 'xy' or 'ij'")
    shape = [x.size for x in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        dim = i if indexing == "ij" or len(xs) < 2 or i > 1 else 1 - i
        view = [1] * len(xs)
        view[dim] = x.size
        out.append(_core.broadcast_to(x.reshape(view), shape))
    return out


def unstack(x, /, *, axis=0):
    x = asarray(x)
    a = _core._normalize_axis(axis, x.ndim)
    return tuple(x[(slice(None),) * a + (i,)] for i in range(x.shape[a]))


def tile(x, repetitions, /):
    x = asarray(x)
    reps = list(repetitions)
    nd = builtins.max(x.ndim, len(reps))
    x = x.reshape((1,) * (nd - x.ndim) + x.shape)
    reps = [1] * (nd - len(reps)) + reps
    for a, r in enumerate(reps):
        if r != 1:
            x = _core.concatenate([x] * r, axis=a) if r > 0 else x[(slice(None),) * a + (slice(0, 0),)]
    return x


def repeat(x, repeats, /, *, axis=None):
    x = asarray(x)
    if not isinstance(repeats, numbers.Integral):
        raise TypeError("kiln.repeat: only an integer count is supported (per-element counts "
                        "give a data-dependent shape)")
    if axis is None:
        x, axis = x.reshape(-1), 0
    a = _core._normalize_axis(axis, x.ndim)
    r = operator.index(repeats)
    shape = list(x.shape)
    expanded = x.reshape(shape[: a + 1] + [1] + shape[a + 1 :])
    target = shape[: a + 1] + [r] + shape[a + 1 :]
    shape[a] *= r
    return _core.broadcast_to(expanded, target).reshape(shape)


def take(x, indices, /, *, axis=None):
    """x's elements at the 1-D integer `indices` along `axis` (required unless x is 1-D), lazily:
    slices of x joined by concatenate, one per run of consecutive indices. Indices given as a
    kiln array are computed first (the result's shape depends on them)."""
    from ._indexing import take as _take

    x = asarray(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"kiln.take: axis is required for a {x.ndim}-D array")
        axis = 0
    return _take(x, indices, axis)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion points of x2's values into the sorted 1-D x1, lazily: for each value, the count
    of x1's elements before it (a fused compare-and-sum over len(x1) x x2.size elements, fine for
    the class labels and bins it serves). NaN sorts last, as in NumPy."""
    if side not in ("left", "right"):
        raise ValueError(f"kiln.searchsorted: side must be 'left' or 'right', not {side!r}")
    x1, x2 = asarray(x1), asarray(x2)
    if x1.ndim != 1:
        raise ValueError(f"kiln.searchsorted: x1 must be 1-D, not {x1.ndim}-D")
    if sorter is not None:
        x1 = take(x1, sorter)
    v = x2.reshape(x2.shape + (1,))
    before = (x1 < v) if side == "left" else (x1 <= v)
    counts = _core.sum(before, axis=-1, dtype=np.int64)
    if isdtype(x1.dtype, "real floating") or isdtype(x2.dtype, "real floating"):
        numbers_in_x1 = _core.sum(~_core.isnan(x1), dtype=np.int64)
        at_nan = numbers_in_x1 if side == "left" else x1.shape[0]
        counts = _core.where(_core.isnan(x2), at_nan, counts)
    return counts


def nonzero(x, /):
    """The indices of x's non-zero elements, one int64 kiln array per dim (x is computed here:
    the count depends on its values). A 0-d x is an error, as the standard says."""
    x = asarray(x)
    if x.ndim == 0:
        raise ValueError("kiln.nonzero: a 0-d array has no indices (index x[None] instead)")
    return tuple(asarray(i.astype(np.int64)) for i in np.nonzero(x.compute()))


UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _unique(x):
    """NumPy's sorted unique of x, computed (the result's length depends on x's values, so x is
    computed here, as bool() computes); NaNs are each distinct, as the standard says."""
    a = asarray(x).compute()
    values, indices, inverse, counts = np.unique(
        a, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    as_int = lambda v: asarray(v.astype(np.int64))  # noqa: E731
    return asarray(values), as_int(indices), as_int(inverse.reshape(a.shape)), as_int(counts)


def unique_values(x, /):
    """The distinct values of x, sorted, as a kiln array (x is computed here)."""
    return _unique(x)[0]


def unique_counts(x, /):
    """(values, counts), values sorted (x is computed here)."""
    values, _, _, counts = _unique(x)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /):
    """(values, inverse_indices of x's shape), values sorted (x is computed here)."""
    values, _, inverse, _ = _unique(x)
    return UniqueInverseResult(values, inverse)


def unique_all(x, /):
    """(values, indices, inverse_indices, counts), values sorted (x is computed here)."""
    return UniqueAllResult(*_unique(x))


def from_dlpack(x, /, *, device=None, copy=None):
    """A kiln array over any host object with __dlpack__ (no copy where NumPy can view it)."""
    if isinstance(x, Array):
        return x
    return asarray(np.from_dlpack(x, copy=copy))


def _np_dtype(x):
    return x.dtype if isinstance(x, Array) else x


def isdtype(dtype, kind):
    return np.isdtype(np.dtype(dtype), kind)


def result_type(*arrays_and_dtypes):
    return np.result_type(*(_np_dtype(x) for x in arrays_and_dtypes))


def can_cast(from_, to, /):
    return np.can_cast(_np_dtype(from_), to)


def finfo(type, /):  # noqa: A002 (the standard's name)
    return np.finfo(_np_dtype(type))


def iinfo(type, /):  # noqa: A002
    return np.iinfo(_np_dtype(type))


class _Info:
    """The array API's inspection namespace (kiln.__array_namespace_info__())."""

    def capabilities(self):
        # Both by computing what decides the shape (the mask; unique's and nonzero's input).
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 32}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu", "interp", "cuda-emu", "cuda"]

    def default_dtypes(self, *, device=None):
        return {"real floating": np.dtype(np.float64), "complex floating": None,
                "integral": np.dtype(np.int64), "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device=None, kind=None):
        all_ = {n: np.dtype(n) for n in _core._DTYPES}
        if kind is None:
            return all_
        return {n: d for n, d in all_.items() if np.isdtype(d, kind)}


def __array_namespace_info__():
    return _Info()
