"""NumPy's protocols on kiln arrays: __array_ufunc__ (NEP 13) and __array_function__ (NEP 18).

A NumPy ufunc or function that Kiln implements builds a lazy Kiln expression; one it does not
raises TypeError naming it and the way out, unless kiln.config.set(fallback="numpy") allows
computing the inputs and running NumPy's (with a warning): never a silent materialization.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from . import _array_api, _core, linalg

# ---- ufuncs -------------------------------------------------------------------------------------

_UFUNCS = {
    getattr(np, n): getattr(_core, n) for n in _core._UNARY_NAMES + _core._BINARY_NAMES
}
_UFUNCS.update({
    np.rint: _core.rint,
    np.positive: _core.positive,
    np.square: _core.square,
    np.isinf: _core.isinf,
    np.logical_xor: _core.logical_xor,
    np.matmul: _core.matmul,
    np.trunc: _array_api.trunc,
    np.signbit: _array_api.signbit,
})
if hasattr(np, "vecdot"):  # a gufunc in NumPy 2
    _UFUNCS[np.vecdot] = _array_api.vecdot
_REDUCE = {
    np.add: _core.sum,
    np.multiply: _core.prod,
    np.maximum: _core.max,
    np.minimum: _core.min,
    np.logical_and: _core.all,
    np.logical_or: _core.any,
}


def _unsupported(what: str) -> TypeError:
    return TypeError(
        f"kiln does not implement {what}: compute the kiln arrays first (np.asarray(x) or "
        f"x.compute()), or allow NumPy to do it with kiln.config.set(fallback='numpy')"
    )


def _to_numpy(x):
    if isinstance(x, _core.Array):
        return x.compute()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _fallback(what, call, args, kwargs):
    if _core._config["fallback"] != "numpy":
        raise _unsupported(what)
    warnings.warn(
        f"kiln: {what} is not implemented by Kiln; computing its kiln inputs and running NumPy's "
        f"(kiln.config fallback='numpy')",
        RuntimeWarning,
        stacklevel=4,
    )
    return call(*_to_numpy(args), **_to_numpy(kwargs))


def array_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise TypeError(
            f"kiln: numpy.{ufunc.__name__}(..., out=...) is not supported: kiln arrays are "
            f"immutable lazy expressions; use the returned array"
        )
    if kwargs.get("where", True) is not True:
        raise TypeError(f"kiln: numpy.{ufunc.__name__}(..., where=...) is not supported; use kiln.where")
    kwargs.pop("where", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("casting", None)
    kwargs.pop("order", None)
    kwargs.pop("subok", None)
    if method == "__call__":
        impl = _UFUNCS.get(ufunc)
        if impl is None or kwargs:
            return _fallback(f"numpy.{ufunc.__name__}" + (f" with {sorted(kwargs)}" if kwargs else ""),
                             ufunc, inputs, kwargs)
        if dtype is not None:
            inputs = tuple(_core.asarray(x).astype(dtype) if not _core._is_python_scalar(x) else x
                           for x in inputs)
        return impl(*inputs)
    if method == "reduce" and ufunc in _REDUCE:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs.get("initial", np._NoValue) is np._NoValue:  # not given: drop NumPy's marker
            kwargs.pop("initial", None)
        if kwargs:
            return _fallback(f"numpy.{ufunc.__name__}.reduce with {sorted(kwargs)}",
                             getattr(ufunc, method), inputs, kwargs)
        (x,) = inputs
        if ufunc in (np.add, np.multiply):
            return _REDUCE[ufunc](x, axis=axis, dtype=dtype, keepdims=keepdims)
        return _REDUCE[ufunc](x, axis=axis, keepdims=keepdims)
    return _fallback(f"numpy.{ufunc.__name__}.{method}", getattr(ufunc, method), inputs,
                     dict(kwargs, **({} if dtype is None else {"dtype": dtype})))


# ---- functions ----------------------------------------------------------------------------------

_FUNCTIONS = {}


def _implements(np_func, impl):
    _FUNCTIONS[np_func] = impl


for _name in ("sum", "prod", "mean", "var", "std", "min", "max", "amin", "amax", "all", "any",
              "argmin", "argmax", "where", "clip", "round", "around", "concatenate", "stack",
              "vstack", "hstack", "matmul", "dot", "vdot", "inner", "outer", "tensordot",
              "einsum", "transpose", "permute_dims", "reshape", "ravel", "squeeze", "expand_dims",
              "swapaxes", "moveaxis", "broadcast_to", "zeros_like", "ones_like", "full_like",
              "empty_like", "isclose", "allclose", "astype", "concat", "nansum", "nanprod",
              "nanmean", "nanmin", "nanmax", "nanargmin", "nanargmax", "nanvar", "nanstd"):
    if hasattr(np, _name):
        _implements(getattr(np, _name), getattr(_core, _name))
# The array API's functions under NumPy's signatures (positional axis, k, n).
_implements(np.flip, lambda m, axis=None: _array_api.flip(m, axis=axis))
_implements(np.roll, lambda a, shift, axis=None: _array_api.roll(a, shift, axis=axis))
_implements(np.tril, lambda m, k=0: _array_api.tril(m, k=k))
_implements(np.triu, lambda m, k=0: _array_api.triu(m, k=k))
_implements(np.diff, lambda a, n=1, axis=-1, prepend=None, append=None: _array_api.diff(
    a, n=n, axis=axis, prepend=prepend, append=append))
_implements(np.count_nonzero, lambda a, axis=None, *, keepdims=False: _array_api.count_nonzero(
    a, axis=axis, keepdims=keepdims))
_implements(np.repeat, lambda a, repeats, axis=None: _array_api.repeat(a, repeats, axis=axis))


def _np_take(a, indices, axis=None, out=None, mode="raise"):
    _core._no_out("take", out)
    if mode != "raise":
        raise TypeError(f"kiln: numpy.take(..., mode={mode!r}) is not supported (only 'raise')")
    x = _core.asarray(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if np.ndim(indices) == 0:  # a scalar index drops the axis
        return x[(slice(None),) * _core._normalize_axis(axis, x.ndim) + (operator.index(indices),)]
    return _array_api.take(x, indices, axis=axis)


def _np_compress(condition, a, axis=None, out=None):
    _core._no_out("compress", out)
    c = condition.compute() if isinstance(condition, _core.Array) else np.asarray(condition)
    return _np_take(a, np.flatnonzero(c), axis=axis)


_implements(np.take, _np_take)
_implements(np.searchsorted, lambda a, v, side="left", sorter=None: _array_api.searchsorted(
    a, v, side=side, sorter=sorter))
_implements(np.nonzero, _array_api.nonzero)
_implements(np.flatnonzero, lambda a: _array_api.nonzero(_core.asarray(a).reshape(-1))[0])
_implements(np.unique_values, _array_api.unique_values)
_implements(np.unique_counts, _array_api.unique_counts)
_implements(np.unique_inverse, _array_api.unique_inverse)
_implements(np.unique_all, _array_api.unique_all)
_implements(np.compress, _np_compress)
def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if sparse:
        raise TypeError("kiln: numpy.meshgrid(..., sparse=True) is not supported (use broadcasting)")
    return _array_api.meshgrid(*xi, indexing=indexing)


_implements(np.meshgrid, _meshgrid)
for _name in ("tile", "broadcast_arrays", "unstack", "matrix_transpose"):
    if hasattr(np, _name):
        _implements(getattr(np, _name), getattr(_array_api, _name))
for _name in ("qr", "svd", "svdvals", "cholesky", "solve", "inv", "det", "slogdet", "eigh",
              "lstsq", "norm"):
    if hasattr(np.linalg, _name):
        _implements(getattr(np.linalg, _name), getattr(linalg, _name))
_implements(np.shape, lambda a: a.shape)
_implements(np.ndim, lambda a: a.ndim)
_implements(np.size, lambda a, axis=None: a.size if axis is None else a.shape[axis])
_implements(np.result_type, lambda *xs: np.result_type(*(x.dtype if isinstance(x, _core.Array) else x for x in xs)))


def array_function(func, types, args, kwargs):
    if not all(issubclass(t, (_core.Array, np.ndarray)) for t in types):
        return NotImplemented
    impl = _FUNCTIONS.get(func)
    if impl is None:
        name = getattr(func, "__module__", "numpy") or "numpy"
        name = ("numpy.linalg" if name.startswith("numpy.linalg") else "numpy") + "." + func.__name__
        return _fallback(name, func, args, kwargs)
    return impl(*args, **kwargs)
