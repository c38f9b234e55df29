#!/usr/bin/python3
"""The seed workloads of `kiln run` with NumPy, NumExpr and Dask, alternated with Kiln.

    /usr/bin/python3 bench/peers/seeds_peers.py build/release/kiln [options]

Workloads (same expressions and default sizes as `kiln list`):

  random-sum     x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()
                 N=20000 C=2000. NumPy runs it block by block (the whole x would be 3.2 GB);
                 NumExpr is skipped: it has no generator and the generation dominates, so it
                 would be the NumPy blockwise run plus an evaluate() call.
  trig-identity  x = uniform(0, 1, (N, N)); y = sin(x)**2 + cos(x)**2 == 1; y.all(), y.sum()
                 N=10000 C=2000 (NumPy and NumExpr on whole arrays: a few GB of temporaries).
  diamond        x = uniform(1, 2, (N, N)); (exp(x) - 1/x).sum()
                 N=10000 C=2000.

Every implementation generates its own random input inside the timed region (Kiln generates
it inside its kernels), with NumPy's legacy RandomState, as dask.array.random.RandomState
does. Results are therefore only statistically equal across implementations (Kiln uses
Philox); they are printed so that gross errors show.

Each round runs, for one workload, Kiln (`kiln run W --json --repeat R`: the median of R
computes in one process, so JIT compilation is excluded after the first) and then each peer
once, rotating the order every round. A peer is not repeated once its time for the workload
exceeds --peer-budget seconds, which keeps the whole script within about three minutes on two
cores. Also measured: Dask's per-task overhead (da.ones((n,), chunks=1) + 1, .sum(), timed
per task of the optimized graph) with the threaded and synchronous schedulers.

Output: a markdown table of medians and Kiln's speed-up (peer median / Kiln median) on stdout,
then one JSON object per line (kinds: env, run, summary, dask_overhead), also written to
--jsonl FILE if given. Lines starting with "{" are the JSON lines.
"""
import argparse
import contextlib
import gc
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

WORKLOADS = ("random-sum", "trig-identity", "diamond")
PEERS = ("numpy", "numexpr", "dask-threads", "dask-sync")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kiln", nargs="?", default="build/release/kiln",
                   help="the kiln binary (default: build/release/kiln)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help="comma-separated subset of " + ", ".join(WORKLOADS))
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of " + ", ".join(PEERS))
    p.add_argument("--rounds", type=int, default=3, help="rounds per workload (default 3)")
    p.add_argument("--kiln-repeat", type=int, default=3,
                   help="computes per kiln invocation, median reported (default 3)")
    p.add_argument("--peer-budget", type=float, default=8.0,
                   help="stop repeating a peer on a workload once its total time exceeds "
                        "this many seconds (default 8)")
    p.add_argument("--random-sum-size", type=int, default=20000)
    p.add_argument("--random-sum-chunk", type=int, default=2000)
    p.add_argument("--trig-size", type=int, default=10000)
    p.add_argument("--trig-chunk", type=int, default=2000)
    p.add_argument("--diamond-size", type=int, default=10000)
    p.add_argument("--diamond-chunk", type=int, default=2000)
    p.add_argument("--overhead-tasks", type=int, default=5000,
                   help="n of the Dask overhead graph da.ones((n,), chunks=1) (default 5000; "
                        "0 skips it)")
    p.add_argument("--jsonl", help="also write the JSON lines to this file")
    args = p.parse_args()
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.peers = [x for x in args.peers.split(",") if x]
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    for x in args.peers:
        if x not in PEERS:
            p.error(f"unknown peer {x!r} (known: {', '.join(PEERS)})")
    return args


def sizes(args, w):
    return {
        "random-sum": (args.random_sum_size, args.random_sum_chunk),
        "trig-identity": (args.trig_size, args.trig_chunk),
        "diamond": (args.diamond_size, args.diamond_chunk),
    }[w]


# ---- environment -----------------------------------------------------------------------------

