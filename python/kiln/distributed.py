"""Kiln over several processes on MPI (docs/DISTRIBUTED.md).

Run the same script on every rank (``mpirun -np 4 python prog.py``): every rank builds the same
arrays and computes them in the same order; each compute's blocks are spread over the ranks, and
every rank gets the results, the same bits as one process computes::

    import kiln, kiln.distributed as kd
    kd.init()
    x = kiln.random.default_rng(0).normal(size=(40000, 40000), chunks=(4000, 4000))
    print(kd.rank(), float(x.mean()))    # every rank prints the same mean

``KILN_MPI=1`` starts MPI at the first compute instead of ``init()``. MPI is reached through
Kiln's plugin, libkiln_mpi.so, built where Kiln's build found MPI (``KILN_MPI_PLUGIN`` names it).
"""

from __future__ import annotations

import numpy as np

from . import _kiln
from ._core import Array, _chunks_arg, _shape_arg, _wrap

_d = _kiln.distributed

__all__ = ["init", "active", "rank", "size", "library", "host", "finalize", "load_npy_shards",
           "from_array_on"]


def init() -> None:
    """Starts MPI (through Kiln's plugin) unless it runs already; idempotent."""
    _d.init()


def active() -> bool:
    """Whether this process is part of a distributed program (init() ran)."""
    return _d.active()


def rank() -> int:
    """This process's rank (0 when not distributed)."""
    return _d.rank()


def size() -> int:
    """The number of ranks (1 when not distributed)."""
    return _d.size()


def library() -> str:
    """The MPI library and version ("" when not distributed)."""
    return _d.library()


def host() -> str:
    """This rank's host name."""
    return _d.host()


def finalize() -> None:
    """Ends MPI if Kiln started it (also at exit); computes then run in this process alone."""
    _d.finalize()


def _shard_chunks(chunks, shape):
    """Kiln's block shape for load_npy_shards: None or -1 along the rows means each rank's rows
    whole (0: the same on every rank, whose row counts differ)."""
    out = _chunks_arg(chunks, shape)
    if out and isinstance(chunks, (tuple, list)) and chunks[0] in (None, -1):
        out[0] = 0
    return out


def load_npy_shards(path, chunks="auto") -> Array:
    """An array stored as one .npy file per rank, split along its first axis: each rank passes
    its own file (rank r's rows follow rank r - 1's; a rank may have none). A collective: every
    rank calls it, with the same chunks. Each rank reads only its file and keeps its rows; the
    blocks of later computes run where their rows are (nothing of the array moves unless a
    compute reads it elsewhere). ``chunks`` splits each rank's rows on their own."""
    shape = np.load(str(path), mmap_mode="r").shape if chunks != "auto" else ()
    return _wrap(_d.load_npy_shards(str(path), _shard_chunks(chunks, shape)))


def from_array_on(rank: int, a=None, *, shape=None, dtype=None, chunks="auto") -> Array:
    """An array that only rank ``rank`` has: ``a`` there (copied), None on the other ranks, which
    give ``shape`` and ``dtype`` (the holder may too). A collective. The blocks that read it run
    on ``rank``."""
    if a is not None:
        a = np.ascontiguousarray(a)
        shape = a.shape if shape is None else shape
        dtype = a.dtype if dtype is None else dtype
    if shape is None or dtype is None:
        raise TypeError("kiln.distributed.from_array_on: the ranks without the array give its "
                        "shape and dtype")
    shape = _shape_arg(shape)
    return _wrap(_d.from_buffer_on(int(rank), a, np.dtype(dtype).name, shape,
                                   _chunks_arg(chunks, shape)))
