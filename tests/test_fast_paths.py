"""The recording and sweep shortcuts of array code give the generic path's numbers.

``ShapeOnly`` reads shape and dtype from the array's C struct; the sweep's
add/subtract shortcut (``FAST_PASS`` / ``FAST_SUB``) compares the operand's
shape with the cotangent's in C and sums a broadcast operand (a bias) over
the leading axes.  Each is checked against the Python rules bit for bit
(shortcuts off), against finite differences (orders 1 and 2) and, where
installed, against JAX, for float64 and float32, broadcasting, strided
views and empty arrays.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._core import ShapeOnly
from tapead._prims import elementwise as ew, linalg


@pytest.mark.parametrize("a", [
    np.zeros(()), np.zeros(3), np.zeros((2, 3)), np.zeros((2, 0, 4)),
    np.zeros((4, 6))[:, ::2], np.zeros((3, 4)).T, np.zeros(5, dtype=np.float32),
    np.zeros((2, 2), dtype=">f8"), np.zeros((1, 1, 1, 1, 1)),
], ids=lambda a: f"{a.shape}-{a.dtype.str}-{'C' if a.flags.c_contiguous else 'view'}")
def test_shape_only_keeps_shape_and_dtype(a):
    s = ShapeOnly(a)
    assert s.shape == a.shape and type(s.shape) is tuple
    assert all(type(n) is int for n in s.shape)
    assert s.dtype == a.dtype and s.dtype is a.dtype and s.ndim == a.ndim


def _slow(fn, *args):
    prims = [ew.add.prim, ew.subtract.prim, ew.tanh.prim, linalg.matmul_p]
    saved = [p.fast_vjp for p in prims]
    try:
        for p in prims:
            p.fast_vjp = 0
        return fn(*args)
    finally:
        for p, k in zip(prims, saved):
            p.fast_vjp = k


# (x shape, operand shape): same shape, a bias, a broadcast over two leading
# axes, a 0-d operand, keepdims-like (1, n) (the rule's path), empty batches
CASES = [((5, 4), (5, 4)), ((5, 4), (4,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)),
         ((5, 4), ()), ((5, 4), (1, 4)), ((0, 4), (4,)), ((3, 0), (0,))]


def _loss(x, b):
    h = tnp.tanh(x + b)
    return tnp.sum(h * h) + tnp.sum((x - b) ** 3) - tnp.sum(b - x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("xs, bs", CASES, ids=str)
def test_add_sub_shortcut_equals_the_rules_bit_for_bit(xs, bs, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    b = rng.standard_normal(bs).astype(dtype)
    g = ta.grad(_loss, argnums=(0, 1))
    fast = g(x, b)
    slow = _slow(g, x, b)
    for f, s, a in zip(fast, slow, (x, b)):
        assert f.shape == a.shape and f.dtype == dtype
        assert f.tobytes() == s.tobytes()


def test_add_sub_shortcut_on_strided_views():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 8))[::2, 1::2]          # (3, 4), not contiguous
    b = rng.standard_normal((4, 2))[:, 0]                # (4,), strided
    g = ta.grad(_loss, argnums=(0, 1))
    for f, s in zip(g(x, b), _slow(g, x, b)):
        assert f.tobytes() == s.tobytes()


@pytest.mark.parametrize("xs, bs", [c for c in CASES if 0 not in c[0]], ids=str)
def test_add_sub_shortcut_against_finite_differences(xs, bs):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(xs) * 0.5
    b = rng.standard_normal(bs) * 0.5
    ta.check_grads(_loss, (x, b), order=2)


def test_mlp_gradient_against_jax_and_the_rules():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    from tapead.nn import init_mlp, mlp, mse
    rng = np.random.default_rng(3)
    p = init_mlp([3, 8, 8, 2], rng)
    p = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in p.items()}
    x, t = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))

    def jloss(p):
        h = jnp.tanh(x @ p["W0"] + p["b0"])
        h = jnp.tanh(h @ p["W1"] + p["b1"])
        return jnp.mean((h @ p["W2"] + p["b2"] - t) ** 2)
    g = ta.grad(lambda p: mse(mlp(p, x), t))
    ours, slow = g(p), _slow(g, p)
    ref = jax.grad(jloss)(p)
    for k in p:
        assert ours[k].tobytes() == slow[k].tobytes()
        np.testing.assert_allclose(ours[k], np.asarray(ref[k]), rtol=1e-12, atol=1e-14)


# -- the bias cotangent: np.add.reduce over the leading axes in one C pass --

SUM_SHAPES = [(64, 64), (1, 5), (3, 2), (2, 3, 4), (5, 1, 2), (2, 2, 2, 2), (300, 7),
              (64, 1), (7, 0), (0, 5), (4,)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SUM_SHAPES, ids=str)
def test_sum_leading_is_numpys_reduction_bit_for_bit(shape, dtype):
    from tapead import _core
    rng = np.random.default_rng(4)
    g = (rng.standard_normal(shape) * np.exp(rng.uniform(-30, 30, shape))).astype(dtype)
    for lead in range(1, len(shape) + 1):
        out = _core.fused_sum_leading(g, lead)
        inner = int(np.prod(shape[lead:]))
        if inner < 2:
            assert out is None          # numpy sums one column pairwise
            continue
        ref = np.add.reduce(g, axis=tuple(range(lead)))
        assert out.shape == ref.shape and out.dtype == ref.dtype
        assert out.tobytes() == ref.tobytes()


def test_sum_leading_special_values_and_declines():
    from tapead import _core
    g = np.array([[-0.0, np.inf, 1.0, np.nan], [-0.0, -np.inf, 1e308, 2.0],
                  [-0.0, 1.0, 1e308, 3.0]])
    out = _core.fused_sum_leading(g, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.add.reduce(g, axis=(0,))
    assert out.tobytes() == ref.tobytes()
    assert not np.signbit(out[0])      # numpy starts from +0.0
    assert _core.fused_sum_leading(g.T, 1) is None                 # not C-contiguous
    assert _core.fused_sum_leading(np.ones((3, 4), dtype=np.int64), 1) is None
    assert _core.fused_sum_leading(g.astype(np.complex128), 1) is None
    assert _core.fused_sum_leading(g, 0) is None
    assert _core.fused_sum_leading(g, 3) is None
