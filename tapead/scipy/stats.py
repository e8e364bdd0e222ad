"""``scipy.stats`` distributions with derivatives, as ``jax.scipy.stats`` offers
them: ``import tapead.scipy.stats as tst``.

Each distribution is a namespace of functions with JAX's signatures
(``norm.logpdf(x, loc=0, scale=1)``, ``gamma.cdf(x, a, loc=0, scale=1)``,
``poisson.logpmf(k, mu, loc=0)``, ``multivariate_normal.logpdf(x, mean, cov)``,
...), composed of differentiable tapead operations: derivatives in ``x``,
``loc``, ``scale`` and the shape parameters of the densities, every order.
The distribution functions of ``gamma``, ``chi2`` and ``beta`` go through
the regularized incomplete gamma and beta functions, which tapead
differentiates in ``x`` at every order and in the shape parameters up to
order 3 (``NonDifferentiableError`` beyond; JAX has the first derivative in
``gamma``'s ``a`` and none in ``beta``'s).  ``scipy.stats.norm.logpdf(tracer)`` itself
cannot see a traced value (scipy converts it to an array): call these.

>>> import numpy as np, tapead as ta
>>> from tapead.scipy.stats import norm
>>> round(float(ta.grad(norm.logpdf)(0.5)), 12)          # d/dx of -x^2/2
-0.5
>>> bool(np.isclose(ta.grad(norm.cdf)(0.0), 1 / np.sqrt(2 * np.pi), rtol=1e-15))
True
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import tapead.numpy as tnp
from tapead._core import lanes_of, shape_of
from tapead._prims import batching
from tapead._prims.special import gammaln, xlog1py, xlogy
from tapead._prims.special_gamma import betainc, betaln, gammainc, gammaincc, log_ndtr, ndtr, ndtri
from tapead.scipy.linalg import solve_triangular

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log(c):
    """log of a parameter; a Python number stays a Python float (float32 kept)."""
    if isinstance(c, (int, float)):
        return math.log(c)
    return tnp.log(c)


def _outside(value, mask, fill):
    """``value`` with ``fill`` where the (constant) mask is true."""
    if not batching.reduce_values(np.any, mask):
        return value
    return tnp.where(mask, fill, value)


def _mask(fn, *xs):
    """``fn`` (numpy, elementwise) of the values of ``xs``: a constant mask,
    batched under vmap (the lanes' values read together)."""
    return batching.elementwise_values(fn, *[batching.value_of(x) for x in xs])


def _std(x, loc, scale):
    return (x - loc) / scale


def _neg(v):
    return _mask(lambda a: np.asarray(a) < 0, v)


# normal ----------------------------------------------------------------------
def _norm_logpdf(x, loc=0, scale=1):
    z = _std(x, loc, scale)
    return -0.5 * (z * z) - LOG_SQRT_2PI - _log(scale)


norm = SimpleNamespace(
    logpdf=_norm_logpdf,
    pdf=lambda x, loc=0, scale=1: tnp.exp(_norm_logpdf(x, loc, scale)),
    cdf=lambda x, loc=0, scale=1: ndtr(_std(x, loc, scale)),
    logcdf=lambda x, loc=0, scale=1: log_ndtr(_std(x, loc, scale)),
    sf=lambda x, loc=0, scale=1: ndtr(-_std(x, loc, scale)),
    logsf=lambda x, loc=0, scale=1: log_ndtr(-_std(x, loc, scale)),
    ppf=lambda q, loc=0, scale=1: loc + scale * ndtri(q),
    isf=lambda q, loc=0, scale=1: loc - scale * ndtri(q),
)


# Student's t -----------------------------------------------------------------
def _t_logpdf(x, df, loc=0, scale=1):
    z = _std(x, loc, scale)
    half = 0.5 * (df + 1.0)
    return (gammaln(half) - gammaln(0.5 * df) - 0.5 * (_log(df) + math.log(math.pi))
            - half * tnp.log1p(z * z / df) - _log(scale))


t = SimpleNamespace(logpdf=_t_logpdf,
                    pdf=lambda x, df, loc=0, scale=1: tnp.exp(_t_logpdf(x, df, loc, scale)))


# gamma and chi-squared ---------------------------------------------------------
def _gamma_logpdf(x, a, loc=0, scale=1):
    y = _std(x, loc, scale)
    out = xlogy(a - 1.0, y) - y - gammaln(a) - _log(scale)
    return _outside(out, _neg(y), -np.inf)


def _gamma_cdf(x, a, loc=0, scale=1):
    y = _std(x, loc, scale)
    return gammainc(a, tnp.maximum(y, 0.0) if batching.reduce_values(np.any, _neg(y)) else y)


def _gamma_sf(x, a, loc=0, scale=1):
    y = _std(x, loc, scale)
    return gammaincc(a, tnp.maximum(y, 0.0) if batching.reduce_values(np.any, _neg(y)) else y)


def _dist(logpdf, cdf, sf):
    return SimpleNamespace(
        logpdf=logpdf, pdf=lambda *a, **k: tnp.exp(logpdf(*a, **k)),
        cdf=cdf, logcdf=lambda *a, **k: tnp.log(cdf(*a, **k)),
        sf=sf, logsf=lambda *a, **k: tnp.log(sf(*a, **k)))


gamma = _dist(_gamma_logpdf, _gamma_cdf, _gamma_sf)


def _chi2(f):
    return lambda x, df, loc=0, scale=1: f(x, 0.5 * df, loc, 2.0 * scale)


chi2 = _dist(_chi2(_gamma_logpdf), _chi2(_gamma_cdf), _chi2(_gamma_sf))


# beta ------------------------------------------------------------------------
def _off_unit(yc):
    yc = np.asarray(yc)
    return (yc < 0) | (yc > 1)


def _beta_logpdf(x, a, b, loc=0, scale=1):
    y = _std(x, loc, scale)
    out = xlogy(a - 1.0, y) + xlog1py(b - 1.0, -y) - betaln(a, b) - _log(scale)
    return _outside(out, _mask(_off_unit, y), -np.inf)


def _beta_cdf(x, a, b, loc=0, scale=1):
    y = _std(x, loc, scale)
    if batching.reduce_values(np.any, _mask(_off_unit, y)):
        y = tnp.clip(y, 0.0, 1.0)
    return betainc(a, b, y)


def _beta_sf(x, a, b, loc=0, scale=1):
    return 1.0 - _beta_cdf(x, a, b, loc, scale)


beta = _dist(_beta_logpdf, _beta_cdf, _beta_sf)


# Poisson ---------------------------------------------------------------------
def _counts(k, loc, mu):
    """``k - loc`` as a constant (counts have no derivative), in ``mu``'s float dtype."""
    dt = np.result_type(lanes_of(mu))

    def counts(kv, lv):
        kv = np.asarray(kv) - np.asarray(lv)
        return kv.astype(dt) if np.issubdtype(dt, np.floating) else kv
    return _mask(counts, k, loc)


def _poisson_logpmf(k, mu, loc=0):
    k = _counts(k, loc, mu)
    out = xlogy(k, mu) - gammaln(k + 1.0) - mu
    return _outside(out, _mask(lambda v: (v < 0) | (v != np.floor(v)), k), -np.inf)


def _poisson_cdf(k, mu, loc=0):
    k = _mask(np.floor, _counts(k, loc, mu))
    out = gammaincc(_mask(lambda v: np.maximum(v, 0.0) + 1.0, k), mu)
    return _outside(out, _mask(lambda v: v < 0, k), 0.0)


poisson = SimpleNamespace(logpmf=_poisson_logpmf,
                          pmf=lambda k, mu, loc=0: tnp.exp(_poisson_logpmf(k, mu, loc)),
                          cdf=_poisson_cdf)


# Dirichlet -------------------------------------------------------------------
def _dirichlet_logpdf(x, alpha):
    """x: (K,) or (K, ...) points on the simplex (axis 0); alpha: (K,)."""
    nd = len(shape_of(x))
    if len(shape_of(alpha)) != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be 1-D (K,), got shape "
                         f"{shape_of(alpha)}")
    a = tnp.reshape(alpha, (-1,) + (1,) * (nd - 1)) if nd > 1 else alpha
    norm_const = tnp.sum(gammaln(alpha)) - gammaln(tnp.sum(alpha))
    return tnp.sum(xlogy(a - 1.0, x), axis=0) - norm_const


