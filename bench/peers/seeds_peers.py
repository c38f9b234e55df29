#!/usr/bin/python3
"""The seed workloads of `kiln run` with NumPy, NumExpr, Dask, JAX and Numba, alternated with Kiln.

    bench/peers/.venv/bin/python bench/peers/seeds_peers.py build/release/kiln [options]
    bench/peers/.venv/bin/python bench/peers/seeds_peers.py build/release/kiln --resident
    /usr/bin/python3 bench/peers/seeds_peers.py build/release/kiln [options]

`bash scripts/peers.sh` creates the venv (bench/peers/requirements.txt, pinned) and runs this
with it; with Debian's python3 (python3-numpy, -numexpr, -dask) JAX and Numba are missing and
reported as skipped. Any peer whose module does not import (or, for dask-default_rng, whose
Dask has no dask.array.random.default_rng) is skipped, not fatal.

Two variants, each its own table:

  generated (default)  every implementation generates x inside the timed region, as the seeds
                       do (Kiln inside its kernels).
  resident (--resident) x is made before the timed region and only the expression is timed:
                       Kiln runs `kiln run W --resident` (x persisted in memory, then the
                       expression timed over the buffer); the peers share one x drawn with
                       NumPy's default_rng(0): NumPy, NumExpr and Numba read that array, Dask a
                       persisted copy in C x C chunks, JAX a device array made (and
                       block_until_ready) before timing. Workloads random-sum, trig-identity,
                       diamond (logistic-gd makes its data before the timed region in either
                       variant), N=10000 C=2000 each: x is 800 MB of float64; the peers hold up
                       to three copies of it (NumPy, Dask, JAX) plus NumPy's whole-array
                       temporaries (random-sum's x + 1, trig-identity's sin, cos, squares),
                       Kiln its own x in its own process: about 6 GB at peak (estimated).

Workloads (same expressions and default sizes as `kiln list`):

  random-sum     x = normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()
                 N=20000 C=2000. NumPy runs it block by block (the whole x would be 3.2 GB);
                 NumExpr is skipped: it has no generator and the generation dominates, so it
                 would be the NumPy blockwise run plus an evaluate() call.
  trig-identity  x = uniform(0, 1, (N, N)); y = sin(x)**2 + cos(x)**2 == 1; y.all(), y.sum()
                 N=10000 C=2000 (NumPy and NumExpr on whole arrays: a few GB of temporaries).
  diamond        x = uniform(1, 2, (N, N)); (exp(x) - 1/x).sum()
                 N=10000 C=2000.
  logistic-gd    logistic regression by dask-glm's gradient_descent (Armijo line search), 20
                 iterations, X ~ N(0, 1) (N, 100) in (C, 100) row blocks, y = [X w + noise > 0];
                 N=1000000 C=100000 (seeds 000 and 002). Kiln runs the same algorithm on its
                 arrays (tools/workloads.cpp); numpy, dask-threads and dask-sync run dask-glm
                 itself on NumPy and on persisted Dask arrays; scikit-learn fits
                 LogisticRegression (no penalty, L-BFGS: its own algorithm) for 20 iterations.
                 The data are made before the timed region (Kiln: before its solver); the
                 result is the final loss (negative log-likelihood). JAX, Numba and NumExpr have
                 no solver loop here and are skipped.

Peers: numpy, numexpr, dask-threads, dask-sync (legacy RandomState, as Dask's own
dask.array.random.RandomState, the seeds' spelling); numpy-default_rng and dask-default_rng
(the same with np.random.default_rng(0) and da.random.default_rng(0), Dask on the threaded
scheduler: PCG64 and NumPy's ziggurat normals, 2-3x faster per value than RandomState's
polar-method normals and its uniforms; generated variant only, since they differ from numpy and dask-threads in the
generator alone); jax and jax-philox (one jax.jit function of a PRNG key that
generates x with jax.random in float64 and computes the expression on the whole N x N array,
XLA fusing what it can; `jax` uses JAX's default generator, threefry2x32, `jax-philox` the
philox4x32 implementation; compile time reported separately, timed calls after a warm-up call,
with block_until_ready; resident: one jax.jit function of x, jax-philox skipped); numba
(@njit(parallel=True, fastmath=False): a prange loop over rows that draws each value with
np.random inside the loop and reduces it, never materializing x; for random-sum it draws only
the elements the slice keeps, as a hand-written fused loop would; resident: the same loops
reading x; compile time, a first call on a 4 x 4 problem, reported separately); scikit-learn
(logistic-gd only). Chunks apply to Kiln and Dask only. NumExpr runs random-sum in the
resident variant only (on the view x[::2, ::2]): it has no generator.

In the generated variant every implementation generates its own random input inside the timed
region (Kiln inside its kernels). The generators differ (Kiln: Philox; NumPy, NumExpr, Dask:
NumPy's legacy RandomState, or default_rng; JAX: threefry or philox keyed streams; Numba: one
Mersenne Twister per thread), so results agree only statistically; they are printed so that
gross errors show. In the resident variant the peers compute on the same x (their results
differ by rounding and math libraries only), Kiln on its own Philox x. Numba's results
vary from run to run: np.random.seed() in a parallel region seeds the calling thread only.

Each round runs, for one workload, Kiln (`kiln run W --json --repeat R`: the median of R
computes in one process, so JIT compilation is excluded after the first) and then each peer
once, rotating the order every round. A peer is not repeated once the time it has used on the
workload (timed runs plus its compile and warm-up) exceeds --peer-budget seconds, which keeps
the whole script within about five minutes on two cores. Also measured: Dask's per-task
overhead (da.ones((n,), chunks=1) + 1, .sum(), timed per task of the optimized graph) with the
threaded and synchronous schedulers.

Environment: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from this process's environment
before NumPy (and so OpenBLAS) is loaded, so that the peers run with OpenBLAS's own detection;
`kiln run` is started with the environment as it was given. The BLAS NumPy uses is reported
(np.show_config(), the libraries mapped into the process, OpenBLAS's own config string).

Output: a markdown table of medians and Kiln's speed-up (peer median / Kiln median) on stdout,
then one JSON object per line (kinds: env, run, summary, dask_overhead, end), also written to
--jsonl FILE if given. Lines starting with "{" are the JSON lines. Progress goes to stderr.
"""
import os

