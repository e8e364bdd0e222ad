"""scipy.special: beta and incomplete gamma/beta functions, inverse error
functions and the normal distribution's ``ndtr`` family (exported by
``tapead.scipy.special``).

All are scipy ufuncs: importing this module registers them in the ufunc
table, so ``scipy.special.ndtr(tracer)`` records like
``tapead.scipy.special.ndtr(tracer)``.  Every rule is written with tapead
operations, so it differentiates again.  The incomplete gamma functions
(``gammainc``, ``gammaincc``) have derivatives in ``x`` at every order and in
the shape parameter ``a`` up to order 3 (a series or a continued fraction
differentiated in ``a``: ``gamma_kernel.py``), mixed ones included; a higher
order in ``a`` is refused.  ``betainc`` has them in ``x`` and in ``a`` and
``b`` up to order 3 in (a, b) together (a continued fraction on two-variable
jets: ``beta_kernel.py``); JAX has neither ``a``'s nor ``b``'s.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps

from tapead._core import Box, bind
from tapead._prims import elementwise as ew
from tapead._prims import batching, beta_kernel, gamma_kernel
from tapead._prims.base import Primitive, defelementwise, defzero
from tapead._prims.elementwise import exp, unbroadcast
from tapead._prims.reductions import sum as _sum
from tapead._prims.structural import stack
from tapead._prims.special import (digamma, gammaln, keep_float_dtype, polygamma, xlog1py,
                                   xlogy)
from tapead.errors import NonDifferentiableError

SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
SQRT_2PI = math.sqrt(2.0 * math.pi)

#: scipy.special name -> what tapead does not differentiate, as the coverage page
#: prints it
NOTES: dict = {}


#: scipy ufuncs implemented here (and by the factory below, in tapead._prims.bessel)
UFUNCS: dict = {}


def ufunc_primitive(name, ufunc, partials, argnames):
    """A primitive for the scipy ufunc ``ufunc`` and its user-facing function.

    ``partials[k](ans, *args)`` is the derivative in argument k, or None: no
    derivative there, so a traced argument k is refused with a
    NonDifferentiableError naming ``scipy.special.<name>`` and ``argnames[k]``.
    """
    impl = keep_float_dtype(ufunc)
    prim = Primitive(name, impl, elementwise=True)
    prim.defvjp(*[None if d is None else
                  (lambda g, ans, *a, d=d, k=k: unbroadcast(a[k], g * d(ans, *a)))
                  for k, d in enumerate(partials)])
    prim.defjvp(*[None if d is None else (lambda t, ans, *a, d=d: t * d(ans, *a))
                  for d in partials])
    refused = tuple(k for k, d in enumerate(partials) if d is None)
    prim.nondiff_args = frozenset(refused)
    if refused:
        defelementwise(prim, args=[k for k, d in enumerate(partials) if d is not None])
        NOTES[name] = ("no derivative in " + ", ".join(argnames[k] for k in refused)
                       + " (a traced one is refused)")
    else:
        defelementwise(prim)

    def func(*args):
        if len(args) != len(partials):
            raise TypeError(f"scipy.special.{name} takes {len(partials)} arguments "
                            f"({', '.join(argnames)}); got {len(args)}")
        if not any(isinstance(a, Box) for a in args):
            return impl(*args)
        for k in refused:
            if isinstance(args[k], Box):
                raise NonDifferentiableError(
                    f"scipy.special.{name}: tapead has no derivative in "
                    f"{argnames[k]!r} (argument {k}); pass it as a constant (a plain "
                    f"number or array), or wrap the call in ta.stop_gradient / "
                    f"ta.custom_jvp if you know its derivative")
        return bind(prim, *args)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = (f"``scipy.special.{name}({', '.join(argnames)})``, elementwise"
                    + (f"; {NOTES[name]}." if refused else
                       ", with derivatives in every argument."))
    func.prim = prim
    ew.BY_NAME[name] = func
    UFUNCS[ufunc] = func
    return func


def _unary(name, ufunc, d):
    return ew._unary(name, ufunc, d, ufunc=ufunc)


# gamma family ----------------------------------------------------------------
gammasgn_p = Primitive("gammasgn", sps.gammasgn, saves=(), elementwise=True)
gammasgn_p.defvjp(lambda g, ans, x: None)
gammasgn_p.defjvp(lambda t, ans, x: None)
defzero(gammasgn_p)


def gammasgn(x):
    """``scipy.special.gammasgn``: the sign of the gamma function (derivative zero)."""
    if isinstance(x, Box):
        return bind(gammasgn_p, x)
    return sps.gammasgn(x)


ew.BY_NAME["gammasgn"] = gammasgn
UFUNCS[sps.gammasgn] = gammasgn


def _weak(c):
    """A constant scalar as a Python float (numpy's promotion keeps float32 for it)."""
    return float(c) if np.ndim(c) == 0 and not isinstance(c, Box) else c


def _rgamma_d(x, a):
    """1/Gamma' = -digamma / Gamma: 0 * inf at the poles of Gamma (0, -1, ...),
    where the derivative is (-1)^n n!; tapead refuses there rather than give NaN."""
    _, (xc,) = batching.stacked_values(x)           # under vmap: every lane's
    if np.any((xc <= 0) & (xc == np.floor(xc))):
        raise NonDifferentiableError(
            "scipy.special.rgamma: tapead has no derivative rule at 0, -1, -2, ... (the "
            "poles of gamma); move the point off them or use ta.custom_jvp")
    return -a * digamma(x)


rgamma = _unary("rgamma", sps.rgamma, _rgamma_d)

beta = ufunc_primitive(
    "beta", sps.beta,
    [lambda ans, a, b: ans * (digamma(a) - digamma(a + b)),
     lambda ans, a, b: ans * (digamma(b) - digamma(a + b))], ("a", "b"))
betaln = ufunc_primitive(
    "betaln", sps.betaln,
    [lambda ans, a, b: digamma(a) - digamma(a + b),
     lambda ans, a, b: digamma(b) - digamma(a + b)], ("a", "b"))


def _gammainc_dx(ans, a, x):
    """The gamma density x^(a-1) e^(-x) / Gamma(a)."""
    return exp(xlogy(a - 1.0, x) - x - _weak(gammaln(a)))


# derivatives in a: (d/da)^k gammainc(a, x), k = 1 .. gamma_kernel.MAX_ORDER ---------
def _gammainc_da_impl(a, x, order):
    return np.asarray(gamma_kernel.gammainc_da(a, x, order),
                      dtype=np.result_type(a, x, 1.0))[()]


def _density_da(a, x, order):
    """(d/da)^order of the gamma density exp(h), h = (a-1) log x - x - gammaln(a):
    d/dx of (d/da)^order gammainc, written with tapead operations (``a`` may be
    traced: the rule of the next order in a)."""
    h = [None, ew.log(x) - digamma(a)] + [-polygamma(j - 1, a) for j in range(2, order + 1)]
    return _gammainc_dx(None, a, x) * gamma_kernel.exp_ratios(h)[order]


gammainc_da_p = Primitive("gammainc_da", _gammainc_da_impl, elementwise=True)
gammainc_da_p.defvjp(
    lambda g, ans, a, x, order: unbroadcast(a, g * gammainc_da(a, x, order + 1)),
    lambda g, ans, a, x, order: unbroadcast(x, g * _density_da(a, x, order)))
gammainc_da_p.defjvp(lambda t, ans, a, x, order: t * gammainc_da(a, x, order + 1),
                     lambda t, ans, a, x, order: t * _density_da(a, x, order))
defelementwise(gammainc_da_p)


def gammainc_da(a, x, order=1):
    """``(d/da)^order scipy.special.gammainc(a, x)`` (elementwise), differentiable
    in ``a`` and ``x`` up to ``gamma_kernel.MAX_ORDER`` derivatives in ``a`` in
    all; refuses a higher order, and ``a <= 0`` (where gammainc is not defined
    on both sides of ``a``)."""
    if order > gamma_kernel.MAX_ORDER:
        raise NonDifferentiableError(
            f"scipy.special.gammainc/gammaincc: tapead differentiates them at most "
            f"{gamma_kernel.MAX_ORDER} times in 'a' (this asks for derivative {order} in "
            "a); pass a as a constant, or wrap the call in ta.custom_jvp")
    _, (ac,) = batching.stacked_values(a)           # under vmap: every lane's
    if np.any(ac <= 0):
        raise NonDifferentiableError(
            "scipy.special.gammainc/gammaincc: no derivative in 'a' at a <= 0 (the "
            f"functions are defined for a > 0 only; got a={float(ac.min())!r}); pass a > 0")
    if isinstance(a, Box) or isinstance(x, Box):
        return bind(gammainc_da_p, a, x, order=order)
    return _gammainc_da_impl(a, x, order)


gammainc = ufunc_primitive("gammainc", sps.gammainc,
                           [lambda ans, a, x: gammainc_da(a, x), _gammainc_dx], ("a", "x"))
gammaincc = ufunc_primitive("gammaincc", sps.gammaincc,
                            [lambda ans, a, x: -gammainc_da(a, x),
                             lambda ans, a, x: -_gammainc_dx(ans, a, x)], ("a", "x"))
NOTES["gammainc"] = NOTES["gammaincc"] = (
    f"derivatives in a up to order {gamma_kernel.MAX_ORDER} (a higher one is refused)")


# derivatives in a and b: (d/da)^na (d/db)^nb betainc(a, b, x) ------------------------
def _betainc_dx(ans, a, b, x):
    """The beta density x^(a-1) (1-x)^(b-1) / B(a, b)."""
    return exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - _weak(betaln(a, b)))


