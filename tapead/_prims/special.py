"""scipy.special functions with derivatives (exported by ``tapead.scipy.special``).

The elementwise ones are scipy ufuncs: importing this module registers them
in the ufunc table, so ``scipy.special.erf(tracer)`` records like
``tapead.scipy.special.erf(tracer)``.  ``logsumexp``, ``softmax``,
``log_softmax`` and ``polygamma`` are plain Python functions in scipy (no
dispatch protocol): call the tapead versions on traced values.

Derivative chain: ``gammaln' = digamma``, ``digamma' = polygamma(1, .)``,
``polygamma(n, .)' = polygamma(n + 1, .)``: every order is available.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps

from tapead._core import Box, bind
from tapead._prims import elementwise as ew
from tapead._prims.base import Primitive, defelementwise
from tapead._prims.elementwise import exp, log, log1p, sigmoid, unbroadcast
from tapead._prims.reductions import logsumexp

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# polygamma(n, x): n a constant integer ------------------------------------------
def _polygamma_impl(x, n):
    out = sps.polygamma(n, x)
    dt = np.result_type(x)
    if np.issubdtype(dt, np.floating) and np.result_type(out) != dt:   # float32 in
        out = np.asarray(out, dtype=dt)[()]
    return out


polygamma_p = Primitive("polygamma", _polygamma_impl, elementwise=True)
polygamma_p.defvjp(lambda g, ans, x, n: g * polygamma(n + 1, x))
polygamma_p.defjvp(lambda t, ans, x, n: t * polygamma(n + 1, x))
defelementwise(polygamma_p)


def polygamma(n, x):
    """``scipy.special.polygamma(n, x)`` with derivatives in ``x`` (``n`` an integer >= 0).

    Parameters
    ----------
    n : int
        The order, a constant (no derivative in ``n``).
    x : array_like
        Any shape.

    Returns
    -------
    array
        ``x``'s shape; its derivative is ``polygamma(n + 1, x)``.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.special import polygamma
    >>> bool(np.isclose(ta.grad(lambda x: polygamma(0, x))(1.0), np.pi ** 2 / 6))
    True
    """
    n_int = int(n) if np.ndim(n) == 0 and float(n) == int(n) else None
    if n_int is None or n_int < 0:
        raise ValueError(f"polygamma: n must be a non-negative integer constant; got {n!r}")
    if isinstance(x, Box):
        return bind(polygamma_p, x, n=n_int)
    return _polygamma_impl(x, n_int)


# unary ufuncs: name, scipy ufunc, d(x, ans) ----------------------------------------
U = ew._unary
digamma = U("digamma", sps.digamma, lambda x, a: polygamma(1, x), ufunc=sps.digamma)
psi = digamma
gammaln = U("gammaln", sps.gammaln, lambda x, a: digamma(x), ufunc=sps.gammaln)
gamma = U("gamma", sps.gamma, lambda x, a: a * digamma(x), ufunc=sps.gamma)
erf = U("erf", sps.erf, lambda x, a: TWO_OVER_SQRT_PI * exp(-(x * x)), ufunc=sps.erf)
erfc = U("erfc", sps.erfc, lambda x, a: -TWO_OVER_SQRT_PI * exp(-(x * x)), ufunc=sps.erfc)
# holomorphic (scipy takes complex z): the rules hold for complex values, in
# JAX's convention (the cotangent times f'(z)); JAX's own erf refuses complex
erf.prim.complex_ok = erfc.prim.complex_ok = True
logit = U("logit", sps.logit, lambda x, a: 1.0 / (x * (1.0 - x)), ufunc=sps.logit)
expit = sigmoid                      # the same function as tapead.numpy.sigmoid
del U


def keep_float_dtype(ufunc):
    """``ufunc`` returning numpy's result type of its arguments (scipy computes
    ``xlogy(1.5, float32)`` in float64; Python numbers are weak, so tapead keeps
    float32 there, as for numpy's own ufuncs)."""
    def impl(*args):
        out = ufunc(*args)
        dt = np.result_type(*args)
        if np.issubdtype(dt, np.floating) and np.result_type(out) != dt:
            out = np.asarray(out, dtype=dt)[()]
        return out
    impl.__name__ = impl.__qualname__ = ufunc.__name__
    return impl


