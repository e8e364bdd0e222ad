"""``scipy.stats`` distributions with derivatives, as ``jax.scipy.stats`` offers
them: ``import tapead.scipy.stats as tst``.

Each distribution is a namespace of functions with JAX's signatures
(``norm.logpdf(x, loc=0, scale=1)``, ``gamma.cdf(x, a, loc=0, scale=1)``,
``poisson.logpmf(k, mu, loc=0)``, ``multivariate_normal.logpdf(x, mean, cov)``,
...) and a few more of scipy's (``t.cdf``/``logcdf``/``sf``/``logsf`` through
``scipy.special.stdtr``, ``multivariate_normal.entropy``, and
``allow_singular=True``: scipy's pseudo-inverse and pseudo-determinant, with
derivatives where the rank stays the same, the rank guarded on replay),
composed of differentiable tapead operations: derivatives in ``x``,
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
import scipy.linalg

import tapead.numpy as tnp
from tapead._core import Box, concrete, guard_value, lanes_of, shape_of
from tapead._prims import batching
from tapead._prims.special import gammaln, xlog1py, xlogy
from tapead._prims.special_gamma import (betainc, betaln, gammainc, gammaincc, log_ndtr, ndtr,
                                        ndtri, stdtr)
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


t = SimpleNamespace(
    logpdf=_t_logpdf,
    pdf=lambda x, df, loc=0, scale=1: tnp.exp(_t_logpdf(x, df, loc, scale)),
    cdf=lambda x, df, loc=0, scale=1: stdtr(df, _std(x, loc, scale)),
    logcdf=lambda x, df, loc=0, scale=1: tnp.log(stdtr(df, _std(x, loc, scale))),
    sf=lambda x, df, loc=0, scale=1: stdtr(df, -_std(x, loc, scale)),
    logsf=lambda x, df, loc=0, scale=1: tnp.log(stdtr(df, -_std(x, loc, scale))))


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
def _guarded(fn, args, what):
    """``fn`` of the concrete values of ``args`` (a plain result), recorded as a
    guard on each traced argument (the others held at their recorded values),
    so a replay where it changes raises ``GuardFlippedError``."""
    vals = [np.asarray(concrete(a)) for a in args]
    out = fn(*vals)
    for k, a in enumerate(args):
        if isinstance(a, Box):
            def again(new, k=k):
                vs = list(vals)
                vs[k] = np.asarray(concrete(new))
                return fn(*vs)
            guard_value(a, again, out, what)
    return out


def _spectrum(c):
    """scipy's ``_PSD`` decisions for the symmetric matrix ``c`` (a value, taken
    in float64 as scipy does): its eigenvalues and eigenvectors and the cutoff
    below which an eigenvalue is 0."""
    s, u = scipy.linalg.eigh(np.asarray(c, dtype=np.float64), lower=True)   # scipy: float64
    eps = 1e6 * np.finfo(np.float64).eps * np.max(abs(s))
    if np.min(s) < -eps:
        raise ValueError("The input matrix must be symmetric positive semidefinite.")
    return s, u, eps


#: scipy's cutoff of a negligible eigenvalue, relative to the largest (float64)
_RCOND = 1e6 * np.finfo(np.float64).eps


def _rank(c):
    s, _, eps = _spectrum(c)
    return int(np.sum(s > eps))


def _check_cov(cov, what):
    cs = shape_of(cov)
    if len(cs) != 2 or cs[0] != cs[1]:
        raise ValueError(f"multivariate_normal.{what}: cov must be an (n, n) matrix (a "
                         f"scalar cov: pass cov * np.eye(n)); got shape {cs}")
    return cs[0]


def _log_pdet(cov, rcond):
    """The log of the pseudo-determinant of a singular covariance (the product of
    its nonzero eigenvalues), differentiable where the rank stays the same: with
    P the pseudo-inverse and Q = I - cov P the projection on the null space,
    log det(cov + Q) (whose gradient is P plus a null-space part) minus
    tr(Q cov) (zero, whose gradient removes that part), so the gradient is P,
    that of scipy's eigenvalue cutoff."""
    n = shape_of(cov)[0]
    P = tnp.linalg.pinv(cov, rcond=rcond)
    Q = np.eye(n, dtype=np.result_type(lanes_of(cov))) - cov @ P
    return tnp.linalg.slogdet(cov + Q)[1] - tnp.trace(Q @ cov), P