def _betainc_dab_impl(a, b, x, na, nb):
    return np.asarray(beta_kernel.betainc_dab(a, b, x, na, nb),
                      dtype=np.result_type(a, b, x, 1.0))[()]


def _beta_density_dab(a, b, x, na, nb):
    """(d/da)^na (d/db)^nb of the beta density (d/dx of the primitive), with
    tapead operations (``a``, ``b`` may be traced)."""
    h = beta_kernel.log_beta_jet(a, b, na, nb, polygamma=polygamma)
    if (1, 0) in h:
        h[1, 0] = h[1, 0] + ew.log(x)
    if (0, 1) in h:
        h[0, 1] = h[0, 1] + ew.log1p(-x)
    return _betainc_dx(None, a, b, x) * beta_kernel.exp2_ratios(h)[na, nb]


betainc_dab_p = Primitive("betainc_dab", _betainc_dab_impl, elementwise=True)
betainc_dab_p.defvjp(
    lambda g, ans, a, b, x, na, nb: unbroadcast(a, g * betainc_dab(a, b, x, na + 1, nb)),
    lambda g, ans, a, b, x, na, nb: unbroadcast(b, g * betainc_dab(a, b, x, na, nb + 1)),
    lambda g, ans, a, b, x, na, nb: unbroadcast(x, g * _beta_density_dab(a, b, x, na, nb)))
