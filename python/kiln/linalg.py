"""kiln.linalg: numpy.linalg's functions on kiln arrays (LAPACK per block, TSQR for tall arrays).

Each factorization's parts are views of one result: kiln.compute(u, s, vh) factorizes once.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

from . import _core, _kiln

__all__ = ["qr", "svd", "svd_compressed", "cholesky", "solve", "inv", "det", "slogdet", "eigh",
           "lstsq", "norm", "matmul"]


class QRResult(NamedTuple):
    Q: _core.Array
    R: _core.Array


class SVDResult(NamedTuple):
    U: _core.Array
    S: _core.Array
    Vh: _core.Array


class SlogdetResult(NamedTuple):
    sign: _core.Array
    logabsdet: _core.Array


class EighResult(NamedTuple):
    eigenvalues: _core.Array
    eigenvectors: _core.Array


def _a(x):
    return _core.asarray(x)._a


def _w(node):
    return _core.Array(node)


def qr(a, mode="reduced"):
    if mode not in ("reduced", "r"):
        raise ValueError(f"kiln.linalg.qr: mode {mode!r} is not supported (reduced or r)")
    q, r = _kiln.linalg.qr(_a(a))
    return _w(r) if mode == "r" else QRResult(_w(q), _w(r))


def svd(a, full_matrices=None, compute_uv=True, hermitian=False):
    """Thin SVD (u: (m, k), s: (k,) descending, vh: (k, n)), as Dask's: np.linalg.svd(x) on a
    kiln array gives this. full_matrices=True is refused unless the matrix is square."""
    x = _core.asarray(a)
    if full_matrices and x.ndim >= 2 and x.shape[-1] != x.shape[-2]:
        raise ValueError(
            "kiln.linalg.svd: full_matrices=True is not supported for non-square matrices "
            "(Kiln computes the thin SVD; pass full_matrices=False)"
        )
    u, s, vh = _kiln.linalg.svd(x._a)
    return SVDResult(_w(u), _w(s), _w(vh)) if compute_uv else _w(s)


def svdvals(x):
    return svd(x, compute_uv=False)


def svd_compressed(a, k, iterator="power", n_power_iter=0, n_oversamples=10, seed=0, compute=False):
    """Randomized SVD as dask.array.linalg.svd_compressed."""
    if iterator != "power":
        raise ValueError("kiln.linalg.svd_compressed: only iterator='power' is supported")
    u, s, vh = _kiln.linalg.svd_compressed(_a(a), int(k), int(n_power_iter), int(n_oversamples), int(seed))
    return SVDResult(_w(u), _w(s), _w(vh))


def cholesky(a, upper=False):
    lo = _w(_kiln.linalg.cholesky(_a(a)))
    return lo.mT if upper else lo


def solve(a, b):
    return _w(_kiln.linalg.solve(_a(a), _a(b)))


def inv(a):
    return _w(_kiln.linalg.inv(_a(a)))


def det(a):
    return _w(_kiln.linalg.det(_a(a)))


def slogdet(a):
    sign, logabsdet = _kiln.linalg.slogdet(_a(a))
    return SlogdetResult(_w(sign), _w(logabsdet))


def eigh(a, UPLO="L"):
    if UPLO != "L":
        raise ValueError("kiln.linalg.eigh: only UPLO='L' is supported")
    w, v = _kiln.linalg.eigh(_a(a))
    return EighResult(_w(w), _w(v))


def lstsq(a, b, rcond=None):
    if rcond is not None:
        raise ValueError("kiln.linalg.lstsq: rcond is eps * max(m, n), as NumPy 2's default")
    return tuple(_w(n) for n in _kiln.linalg.lstsq(_a(a), _a(b)))


def norm(x, ord=None, axis=None, keepdims=False):
    axes = [] if axis is None else ([int(axis)] if isinstance(axis, numbers.Integral) else [int(a) for a in axis])
    if isinstance(ord, str):
        return _w(_kiln.linalg.norm_named(_a(x), ord, axes, bool(keepdims)))
    return _w(_kiln.linalg.norm(_a(x), None if ord is None else float(ord), axes, bool(keepdims)))


def matmul(x1, x2):
    return _core.matmul(x1, x2)
