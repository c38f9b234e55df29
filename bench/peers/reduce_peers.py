#!/usr/bin/python3
"""Kiln's whole-array reductions beside NumPy's, per core, in one run.

    bench/peers/.venv/bin/python bench/peers/reduce_peers.py build/release/kiln_bench
        [--repetitions R] [--shapes square,narrow]

(`bash scripts/peers.sh` makes the venv; this script needs only numpy.) Arrays of standard
normals, made before the timed region: `square` 6000 x 6000 float64 (Kiln's chunks 2000 x 2000),
`narrow` 1e6 x 100 (chunks 100000 x 100, the GLM seed's X: rows of 800 bytes). Kiln:
`kiln_bench --benchmark_filter='BM_Reduce(Narrow)?/<fn>/threads:T'` (one compute() each, the
median of R repetitions, T = 1 and 2). NumPy: `x.sum()`, `(x > 8).any()` etc. on its own array of
the same shape (NumPy's reductions run on one thread), the best of 7 after one warm-up, as
bench/RESULTS.md's earlier tables. any is `(x > 8).any()` and all `(x < 8).all()`: the comparison
is part of the timed work for both, and neither array has an element past 8 (checked). The
nan-functions (np.nansum(x) ...) run over the same arrays, which hold no NaN: NumPy's copy the
array with its NaN replaced (nanmin and nanmax: fmin/fmax.reduce, no copy), Kiln's fold
where(isnan(x), fill, x) in one pass either way.

Prints a markdown table: ns per element, and NumPy's time over Kiln's one thread (>= 1: Kiln is at
least as fast per core).
"""
import argparse
import json
import subprocess
import time

import numpy as np

FNS = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "any", "all", "nansum", "nanprod",
       "nanmean", "nanmin", "nanmax", "nanargmin", "nanargmax", "nanvar"]
SHAPES = {"square": (6000, 6000), "narrow": (1000000, 100)}


def numpy_call(fn, x):
    if fn == "any":
        return lambda: (x > 8).any()
    if fn == "all":
        return lambda: (x < 8).all()
    if fn.startswith("nan"):
        return lambda: getattr(np, fn)(x)
    return getattr(x, fn)


def numpy_ns(fn, x, rounds=7):
    f = numpy_call(fn, x)
    f()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e9 / x.size


def kiln_ns(bench, shape, repetitions):
    family = "BM_ReduceNarrow" if shape == "narrow" else "BM_Reduce"
    cmd = [bench, f"--benchmark_filter=^{family}/", "--benchmark_format=json",
           f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    ns = {}
    for b in out["benchmarks"]:
        # One repetition has no aggregates: its one run is the figure.
        if b.get("aggregate_name", "median" if repetitions == 1 else None) != "median":
            continue
        _, fn, threads = b["run_name"].split("/")[:3]
        ns[(fn, int(threads.split(":")[1]))] = b["ns_per_element"]
    return ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--shapes", default="square,narrow")
    args = ap.parse_args()
    print(f"NumPy {np.__version__}")
    print("| array | reduction | Kiln 1 thread | Kiln 2 threads | NumPy | NumPy / Kiln 1 thread |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for shape in args.shapes.split(","):
        k = kiln_ns(args.bench, shape, args.repetitions)
        x = np.random.default_rng(31).standard_normal(SHAPES[shape])
        assert not (x > 8).any() and (x < 8).all(), "an element past 8: any/all would differ"
        rows, cols = SHAPES[shape]
        for fn in FNS:
            n = numpy_ns(fn, x)
            one, two = k[(fn, 1)], k[(fn, 2)]
            print(f"| {rows} x {cols} | {fn} | {one:.3f} | {two:.3f} | {n:.3f} | {n / one:.2f} |",
                  flush=True)
        del x


if __name__ == "__main__":
    main()