# The peers' own environment (see the docstring). OpenBLAS reads these variables when its
# library is loaded, i.e. at `import numpy`, so they go before any import that loads NumPy.
PEER_ENV_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
KILN_ENV = dict(os.environ)
UNSET_ENV = {k: os.environ.pop(k) for k in PEER_ENV_UNSET if k in os.environ}
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no probing for GPU/TPU plugins

import argparse  # noqa: E402
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

WORKLOADS = ("random-sum", "trig-identity", "diamond", "logistic-gd")
RESIDENT_WORKLOADS = WORKLOADS[:3]  # logistic-gd makes its data before the timed region anyway
PEERS = ("numpy", "numpy-default_rng", "numexpr", "dask-threads", "dask-sync",
         "dask-default_rng", "jax", "jax-philox", "numba", "scikit-learn")
PEER_MODULE = {"numpy": "numpy", "numpy-default_rng": "numpy", "numexpr": "numexpr",
               "dask-threads": "dask.array", "dask-sync": "dask.array",
               "dask-default_rng": "dask.array", "jax": "jax", "jax-philox": "jax",
               "numba": "numba", "scikit-learn": "sklearn"}
# (N, C) by default: the `kiln list` sizes; resident (x in memory as float64: 800 MB at N=10000,
# one NumPy copy, Dask's and JAX's copies of it, and NumPy's whole-array temporaries).
DEFAULT_SIZES = {
    False: {"random-sum": (20000, 2000), "trig-identity": (10000, 2000),
            "diamond": (10000, 2000), "logistic-gd": (1000000, 100000)},
    True: {"random-sum": (10000, 2000), "trig-identity": (10000, 2000),
           "diamond": (10000, 2000)},
}
SIZE_OPTION = {"random-sum": "random_sum", "trig-identity": "trig", "diamond": "diamond",
               "logistic-gd": "glm"}
JAX_PRNG = {"jax": "threefry2x32", "jax-philox": "philox4x32"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kiln", nargs="?", default="build/release/kiln",
                   help="the kiln binary (default: build/release/kiln)")
    p.add_argument("--resident", action="store_true",
                   help="the resident variant: x made before the timed region, only the "
                        "expression timed (kiln run --resident); its own table and sizes")
    p.add_argument("--workloads",
                   help="comma-separated subset of " + ", ".join(WORKLOADS)
                        + " (default: all; with --resident, " + ", ".join(RESIDENT_WORKLOADS)
                        + ")")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of " + ", ".join(PEERS))
    p.add_argument("--rounds", type=int, default=3, help="rounds per workload (default 3)")
    p.add_argument("--kiln-repeat", type=int, default=3,
                   help="computes per kiln invocation, median reported (default 3)")
    p.add_argument("--peer-budget", type=float, default=8.0,
                   help="stop repeating a peer on a workload once the time it used there "
                        "(runs, compile, warm-up) exceeds this many seconds (default 8)")
    add_size_arguments(p)
    p.add_argument("--overhead-tasks", type=int, default=5000,
                   help="n of the Dask overhead graph da.ones((n,), chunks=1) (default 5000; "
                        "0 skips it)")
    p.add_argument("--jsonl", help="also write the JSON lines to this file")
    args = p.parse_args()
    known = RESIDENT_WORKLOADS if args.resident else WORKLOADS
    args.workloads = [w for w in (args.workloads or ",".join(known)).split(",") if w]
    args.peers = [x for x in args.peers.split(",") if x]
    for w in args.workloads:
        if w not in known:
            p.error(f"unknown workload {w!r} (known{' with --resident' * args.resident}: "
                    f"{', '.join(known)})")
    for x in args.peers:
        if x not in PEERS:
            p.error(f"unknown peer {x!r} (known: {', '.join(PEERS)})")
    return args


def add_size_arguments(p):
    """Each workload's N and C (default: DEFAULT_SIZES of the variant); read back with sizes()."""
    for w, opt in SIZE_OPTION.items():
        (n, c), rn = DEFAULT_SIZES[False][w], DEFAULT_SIZES[True].get(w, (None,))[0]
        what = "samples" if w == "logistic-gd" else "N"
        flag = opt.replace("_", "-")
        p.add_argument(f"--{flag}-size", type=int,
                       help=f"{w} {what} (default {n}" + (f"; resident {rn})" if rn else ")"))
        p.add_argument(f"--{flag}-chunk", type=int, help=f"{w} chunk (default {c})")


