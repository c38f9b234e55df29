"""kiln.distributed under mpirun (ctest Distributed.FromPython: mpirun -np 3 python mpi_check.py):
each rank checks its results against NumPy and exits non-zero on a failure. Not a pytest module
(pytest runs one process)."""
import os
import sys

import numpy as np

import kiln
import kiln.distributed as kd

failures = []


def check(name, got, want, rtol=1e-12):
    if not np.allclose(got, want, rtol=rtol, atol=1e-12):
        failures.append(f"{name}: {got!r} != {want!r}")


kd.init()
me, ranks = kd.rank(), kd.size()
assert kd.active() and ranks >= 1 and 0 <= me < ranks

# A random array: the same values on every rank, as in one process.
x = kiln.random.default_rng(3).normal(size=(3000, 40), chunks=(250, 40))
check("mean", float(x.mean()), float(np.asarray(x.compute()).mean()))

# .npy shards: rank r's file holds rows 100 r + 20 r ... (rank 1 has none on three ranks).
rows = [0 if (ranks == 3 and r == 1) else 100 + 20 * r for r in range(ranks)]
full = np.sin(np.arange(sum(rows) * 5, dtype=np.float64)).reshape(-1, 5)
start = sum(rows[:me])
path = f"mpi_check_shard_{ranks}_{me}.npy"
np.save(path, full[start:start + rows[me]])
xs = kd.load_npy_shards(path, chunks=(64, 5))
check("shards: column sums", xs.sum(axis=0).compute(), full.sum(axis=0))
check("shards: Gram matrix", (xs.T @ xs).compute(), full.T @ full)
check("shards: row norms", np.sqrt((xs * xs).sum(axis=1)).compute(),
      np.sqrt((full * full).sum(axis=1)))
os.remove(path)

# An array that rank 0 holds.
w = np.cos(np.arange(600, dtype=np.float64)).reshape(200, 3)
v = kd.from_array_on(0, w if me == 0 else None, shape=(200, 3), dtype="float64", chunks=(50, 3))
check("given on rank 0", (v * 2).sum(axis=0).compute(), (w * 2).sum(axis=0))

# Several arrays persisted in one compute; a reduction read afterwards.
a, b = kiln.persist(x + 1, x * 2)
check("persist of two", float((a - b).sum()), float(np.asarray(x.compute() + 1 - x.compute() * 2).sum()))

if failures:
    for f in failures:
        print(f"mpi_check: rank {me} of {ranks}: FAILED {f}", file=sys.stderr)
    sys.exit(1)
if me == 0:
    print(f"mpi_check: {ranks} ranks ({kd.library()}): all checks passed")
