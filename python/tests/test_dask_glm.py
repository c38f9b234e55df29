"""Code written for NumPy and Dask that Kiln has never seen: dask-glm 0.4's solvers (pinned in
tests/requirements.txt) run unchanged on kiln arrays, through NEP 18 / NEP 13 and Dask's
collection protocol (dask.compute and dask.persist of kiln arrays), and give NumPy's answers."""

import numpy as np
import pytest

import kiln

dask = pytest.importorskip("dask")
algorithms = pytest.importorskip("dask_glm.algorithms")
families = pytest.importorskip("dask_glm.families")


def test_dask_compute_and_persist_take_kiln_arrays():
    a = np.arange(12.0).reshape(3, 4)
    k = kiln.asarray(a, chunks=(2, 2))
    s, m, other = dask.compute(k.sum(), k.mean(axis=0), 5)
    assert isinstance(s, np.ndarray) and s == a.sum() and other == 5
    np.testing.assert_array_equal(m, a.mean(axis=0))
    (p,) = dask.persist(k * 2)
    assert isinstance(p, kiln.Array) and p.chunks == ((2, 1), (2, 2))
    np.testing.assert_array_equal(p.compute(), a * 2)
    assert dask.is_dask_collection(k)


@pytest.mark.parametrize("solver", ["gradient_descent", "newton", "lbfgs", "proximal_grad", "admm"])
@pytest.mark.parametrize("family", ["Logistic", "Normal"])
def test_dask_glm_solvers_give_numpys_answers_on_kiln_arrays(solver, family):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 4))
    eta = X @ np.array([1.0, -2.0, 0.5, 0.0])
    y = (eta + rng.standard_normal(1500) > 0).astype(float) if family == "Logistic" else eta + 0.3
    fam = getattr(families, family)
    kwargs = {"max_iter": 15, "family": fam}
    want = getattr(algorithms, solver)(X, y, **kwargs)
    got = getattr(algorithms, solver)(kiln.asarray(X, chunks=(500, 4)),
                                      kiln.asarray(y, chunks=500), **kwargs)
    got = np.asarray(got)
    assert got.shape == want.shape
    # (sums are added in another order than NumPy's; L-BFGS carries that to ~1e-11)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
