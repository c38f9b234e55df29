"""kiln.random: NumPy's Generator method names over Kiln's counter-based Philox4x32-10 stream.

Values depend on the seed and each element's index only (never on chunks, threads or device),
and are computed inside the kernels that read them (a random array is never stored unless
persisted). They are not NumPy's values for the same seed.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _core, _kiln

__all__ = ["Generator", "default_rng"]


def _size(size):
    if size is None:
        return []
    if isinstance(size, numbers.Integral):
        return [int(size)]
    return [int(s) for s in size]


class Generator:
    """Made by default_rng(seed); each call draws an independent stream."""

    def __init__(self, seed=0):
        if isinstance(seed, Generator):
            seed = seed._seed
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (1 << 64))
        seed = int(seed)
        if not 0 <= seed < (1 << 64):
            raise ValueError(f"kiln.random: the seed must be in [0, 2**64), got {seed}")
        self._seed = seed
        self._g = _kiln.Generator(seed)

    def __repr__(self):
        return f"kiln.random.Generator(Philox4x32-10, seed={self._seed})"

    def _wrap(self, node, size):
        out = _core.Array(node)
        return out.reshape(()) if size is None else out

    def random(self, size=None, dtype=np.float64, chunks="auto"):
        """Floats in [0, 1)."""
        return self.uniform(0.0, 1.0, size, dtype=dtype, chunks=chunks)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64, chunks="auto"):
        shape = _size(size) or [1]
        node = self._g.uniform(float(low), float(high), shape, _core._chunks_arg(chunks, shape),
                               _core._dtype_name(dtype))
        return self._wrap(node, size)

    def normal(self, loc=0.0, scale=1.0, size=None, chunks="auto"):
        shape = _size(size) or [1]
        return self._wrap(self._g.normal(float(loc), float(scale), shape, _core._chunks_arg(chunks, shape)), size)

    def standard_normal(self, size=None, dtype=np.float64, chunks="auto"):
        out = self.normal(0.0, 1.0, size, chunks=chunks)
        return out if np.dtype(dtype) == np.float64 else out.astype(dtype)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False, chunks="auto"):
        if high is None:
            low, high = 0, low
        high = int(high) + (1 if endpoint else 0)
        shape = _size(size) or [1]
        node = self._g.integers(int(low), high, shape, _core._chunks_arg(chunks, shape),
                                _core._dtype_name(dtype))
        return self._wrap(node, size)


def default_rng(seed=None) -> Generator:
    """A Generator (NumPy's default_rng names): kiln.random.default_rng(42).normal(size=(n, m),
    chunks=(1000, m))."""
    return Generator(seed)
