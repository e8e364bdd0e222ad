"""Reductions: sum, mean, prod, var/std, max/min, norm, cumsum/cumprod, logsumexp.

Conventions at non-smooth points (docs/nonsmooth.md pins them in tests):

* ``max``/``min`` split the cotangent evenly among tied elements (like
  JAX, and like ``maximum(x, x)``, which gives 0.5 to each side);
* ``prod`` is differentiated without dividing by zero: with one zero entry
  the derivative at the zero is the product of the others (exact at every
  order; with several zeros in one slice the rule builds an n-by-n array per
  slice, n the reduced length);
* ``norm`` (2-norm) at the zero vector has the derivative ``nan`` (0/0), as
  in JAX: ``sqrt`` has no derivative at 0.

Rules are written with tapead operations; masks and weights computed from
concrete values are constants (the derivative of max is piecewise constant).
"""
from __future__ import annotations

import numpy as np
import scipy.special as sps

from tapead._core import Box, bind, concrete, is_complex, shape_of
from tapead import _core, patterns
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead._prims.construct import _contains_box, array
from tapead._prims.elementwise import absolute, conjugate, exp, log, real, sqrt, where
from tapead._prims.shape import getitem, reshape, transpose
from tapead._prims.structural import (_batched_axes, _expand_back, _float_dtype, _norm_axis,
                                      _reject, sum as _sum)


def _as_const(a, like):
    """A numpy constant in like's (floating) dtype: rules must not promote float32."""
    return np.asarray(a, dtype=_float_dtype(like))


def _pack(x):
    """A Python list/tuple holding traced values as one traced array (numpy
    would convert it to an array first, dropping the derivative)."""
    if isinstance(x, (list, tuple)):
        if _contains_box(x):
            return array(x)
    return x


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
        where=np._NoValue, **kw):
    """``np.sum`` with derivatives (a Python list of traced values is packed
    into one traced array first)."""
    return _sum(_pack(a), axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                initial=initial, where=where, **kw)


def _count(shape, axis):
    return int(np.prod([shape[a] for a in _norm_axis(axis, len(shape))])) if shape else 1


def mean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    """``np.mean`` with derivatives (a sum times a constant)."""
    a = _pack(a)
    if not isinstance(a, Box):
        return np.mean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    _reject("mean", dtype, out, a, **kw)
    n = _count(np.shape(a), axis)
    s = sum(a, axis=axis, keepdims=keepdims)
    return s * (1.0 / n) if n else s


def _abs2(x):
    """|x|^2 elementwise: x * x, or Re(x conj(x)) for complex x (as numpy's var/norm)."""
    if is_complex(x):
        return real(x * conjugate(x))
    return x * x


# var, std: composites (mean, subtract, square, sum), so every order is exact -----
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    """``np.var`` with derivatives (``ddof`` as numpy: divide by n - ddof)."""
    a = _pack(a)
    if not isinstance(a, Box):
        return np.var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    _reject("var", dtype, out, a, **kw)
    n = _count(np.shape(a), axis)
    if n - ddof <= 0:
        raise ValueError(f"var/std: ddof={ddof} leaves no degrees of freedom for {n} "
                         "element(s) per slice; pass a smaller ddof")
    d = a - mean(a, axis=axis, keepdims=True)
    return sum(_abs2(d), axis=axis, keepdims=keepdims) / float(n - ddof)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    """``np.std`` with derivatives.

    Over slices of one element (and ``ddof=0``) the function is identically 0,
    so every derivative is 0; at a constant slice of several elements the
    derivative is nan (sqrt at 0), as in JAX (``docs/nonsmooth.md``).
    """
    a = _pack(a)
    if not isinstance(a, Box):
        return np.std(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    if ddof == 0 and _count(np.shape(a), axis) == 1:
        _reject("std", dtype, out, a, **kw)
        s = sum(a, axis=axis, keepdims=keepdims)
        return (real(s) if is_complex(s) else s) * 0.0     # identically 0 (real, as numpy's)
    return sqrt(var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw))


