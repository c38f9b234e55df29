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
