"""kiln.Array against NumPy: attributes, operators, element functions, promotion, reductions,
indexing, creation, conversions and errors. Run by ctest (Python.pytest) on whatever device the
suite runs on (KILN_DEVICE)."""

import gc
import operator
import os
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(7)


def data(dtype, shape=(37, 23)):
    dtype = np.dtype(dtype)
    if dtype == bool:
        return RNG.random(shape) < 0.5
    if dtype.kind == "i":
        return RNG.integers(-50, 50, shape).astype(dtype)
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def check(got, want, exact=False):
    """got: a kiln array (computed here) or NumPy result; same dtype, shape and values."""
    assert isinstance(got, kiln.Array), type(got)
    out = got.compute()
    want = np.asarray(want)
    assert out.dtype == want.dtype, (out.dtype, want.dtype)
    assert out.shape == want.shape, (out.shape, want.shape)
    if exact or want.dtype.kind in "bi":
        np.testing.assert_array_equal(out, want)
    else:
        # float32 sums are added in another order than NumPy's pairwise one
        rtol = 1e-5 if want.dtype == np.float32 else 1e-13
        finite = np.abs(want[np.isfinite(want)])
        scale = float(finite.max(initial=1.0))
        np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol * scale, equal_nan=True)


def test_attributes_follow_the_array_and_its_blocks():
    a = data(np.float32, (100, 30))
    k = kiln.asarray(a, chunks=(40, 30))
    assert k.shape == (100, 30) and k.ndim == 2 and k.size == 3000
    assert k.dtype == np.float32 and k.itemsize == 4 and k.nbytes == 12000
    assert k.chunks == ((40, 40, 20), (30,))
    assert k.chunksize == (40, 30) and k.numblocks == (3, 1)
    assert k.T.shape == (30, 100) and k.mT.shape == (30, 100)
    assert len(k) == 100
    assert "shape=(100, 30)" in repr(k) and "float32" in repr(k)
    page = k._repr_html_()
    assert "<table>" in page and "(100, 30)" in page and "11.72 KiB" in page
    assert page.count("<line") == 2  # the two row boundaries of the chunk grid (40, 40, 20)
    assert "1 fused kernel" in page  # planned (not computed) for the repr
    page = (np.sin(k) + 1).sum(axis=1)._repr_html_()
    assert "1 fused kernel" in page and "3 block tasks" in page
    check(k.rechunk((25, 10)), a, exact=True)
    assert k.rechunk((25, 10)).chunks == ((25,) * 4, (10,) * 3)


def test_a_numpy_array_is_read_in_place_and_held():
    a = np.arange(10000, dtype=np.float64).reshape(100, 100)
    k = kiln.asarray(a, chunks=(30, 30))
    expr = (k * 2).sum(axis=0)
    want = (a * 2).sum(axis=0)
    del a, k
    gc.collect()  # the expression holds the NumPy array
    check(expr, want)


def test_reductions_of_empty_arrays_cut_into_columns():
    # A reduction over an empty NumPy array whose columns are chunked: the plan, merging the
    # column chunks into whole rows, split the rows (none) into no blocks and crashed.
    for shape, chunks in [((0, 6), (1, 2)), ((5, 0), (2, 1)), ((0, 3, 8), (1, 2, 3))]:
        a = np.zeros(shape)
        k = kiln.asarray(a, chunks=chunks)
        for axis in [None, -1, 0]:
            check(k.sum(axis=axis), a.sum(axis=axis), exact=True)
            check((k + 1).prod(axis=axis), (a + 1).prod(axis=axis), exact=True)


def test_non_contiguous_and_read_only_arrays_are_accepted():
    a = data(np.float64, (50, 40))
    check(kiln.asarray(a[::2, ::-1]), a[::2, ::-1], exact=True)
    ro = a.copy()
    ro.flags.writeable = False
    check(kiln.asarray(ro) + 1, ro + 1)
    check(kiln.asarray(a.T, chunks=(10, 10)), a.T, exact=True)


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float32, np.float64])
def test_round_trip_of_every_dtype(dtype):
    a = data(dtype)
    k = kiln.asarray(a, chunks=(10, 10))
    assert k.dtype == a.dtype
    out = np.asarray(k)
    assert out.dtype == a.dtype and out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_array_equal(out, a)


UNARY_FLOAT = ["negative", "absolute", "sqrt", "exp", "expm1", "log", "log1p", "sin", "cos", "tan",
               "tanh", "arcsin", "arccos", "arctan", "floor", "ceil", "sign", "isnan", "isfinite",
               "rint", "square", "isinf", "positive"]  # fmt: skip


@pytest.mark.parametrize("name", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_unary_ufuncs_build_kiln_expressions(name, dtype):
    a = data(dtype)
    if name in ("arcsin", "arccos"):
        a = np.tanh(a)
    a.flat[::17] = np.nan
    k = kiln.asarray(a, chunks=(16, 16))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(a)
    check(getattr(np, name)(k), want)
    check(getattr(kiln, name)(k), want)


BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "less",
          "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
          "logical_or", "logical_xor", "floor_divide", "remainder", "fmod", "copysign"]  # fmt: skip


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_numpy_binary_ufuncs_build_kiln_expressions(name, dtype):
    a, b = data(dtype), data(dtype)
    if name == "power":
        b = np.abs(b) % 4 if dtype == np.int32 else b
        a = np.abs(a) + 1 if dtype == np.float64 else a
    if name in ("floor_divide", "remainder", "fmod") and dtype == np.int32:
        b[b == 0] = 3
    if name == "copysign" and dtype == np.int32:
        a, b = a.astype(np.float64), b.astype(np.float64)
    ka, kb = kiln.asarray(a, chunks=(16, 16)), kiln.asarray(b, chunks=(20, 7))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(a, b)
    check(getattr(np, name)(ka, kb), want)
    check(getattr(np, name)(a, kb), want)  # a NumPy operand is wrapped, not computed


