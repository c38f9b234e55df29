#!/usr/bin/python3
"""Kiln on R ranks of mpirun against Dask on a distributed LocalCluster of R single-threaded
worker processes (the same number of processes, one thread each), on seed 001's expression.

    bench/peers/.venv/bin/python bench/peers/dist_peers.py build/release/kiln [RANKS...]

random-sum: x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum(), generated inside
the timed region by both (Kiln inside its kernels, Dask by dask.array.random.RandomState). Kiln:
`kiln run random-sum --size N --chunk C --repeat 3 --json` under `mpirun --oversubscribe -np R`
(its median); Dask: the median of 3 computes after one warm-up, the cluster started before the
clock. Prints one Markdown table; the ratio is Dask's time over Kiln's, measured in one run.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import dask
import dask.array as da
from dask.distributed import Client, LocalCluster

CASES = [(20000, 2000), (8000, 500)]


def kiln_time(kiln, ranks, n, c):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), kiln, "run", "random-sum",
                          "--size", str(n), "--chunk", str(c), "--repeat", "3", "--json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["seconds"], j["result"]


def dask_time(client, n, c):
    def run():
        x = da.random.RandomState(0).normal(10, 1, (n, n), chunks=(c, c))
        return float(((x + 1)[::2, ::2]).sum().compute())

    run()
    times, result = [], None
    for _ in range(3):
        t = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main():
    kiln = sys.argv[1] if len(sys.argv) > 1 else "build/release/kiln"
    ranks = [int(r) for r in sys.argv[2:]] or [1, 2]
    print(f"Dask {dask.__version__}, {os.cpu_count()} CPUs")
    print("| random-sum N, C | processes | Kiln (mpirun) | Dask distributed | Dask / Kiln |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in ranks:
        with LocalCluster(n_workers=r, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            for n, c in CASES:
                k, kr = kiln_time(kiln, r, n, c)
                d, dr = dask_time(client, n, c)
                assert abs(kr - dr) / abs(dr) < 1e-3, (kr, dr)  # (different generators: close)
                print(f"| {n}, {c} | {r} | {k:.3f} s | {d:.3f} s | {d / k:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
