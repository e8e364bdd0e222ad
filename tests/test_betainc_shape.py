"""Derivatives of scipy.special.betainc in the shape parameters a and b
(``tapead/_prims/beta_kernel.py``): the kernel against 50-digit mpmath
(JAX has no derivative of betainc in a or b), through the transforms (up to
three derivatives in a and b together, mixed with x), the refusals.  The
op-spec rows ``betainc_a``, ``betainc_b``, ``betainc_abx`` run the table's
finite-difference checks."""
import numpy as np
import pytest
import scipy.special as sps

import tapead as ta
import tapead.scipy.stats as tst
from tapead._prims import beta_kernel
from tapead.errors import NonDifferentiableError

mpmath = pytest.importorskip("mpmath")


def mp_derivative(a, b, x, na, nb, nx=0):
    """(d/da)^na (d/db)^nb (d/dx)^nx I_x(a, b) with 50 digits (through
    1 - I_{1-x}(b, a) where I ~ 1, so that no digits are lost)."""
    with mpmath.workdps(50):
        a, b, x = (mpmath.mpf(float(v)) for v in (a, b, x))
        if x > a / (a + b):
            f = lambda s, t, u: -mpmath.betainc(t, s, 0, 1 - u, regularized=True)  # noqa: E731
        else:
            f = lambda s, t, u: mpmath.betainc(s, t, 0, u, regularized=True)       # noqa: E731
        return float(mpmath.diff(f, (a, b, x), (na, nb, nx)))


def points(n, seed):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.uniform(np.log(0.05), np.log(200.0), n))
    b = np.exp(rng.uniform(np.log(0.05), np.log(200.0), n))
    x = rng.uniform(0.0, 1.0, n)
    # the switch x = (a + 1) / (a + b + 2), x = 1/2, integer b (the fraction ends)
    a = np.concatenate([a, [1.0, 2.0, 3.0, 0.5, 5.0, 2.5]])
    b = np.concatenate([b, [1.0, 2.0, 4.0, 0.5, 5.0, 3.0]])
    x = np.concatenate([x, [0.5, 0.25, 4.0 / 9.0, 0.5, 0.5, 0.3]])
    return a, b, x


@pytest.mark.parametrize("na, nb", [(1, 0), (0, 1), (2, 0), (1, 1), (0, 2), (3, 0), (1, 2)])
def test_kernel_matches_mpmath(na, nb):
    a, b, x = points(40, seed=10 * na + nb)
    got = beta_kernel.betainc_dab(a, b, x, na, nb)
    want = np.array([mp_derivative(*p, na, nb) for p in zip(a, b, x)])
    keep = np.abs(want) > 1e-290                  # below: subnormal numbers
    # relative to the value, or to the first derivatives' size where a higher
    # derivative crosses zero
    first = np.abs(beta_kernel.betainc_dab(a, b, x, 1, 0)) + \
        np.abs(beta_kernel.betainc_dab(a, b, x, 0, 1))
    err = np.abs(got - want)[keep] / np.maximum(np.abs(want), 1e-9 * first)[keep]
    tol = 1e-12 if na + nb < 3 else 3e-12
    assert err.max() <= tol, (a[keep][err.argmax()], b[keep][err.argmax()],
                              x[keep][err.argmax()], err.max())


def test_transforms_orders_and_mixed_partials():
    a, b, x = 2.5, 1.5, 0.3
    f = sps.betainc
    g = ta.grad(f, (0, 1, 2))(a, b, x)
    np.testing.assert_allclose(g, [mp_derivative(a, b, x, *o) for o in
                                   ((1, 0, 0), (0, 1, 0), (0, 0, 1))], rtol=1e-13)
    H = ta.hessian(lambda v: f(v[0], v[1], v[2]))(np.array([a, b, x]))
    orders = [[(2, 0, 0), (1, 1, 0), (1, 0, 1)], [(1, 1, 0), (0, 2, 0), (0, 1, 1)],
              [(1, 0, 1), (0, 1, 1), (0, 0, 2)]]
    np.testing.assert_allclose(H, [[mp_derivative(a, b, x, *o) for o in row]
                                   for row in orders], rtol=1e-12)
    assert np.isclose(ta.grad(ta.grad(ta.grad(f)))(a, b, x), mp_derivative(a, b, x, 3, 0),
                      rtol=1e-12, atol=0)
    # d3 / da db dx by forward over reverse over reverse
    d = ta.jvp(lambda s: ta.grad(ta.grad(f, 1), 2)(s, b, x), (a,), (1.0,))[1]
    assert np.isclose(d, mp_derivative(a, b, x, 1, 1, 1), rtol=1e-12, atol=0)
    ta.check_grads(lambda s, t: f(s, t, x), (a, b), order=3, modes=("fwd", "rev"))
    ta.check_grads(lambda s, t: f(s, t, 0.8), (a, b), order=2, modes=("fwd", "rev"))


def test_arrays_float32_and_stats():
    a = np.array([[0.3], [2.0], [40.0]])
    b, x = np.array([0.7, 3.0, 25.0]), np.array([0.2, 0.5, 0.7])
    g = ta.grad(lambda s: np.sum(sps.betainc(s, b, x)))(a)
    np.testing.assert_allclose(g, [[sum(mp_derivative(ai, bj, xj, 1, 0)
                                        for bj, xj in zip(b, x))] for ai in a[:, 0]],
                               rtol=1e-12)
    g32 = ta.grad(lambda t: sps.betainc(np.float32(2.5), t, np.float32(0.3)))(np.float32(1.5))
    assert np.result_type(g32) == np.float32
    assert np.isclose(g32, mp_derivative(2.5, 1.5, 0.3, 0, 1), rtol=1e-6)
    # beta.cdf(x, a, b) = betainc(a, b, x)
    assert np.isclose(ta.grad(lambda s: tst.beta.cdf(0.3, s, 2.0))(1.5),
                      mp_derivative(1.5, 2.0, 0.3, 1, 0), rtol=1e-13)


def test_edges():
    # I_0 = 0 and I_1 = 1 for every a, b > 0: derivative 0; x outside [0, 1]: NaN
    assert ta.grad(sps.betainc)(1.5, 2.0, 0.0) == 0.0
    assert ta.grad(sps.betainc, 1)(1.5, 2.0, 1.0) == 0.0
    assert np.isnan(ta.grad(sps.betainc)(1.5, 2.0, 1.5))


def test_order_four_is_refused():
    f = ta.grad(ta.grad(ta.grad(ta.grad(sps.betainc, 1)), 1))
    with pytest.raises(NonDifferentiableError, match=r"at most 3 times in 'a' and 'b'"):
        f(2.5, 1.5, 0.3)
    with pytest.raises(NonDifferentiableError, match=r"at most 3 times"):
        ta.hessian(lambda v: ta.hessian(lambda w: sps.betainc(w[0], w[1], 0.3))(v)[0, 1])(
            np.array([2.5, 1.5]))


@pytest.mark.parametrize("argnum, name", [(0, "a"), (1, "b")])
def test_nonpositive_shape_is_refused(argnum, name):
    args = [2.5, 1.5, 0.3]
    args[argnum] = -1.0
    with pytest.raises(NonDifferentiableError, match=rf"'{name}' at {name} <= 0"):
        ta.grad(sps.betainc, argnum)(*args)