def sizes(args, w):
    n, c = DEFAULT_SIZES[args.resident][w]
    size, chunk = (getattr(args, f"{SIZE_OPTION[w]}_{k}") for k in ("size", "chunk"))
    return (n if size is None else size, c if chunk is None else chunk)


# ---- environment -----------------------------------------------------------------------------

def import_error(module):
    """None if `module` imports, else why not (a peer without its module is skipped)."""
    try:
        importlib.import_module(module)
        return None
    except Exception as e:  # noqa: BLE001 - ImportError, or a binary mismatch (numba vs numpy)
        return f"{type(e).__name__}: {e}".splitlines()[0][:160]


def peer_unavailable(peer):
    """Why this peer cannot run here (its module does not import, or lacks what it uses), or
    None."""
    module = PEER_MODULE[peer]
    err = import_error(module)
    if err:
        return f"{module} does not import ({err})"
    if peer == "dask-default_rng":
        import dask
        import dask.array as da
        if not hasattr(da.random, "default_rng"):
            return f"Dask {dask.__version__} has no dask.array.random.default_rng"
    return None


def openblas_runtime(paths):
    """OpenBLAS's own config string and detected core, from the mapped library (Debian's
    libopenblas exports openblas_get_*, NumPy's wheels scipy_openblas_get_*64_)."""
    out = []
    for path in paths:
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        info = {"library": path}
        for key, names in (("config", ("openblas_get_config", "scipy_openblas_get_config64_",
                                       "scipy_openblas_get_config")),
                           ("corename", ("openblas_get_corename",
                                         "scipy_openblas_get_corename64_",
                                         "scipy_openblas_get_corename"))):
            for name in names:
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    info[key] = fn().decode(errors="replace").strip()
                    break
        if len(info) > 1:
            out.append(info)
    return out


def blas_info():
    """The BLAS NumPy is linked with: np.show_config()'s BLAS entries, the BLAS/LAPACK shared
    libraries actually mapped into this process (Debian switches them with alternatives) and
    what OpenBLAS says about itself at run time."""
    config = []
    try:
        deps = np.show_config(mode="dicts").get("Build Dependencies", {})  # NumPy >= 1.26
        for k in ("blas", "lapack"):
            d = deps.get(k) or {}
            if d:
                config.append(f"{k}: {d.get('name')} {d.get('version')}"
                              + (f" ({d['openblas configuration']})"
                                 if d.get("openblas configuration") else ""))
    except TypeError:  # older NumPy: show_config() prints numpy.distutils sections
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            np.show_config()
        section = None
        for line in buf.getvalue().splitlines():
            if line and not line.startswith(" "):
                section = line.rstrip(":")
            elif section and "blas" in section.lower() and "libraries" in line:
                config.append(f"{section}: {line.strip()}")
    except Exception as e:  # noqa: BLE001 - informational only
        config.append(f"show_config failed: {e}")
    mapped = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if "blas" in name or "lapack" in name:
                    mapped.add(path)
    except OSError:
        pass
    return {"show_config": config,
            "mapped": sorted(f"{p} -> {os.path.realpath(p)}" for p in mapped),
            "openblas": openblas_runtime(sorted(mapped))}


def environment(args):
    env = {"kind": "env", "variant": "resident" if args.resident else "generated",
           "python": platform.python_version(), "executable": sys.executable,
           "venv": sys.prefix != sys.base_prefix, "numpy": np.__version__,
           "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()[0], "kiln": args.kiln,
           "env_unset_for_peers": UNSET_ENV, "blas": blas_info()}
    missing = {}
    for peer in args.peers:
        err = peer_unavailable(peer)
        if err:
            missing[peer] = err
    env["missing"] = missing
    if "numexpr" not in missing and not import_error("numexpr"):
        import numexpr
        env["numexpr"] = numexpr.__version__
        env["numexpr_threads"] = numexpr.nthreads
    if not import_error("dask"):
        import dask
        env["dask"] = dask.__version__
    if any(p.startswith("jax") for p in args.peers) and not import_error("jax"):
        jax = jax_module()
        import jaxlib
        env["jax"] = jax.__version__
        env["jaxlib"] = jaxlib.__version__
        env["jax_devices"] = [str(d) for d in jax.devices()]
    if "numba" in args.peers and "numba" not in missing:
        import numba
        env["numba"] = numba.__version__
        env["numba_threads"] = numba.config.NUMBA_NUM_THREADS
    if "scikit-learn" in args.peers and "scikit-learn" not in missing:
        import sklearn
        env["sklearn"] = sklearn.__version__
    if import_error("dask_glm") is None:
        from importlib.metadata import version
        env["dask_glm"] = version("dask-glm")
    return env


# ---- the peers -------------------------------------------------------------------------------
# A runner is run(n, c) -> dict (timed), with an optional prepare(n, c) -> dict called once per
# workload before the first timed run (compile, warm-up, the resident x); its wall time counts
# toward the budget.

