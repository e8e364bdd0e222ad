"""Op-spec rows of scipy.special's gamma/beta, incomplete, error-inverse,
normal-distribution and Bessel functions, and of tapead.scipy.stats.

Shape parameters and Bessel orders are constants in the bodies (tapead has
no derivative in them), except the incomplete gamma and beta functions'
(rows ``*_a``, ``*_b``, ``gammainc_ax``, ``betainc_abx``).  JAX lacks some of these functions: the body then
uses an identity JAX has (``rgamma = 1 / gamma``), or the row is listed in
``NO_JAX`` (no comparison with JAX, the finite-difference checks still run).
"""
from __future__ import annotations

import math

import numpy as np

from opspecs import POS, REAL, AwayFromZero, Interval
from opspecs import _array_op as A
from opspecs_reductions import _module, _special as SP


def _stats(m):
    name = _module(m)
    if name.startswith("tapead"):
        import tapead.scipy.stats as st
    elif name.startswith("jax"):
        import jax.scipy.stats as st
    else:
        import scipy.stats as st
    return st


def _jax(m):
    return _module(m).startswith("jax")


ST = _stats
UNARY = (("scalar", ((),)), ("array", ((2, 3),)))
BIN = (("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))))
V3 = (("vector", ((3,),)),)
PROB = Interval(0.15, 0.85)

ARRAY_OPS = [
    # gamma and beta functions
    A("gammasgn", lambda m, x: SP(m).gammasgn(x) * x, *UNARY, domain=(Interval(-1.8, -1.2),)),
    A("rgamma", lambda m, x: 1.0 / SP(m).gamma(x) if _jax(m) else SP(m).rgamma(x), *UNARY,
      domain=(Interval(-0.8, 3.0),)),
    A("beta", lambda m, a, b: SP(m).beta(a, b), *BIN, domain=(POS, POS)),
    A("betaln", lambda m, a, b: SP(m).betaln(a, b), *BIN, domain=(POS, POS)),
    A("gammainc_x", lambda m, x: SP(m).gammainc(1.7, x), *UNARY, domain=(POS,)),
    A("gammaincc_x", lambda m, x: SP(m).gammaincc(2.2, x), *UNARY,
      domain=(POS,)),
    # the shape parameter: x = 2.3 puts a in (0.1, 3) on both sides of the
    # series / continued-fraction switch (x < a + 1)
    A("gammainc_a", lambda m, a: SP(m).gammainc(a, 2.3), *UNARY, domain=(POS,)),
    A("gammaincc_a", lambda m, a: SP(m).gammaincc(a, 4.5), *UNARY, domain=(POS,)),
    A("gammainc_ax", lambda m, a, x: SP(m).gammainc(a, x), *BIN, domain=(POS, POS)),
    A("betainc_x", lambda m, x: SP(m).betainc(2.5, 1.5, x), *UNARY,
      domain=(Interval(0.1, 0.9),)),
    # x = 0.55 puts a, b in (0.1, 3) on both sides of the switch to 1 - I_{1-x}(b, a)
    A("betainc_a", lambda m, a: SP(m).betainc(a, 1.5, 0.55), *UNARY, domain=(POS,)),
    A("betainc_b", lambda m, b: SP(m).betainc(2.5, b, 0.55), *UNARY, domain=(POS,)),
    A("betainc_abx", lambda m, a, b, x: SP(m).betainc(a, b, x),
      ("scalar", ((), (), ())), ("bcast", ((2, 1), (3,), (2, 3))),
      domain=(POS, POS, Interval(0.1, 0.9))),
    # error-function inverses, the normal distribution function
    A("erfinv", lambda m, x: SP(m).erfinv(x), *UNARY, domain=(Interval(-0.9, 0.9),)),
    A("erfcinv", lambda m, x: -SP(m).ndtri(0.5 * x) / math.sqrt(2.0) if _jax(m)
      else SP(m).erfcinv(x), *UNARY, domain=(Interval(0.1, 1.9),)),
    A("ndtr", lambda m, x: SP(m).ndtr(x), *UNARY),
    A("log_ndtr", lambda m, x: SP(m).log_ndtr(x), *UNARY, domain=(Interval(-4.0, 3.0),)),
    A("ndtri", lambda m, x: SP(m).ndtri(x), *UNARY, domain=(PROB,)),
    # Bessel functions (orders constant)
    A("i0", lambda m, x: SP(m).i0(x), *UNARY),
    A("i1", lambda m, x: SP(m).i1(x), *UNARY),
    A("i0e", lambda m, x: SP(m).i0e(x), *UNARY, domain=(AwayFromZero(0.2, 2.0),)),
    A("i1e", lambda m, x: SP(m).i1e(x), *UNARY, domain=(AwayFromZero(0.2, 2.0),)),
    A("j0", lambda m, x: SP(m).j0(x), *UNARY),
    A("j1", lambda m, x: SP(m).j1(x), *UNARY),
    A("y0", lambda m, x: SP(m).y0(x), *UNARY, domain=(Interval(0.5, 3.0),)),
    A("y1", lambda m, x: SP(m).y1(x), *UNARY, domain=(Interval(0.5, 3.0),)),
    A("iv", lambda m, x: SP(m).iv(1.5, x), *UNARY, domain=(Interval(0.3, 3.0),)),
    A("iv_int_order", lambda m, x: SP(m).iv(1.0, x), *UNARY,
      domain=(AwayFromZero(0.2, 2.0),)),
    A("ive", lambda m, x: SP(m).ive(2.0, x), *UNARY, domain=(AwayFromZero(0.2, 2.0),)),
    A("jv", lambda m, x: SP(m).jv(1.5, x), *UNARY, domain=(Interval(0.3, 3.0),)),
    A("yv", lambda m, x: SP(m).yv(0.7, x), *UNARY, domain=(Interval(0.5, 3.0),)),
    A("kv", lambda m, x: SP(m).kv(1.5, x), *UNARY, domain=(Interval(0.3, 3.0),)),
]

#: rows without a JAX counterpart (JAX has no iv, ive, jv, yv, kv, j0, j1, y0, y1,
#: and refuses betainc's derivatives in a and b)
NO_JAX = {"j0", "j1", "y0", "y1", "iv", "iv_int_order", "ive", "jv", "yv", "kv",
          "betainc_a", "betainc_b", "betainc_abx"}   # JAX: no betainc derivative in a, b

# tapead.scipy.stats (scipy.stats / jax.scipy.stats for the peers)
X3 = (("scalar", ((), (), ())), ("array", ((2, 3), (2, 3), (2, 3))),
      ("bcast", ((2, 3), (3,), ())))
X2 = (("scalar", ((), ())), ("array", ((2, 3), (2, 3))), ("bcast", ((2, 3), ())))
K = np.array([0.0, 1.0, 4.0])
NORM = (REAL, Interval(-0.5, 0.5), Interval(0.5, 2.0))


def _mvn(m, x, mean, a):
    cov = m.matmul(a, m.transpose(a)) + 2.0 * m.eye(3, dtype=a.dtype)
    return ST(m).multivariate_normal.logpdf(x, mean, cov)


def _simplex(m, u):
    e = m.exp(u)
    if _module(m) == "numpy":        # scipy's dirichlet wants sum(x) == 1 to 1e-9
        e = np.asarray(e, np.float64)
    return e / m.sum(e)


ARRAY_OPS += [
    A("norm_logpdf", lambda m, x, mu, s: ST(m).norm.logpdf(x, mu, s), *X3, domain=NORM),
    A("norm_pdf", lambda m, x, mu, s: ST(m).norm.pdf(x, mu, s), *X3, domain=NORM),
    A("norm_cdf", lambda m, x, mu, s: ST(m).norm.cdf(x, mu, s), *X3, domain=NORM),
    A("norm_logcdf", lambda m, x, mu, s: ST(m).norm.logcdf(x, mu, s), *X3, domain=NORM),
    A("norm_sf", lambda m, x, mu, s: ST(m).norm.sf(x, mu, s), *X3, domain=NORM),
    A("norm_logsf", lambda m, x, mu, s: ST(m).norm.logsf(x, mu, s), *X3, domain=NORM),
    A("norm_ppf", lambda m, q, mu, s: ST(m).norm.ppf(q, mu, s), *X3,
      domain=(PROB,) + NORM[1:]),
    A("t_logpdf", lambda m, x, df, s: ST(m).t.logpdf(x, df, 0.3, s), *X3,
      domain=(REAL, Interval(1.0, 5.0), Interval(0.5, 2.0))),
    A("t_pdf", lambda m, x, df: ST(m).t.pdf(x, df), *X2, domain=(REAL, Interval(1.0, 5.0))),
    A("gamma_logpdf", lambda m, x, a, s: ST(m).gamma.logpdf(x, a, 0.0, s), *X3,
      domain=(POS, Interval(0.5, 3.0), Interval(0.5, 2.0))),
    A("gamma_pdf", lambda m, x, a: ST(m).gamma.pdf(x, a), *X2,
      domain=(POS, Interval(0.5, 3.0))),
    A("gamma_cdf", lambda m, x, s: ST(m).gamma.cdf(x, 1.7, -0.05, s), *X2,
      domain=(POS, Interval(0.5, 2.0))),
    A("gamma_logcdf", lambda m, x: ST(m).gamma.logcdf(x, 2.5), *UNARY, domain=(POS,)),
    A("gamma_sf", lambda m, x: ST(m).gamma.sf(x, 0.8), *UNARY, domain=(POS,)),
    A("gamma_logsf", lambda m, x: ST(m).gamma.logsf(x, 0.8), *UNARY, domain=(POS,)),
    A("chi2_logpdf", lambda m, x, df: ST(m).chi2.logpdf(x, df), *X2,
      domain=(POS, Interval(1.0, 5.0))),
    A("chi2_pdf", lambda m, x, df: ST(m).chi2.pdf(x, df, 0.0, 1.5), *X2,
      domain=(POS, Interval(1.0, 5.0))),
    A("chi2_cdf", lambda m, x: ST(m).chi2.cdf(x, 3.0), *UNARY, domain=(POS,)),
    A("chi2_sf", lambda m, x: ST(m).chi2.sf(x, 3.0), *UNARY, domain=(POS,)),
    A("beta_logpdf", lambda m, x, a, b: ST(m).beta.logpdf(x, a, b), *X3,
      domain=(Interval(0.1, 0.9), Interval(0.5, 3.0), Interval(0.5, 3.0))),
    A("beta_pdf", lambda m, x, a: ST(m).beta.pdf(x, a, 2.0), *X2,
      domain=(Interval(0.1, 0.9), Interval(0.5, 3.0))),
    A("beta_cdf", lambda m, x: ST(m).beta.cdf(x, 2.0, 3.5), *UNARY,
      domain=(Interval(0.1, 0.9),)),
    A("beta_logsf", lambda m, x: ST(m).beta.logsf(x, 2.0, 3.5), *UNARY,
      domain=(Interval(0.1, 0.9),)),
    A("poisson_logpmf", lambda m, mu: ST(m).poisson.logpmf(K, mu), ("vector", ((3,),)),
      domain=(POS,)),
    A("poisson_pmf", lambda m, mu: ST(m).poisson.pmf(K, mu), *UNARY, domain=(POS,)),
    A("poisson_cdf", lambda m, mu: ST(m).poisson.cdf(K, mu), *UNARY, domain=(POS,)),
    A("dirichlet_logpdf", lambda m, u, al: ST(m).dirichlet.logpdf(_simplex(m, u), al),
      ("vector", ((3,), (3,))), domain=(REAL, Interval(0.5, 3.0))),
    A("dirichlet_pdf", lambda m, u, al: ST(m).dirichlet.pdf(_simplex(m, u), al),
      ("vector", ((3,), (3,))), domain=(REAL, Interval(0.5, 3.0))),
    A("mvn_logpdf", _mvn, ("vector", ((3,), (3,), (3, 3))),
      ("batch", ((4, 3), (3,), (3, 3)))),
    A("mvn_pdf", lambda m, x, mu, a: ST(m).multivariate_normal.pdf(
        x, mu, m.matmul(a, m.transpose(a)) + 2.0 * m.eye(3, dtype=a.dtype)),
      ("vector", ((3,), (3,), (3, 3)))),
]
