#!/usr/bin/env python3
"""Prints the polynomials of Kiln's sin/cos and asin/acos (codegen/math/kiln_math.inc): near-minimax
(Chebyshev) fits computed by mpmath in 50-digit arithmetic, each coefficient rounded once to a
double, highest first, with the fit's error in units of the last place of the result.
- S(z) ~ (r - sin r) / r^3, z = r^2, |r| <= pi/2, degree 7 (kiln_m_sin_odd);
- S4(z) ~ (sin r - r) / r^3 and C4(z) ~ (cos r - 1) / r^2, |r| <= pi/4 (+ 2^-20), degree 6
  (kiln_m_sin_cos_poly: tan, and sin and cos beyond 2^20);
- A(t) ~ (asin s - s) / (s t), t = s^2, s <= 1/2, degree 12 (kiln_m_asin_parts);
- Q(r) ~ (e^r - 1 - r) / r^2, |r| <= ln 2 / 2 (+ 2^-20), degree 10 (kiln_m_expm1_small: exp,
  expm1, tanh, pow);
- L(z) ~ (atanh(s) / s - 1) / z, z = s^2, |s| <= (sqrt 2 - 1) / (sqrt 2 + 1) (+ 2^-20), degree 6
  (kiln_m_log_core: log, log1p);
- T(z) ~ (atan u - u) / u^3, z = u^2, |u| <= tan(pi/8) (+ 2^-20), degree 10 (kiln_m_atan);
- N(z) / D(z) ~ (tan r - r) / r^3, z = r^2, the [3/4] Pade approximant from the Taylor series,
  its error over |r| <= pi/4 (+ 2^-20) relative to tan r (kiln_m_tan_pade).
The last three by interpolation at Chebyshev nodes (mpmath's chebyfit fails on Q's interval,
which is symmetric about 0), the error measured over 2001 points with the rounded coefficients.
Run: python3 -m pip install mpmath; python3 scripts/gen_math_polys.py
"""
import mpmath as mp

mp.mp.dps = 50


def fit(name, f, hi, n, scale):
    poly, err = mp.chebyfit(f, [0, hi], n, error=True)
    print("// %s: |error| <= %s, %s ulp" % (name, mp.nstr(err, 3),
                                            mp.nstr(err * scale / mp.mpf(2) ** -53, 3)))
    for c in poly:
        print("%s," % float(c).hex())


def S(z):
    if z == 0:
        return mp.mpf(1) / 6
    r = mp.sqrt(z)
    return (r - mp.sin(r)) / r**3


def S4(z):
    if z == 0:
        return -mp.mpf(1) / 6
    r = mp.sqrt(z)
    return (mp.sin(r) - r) / r**3


def C4(z):
    if z == 0:
        return -mp.mpf(1) / 2
    r = mp.sqrt(z)
    return (mp.cos(r) - 1) / z


def A(t):
    if t == 0:
        return mp.mpf(1) / 6
    s = mp.sqrt(t)
    return (mp.asin(s) - s) / (t * s)


fit("S", S, (mp.pi / 2) ** 2, 8, (mp.pi / 2) ** 3)  # of sin near 1
quarter = (mp.pi / 4 * (1 + mp.mpf(2) ** -20)) ** 2
fit("S4", S4, quarter, 7, (mp.pi / 4) ** 3 / mp.sin(mp.pi / 4))  # of sin(pi/4)
fit("C4", C4, quarter, 7, (mp.pi / 4) ** 2 / mp.cos(mp.pi / 4))  # of cos(pi/4)
fit("A", A, mp.mpf(1) / 4, 13, mp.mpf(1) / 8 / mp.asin(mp.mpf(1) / 2))  # of asin(1/2)


def interpolate(name, f, lo, hi, degree, scale):
    n = degree + 1
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (2 * k + 1) / (2 * n)) for k in range(n)]
    a = mp.matrix(n, n)
    y = mp.matrix(n, 1)
    for i, x in enumerate(xs):
        for j in range(n):
            a[i, j] = x**j
        y[i] = f(x)
    c = mp.lu_solve(a, y)
    cs = [float(c[j]) for j in range(n)]
    err = 0
    for k in range(2001):
        x = lo + (hi - lo) * k / 2000
        p = mp.mpf(0)
        for cj in reversed(cs):
            p = p * x + mp.mpf(cj)
        err = max(err, abs(p - f(x)))
    print("// %s: |error| <= %s, %s ulp" % (name, mp.nstr(err, 3),
                                            mp.nstr(err * scale / mp.mpf(2) ** -53, 3)))
    for cj in reversed(cs):
        print("%s," % cj.hex())


def Q(r):
    if abs(r) < mp.mpf(10) ** -20:
        return mp.mpf(1) / 2 + r / 6
    return (mp.exp(r) - 1 - r) / r**2


def L(z):
    if z < mp.mpf(10) ** -30:
        return mp.mpf(1) / 3 + z / 5
    s = mp.sqrt(z)
    return (mp.atanh(s) / s - 1) / z


def T(z):
    if z < mp.mpf(10) ** -30:
        return -mp.mpf(1) / 3 + z / 5
    u = mp.sqrt(z)
    return (mp.atan(u) - u) / (u * z)


grow = 1 + mp.mpf(2) ** -20
h = mp.log(2) / 2 * grow
interpolate("Q", Q, -h, h, 10, h**2)  # of e^r near 1
smax = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1) * grow
interpolate("L", L, 0, smax**2, 6, smax**2)  # relative to log m ~ 2s
interpolate("T", T, 0, (mp.tan(mp.pi / 8) * grow) ** 2, 10, mp.tan(mp.pi / 8) ** 2)  # relative to u


zq = (mp.pi / 4 * grow) ** 2
taylor = mp.taylor(mp.tan, 0, 63)
num, den = mp.pade([taylor[2 * k + 3] for k in range(30)], 3, 4)
err = 0
for k in range(1, 401):
    z = zq * k / 400
    r = mp.sqrt(z)
    t = r + r * z * mp.polyval([mp.mpf(float(c)) for c in num[::-1]], z) / mp.polyval(
        [mp.mpf(float(c)) for c in den[::-1]], z)
    err = max(err, abs(t - mp.tan(r)) / mp.tan(r))
print("// N/D (tan): relative error <= %s, %s ulp" % (mp.nstr(err, 3),
                                                     mp.nstr(err / mp.mpf(2) ** -53, 3)))
print("N:", ", ".join(float(c).hex() for c in reversed(num)))
print("D:", ", ".join(float(c).hex() for c in reversed(den)))