def test_operators_and_reflected_operators():
    a, b = data(np.float64), data(np.float64)
    ka, kb = kiln.asarray(a), kiln.asarray(b)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.lt,
               operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        check(op(ka, kb), op(a, b))
        check(op(ka, 2.5), op(a, 2.5))
        check(op(2.5, ka), op(2.5, a))
        check(op(a, kb), op(a, b))  # ndarray <op> kiln.Array: NumPy defers to Kiln
    i, j = data(np.int64), data(np.int64) % 5 + 1
    ki, kj = kiln.asarray(i), kiln.asarray(j)
    for op in (operator.floordiv, operator.mod, operator.and_, operator.or_, operator.xor,
               operator.lshift, operator.rshift, operator.pow):
        check(op(ki, kj), op(i, j))
    check(-ka, -a)
    check(+ka, a)
    check(abs(ka), abs(a))
    check(~ki, ~i)
    assert isinstance(a + kb, kiln.Array)


def test_promotion_follows_nep50():
    i32 = kiln.asarray(np.arange(6, dtype=np.int32))
    f32 = kiln.asarray(np.arange(6, dtype=np.float32))
    assert (i32 + 1).dtype == np.int32  # weak Python int
    assert (f32 * 0.5).dtype == np.float32  # weak Python float
    assert (i32 + 0.5).dtype == np.float64
    assert (i32 + np.float32(1)).dtype == np.float64  # a NumPy scalar is strong
    assert (f32 + np.float64(1)).dtype == np.float64
    assert (i32 + f32).dtype == np.float64
    assert (i32 / 2).dtype == np.float64
    assert (i32 > 2).dtype == np.bool_
    check(i32 + np.int64(2), np.arange(6, dtype=np.int32) + np.int64(2))


@pytest.mark.parametrize("fn", ["sum", "prod", "mean", "min", "max", "all", "any", "var", "std",
                                "argmin", "argmax"])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_reductions_match_numpy_on_every_axis(fn, dtype):
    a = data(dtype, (30, 20, 9))
    if fn == "prod":
        a = (np.abs(a) % 3 + 1).astype(dtype) if dtype == np.int32 else 1 + a / 100
    k = kiln.asarray(a, chunks=(7, 8, 4))
    axes = [None, 0, 1, 2, -1] if fn in ("argmin", "argmax") else [None, 0, 1, (0, 2), (0, 1, 2), -1]
    for axis in axes:
        for keepdims in (False, True):
            want = getattr(np, fn)(a, axis=axis, keepdims=keepdims)
            check(getattr(k, fn)(axis=axis, keepdims=keepdims), want)
            check(getattr(np, fn)(k, axis=axis, keepdims=keepdims), want)


def test_nan_propagates_through_min_max_and_arg_reductions():
    a = data(np.float64, (40, 30))
    a[3, 4] = np.nan
    a[20, 7] = np.nan
    k = kiln.asarray(a, chunks=(16, 16))
    for fn in ("min", "max", "argmin", "argmax", "sum"):
        for axis in (None, 0, 1):
            check(getattr(np, fn)(k, axis=axis), getattr(np, fn)(a, axis=axis))


@pytest.mark.parametrize("fn", ["nansum", "nanprod", "nanmean", "nanmin", "nanmax", "nanvar",
                                "nanstd", "nanargmin", "nanargmax"])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_nan_functions_match_numpy(fn, dtype):
    a = data(dtype, (30, 20, 9))
    if dtype != np.int32:
        a[RNG.random(a.shape) < 0.3] = np.nan
        a[4] = np.nan  # all-NaN slices along the other two axes
        a[:, 3, 2] = np.nan  # ... and along the first
        a[5, 6, 7], a[6, 6, 7] = np.inf, -np.inf
    if fn == "nanprod":
        a = (np.abs(a) % 3 + 1).astype(dtype) if dtype == np.int32 else 1 + a / 100
    k = kiln.asarray(a, chunks=(7, 8, 4))
    arg = fn in ("nanargmin", "nanargmax")
    axes = [None, 0, 1, 2, -1] if arg else [None, 0, 1, (0, 2), (0, 1, 2), -1, ()]
    for axis in axes:
        for keepdims in (False, True):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-NaN slice warnings
                if arg:  # NumPy raises ValueError on an all-NaN slice; Kiln gives -1 there
                    filled = np.where(np.isnan(a), np.inf if fn == "nanargmin" else -np.inf, a)
                    want = getattr(np, fn[3:])(filled, axis=axis, keepdims=keepdims)
                    want = np.where(np.isnan(a).all(axis=axis, keepdims=keepdims), -1, want)
                    if not np.isnan(a).all(axis=axis).any():
                        assert (want == getattr(np, fn)(a, axis=axis, keepdims=keepdims)).all()
                else:
                    want = getattr(np, fn)(a, axis=axis, keepdims=keepdims)
            check(getattr(np, fn)(k, axis=axis, keepdims=keepdims), want)
            check(getattr(kiln, fn)(k, axis=axis, keepdims=keepdims), want)


