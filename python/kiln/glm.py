"""kiln.glm: dask-glm's solvers on kiln arrays (gradient_descent, newton, lbfgs, proximal_grad,
admm), run by Kiln's C++ GLM library: each iteration a few fused computes."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core, _kiln

__all__ = ["fit", "FitResult", "SOLVERS", "FAMILIES"]

SOLVERS = ("gradient_descent", "newton", "lbfgs", "proximal_grad", "admm")
FAMILIES = ("logistic", "normal", "poisson")


class FitResult(NamedTuple):
    coef: np.ndarray
    n_iter: int
    loss: np.ndarray
    converged: bool


def fit(X, y, solver="lbfgs", family="logistic", regularizer="none", lamduh=0.1, max_iter=0,
        tol=0.0, normalize=True) -> FitResult:
    """Fits a GLM as dask_glm.algorithms.<solver>(X, y, family=..., regularizer=...,
    lamduh=...); coef are those of X's columns. max_iter=0 and tol=0 take the solver's
    defaults."""
    if solver not in SOLVERS:
        raise ValueError(f"kiln.glm.fit: solver must be one of {SOLVERS}, got {solver!r}")
    r = _kiln.glm.solve(solver, _core.asarray(X)._a, _core.asarray(y)._a, family=family,
                        penalty=regularizer, lamduh=float(lamduh), max_iter=int(max_iter),
                        tol=float(tol), normalize=bool(normalize))
    return FitResult(np.asarray(r["coef"]), r["n_iter"], np.asarray(r["loss"]), r["converged"])


# ---- scikit-learn's estimator API ---------------------------------------------------------------


class ConvergenceWarning(UserWarning):
    """A fit stopped at max_iter, or where no step lowered the objective any more, before the
    gradient rule held (scikit-learn's ConvergenceWarning)."""


class _LinearModel:
    """scikit-learn's estimator API on Kiln's GLM solvers, as dask_ml.linear_model: fit(X, y)
    with X, y NumPy or kiln arrays (NumPy ones are wrapped, not copied); the objective is
    scikit-learn's, sum(loss) + penalty(coef) / C; every solver stops when the largest component
    of the mean objective's gradient is <= tol (kiln/glm.hpp, "estimators")."""

    _family = ""
    _params = ("fit_intercept", "solver", "penalty", "C", "l1_ratio", "max_iter", "tol", "rho")

    def __init__(self, fit_intercept=True, solver="admm", penalty="l2", C=1.0, l1_ratio=0.5,
                 max_iter=100, tol=1e-4, rho=1.0):
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.penalty = penalty
        self.C = C
        self.l1_ratio = l1_ratio
        self.max_iter = max_iter
        self.tol = tol
        self.rho = rho

    # scikit-learn's estimator tags (sklearn >= 1.6 asks for them; older ones read
    # _estimator_type): what Pipeline, GridSearchCV and is_classifier look at.
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        classifier = self._estimator_type == "classifier"
        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=True, positive_only=self._family == "poisson"),
            classifier_tags=ClassifierTags(multi_class=False) if classifier else None,
            regressor_tags=None if classifier else RegressorTags(),
        )

    def get_params(self, deep=True):
        return {p: getattr(self, p) for p in self._params}

    def set_params(self, **params):
        for name, value in params.items():
            if name not in self._params:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}; valid "
                    f"parameters are {sorted(self._params)}"
                )
            setattr(self, name, value)
        return self

    def __repr__(self):
        default = type(self)()
        changed = [f"{p}={getattr(self, p)!r}" for p in self._params
                   if getattr(self, p) != getattr(default, p)]
        return f"{type(self).__name__}({', '.join(changed)})"

    def fit(self, X, y):
        X, y = _core.asarray(X), _core.asarray(y)
        if X.ndim != 2:
            raise ValueError(f"{type(self).__name__}.fit: X must be 2-D, got shape {X.shape}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"{type(self).__name__}.fit: y must have shape ({X.shape[0]},), got {y.shape}")
        r = _kiln.glm.fit_model(self._family, X.astype(np.float64, copy=False)._a,
                                y.astype(np.float64, copy=False)._a, bool(self.fit_intercept),
                                str(self.solver), str(self.penalty), float(self.C),
                                float(self.l1_ratio), int(self.max_iter), float(self.tol),
                                float(self.rho))
        self.coef_ = np.asarray(r["coef"])
        self.intercept_ = float(r["intercept"])
        self.n_iter_ = int(r["n_iter"])
        self.loss_ = np.asarray(r["loss"])
        self.converged_ = bool(r["converged"])
        self.n_features_in_ = X.shape[1]
        if not self.converged_:
            import warnings

            warnings.warn(
                f"{type(self).__name__}: the {self.solver} solver stopped after {self.n_iter_} "
                f"iterations without meeting tol={self.tol}",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _check_fitted(self, X):
        if not hasattr(self, "coef_"):
            raise ValueError(f"This {type(self).__name__} instance is not fitted yet; call fit first")
        X = _core.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{type(self).__name__}: X has shape {X.shape}; the model was fitted on "
                f"{self.n_features_in_} features"
            )
        return X

    def decision_function(self, X):
        """X @ coef_ + intercept_, a lazy kiln array."""
        X = self._check_fitted(X)
        return _core.matmul(X.astype(np.float64, copy=False), self.coef_) + self.intercept_


class LogisticRegression(_LinearModel):
    """sklearn.linear_model.LogisticRegression's objective (binary, labels 0/1)."""

    _family = "logistic"
    _estimator_type = "classifier"

    @property
    def classes_(self):
        return np.array([0.0, 1.0])

    def predict_proba(self, X):
        """(n, 2): the probabilities of class 0 and class 1, as scikit-learn's (lazy)."""
        p = _core.sigmoid(self.decision_function(X))
        return _core.stack([1.0 - p, p], axis=1)

    def predict(self, X):
        """Labels 0.0 / 1.0 (lazy)."""
        return (self.decision_function(X) > 0).astype(np.float64)

    def score(self, X, y):
        """Mean accuracy."""
        return float(_core.mean(self.predict(X) == _core.asarray(y)))


class LinearRegression(_LinearModel):
    """Least squares (loss sum((y - Xb)^2)) with scikit-learn's Ridge / Lasso penalties."""

    _family = "normal"
    _estimator_type = "regressor"

    def predict(self, X):
        return self.decision_function(X)

    def score(self, X, y):
        """R^2."""
        y = _core.asarray(y).astype(np.float64, copy=False)
        resid = _core.sum((y - self.predict(X)) ** 2)
        total = _core.sum((y - _core.mean(y)) ** 2)
        resid, total = _core.compute(resid, total)
        return float(1.0 - resid / total)


class PoissonRegression(_LinearModel):
    """sklearn.linear_model.PoissonRegressor's objective (log link)."""

    _family = "poisson"
    _estimator_type = "regressor"

    def predict(self, X):
        return _core.exp(self.decision_function(X))

    def score(self, X, y):
        """D^2: the share of the Poisson deviance explained, as PoissonRegressor.score."""
        y = _core.asarray(y).astype(np.float64, copy=False)
        mu = self.predict(X)

        def deviance(mean):
            ylogy = _core.where(y > 0, y * _core.log(_core.where(y > 0, y, 1.0) / mean), 0.0)
            return 2.0 * _core.sum(ylogy - y + mean)

        dev, null = _core.compute(deviance(mu), deviance(_core.mean(y)))
        return float(1.0 - dev / null)


__all__ += ["LogisticRegression", "LinearRegression", "PoissonRegression", "ConvergenceWarning"]
