"""Results kept in a GPU's memory, and GPU memory made into kiln arrays without a copy.

kiln.compute(..., device="cuda", keep_on_device=True) returns DeviceArray objects: they expose
the CUDA array interface (version 3) and DLPack (kDLCUDA), so CuPy, PyTorch, JAX or Numba take
them without a copy (cupy.asarray(r)). kiln.asarray(obj) reads the CUDA array interface of
CuPy's (or any producer's) arrays in place. On cuda-emu, the emulator's memory is host memory:
its results are DeviceArrays too, with neither protocol (nothing may read them as GPU memory),
and kiln.asarray takes them back through __kiln_device_interface__, which both devices have.
"""

from __future__ import annotations

import sys

import numpy as np

from . import _kiln

_TYPESTR = {"bool": "|b1", "int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
_DTYPE_OF = {np.dtype(v).str: k for k, v in _TYPESTR.items()}


class DeviceArray:
    """A computed array in a GPU's memory (Kiln owns it; it lives while this object does)."""

    __slots__ = ("_r", "__weakref__")

    def __init__(self, result):
        self._r = result

    shape = property(lambda self: tuple(self._r.shape))
    dtype = property(lambda self: np.dtype(self._r.dtype))
    ndim = property(lambda self: len(self._r.shape))
    size = property(lambda self: int(np.prod(self._r.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    device = property(lambda self: f"{self._r.device}:{self._r.index}")

    def __repr__(self):
        return f"kiln.DeviceArray<shape={self.shape}, dtype={self.dtype}, device={self.device}>"

    def get(self) -> np.ndarray:
        """A host copy (NumPy), as CuPy's get()."""
        return self._r.host()

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("kiln.DeviceArray: copy=False, but the data is in a GPU's memory")
        a = self.get()
        return a if dtype is None else a.astype(dtype, copy=False)

    @property
    def __kiln_device_interface__(self) -> dict:
        """The CUDA array interface's fields, plus the device's kind and index (both devices)."""
        d = self._interface()
        d["device"], d["index"] = self._r.device, self._r.index
        return d

    def _interface(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": _TYPESTR[self._r.dtype],
            "data": (self._r.ptr, False),
            "strides": None,  # C-contiguous
            "version": 3,
            "stream": None,  # compute() returned after the devices finished writing it
        }

    @property
    def __cuda_array_interface__(self) -> dict:
        if self._r.device != "cuda":
            raise AttributeError(
                f"kiln.DeviceArray on {self._r.device} has no __cuda_array_interface__ (the "
                f"emulator's memory is host memory)"
            )
        return self._interface()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        view = self._r.dlpack_view()
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        return view.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        if self._r.device != "cuda":
            raise BufferError(f"kiln.DeviceArray on {self._r.device}: no DLPack device memory")
        return (2, self._r.index)  # kDLCUDA


def _synchronize(stream):
    """CUDA array interface v3: the producer's stream must be synchronized before its data is
    read. Kiln reads on streams of its own, so it waits here, through CuPy (the usual producer)."""
    if stream is None:
        return
    cupy = sys.modules.get("cupy")
    if cupy is None:
        raise TypeError(
            "kiln.asarray: the array's CUDA array interface names a stream to synchronize, and "
            "only CuPy's streams can be synchronized from Python here; synchronize it first and "
            "pass an object whose interface has stream None"
        )
    cupy.cuda.ExternalStream(stream).synchronize()


def from_interface(obj, d: dict, device: str, index: int, chunks):
    """A kiln array over the device memory a CUDA-array-interface dict describes (no copy)."""
    if d.get("mask") is not None:
        raise TypeError("kiln.asarray: masked CUDA arrays are not supported")
    shape = tuple(int(n) for n in d["shape"])
    dtype = _DTYPE_OF.get(np.dtype(d["typestr"]).str)
    if dtype is None:
        raise TypeError(
            f"kiln.asarray: unsupported dtype {np.dtype(d['typestr'])} (Kiln arrays hold bool, "
            f"int32, int64, float32 or float64)"
        )
    strides = d.get("strides")
    itemsize = np.dtype(d["typestr"]).itemsize
    if strides is not None:
        want, step = [], itemsize
        for n in reversed(shape):
            want.append(step)
            step *= n
        if tuple(s for s, n in zip(strides, shape) if n > 1) != tuple(
            s for s, n in zip(reversed(want), shape) if n > 1
        ):
            raise ValueError(
                "kiln.asarray: the GPU array is not C-contiguous (make it so first, e.g. "
                "cupy.ascontiguousarray)"
            )
    ptr = int(d["data"][0])
    if ptr == 0 and int(np.prod(shape)) != 0:
        raise ValueError("kiln.asarray: the CUDA array interface gives a null pointer")
    _synchronize(d.get("stream"))
    return _kiln.from_device(ptr, dtype, list(shape), chunks, device, index, obj)


def device_input(a, chunks_of):
    """kiln.asarray's GPU path: a kiln array over `a`'s device memory, or None if `a` has none.
    chunks_of(shape) gives the chunk argument for that shape."""
    kiln_view = getattr(type(a), "__kiln_device_interface__", None)
    if kiln_view is not None:
        d = a.__kiln_device_interface__
        return from_interface(a, d, d["device"], int(d["index"]), chunks_of(tuple(d["shape"])))
    if hasattr(a, "__cuda_array_interface__"):
        d = a.__cuda_array_interface__
        dev = getattr(a, "device", None)
        index = int(getattr(dev, "id", 0) or 0)
        return from_interface(a, d, "cuda", index, chunks_of(tuple(d["shape"])))
    return None