def test_nan_arg_functions_take_one_axis_as_numpys():
    k = kiln.asarray(data(np.float64, (6, 5)))
    for fn in (kiln.nanargmin, kiln.nanargmax, np.nanargmax):
        with pytest.raises(TypeError):
            fn(k, axis=(0, 1))


def test_var_and_std_over_no_axis_are_zeros_as_numpys():
    a = data(np.float64, (6, 5))
    k = kiln.asarray(a, chunks=(4, 2))
    for fn in ("var", "std", "nanvar", "nanstd"):
        for keepdims in (False, True):
            check(getattr(np, fn)(k, axis=(), keepdims=keepdims),
                  getattr(np, fn)(a, axis=(), keepdims=keepdims))


def test_reduction_options_dtype_ddof_and_ufunc_reduce():
    a = data(np.int32, (50, 8))
    k = kiln.asarray(a, chunks=(16, 8))
    check(k.sum(dtype=np.float32), a.sum(dtype=np.float32))
    check(np.var(k.astype(float), axis=0, ddof=1), np.var(a.astype(float), axis=0, ddof=1))
    check(np.std(k.astype(float), ddof=2), np.std(a.astype(float), ddof=2))
    check(np.add.reduce(k), np.add.reduce(a))
    check(np.maximum.reduce(k, axis=1), np.maximum.reduce(a, axis=1))
    check(np.logical_or.reduce(k > 40, axis=None), np.logical_or.reduce(a > 40, axis=None))
    assert k.sum(axis=()).shape == (50, 8)


def test_basic_indexing_matches_numpy():
    a = data(np.float64, (20, 15, 6))
    k = kiln.asarray(a, chunks=(7, 4, 6))
    keys = [
        5, -1, (3, 4), (slice(2, 17, 3),), (slice(None, None, -1), slice(1, -1)),
        (Ellipsis, 2), (None, 4, Ellipsis, None), (slice(3, 3),), (slice(-100, 100, 7), 0, None),
        (Ellipsis,), (1, 2, 3), (np.int64(3), slice(None, 5)),
    ]  # fmt: skip
    for key in keys:
        check(k[key], a[key], exact=True)
    assert [float(v) for v in k[0, 0]] == list(a[0, 0])


def test_indexing_errors_are_numpys():
    k = kiln.asarray(np.zeros((4, 5)))
    with pytest.raises(IndexError, match="out of bounds"):
        k[4]
    with pytest.raises(IndexError, match="too many indices"):
        k[1, 2, 3]
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 5"):
        k[:, [0, 5]]
    with pytest.raises(IndexError, match="boolean index did not match"):
        k[np.ones(3, bool)]
    with pytest.raises(IndexError, match="one integer array or boolean mask"):
        k[[0, 1], [1, 2]]
    with pytest.raises(IndexError, match="integer"):
        k[np.array([0.5])]
    with pytest.raises(ValueError, match="step cannot be zero"):
        k[::0]
    with pytest.raises(IndexError, match="full slices"):
        k[1:3, [0, 1]] = 1


def test_integer_array_and_mask_indexing_match_numpy():
    """Gathers: slices of the lazy graph per run of consecutive indices, concatenated."""
    r = np.random.default_rng(3)
    a = data(np.float64, (30, 7, 4))
    k = kiln.asarray(a, chunks=(8, 3, 4))
    keys = [
        [3, 1, 1, 29, -1], np.arange(0, 30, 4), np.array([], dtype=np.int64), r.permutation(30),
        np.sort(r.choice(30, 12, replace=False)), a[:, 0, 0] > 0, np.array(5), np.arange(29, -1, -3),
        (slice(None), [6, 0]), (Ellipsis, [3, 0]), (2, [5, 1], None), (None, slice(None), [1]),
        (slice(2, 20, 3), a[0, :, 0] > 0), a > 0, a[:, :, 0] > 0,
    ]  # fmt: skip
    for key in keys:
        check(k[key], a[key], exact=True)
    check(k[kiln.asarray(a[:, 0, 0]) > 0], a[a[:, 0, 0] > 0], exact=True)  # a kiln mask: computed
    check(np.take(k, [5, 0, 5], axis=1), np.take(a, [5, 0, 5], axis=1), exact=True)
    check(np.take(k, [7, 100]), np.take(a, [7, 100]), exact=True)  # flat
    check(np.compress([True, False, True], k, axis=2), np.compress([True, False, True], a, axis=2),
          exact=True)
    many = r.choice(30 * 7 * 4, 600)  # a run per index
    check(k.reshape(-1)[many], a.reshape(-1)[many], exact=True)


def test_assignment_through_integer_arrays_and_masks_matches_numpy():
    r = np.random.default_rng(4)
    a = data(np.float64, (12, 5))
    cases = [
        ([3, 0, 3], r.standard_normal((3, 5))),  # a repeated index: the last value wins
        (a[:, 0] > 0, 7.5), (a[:, 0] > 0, np.arange(5.0)), ((slice(None), [4, 1]), -1.0),
        ((Ellipsis, [0, 2]), r.standard_normal((12, 2))), (a > 0.5, -2.0),
        (a > 0.5, np.arange(np.count_nonzero(a > 0.5), dtype=np.float64)),
    ]  # fmt: skip
    for key, value in cases:
        want = a.copy()
        want[key] = value
        k = kiln.asarray(a, chunks=(5, 2))
        before = k + 0
        k[key] = kiln.asarray(value) if isinstance(value, np.ndarray) and value.ndim else value
        check(k, want, exact=True)
        check(before, a, exact=True)
    d = kiln.zeros((5, 1))
    d[np.array([True, False, True, True, False])] = kiln.asarray(np.array([[1.0], [2.0], [3.0]]))
    check(d, np.array([[1.0], [0.0], [2.0], [3.0], [0.0]]), exact=True)


