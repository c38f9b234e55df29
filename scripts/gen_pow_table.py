#!/usr/bin/env python3
"""Prints the table of Kiln's pow (codegen/math/kiln_math.inc, kiln_m_pow_table): for each
i = 91 ... 181 (i = rint(128 m) for the reduced argument m in [sqrt 1/2, sqrt 2)), -log(invc) of
invc, the double nearest 128 / i (which pow computes by one division), exactly, as hi + lo doubles,
computed in 60-digit decimal arithmetic and rounded once each. i = 128 gives invc = 1 and log 0
exactly.
Run: python3 scripts/gen_pow_table.py (standard library only), paste over the table.
"""
from decimal import Decimal, getcontext

getcontext().prec = 60

print("KILN_M_TABLE double kiln_m_pow_table[91][2] = {")
for i in range(91, 182):
    invc = 128 / i  # correctly rounded
    logc = -Decimal(invc).ln()
    hi = float(logc)
    lo = float(logc - Decimal(hi))
    print(f"    {{{hi.hex()}, {lo.hex()}}},")
print("};")
