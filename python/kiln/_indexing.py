"""NumPy's indexing on kiln arrays: basic indices (integers, slices, None, Ellipsis), and one
integer array or boolean mask per index (a gather, built as slices of the lazy graph)."""

from __future__ import annotations

import numbers
import operator

import numpy as np

from . import _core


def _is_advanced(k) -> bool:
    return isinstance(k, (list, np.ndarray, _core.Array)) or (
        isinstance(k, (bool, np.bool_))
    )


# A gather is one slice per run of consecutive indices, concatenated: a sorted selection of rows
# (a cross-validation fold) is a few runs, a shuffled one a run per index. Past this many runs the
# graph grows too large to be worth building (20000 one-row runs: about 0.3 s to build and plan).
MAX_RUNS = 20000


def _positions(k, n, axis):
    """An integer-array or boolean-mask index along an axis of length n as a 1-D int64 NumPy
    array of positions in [0, n). A kiln array used as an index is computed first: the result's
    shape depends on its values (as bool() of a kiln array computes)."""
    if isinstance(k, _core.Array):
        k = k.compute()
    a = np.asarray(k)
    if a.dtype == np.bool_:
        if a.ndim != 1 or a.shape[0] != n:
            raise IndexError(
                f"boolean index did not match indexed array along axis {axis}; size of axis is "
                f"{n} but size of corresponding boolean axis is {a.shape[0] if a.ndim else 0}"
            )
        return np.flatnonzero(a)
    if a.size == 0 and a.dtype.kind not in "iu":
        a = a.astype(np.int64)  # [] is float64 to NumPy, and still a valid (empty) index
    if a.dtype.kind not in "iu":
        raise IndexError(
            "arrays used as indices must be of integer (or boolean) type, not " + str(a.dtype)
        )
    if a.ndim != 1:
        raise IndexError(
            f"kiln: integer-array indices must be 1-D (this one has shape {a.shape}); index with "
            f"a.ravel() and reshape the result"
        )
    a = a.astype(np.int64, copy=False)
    bad = (a >= n) | (a < -n)
    if bad.any():
        raise IndexError(f"index {a[bad][0]} is out of bounds for axis {axis} with size {n}")
    return np.where(a < 0, a + n, a)


def _runs(positions, what):
    """(starts, counts) of the runs of consecutive values in `positions` (an index array): each
    run is one slice of a gather or an assignment, at most MAX_RUNS of them."""
    starts = np.flatnonzero(np.concatenate(([True], np.diff(positions) != 1)))
    if len(starts) > MAX_RUNS:
        raise IndexError(
            f"kiln: {what} has {len(starts)} runs of consecutive positions, more than the "
            f"{MAX_RUNS} it is built from (one slice each); sort the indices, or compute() the "
            f"array and index the NumPy result"
        )
    return starts, np.diff(np.concatenate((starts, [len(positions)])))


def take(x, indices, axis=0):
    """x's elements at `indices` (1-D integers, or a boolean mask) along `axis`, as np.take.
    Built lazily as slices of x joined by concatenate: runs of consecutive indices (or one
    arithmetic progression) are one slice each."""
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    n = x.shape[axis]
    idx = _positions(indices, n, axis)
    before = (slice(None),) * axis

    def piece(start, step, count):
        stop = start + step * count
        return x[before + (slice(start, stop if stop >= 0 else None, step),)]

    if len(idx) == 0:
        return x[before + (slice(0, 0),)]
    d = np.diff(idx)
    if len(d) == 0 or (d[0] != 0 and (d == d[0]).all()):  # one arithmetic progression
        return piece(int(idx[0]), int(d[0]) if len(d) else 1, len(idx))
    starts, counts = _runs(idx, f"this integer-array index along axis {axis}")
    pieces = [piece(int(idx[s]), 1, int(c)) for s, c in zip(starts, counts)]
    return pieces[0] if len(pieces) == 1 else _core.concatenate(pieces, axis=axis)


def _advanced_getitem(x, key, i):
    """x[key] where key[i] is the one integer array or boolean mask (a tuple, Ellipsis at most
    once and not expanded yet)."""
    k = key[i]
    if isinstance(k, (bool, np.bool_)):
        raise IndexError("kiln: a bool scalar as an index (x[True]) is not supported")
    if not isinstance(k, _core.Array):
        k = np.asarray(k)
    if k.ndim == 0 and k.dtype != np.bool_:  # a 0-d integer array indexes as an integer
        return getitem(x, key[:i] + (operator.index(k.item()),) + key[i + 1 :])
    if k.ndim != 1:
        if k.dtype == np.bool_ and len(key) == 1 and tuple(k.shape) == tuple(x.shape[: k.ndim]):
            mask = k.compute() if isinstance(k, _core.Array) else k
            return take(x.reshape((-1,) + tuple(x.shape[k.ndim :])), mask.ravel(), 0)
        raise IndexError(
            f"kiln: integer-array and boolean-mask indices must be 1-D (this one has shape "
            f"{tuple(k.shape)}), or a mask of the array's leading dims given alone"
        )
    used = sum(1 for e in key if e is not None and e is not Ellipsis)
    ellipses = [j for j, e in enumerate(key) if e is Ellipsis]  # (`in` would compare arrays)
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        j = ellipses[0]
        key = key[:j] + (slice(None),) * (x.ndim - used) + key[j + 1 :]
        i = i if i < j else i + x.ndim - used - 1
    axis = sum(1 for e in key[:i] if e is None or isinstance(e, slice))
    y = getitem(x, key[:i] + (slice(None),) + key[i + 1 :])
    return take(y, k, axis)