def test_unique_and_searchsorted_match_numpy():
    a = np.array([[3, 1, 2], [1, 3, 3]])
    k = kiln.asarray(a)
    check(kiln.unique_values(k), np.array([1, 2, 3]), exact=True)
    values, counts = kiln.unique_counts(k)
    check(counts, np.array([2, 1, 3]), exact=True)
    values, index, inverse, counts = kiln.unique_all(k)
    check(inverse, np.array([[2, 0, 1], [0, 2, 2]]), exact=True)
    check(index, np.array([1, 2, 0]), exact=True)
    s = np.array([1.0, 2, 2, 3, np.nan])
    v = np.array([[0, 2, 2.5], [3, 9, np.nan]])
    for side in ("left", "right"):
        check(np.searchsorted(kiln.asarray(s), kiln.asarray(v), side=side),
              np.searchsorted(s, v, side=side), exact=True)


def test_assignment_follows_numpy_without_views():
    a = np.arange(24.0).reshape(4, 6)
    cases = [((slice(1, 3), slice(None, None, 2)), -1), (2, 7.5), (a > 10, 0.0),
             ((slice(None, None, -1), slice(1, 4)), np.arange(3.0)), ((Ellipsis, 0), np.arange(4.0)),
             ((1, slice(4, 1, -1)), np.array([9.0, 8, 7])), ((slice(0, 2),), np.float32(2.5))]
    for key, value in cases:
        want = a.copy()
        want[key] = value
        k = kiln.asarray(a, chunks=(3, 4))
        before = k * 1  # built before the assignment: keeps the old values (no views)
        k[key] = value
        check(k, want, exact=True)
        check(before, a, exact=True)
    i = kiln.asarray(np.arange(5))
    i[1:3] = 2.7  # cast to the array's dtype, as NumPy does
    check(i, np.array([0, 2, 2, 3, 4]), exact=True)

def test_structure_functions():
    a, b = data(np.float64, (6, 4)), data(np.float64, (6, 4))
    ka, kb = kiln.asarray(a, chunks=(4, 4)), kiln.asarray(b, chunks=(3, 2))
    check(np.concatenate([ka, kb], axis=1), np.concatenate([a, b], axis=1), exact=True)
    check(np.concatenate([ka, b]), np.concatenate([a, b]), exact=True)
    check(np.stack([ka, kb], axis=1), np.stack([a, b], axis=1), exact=True)
    check(np.vstack([ka, kb]), np.vstack([a, b]), exact=True)
    check(np.hstack([ka, kb]), np.hstack([a, b]), exact=True)
    check(np.transpose(ka), a.T, exact=True)
    check(np.reshape(ka, (3, 8)), a.reshape(3, 8), exact=True)
    check(ka.reshape(-1, 2), a.reshape(-1, 2), exact=True)
    check(np.ravel(ka), a.ravel(), exact=True)
    check(np.expand_dims(ka, (0, 2)), np.expand_dims(a, (0, 2)), exact=True)
    check(np.squeeze(np.expand_dims(ka, 1)), a, exact=True)
    check(np.swapaxes(ka, 0, 1), a.swapaxes(0, 1), exact=True)
    check(np.moveaxis(ka[None], 0, -1), np.moveaxis(a[None], 0, -1), exact=True)
    check(np.broadcast_to(ka[0], (5, 4)), np.broadcast_to(a[0], (5, 4)), exact=True)
    check(np.where(ka > 0, ka, 0.0), np.where(a > 0, a, 0.0), exact=True)
    check(np.where(a > 0, 1, kb), np.where(a > 0, 1, b), exact=True)
    check(np.clip(ka, -1, 1), np.clip(a, -1, 1), exact=True)
    check(ka.clip(min=0), a.clip(min=0), exact=True)
    check(np.round(ka), np.round(a), exact=True)
    check(np.zeros_like(ka), np.zeros_like(a), exact=True)
    check(np.full_like(ka, 7, dtype=np.int32), np.full_like(a, 7, dtype=np.int32), exact=True)
    check(ka.astype(np.int32), a.astype(np.int32), exact=True)
    assert np.shape(ka) == (6, 4) and np.ndim(ka) == 2 and np.size(ka) == 24
    assert np.allclose(ka, a) and not np.allclose(ka, a + 1)
    check(np.isclose(ka, kb), np.isclose(a, b), exact=True)


def test_creation_functions():
    check(kiln.zeros((3, 4), chunks=(2, 2)), np.zeros((3, 4)), exact=True)
    check(kiln.ones(5, dtype=np.int32), np.ones(5, dtype=np.int32), exact=True)
    check(kiln.full((2, 3), 2.5, dtype=np.float32), np.full((2, 3), 2.5, dtype=np.float32), exact=True)
    check(kiln.full((2,), True), np.full((2,), True), exact=True)
    check(kiln.arange(10, chunks=3), np.arange(10), exact=True)
    check(kiln.arange(1.0, 2.0, 0.25), np.arange(1.0, 2.0, 0.25), exact=True)
    check(kiln.arange(0, 20, 3, dtype=np.int32), np.arange(0, 20, 3, dtype=np.int32), exact=True)
    check(kiln.linspace(0, 1, 11, chunks=4), np.linspace(0, 1, 11))
    check(kiln.linspace(0, 1, 10, endpoint=False), np.linspace(0, 1, 10, endpoint=False))
    check(kiln.asarray([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]), exact=True)
    check(kiln.asarray(3.5), np.asarray(3.5), exact=True)


