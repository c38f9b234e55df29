"""NumPy's basic indexing on kiln arrays: integers, slices, None (np.newaxis) and Ellipsis."""

from __future__ import annotations

import numbers
import operator

import numpy as np

from . import _core


def _is_advanced(k) -> bool:
    return isinstance(k, (list, np.ndarray, _core.Array)) or (
        isinstance(k, (bool, np.bool_))
    )


def getitem(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if _is_advanced(k):
            raise IndexError(
                "kiln: indexing with integer arrays or boolean masks is not supported (their "
                "result's shape depends on values); use kiln.where(mask, x, fill) for masks, or "
                "compute() the array and index the NumPy result"
            )
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise IndexError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed"
        )
    if Ellipsis in key:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (x.ndim - used)

    entries, shape, dim = [], [], 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        n = x.shape[dim]
        if isinstance(k, slice):
            start = None if k.start is None else operator.index(k.start)
            stop = None if k.stop is None else operator.index(k.stop)
            step = 1 if k.step is None else operator.index(k.step)
            if step == 0:
                raise ValueError("slice step cannot be zero")
            entries.append((start, stop, step, False))
            shape.append(len(range(*slice(start, stop, step).indices(n))))
        elif isinstance(k, numbers.Integral):
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            entries.append((i, None, 1, True))
        else:
            raise IndexError(
                f"kiln: only integers, slices (`:`), ellipsis (`...`) and None (np.newaxis) are "
                f"valid indices, not {type(k).__name__}"
            )
        dim += 1
    out = x._a.slice(entries) if entries else x._a
    if len(shape) != len(out.shape):  # None entries add dims of 1
        out = out.reshape(shape)
    return _core.Array(out)


def _region(x, key):
    """For a basic index: the boolean mask of the elements it selects (x's shape), and the box
    it spans per dim as (lo, hi, step, dropped) for the value's placement."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is None for k in key):
        raise IndexError("kiln: None (np.newaxis) in an assignment's index is not supported")
    used = sum(1 for k in key if k is not Ellipsis)
    if used > x.ndim:
        raise IndexError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed"
        )
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (x.ndim - used)
    mask, box = None, []
    for d, k in enumerate(key):
        n = x.shape[d]
        if isinstance(k, slice):
            r = range(*k.indices(n))
            lo, hi, step = (r[0], r[-1] + 1, abs(r.step)) if len(r) else (0, 0, 1)
            if k.step is not None and k.step < 0 and len(r):
                lo, hi = r[-1], r[0] + 1
            dropped = False
        elif isinstance(k, numbers.Integral):
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            lo, hi, step, dropped = i % n, i % n + 1, 1, True
        else:
            raise IndexError(
                f"kiln: an assignment's index takes integers, slices, ellipsis or one boolean "
                f"mask, not {type(k).__name__}"
            )
        box.append((lo, hi, step, dropped, isinstance(k, slice) and (k.step or 1) < 0))
        shape = [1] * x.ndim
        shape[d] = n
        idx = _core.arange(n).reshape(shape)
        cond = (idx >= lo) & (idx < hi)
        if step > 1:
            cond = cond & ((idx - lo) % step == 0)
        mask = cond if mask is None else mask & cond
    return mask, box


def setitem(x, key, value):
    """x[key] = value, as Dask arrays do it: x takes a new expression, where(selected, value, x),
    cast to x's dtype as NumPy casts; arrays built from x before keep the old values (a kiln
    array has no views). Keys: basic indices (integers, slices, ...) or a boolean mask of x's
    shape; values: scalars, or for a basic index with steps of 1 an array that broadcasts to the
    selected box."""
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    scalar = _core._is_python_scalar(value) or (
        isinstance(value, (np.ndarray, np.generic, _core.Array)) and np.ndim(value) == 0
    )
    if isinstance(key, (np.ndarray, _core.Array)) and np.dtype(key.dtype) == np.bool_:
        mask = _core.asarray(key)
        if mask.shape != x.shape:
            raise IndexError(f"kiln: a boolean mask of shape {mask.shape} for an array of shape {x.shape}")
        if not scalar:
            raise TypeError(
                "kiln: x[mask] = array is not supported (NumPy takes the mask's count of values); "
                "use kiln.where(mask, values, x)"
            )
        return _core.where(mask, value, x).astype(x.dtype, copy=False)
    if _is_advanced(key) or (isinstance(key, tuple) and any(_is_advanced(k) for k in key)):
        raise IndexError("kiln: assignments with integer-array indices are not supported")
    mask, box = _region(x, key)
    if mask is None:  # a 0-d array
        return _core.asarray(value).astype(x.dtype).reshape(())
    if scalar:
        return _core.where(mask, value, x).astype(x.dtype, copy=False)
    if any(step != 1 for _, _, step, _, _ in box):
        raise TypeError("kiln: x[a:b:step] = array with a step other than 1 is not supported "
                        "(assign a scalar, or build the array with kiln.where)")
    v = _core.asarray(value).astype(x.dtype, copy=False)
    region = [hi - lo for lo, hi, _, dropped, _ in box if not dropped]
    v = _core.broadcast_to(v, region)
    full = [hi - lo for lo, hi, _, _, _ in box]
    v = v.reshape(full)
    for d, (lo, hi, _, _, reverse) in enumerate(box):
        if reverse:
            v = v[(slice(None),) * d + (slice(None, None, -1),)]
        parts = []
        if lo > 0:
            parts.append(_core.zeros(full[:d] + [lo] + list(v.shape[d + 1 :]), dtype=x.dtype))
        parts.append(v)
        if hi < x.shape[d]:
            parts.append(_core.zeros(full[:d] + [x.shape[d] - hi] + list(v.shape[d + 1 :]),
                                     dtype=x.dtype))
        v = _core.concatenate(parts, axis=d) if len(parts) > 1 else v
        full[d] = x.shape[d]
    return _core.where(mask, v, x)
