#!/usr/bin/python3
"""Scheduling overhead, Kiln vs Dask: one table per run, every figure measured here.

    bench/peers/.venv/bin/python bench/peers/overhead_table.py build/release/kiln [options]
    /usr/bin/python3 bench/peers/overhead_table.py build/release/kiln [options]

(`bash scripts/peers.sh --overhead-table` runs it in the peers' venv.)

For each seed workload at the peers table's sizes: Kiln's tasks and wall time fused and with
--no-fuse (`kiln run W --json`, median of --repeat computes, compile excluded), and Dask's
threaded scheduler on the same expression (tasks in the optimized graph, median wall of --rounds
runs). logistic-gd is a solver, many computes: Kiln's tasks are summed over them, and Dask's
row is dask-glm's gradient_descent on persisted Dask arrays with the tasks it ran counted by a
dask.callbacks.Callback. Then a row per dask-glm solver (--glm-solvers; `kiln run glm` on the
same data, iterations Kiln's / dask-glm's, as bench/peers/glm_peers.py counts them). Then the cost of a task itself: Kiln's scheduler overhead per task from the Google
Benchmark suite (`kiln_bench --benchmark_filter=BM_EmptyTasks --benchmark_format=json`: tasks
whose kernels do nothing) and Dask's, measured the same way as in seeds_peers.py (da.ones((n,),
chunks=1) + 1, .sum(): wall time per task of the optimized graph).

Output: markdown tables on stdout, then one JSON object per line (kinds: workload, kiln_overhead,
dask_overhead).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeds_peers as sp  # noqa: E402  (also clears the OpenBLAS variables for the peers)
import glm_peers as gp  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kiln", nargs="?", default="build/release/kiln")
    p.add_argument("--bench", default=None,
                   help="kiln_bench binary (default: next to the kiln binary)")
    p.add_argument("--workloads", default=",".join(sp.WORKLOADS))
    p.add_argument("--repeat", type=int, default=3, help="computes per kiln run (median)")
    p.add_argument("--rounds", type=int, default=3, help="Dask runs per workload (median)")
    p.add_argument("--overhead-tasks", type=int, default=5000)
    p.add_argument("--glm-solvers", default=",".join(gp.SOLVERS),
                   help="kiln::glm / dask-glm solvers to add as rows ('' for none)")
    p.add_argument("--admm-iter", type=int, default=2, help="admm's iteration cap")
    sp.add_size_arguments(p)
    p.set_defaults(resident=False)  # sp.sizes() reads it: the generated (not resident) sizes
    return p.parse_args()


def kiln_json(args, w, n, c, fuse):
    cmd = [args.kiln, "run", w, "--json", "--quiet", "--repeat", str(args.repeat),
           "--size", str(n), "--chunk", str(c)] + ([] if fuse else ["--no-fuse"])
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=sp.KILN_ENV)
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])


def dask_workload(args, w, n, c):
    import dask
    if w == "logistic-gd":  # dask-glm's solver: count the tasks its computes run
        from dask.callbacks import Callback

        class Count(Callback):
            tasks = 0

            def _pretask(self, key, dsk, state):
                Count.tasks += 1

        runner = sp.glm_runner("dask-threads")
        runner.prepare(n, c)
        times = []
        for _ in range(args.rounds):
            Count.tasks = 0
            t0 = time.perf_counter()
            with Count():
                runner.run(n, c)
            times.append(time.perf_counter() - t0)
        return {"tasks": Count.tasks, "seconds": statistics.median(times)}
    import dask.array as da
    outs = sp.expression(w, sp.draw(w, sp.dask_rng("dask-threads"), (n, n), chunks=(c, c)), da)
    graph = {}  # the union of the optimized outputs' graphs: the tasks one compute runs
    for o in dask.optimize(*outs):
        graph.update(dict(o.__dask_graph__()))
    tasks = len(graph)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        dask.compute(*outs, scheduler="threads")
        times.append(time.perf_counter() - t0)
    return {"tasks": tasks, "seconds": statistics.median(times)}


class CountTasks:
    """A dask callback counting the tasks the computes inside it run."""

    def __init__(self):
        from dask.callbacks import Callback
        counter = self
        self.tasks = 0

        class Count(Callback):
            def _pretask(self, key, dsk, state):
                counter.tasks += 1

        self.callback = Count()


def glm_rows(args):
    """Every dask-glm solver (admm capped at --admm-iter iterations) on logistic-gd's problem
    size, the same data for both (glm_peers.problem, read by `kiln run glm --input`): Kiln's
    tasks summed over its computes, fused and unfused; dask-glm on persisted Dask arrays with
    the threaded scheduler and the tasks it ran."""
    import tempfile

    import dask
    import dask.array as da
    import numpy as np
    n, c = sp.sizes(args, "logistic-gd")
    X, y = gp.problem(n, sp.GLM_FEATURES)
    Xd, yd = dask.persist(da.from_array(X, chunks=(c, sp.GLM_FEATURES)),
                          da.from_array(y, chunks=(c,)), scheduler="threads")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "X.npy"), X)
        np.save(os.path.join(tmp, "y.npy"), y)
        for solver in [s for s in args.glm_solvers.split(",") if s]:
            print(f"overhead: glm {solver} N={n} C={c}", file=sys.stderr)
            cap = args.admm_iter if solver == "admm" else None
            fused = gp.kiln_run(args.kiln, tmp, c, solver, cap, repeat=args.repeat)
            unfused = gp.kiln_run(args.kiln, tmp, c, solver, cap, extra=["--no-fuse"],
                                  repeat=args.repeat)
            count = CountTasks()
            with count.callback:
                seconds, iterations, _ = gp.dask_glm_run(solver, Xd, yd, cap, "threads")
            keep = ("tasks", "computes", "seconds", "iterations", "peak_bytes")
            rows.append({"kind": "workload", "workload": f"glm {solver}", "n": n, "c": c,
                         "kiln_fused": {k: fused[k] for k in keep},
                         "kiln_unfused": {k: unfused[k] for k in keep},
                         "dask_threads": {"tasks": count.tasks, "seconds": seconds,
                                          "iterations": iterations}})
    return rows


def kiln_overhead(args):
    bench = args.bench or os.path.join(os.path.dirname(args.kiln), "kiln_bench")
    cmd = [bench, "--benchmark_filter=BM_EmptyTasks", "--benchmark_format=json",
           "--benchmark_min_time=0.2"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=sp.KILN_ENV)
    rows = []
    for b in json.loads(p.stdout)["benchmarks"]:
        rows.append({"kind": "kiln_overhead", "name": b["name"], "tasks": b["tasks"],
                     "ns_per_task": b["ns_per_task"]})
    return rows


def main():
    args = parse_args()
    lines = []
    print("| workload | N / C | Kiln fused: tasks, s | Kiln unfused: tasks, s | "
          "Dask threads: tasks, s | Dask s / Kiln fused s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for w in args.workloads.split(","):
        n, c = sp.sizes(args, w)
        print(f"overhead: {w} N={n} C={c}", file=sys.stderr)
        fused = kiln_json(args, w, n, c, True)
        unfused = kiln_json(args, w, n, c, False)
        d = dask_workload(args, w, n, c)
        row = {"kind": "workload", "workload": w, "n": n, "c": c,
               "kiln_fused": {k: fused[k] for k in ("tasks", "seconds", "peak_bytes")},
               "kiln_unfused": {k: unfused[k] for k in ("tasks", "seconds", "peak_bytes")},
               "dask_threads": d}
        lines.append(row)
        print(f"| {w} | {n} / {c} | {fused['tasks']}, {fused['seconds']:.3f} | "
              f"{unfused['tasks']}, {unfused['seconds']:.3f} | {d['tasks']}, {d['seconds']:.3f} | "
              f"{d['seconds'] / fused['seconds']:.1f}x |")
    for row in glm_rows(args):
        lines.append(row)
        f, u, d = row["kiln_fused"], row["kiln_unfused"], row["dask_threads"]
        it = f"{int(f['iterations'])} / {d['iterations']} it."
        print(f"| {row['workload']} ({it}) | {row['n']} / {row['c']} | {f['tasks']}, "
              f"{f['seconds']:.3f} | {u['tasks']}, {u['seconds']:.3f} | {d['tasks']}, "
              f"{d['seconds']:.3f} | {d['seconds'] / f['seconds']:.1f}x |")
    print()
    kiln = kiln_overhead(args)
    dask = sp.dask_overhead(args.overhead_tasks)
    lines += kiln + dask
    print("| scheduler | benchmark | tasks | per task |")
    print("| --- | --- | ---: | ---: |")
    for r in kiln:
        print(f"| Kiln | {r['name']} | {r['tasks']:.0f} | {r['ns_per_task'] / 1000:.3f} µs |")
    for r in dask:
        print(f"| Dask {r['scheduler']} | ones({r['n']}, chunks=1) + 1, sum | {r['tasks']} | "
              f"{r['us_per_task']:.1f} µs |")
    print()
    for ln in lines:
        print(json.dumps(ln))


if __name__ == "__main__":
    main()