def test_linear_algebra_through_numpys_functions():
    a = data(np.float64, (300, 20))
    b = data(np.float64, (20, 7))
    k = kiln.asarray(a, chunks=(100, 20))
    check(np.matmul(k, b), a @ b)
    check(k @ kiln.asarray(b), a @ b)
    check(a @ kiln.asarray(b), a @ b)
    check(np.dot(k, b), np.dot(a, b))
    check(np.einsum("ij,jk->ik", k, b), a @ b)
    check(np.tensordot(k, b, axes=1), a @ b)
    check(np.outer(k[0], b[0]), np.outer(a[0], b[0]))
    check(np.inner(k[:3], a[:4]), np.inner(a[:3], a[:4]))
    check(np.vdot(k[0], a[1]), np.vdot(a[0], a[1]))

    u, s, vh = np.linalg.svd(k)  # the thin SVD, as Dask's
    assert isinstance(u, kiln.Array) and u.shape == (300, 20) and vh.shape == (20, 20)
    u, s, vh = kiln.compute(u, s, vh)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose((u * s) @ vh, a, atol=1e-11)
    np.testing.assert_allclose(u.T @ u, np.eye(20), atol=1e-12)
    with pytest.raises(ValueError, match="full_matrices"):
        np.linalg.svd(k, full_matrices=True)

    q, r = np.linalg.qr(k)
    q, r = kiln.compute(q, r)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    np.testing.assert_allclose(np.triu(r), r)

    m = a.T @ a
    km = kiln.asarray(m)
    check(np.linalg.solve(km, b), np.linalg.solve(m, b))
    check(np.linalg.inv(km), np.linalg.inv(m))
    check(np.linalg.cholesky(km), np.linalg.cholesky(m))
    check(np.linalg.det(km / 100), np.linalg.det(m / 100))
    w, v = np.linalg.eigh(km)
    np.testing.assert_allclose(w.compute(), np.linalg.eigh(m)[0], rtol=1e-12)
    for ord_ in (None, "fro", 1, 2, np.inf, "nuc"):
        check(np.linalg.norm(km, ord_), np.linalg.norm(m, ord_))
    check(np.linalg.norm(k, axis=1), np.linalg.norm(a, axis=1))
    x, res, rank, sv = np.linalg.lstsq(k, a[:, 0] + 1)
    want = np.linalg.lstsq(a, a[:, 0] + 1)
    np.testing.assert_allclose(x.compute(), want[0], atol=1e-12)
    assert int(rank) == want[2]


def test_compute_shares_work_and_passes_other_values_through():
    a = data(np.float64, (200, 10))
    k = kiln.asarray(a, chunks=(50, 10))
    s, m, other = kiln.compute(k.sum(), k.max(axis=0), "x")
    assert other == "x"
    np.testing.assert_allclose(s, a.sum(), rtol=1e-13)
    np.testing.assert_array_equal(m, a.max(axis=0))
    p = (k * 2).persist()
    check(p + 1, a * 2 + 1)
    assert float(k.sum()) == pytest.approx(a.sum(), rel=1e-13)
    assert int(kiln.asarray(np.int32(5)) + 1) == 6
    assert bool(k.max() > k.min())
    assert k[3, 4].item() == a[3, 4]
    assert kiln.asarray(np.arange(4))[2].__index__() == 2


def test_conversions_follow_numpy_2():
    k = kiln.asarray(np.arange(6.0))
    assert np.asarray(k, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(np.array(k), np.arange(6.0))
    with pytest.raises(ValueError, match="copy=False"):
        np.array(k, copy=False)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(k)
    np.testing.assert_array_equal(np.from_dlpack(k), np.arange(6.0))
    assert k.__dlpack_device__() == (1, 0)
    check(kiln.asarray(np.arange(5.0)[::-1].copy()), np.arange(5.0)[::-1])
    assert k.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert k.__array_namespace__() is kiln


def test_unsupported_numpy_functions_name_the_way_out():
    k = kiln.asarray(np.arange(6.0))
    with pytest.raises(TypeError, match=r"numpy\.cumsum.*fallback='numpy'"):
        np.cumsum(k)
    with pytest.raises(TypeError, match=r"numpy\.arcsinh"):
        np.arcsinh(k)
    with pytest.raises(TypeError, match=r"numpy\.add\.accumulate"):
        np.add.accumulate(k)
    with pytest.raises(TypeError, match="out="):
        np.add(k, 1, out=np.empty(6))
    with pytest.raises(TypeError, match="out="):
        k.sum(out=np.empty(()))
    with kiln.config.set(fallback="numpy"):
        with pytest.warns(RuntimeWarning, match="numpy.cumsum"):
            np.testing.assert_array_equal(np.cumsum(k), np.cumsum(np.arange(6.0)))
    with pytest.raises(TypeError):
        np.cumsum(k)  # the setting ended with the block
    with pytest.raises(ValueError, match="fallback must be one of"):
        kiln.config.set(fallback="maybe")


def test_bad_input_is_a_kiln_error_naming_the_operation():
    a = kiln.asarray(np.zeros((3, 4)))
    b = kiln.asarray(np.zeros((5,)))
    assert issubclass(kiln.KilnError, ValueError)
    with pytest.raises(kiln.KilnError, match=r"\(3, 4\).*\(5,\)|\(5,\).*\(3, 4\)"):
        a + b
    with pytest.raises(kiln.KilnError, match="axis"):
        a.sum(axis=2)
    with pytest.raises(kiln.KilnError):
        a.reshape(5, 5)
    with pytest.raises(TypeError, match="unsupported dtype uint8"):
        kiln.asarray(np.zeros(3, dtype=np.uint8))
    with pytest.raises(TypeError, match="unsupported dtype"):
        kiln.asarray(np.zeros(3, dtype=np.complex128))
    with pytest.raises(kiln.KilnError, match="singular"):
        np.linalg.inv(kiln.asarray(np.zeros((3, 3)))).compute()
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError, match="64 bits"):
        a + 2**70