class Runner:
    def __init__(self, run, prepare=None):
        self.run = run
        self.prepare = prepare


UNIFORM_RANGE = {"trig-identity": (0.0, 1.0), "diamond": (1.0, 2.0)}


def draw(w, rng, shape, **kw):
    """Workload w's x from a NumPy or Dask generator (RandomState or default_rng; Dask's take
    chunks=): the seed's own calls, normal(10, 1) or uniform(low, high)."""
    if w == "random-sum":
        return rng.normal(10, 1, size=shape, **kw)
    return rng.uniform(*UNIFORM_RANGE[w], size=shape, **kw)


def expression(w, x, xp):
    """Workload w's outputs over x, with xp = numpy, dask.array (lazy) or jax.numpy."""
    if w == "random-sum":
        return ((x + 1)[::2, ::2].sum(),)
    if w == "trig-identity":
        y = xp.sin(x) ** 2 + xp.cos(x) ** 2 == 1
        return y.all(), y.sum()
    return ((xp.exp(x) - 1 / x).sum(),)


def result_of(outs):
    """The run's result (and trig-identity's count) from the outputs of expression()."""
    if len(outs) > 1:
        return {"result": float(bool(outs[0])), "count": int(outs[1])}
    return {"result": float(outs[0])}


def numpy_rng(peer):
    return np.random.default_rng(0) if peer.endswith("default_rng") else np.random.RandomState(0)


def dask_rng(peer):
    import dask.array as da
    return da.random.default_rng(0) if peer.endswith("default_rng") else da.random.RandomState(0)


def dask_scheduler(peer):
    return "synchronous" if peer == "dask-sync" else "threads"


class ResidentInput:
    """The resident variant's x for one workload, made before any timed run: drawn once with
    NumPy's default_rng(0); the Dask copy (C x C chunks, persisted) and the JAX device array are
    made from it on first use. Every peer reads the same values."""

    def __init__(self, w, n, c):
        self.w, self.n, self.c = w, n, c
        self.forms = {}

    def get(self, form):
        if form not in self.forms:
            self.forms[form] = getattr(self, "make_" + form)()
        return self.forms[form]

    def make_numpy(self):
        return draw(self.w, np.random.default_rng(0), (self.n, self.n))

    def make_dask(self):
        import dask.array as da
        x = da.from_array(self.get("numpy"), chunks=(self.c, self.c)).map_blocks(np.copy)
        return x.persist(scheduler="threads")

    def make_jax(self):
        jax = jax_module()
        return jax.block_until_ready(jax.device_put(self.get("numpy")))


def with_input(inputs, form, prepare=None):
    """A prepare() that first makes the resident x in this form (reported as input_seconds),
    then runs `prepare` if given."""
    def run(n, c):
        t0 = time.perf_counter()
        inputs.get(form)
        info = {"input_seconds": time.perf_counter() - t0}
        if prepare is not None:
            info.update(prepare(n, c))
        return info
    return run


def numpy_random_sum(rng, n, c):
    # Block by block, in the same C x C blocks as Kiln and Dask; a block starting at an odd
    # global row/column keeps its odd local indices so the result is the global [::2, ::2].
    total = 0.0
    for r0 in range(0, n, c):
        for c0 in range(0, n, c):
            b = draw("random-sum", rng, (min(c, n - r0), min(c, n - c0)))
            total += float((b + 1)[r0 % 2::2, c0 % 2::2].sum())
    return {"result": total}


def numpy_generated(w, peer, n, c):
    rng = numpy_rng(peer)
    if w == "random-sum":
        return numpy_random_sum(rng, n, c)
    return result_of(expression(w, draw(w, rng, (n, n)), np))


NUMEXPR = {"random-sum": "sum(x + 1)", "trig-identity": "sin(x)**2 + cos(x)**2 == 1",
           "diamond": "sum(exp(x) - 1/x)"}


def numexpr_eval(w, x):
    """ne.evaluate() on whole arrays; random-sum on the strided view x[::2, ::2]."""
    import numexpr as ne
    y = ne.evaluate(NUMEXPR[w], local_dict={"x": x[::2, ::2] if w == "random-sum" else x})
    if w == "trig-identity":
        return result_of((y.all(), np.count_nonzero(y)))
    return {"result": float(y)}


def dask_run(outs, scheduler):
    import dask
    return result_of(dask.compute(*outs, scheduler=scheduler))


def dask_generated(w, peer, n, c):
    import dask.array as da
    x = draw(w, dask_rng(peer), (n, n), chunks=(c, c))
    return dask_run(expression(w, x, da), dask_scheduler(peer))


def dask_resident(w, peer, inputs):
    import dask.array as da
    return dask_run(expression(w, inputs.get("dask"), da), dask_scheduler(peer))


# JAX: imported on first use, float64 enabled before anything is traced.
_JAX = []


def jax_module():
    if not _JAX:
        import jax
        jax.config.update("jax_enable_x64", True)
        _JAX.append(jax)
    return _JAX[0]


def jax_generated(w):
    """The workload as a function of (key, n), n static: x drawn with jax.random in float64."""
    jax = jax_module()
    jnp = jax.numpy

    def f(key, n):
        if w == "random-sum":
            x = 10.0 + jax.random.normal(key, (n, n), dtype=jnp.float64)
        else:
            lo, hi = UNIFORM_RANGE[w]
            x = jax.random.uniform(key, (n, n), dtype=jnp.float64, minval=lo, maxval=hi)
        return expression(w, x, jnp)
    return f