# max, min: the cotangent goes to the maximisers, split evenly among ties ---------
def _tie_weights(x, ans, axis, keepdims):
    """Constant weights: 1/k on each of the k elements equal to the extremum
    (batched under vmap: the lanes in front, the axes one further)."""
    dtype = _float_dtype(x)

    def weights(xc, ac, lead):
        xc, ac = np.asarray(concrete(xc)), np.asarray(concrete(ac))
        axes = tuple(a + lead for a in _norm_axis(axis, xc.ndim - lead))
        if not keepdims:
            ac = np.expand_dims(ac, axes)
        hit = xc == ac
        count = np.maximum(np.sum(hit, axis=axes, keepdims=True), 1)
        return np.asarray(hit / count, dtype=dtype)
    if batching.batched_in(x, ans) is None and _core.any_recorded(x, ans):
        # a tape that will be replayed: the ties are found again on each replay
        return batching.computed(lambda xc, ac: weights(xc, ac, 0), x, ans)
    trace, (xc, ac) = batching.stacked_values(x, ans)
    lead = trace is not None
    w = weights(xc, ac, int(lead))
    return trace.box(w, 0) if lead else w


def _extremum(name, npfunc):
    prim = Primitive(name, lambda x, axis=None, keepdims=False:
                     npfunc(x, axis=axis, keepdims=keepdims), saves=(0,))
    prim.defvjp(lambda g, ans, x, axis=None, keepdims=False:
                _expand_back(g, np.shape(x), axis, keepdims)
                * _tie_weights(x, ans, axis, keepdims))
    prim.defjvp(lambda t, ans, x, axis=None, keepdims=False:
                sum(t * _tie_weights(x, ans, axis, keepdims), axis=axis, keepdims=keepdims))

    def batched(tans, ans, vals, params, K):
        axis, keepdims = params.get("axis"), params.get("keepdims", False)
        w = _tie_weights(vals[0], ans, axis, keepdims)
        return np.sum(tans[0] * w, axis=_batched_axes(axis, np.ndim(vals[0])),
                      keepdims=keepdims)
    prim.defbatched(batched)
    prim.defvmap(batching.axis_rule(prim))
    prim.defsparsity(patterns.REDUCTION, reason="which element is the extremum moves with "
                     "the values: structurally the whole group along the axis")
    # complex values are ordered lexicographically (real part, then imaginary part)
    # by numpy and JAX alike; the extremum is then one of the elements, so the
    # rules (select it, split ties) hold for complex values as they are
    prim.complex_ok = True

    def func(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue,
             **kw):
        if not isinstance(a, Box):
            return npfunc(a, axis=axis, out=out, keepdims=keepdims, initial=initial,
                          where=where, **kw)
        _reject(name, None, out, a, initial=initial, where=where, **kw)
        if 0 in shape_of(a):
            raise ValueError(f"{name} of an empty array has no value; pass a non-empty "
                             "array (initial= is not supported on traced values)")
        return bind(prim, a, axis=axis, keepdims=keepdims)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = (f"``np.{name}`` with derivatives: the cotangent goes to the "
                    f"{name}imising elements, split evenly among ties (like JAX).")
    func.prim = prim
    return func


max = _extremum("max", np.max)  # noqa: A001
min = _extremum("min", np.min)  # noqa: A001
amax = max
amin = min


def ptp(a, axis=None, out=None, keepdims=False):
    """``np.ptp`` (max - min) with derivatives."""
    if not isinstance(a, Box):
        return np.ptp(a, axis=axis, out=out, keepdims=keepdims)
    return max(a, axis, out, keepdims) - min(a, axis, out, keepdims)


