#!/usr/bin/python3
"""Kiln's linear algebra side by side with NumPy and Dask, alternated in one run.

    bench/peers/.venv/bin/python bench/peers/linalg_peers.py build/release/kiln [--rounds R]
        [--only svd|matmul]

(`bash scripts/peers.sh` makes the venv from bench/peers/requirements.txt; this script needs only
numpy and dask from it.) Workloads, each with its data made before the timed region:

  svd M x K, chunks C x K   u, s, vh = svd(x) of x ~ N(0, 1): Kiln `kiln run svd --rows M --cols K
                            --chunk C` (TSQR over the row blocks), NumPy
                            np.linalg.svd(x, full_matrices=False) (one multi-threaded LAPACK
                            call), Dask da.linalg.svd (TSQR) with the threaded scheduler.
  matmul N, chunks C x C    (x @ x).sum() of x ~ U(-1, 1): Kiln `kiln run matmul --resident`,
                            NumPy (one multi-threaded OpenBLAS gemm), Dask with threads.

Kiln runs as a new process each round, as two rows: `kiln`, the median of 3 computes in that
process (the peers' processes are warm too: every round after the first reuses them), and
`kiln-first`, a process's first compute alone (its buffers and workspaces faulted in fresh, which
a warm process reuses from its pool).

Prints a markdown table: median seconds over the rounds, and each peer's time over Kiln's.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = [("svd", 10000, 1000, 5000), ("svd", 1000000, 100, 100000), ("matmul", 4000, 4000, 1000),
         ("matmul", 8000, 8000, 2000)]


def kiln_seconds(kiln, case, repeat):
    w, m, k, c = case
    cmd = [kiln, "run", w, "--chunk", str(c), "--json", "--repeat", str(repeat)]
    cmd += ["--rows", str(m), "--cols", str(k)] if w == "svd" else ["--size", str(m), "--resident"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out["seconds"], out["result"]


def peer_run(peer, case, x):
    w, m, k, c = case
    import dask
    import dask.array as da
    if w == "svd":
        if peer == "numpy":
            t = time.perf_counter()
            s = np.linalg.svd(x, full_matrices=False)[1]
            return time.perf_counter() - t, s[0]
        d = da.from_array(x, chunks=(c, k))
        t = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            u, s, v = dask.compute(*da.linalg.svd(d))
        return time.perf_counter() - t, s[0]
    if peer == "numpy":
        t = time.perf_counter()
        r = (x @ x).sum()
        return time.perf_counter() - t, r
    d = da.from_array(x, chunks=(c, c))
    t = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        r = (d @ d).sum().compute()
    return time.perf_counter() - t, r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kiln", nargs="?", default="build/release/kiln")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", choices=["svd", "matmul"], help="one workload's cases only")
    args = p.parse_args()
    import dask
    print(f"numpy {np.__version__}, dask {dask.__version__}, python {sys.version.split()[0]}; "
          f"{args.rounds} rounds, Kiln and the peers alternated", file=sys.stderr)
    rows = []
    for case in CASES:
        w, m, k, c = case
        if args.only and w != args.only:
            continue
        rng = np.random.default_rng(0)
        x = rng.standard_normal((m, k)) if w == "svd" else rng.uniform(-1, 1, (m, k))
        times = {"kiln": [], "kiln-first": [], "numpy": [], "dask": []}
        results = {}
        for _ in range(args.rounds):
            for impl, repeat in (("kiln", 3), ("kiln-first", 1)):
                s, r = kiln_seconds(args.kiln, case, repeat)
                times[impl].append(s)
                results[impl] = r
            for peer in ("numpy", "dask"):
                s, r = peer_run(peer, case, x)
                times[peer].append(s)
                results[peer] = r
        med = {k2: statistics.median(v) for k2, v in times.items()}
        for impl in ("kiln", "kiln-first", "numpy", "dask"):
            rows.append((w, f"{m} x {k}", c, impl, med[impl], med[impl] / med["kiln"],
                         results[impl]))
        print(json.dumps({"case": case, "median_s": med}), file=sys.stderr)
    print("| workload | shape | chunk | implementation | median s | time / Kiln's | result |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
    for w, shape, c, impl, s, ratio, r in rows:
        print(f"| {w} | {shape} | {c} | {impl} | {s:.3f} | {ratio:.2f} | {float(r):.6g} |")


if __name__ == "__main__":
    main()