# binary ufuncs: xlogy(x, y) = x log y, xlog1py(x, y) = x log(1 + y), 0 where x == 0
def _binary(name, npfunc, dx, dy):
    npfunc = keep_float_dtype(ufunc := npfunc)
    prim = Primitive(name, npfunc, elementwise=True)
    prim.defvjp(lambda g, ans, x, y: unbroadcast(x, g * dx(x, y)),
                lambda g, ans, x, y: unbroadcast(y, g * dy(x, y)))
    prim.defjvp(lambda t, ans, x, y: t * dx(x, y), lambda t, ans, x, y: t * dy(x, y))
    defelementwise(prim)

    def func(x, y):
        if isinstance(x, Box) or isinstance(y, Box):
            return bind(prim, x, y)
        return npfunc(x, y)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = f"``scipy.special.{name}`` with derivatives in both arguments."
    func.prim = prim
    ew.BY_NAME[name] = func
    ew.UFUNCS[ufunc] = func
    return func


xlogy = _binary("xlogy", sps.xlogy, lambda x, y: log(y), lambda x, y: x / y)
xlog1py = _binary("xlog1py", sps.xlog1py, lambda x, y: log1p(y), lambda x, y: x / (1.0 + y))


# softmax and friends: composites of logsumexp ------------------------------------
def log_softmax(x, axis=None):
    """``scipy.special.log_softmax`` with derivatives.

    Parameters
    ----------
    x : array_like
        Any shape.
    axis : int or tuple of int, optional
        Normalised over these axes (all of them when None).

    Returns
    -------
    array
        ``x - logsumexp(x, axis, keepdims=True)``, ``x``'s shape.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.special import log_softmax
    >>> J = ta.jacrev(log_softmax)(np.array([0.0, np.log(3.0)]))
    >>> print(np.round(J, 12))
    [[ 0.75 -0.75]
     [-0.25  0.25]]
    """
    if not isinstance(x, Box):
        return sps.log_softmax(x, axis=axis)
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x, axis=None):
    """``scipy.special.softmax`` with derivatives.

    Parameters
    ----------
    x : array_like
        Any shape.
    axis : int or tuple of int, optional
        Normalised over these axes (all of them when None).

    Returns
    -------
    array
        ``exp(log_softmax(x, axis))``, ``x``'s shape.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.special import softmax
    >>> print(np.round(softmax(np.array([0.0, np.log(3.0)])), 12))
    [0.25 0.75]
    >>> g = ta.grad(lambda x: softmax(x)[1])(np.array([0.0, np.log(3.0)]))
    >>> print(np.round(g, 12))
    [-0.1875  0.1875]
    """
    if not isinstance(x, Box):
        return sps.softmax(x, axis=axis)
    return exp(log_softmax(x, axis=axis))


#: scipy ufuncs this module implements for tracers
UFUNCS = {sps.digamma: digamma, sps.gammaln: gammaln, sps.gamma: gamma,
                 sps.erf: erf, sps.erfc: erfc, sps.logit: logit, sps.expit: expit,
                 sps.xlogy: xlogy, sps.xlog1py: xlog1py}

#: numpy functions (NEP 18): none (scipy.special's ufuncs dispatch through the ufunc table)
NUMPY_FUNCTIONS: dict = {}
__all__ = ["erf", "erfc", "expit", "logit", "gammaln", "gamma", "digamma", "psi",
           "polygamma", "xlogy", "xlog1py", "logsumexp", "softmax", "log_softmax"]