# prod: partial derivatives without dividing by zero ------------------------------
def _to_last(x, axes):
    """Move ``axes`` to the end and flatten them: shape (rest..., n)."""
    shape = np.shape(x)
    rest = tuple(i for i in range(len(shape)) if i not in axes)
    perm = rest + tuple(axes)
    n = _count(shape, axes)
    return reshape(transpose(x, perm), tuple(shape[i] for i in rest) + (n,)), perm


def _from_last(y, shape, perm):
    y = reshape(y, tuple(shape[i] for i in perm))
    return transpose(y, tuple(int(i) for i in np.argsort(perm)))


def _others(xm):
    """prod over j != i of xm[..., j], for each i (last axis): an n-by-n product."""
    n = np.shape(xm)[-1]
    y = where(np.eye(n, dtype=bool), 1.0, reshape(xm, np.shape(xm)[:-1] + (1, n)))
    return prod(y, axis=-1)


def _prod_partials(x, ans, axis, keepdims):
    """d prod(x) / dx, shaped like x, written with tapead operations."""
    shape = np.shape(x)
    axes = _norm_axis(axis, len(shape))
    zero = batching.elementwise_values(lambda v: np.asarray(v) == 0, batching.value_of(x))
    if not batching.reduce_values(np.any, zero):
        return _expand_back(ans, shape, axes, keepdims) / x
    nzero = batching.reduce_values(np.sum, zero, axis=axes, keepdims=True)
    if batching.reduce_values(lambda v, **kw: np.max(v, **kw) <= 1, nzero):
        # z: x with its zero replaced by 1 (no zeros); u: x's zero, 1 elsewhere.
        # prod(x) = prod(z) prod(u); d/dx_k at the zero is prod(z); elsewhere
        # prod(z) prod(u) / z_j.  Both are identities near x, so exact at every order.
        z = where(zero, 1.0, x)
        u = where(zero, x, 1.0)
        pz = _expand_back(prod(z, axis=axes, keepdims=True), shape, axes, True)
        pu = _expand_back(prod(u, axis=axes, keepdims=True), shape, axes, True)
        return where(zero, pz, pz * pu / z)
    xm, perm = _to_last(x, axes)
    return _from_last(_others(xm), shape, perm)


def _prod_impl(x, axis=None, keepdims=False):
    return np.prod(x, axis=axis, keepdims=keepdims)


prod_p = Primitive("prod", _prod_impl, saves=(0,))
prod_p.defvjp(lambda g, ans, x, axis=None, keepdims=False:
              _expand_back(g, np.shape(x), axis, keepdims)
              * _prod_partials(x, ans, axis, keepdims))
prod_p.defjvp(lambda t, ans, x, axis=None, keepdims=False:
              sum(t * _prod_partials(x, ans, axis, keepdims), axis=axis, keepdims=keepdims))


def _prod_batched(tans, ans, vals, params, K):
    axis, keepdims = params.get("axis"), params.get("keepdims", False)
    p = _prod_partials(vals[0], ans, axis, keepdims)
    return np.sum(tans[0] * p, axis=_batched_axes(axis, np.ndim(vals[0])), keepdims=keepdims)


prod_p.defbatched(_prod_batched)
prod_p.defvmap(batching.axis_rule(prod_p))
prod_p.defsparsity(patterns.REDUCTION)
prod_p.complex_ok = True      # holomorphic: the partials hold for complex values


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
        where=np._NoValue, **kw):
    """``np.prod`` with derivatives, exact at zero entries (see the module notes)."""
    a = _pack(a)
    if not isinstance(a, Box):
        return np.prod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                       where=where, **kw)
    _reject("prod", dtype, out, a, initial=initial, where=where, **kw)
    return bind(prod_p, a, axis=_norm_axis(axis, np.ndim(a)), keepdims=keepdims)


# cumsum, cumprod ------------------------------------------------------------------
def _flip(x, axis):
    idx = [slice(None)] * np.ndim(x)
    idx[axis] = slice(None, None, -1)
    return getitem(x, tuple(idx))


