"""scikit-learn functions that accept array API inputs (array_api_dispatch=True) on kiln arrays:
those that work give NumPy's answers; those that need what Kiln lacks fail with an exception
naming it (boolean-mask indexing, take, unique_values), never a wrong number."""

import numpy as np
import pytest

import kiln

sklearn = pytest.importorskip("sklearn")
from sklearn import config_context  # noqa: E402
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score  # noqa: E402
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((200, 5))
y = X @ np.arange(5.0) + 1
KX, KY = kiln.asarray(X, chunks=(50, 5)), kiln.asarray(y, chunks=50)

WORKS = {
    "mean_squared_error": (lambda a, b: mean_squared_error(b, a[:, 0]), ),
    "mean_absolute_error": (lambda a, b: mean_absolute_error(b, a[:, 0]), ),
    "MinMaxScaler": (lambda a, b: MinMaxScaler().fit_transform(a), ),
    "MaxAbsScaler": (lambda a, b: MaxAbsScaler().fit_transform(a), ),
    "Normalizer": (lambda a, b: Normalizer().fit_transform(a), ),
}
NEEDS = {  # what they call that Kiln does not have
    "r2_score": (lambda a, b: r2_score(b, a[:, 0]), "boolean masks"),
    "StandardScaler": (lambda a, b: StandardScaler().fit_transform(a), "boolean masks"),
}


@pytest.mark.parametrize("name", sorted(WORKS))
def test_works_and_gives_numpys_answer(name):
    (f,) = WORKS[name]
    want = f(X, y)
    with config_context(array_api_dispatch=True):
        got = f(KX, KY)
    got = got.compute() if isinstance(got, kiln.Array) else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_needs_what_kiln_lacks_and_says_so(name):
    f, what = NEEDS[name]
    with config_context(array_api_dispatch=True), pytest.raises(IndexError, match=what):
        f(KX, KY)
