"""Numerics for the derivatives in the shape parameter ``a`` of the
regularized incomplete gamma functions (the primitive and its rules live in
``special_gamma.py``; this module is plain numpy, like the scipy functions
the other primitives call).

``P(a, x) = gammainc(a, x)`` has no closed-form derivative in ``a``.  The
k-th one comes from the two classical expansions, differentiated in ``a``
with truncated Taylor arithmetic (a *jet* is the list of the value and its
first K derivatives in ``a``):

* where ``x <= 1`` or ``x < a + 1``, the series
  ``P = x^a e^-x / Gamma(a + 1) * sum_n c_n``,
  ``c_n = c_{n-1} x / (a + n)``, ``c_0 = 1`` (terms of one sign);
* elsewhere ``1 - P = Q = x^a e^-x / Gamma(a) * h``, with the continued
  fraction ``h = 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) /
  (x + 5 - a - ...)))`` evaluated by the modified Lentz method on jets.

The prefactor's jet is ``exp`` of the jet of ``a log x - x - gammaln(a + s)``
(digamma and polygamma), kept apart as ratios so nothing overflows.  Each
lane stops when its K-th derivative changes by less than eps times the sum
of the magnitudes it is made of.  Against 50-digit mpmath the relative error
is about 1e-13 for 0.02 <= a <= 300, 1e-3 <= x <= 300 (orders 1 to 3; a
1000 gives 1e-12: the prefactor's own rounding, eps * a log x); tests in
``tests/test_gammainc_shape.py``.
"""
from __future__ import annotations

from math import comb, factorial

import numpy as np
import scipy.special as sps

from tapead.errors import NonDifferentiableError

EPS = float(np.finfo(np.float64).eps)
MAX_TERMS = 100_000
#: the highest derivative order in ``a`` checked against mpmath (tests)
MAX_ORDER = 3


def jet_mul(u, v):
    """The jet of u * v (Leibniz)."""
    return [sum(comb(k, j) * u[j] * v[k - j] for j in range(k + 1)) for k in range(len(u))]


def jet_recip(v):
    """The jet of 1 / v."""
    w = [1.0 / v[0]]
    for k in range(1, len(v)):
        w.append(-w[0] * sum(comb(k, j) * v[j] * w[k - j] for j in range(1, k + 1)))
    return w


def exp_ratios(g):
    """``e_k = (d/da)^k exp(g) / exp(g)`` from the jet ``g`` (``g[0]`` unused);
    works on tapead values too (only + and *)."""
    e = [1.0]
    for k in range(1, len(g)):
        e.append(sum(comb(k - 1, j - 1) * g[j] * e[k - j] for j in range(1, k + 1)))
    return e


def _combine(e, s):
    """The K-th derivative of exp(g) * s divided by exp(g), and the sum of the
    magnitudes of its terms (the scale of its rounding)."""
    K = len(s) - 1
    terms = [comb(K, j) * e[j] * s[K - j] for j in range(K + 1)]
    return sum(terms), sum(np.abs(t) for t in terms)


def _log_prefactor_jet(a, x, K, shift):
    """The jet of ``a log x - x - gammaln(a + shift)``."""
    g = [a * np.log(x) - x - sps.gammaln(a + shift), np.log(x) - sps.digamma(a + shift)]
    return (g + [-sps.polygamma(j - 1, a + shift) for j in range(2, K + 1)])[:K + 1]


def _zeros(a, K):
    return [np.zeros_like(a) for _ in range(K)]


def _drop(idx, state, keep):
    return idx[keep], {k: [w[keep] for w in v] if isinstance(v, list) else v[keep]
                       for k, v in state.items()}


