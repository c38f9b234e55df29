"""The seed documents' workloads in Python, written with plain NumPy calls on kiln arrays:

    PYTHONPATH=build/release/python python examples/python/seeds.py [--small]

- 000: np.linalg.svd of a 10000 x 1000 array in (5000, 1000) chunks (NEP 18), and a logistic
  regression by dask-glm's newton solver (kiln.glm);
- 001: (x + 1)[::2, ::2].sum() of normal(10, 1) random numbers;
- 002: the diamond np.exp(x) - 1 / x, summed;
- 004: (np.sin(x) ** 2 + np.cos(x) ** 2 == 1).all().

Each line: the workload, its value, and the seconds of one compute after a first (compiling) one.
"""

import sys
import time

import numpy as np

import kiln

small = "--small" in sys.argv
n = 2000 if small else 10000


def timed(name, *arrays):
    kiln.compute(*arrays)  # compiles; the second compute reuses the cached plan and kernels
    start = time.perf_counter()
    values = kiln.compute(*arrays)
    print(f"{name:14s} {time.perf_counter() - start:8.4f} s  {values[0] if values[0].ndim == 0 else values[0].shape}")
    return values


rng = kiln.random.default_rng(0)

# 000: NEP 18 -- NumPy's svd on a chunked array
x = np.random.default_rng(0).random((n, n // 10))
d = kiln.asarray(x, chunks=(n // 2, n // 10))
u, s, v = np.linalg.svd(d)
s, u, v = timed("svd", s, u, v)
np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), rtol=1e-10)

# 000: the GLM, dask-glm's newton on logistic data
X = rng.normal(0, 1, size=(n * 10, 20), chunks=(n, 20))
y = (X @ np.linspace(-1, 1, 20) + rng.normal(size=n * 10, chunks=n)) > 0
start = time.perf_counter()
fit = kiln.glm.fit(X, y.astype(np.float64), solver="newton")
print(f"{'glm newton':14s} {time.perf_counter() - start:8.4f} s  {fit.n_iter} iterations")

# 001: random sum
x = rng.normal(10, 1, size=(n, n), chunks=(n // 5, n // 5))
timed("random-sum", (x + 1)[::2, ::2].sum())

# 002: the diamond
x = rng.uniform(1, 2, size=(n, n), chunks=(n // 5, n // 5))
timed("diamond", (np.exp(x) - 1 / x).sum())

# 004: the trigonometric identity
x = rng.random((n, n), chunks=(n // 5, n // 5))
timed("trig-identity", (np.sin(x) ** 2 + np.cos(x) ** 2 == 1).all())
