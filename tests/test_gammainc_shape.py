"""Derivatives of scipy.special.gammainc / gammaincc in the shape parameter a
(``tapead/_prims/gamma_kernel.py``): the kernel against 50-digit mpmath and
JAX, through the transforms (orders 1-3 in a, mixed with x), the refusals.
The op-spec rows ``gammainc_a``, ``gammaincc_a``, ``gammainc_ax`` run the
table's finite-difference and JAX checks."""
import numpy as np
import pytest
import scipy.special as sps

import tapead as ta
import tapead.scipy.special as tsp
import tapead.scipy.stats as tst
from tapead._prims import gamma_kernel
from tapead.errors import NonDifferentiableError

mpmath = pytest.importorskip("mpmath")


def mp_derivative(a, x, order=1, order_x=0):
    """(d/da)^order (d/dx)^order_x P(a, x) with 50 digits (through Q where x > a,
    so that P ~ 1 loses no digits)."""
    with mpmath.workdps(50):
        a, x = mpmath.mpf(float(a)), mpmath.mpf(float(x))
        if x > a:
            q = mpmath.diff(lambda s, t: mpmath.gammainc(s, t, mpmath.inf, regularized=True),
                            (a, x), (order, order_x))
            return -float(q)
        return float(mpmath.diff(lambda s, t: mpmath.gammainc(s, 0, t, regularized=True),
                                 (a, x), (order, order_x)))


def points(n, seed=0, a_range=(0.02, 300.0), x_range=(1e-3, 300.0)):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.uniform(*np.log(a_range), n))
    x = np.exp(rng.uniform(*np.log(x_range), n))
    # the switch between the series and the continued fraction, and x = 1
    a = np.concatenate([a, [1.0, 2.0, 5.0, 0.5, 3.0, 10.0, 50.0, 0.1]])
    x = np.concatenate([x, [2.0, 3.0, 6.0, 1.0, 1.0, 11.0, 51.0, 1.1]])
    return a, x


@pytest.mark.parametrize("order", [1, 2, 3])
def test_kernel_matches_mpmath(order):
    a, x = points(60, seed=order)
    got = gamma_kernel.gammainc_da(a, x, order)
    want = np.array([mp_derivative(ai, xi, order) for ai, xi in zip(a, x)])
    keep = np.abs(want) > 1e-290               # below: subnormal numbers
    # relative to the value, or to the first derivative's size where a higher
    # derivative crosses zero
    scale = np.maximum(np.abs(want), 1e-9 * np.abs(gamma_kernel.gammainc_da(a, x, 1)))
    err = np.abs(got - want)[keep] / scale[keep]
    assert err.max() <= 1e-12, (a[keep][err.argmax()], x[keep][err.argmax()], err.max())


