"""Op-spec rows of the scipy functions added with their rules in
tapead/_prims/special_gamma.py (stdtr, multigammaln), bessel.py (yn),
linalg_scipy.py (sqrtm, solve_sylvester, solve_banded) and of
tapead.scipy.stats (t.cdf and friends, multivariate_normal.entropy and
allow_singular=True).

JAX has multigammaln; it has no t.cdf, yn, banded solve, multivariate normal
entropy or singular covariance, and no derivative of sqrtm or
solve_sylvester (a Schur decomposition without rules): those rows are
``NO_JAX`` (the finite-difference checks still run).  The singular
covariance is ``a a^T`` with ``a`` of shape (3, 2), so that perturbing ``a``
keeps its rank, and the point ``mean + a c`` on its support.
"""
from __future__ import annotations

import numpy as np

from opspecs import POS, REAL, Interval
from opspecs import _array_op as A
from opspecs_reductions import _special as SP
from opspecs_scipy_linalg import _sla
from opspecs_special import ST

UNARY = (("scalar", ((),)), ("array", ((2, 3),)))
X3 = (("scalar", ((), (), ())), ("array", ((2, 3), (2, 3), (2, 3))),
      ("bcast", ((2, 3), (3,), ())))
DF = Interval(1.5, 6.0)


def _near_identity(m, x, c=2.0):
    """0.3 x + c I: eigenvalues within 0.3 * 2 * n of c (positive real parts)."""
    n = x.shape[-1]
    return 0.3 * x + c * m.eye(n, dtype=x.dtype)


def _band(m, x):
    """A diagonally dominant (1, 1)-banded matrix in band storage."""
    return x + m.asarray(np.array([[0.0], [4.0], [0.0]]), dtype=x.dtype)


def _f64(x):
    return x.astype(np.float64)


def _singular(m, a, c, mean):
    """scipy computes in float64: a float32 a a^T would not be singular there,
    so the covariance is built in float64 and the result cast back."""
    a64 = _f64(a)
    cov = m.matmul(a64, m.transpose(a64))             # (3, 3) of rank 2
    out = ST(m).multivariate_normal.logpdf(_f64(mean) + m.matmul(a64, _f64(c)), _f64(mean),
                                           cov, allow_singular=True)
    return m.asarray(out).astype(a.dtype)


ARRAY_OPS = [
    # Student's t distribution function (scipy.special.stdtr)
    A("stdtr", lambda m, df, t: SP(m).stdtr(df, t), ("scalar", ((), ())),
      ("bcast", ((3,), (2, 3))), domain=(DF, REAL)),
    A("t_cdf", lambda m, x, df, s: ST(m).t.cdf(x, df, 0.2, s), *X3,
      domain=(REAL, DF, Interval(0.5, 2.0))),
    A("t_logcdf", lambda m, x, df: ST(m).t.logcdf(x, df), ("array", ((2, 3), (2, 3))),
      domain=(REAL, DF)),
    A("t_sf_logsf", lambda m, x, df: ST(m).t.sf(x, df) + ST(m).t.logsf(x, df, -0.1, 1.5),
      ("array", ((2, 3), (2, 3))), domain=(REAL, DF)),
    # multigammaln (d constant), yn (n constant)
    A("multigammaln", lambda m, a: SP(m).multigammaln(a, 3), *UNARY,
      domain=(Interval(1.2, 4.0),)),
    A("yn", lambda m, x: SP(m).yn(2, x) + SP(m).yn(0, x) * SP(m).yn(3, x), *UNARY,
      domain=(Interval(0.5, 3.0),)),
    # the multivariate normal: entropy, singular covariance
    A("mvn_entropy", lambda m, a: ST(m).multivariate_normal.entropy(
        None, m.matmul(a, m.transpose(a)) + 2.0 * m.eye(3, dtype=a.dtype)),
      ("square", ((3, 3),))),
    A("mvn_entropy_singular", lambda m, a: m.asarray(ST(m).multivariate_normal.entropy(
        None, m.matmul(_f64(a), m.transpose(_f64(a))))).astype(a.dtype),
      ("rank2", ((3, 2),))),
    A("mvn_logpdf_singular", _singular, ("rank2", ((3, 2), (2,), (3,)))),
    # scipy.linalg: square root, Sylvester equation, banded solve
    A("sqrtm_spd", lambda m, x: _sla(m).sqrtm(m.matmul(x, m.transpose(x))
                                              + 2.0 * m.eye(3, dtype=x.dtype)),
      ("square", ((3, 3),))),
    A("sqrtm_general", lambda m, x: _sla(m).sqrtm(_near_identity(m, x)), ("square", ((3, 3),))),
    A("solve_sylvester", lambda m, a, b, q: _sla(m).solve_sylvester(
        _near_identity(m, a), _near_identity(m, b, 1.0), q), ("rect", ((3, 3), (2, 2), (3, 2)))),
    A("solve_banded", lambda m, x, b: _sla(m).solve_banded((1, 1), _band(m, x), b),
      ("vector", ((3, 5), (5,))), ("matrix", ((3, 5), (5, 2)))),
    A("solve_banded_wide", lambda m, x, b: _sla(m).solve_banded(
        (2, 1), x + m.asarray(np.array([[0.0], [5.0], [0.0], [0.0]]), dtype=x.dtype), b),
      ("vector", ((4, 5), (5,)))),
]
_ = POS

#: rows without a JAX counterpart (see the module notes)
NO_JAX = {"stdtr", "t_cdf", "t_logcdf", "t_sf_logsf", "yn", "mvn_entropy",
          "mvn_entropy_singular", "mvn_logpdf_singular", "sqrtm_spd", "sqrtm_general",
          "solve_sylvester", "solve_banded", "solve_banded_wide"}
