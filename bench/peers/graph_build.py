"""Graph-building and optimization cost per node in Dask, to set against Kiln's.

Builds the same chain as bench/fusion_bench.cpp (BM_BuildChain, BM_PlanBuild): `ops` element-wise
ops cycling sin, +1, *0.5, abs, sqrt over an array of `blocks` chunks, then times
dask.optimize (which fuses the chain: Dask's counterpart of Kiln's pass pipeline) and prints
microseconds per op and per task. Usage: python3 bench/peers/graph_build.py [--ops 1000]
"""
import argparse
import time

import dask
import dask.array as da
import numpy as np


def chain(x, ops):
    for i in range(ops):
        k = i % 5
        if k == 0:
            x = da.sin(x)
        elif k == 1:
            x = x + 1
        elif k == 2:
            x = x * 0.5
        elif k == 3:
            x = abs(x)
        else:
            x = da.sqrt(x)
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"Dask {dask.__version__}, NumPy {np.__version__}")
    print("| blocks | ops | build us/op | optimize us/task | tasks (raw) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for blocks in (1, 16):
        best_build, best_opt, tasks = float("inf"), float("inf"), 0
        for _ in range(args.repeat):
            x = da.zeros(1000 * blocks, chunks=1000)
            t0 = time.perf_counter()
            y = chain(x, args.ops)
            t1 = time.perf_counter()
            tasks = len(dict(y.__dask_graph__()))
            t2 = time.perf_counter()
            (opt,) = dask.optimize(y)
            dict(opt.__dask_graph__())
            t3 = time.perf_counter()
            best_build = min(best_build, (t1 - t0) / args.ops)
            best_opt = min(best_opt, (t3 - t2) / tasks)
        print(f"| {blocks} | {args.ops} | {best_build * 1e6:.1f} | {best_opt * 1e6:.1f} | {tasks} |")


if __name__ == "__main__":
    main()