def blas_info():
    """The BLAS NumPy is linked with: np.show_config()'s BLAS lines and the BLAS/LAPACK shared
    libraries actually mapped into this process (Debian switches them with alternatives)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            np.show_config()
        except Exception as e:  # noqa: BLE001 - informational only
            print(f"show_config failed: {e}")
    config = []
    section = None
    for line in buf.getvalue().splitlines():
        if line and not line.startswith(" "):
            section = line.rstrip(":")
        elif section and "blas" in section.lower() and "libraries" in line:
            config.append(f"{section}: {line.strip()}")
    mapped = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if "blas" in name or "lapack" in name:
                    mapped.add(f"{path} -> {os.path.realpath(path)}")
    except OSError:
        pass
    return {"show_config": config, "mapped": sorted(mapped)}


def environment(args):
    env = {"kind": "env", "python": platform.python_version(), "numpy": np.__version__,
           "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()[0], "kiln": args.kiln}
    try:
        import numexpr
        env["numexpr"] = numexpr.__version__
        env["numexpr_threads"] = numexpr.nthreads
    except ImportError:
        env["numexpr"] = None
    try:
        import dask
        env["dask"] = dask.__version__
    except ImportError:
        env["dask"] = None
    env["blas"] = blas_info()
    return env


# ---- the peers -------------------------------------------------------------------------------

def numpy_random_sum(n, c):
    # Block by block, in the same C x C blocks as Kiln and Dask; a block starting at an odd
    # global row/column keeps its odd local indices so the result is the global [::2, ::2].
    rs = np.random.RandomState(0)
    total = 0.0
    for r0 in range(0, n, c):
        for c0 in range(0, n, c):
            b = rs.normal(10, 1, (min(c, n - r0), min(c, n - c0)))
            total += float((b + 1)[r0 % 2::2, c0 % 2::2].sum())
    return {"result": total}


def numpy_trig(n, c):
    x = np.random.RandomState(0).uniform(0, 1, (n, n))
    y = np.sin(x) ** 2 + np.cos(x) ** 2 == 1
    return {"result": float(bool(y.all())), "count": int(np.count_nonzero(y))}


def numpy_diamond(n, c):
    x = np.random.RandomState(0).uniform(1, 2, (n, n))
    return {"result": float((np.exp(x) - 1 / x).sum())}


def numexpr_trig(n, c):
    import numexpr as ne
    x = np.random.RandomState(0).uniform(0, 1, (n, n))
    y = ne.evaluate("sin(x)**2 + cos(x)**2 == 1")
    return {"result": float(bool(y.all())), "count": int(np.count_nonzero(y))}


def numexpr_diamond(n, c):
    import numexpr as ne
    x = np.random.RandomState(0).uniform(1, 2, (n, n))
    return {"result": float(ne.evaluate("sum(exp(x) - 1/x)"))}


def dask_graph(w, n, c):
    import dask.array as da
    rs = da.random.RandomState(0)
    if w == "random-sum":
        x = rs.normal(10, 1, size=(n, n), chunks=(c, c))
        return [(x + 1)[::2, ::2].sum()]
    if w == "trig-identity":
        x = rs.uniform(0, 1, size=(n, n), chunks=(c, c))
        y = da.sin(x) ** 2 + da.cos(x) ** 2 == 1
        return [y.all(), y.sum()]
    x = rs.uniform(1, 2, size=(n, n), chunks=(c, c))
    return [(da.exp(x) - 1 / x).sum()]


def dask_run(w, n, c, scheduler):
    import dask
    outs = dask.compute(*dask_graph(w, n, c), scheduler=scheduler)
    r = {"result": float(outs[0])}
    if len(outs) > 1:
        r["count"] = int(outs[1])
    return r


def peer_function(peer, w):
    """The callable (n, c) -> dict, or a string saying why this pair is not run."""
    if peer == "numpy":
        return {"random-sum": numpy_random_sum, "trig-identity": numpy_trig,
                "diamond": numpy_diamond}[w]
    if peer == "numexpr":
        if w == "random-sum":
            return "skipped: NumExpr has no generator; the generation dominates"
        return {"trig-identity": numexpr_trig, "diamond": numexpr_diamond}[w]
    scheduler = "threads" if peer == "dask-threads" else "synchronous"
    return lambda n, c: dask_run(w, n, c, scheduler)


def kiln_run(args, w, n, c):
    cmd = [args.kiln, "run", w, "--json", "--repeat", str(args.kiln_repeat),
           "--size", str(n), "--chunk", str(c)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    j = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    r = {"seconds": j["seconds"], "result": j["result"], "process_seconds": wall,
         "compile_seconds": j.get("compile_seconds"), "tasks": j.get("tasks"),
         "kernels": j.get("kernels")}
    if "count" in j:
        r["count"] = j["count"]
    return r


# ---- Dask's per-task overhead ----------------------------------------------------------------

def dask_overhead(n):
    import dask
    import dask.array as da
    y = (da.ones((n,), chunks=1) + 1).sum()
    tasks_raw = len(y.__dask_graph__())
    (opt,) = dask.optimize(y)
    tasks = len(opt.__dask_graph__())
    out = []
    for scheduler in ("threads", "synchronous"):
        dask.compute(y, scheduler=scheduler)  # warm-up
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            v = dask.compute(y, scheduler=scheduler)[0]
            times.append(time.perf_counter() - t0)
        assert float(v) == 2.0 * n, v
        t = statistics.median(times)
        out.append({"kind": "dask_overhead", "scheduler": scheduler, "n": n,
                    "tasks": tasks, "tasks_unoptimized": tasks_raw, "seconds": t,
                    "us_per_task": t / tasks * 1e6})
    return out


# ---- main ------------------------------------------------------------------------------------

def fmt_result(r):
    s = f"{r['result']:.10g}"
    if "count" in r:
        s += f" (count {int(r['count'])})"
    return s


def main():
    args = parse_args()
    if not os.access(args.kiln, os.X_OK):
        sys.exit(f"seeds_peers: {args.kiln} is not an executable kiln binary "
                 "(build it: cmake --preset release && cmake --build --preset release "
                 "--target kiln_cli)")
    lines = [environment(args)]
    if "dask-threads" in args.peers or "dask-sync" in args.peers:
        try:
            import dask.array  # noqa: F401
        except ImportError:
            sys.exit("seeds_peers: Dask is missing: apt-get install -y python3-dask")
    if "numexpr" in args.peers:
        try:
            import numexpr  # noqa: F401
        except ImportError:
            sys.exit("seeds_peers: NumExpr is missing: apt-get install -y python3-numexpr")

    start = time.perf_counter()
    summaries = []
    for w in args.workloads:
        n, c = sizes(args, w)
        impls = ["kiln"] + args.peers
        times = {i: [] for i in impls}
        results = {}
        notes = {}
        for rnd in range(args.rounds):
            order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
            for impl in order:
                if impl != "kiln":
                    fn = peer_function(impl, w)
                    if isinstance(fn, str):
                        notes[impl] = fn
                        continue
                    if sum(times[impl]) > args.peer_budget:
                        continue
                    gc.collect()
                    t0 = time.perf_counter()
                    r = fn(n, c)
                    r["seconds"] = time.perf_counter() - t0
                else:
                    r = kiln_run(args, w, n, c)
                times[impl].append(r["seconds"])
                results[impl] = r
                line = {"kind": "run", "workload": w, "size": n, "chunk": c, "impl": impl,
                        "round": rnd, **r}
                lines.append(line)
                print(f"  {w:14} {impl:13} round {rnd}: {r['seconds']:8.3f} s  "
                      f"{fmt_result(r)}", file=sys.stderr, flush=True)
        kiln_median = statistics.median(times["kiln"])
        for impl in impls:
            s = {"kind": "summary", "workload": w, "size": n, "chunk": c, "impl": impl,
                 "runs": len(times[impl])}
            if times[impl]:
                med = statistics.median(times[impl])
                s.update(median_seconds=med, min_seconds=min(times[impl]),
                         kiln_speedup=med / kiln_median, result=results[impl]["result"])
                if "count" in results[impl]:
                    s["count"] = results[impl]["count"]
            else:
                s["note"] = notes.get(impl, "not run")
            summaries.append(s)
            lines.append(s)

    overhead = dask_overhead(args.overhead_tasks) if args.overhead_tasks > 0 and any(
        p.startswith("dask") for p in args.peers) else []
    lines.extend(overhead)
    total = time.perf_counter() - start
    lines.append({"kind": "end", "total_seconds": total, "loadavg_end": os.getloadavg()[0]})

    env = lines[0]
    print(f"## Seed workloads: Kiln vs NumPy {env['numpy']}, NumExpr {env.get('numexpr')} "
          f"({env.get('numexpr_threads')} threads), Dask {env.get('dask')}\n")
    print(f"{env['cpus']} CPUs, load average {env['loadavg_start']:.2f} at start, "
          f"{lines[-1]['loadavg_end']:.2f} at end; {total:.0f} s in all. Medians over rounds "
          f"(Kiln: median of {args.kiln_repeat} computes per invocation, compile excluded); "
          "speed-up = peer median / Kiln median.\n")
    print("| workload | N | C | implementation | median s | runs | Kiln speed-up | result |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |")
    for s in summaries:
        if "median_seconds" in s:
            speed = "—" if s["impl"] == "kiln" else f"{s['kiln_speedup']:.1f}x"
            res = fmt_result(s)
            print(f"| {s['workload']} | {s['size']} | {s['chunk']} | {s['impl']} | "
                  f"{s['median_seconds']:.3f} | {s['runs']} | {speed} | {res} |")
        else:
            print(f"| {s['workload']} | {s['size']} | {s['chunk']} | {s['impl']} | — | 0 | — | "
                  f"{s['note']} |")
    if overhead:
        print("\n| Dask per-task overhead | n | tasks (optimized / raw) | seconds | µs per task |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for o in overhead:
            print(f"| {o['scheduler']} | {o['n']} | {o['tasks']} / {o['tasks_unoptimized']} | "
                  f"{o['seconds']:.3f} | {o['us_per_task']:.1f} |")
    print("\nBLAS used by NumPy (not exercised by these workloads):")
    for b in env["blas"]["show_config"] or ["(np.show_config() lists no BLAS libraries)"]:
        print(f"- config: {b}")
    for b in env["blas"]["mapped"] or ["(no BLAS library mapped)"]:
        print(f"- loaded: {b}")
    print()
    out = [json.dumps(x, sort_keys=True) for x in lines]
    print("\n".join(out))
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