def test_kiln_errors_carry_the_type_numpy_would_raise():
    a = kiln.asarray(np.arange(4.0))
    with pytest.raises(kiln.KilnTypeError, match="bitwise_and.*float64") as e:
        a & 1
    assert isinstance(e.value, TypeError) and isinstance(e.value, kiln.KilnError)
    with pytest.raises(TypeError):
        np.arange(4.0) & 1  # NumPy's type too
    with pytest.raises(kiln.KilnTypeError, match="negative"):
        -kiln.asarray(np.zeros(3, bool))
    with pytest.raises(kiln.KilnTypeError, match="subtract"):
        kiln.asarray(np.zeros(3, bool)) - kiln.asarray(np.ones(3, bool))
    with pytest.raises(kiln.KilnError) as e:  # a bad shape stays a plain ValueError
        a.reshape(3, 3)
    assert type(e.value) is kiln.KilnError and not isinstance(e.value, TypeError)
    assert issubclass(kiln.KilnMemoryError, MemoryError) and issubclass(kiln.KilnMemoryError, kiln.KilnError)
    # A failed allocation (forced by the test flag: blocks over 1000 bytes fail).
    code = (
        "import kiln\n"
        "try:\n"
        "    (kiln.ones(100000, chunks=50000) + 1).compute()\n"
        "except kiln.KilnMemoryError as e:\n"
        "    print(isinstance(e, MemoryError), 'out of memory' in str(e))\n"
    )
    env = dict(os.environ, KILN_FAIL_ALLOC_ABOVE="1000")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr


def test_random_generator_is_chunk_independent():
    rng = kiln.random.default_rng(42)
    x = rng.normal(1.0, 2.0, size=(400, 50), chunks=(100, 50))
    y = kiln.random.default_rng(42).normal(1.0, 2.0, size=(400, 50), chunks=(37, 11))
    xv, yv = kiln.compute(x, y)
    np.testing.assert_array_equal(xv, yv)
    assert abs(xv.mean() - 1.0) < 0.1 and abs(xv.std() - 2.0) < 0.1
    u = rng.random((1000,), chunks=100).compute()
    assert u.min() >= 0 and u.max() < 1 and u.dtype == np.float64
    i = rng.integers(3, 9, size=1000, dtype=np.int32).compute()
    assert i.dtype == np.int32 and i.min() == 3 and i.max() == 8
    assert rng.uniform(size=None).shape == ()
    assert not np.array_equal(rng.random(10).compute(), rng.random(10).compute())


def test_npy_files_round_trip(tmp_path):
    a = data(np.float32, (64, 9))
    path = tmp_path / "a.npy"
    kiln.to_npy(path, kiln.asarray(a, chunks=(10, 9)) * 2)
    np.testing.assert_array_equal(np.load(path), a * 2)
    k = kiln.from_npy(path, chunks=(16, 9))
    assert k.chunks[0] == (16, 16, 16, 16)
    check(k.sum(axis=0), (a * 2).sum(axis=0))


def test_glm_fit_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 5))
    y = (X @ np.array([1.0, -2.0, 0.5, 0.0, 1.5]) + rng.standard_normal(2000) > 0).astype(float)
    fit = kiln.glm.fit(kiln.asarray(X, chunks=(500, 5)), kiln.asarray(y, chunks=500), solver="newton")
    ref = sklearn.LogisticRegression(penalty=None, fit_intercept=False, tol=1e-10, max_iter=1000)
    ref.fit(X, y)
    np.testing.assert_allclose(fit.coef, ref.coef_[0], rtol=1e-4, atol=1e-6)
    assert fit.converged and fit.n_iter > 0


def test_computes_release_the_gil_and_run_from_threads():
    a = data(np.float64, (400, 100))
    k = kiln.asarray(a, chunks=(50, 100))
    results, errors = [], []

    def work(scale):
        try:
            results.append(float((k * scale).sum()))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(results) == pytest.approx(sorted(a.sum() * s for s in range(1, 5)), rel=1e-12)


def test_explain_and_visualize_plan_without_computing(tmp_path):
    k = kiln.asarray(np.arange(100.0), chunks=25)
    y = np.sin(k) ** 2 + np.cos(k) ** 2
    computes = kiln.stats()["computes"]
    text = kiln.explain(y, kernels=True)
    assert "fus" in text.lower() and "sin" in text and len(text) > 100
    dot = y.visualize(filename=tmp_path / "g.dot")
    assert dot.startswith("digraph") and (tmp_path / "g.dot").read_text() == dot
    assert kiln.stats()["computes"] == computes  # planned, not computed
    np.testing.assert_allclose(y.compute(), np.ones(100), rtol=1e-15)
    assert kiln.stats()["last_cached"]  # the plan explain() made


