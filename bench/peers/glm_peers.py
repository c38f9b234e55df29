#!/usr/bin/python3
"""kiln::glm's solvers side by side with dask-glm (on NumPy and on Dask arrays) and scikit-learn.

    bench/peers/.venv/bin/python bench/peers/glm_peers.py build/release/kiln [--rows N]
        [--cols K] [--chunk C] [--solvers a,b] [--admm-iter I] [--skip-dask]

(`bash scripts/peers.sh --glm` runs it in the peers' venv: numpy, dask, dask-glm 0.4.0 and
scikit-learn pinned in bench/peers/requirements.txt.) One logistic regression problem, made once
with NumPy and written as .npy files that Kiln reads (`kiln run glm --input DIR`: the same data,
read into memory before the timed solver): X ~ N(0, 1) (N, K), y = [X w + N(0, 1) > 0] with
w_j = (j mod 7 - 3) / 3, Kiln's chunks and Dask's C x K.

For each dask-glm solver, with dask-glm's defaults (normalized columns; proximal_grad and admm:
L1, lamduh 0.1), each to its own stopping rule (admm capped at --admm-iter iterations, as one of
its iterations is hundreds of L-BFGS evaluations per chunk): the wall time of the solver (Kiln:
the median of --repeat fits, the first of which compiles), its
iterations (dask-glm's counted by wrapping the family's methods it calls once per iteration;
lbfgs: evaluations of the objective, as scipy's fmin_l_bfgs_b does not return its iterations) and
the final objective (loss + penalty of the normalized coefficients), so that "the same tolerance"
can be seen. Then scikit-learn's LogisticRegression(solver="lbfgs", no penalty, no intercept) to
tol 1e-10 against Kiln's lbfgs to the same loss.

Output: a markdown table on stdout, then one JSON object per line.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

SOLVERS = ("gradient_descent", "newton", "lbfgs", "proximal_grad", "admm")
LAMDUH = 0.1


def problem(n, p):
    rs = np.random.RandomState(0)
    X = rs.standard_normal((n, p))
    w = (np.arange(p) % 7 - 3) / 3
    y = (X @ w + rs.standard_normal(n) > 0).astype(np.float64)
    return X, y


def objective(X, y, beta, solver, std):
    xb = X @ beta
    loss = float(np.sum(np.logaddexp(0, xb)) - y @ xb)
    if solver in ("proximal_grad", "admm"):  # dask-glm's L1 on the normalized coefficients
        loss += LAMDUH * float(np.abs(beta * std).sum())
    return loss


def kiln_run(kiln, data_dir, chunk, solver, max_iter=None, tol=None, extra=(), repeat=3):
    """`kiln run glm` on the .npy files in data_dir: the median of `repeat` fits (the first one
    compiles the kernels a new shape needs)."""
    cmd = [kiln, "run", "glm", "--input", data_dir, "--chunk", str(chunk), "--solver", solver,
           "--json", "--quiet", "--repeat", str(repeat), *extra]
    if max_iter:
        cmd += ["--max-iter", str(max_iter)]
    if tol:
        cmd += ["--tol", repr(tol)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


class Counter:
    """Counts calls of the dask-glm functions a solver calls once per iteration (or evaluation)."""

    def __init__(self):
        from dask_glm import algorithms, families, regularizers
        self.n = 0
        self.patches = [(families.Logistic, "gradient"), (families.Logistic, "hessian"),
                        (families.Logistic, "pointwise_loss"), (regularizers.L1, "proximal_operator")]
        self.saved = [(c, a, c.__dict__[a]) for c, a in self.patches]
        self.algorithms = algorithms

    def counting(self, solver):
        from dask_glm import families, regularizers
        which = {"gradient_descent": (families.Logistic, "gradient"),
                 "proximal_grad": (families.Logistic, "gradient"),
                 "newton": (families.Logistic, "hessian"),
                 "lbfgs": (families.Logistic, "pointwise_loss"),
                 "admm": (regularizers.L1, "proximal_operator")}[solver]
        cls, attr = which
        original = cls.__dict__[attr]
        fn = original.__func__ if isinstance(original, staticmethod) else original
        counter = self

        def wrapped(*a, **k):
            counter.n += 1
            return fn(*a, **k)

        setattr(cls, attr, staticmethod(wrapped) if isinstance(original, staticmethod) else wrapped)

    def restore(self):
        for c, a, v in self.saved:
            setattr(c, a, v)


def dask_glm_run(solver, X, y, max_iter, scheduler):
    import dask
    counter = Counter()
    counter.counting(solver)
    kwargs = {"max_iter": max_iter} if max_iter else {}
    if solver in ("proximal_grad", "admm"):
        kwargs.update(regularizer="l1", lamduh=LAMDUH)
    try:
        with dask.config.set(scheduler=scheduler), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            beta = np.asarray(getattr(counter.algorithms, solver)(X, y, **kwargs))
            seconds = time.perf_counter() - t
    finally:
        counter.restore()
    return seconds, counter.n, beta


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kiln", nargs="?", default="build/release/kiln")
    p.add_argument("--rows", type=int, default=1000000)
    p.add_argument("--cols", type=int, default=100)
    p.add_argument("--chunk", type=int, default=100000)
    p.add_argument("--solvers", default=",".join(SOLVERS))
    p.add_argument("--admm-iter", type=int, default=2)
    p.add_argument("--skip-dask", action="store_true", help="no dask-glm on Dask arrays")
    p.add_argument("--repeat", type=int, default=3, help="Kiln fits per solver (median)")
    args = p.parse_args()
    import dask
    import dask.array as da
    import sklearn
    print(f"numpy {np.__version__}, dask {dask.__version__}, dask-glm 0.4.0, scikit-learn "
          f"{sklearn.__version__}; N={args.rows} K={args.cols} C={args.chunk}", file=sys.stderr)
    X, y = problem(args.rows, args.cols)
    std = X.std(axis=0)
    Xd, yd = dask.persist(da.from_array(X, chunks=(args.chunk, args.cols)),
                          da.from_array(y, chunks=(args.chunk,)), scheduler="threads")
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "X.npy"), X)
        np.save(os.path.join(tmp, "y.npy"), y)
        for solver in args.solvers.split(","):
            cap = args.admm_iter if solver == "admm" else None
            k = kiln_run(args.kiln, tmp, args.chunk, solver, cap, repeat=args.repeat)
            rec = {"kind": "solver", "solver": solver, "kiln_seconds": k["seconds"],
                   "kiln_iterations": int(k["iterations"]), "kiln_computes": k["computes"],
                   "kiln_objective": k["result"], "kiln_converged": bool(k["converged"])}
            peers = [("numpy", X, y, "threads")]
            if not args.skip_dask:
                peers.append(("dask", Xd, yd, "threads"))
            for name, xx, yy, sched in peers:
                s, n, beta = dask_glm_run(solver, xx, yy, cap, sched)
                rec.update({f"{name}_seconds": s, f"{name}_iterations": n,
                            f"{name}_objective": objective(X, y, beta, solver, std)})
            records.append(rec)
            print(json.dumps(rec), file=sys.stderr)
        # scikit-learn's L-BFGS to tol 1e-10 (its objective is the mean loss), Kiln's lbfgs to
        # the same loss (its tol is on the summed loss's gradient).
        from sklearn.linear_model import LogisticRegression
        t = time.perf_counter()
        m = LogisticRegression(C=np.inf, fit_intercept=False, solver="lbfgs", tol=1e-10,
                               max_iter=10000).fit(X, y)
        sk_seconds = time.perf_counter() - t
        sk_loss = objective(X, y, m.coef_.ravel(), "lbfgs", std)
        k = kiln_run(args.kiln, tmp, args.chunk, "lbfgs", None, 1e-10 * args.rows,
                     repeat=args.repeat)
        records.append({"kind": "sklearn", "sklearn_seconds": sk_seconds,
                        "sklearn_iterations": int(m.n_iter_[0]), "sklearn_loss": sk_loss,
                        "kiln_seconds": k["seconds"], "kiln_iterations": int(k["iterations"]),
                        "kiln_loss": k["result"]})
    print("| solver | Kiln s (iterations) | dask-glm NumPy s (iterations) | x | dask-glm Dask s "
          "(iterations) | x | objective Kiln / NumPy / Dask |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        if r["kind"] != "solver":
            continue
        dask_cols = (f"{r['dask_seconds']:.2f} ({r['dask_iterations']}) | "
                     f"{r['dask_seconds'] / r['kiln_seconds']:.1f}" if "dask_seconds" in r
                     else "- | -")
        print(f"| {r['solver']} | {r['kiln_seconds']:.2f} ({r['kiln_iterations']}) | "
              f"{r['numpy_seconds']:.2f} ({r['numpy_iterations']}) | "
              f"{r['numpy_seconds'] / r['kiln_seconds']:.1f} | {dask_cols} | "
              f"{r['kiln_objective']:.6g} / {r['numpy_objective']:.6g} / "
              f"{r.get('dask_objective', float('nan')):.6g} |")
    sk = records[-1]
    print(f"\nscikit-learn LogisticRegression(lbfgs, tol 1e-10): {sk['sklearn_seconds']:.2f} s, "
          f"{sk['sklearn_iterations']} iterations, loss {sk['sklearn_loss']:.10g}; Kiln lbfgs: "
          f"{sk['kiln_seconds']:.2f} s, {sk['kiln_iterations']} iterations, loss "
          f"{sk['kiln_loss']:.10g} ({sk['sklearn_seconds'] / sk['kiln_seconds']:.1f}x)")
    for r in records:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