def _outside_support(dv, cv):
    """scipy's support test: the component of each x - mean (rows of ``dv``) in
    the null space of ``cv`` is not negligible."""
    s, u, eps = _spectrum(cv)
    return np.linalg.norm(dv @ u[:, s <= eps], axis=-1) >= 1e3 * eps


def _off_support(d, cov):
    """The points off the support (constant booleans), guarded on replay;
    under vmap each lane's (batched)."""
    trace, (dv, cv) = batching.stacked_values(d, cov)
    if trace is None:
        return _guarded(_outside_support, [d, cov], "whether x is in the support")
    return trace.box(np.stack([_outside_support(dv[i], cv[i]) for i in range(trace.size)]), 0)


def _mvn_logpdf(x, mean, cov, allow_singular=False):
    """x: (..., n); mean: (n,); cov: (n, n) symmetric positive definite, or
    positive semidefinite with ``allow_singular=True`` (scipy's pseudo-inverse
    and pseudo-determinant; -inf off the support)."""
    xs, cs = shape_of(x), shape_of(cov)
    n = cs[-1] if len(cs) == 2 else None
    if n is None or cs != (n, n) or (xs and xs[-1] != n):
        raise ValueError(f"multivariate_normal.logpdf: cov must be (n, n) and x (..., n); "
                         f"got x {xs}, cov {cs}")
    d = x - mean
    xs = shape_of(d)                              # x and mean broadcast
    d = tnp.reshape(d, (-1, n))
    rank = batching.guarded_lanes(_rank, cov, "the rank of a covariance") \
        if allow_singular else n
    if rank == n:
        L = tnp.linalg.cholesky(cov)
        y = solve_triangular(L, tnp.transpose(d), lower=True)          # (n, m)
        half_logdet = tnp.sum(tnp.log(tnp.diagonal(L)))
        out = -0.5 * tnp.sum(y * y, axis=0) - half_logdet - n * LOG_SQRT_2PI
    else:                         # in float64, as scipy computes (float32 cast back)
        dt = np.result_type(lanes_of(cov), lanes_of(d))
        log_pdet, P = _log_pdet(tnp.astype(cov, np.float64), _RCOND)
        d64 = tnp.astype(d, np.float64)
        maha = tnp.sum(d64 * (d64 @ P), axis=-1)
        out = -0.5 * (rank * 2.0 * LOG_SQRT_2PI + log_pdet + maha)
        out = tnp.astype(_outside(out, _off_support(d, cov), -np.inf), dt)
    return tnp.reshape(out, xs[:-1]) if xs else out


def _mvn_entropy(mean=None, cov=1):
    """The differential entropy 0.5 (rank (log 2 pi + 1) + log pdet(cov)), as
    scipy computes it (a singular cov allowed: its pseudo-determinant)."""
    if len(shape_of(cov)) < 2:                     # a scalar variance: cov * I
        n = 1 if mean is None else int(np.prod(shape_of(mean)))
        cov = np.eye(n) * cov
    n = _check_cov(cov, "entropy")
    rank = batching.guarded_lanes(_rank, cov, "the rank of a covariance")
    if rank == n:
        log_pdet = 2.0 * tnp.sum(tnp.log(tnp.diagonal(tnp.linalg.cholesky(cov))))
    else:                         # in float64, as scipy computes (float32 cast back)
        dt = np.result_type(lanes_of(cov))
        log_pdet = tnp.astype(_log_pdet(tnp.astype(cov, np.float64), _RCOND)[0], dt)
    return 0.5 * (rank * (2.0 * LOG_SQRT_2PI + 1.0) + log_pdet)


multivariate_normal = SimpleNamespace(
    logpdf=_mvn_logpdf,
    pdf=lambda x, mean, cov, allow_singular=False: tnp.exp(
        _mvn_logpdf(x, mean, cov, allow_singular)),
    entropy=_mvn_entropy)

#: distribution name -> its namespace (the coverage page reads it)
DISTRIBUTIONS = {"norm": norm, "t": t, "gamma": gamma, "chi2": chi2, "beta": beta,
                 "poisson": poisson, "dirichlet": dirichlet,
                 "multivariate_normal": multivariate_normal}
__all__ = list(DISTRIBUTIONS)
