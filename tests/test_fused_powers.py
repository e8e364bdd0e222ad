"""The constant powers x**3 and x**4 under forward mode in one C pass each:
the tangent ``tx * (k x**(k-1))`` (``_core.fused_pow_tangent``, the JVP) and
the dual partial ``k x**(k-1)`` of the power's VJP rule under forward over
reverse (``_core.pow_partial_dual``, ``ta.hvp``).  They must give the numbers
of the unfused rules bit for bit, fall back on anything else (float32,
strided, broadcast, 0-d, traced exponents), and match finite differences and
JAX."""
import numpy as np
import pytest

import tapead as ta
from tapead import _core
from tapead._prims import elementwise as E

X = np.random.default_rng(0).uniform(-2.5, 2.5, 3001)
V = np.random.default_rng(1).standard_normal(3001)
POWERS = [3, 4, 3.0, 4.0]


def _unfused_hvp(x, v, k):
    """The dual products of the unfused rule, in numpy: the tangent of
    4.0 * (x*x*x), resp. 3.0 * (x*x), with x = (x, v)."""
    if k == 4:
        return ((v * x + v * x) * x + v * (x * x)) * 4.0
    return (v * x + v * x) * 3.0


def _unfused_tangent(x, v, k):
    d = x * x
    if k == 4:
        d = d * x
    return v * (d * float(k))


@pytest.mark.parametrize("k", POWERS)
def test_hvp_is_the_unfused_rules_bit_for_bit(k):
    h = ta.hvp(lambda u: (u ** k).sum(), (X,), (V,))
    np.testing.assert_array_equal(h, _unfused_hvp(X, V, k))
    np.testing.assert_allclose(h, k * (k - 1) * X ** (k - 2.0) * V, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("k", POWERS)
def test_jvp_is_the_unfused_rule_bit_for_bit(k):
    y, t = ta.jvp(lambda u: u ** k, (X,), (V,))
    np.testing.assert_array_equal(t, _unfused_tangent(X, V, k))
    np.testing.assert_array_equal(y, E._power_impl(X, k))


@pytest.mark.parametrize("k", POWERS)
def test_fused_paths_equal_the_rules_they_replace(k, monkeypatch):
    f = lambda u: (u ** k * np.sin(u)).sum()                               # noqa: E731
    h = ta.hvp(f, (X,), (V,))
    t = ta.jvp(lambda u: u ** k, (X,), (V,))[1]
    monkeypatch.setattr(E.power.prim, "fused_jvp", 0)
    monkeypatch.setattr(_core, "pow_partial_dual", lambda x, y: None)
    np.testing.assert_array_equal(ta.hvp(f, (X,), (V,)), h)
    np.testing.assert_array_equal(ta.jvp(lambda u: u ** k, (X,), (V,))[1], t)


@pytest.mark.parametrize("k", [3, 4])
def test_hvp_against_finite_differences(k):
    x, v = X[:200], V[:200]
    g = ta.grad(lambda u: (u ** k * np.cos(u)).sum())
    h = ta.hvp(lambda u: (u ** k * np.cos(u)).sum(), (x,), (v,))
    eps = 1e-5
    fd = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(h, fd, rtol=1e-7, atol=1e-7)
    # and the third order: the directional derivative of the HVP
    hv = lambda u: ta.hvp(lambda w: (w ** k).sum(), (u,), (v,))          # noqa: E731
    d3 = ta.jvp(hv, (x,), (v,))[1]
    np.testing.assert_allclose(d3, k * (k - 1) * (k - 2) * x ** (k - 3.0) * v * v,
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("k", [3, 4])
def test_against_jax(k):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f = lambda u, m: m.sum(u ** k * m.sin(u))                              # noqa: E731
    h = ta.hvp(lambda u: f(u, np), (X,), (V,))
    hj = jax.jvp(jax.grad(lambda u: f(u, jnp)), (X,), (V,))[1]
    np.testing.assert_allclose(h, np.asarray(hj), rtol=1e-12, atol=1e-12)
    t = ta.jvp(lambda u: u ** k, (X,), (V,))[1]
    tj = jax.jvp(lambda u: u ** k, (X,), (V,))[1]
    np.testing.assert_allclose(t, np.asarray(tj), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("make", [
    lambda a: a.astype(np.float32),
    lambda a: np.repeat(a, 2)[::2],                    # strided
    lambda a: np.asfortranarray(a[:3000].reshape(60, 50)),
    lambda a: a[:0],                                   # 0-size
    lambda a: a[:12].reshape(3, 4),
], ids=["float32", "strided", "fortran", "empty", "2d"])
@pytest.mark.parametrize("k", [3, 4])
def test_other_layouts_give_the_same_numbers(make, k):
    x, v = make(X), make(V)
    h = ta.hvp(lambda u: (u ** k).sum(), (x,), (v,))
    t = ta.jvp(lambda u: u ** k, (x,), (v,))[1]
    assert h.shape == t.shape == x.shape and h.dtype == t.dtype == x.dtype
    xf, vf = np.ascontiguousarray(x), np.ascontiguousarray(v)
    np.testing.assert_array_equal(h, _unfused_hvp(xf, vf, k))
    np.testing.assert_array_equal(t, _unfused_tangent(xf, vf, k).astype(x.dtype))


def test_broadcast_operand():
    # x ** 4 of a broadcast view: the rules see a non-contiguous array and fall back
    x, v = X[:50], V[:50]
    f = lambda u: (np.broadcast_to(u, (3, 50)) ** 4).sum()                # noqa: E731
    h = ta.hvp(f, (x,), (v,))
    np.testing.assert_allclose(h, 3 * 12.0 * x * x * v, rtol=1e-14, atol=1e-14)


def test_kernels_decline_what_they_do_not_cover():
    x = X[:10]
    assert _core.fused_pow_tangent(V[:10], x, 5) is None
    assert _core.fused_pow_tangent(V[:10], x, np.int64(4)) is None
    assert _core.fused_pow_tangent(V[:9], x, 4) is None                  # shapes differ
    assert _core.fused_pow_tangent(V[:10].astype(np.float32), x, 4) is None
    assert _core.pow_partial_dual(x, 4) is None                           # not a dual
    out = ta.jvp(lambda u: _core.pow_partial_dual(u, 2.5), (x,), (V[:10],))[0]
    assert out is None                                                    # not 3 or 4


def test_traced_exponent_takes_the_rules():
    x = np.abs(X[:20]) + 0.5
    f = lambda u, p: (u ** p).sum()                                       # noqa: E731
    g = ta.grad(f, argnums=(0, 1))
    h = ta.jvp(lambda p: g(x, p)[0], (4.0,), (1.0,))[1]                  # d/dp of 4 x**3
    np.testing.assert_allclose(h, x ** 3.0 + 4.0 * x ** 3.0 * np.log(x), rtol=1e-13)
