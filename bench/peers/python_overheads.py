"""Kiln's Python layer against its C++ figures, Dask and NumPy, in one run (issue 36):

- building one operation (`y = y + 1` on a lazy array, a new node each time): Kiln, Dask;
- compute() of a tiny expression whose plan is cached (16 blocks of 4 x 4): Kiln from Python,
  the same from C++ (kiln_bench's BM_PlanCacheHit, threads 1 and 2, run here), Dask;
- the seed workloads from Python against `kiln run` (the CLI's own timing) on the same sizes, and
  Dask's random-sum (default_rng normal) for the ratio.

    PYTHONPATH=build/release/python bench/peers/.venv/bin/python bench/peers/python_overheads.py \\
        build/release [--quick]

Prints a Markdown table: medians of repeated runs, the machine line first.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import kiln

build = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build/release"
quick = "--quick" in sys.argv
cli, bench = os.path.join(build, "kiln"), os.path.join(build, "kiln_bench")


def median_time(f, repeat, number=1):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            f()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


rows = []


def row(what, *cells):
    rows.append("| " + what + " | " + " | ".join(cells) + " |")


# ---- building one operation ----
def build_chain(zero, n):
    y = zero
    for _ in range(n):
        y = y + 1
    return y


n_ops = 2000 if quick else 20000
kz = kiln.zeros(1000, chunks=100)
k_op = median_time(lambda: build_chain(kz, n_ops), 5) / n_ops
try:
    import dask.array as da

    dz = da.zeros(1000, chunks=100)
    d_op = median_time(lambda: build_chain(dz, n_ops // 10), 3) / (n_ops // 10)
except ImportError:
    da, d_op = None, float("nan")
nz = np.zeros(1000)
n_op = median_time(lambda: build_chain(nz, n_ops), 5) / n_ops
row("build one op (`y = y + 1`, 1000 elements)", f"{k_op * 1e6:.2f} µs", "",
    f"{d_op * 1e6:.1f} µs", f"{n_op * 1e6:.2f} µs (computes)")

# ---- compute on a cached plan ----
rng = kiln.random.default_rng(7)
x = rng.uniform(0, 1, size=(16, 16), chunks=(4, 4))
y = (np.sin(x) + 1) * 0.5 - x
y.compute()
reps = 200 if quick else 2000
cpp = {}
if os.path.exists(bench):
    out = subprocess.run([bench, "--benchmark_filter=BM_PlanCacheHit/threads:[12]/rebuild:0",
                          "--benchmark_format=json", "--benchmark_repetitions=3",
                          "--benchmark_report_aggregates_only=true"],
                         capture_output=True, text=True, check=True).stdout
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            cpp[b["run_name"].split("threads:")[1][0]] = b["us_per_compute"]
dask_cell = ""
if da is not None:
    dx = da.random.default_rng(7).uniform(0, 1, size=(16, 16), chunks=(4, 4))
    dy = (np.sin(dx) + 1) * 0.5 - dx
    dask_cell = f"{median_time(lambda: dy.compute(scheduler='threads'), 5, 20) * 1e6:.0f} µs"
for threads in (1, 2):
    with kiln.config.set(threads=threads):
        t = median_time(y.compute, 5, reps)
    c = cpp.get(str(threads))
    row(f"compute() of a cached plan, 16 blocks, {threads} thread{'s' if threads > 1 else ''}",
        f"{t * 1e6:.1f} µs", f"{c:.1f} µs" if c else "n/a", dask_cell if threads == 2 else "", "")


# ---- the seed workloads: Python against the CLI ----
def cli_seconds(args):
    out = subprocess.run([cli, "run", *args, "--json", "--quiet", "--repeat", "5"],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    return r["seconds"]  # the median of the repeats


n = 4000 if quick else 8000
c = 1000
seeds = {
    "random-sum": (["random-sum", "--size", str(n), "--chunk", str(c)],
                   lambda: (kiln.random.default_rng(0).normal(10, 1, size=(n, n), chunks=(c, c))
                            + 1)[::2, ::2].sum()),
    "diamond": (["diamond", "--size", str(n), "--chunk", str(c)],
                lambda: (lambda x: (np.exp(x) - 1 / x).sum())(
                    kiln.random.default_rng(0).uniform(1, 2, size=(n, n), chunks=(c, c)))),
    "trig-identity": (["trig-identity", "--size", str(n), "--chunk", str(c)],
                      lambda: (lambda x: (np.sin(x) ** 2 + np.cos(x) ** 2 == 1).all())(
                          kiln.random.default_rng(0).random((n, n), chunks=(c, c)))),
}
for name, (args, make) in seeds.items():
    expr = make()
    expr.compute()
    py = median_time(lambda: make().compute(), 5)
    cl = cli_seconds(args) if os.path.exists(cli) else float("nan")
    dask_cell = ""
    if name == "random-sum" and da is not None:
        def dask_sum():
            dx = da.random.default_rng(0).normal(10, 1, size=(n, n), chunks=(c, c))
            return (dx + 1)[::2, ::2].sum().compute(scheduler="threads")

        dt = median_time(dask_sum, 3)
        dask_cell = f"{dt:.3f} s ({dt / py:.1f}x Kiln's time)"
    row(f"{name} {n} x {n}, chunks {c}", f"{py:.4f} s", f"{cl:.4f} s (CLI; Python {py / cl:.3f}x)",
        dask_cell, "")

cpu = ""
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
except (OSError, StopIteration):
    pass
print(f"machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
      f"kiln target {kiln.compile_target()}, NumPy {np.__version__}"
      + (f", Dask {__import__('dask').__version__}" if da is not None else ""))
print()
print("| what | Kiln from Python | Kiln from C++ | Dask | NumPy |")
print("| --- | ---: | ---: | ---: | ---: |")
print("\n".join(rows))