def _series(a, x, K):
    """(d/da)^K P by the series, for lanes with x <= 1 or x < a + 1."""
    out = np.empty_like(a)
    idx = np.arange(a.size)
    g = _log_prefactor_jet(a, x, K, 1.0)
    st = dict(a=a, x=x, g0=g[0], e=[np.ones_like(a)] + exp_ratios(g)[1:],
              c=[np.ones_like(a)] + _zeros(a, K), s=[np.ones_like(a)] + _zeros(a, K))
    st["t"] = _combine(st["e"], st["s"])[0]
    for n in range(1, MAX_TERMS):
        r = st["a"] + n                                  # q = x / (a + n) and its jet
        q = [st["x"] * ((-1) ** k * factorial(k)) / r ** (k + 1) for k in range(K + 1)]
        st["c"] = jet_mul(st["c"], q)
        st["s"] = [s + c for s, c in zip(st["s"], st["c"])]
        t, scale = _combine(st["e"], st["s"])
        done = (st["c"][0] <= EPS * st["s"][0]) & (np.abs(t - st["t"]) <= EPS * scale)
        st["t"] = t
        if done.any():
            out[idx[done]] = np.exp(st["g0"][done]) * t[done]
            idx, st = _drop(idx, st, ~done)
            if idx.size == 0:
                return out
    raise _not_converged(st["a"], st["x"])


def _fraction(a, x, K):
    """(d/da)^K Q by the continued fraction, for lanes with x > 1, x >= a + 1."""
    out = np.empty_like(a)
    idx = np.arange(a.size)
    g = _log_prefactor_jet(a, x, K, 0.0)
    b = ([x + 1.0 - a, -np.ones_like(a)] + _zeros(a, K))[:K + 1]
    D = jet_recip(b)
    # C_0 = inf: the first step gives C_1 = b_1 (h = 0 + 1 / (b_0 + ...))
    st = dict(a=a, x=x, g0=g[0], e=[np.ones_like(a)] + exp_ratios(g)[1:], b=b, D=D,
              h=list(D), C=[np.full_like(a, np.inf)] + _zeros(a, K))
    st["t"] = _combine(st["e"], st["h"])[0]
    for i in range(1, MAX_TERMS):
        a_i = st["a"]
        an = ([-i * (i - a_i), np.full_like(a_i, float(i))] + _zeros(a_i, K))[:K + 1]
        b = [st["b"][0] + 2.0] + st["b"][1:]
        D = jet_recip([u + v for u, v in zip(b, jet_mul(an, st["D"]))])
        C = [u + v for u, v in zip(b, jet_mul(an, jet_recip(st["C"])))]
        delta = jet_mul(C, D)
        h = jet_mul(st["h"], delta)
        t, scale = _combine(st["e"], h)
        done = (np.abs(delta[0] - 1.0) <= EPS) & (np.abs(t - st["t"]) <= EPS * scale)
        st.update(b=b, C=C, D=D, h=h, t=t)
        if done.any():
            out[idx[done]] = np.exp(st["g0"][done]) * t[done]
            idx, st = _drop(idx, st, ~done)
            if idx.size == 0:
                return out
    raise _not_converged(st["a"], st["x"])


def _not_converged(a, x):
    return NonDifferentiableError(
        f"scipy.special.gammainc: the derivative in 'a' did not converge in {MAX_TERMS} "
        f"terms at a={float(a[0])!r}, x={float(x[0])!r}; pass a as a constant there")


def gammainc_da(a, x, order: int = 1):
    """``(d/da)^order gammainc(a, x)``, elementwise, in float64.

    Parameters
    ----------
    a, x : array_like
        Broadcast together; ``a > 0``, ``x >= 0`` (NaN elsewhere, where the
        function itself is not defined on both sides of ``a``).
    order : int
        1 to ``MAX_ORDER``.

    Returns
    -------
    ndarray, float64, of the broadcast shape (0 at ``x = 0`` and ``x = inf``).

    >>> round(float(gammainc_da(1.0, 1.0)), 12)
    -0.431729710635
    """
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.full(a.shape, np.nan)
    ok = (a > 0) & (x >= 0) & np.isfinite(a)
    edge = ok & ((x == 0) | (x == np.inf))
    out[edge] = 0.0
    series = ok & ~edge & ((x <= 1.0) | (x < a + 1.0))
    fraction = ok & ~edge & ~series
    if series.any():
        out[series] = _series(a[series], x[series], order)
    if fraction.any():
        out[fraction] = -_fraction(a[fraction], x[fraction], order)
    return out.reshape(shape)
