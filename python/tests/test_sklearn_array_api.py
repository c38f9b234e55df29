"""scikit-learn functions that accept array API inputs (array_api_dispatch=True) on kiln arrays,
and model selection (GridSearchCV, cross_val_score) on kiln inputs: each gives NumPy's answer.
What they need from Kiln: gathers (xp.take, x[mask], x[mask] = v for r2_score, StandardScaler,
PCA, Ridge, the CV splitters), unique_values (accuracy_score, LDA, classifiers' labels) and
searchsorted (f1_score). Not compared: pairwise_distances (its ||a||^2 + ||b||^2 - 2ab formula
puts rounding of 1e-16 under a square root: 4e-8 apart from NumPy's run near zero distances,
both as right)."""

import numpy as np
import pytest

import kiln

sklearn = pytest.importorskip("sklearn")
from sklearn import config_context  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402
from sklearn.metrics import accuracy_score, f1_score, mean_absolute_error  # noqa: E402
from sklearn.metrics import mean_squared_error, r2_score  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold  # noqa: E402
from sklearn.model_selection import cross_val_score, train_test_split  # noqa: E402
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((200, 5))
y = X @ np.arange(5.0) + 1
labels = (y > 1).astype(np.int64)
KX, KY = kiln.asarray(X, chunks=(50, 5)), kiln.asarray(y, chunks=50)
KL = kiln.asarray(labels, chunks=50)

WORKS = {
    "mean_squared_error": lambda a, b, c: mean_squared_error(b, a[:, 0]),
    "mean_absolute_error": lambda a, b, c: mean_absolute_error(b, a[:, 0]),
    "r2_score": lambda a, b, c: r2_score(b, a[:, 0]),
    "accuracy_score": lambda a, b, c: accuracy_score(c, c[::-1]),
    "f1_score": lambda a, b, c: f1_score(c, c[::-1]),
    "MinMaxScaler": lambda a, b, c: MinMaxScaler().fit_transform(a),
    "MaxAbsScaler": lambda a, b, c: MaxAbsScaler().fit_transform(a),
    "Normalizer": lambda a, b, c: Normalizer().fit_transform(a),
    "StandardScaler": lambda a, b, c: StandardScaler().fit_transform(a),
    "PCA": lambda a, b, c: abs(PCA(n_components=3, svd_solver="full").fit_transform(a)),
    "Ridge(svd)": lambda a, b, c: Ridge(solver="svd").fit(a, b).coef_,
    "LinearDiscriminantAnalysis": lambda a, b, c: LinearDiscriminantAnalysis().fit(a, c).coef_,
    "train_test_split": lambda a, b, c: train_test_split(a, b, test_size=0.25, random_state=0)[1],
    "cross_val_score(KFold)": lambda a, b, c: cross_val_score(Ridge(), a, b, cv=KFold(5)),
    "GridSearchCV(Ridge)": lambda a, b, c: GridSearchCV(Ridge(), {"alpha": [0.1, 10.0]}, cv=3)
    .fit(a, b)
    .best_score_,
    # Kiln's own estimator, stratified (interleaved) folds: a gather of many runs per fold.
    "GridSearchCV(kiln LogisticRegression)": lambda a, b, c: GridSearchCV(
        kiln.glm.LogisticRegression(), {"C": [0.1, 1.0]}, cv=StratifiedKFold(3)
    )
    .fit(a, c)
    .best_score_,
}


@pytest.mark.parametrize("name", sorted(WORKS))
def test_works_and_gives_numpys_answer(name):
    f = WORKS[name]
    want = f(X, y, labels)
    with config_context(array_api_dispatch=True):
        got = f(KX, KY, KL)
    got = got.compute() if isinstance(got, kiln.Array) else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