betainc_dab_p.defjvp(
    lambda t, ans, a, b, x, na, nb: t * betainc_dab(a, b, x, na + 1, nb),
    lambda t, ans, a, b, x, na, nb: t * betainc_dab(a, b, x, na, nb + 1),
    lambda t, ans, a, b, x, na, nb: t * _beta_density_dab(a, b, x, na, nb))
defelementwise(betainc_dab_p)


def betainc_dab(a, b, x, na, nb):
    """``(d/da)^na (d/db)^nb scipy.special.betainc(a, b, x)`` (elementwise), up to
    ``beta_kernel.MAX_ORDER`` derivatives in a and b in all; refuses a higher
    order, and a <= 0 or b <= 0."""
    if na + nb > beta_kernel.MAX_ORDER:
        raise NonDifferentiableError(
            f"scipy.special.betainc: tapead differentiates it at most "
            f"{beta_kernel.MAX_ORDER} times in 'a' and 'b' together (this asks for "
            f"{na} in a and {nb} in b); pass a and b as constants, or wrap the call in "
            "ta.custom_jvp")
    for name, v in (("a", a), ("b", b)):
        _, (vc,) = batching.stacked_values(v)       # under vmap: every lane's
        if np.any(vc <= 0):
            raise NonDifferentiableError(
                f"scipy.special.betainc: no derivative in {name!r} at {name} <= 0 (the "
                f"function is defined for a, b > 0 only; got {name}={float(vc.min())!r}); "
                f"pass {name} > 0")
    if isinstance(a, Box) or isinstance(b, Box) or isinstance(x, Box):
        return bind(betainc_dab_p, a, b, x, na=na, nb=nb)
    return _betainc_dab_impl(a, b, x, na, nb)


betainc = ufunc_primitive(
    "betainc", sps.betainc,
    [lambda ans, a, b, x: betainc_dab(a, b, x, 1, 0),
     lambda ans, a, b, x: betainc_dab(a, b, x, 0, 1), _betainc_dx], ("a", "b", "x"))
NOTES["betainc"] = (f"derivatives in a, b up to order {beta_kernel.MAX_ORDER} "
                    "(a higher one is refused)")

# Student's t distribution function: stdtr(df, t) ------------------------------
def _t_density(df, t):
    """The t density, d/dt stdtr(df, t), with tapead operations (every order)."""
    half = 0.5 * (df + 1.0)
    return exp(gammaln(half) - gammaln(0.5 * df) - 0.5 * ew.log(df * math.pi)
               - half * ew.log1p(t * t / df))