dirichlet = SimpleNamespace(logpdf=_dirichlet_logpdf,
                            pdf=lambda x, alpha: tnp.exp(_dirichlet_logpdf(x, alpha)))


# multivariate normal ---------------------------------------------------------
def _mvn_logpdf(x, mean, cov, allow_singular=None):
    """x: (..., n); mean: (n,); cov: (n, n) symmetric positive definite."""
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf(allow_singular=True) is "
                                  "not supported; pass a positive definite cov")
    xs, cs = shape_of(x), shape_of(cov)
    n = cs[-1] if len(cs) == 2 else None
    if n is None or cs != (n, n) or (xs and xs[-1] != n):
        raise ValueError(f"multivariate_normal.logpdf: cov must be (n, n) and x (..., n); "
                         f"got x {xs}, cov {cs}")
    L = tnp.linalg.cholesky(cov)
    d = x - mean
    xs = shape_of(d)                              # x and mean broadcast
    d = tnp.reshape(d, (-1, n))
    y = solve_triangular(L, tnp.transpose(d), lower=True)          # (n, m)
    half_logdet = tnp.sum(tnp.log(tnp.diagonal(L)))
    out = -0.5 * tnp.sum(y * y, axis=0) - half_logdet - n * LOG_SQRT_2PI
    return tnp.reshape(out, xs[:-1]) if xs else out


multivariate_normal = SimpleNamespace(
    logpdf=_mvn_logpdf,
    pdf=lambda x, mean, cov, allow_singular=None: tnp.exp(
        _mvn_logpdf(x, mean, cov, allow_singular)))

#: distribution name -> its namespace (the coverage page reads it)
DISTRIBUTIONS = {"norm": norm, "t": t, "gamma": gamma, "chi2": chi2, "beta": beta,
                 "poisson": poisson, "dirichlet": dirichlet,
                 "multivariate_normal": multivariate_normal}
__all__ = list(DISTRIBUTIONS)
