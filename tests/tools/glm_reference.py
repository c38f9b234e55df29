"""kiln::glm's solvers (dask-glm 0.4.0's algorithms, with dask-glm's column normalization) in
NumPy, step for step, for tests/tools/glm_library_test.cpp and glm_test.cpp (the logistic-gd
workload); and scikit-learn's fits of the estimators' objective, that objective and the
estimators' stopping rule for glm_estimators_test.cpp."""
import numpy as np


def gradient_descent(X, y, max_iter, tol):
    """The logistic-gd workload: glm_gradient_descent without normalization, returning
    np.concatenate([beta, [final loss, n_iter]])."""
    beta, func, k = _gradient_descent(X, y, "logistic", max_iter, tol)
    return np.concatenate([beta, [func, k]])


# The glm_* solvers return np.concatenate([coef, [n_iter]]).

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


def _gradient_descent(X, y, family, max_iter, tol, loss=None, gradient=None, zeros=np.zeros):
    """dask-glm's gradient_descent (Michael Grant's algorithm, line search compute_stepsize_dask)
    on X as given. Returns (beta, final loss, n_iter). loss(xb, y), gradient(xb, X, y) and zeros
    default to the family's in NumPy; bench/peers/gpu_peers.py passes CuPy's and JAX's (its
    losses as Python floats: the host's tests need them there)."""
    loss = loss or (lambda xb, yy: family_loss(family, xb, yy))
    gradient = gradient or (lambda xb, XX, yy: family_gradient(family, xb, XX, yy))
    beta = zeros(X.shape[1])
    step, backtrack, func, k = 1.0, 0.1, 0.0, 0
    while k < max_iter:
        if k % 10 == 0:
            xb = X @ beta
            func = loss(xb, y)
        grad = gradient(xb, X, y)
        xg = X @ grad
        steplen, lf, s = float((grad ** 2).sum()), func, step
        for ii in range(100):
            if ii and bool(((beta - s * grad) == beta).all()):
                s = 0.0
                break
            func = loss(xb - s * xg, y)
            if lf - func >= 0.1 * s * steplen:
                break
            s *= backtrack
        else:
            s = 0.0  # no trial decreased the loss: beta stays (dask-glm takes the last trial)
        if s == 0:
            func = lf
        beta = beta - s * grad
        xb = xb - s * xg
        k += 1
        if s == 0 or (lf - func) / max(abs(func), abs(lf)) < tol:
            break
        step, backtrack = s * 1.25, 0.5
    return beta, func, k


def glm_gradient_descent(X0, y, family, max_iter=100, tol=1e-14):
    X, mean, std, idx = normalized(X0)
    beta, _, k = _gradient_descent(X, y, family, max_iter, tol)
    return np.concatenate([original(beta, mean, std, idx), [k]])


def glm_newton(X0, y, family, max_iter=50, tol=1e-8):
    """dask-glm's newton, at most max_iter iterations (dask-glm runs max_iter + 1), backtracking
    where the full step fails Armijo's condition (dask-glm has no line search)."""
    X, mean, std, idx = normalized(X0)
    beta = np.zeros(X.shape[1])
    f = family_loss(family, X @ beta, y)
    k = 0
    while k < max_iter:
        xb = X @ beta
        grad = family_gradient(family, xb, X, y)
        step = np.linalg.lstsq(family_hessian(family, xb, X), grad)[0]
        new = beta - step
        k += 1
        if not np.any(np.abs(beta - new) > tol):
            beta = new
            break
        slope, g1, t = grad @ step, np.abs(grad).sum(), 1.0
        if not slope > 0:
            break
        for _ in range(40):
            new = beta - t * step
            xn = X @ new
            fn = family_loss(family, xn, y)
            if fn <= f - 1e-4 * t * slope or (
                    abs(fn - f) <= 16 * np.finfo(float).eps * abs(f)
                    and np.abs(family_gradient(family, xn, X, y)).sum() < g1):
                break
            t *= 0.5
        else:
            break
        beta, f = new, fn
    return np.concatenate([original(beta, mean, std, idx), [k]])


