"""Op-spec rows of the reductions, sorting and scipy.special families.

Domains keep every point smooth: ``prod``/``cumprod`` away from zero (the
zero entries have their own tests), ``max``/``min``/``sort`` on continuous
random draws (no ties), ``abs``-based norms away from zero.  Bodies reach
scipy.special and linalg through ``_special(m)`` / ``_norm(m)``, which
pick tapead's, scipy's/numpy's or JAX's version for the namespace ``m``; for
tapead the norm is ``np.linalg.norm`` itself (so its dispatch is checked).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opspecs import POS, REAL, AwayFromZero, Interval
from opspecs import _array_op as A


@dataclass(frozen=True)
class Distinct:
    """Shuffled, evenly spaced values on [lo, hi] plus a little noise.

    No two entries are closer than half the spacing, so sorting, max and min
    keep their permutation under the finite-difference steps (float32 too).
    """
    lo: float
    hi: float

    def sample(self, rng, shape):
        n = int(np.prod(shape))
        step = (self.hi - self.lo) / max(n - 1, 1)
        v = np.linspace(self.lo, self.hi, n) + rng.uniform(-0.25, 0.25, n) * step
        return rng.permutation(v).reshape(shape) if shape else float(v[0])


def _module(m):
    return getattr(m, "_module", m).__name__


def _special(m):
    """scipy.special for numpy, jax.scipy.special for jax, tapead.scipy.special."""
    name = _module(m)
    if name.startswith("tapead"):
        import tapead.scipy.special as sp
    elif name.startswith("jax"):
        import jax.scipy.special as sp
    else:
        import scipy.special as sp
    return sp


def _norm(m):
    return m.linalg.norm if _module(m).startswith("jax") else np.linalg.norm


M23 = (("array", ((2, 3),)),)
T232 = (("array", ((2, 3, 2),)),)
V4 = (("vector", ((4,),)),)
UNARY = (("scalar", ((),)), ("array", ((2, 3),)))
NONZERO = (AwayFromZero(0.5, 1.5),)
APART = (Distinct(-2.0, 2.0),)
SP = _special

ARRAY_OPS = [
    # prod (zeros: tests/test_reductions_sorting_special.py)
    A("prod", lambda m, x: m.prod(x), *M23, *V4, domain=NONZERO),
    A("prod_axis0", lambda m, x: m.prod(x, axis=0), *M23, domain=NONZERO),
    A("prod_axis1_keepdims", lambda m, x: m.prod(x, axis=1, keepdims=True), *M23,
      domain=NONZERO),
    A("prod_axes02", lambda m, x: m.prod(x, axis=(0, 2)), *T232, domain=NONZERO),
    # var, std
    A("var", lambda m, x: m.var(x), *M23),
    A("var_axis0", lambda m, x: m.var(x, axis=0), *M23),
    A("var_axis1_ddof1_keepdims", lambda m, x: m.var(x, axis=1, ddof=1, keepdims=True), *M23),
    A("std", lambda m, x: m.std(x), *M23, *V4),
    A("std_axis1", lambda m, x: m.std(x, axis=1), *M23),
    A("std_ddof1_axes02", lambda m, x: m.std(x, axis=(0, 2), ddof=1), *T232),
    # max, min (continuous draws: no ties)
    A("max", lambda m, x: m.max(x), *M23, *V4, domain=APART),
    A("max_axis0", lambda m, x: m.max(x, axis=0), *M23, domain=APART),
    A("max_axis1_keepdims", lambda m, x: m.max(x, axis=1, keepdims=True), *M23, domain=APART),
    A("max_axes02", lambda m, x: m.max(x, axis=(0, 2)), *T232, domain=APART),
    A("min", lambda m, x: m.min(x), *M23, domain=APART),
    A("min_axis1", lambda m, x: m.min(x, axis=1), *M23, domain=APART),
    A("amax_axis_neg1", lambda m, x: m.amax(x, axis=-1), *M23, domain=APART),
    A("amin_axis0_keepdims", lambda m, x: m.amin(x, axis=0, keepdims=True), *M23, domain=APART),
    A("ptp_axis1", lambda m, x: m.ptp(x, axis=1), *M23, domain=APART),
    # logsumexp (and the weights b)
    A("logsumexp", lambda m, x: SP(m).logsumexp(x), *M23),
    A("logsumexp_axis1", lambda m, x: SP(m).logsumexp(x, axis=1), *M23),
    A("logsumexp_axis0_keepdims", lambda m, x: SP(m).logsumexp(x, axis=0, keepdims=True),
      *M23),
    A("logsumexp_large", lambda m, x: SP(m).logsumexp(800.0 * x, axis=1), *M23),
    A("logsumexp_b", lambda m, x, b: SP(m).logsumexp(x, axis=1, b=b),
      ("array", ((2, 3), (2, 3))), ("bcast_b", ((2, 3), (3,))), domain=(REAL, POS)),
    # norm: vectors, axes, matrices
    A("norm", lambda m, x: _norm(m)(x), *V4, *M23),
    A("norm_axis1", lambda m, x: _norm(m)(x, axis=1), *M23),
    A("norm_axis0_keepdims", lambda m, x: _norm(m)(x, axis=0, keepdims=True), *M23),
    A("norm_ord1", lambda m, x: _norm(m)(x, ord=1), *V4, domain=NONZERO),
    A("norm_ordinf", lambda m, x: _norm(m)(x, ord=np.inf), *V4, domain=NONZERO),
    A("norm_ord_neginf_axis1", lambda m, x: _norm(m)(x, ord=-np.inf, axis=1), *M23,
      domain=NONZERO),
    A("norm_ord3", lambda m, x: _norm(m)(x, ord=3), *V4, domain=NONZERO),
    A("norm_fro", lambda m, x: _norm(m)(x, ord="fro"), *M23),
    A("norm_matrix1", lambda m, x: _norm(m)(x, ord=1), *M23, domain=NONZERO),
    A("norm_matrixinf", lambda m, x: _norm(m)(x, ord=np.inf), *M23, domain=NONZERO),
    A("norm_matrix1_axes20", lambda m, x: _norm(m)(x, ord=1, axis=(2, 0)), *T232,
      domain=NONZERO),
    # cumsum, cumprod
    A("cumsum", lambda m, x: m.cumsum(x), *M23),
    A("cumsum_axis0", lambda m, x: m.cumsum(x, axis=0), *M23),
    A("cumsum_axis1", lambda m, x: m.cumsum(x, axis=1), *M23),
    A("cumprod", lambda m, x: m.cumprod(x), *M23, domain=NONZERO),
    A("cumprod_axis1", lambda m, x: m.cumprod(x, axis=1), *M23, domain=NONZERO),
    A("cumprod_axis0", lambda m, x: m.cumprod(x, axis=0), *T232, domain=NONZERO),
    # sorting (continuous draws: no ties); index outputs used as indices
    A("sort", lambda m, x: m.sort(x), *M23, domain=APART),
    A("sort_axis0", lambda m, x: m.sort(x, axis=0), *M23, domain=APART),
    A("sort_flat", lambda m, x: m.sort(x, axis=None), *M23, domain=APART),
    A("argsort_gather", lambda m, x: x[m.argsort(x)], *V4, domain=APART),
    A("argmax_gather", lambda m, x: m.reshape(x, (-1,))[m.argmax(x)], *M23, domain=APART),
    A("argmin_gather", lambda m, x: m.reshape(x, (-1,))[m.argmin(x)], *M23, domain=APART),
    # scipy.special
    A("erf", lambda m, x: SP(m).erf(x), *UNARY),
    A("erfc", lambda m, x: SP(m).erfc(x), *UNARY),
    A("expit", lambda m, x: SP(m).expit(x), *UNARY),
    A("logit", lambda m, x: SP(m).logit(x), *UNARY, domain=(Interval(0.1, 0.9),)),
    A("gammaln", lambda m, x: SP(m).gammaln(x), *UNARY, domain=(Interval(0.5, 4.0),)),
    A("gamma", lambda m, x: SP(m).gamma(x), *UNARY, domain=(Interval(0.5, 3.0),)),
    A("digamma", lambda m, x: SP(m).digamma(x), *UNARY, domain=(Interval(0.5, 4.0),)),
    A("polygamma1", lambda m, x: SP(m).polygamma(1, x), *UNARY,
      domain=(Interval(0.5, 4.0),)),
    A("xlogy", lambda m, x, y: SP(m).xlogy(x, y),
      ("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))), domain=(REAL, POS)),
    A("xlog1py", lambda m, x, y: SP(m).xlog1py(x, y), ("array", ((2, 3), (2, 3))),
      domain=(REAL, Interval(-0.5, 2.0))),
    A("softmax_axis1", lambda m, x: SP(m).softmax(x, axis=1) ** 2, *M23),   # sum(softmax) = 1
    A("log_softmax", lambda m, x: SP(m).log_softmax(x), *M23),
]
del A
