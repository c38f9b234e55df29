#!/usr/bin/python3
"""Kiln's reductions along one axis beside NumPy's, per core, in one run.

    PYTHONPATH=build/release/python bench/peers/.venv/bin/python bench/peers/axis_peers.py
        [--repeat R] [--shapes narrow,narrower,wide,square]

(`bash scripts/peers.sh` makes the venv; the Kiln package is the build's.) Arrays of standard
normals made before the timed region, Kiln's resident in memory: `narrow` 1e6 x 100 (chunks of
1e5 rows: the GLM seed's X), `narrower` 4e6 x 25 (4e5 rows), `wide` 1e5 x 1000 (1e4 rows),
`square` 6000 x 6000 (2000 x 2000). Each reduction along axis 0 and along axis 1: Kiln's
`x.<fn>(axis=a).compute(threads=1)` against NumPy's `a.<fn>(axis=a)` (NumPy's reductions run on
one thread), the best of R after one warm-up each, results compared (sums to 1e-9 relative,
the rest exactly). Prints a markdown table: ns per element and NumPy's time over Kiln's (>= 1:
Kiln is at least as fast per core).
"""
import argparse
import time

import numpy as np

import kiln

SHAPES = {"narrow": ((1000000, 100), (100000, 100)), "narrower": ((4000000, 25), (400000, 25)),
          "wide": ((100000, 1000), (10000, 1000)), "square": ((6000, 6000), (2000, 2000))}
FNS = ("sum", "mean", "max", "min", "argmax")


def best(f, repeat):
    f()
    t = []
    for _ in range(repeat):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return min(t)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--shapes", default=",".join(SHAPES))
    args = p.parse_args()
    print(f"NumPy {np.__version__}")
    print("| array (chunks) | reduction | Kiln ns/element | NumPy ns/element | NumPy / Kiln |")
    print("| --- | --- | ---: | ---: | ---: |")
    rng = np.random.default_rng(0)
    for name in args.shapes.split(","):
        shape, chunks = SHAPES[name]
        a = rng.standard_normal(shape)
        k = kiln.asarray(a, chunks=chunks)
        for fn in FNS:
            for axis in (0, 1):
                got = getattr(k, fn)(axis=axis).compute(threads=1)
                want = getattr(a, fn)(axis=axis)
                if fn in ("sum", "mean"):
                    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), (name, fn, axis)
                else:
                    assert np.array_equal(got, want), (name, fn, axis)
                tk = best(lambda: getattr(k, fn)(axis=axis).compute(threads=1), args.repeat)
                tn = best(lambda: getattr(a, fn)(axis=axis), args.repeat)
                ns = 1e9 / a.size
                print(f"| {shape[0]} x {shape[1]} ({chunks[0]} x {chunks[1]}) | {fn}(axis={axis}) | "
                      f"{tk * ns:.3f} | {tn * ns:.3f} | {tn / tk:.2f} |", flush=True)
        del a, k


if __name__ == "__main__":
    main()