def penalty_value(penalty, beta, weight=0.5):
    l1, l2 = np.abs(beta).sum(), (beta ** 2).sum() / 2
    return {"l1": l1, "l2": l2, "elastic_net": weight * l1 + (1 - weight) * l2}[penalty]


def glm_proximal_grad(X0, y, family, penalty="l1", lamduh=0.1, max_iter=100, tol=1e-8):
    """dask-glm's proximal_grad, with func the objective (loss + lamduh * penalty) where
    dask-glm 0.4.0 has the loss alone."""
    X, mean, std, idx = normalized(X0)
    beta = np.zeros(X.shape[1])
    step, backtrack, func, k = 1.0, 0.1, 0.0, 0
    while k < max_iter:
        if k % 10 == 0:
            xb = X @ beta
            func = family_loss(family, xb, y) + lamduh * penalty_value(penalty, beta)
        grad = family_gradient(family, xb, X, y)
        obeta, lf = beta, func
        for ii in range(100):
            beta = prox(penalty, obeta - step * grad, step * lamduh)
            xb = X @ beta
            func = family_loss(family, xb, y) + lamduh * penalty_value(penalty, beta)
            df = lf - func
            if df > 0:
                break
            step *= backtrack
        else:
            beta, func = obeta, lf  # no trial decreased the objective: beta stays
            xb = X @ beta
        k += 1
        if step == 0:
            break
        if df <= 0 or df / max(abs(func), abs(lf)) < tol:
            break
        step, backtrack = step * 1.25, 0.5
    return np.concatenate([original(beta, mean, std, idx), [k]])


def two_loop_lbfgs(evaluate, x0, pgtol, max_iter, max_eval=0):
    """kiln::glm's L-BFGS: two-loop recursion (10 pairs), Armijo backtracking, scipy-like stops.
    Returns (x, iterations)."""
    beta = x0.copy()
    f, grad = evaluate(beta)
    evals = 1
    S, Y, R = [], [], []
    k = 0
    converged = np.abs(grad).max() <= pgtol
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
            evals += 1
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
        converged = (np.abs(grad).max() <= pgtol
                     or f_old - f <= 1e7 * np.finfo(float).eps * max(abs(f_old), abs(f), 1.0))
        if max_eval and evals >= max_eval:
            break
    return beta, k


def glm_lbfgs(X0, y, family, penalty="none", lamduh=0.1, max_iter=100, tol=1e-4):
    """kiln::glm::lbfgs on the loss plus an L2 penalty."""
    X, mean, std, idx = normalized(X0)
    lam = 0.0 if penalty == "none" else lamduh

    def evaluate(b):
        xb = X @ b
        g = family_gradient(family, xb, X, y) + lam * b
        return family_loss(family, xb, y) + lam * (b ** 2).sum() / 2, g

    beta, k = two_loop_lbfgs(evaluate, np.zeros(X.shape[1]), tol, max_iter)
    return np.concatenate([original(beta, mean, std, idx), [k]])


def glm_admm(X0, y, family, chunk, penalty="l1", lamduh=0.1, rho=1.0, over_relax=1.0,
             max_iter=250, abstol=1e-4, reltol=1e-2):
    """dask-glm's admm over row chunks of `chunk` rows, each local problem solved by
    two_loop_lbfgs from ones (pgtol 1e-5, 200 iterations, 250 evaluations)."""
    X, mean, std, idx = normalized(X0)
    n, p = X.shape
    starts = list(range(0, n, chunk))
    parts = [(X[a:a + chunk], y[a:a + chunk]) for a in starts]
    k = len(parts)
    z = np.zeros(p)
    u = np.zeros((k, p))
    it = 0
    for _ in range(max_iter):
        betas = []
        for (Xi, yi), ui in zip(parts, u):
            def evaluate(b, Xi=Xi, yi=yi, ui=ui):
                xb = Xi @ b
                d = b - z + ui
                return (family_loss(family, xb, yi) + rho / 2 * (d @ d),
                        family_gradient(family, xb, Xi, yi) + rho * d)
            betas.append(two_loop_lbfgs(evaluate, np.ones(p), 1e-5, 200, 250)[0])
        betas = np.array(betas)
        hat = over_relax * betas + (1 - over_relax) * z
        zold = z.copy()
        z = prox(penalty, np.mean(hat + u, axis=0), lamduh / (rho * k))
        u += hat - z
        it += 1
        primal = np.linalg.norm(betas - z)
        dual = np.linalg.norm(rho * (z - zold))
        eps_pri = np.sqrt(p * k) * abstol + reltol * max(np.linalg.norm(betas),
                                                         np.sqrt(k) * np.linalg.norm(z))
        eps_dual = np.sqrt(p * k) * abstol + reltol * np.linalg.norm(rho * u)
        if primal < eps_pri and dual < eps_dual:
            break
    return np.concatenate([original(z, mean, std, idx), [it]])