def jax_runner(w, prng, inputs):
    """jax.jit of the expression: of a PRNG key (generated, `prng` its implementation) or of
    the resident x (inputs, a device array made in prepare)."""
    jax = jax_module()
    if inputs is None:
        fn = jax.jit(jax_generated(w), static_argnums=1)
        key = jax.random.key(0, impl=prng)
        call_args = lambda n: (key, n)  # noqa: E731
    else:
        fn = jax.jit(lambda x: expression(w, x, jax.numpy))
        call_args = lambda n: (inputs.get("jax"),)  # noqa: E731

    def compile_and_warm_up(n, c):
        t0 = time.perf_counter()
        compiled = fn.lower(*call_args(n)).compile()  # trace, lower, XLA compile
        t1 = time.perf_counter()
        jax.block_until_ready(fn(*call_args(n)))  # warm-up: the first call through jit's cache
        t2 = time.perf_counter()
        info = {"compile_seconds": t1 - t0, "first_call_seconds": t2 - t1}
        if prng:
            info["prng"] = prng
        ma = compiled.memory_analysis()
        if ma is not None:
            info["temp_bytes"] = int(ma.temp_size_in_bytes)
        return info

    def run(n, c):
        return result_of(jax.block_until_ready(fn(*call_args(n))))

    prepare = compile_and_warm_up if inputs is None else with_input(inputs, "jax",
                                                                      compile_and_warm_up)
    return Runner(run, prepare)


# Numba: kernels defined on first use (the module may be missing).
_NUMBA = {}


