"""Kiln: lazy, chunked arrays compiled into fused kernels (LLVM for CPUs, NVRTC for GPUs).

    import kiln, numpy as np
    x = kiln.random.default_rng(0).normal(size=(20000, 20000), chunks=(2000, 2000))
    y = np.sin(x) ** 2 + np.cos(x) ** 2      # NumPy's functions build Kiln expressions
    print(float(y.mean()))                    # one fused kernel per block, run in parallel

Kiln arrays follow NumPy 2's semantics (dtypes, promotion with weak Python scalars, NaN rules)
and Dask's ways (chunks, compute, persist). See docs/PYTHON.md.
"""

import numpy as _np

from . import _kiln
from ._core import *  # noqa: F401,F403
from ._array_api import *  # noqa: F401,F403
from . import distributed, glm, linalg, random  # noqa: F401,E402

__version__ = "0.1.0"
__array_api_version__ = "2024.12"

# The dtypes, as the array API's namespace attributes.
bool, int32, int64, float32, float64 = (_np.dtype(t) for t in ("bool", "int32", "int64", "float32", "float64"))
e, pi, inf, nan = 2.718281828459045, 3.141592653589793, float("inf"), float("nan")
newaxis = None


def compile_target() -> str:
    """What kernels are compiled for here, e.g. "znver4, vector math AVX-512"."""
    return _kiln.compile_target()
from ._device import DeviceArray  # noqa: E402,F401