def test_estimators_work_in_scikit_learns_pipeline_and_grid_search():
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression, PoissonRegressor, Ridge
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(5)
    X = rng.standard_normal((600, 4))
    y = (X @ np.array([1.5, -1.0, 0.0, 0.5]) + 0.3 + rng.standard_normal(600) > 0).astype(float)

    est = kiln.glm.LogisticRegression(solver="newton", C=2.0, tol=1e-8)
    assert est.get_params()["C"] == 2.0 and "C=2.0" in repr(est)
    assert clone(est).get_params() == est.get_params()
    est.fit(kiln.asarray(X, chunks=(200, 4)), y)
    ref = LogisticRegression(C=2.0, tol=1e-10, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_[0], rtol=1e-5, atol=1e-7)
    assert est.intercept_ == pytest.approx(ref.intercept_[0], rel=1e-5, abs=1e-7)
    proba = est.predict_proba(X)
    assert isinstance(proba, kiln.Array)
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(X), rtol=1e-5, atol=1e-7)
    assert est.score(X, y) == pytest.approx(ref.score(X, y))

    pipe = make_pipeline(StandardScaler(), kiln.glm.LogisticRegression(solver="lbfgs"))
    search = GridSearchCV(pipe, {"logisticregression__C": [0.01, 1.0]}, cv=3).fit(X, y)
    assert search.best_params_["logisticregression__C"] in (0.01, 1.0)
    assert 0.5 < search.best_score_ <= 1.0

    Xr = rng.standard_normal((500, 3))
    yr = Xr @ np.array([2.0, 0.0, -1.0]) + 1.0 + 0.1 * rng.standard_normal(500)
    lin = kiln.glm.LinearRegression(solver="newton", C=1.0, tol=1e-10).fit(Xr, yr)
    ridge = Ridge(alpha=0.5).fit(Xr, yr)
    np.testing.assert_allclose(lin.coef_, ridge.coef_, rtol=1e-6)
    assert lin.score(Xr, yr) == pytest.approx(ridge.score(Xr, yr), rel=1e-9)

    counts = rng.poisson(np.exp(Xr @ np.array([0.3, -0.2, 0.1]) + 0.5)).astype(float)
    pois = kiln.glm.PoissonRegression(solver="newton", C=1.0, tol=1e-10).fit(Xr, counts)
    sk = PoissonRegressor(alpha=1.0 / 500, tol=1e-12, max_iter=1000).fit(Xr, counts)
    np.testing.assert_allclose(pois.coef_, sk.coef_, rtol=1e-5, atol=1e-7)
    assert pois.score(Xr, counts) == pytest.approx(sk.score(Xr, counts), rel=1e-6)
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(alpha=1)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :3])


def test_ctrl_c_cancels_a_running_compute():
    import os
    import subprocess
    import sys

    script = r"""
import os, signal, threading, time
import kiln
x = kiln.random.default_rng(0).normal(size=(80000, 50000), chunks=(2000, 2000))
print("warm", float(kiln.asarray([1.0, 2.0]).sum()))
before = len(os.listdir("/proc/self/task"))
for i in range(2):
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        x.sum().compute()
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted %.2f" % (time.monotonic() - start))
    timer.join()
print("after", float((kiln.asarray([1.0, 2.0]) * 2).sum()))
print("threads", before, len(os.listdir("/proc/self/task")))
"""
    # On the CPU, whose tasks are blocks (cuda-emu runs a device's share of a kernel as one task,
    # which finishes before the cancel is seen: minutes for this array).
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, KILN_DEVICE="cpu"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "warm 3.0"
    for line in lines[1:3]:
        assert line.startswith("interrupted"), r.stdout
        assert float(line.split()[1]) < 20  # the tasks running when Ctrl-C came finish first
    assert lines[3] == "after 6.0"
    _, before, after = lines[4].split()
    assert before == after  # the thread that ran the compute is gone


def test_more_numpy_functions_dispatch_to_kiln():
    a = data(np.float64, (9, 7))
    k = kiln.asarray(a, chunks=(4, 3))
    check(np.flip(k, axis=0), np.flip(a, axis=0), exact=True)
    check(np.roll(k, 3, axis=1), np.roll(a, 3, axis=1), exact=True)
    check(np.roll(k, -5), np.roll(a, -5), exact=True)
    check(np.tril(k, -1), np.tril(a, -1), exact=True)
    check(np.triu(k, 2), np.triu(a, 2), exact=True)
    check(np.diff(k, axis=0), np.diff(a, axis=0), exact=True)
    check(np.count_nonzero(k > 0, axis=1), np.count_nonzero(a > 0, axis=1), exact=True)
    check(np.tile(k, (2, 1)), np.tile(a, (2, 1)), exact=True)
    check(np.repeat(k, 3, axis=1), np.repeat(a, 3, axis=1), exact=True)
    check(np.trunc(k), np.trunc(a), exact=True)
    check(np.signbit(k), np.signbit(a), exact=True)
    check(np.vecdot(k, k), np.vecdot(a, a))
    check(np.matrix_transpose(k), np.matrix_transpose(a), exact=True)
    xs, ys = np.meshgrid(kiln.arange(3), kiln.arange(4))
    check(xs, np.meshgrid(np.arange(3), np.arange(4))[0], exact=True)