def numba_generated_kernels(njit, prange):
    """Kernels of (n, seed) that draw x inside the loop, never materializing it."""
    @njit(parallel=True, fastmath=False)
    def random_sum(n, seed):
        # Only the kept quarter: even rows (prange) and even columns; x + 1 summed in place.
        np.random.seed(seed)  # seeds the calling thread's generator; each thread has its own
        total = 0.0
        for i in prange((n + 1) // 2):
            row = 0.0
            for j in range(0, n, 2):
                row += np.random.normal(10.0, 1.0) + 1.0
            total += row
        return total

    @njit(parallel=True, fastmath=False)
    def trig_identity(n, seed):
        np.random.seed(seed)
        count = 0
        for i in prange(n):
            k = 0
            for j in range(n):
                x = np.random.uniform(0.0, 1.0)
                s = np.sin(x)
                co = np.cos(x)
                if s * s + co * co == 1.0:  # x**2 is x*x in NumPy too
                    k += 1
            count += k
        return count

    @njit(parallel=True, fastmath=False)
    def diamond(n, seed):
        np.random.seed(seed)
        total = 0.0
        for i in prange(n):
            row = 0.0
            for j in range(n):
                x = np.random.uniform(1.0, 2.0)
                row += np.exp(x) - 1.0 / x
            total += row
        return total

    return {"random-sum": random_sum, "trig-identity": trig_identity, "diamond": diamond}


def numba_resident_kernels(njit, prange):
    """Kernels of the resident x (an N x N float64 array): the same loops, reading x."""
    @njit(parallel=True, fastmath=False)
    def random_sum(x):
        total = 0.0
        for i in prange((x.shape[0] + 1) // 2):
            row = 0.0
            for j in range(0, x.shape[1], 2):
                row += x[2 * i, j] + 1.0
            total += row
        return total

    @njit(parallel=True, fastmath=False)
    def trig_identity(x):
        count = 0
        for i in prange(x.shape[0]):
            k = 0
            for j in range(x.shape[1]):
                s = np.sin(x[i, j])
                co = np.cos(x[i, j])
                if s * s + co * co == 1.0:
                    k += 1
            count += k
        return count

    @njit(parallel=True, fastmath=False)
    def diamond(x):
        total = 0.0
        for i in prange(x.shape[0]):
            row = 0.0
            for j in range(x.shape[1]):
                row += np.exp(x[i, j]) - 1.0 / x[i, j]
            total += row
        return total

    return {"random-sum": random_sum, "trig-identity": trig_identity, "diamond": diamond}


def numba_kernels(resident):
    if resident not in _NUMBA:
        from numba import njit, prange
        make = numba_resident_kernels if resident else numba_generated_kernels
        _NUMBA[resident] = make(njit, prange)
    return _NUMBA[resident]


def numba_runner(w, inputs):
    """Generated: kernel(n, seed), compiled on a 4 x 4 problem; resident: kernel(x), compiled on
    a 4 x 4 float64 array, x made in prepare."""
    kernel = numba_kernels(inputs is not None)[w]
    call_args = ((lambda n: (n, 0)) if inputs is None
                 else (lambda n: (inputs.get("numpy"),)))

    def compile_kernel(n, c):
        t0 = time.perf_counter()
        kernel(*((4, 0) if inputs is None else (np.ones((4, 4)),)))
        return {"compile_seconds": time.perf_counter() - t0}

    def run(n, c):
        v = kernel(*call_args(n))
        if w == "trig-identity":
            return {"result": float(int(v) == n * n), "count": int(v)}
        return {"result": float(v)}

    prepare = compile_kernel if inputs is None else with_input(inputs, "numpy", compile_kernel)
    return Runner(run, prepare)


# ---- logistic-gd: dask-glm's gradient_descent, on NumPy and on Dask arrays; scikit-learn ----

GLM_FEATURES = 100
GLM_ITERATIONS = 20


def glm_problem(n):
    """X ~ N(0, 1) (n, 100), y = [X w + N(0, 1) > 0] with w_j = (j mod 7 - 3) / 3 (as Kiln's)."""
    import numpy as np
    rs = np.random.RandomState(0)
    X = rs.standard_normal((n, GLM_FEATURES))
    w = (np.arange(GLM_FEATURES) % 7 - 3) / 3
    y = (X @ w + rs.standard_normal(n) > 0).astype(np.float64)
    return X, y


def glm_loss(X, y, beta):
    import numpy as np
    xb = X @ beta
    with np.errstate(over="ignore"):
        return float((xb + np.log1p(np.exp(-xb))).sum() - y @ xb)


def glm_runner(peer):
    """dask-glm's gradient_descent (the algorithm Kiln's logistic-gd runs) on NumPy arrays
    (numpy) or Dask arrays (dask-threads, dask-sync); scikit-learn's LogisticRegression (L-BFGS,
    its own algorithm) for the same number of iterations. The data are made in prepare (not
    timed) and the Dask arrays persisted there, as dask-glm's benchmarks do."""
    if peer in ("numpy", "dask-threads", "dask-sync"):
        err = import_error("dask_glm")
        if err:
            return f"skipped: dask_glm does not import ({err})"
    elif peer != "scikit-learn":
        return ("skipped: no hand-written solver loop for this peer; the numpy and dask rows "
                "run dask-glm's own gradient_descent")
    data = {}

    def prepare(n, c):
        t0 = time.perf_counter()
        X, y = glm_problem(n)
        if peer.startswith("dask"):
            import dask
            import dask.array as da
            X, y = dask.persist(da.from_array(X, chunks=(c, GLM_FEATURES)),
                                da.from_array(y, chunks=(c,)), scheduler="threads")
        data.update(X=X, y=y)
        return {"data_seconds": time.perf_counter() - t0}

    def run(n, c):
        import numpy as np
        X, y = data["X"], data["y"]
        if peer == "scikit-learn":
            import warnings
            from sklearn.linear_model import LogisticRegression
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # stopping at max_iter is the point
                m = LogisticRegression(penalty=None, fit_intercept=False, solver="lbfgs",
                                       max_iter=GLM_ITERATIONS, tol=0).fit(X, y)
            return {"result": glm_loss(X, y, m.coef_.ravel()), "iterations": int(m.n_iter_[0])}
        import warnings
        import dask
        from dask_glm.algorithms import gradient_descent
        scheduler = "synchronous" if peer == "dask-sync" else "threads"
        # exp(-X beta) overflows to inf for the line search's too-long trial steps, which it
        # then rejects: expected, not worth a warning per block.
        with dask.config.set(scheduler=scheduler), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            beta = np.asarray(gradient_descent(X, y, max_iter=GLM_ITERATIONS, tol=1e-14,
                                               normalize=False))
        Xn, yn = (np.asarray(X), np.asarray(y)) if peer.startswith("dask") else (X, y)
        return {"result": glm_loss(Xn, yn, beta)}

    return Runner(run, prepare)


# Peers that differ from another row only in how x is drawn: where x is made before the timed
# region (the resident variant, logistic-gd) they would time that row's work again.
SAME_WORK_AS = {"numpy-default_rng": "numpy", "dask-default_rng": "dask-threads",
                "jax-philox": "jax"}


def resident_runner(peer, w, inputs):
    if peer in SAME_WORK_AS:
        return (f"skipped: x is made before timing, so its generator does not matter; the "
                f"{SAME_WORK_AS[peer]} row times the same work")
    if peer == "numpy":
        return Runner(lambda n, c: result_of(expression(w, inputs.get("numpy"), np)),
                      with_input(inputs, "numpy"))
    if peer == "numexpr":
        return Runner(lambda n, c: numexpr_eval(w, inputs.get("numpy")),
                      with_input(inputs, "numpy"))
    if peer == "jax":
        return jax_runner(w, None, inputs)
    if peer == "numba":
        return numba_runner(w, inputs)
    return Runner(lambda n, c: dask_resident(w, peer, inputs), with_input(inputs, "dask"))


def generated_runner(peer, w):
    if peer in ("numpy", "numpy-default_rng"):
        return Runner(lambda n, c: numpy_generated(w, peer, n, c))
    if peer == "numexpr":
        if w == "random-sum":
            return "skipped: NumExpr has no generator; the generation dominates"
        return Runner(lambda n, c: numexpr_eval(w, draw(w, np.random.RandomState(0), (n, n))))
    if peer in JAX_PRNG:
        return jax_runner(w, JAX_PRNG[peer], None)
    if peer == "numba":
        return numba_runner(w, None)
    return Runner(lambda n, c: dask_generated(w, peer, n, c))


def peer_runner(peer, w, missing, inputs):
    """The Runner for this pair, or a string saying why it is not run. `inputs`: the resident
    variant's ResidentInput; None: x is generated inside the timed region."""
    if peer in missing:
        return f"skipped: {missing[peer]}; bash scripts/peers.sh installs the pinned peers"
    if w == "logistic-gd":
        if peer in SAME_WORK_AS and peer != "jax-philox":
            return (f"skipped: the data are made before the timed region; the "
                    f"{SAME_WORK_AS[peer]} row times the same work")
        return glm_runner(peer)
    if peer == "scikit-learn":
        return "skipped: no scikit-learn counterpart of this expression"
    if inputs is not None:
        return resident_runner(peer, w, inputs)
    return generated_runner(peer, w)


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def kiln_run(args, w, n, c):
    cmd = [args.kiln, "run", w, "--json", "--repeat", str(args.kiln_repeat),
           "--size", str(n), "--chunk", str(c)] + ["--resident"] * args.resident
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False, env=KILN_ENV)
    wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    j = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    r = {"seconds": j["seconds"], "result": j["result"], "process_seconds": wall,
         "compile_seconds": j.get("compile_seconds"), "tasks": j.get("tasks"),
         "kernels": j.get("kernels"), "peak_bytes": j.get("peak_bytes"),
         "cpu_per_wall": cpu / wall if wall > 0 else None}
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


def fmt_bytes(b):
    if b is None:
        return "—"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{int(b)} B"


def run_workload(args, w, missing, lines):
    n, c = sizes(args, w)
    impls = ["kiln"] + args.peers
    inputs = ResidentInput(w, n, c) if args.resident else None
    runners = {p: peer_runner(p, w, missing, inputs) for p in args.peers}
    times = {i: [] for i in impls}
    used = {i: 0.0 for i in impls}
    cpu = {i: [] for i in impls}
    results, prepared, notes = {}, {}, {}
    for rnd in range(args.rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for impl in order:
            if impl == "kiln":
                r = kiln_run(args, w, n, c)
            else:
                runner = runners[impl]
                if isinstance(runner, str):
                    notes[impl] = runner
                    continue
                if used[impl] > args.peer_budget:
                    continue
                gc.collect()
                extra = {}
                if runner.prepare is not None and impl not in prepared:
                    t0 = time.perf_counter()
                    prepared[impl] = extra = runner.prepare(n, c)
                    used[impl] += time.perf_counter() - t0
                    print(f"  {w:14} {impl:13} prepare: "
                          + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in extra.items()), file=sys.stderr, flush=True)
                gc.collect()
                p0 = time.process_time()
                t0 = time.perf_counter()
                r = runner.run(n, c)
                r["seconds"] = time.perf_counter() - t0
                r["cpu_per_wall"] = (time.process_time() - p0) / r["seconds"]
                used[impl] += r["seconds"]
                r.update(extra)
            times[impl].append(r["seconds"])
            if r.get("cpu_per_wall") is not None:
                cpu[impl].append(r["cpu_per_wall"])
            results[impl] = r
            lines.append({"kind": "run", "workload": w, "size": n, "chunk": c, "impl": impl,
                          "resident": args.resident, "round": rnd, **r})
            print(f"  {w:14} {impl:13} round {rnd}: {r['seconds']:8.3f} s  "
                  f"{fmt_result(r)}", file=sys.stderr, flush=True)
    kiln_median = statistics.median(times["kiln"])
    summaries = []
    for impl in impls:
        s = {"kind": "summary", "workload": w, "size": n, "chunk": c, "impl": impl,
             "resident": args.resident, "runs": len(times[impl])}
        if times[impl]:
            med = statistics.median(times[impl])
            s.update(median_seconds=med, min_seconds=min(times[impl]),
                     kiln_speedup=med / kiln_median, result=results[impl]["result"])
            if "count" in results[impl]:
                s["count"] = results[impl]["count"]
            if cpu[impl]:
                s["cpu_per_wall"] = statistics.median(cpu[impl])
            if impl == "kiln":
                comp = [x["compile_seconds"] for x in lines if x.get("kind") == "run"
                        and x["workload"] == w and x["impl"] == "kiln"
                        and x.get("compile_seconds") is not None]
                if comp:
                    s["compile_seconds"] = statistics.median(comp)
                s["memory_bytes"] = results[impl].get("peak_bytes")
            else:
                for k in ("compile_seconds", "first_call_seconds", "prng"):
                    if k in prepared.get(impl, {}):
                        s[k] = prepared[impl][k]
                if "temp_bytes" in prepared.get(impl, {}):
                    s["memory_bytes"] = prepared[impl]["temp_bytes"]
        else:
            s["note"] = notes.get(impl, "not run")
        summaries.append(s)
        lines.append(s)
    return summaries


VARIANT_TITLE = {False: "x generated inside the timed region",
                 True: "x resident (made before the timed region)"}
VARIANT_NOTE = {
    False: "Every implementation draws x with its own generator inside the timed region "
           "(NumPy, NumExpr, Dask: the legacy RandomState, and NumPy's and Dask's default_rng "
           "in the *-default_rng rows).",
    True: "x is made before the timed region and only the expression is timed: Kiln's "
          "(`kiln run --resident`: its Philox x persisted in memory), and for the peers one "
          "NumPy default_rng(0) x, persisted by Dask in C x C chunks and put on JAX's device "
          "(block_until_ready); NumExpr and Numba read the NumPy x. The peers share x's "
          "values, Kiln's differ (its own generator).",
}


def print_report(args, env, summaries, overhead, end):
    def ver(k):
        return env.get(k) or "missing"
    print(f"## Seed workloads, {VARIANT_TITLE[args.resident]}: Kiln vs NumPy {env['numpy']}, "
          f"NumExpr {ver('numexpr')} "
          f"({env.get('numexpr_threads')} threads), Dask {ver('dask')}, JAX {ver('jax')} "
          f"(jaxlib {ver('jaxlib')}), Numba {ver('numba')} "
          f"({env.get('numba_threads')} threads, {env.get('numba_threading_layer')} layer), "
          f"scikit-learn {ver('sklearn')}, dask-glm {ver('dask_glm')}\n")
    print(f"Python {env['python']} ({env['executable']}{', venv' if env['venv'] else ''}); "
          f"{env['cpus']} CPUs, load average {env['loadavg_start']:.2f} at start, "
          f"{end['loadavg_end']:.2f} at end; {end['total_seconds']:.0f} s in all. Medians over "
          f"rounds (Kiln: median of {args.kiln_repeat} computes per invocation, compile "
          "excluded); speed-up = peer median / Kiln median. compile s: Kiln's JIT (kernels "
          "found in the on-disk cache cost ~0), JAX's trace + lower + XLA compile, Numba's "
          "first call. CPU/wall: process CPU time over wall time of the timed call (Kiln: of "
          "the whole `kiln run` process). memory: Kiln's peak_bytes (its own allocations), "
          "JAX's XLA temp buffers (compiled.memory_analysis()); not measured for the others. "
          + VARIANT_NOTE[args.resident] + "\n")
    print("| workload | N | C | implementation | median s | runs | Kiln speed-up | compile s "
          "| CPU/wall | memory | result |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for s in summaries:
        name = s["impl"] + (f" ({s['prng']})" if s.get("prng") else "")
        if "median_seconds" in s:
            speed = "—" if s["impl"] == "kiln" else f"{s['kiln_speedup']:.1f}x"
            comp = f"{s['compile_seconds']:.3f}" if "compile_seconds" in s else "—"
            cpw = f"{s['cpu_per_wall']:.2f}" if "cpu_per_wall" in s else "—"
            print(f"| {s['workload']} | {s['size']} | {s['chunk']} | {name} | "
                  f"{s['median_seconds']:.3f} | {s['runs']} | {speed} | {comp} | {cpw} | "
                  f"{fmt_bytes(s.get('memory_bytes'))} | {fmt_result(s)} |")
        else:
            print(f"| {s['workload']} | {s['size']} | {s['chunk']} | {name} | — | 0 | — | — "
                  f"| — | — | {s['note']} |")
    if overhead:
        print("\n| Dask per-task overhead | n | tasks (optimized / raw) | seconds | µs per task |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for o in overhead:
            print(f"| {o['scheduler']} | {o['n']} | {o['tasks']} / {o['tasks_unoptimized']} | "
                  f"{o['seconds']:.3f} | {o['us_per_task']:.1f} |")
    blas = env["blas"]
    print("\nBLAS used by NumPy (exercised by logistic-gd's X @ beta only); removed from the "
          "peers' environment: " + (", ".join(f"{k}={v}" for k, v in env["env_unset_for_peers"].items())
                             or f"nothing ({', '.join(PEER_ENV_UNSET)} were not set)") + ":")
    for b in blas["show_config"] or ["(np.show_config() lists no BLAS)"]:
        print(f"- config: {b}")
    for b in blas["mapped"] or ["(no BLAS library mapped)"]:
        print(f"- loaded: {b}")
    for o in blas["openblas"]:
        print(f"- OpenBLAS at run time: {o.get('config', '?')}; core {o.get('corename', '?')}")
    print()


def main():
    args = parse_args()
    if not os.access(args.kiln, os.X_OK):
        sys.exit(f"seeds_peers: {args.kiln} is not an executable kiln binary "
                 "(build it: cmake --preset release && cmake --build --preset release "
                 "--target kiln_cli)")
    env = environment(args)
    lines = [env]
    for peer, err in env["missing"].items():
        print(f"seeds_peers: skipping {peer}: {err}", file=sys.stderr)

    start = time.perf_counter()
    summaries = []
    for w in args.workloads:
        summaries += run_workload(args, w, env["missing"], lines)

    overhead = []
    if args.overhead_tasks > 0 and any(
            p.startswith("dask") and p not in env["missing"] for p in args.peers):
        overhead = dask_overhead(args.overhead_tasks)
    lines.extend(overhead)
    if "numba" in args.peers and "numba" not in env["missing"]:
        import numba
        try:
            env["numba_threading_layer"] = numba.threading_layer()
        except ValueError:  # no parallel region has run
            pass
    end = {"kind": "end", "total_seconds": time.perf_counter() - start,
           "loadavg_end": os.getloadavg()[0]}
    lines.append(end)

    print_report(args, env, summaries, overhead, end)
    out = [json.dumps(x, sort_keys=True) for x in lines]
    print("\n".join(out))
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