def _stdtr_ddf(ans, df, t):
    """d stdtr / d df.  With w = df / (df + t^2) and I = betainc(df/2, 1/2, w),
    stdtr = 1 - I/2 for t > 0 and I/2 for t < 0, so the derivative is
    -sign(t)/2 (dI/da / 2 + dI/dw t^2 / (df + t^2)^2); at t = 0 (stdtr = 1/2
    for every df) it is 0, computed at a stand-in t there."""
    zero = batching.elementwise_values(lambda v: np.asarray(v) == 0, batching.value_of(t))
    at_zero = batching.reduce_values(np.any, zero)
    if at_zero:
        if isinstance(t, Box):
            raise NonDifferentiableError(
                "scipy.special.stdtr: at t == 0 tapead has the derivative in df (zero) "
                "but not that derivative's derivative in t (the incomplete beta "
                "function's density is infinite there); move t off 0, or pass df as a "
                "constant")
        t = ew.where(zero, 1.0, t)
    r = df + t * t
    w = df / r
    h = 0.5 * df
    d = 0.5 * betainc_dab(h, 0.5, w, 1, 0) + _betainc_dx(None, h, 0.5, w) * (t * t) / (r * r)
    return -0.5 * ew.sign(t) * (ew.where(zero, 0.0, d) if at_zero else d)


stdtr = ufunc_primitive("stdtr", sps.stdtr,
                        [_stdtr_ddf, lambda ans, df, t: _t_density(df, t)], ("df", "t"))
NOTES["stdtr"] = (f"derivatives in df up to order {beta_kernel.MAX_ORDER} (through "
                  "betainc); at t == 0 the derivative in df is not differentiated again "
                  "in t (refused)")


def multigammaln(a, d):
    """``scipy.special.multigammaln(a, d)``: the log of the multivariate gamma
    function of dimension ``d`` (a constant int), ``d (d - 1) / 4 log(pi) +
    sum_j gammaln(a - (j - 1) / 2)``, differentiable in ``a`` (every order).
    Like scipy, it needs ``a > (d - 1) / 2`` (ValueError otherwise)."""
    if isinstance(d, Box) or np.ndim(d) != 0 or int(d) != d or int(d) < 1:
        raise ValueError(f"multigammaln: d must be a positive integer constant; got {d!r}")
    d = int(d)
    if not isinstance(a, Box):                       # float32 kept, as for the ufuncs
        out = sps.multigammaln(a, d)
        dt = np.result_type(a)
        return np.asarray(out, dtype=dt)[()] if dt.kind == "f" and dt != out.dtype else out
    _, (ac,) = batching.stacked_values(a)            # under vmap: every lane's
    if np.any(ac <= 0.5 * (d - 1)):
        raise ValueError(f"multigammaln: condition a ({float(ac.min())}) > 0.5 * (d-1) "
                         f"({0.5 * (d - 1)}) not met")
    terms = stack([gammaln(a - (j - 1.0) / 2.0) for j in range(1, d + 1)])
    return (d * (d - 1) * 0.25) * math.log(math.pi) + _sum(terms, axis=0)


# error function inverses and the normal distribution ------------------------
erfinv = _unary("erfinv", sps.erfinv, lambda x, a: SQRT_PI_OVER_2 * exp(a * a))
erfcinv = _unary("erfcinv", sps.erfcinv, lambda x, a: -SQRT_PI_OVER_2 * exp(a * a))
ndtr = _unary("ndtr", sps.ndtr, lambda x, a: INV_SQRT_2PI * exp(-0.5 * (x * x)))
log_ndtr = _unary("log_ndtr", sps.log_ndtr,
                  lambda x, a: INV_SQRT_2PI * exp(-0.5 * (x * x) - a))
ndtri = _unary("ndtri", sps.ndtri, lambda x, a: SQRT_2PI * exp(0.5 * (a * a)))

FUNCTIONS = {"gammasgn": gammasgn, "rgamma": rgamma, "beta": beta, "betaln": betaln,
             "gammainc": gammainc, "gammaincc": gammaincc, "betainc": betainc,
             "erfinv": erfinv, "erfcinv": erfcinv, "ndtr": ndtr, "log_ndtr": log_ndtr,
             "ndtri": ndtri, "multigammaln": multigammaln, "stdtr": stdtr}
#: numpy functions (NEP 18): none (these are ufuncs)
NUMPY_FUNCTIONS: dict = {}
