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


# kiln::glm's solvers (dask-glm 0.4.0's algorithms) in NumPy, step for step, for
# tests/tools/glm_library_test.cpp. Each returns np.concatenate([coef, [n_iter]]).

def family_loss(family, xb, y):
    if family == "logistic":
        return (np.maximum(xb, 0) + np.log1p(np.exp(-np.abs(xb)))).sum() - (y * xb).sum()
    if family == "normal":
        return ((y - xb) * (y - xb)).sum()
    return (np.exp(xb) - y * xb).sum()


def family_gradient(family, xb, X, y):
    if family == "logistic":
        return X.T @ (1 / (1 + np.exp(-xb)) - y)
    if family == "normal":
        return X.T @ (2 * (xb - y))
    return X.T @ (np.exp(xb) - y)


def family_hessian(family, xb, X):
    if family == "normal":
        return 2 * (X.T @ X)
    if family == "logistic":
        p = 1 / (1 + np.exp(-xb))
        w = p * (1 - p)
    else:
        w = np.exp(xb)
    return X.T @ (w[:, None] * X)


def normalized(X):
    """dask-glm's @normalize: columns scaled by their std; centered only with a constant one."""
    mean, std = X.mean(axis=0), X.std(axis=0)
    idx = np.where(std == 0)[0]
    mean[idx] = 0
    std[idx] = 1
    if len(idx) == 0:
        mean = np.zeros_like(mean)
    return (X - mean) / std, mean, std, idx


def original(coef, mean, std, idx):
    out = coef.copy()
    out[idx] -= np.sum(out * mean / std)
    return out / std


def prox(penalty, beta, t, weight=0.5):
    soft = lambda b, g: np.maximum(0, b - g) - np.maximum(0, -b - g)  # noqa: E731
    if penalty == "l1":
        return soft(beta, t)
    if penalty == "l2":
        return beta / (1 + t)
    return soft(beta, weight * t) / (1 + (1 - weight) * t)


def glm_gradient_descent(X0, y, family, max_iter=100, tol=1e-14):
    X, mean, std, idx = normalized(X0)
    beta = np.zeros(X.shape[1])
    step, backtrack, func, k = 1.0, 0.1, 0.0, 0
    while k < max_iter:
        if k % 10 == 0:
            xb = X @ beta
            func = family_loss(family, xb, y)
        grad = family_gradient(family, xb, X, y)
        xg = X @ grad
        steplen, lf, s = (grad ** 2).sum(), func, step
        for ii in range(100):
            if ii and ((beta - s * grad) == beta).all():
                s = 0.0
                break
            func = family_loss(family, xb - s * xg, y)
            if lf - func >= 0.1 * s * steplen:
                break
            s *= backtrack
        beta = beta - s * grad
        xb = xb - s * xg
        k += 1
        if s == 0 or (lf - func) / max(func, lf) < tol:
            break
        step, backtrack = s * 1.25, 0.5
    return np.concatenate([original(beta, mean, std, idx), [k]])


def glm_newton(X0, y, family, max_iter=50, tol=1e-8):
    X, mean, std, idx = normalized(X0)
    beta = np.zeros(X.shape[1])
    k = 0
    while True:
        xb = X @ beta
        step = np.linalg.lstsq(family_hessian(family, xb, X), family_gradient(family, xb, X, y))[0]
        new = beta - step
        k += 1
        moved = np.any(np.abs(beta - new) > tol)
        beta = new
        if not moved or k > max_iter:
            break
    return np.concatenate([original(beta, mean, std, idx), [k]])


def glm_proximal_grad(X0, y, family, penalty="l1", lamduh=0.1, max_iter=100, tol=1e-8):
    X, mean, std, idx = normalized(X0)
    beta = np.zeros(X.shape[1])
    step, backtrack, func, k = 1.0, 0.1, 0.0, 0
    while k < max_iter:
        if k % 10 == 0:
            xb = X @ beta
            func = family_loss(family, xb, y)
        grad = family_gradient(family, xb, X, y)
        obeta, lf = beta, func
        for ii in range(100):
            beta = prox(penalty, obeta - step * grad, step * lamduh)
            xb = X @ beta
            func = family_loss(family, xb, y)
            df = lf - func
            if df > 0:
                break
            step *= backtrack
        k += 1
        if step == 0:
            break
        if df / max(func, lf) < tol:
            break
        step, backtrack = step * 1.25, 0.5
    return np.concatenate([original(beta, mean, std, idx), [k]])


def glm_lbfgs(X0, y, family, penalty="none", lamduh=0.1, max_iter=100, tol=1e-4):
    """kiln::glm::lbfgs: two-loop L-BFGS (10 pairs), Armijo backtracking, scipy-like stops."""
    X, mean, std, idx = normalized(X0)
    p = X.shape[1]
    lam = 0.0 if penalty == "none" else lamduh

    def evaluate(b):
        xb = X @ b
        g = family_gradient(family, xb, X, y) + lam * b
        return family_loss(family, xb, y) + lam * (b ** 2).sum() / 2, g

    beta = np.zeros(p)
    f, grad = evaluate(beta)
    S, Y, R = [], [], []
    k = 0
    converged = np.abs(grad).max() <= tol
    while k < max_iter and not converged:
        q = grad.copy()
        alpha = [0.0] * len(S)
        for i in reversed(range(len(S))):
            alpha[i] = R[i] * (S[i] @ q)
            q -= alpha[i] * Y[i]
        gamma = 1 / np.sqrt(grad @ grad) if not S else (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1])
        q *= gamma
        for i in range(len(S)):
            b = R[i] * (Y[i] @ q)
            q += S[i] * (alpha[i] - b)
        d = -q
        slope = grad @ d
        if not slope < 0:
            S, Y, R = [], [], []
            d = -grad / np.sqrt(grad @ grad)
            slope = grad @ d
        step, accepted = 1.0, False
        for _ in range(60):
            trial = beta + step * d
            f_new, g_new = evaluate(trial)
            if f_new <= f + 1e-4 * step * slope:
                accepted = True
                break
            step *= 0.5
        k += 1
        if not accepted:
            break
        s, yv = trial - beta, g_new - grad
        sy = s @ yv
        if sy > 1e-10 * (yv @ yv):
            S.append(s)
            Y.append(yv)
            R.append(1 / sy)
            if len(S) > 10:
                S.pop(0)
                Y.pop(0)
                R.pop(0)
        f_old = f
        beta, grad, f = trial, g_new, f_new
        converged = (np.abs(grad).max() <= tol
                     or f_old - f <= 1e7 * np.finfo(float).eps * max(abs(f_old), abs(f), 1.0))
    return np.concatenate([original(beta, mean, std, idx), [k]])