def _rev_cumsum(x, axis):
    return _flip(cumsum(_flip(x, axis), axis), axis)


cumsum_p = Primitive("cumsum", lambda x, axis: np.cumsum(x, axis=axis), saves=(),
                     linear=True)
cumsum_p.defvjp(lambda g, ans, x, axis: _rev_cumsum(g, axis))
cumsum_p.defbatched(lambda tans, ans, vals, params, K: np.cumsum(
    tans[0], axis=params["axis"] + 1))
cumsum_p.defsparsity(patterns.CUMULATIVE)
cumsum_p.complex_ok = True      # linear: the same rule holds for complex values
cumsum_p.defvmap(batching.axis_rule(cumsum_p))


def _flat_axis(name, x, axis):
    """numpy's axis=None means 'flattened'; returns (x, int axis)."""
    if axis is None or np.ndim(x) == 0:
        return reshape(x, (-1,)), 0
    return x, int(axis) % np.ndim(x)


def cumsum(a, axis=None, dtype=None, out=None):
    """``np.cumsum`` with derivatives (``axis=None`` flattens, like numpy)."""
    if not isinstance(a, Box):
        return np.cumsum(a, axis=axis, dtype=dtype, out=out)
    _reject("cumsum", dtype, out, a)
    a, axis = _flat_axis("cumsum", a, axis)
    return bind(cumsum_p, a, axis=axis)


def _cumprod_jacobian(x, axis):
    """J[..., k, i] = d cumprod(x)_k / d x_i along ``axis`` (moved last), zero-safe."""
    xm, perm = _to_last(x, (axis,))
    n = np.shape(xm)[-1]
    tril = np.tril(np.ones((n, n), dtype=bool))
    y = where(tril, reshape(xm, np.shape(xm)[:-1] + (1, n)), 1.0)     # row k: x_0..x_k
    jac = _prod_partials(y, prod(y, axis=-1), -1, False)
    return where(tril, jac, 0.0), perm


def _has_zero(x):
    return batching.any_value(lambda v: np.asarray(v) == 0, x)


def _cumprod_vjp(g, ans, x, axis):
    if not _has_zero(x):
        return _rev_cumsum(g * ans, axis) / x
    jac, perm = _cumprod_jacobian(x, axis)
    gm, _ = _to_last(g, (axis,))
    gx = sum(reshape(gm, np.shape(gm) + (1,)) * jac, axis=-2)
    return _from_last(gx, np.shape(x), perm)


def _cumprod_jvp(t, ans, x, axis):
    if not _has_zero(x):
        return ans * cumsum(t / x, axis)
    jac, perm = _cumprod_jacobian(x, axis)
    tm, _ = _to_last(t, (axis,))
    tx = sum(reshape(tm, np.shape(tm)[:-1] + (1, np.shape(tm)[-1])) * jac, axis=-1)
    return _from_last(tx, np.shape(x), perm)


cumprod_p = Primitive("cumprod", lambda x, axis: np.cumprod(x, axis=axis), saves=(0,))
cumprod_p.defvjp(_cumprod_vjp)
cumprod_p.defjvp(_cumprod_jvp)


def _cumprod_batched(tans, ans, vals, params, K):
    """The K directions of ``_cumprod_jvp`` at once: its axis moves one place
    right, behind the direction axis; the zero-safe Jacobian is built once."""
    t, x, axis = tans[0], vals[0], params["axis"]
    if not _has_zero(x):
        return ans * cumsum(t / x, axis + 1)
    jac, _ = _cumprod_jacobian(x, axis)               # (rest..., n, n)
    tm, perm = _to_last(t, (axis + 1,))               # (K, rest..., n)
    tx = sum(reshape(tm, np.shape(tm)[:-1] + (1, np.shape(tm)[-1])) * jac, axis=-1)
    return _from_last(tx, np.shape(t), perm)


