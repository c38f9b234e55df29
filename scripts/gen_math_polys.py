#!/usr/bin/env python3
"""Prints the polynomials of Kiln's sin/cos and asin/acos (codegen/math/kiln_math.inc): near-minimax
(Chebyshev) fits computed by mpmath in 50-digit arithmetic, each coefficient rounded once to a
double, highest first, with the fit's error in units of the last place of the result.
- S(z) ~ (r - sin r) / r^3, z = r^2, |r| <= pi/2, degree 7 (kiln_m_sin_odd);
- S4(z) ~ (sin r - r) / r^3 and C4(z) ~ (cos r - 1) / r^2, |r| <= pi/4 (+ 2^-20), degree 6
  (kiln_m_sin_cos_poly: tan, and sin and cos beyond 2^20);
- A(t) ~ (asin s - s) / (s t), t = s^2, s <= 1/2, degree 13 (kiln_m_asin_parts).
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
fit("A", A, mp.mpf(1) / 4, 14, mp.mpf(1) / 8 / mp.asin(mp.mpf(1) / 2))  # of asin(1/2)
