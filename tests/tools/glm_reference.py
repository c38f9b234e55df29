"""NumPy reference for tools/workloads.cpp logistic_gradient_descent: dask-glm's
gradient_descent (dask_glm/algorithms.py, Michael Grant's algorithm with its line search
compute_stepsize_dask) written out for NumPy arrays, step for step, so the test can compare Kiln's
solver with it on the same data."""
import numpy as np


def loglike(xbeta, y):
    return (xbeta + np.log1p(np.exp(-xbeta))).sum() - y @ xbeta


def gradient_descent(X, y, max_iter, tol):
    n, p = X.shape
    beta = np.zeros(p)
    step_size, backtrack = 1.0, 0.1
    func = 0.0
    k = 0
    while k < max_iter:
        if k % 10 == 0:
            xbeta = X @ beta
            func = loglike(xbeta, y)
        grad = X.T @ (1 / (1 + np.exp(-xbeta)) - y)
        xgrad = X @ grad
        steplen = (grad ** 2).sum()
        lf = func
        s = step_size
        for ii in range(100):
            trial = beta - s * grad
            if ii and (trial == beta).all():
                s = 0.0
                break
            func = loglike(xbeta - s * xgrad, y)
            if lf - func >= 0.1 * s * steplen:
                break
            s *= backtrack
        beta = beta - s * grad
        xbeta = xbeta - s * xgrad
        k += 1
        if s == 0 or (lf - func) / max(func, lf) < tol:
            break
        step_size = s * 1.25
        backtrack = 0.5
    return np.concatenate([beta, [func, k]])