cumprod_p.defbatched(_cumprod_batched)
cumprod_p.defvmap(batching.axis_rule(cumprod_p))
cumprod_p.defsparsity(patterns.CUMULATIVE)


def cumprod(a, axis=None, dtype=None, out=None):
    """``np.cumprod`` with derivatives, exact at zero entries (``axis=None`` flattens)."""
    if not isinstance(a, Box):
        return np.cumprod(a, axis=axis, dtype=dtype, out=out)
    _reject("cumprod", dtype, out, a)
    a, axis = _flat_axis("cumprod", a, axis)
    return bind(cumprod_p, a, axis=axis)


# logsumexp: stable, a composite whose shift is a constant ---------------------------
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` (``scipy.special.logsumexp``), with derivatives in ``a``
    and in the weights ``b``; public as ``tapead.scipy.special.logsumexp``.

    Parameters
    ----------
    a : (...) array
    axis : None, int or tuple of int
        The axes summed over (None: all).
    b : None or an array broadcastable with ``a``
        Weights (may be traced, may be negative with ``return_sign=True``).
    keepdims : bool
    return_sign : bool
        Return ``(log|sum|, sign)``; the sign is a plain array.

    Returns
    -------
    ``a``'s shape without ``axis`` (length 1 there with ``keepdims``).  Its
    gradient in ``a`` is the softmax ``b * exp(a - logsumexp)``.

    Notes
    -----
    Computed as ``m + log(sum(b * exp(a - m)))`` with ``m`` the (constant)
    maximum, so it neither overflows nor loses the derivative: the result
    does not depend on ``m``.  With ``return_sign=True`` returns
    ``(log|sum|, sign)``, the sign a plain array.  scipy's own
    ``scipy.special.logsumexp`` cannot see traced values (it converts them to
    numpy arrays): call this one.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.special import logsumexp
    >>> x = np.array([1000.0, 1000.0 + np.log(3.0)])
    >>> print(round(float(logsumexp(x)), 10), np.round(ta.grad(logsumexp)(x), 12))
    1001.3862943611 [0.25 0.75]
    """
    if not isinstance(a, Box) and not isinstance(b, Box):
        return sps.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
    shape = shape_of(a) if b is None else np.broadcast_shapes(shape_of(a), np.shape(b))
    axes = _norm_axis(axis, len(shape))

    def shift(ac):                 # the max (a constant), one lane's under vmap
        ac = np.broadcast_to(np.asarray(ac), shape)
        m = np.max(ac, axis=axes, keepdims=True) if ac.size else np.zeros((1,) * ac.ndim)
        return _as_const(np.where(np.isfinite(m), m, 0), a)
    m = batching.lanes_constant(shift, a)
    e = exp(a - m)
    if b is not None:
        e = b * e
    s = sum(e, axis=axes, keepdims=True)
    sign = None
    if return_sign:
        sign = batching.elementwise_values(np.sign, s)      # recorded under ta.jit
        s = absolute(s)
    out = log(s) + m
    if not keepdims:
        out = reshape(out, tuple(n for i, n in enumerate(np.shape(out)) if i not in axes))
        if sign is not None:
            sign = np.reshape(sign, np.shape(out))
    return (out, sign) if return_sign else out


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {
    np.sum: sum, np.mean: mean, np.prod: prod, np.var: var, np.std: std,
    np.max: max, np.min: min, np.amax: amax, np.amin: amin, np.ptp: ptp,
    np.cumsum: cumsum, np.cumprod: cumprod,
}
#: methods of traced arrays (x.sum(...)) : name -> function(x, *args, **kw)
TRACER_METHODS = {"sum": sum, "mean": mean, "prod": prod, "var": var, "std": std,
                  "max": max, "min": min, "cumsum": cumsum, "cumprod": cumprod}
__all__ = ["sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "ptp",
           "cumsum", "cumprod"]