def sklearn_fit(X, y, family, penalty, C, l1_ratio=0.5):
    """scikit-learn's fit of the objective kiln::glm's estimators minimize, sum(loss) +
    penalty(coef) / C with the intercept unpenalized, solved tightly (logistic by Newton's
    method: lbfgs stops 0.2% short on breast_cancer's raw columns). Returns
    np.concatenate([coef, [intercept]])."""
    import sklearn.linear_model as lm
    n = X.shape[0]
    ratio = {"none": 0.0, "l2": 0.0, "l1": 1.0, "elastic_net": l1_ratio}[penalty]
    if family == "logistic":
        m = lm.LogisticRegression(C=np.inf if penalty == "none" else C, l1_ratio=ratio,
                                  solver="newton-cholesky" if ratio == 0 else "saga", tol=1e-12,
                                  max_iter=100000)
    elif family == "normal":
        if penalty == "none":
            m = lm.LinearRegression()
        elif penalty == "l2":
            m = lm.Ridge(alpha=1 / (2 * C), tol=1e-12)
        else:
            m = lm.ElasticNet(alpha=1 / (2 * n * C), l1_ratio=ratio, tol=1e-14, max_iter=100000)
    else:
        m = lm.PoissonRegressor(alpha=0.0 if penalty == "none" else 1 / (n * C),
                                solver="newton-cholesky", tol=1e-12, max_iter=1000)
    m.fit(X, y)
    return np.concatenate([np.ravel(m.coef_), np.ravel(m.intercept_)])


def estimator_objective(x, y, family, penalty, C, params, l1_ratio=0.5):
    """The objective kiln::glm's estimators minimize at params = [coef, intercept]."""
    coef, b0 = params[:-1], params[-1]
    ratio = {"none": 0.0, "l2": 0.0, "l1": 1.0, "elastic_net": l1_ratio}[penalty]
    pen = 0.0 if penalty == "none" else (
        ratio * np.abs(coef).sum() + (1 - ratio) * (coef ** 2).sum() / 2) / C
    return family_loss(family, x @ coef + b0, y) + pen


def estimator_optimality(x, y, family, penalty, C, params, l1_ratio=0.5):
    """The estimators' stopping rule (kiln::glm::Options::gtol) at params = [coef, intercept]:
    the largest component of the objective's gradient (its minimum-norm subgradient with an L1
    part) over the number of rows, with respect to the coefficients of the standardized columns
    (x_j - mean_j) / std_j and the intercept's."""
    n = x.shape[0]
    coef, b0 = params[:-1], params[-1]
    mean, std = x.mean(axis=0), x.std(axis=0)
    Xn = np.hstack([(x - mean) / std, np.ones((n, 1))])
    g = family_gradient(family, x @ coef + b0, Xn, y)
    ratio = {"none": 0.0, "l2": 0.0, "l1": 1.0, "elastic_net": l1_ratio}[penalty]
    lam = 0.0 if penalty == "none" else 1 / C
    # d/d(coef_j std_j) of the penalty: lam ((1 - ratio) coef_j + ratio sign(coef_j)) / std_j
    g[:-1] += lam * (1 - ratio) * coef / std
    t = np.concatenate([lam * ratio / std, [0.0]])
    b = np.concatenate([coef, [1.0]])
    r = np.where(b != 0, g + t * np.sign(b), np.maximum(0, np.abs(g) - t))
    return np.abs(r).max() / n