def test_bad_input_from_python_is_an_exception_not_a_crash():
    with pytest.raises(TypeError, match="unsupported dtype"):
        kiln.asarray([1, "a"])
    with pytest.raises(TypeError):
        kiln.asarray(np.array([object(), 1], dtype=object))
    with pytest.raises(TypeError):
        kiln.asarray(object())
    with pytest.raises((ValueError, TypeError)):
        kiln.asarray(np.zeros((4, 4)), chunks=(-1, -2))
    with pytest.raises(ValueError):
        kiln.asarray(np.zeros((4, 4)), chunks=(2, 2, 2))
    with pytest.raises(ValueError, match="regular"):
        kiln.asarray(np.zeros(10), chunks=((3, 7),))
    with pytest.raises(TypeError):
        kiln.zeros("abc")
    with pytest.raises(TypeError):
        kiln.asarray(np.zeros(3)).reshape("x")
    with pytest.raises(ValueError):
        kiln.random.default_rng(-1)
    # A NumPy array changed while a kiln expression reads it: NumPy's data, whichever values a
    # block saw (Kiln reads lazily), never a crash.
    a = np.ones((2000, 200))
    k = kiln.asarray(a, chunks=(100, 200))
    expr = (k * 2).sum()
    a[:] = 3.0
    assert float(expr) in (2 * a.size, 6 * a.size) or 2 * a.size <= float(expr) <= 6 * a.size


def test_progress_bar_where_stderr_is_not_a_terminal(monkeypatch, capsys):
    """kiln.compute(progress=True) in notebooks and pipes: a Python thread reads the compute's
    task counters (Kiln's own bar needs a terminal). Drawn at once here, not after a second."""
    import types

    from kiln import _progress

    monkeypatch.setattr(_progress, "FIRST_DRAW_S", 0.0)
    monkeypatch.setattr(_progress, "EVERY_S", 0.005)
    x = kiln.random.default_rng(0).standard_normal((4000, 4000), chunks=(250, 250))
    want = float((x * x).sum())
    (v,) = kiln.compute((x * x).sum(), progress=True, threads=1)
    assert float(v) == want
    lines = capsys.readouterr().err.strip().splitlines()
    final = re.fullmatch(r"\[#{30}\] (\d+)/(\d+) tasks .* took \d+\.\d s", lines[-1])
    assert final and final.group(1) == final.group(2) and int(final.group(2)) >= 256, lines[-1]
    # In a notebook kernel: an HTML <progress> bar, displayed once and then updated.
    shown = []

    class Handle:
        def update(self, page):
            shown.append(("update", page))

    def display(page, display_id=False):
        shown.append(("display", page))
        return Handle()

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    ipython_display = types.ModuleType("IPython.display")
    ipython_display.display, ipython_display.HTML = display, str
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython_display)
    kiln.compute((x + 1).sum(), progress=True, threads=1)
    assert shown[0][0] == "display" and all(kind == "update" for kind, _ in shown[1:])
    assert "<progress" in shown[-1][1] and "took" in shown[-1][1]
    assert capsys.readouterr().err == ""


def test_gpu_results_stay_in_device_memory_and_come_back_without_a_copy_on_the_emulator():
    x = kiln.random.default_rng(1).standard_normal((300, 200), chunks=(100, 100))
    y = np.sin(x) * 2
    want = y.compute()
    (r,) = kiln.compute(y, device="cuda-emu", keep_on_device=True)
    assert isinstance(r, kiln.DeviceArray) and r.device == "cuda-emu:0"
    assert r.shape == (300, 200) and r.dtype == np.float64 and r.nbytes == 480000
    assert not hasattr(r, "__cuda_array_interface__")  # the emulator's memory is host memory
    with pytest.raises(BufferError):
        r.__dlpack__()
    host = r.get()
    # The emulator's sin and the CPU's vector math agree to an ulp, not always to the bit.
    np.testing.assert_allclose(host, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(np.asarray(r), host)
    d = r.__kiln_device_interface__
    assert d["version"] == 3 and d["typestr"] == "<f8" and d["strides"] is None and d["data"][0]
    k = kiln.asarray(r, chunks=(150, 200))  # read in place by computes on cuda-emu
    assert k.chunks == ((150, 150), (200,))
    with kiln.config.set(device="cuda-emu"):
        np.testing.assert_array_equal((k + 1).compute(), host + 1)
    with pytest.raises(kiln.KilnError, match="cuda-emu:0's memory"):
        (k + 1).compute(device="cpu")


def test_cuda_array_interface_inputs_are_checked():
    class Producer:  # CuPy's side of the protocol (never computed here: no GPU)
        def __init__(self, **fields):
            self.__cuda_array_interface__ = dict(
                {"shape": (4, 3), "typestr": "<f4", "data": (0x7F0000, False), "version": 3,
                 "strides": None, "stream": None}, **fields)

    k = kiln.asarray(Producer(), chunks=(2, 3))
    assert k.shape == (4, 3) and k.dtype == np.float32 and k.chunks == ((2, 2), (3,))
    assert kiln.asarray(Producer(strides=(12, 4))).shape == (4, 3)  # C order, spelled out
    with pytest.raises(ValueError, match="C-contiguous"):
        kiln.asarray(Producer(strides=(4, 16)))
    with pytest.raises(TypeError, match="unsupported dtype float16"):
        kiln.asarray(Producer(typestr="<f2"))
    with pytest.raises(TypeError, match="masked"):
        kiln.asarray(Producer(mask=object()))
    with pytest.raises(TypeError, match="stream"):
        kiln.asarray(Producer(stream=7))  # no CuPy here to synchronize it with
    with pytest.raises(ValueError, match="null pointer"):
        kiln.asarray(Producer(data=(0, False)))