def getitem(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    advanced = [i for i, k in enumerate(key) if _is_advanced(k)]
    if len(advanced) > 1:
        raise IndexError(
            "kiln: one integer array or boolean mask per index is supported (NumPy's broadcast "
            "of several index arrays is not); index one axis at a time"
        )
    if advanced:
        return _advanced_getitem(x, key, advanced[0])
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
    if (
        scalar
        and isinstance(key, (np.ndarray, _core.Array))
        and np.dtype(key.dtype) == np.bool_
        and tuple(key.shape) == tuple(x.shape)
    ):  # x[mask] = scalar stays lazy in the mask too
        return _core.where(_core.asarray(key), value, x).astype(x.dtype, copy=False)
    if _is_advanced(key) or (isinstance(key, tuple) and any(_is_advanced(k) for k in key)):
        return _advanced_setitem(x, key if isinstance(key, tuple) else (key,), value, scalar)
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


def _spread(v, positions, n, axis):
    """v, whose axis holds one entry per position (sorted, distinct), placed at those positions
    of an axis of length n, zeros elsewhere: slices of v and zero blocks, concatenated."""
    before = (slice(None),) * axis
    starts, counts = _runs(positions, "this assignment's index")
    pieces, done = [], 0

    def gap(length):
        shape = list(v.shape)
        shape[axis] = length
        return _core.zeros(shape, dtype=v.dtype)

    for s, c in zip(starts, counts):
        p = int(positions[s])
        if p > done:
            pieces.append(gap(p - done))
        pieces.append(v[before + (slice(int(s), int(s + c)),)])
        done = p + int(c)
    if done < n:
        pieces.append(gap(n - done))
    return pieces[0] if len(pieces) == 1 else _core.concatenate(pieces, axis=axis)


def _advanced_setitem(x, key, value, scalar):
    """x[key] = value where key holds one integer array or boolean mask and otherwise only full
    slices (or one Ellipsis), or is a boolean mask of x's whole shape. As NumPy: the value
    broadcasts to the selection; with repeated indices the last value wins. The index is computed
    first (it decides where values go); the array and the value stay lazy."""
    advanced = [i for i, k in enumerate(key) if _is_advanced(k)]
    if len(advanced) != 1:
        raise IndexError("kiln: an assignment takes one integer array or boolean mask per index")
    i = advanced[0]
    k = key[i] if isinstance(key[i], _core.Array) else np.asarray(key[i])
    if k.ndim > 1 or (k.ndim == 1 and k.dtype == np.bool_ and len(key) == 1 and x.ndim > 1):
        if not (k.dtype == np.bool_ and len(key) == 1 and tuple(k.shape) == tuple(x.shape[: k.ndim])):
            raise IndexError(
                f"kiln: a boolean mask of shape {tuple(k.shape)} for an array of shape {x.shape}"
            )
        if k.ndim > 1:  # a mask of the leading dims: assign into x with those dims flattened
            mask = k.compute() if isinstance(k, _core.Array) else k
            flat = x.reshape((-1,) + tuple(x.shape[k.ndim :]))
            v = value if scalar else _core.asarray(value).reshape((-1,) + tuple(x.shape[k.ndim :]))
            return _advanced_setitem(flat, (mask.ravel(),), v, scalar).reshape(x.shape)
    rest = [e for j, e in enumerate(key) if j != i]
    if any(not (e is Ellipsis or (isinstance(e, slice) and e == slice(None))) for e in rest):
        raise IndexError(
            "kiln: an assignment through an integer array or mask takes full slices (`:`) on the "
            "other axes; assign to the basic-indexed part with kiln.where"
        )
    ellipsis = [j for j, e in enumerate(key) if e is Ellipsis]
    axis = i + (x.ndim - len(key) if ellipsis and ellipsis[0] < i else 0)
    if not 0 <= axis < x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional")
    n = x.shape[axis]
    positions = _positions(k, n, axis)
    order = np.argsort(positions, kind="stable")
    sorted_pos = positions[order]
    last = np.append(sorted_pos[1:] != sorted_pos[:-1], True)[: len(order)]  # of equal positions
    order, sorted_pos = order[last], sorted_pos[last]
    selected = np.zeros(n, dtype=bool)
    selected[sorted_pos] = True
    mask = _core.asarray(selected.reshape((n,) + (1,) * (x.ndim - axis - 1)))
    if scalar:
        return _core.where(mask, value, x).astype(x.dtype, copy=False)
    shape = list(x.shape)
    shape[axis] = len(positions)
    v = _core.broadcast_to(_core.asarray(value).astype(x.dtype, copy=False), shape)
    if len(order) != len(positions) or (np.diff(order) < 0).any():
        v = take(v, order, axis)  # the values in the order of their positions
    if len(sorted_pos) == 0:
        return x
    return _core.where(mask, _spread(v, sorted_pos, n, axis), x)