def test_kernel_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.special as jss
    a, x = points(200, seed=7, a_range=(0.02, 100.0), x_range=(1e-3, 150.0))
    want = np.asarray(jax.vmap(jax.grad(jss.gammainc, 0))(a, x))
    got = ta.vmap(ta.grad(sps.gammainc))(a, x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    want_c = np.asarray(jax.vmap(jax.grad(jss.gammaincc, 0))(a, x))
    np.testing.assert_allclose(ta.vmap(ta.grad(sps.gammaincc))(a, x), want_c,
                               rtol=1e-12, atol=0)


def test_transforms_orders_and_mixed_partials():
    a, x = 1.7, 2.5
    f = sps.gammainc
    d = {(i, j): mp_derivative(a, x, i, j) for i in range(4) for j in range(3)
         if 0 < i + j <= 3 or (i, j) == (3, 1)}
    assert np.isclose(ta.grad(f)(a, x), d[1, 0], rtol=1e-13, atol=0)
    assert np.isclose(ta.jvp(lambda s: f(s, x), (a,), (1.0,))[1], d[1, 0], rtol=1e-13)
    assert np.isclose(ta.grad(ta.grad(f))(a, x), d[2, 0], rtol=1e-13, atol=0)
    assert np.isclose(ta.grad(ta.grad(ta.grad(f)))(a, x), d[3, 0], rtol=1e-12, atol=0)
    H = ta.hessian(lambda v: f(v[0], v[1]))(np.array([a, x]))
    np.testing.assert_allclose(H, [[d[2, 0], d[1, 1]], [d[1, 1], d[0, 2]]], rtol=1e-13)
    # forward over reverse, reverse over forward: d3 / da2 dx, d4 / da3 dx
    g_ax = ta.grad(lambda s: ta.grad(lambda t: ta.grad(f)(s, t))(x))
    assert np.isclose(g_ax(a), d[2, 1], rtol=1e-12, atol=0)
    d31 = ta.grad(lambda s: ta.grad(ta.grad(lambda s2, t: ta.grad(f, 1)(s2, t)))(s, x))(a)
    assert np.isclose(d31, d[3, 1], rtol=1e-12, atol=0)
    ta.check_grads(lambda s: f(s, x), (a,), order=3, modes=("fwd", "rev"))
    # gammaincc = 1 - gammainc
    assert np.isclose(ta.grad(sps.gammaincc)(a, x), -d[1, 0], rtol=1e-13)
    assert np.isclose(ta.grad(ta.grad(tsp.gammaincc))(a, x), -d[2, 0], rtol=1e-13)


def test_arrays_broadcasting_and_float32():
    a = np.array([[0.3], [2.0], [40.0]])
    x = np.array([0.5, 2.5, 45.0])
    g = ta.grad(lambda s: np.sum(sps.gammainc(s, x)))(a)
    want = [[sum(mp_derivative(ai, xi) for xi in x)] for ai in a[:, 0]]
    np.testing.assert_allclose(g, want, rtol=1e-13)
    J = ta.jacfwd(lambda s: sps.gammainc(s, 2.5))(np.array([1.7, 2.5]))
    np.testing.assert_allclose(np.diag(J), [mp_derivative(1.7, 2.5), mp_derivative(2.5, 2.5)],
                               rtol=1e-13)
    g32 = ta.grad(lambda s: sps.gammainc(s, np.float32(2.5)))(np.float32(1.7))
    assert np.result_type(g32) == np.float32
    assert np.isclose(g32, mp_derivative(1.7, 2.5), rtol=1e-6)


def test_edges():
    # P(a, 0) = 0 and P(a, inf) = 1 for every a > 0: derivative 0
    assert ta.grad(sps.gammainc)(1.5, 0.0) == 0.0
    assert ta.grad(sps.gammainc)(1.5, np.inf) == 0.0
    # x < 0: scipy gives NaN, and so does the derivative
    assert np.isnan(ta.grad(sps.gammainc)(1.5, -1.0))


def test_stats_shape_parameters_differentiate():
    # gamma.cdf(x, a) = gammainc(a, x), chi2.sf(x, df) = gammaincc(df / 2, x / 2)
    assert np.isclose(ta.grad(lambda s: tst.gamma.cdf(1.2, s))(1.5), mp_derivative(1.5, 1.2),
                      rtol=1e-13)
    assert np.isclose(ta.grad(lambda df: tst.chi2.sf(1.2, df))(3.0),
                      -0.5 * mp_derivative(1.5, 0.6), rtol=1e-13)


def test_order_four_in_a_is_refused():
    f = ta.grad(ta.grad(ta.grad(ta.grad(sps.gammainc))))
    with pytest.raises(NonDifferentiableError, match=r"at most 3 times in 'a'"):
        f(1.7, 2.5)
    with pytest.raises(NonDifferentiableError, match=r"at most 3 times in 'a'"):
        ta.hessian(lambda s: ta.hessian(lambda t: tsp.gammaincc(t, 2.5))(s))(1.7)


@pytest.mark.parametrize("a", [0.0, -1.5])
def test_nonpositive_a_is_refused(a):
    with pytest.raises(NonDifferentiableError, match=r"a <= 0 .*pass a > 0"):
        ta.grad(sps.gammainc)(a, 2.5)
    with pytest.raises(NonDifferentiableError, match=r"a <= 0"):
        ta.jvp(lambda s: tsp.gammaincc(s, 2.5), (a,), (1.0,))
