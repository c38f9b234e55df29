"""The Python package's device protocols on a GPU (issue 36), for scripts/gpu-session.sh's python
step: results kept in device memory (kiln.DeviceArray), the round trip back into kiln without a
copy, and with CuPy: the CUDA array interface both ways, DLPack out, and the stream handshake.

    python3 scripts/gpu-python-check.py cuda       # on the GPU machine (CuPy needed)
    python3 scripts/gpu-python-check.py cuda-emu   # here: the same checks that need no CuPy

One line per check; exit status 1 if any failed.
"""

import sys

import numpy as np

import kiln

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
failed = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{(': ' + detail) if detail else ''}", flush=True)
    if not ok:
        failed.append(what)


print("python", sys.version.split()[0], "numpy", np.__version__, "device", device)
x = kiln.random.default_rng(0).standard_normal((1000, 500), chunks=(250, 500))
y = np.sin(x) * 2 + 1
want = y.compute(device="cpu")
(r,) = kiln.compute(y, device=device, keep_on_device=True)
check("a DeviceArray on the device", isinstance(r, kiln.DeviceArray), repr(r))
check("its host copy", np.allclose(r.get(), want, rtol=1e-12, atol=1e-12))
k = kiln.asarray(r, chunks=(500, 500))
with kiln.config.set(device=device):
    check("back into kiln without a copy", np.allclose((k - 1).compute(), want - 1, rtol=1e-12))
if device == "cuda":
    import cupy

    cai = r.__cuda_array_interface__
    c = cupy.asarray(r)
    check("cupy.asarray(DeviceArray) shares the memory", c.data.ptr == cai["data"][0])
    check("cupy sees Kiln's values", bool(cupy.allclose(c, cupy.asarray(want))))
    d = cupy.from_dlpack(r)
    check("cupy.from_dlpack(DeviceArray)", d.data.ptr == cai["data"][0]
          and bool(cupy.allclose(d, cupy.asarray(want))))
    a = cupy.arange(12.0).reshape(3, 4)
    with kiln.config.set(device="cuda"):
        got = (kiln.asarray(a) * 2).compute()
    check("kiln.asarray(cupy array) in place", np.array_equal(got, cupy.asnumpy(a) * 2))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        b = cupy.ones((4000, 4000)) * 3  # written on a stream of its own
        kb = kiln.asarray(b)  # the interface names that stream: synchronized here
    total = float(kb.sum().compute(device="cuda"))
    check("the stream handshake", total == 3 * 4000 * 4000, f"{total}")
print("gpu-python-check:", "ok" if not failed else f"{len(failed)} failed: {failed}")
sys.exit(1 if failed else 0)
