"""scipy.special's and scipy.stats' refusals and dispatch: a traced Bessel order
is refused naming the scipy function (the incomplete gamma and beta
functions' shape parameters: tests/test_gammainc_shape.py, test_betainc_shape.py);
scipy's own ufuncs dispatch to tapead; scipy.stats' functions on tracers point
to tapead.scipy.stats.  (Values and derivatives: the op-spec rows in
tests/opspecs_special.py.)"""
import numpy as np
import pytest
import scipy.special as sps
import scipy.stats

import tapead as ta
import tapead.scipy.special as tsp
import tapead.scipy.stats as tst
from tapead._prims.conversion_hint import STATS_METHODS
from tapead.errors import NonDifferentiableError


@pytest.mark.parametrize("name", ["iv", "ive", "jv", "yv", "kv"])
def test_traced_bessel_order_is_refused(name):
    f = getattr(sps, name)                     # scipy's ufunc dispatches to tapead
    with pytest.raises(NonDifferentiableError, match=rf"scipy\.special\.{name}: .*'v'"):
        ta.grad(lambda v: f(v, 1.3))(1.5)
    with pytest.raises(NonDifferentiableError, match=rf"scipy\.special\.{name}"):
        ta.jvp(lambda v: getattr(tsp, name)(v, 1.3), (1.5,), (1.0,))


def test_scipy_ufuncs_dispatch_and_differentiate_again():
    x = 0.7
    assert np.isclose(ta.grad(sps.ndtr)(x), np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
                      rtol=1e-14)
    # J0'' = -J1' = -(J0 - J2) / 2
    assert np.isclose(ta.grad(ta.grad(sps.j0))(x), -(sps.j0(x) - sps.jv(2, x)) / 2,
                      rtol=1e-13)
    assert ta.grad(sps.gammasgn)(-1.5) == 0.0
    assert np.isclose(ta.grad(lambda a: sps.beta(a, 2.0))(1.5),
                      sps.beta(1.5, 2.0) * (sps.digamma(1.5) - sps.digamma(3.5)), rtol=1e-13)


def test_float32_stays_float32():
    x = np.float32(0.4)
    for f in (lambda v: sps.gammainc(1.5, v), lambda v: sps.iv(1.5, v),
              lambda v: tst.beta.logpdf(v, 2.0, 3.0), lambda v: sps.erfinv(v)):
        assert np.result_type(ta.grad(f)(x)) == np.float32


@pytest.mark.parametrize("call, target", [
    (lambda x: scipy.stats.norm.logpdf(x), "tapead.scipy.stats.norm.logpdf"),
    (lambda x: scipy.stats.gamma.cdf(x, 2.0), "tapead.scipy.stats.gamma.cdf"),
    (lambda x: scipy.stats.multivariate_normal.logpdf(x, np.zeros(2), np.eye(2)),
     "tapead.scipy.stats.multivariate_normal.logpdf"),
])
def test_scipy_stats_on_tracers_points_to_tapead(call, target):
    with pytest.raises(TypeError, match=r"call " + target.replace(".", r"\.")):
        ta.grad(lambda x: np.sum(call(x)))(np.ones(2))


def test_scipy_stats_without_tapead_version_names_the_distribution():
    with pytest.raises(TypeError, match=r"scipy\.stats\.laplace\.logpdf .*tapead\.scipy\.stats"):
        ta.grad(lambda x: np.sum(scipy.stats.laplace.logpdf(x)))(np.ones(2))


def test_hint_table_lists_tapead_stats():
    have = {d: tuple(vars(ns)) for d, ns in tst.DISTRIBUTIONS.items()}
    assert {d: set(m) for d, m in have.items()} == \
        {d: set(m) for d, m in STATS_METHODS.items()}


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match=r"cov must be \(n, n\)"):
        tst.multivariate_normal.logpdf(np.zeros(3), np.zeros(2), np.eye(2))
    # a singular cov needs allow_singular=True (tests/test_stats_singular.py), and
    # even then a positive semidefinite one
    with pytest.raises(np.linalg.LinAlgError):
        ta.grad(lambda c: tst.multivariate_normal.logpdf(np.zeros(2), np.zeros(2),
                                                         c * np.diag([1.0, 0.0])))(1.0)
    with pytest.raises(ValueError, match="positive semidefinite"):
        ta.grad(lambda c: tst.multivariate_normal.logpdf(
            np.zeros(2), np.zeros(2), c * np.diag([1.0, -1.0]), allow_singular=True))(1.0)
    with pytest.raises(ValueError, match="alpha must be 1-D"):
        tst.dirichlet.logpdf(np.full(2, 0.5), np.ones((2, 2)))


def test_out_of_support_values_match_scipy():
    x = np.array([-0.5, 0.5, 1.5])
    np.testing.assert_allclose(tst.gamma.logpdf(x, 2.0), scipy.stats.gamma.logpdf(x, 2.0))
    np.testing.assert_allclose(tst.beta.logpdf(x, 2.0, 3.0),
                               scipy.stats.beta.logpdf(x, 2.0, 3.0))
    np.testing.assert_allclose(tst.beta.cdf(x, 2.0, 3.0), scipy.stats.beta.cdf(x, 2.0, 3.0))
    np.testing.assert_allclose(tst.gamma.cdf(x, 2.0), scipy.stats.gamma.cdf(x, 2.0))
    k = np.array([-1.0, 0.0, 2.5, 3.0])
    np.testing.assert_allclose(tst.poisson.logpmf(k, 1.5), scipy.stats.poisson.logpmf(k, 1.5))
    np.testing.assert_allclose(tst.poisson.cdf(k, 1.5), scipy.stats.poisson.cdf(k, 1.5))
    # a gradient at an in-support point next to out-of-support ones
    g = ta.grad(lambda m: tst.poisson.logpmf(k, m).sum() + 0.0 * m)(1.5)
    assert np.isfinite(g)


def test_edge_points():
    # gammainc(1, x) = 1 - exp(-x): derivative 1 at x = 0 (x^0, not 0 * log 0)
    assert ta.grad(lambda x: sps.gammainc(1.0, x))(0.0) == 1.0
    assert np.isclose(ta.grad(lambda x: sps.betainc(1.0, 2.0, x))(0.0), 2.0, rtol=1e-15)
    with pytest.raises(NonDifferentiableError, match=r"scipy\.special\.rgamma.*poles"):
        ta.grad(sps.rgamma)(-1.0)
    # mean batched against one x
    means = np.array([[0.0, 0.0], [1.0, -1.0]])
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_allclose(
        tst.multivariate_normal.logpdf(np.zeros(2), means, cov),
        [scipy.stats.multivariate_normal.logpdf(np.zeros(2), m, cov) for m in means],
        rtol=1e-14)
