"""Order statistics and NaN-ignoring reductions: median, percentile, quantile,
nansum, nanmean, nanmax, nanmin -- compositions of sort, where and the
reductions, with the NaN masks guarded on tape replay."""
from __future__ import annotations

import numpy as np

from tapead._core import Box, concrete, guard_value, shape_of, lanes_of
from tapead._prims import batching, elementwise as ew
from tapead._prims.elementwise import where
from tapead.compositions.misc import _NO, _along
from tapead._prims.reductions import max as _max, mean as _mean, min as _min, sum as _sum
from tapead._prims.indexing import getitem
from tapead._prims.shape import moveaxis, reshape
from tapead._prims.sorting import sort
from tapead.errors import NonDifferentiableError


# ---------------------------------------------------------------------------
# median and the NaN-ignoring reductions
# ---------------------------------------------------------------------------

def _flatten_axes(a, axis):
    """(array, axis): ``axis`` None or a tuple collapsed to one trailing axis."""
    nd = len(shape_of(a))
    if axis is None:
        return reshape(a, (-1,)), 0
    if isinstance(axis, (tuple, list)):
        axes = sorted(int(ax) % nd for ax in axis)
        rest = [k for k in range(nd) if k not in axes]
        a = moveaxis(a, axes, list(range(nd - len(axes), nd)))
        return reshape(a, tuple(shape_of(a)[:len(rest)]) + (-1,)), len(rest)
    return a, int(axis) % nd


def _kept_shape(shape, axis):
    """``shape`` with the reduced axes as length 1 (keepdims=True)."""
    nd = len(shape)
    axes = range(nd) if axis is None else (
        [int(ax) % nd for ax in axis] if isinstance(axis, (tuple, list)) else [int(axis) % nd])
    return tuple(1 if k in axes else n for k, n in enumerate(shape))


def _keep(y, shape, axis):
    """Restore reduced axes as length 1 (keepdims=True)."""
    return reshape(y, _kept_shape(shape, axis))


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.median`` by a (differentiable) sort: the middle element, or the mean of
    the two middle ones for an even length (each gets half the derivative).  A
    slice holding a NaN has median NaN, as in numpy (the NaN mask is guarded)."""
    if not isinstance(a, Box):
        return np.median(a, axis=axis, out=out, overwrite_input=overwrite_input,
                         keepdims=keepdims)
    if out is not None:
        raise TypeError("np.median(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    shape = shape_of(a)
    s, ax = _flatten_axes(a, axis)
    n = shape_of(s)[ax]
    if n == 0:
        raise ValueError("median of an empty array")
    s = sort(s, axis=ax)
    nd = len(shape_of(s))
    if n % 2:
        y = s[_along(ax, nd, n // 2)]
    else:
        y = (s[_along(ax, nd, n // 2 - 1)] + s[_along(ax, nd, n // 2)]) * 0.5
    nans = batching.reduce_values(np.any, _nan_mask(s, "median"), axis=ax)
    if batching.reduce_values(np.any, nans):
        y = where(nans, np.nan, y)
    return _keep(y, shape, axis) if keepdims else y


def _nan_mask(a, what):
    """Where ``a`` is NaN (guarded on replay; batched under vmap)."""
    return batching.guarded_values(np.isnan, a, f"the NaNs of a {what}")


def _nan_reject(name, **kw):
    bad = sorted(k for k, v in kw.items() if v is not None and v is not _NO)
    if bad:
        raise TypeError(f"{name}({', '.join(k + '=...' for k in bad)}) is not supported on "
                        "traced values")


def nansum(a, axis=None, dtype=None, out=None, keepdims=_NO, initial=_NO, where=_NO):
    """``np.nansum``: NaNs count as zero (and get no derivative)."""
    if not isinstance(a, Box):
        kw = {k: v for k, v in (("keepdims", keepdims), ("initial", initial),
                                ("where", where)) if v is not _NO}
        return np.nansum(a, axis=axis, dtype=dtype, out=out, **kw)
    _nan_reject("nansum", dtype=dtype, out=out, initial=initial, where=where)
    keep = keepdims is not _NO and bool(keepdims)
    mask = _nan_mask(a, "nansum")
    if not batching.reduce_values(np.any, mask):
        return _sum(a, axis=axis, keepdims=keep)
    return _sum(ew.where(mask, 0.0, a), axis=axis, keepdims=keep)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=_NO, *, where=_NO):
    """``np.nanmean``: the mean of the non-NaN entries."""
    if not isinstance(a, Box):
        kw = {k: v for k, v in (("keepdims", keepdims), ("where", where)) if v is not _NO}
        return np.nanmean(a, axis=axis, dtype=dtype, out=out, **kw)
    _nan_reject("nanmean", dtype=dtype, out=out, where=where)
    keep = keepdims is not _NO and bool(keepdims)
    mask = _nan_mask(a, "nanmean")
    if not batching.reduce_values(np.any, mask):
        return _mean(a, axis=axis, keepdims=keep)
    dt = np.result_type(lanes_of(a))
    count = batching.reduce_values(lambda m, **kw: np.sum(~m, **kw).astype(dt), mask,
                                   axis=axis, keepdims=keep)
    return _sum(ew.where(mask, 0.0, a), axis=axis, keepdims=keep) / count


def _nan_extremum(name, npfunc, reduce, fill):
    def func(a, axis=None, out=None, keepdims=_NO, initial=_NO, where=_NO):
        if not isinstance(a, Box):
            kw = {k: v for k, v in (("keepdims", keepdims), ("initial", initial),
                                    ("where", where)) if v is not _NO}
            return npfunc(a, axis=axis, out=out, **kw)
        _nan_reject(name, out=out, initial=initial, where=where)
        keep = keepdims is not _NO and bool(keepdims)
        mask = _nan_mask(a, name)
        if not batching.reduce_values(np.any, mask):
            return reduce(a, axis=axis, keepdims=keep)
        if batching.reduce_values(np.any, batching.reduce_values(np.all, mask, axis=axis)):
            raise ValueError(f"{name}: an all-NaN slice has no extremum to differentiate")
        return reduce(ew.where(mask, fill, a), axis=axis, keepdims=keep)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = f"``np.{name}``: NaNs are ignored (ties share the derivative)."
    return func


nanmax = _nan_extremum("nanmax", np.nanmax, _max, -np.inf)
nanmin = _nan_extremum("nanmin", np.nanmin, _min, np.inf)


# ---------------------------------------------------------------------------
# quantile and percentile (method="linear"): numpy's interpolation, by a sort
# ---------------------------------------------------------------------------

def _neighbours(virtual, n, traced_q):
    """numpy's ``_get_indexes`` and ``_get_gamma``: the sorted positions below and
    above each virtual index and the weight of the upper one.  At the top
    (q = 1) numpy takes the last value twice; with a traced q the pair is the
    last two values with weight 1 instead (same value, and the derivative in q
    is the one-sided one that exists there)."""
    prev = np.floor(virtual)
    nxt = prev + 1
    top = virtual >= n - 1
    if traced_q and n >= 2:
        prev, nxt = np.where(top, n - 2, prev), np.where(top, n - 1, nxt)
    else:
        prev, nxt = np.where(top, -1, prev), np.where(top, -1, nxt)
    return prev, nxt


def _quantile(name, a, q, axis, out, overwrite_input, method, keepdims, weights, scale):
    """numpy's ``_quantile`` for method="linear": the sorted values at the floor
    and ceiling of ``(n - 1) q``, blended by its fractional part ``gamma``
    (numpy's ``_lerp``, so the values agree to the last bit).  A traced ``q``
    gets its derivative through ``gamma``; the positions it selects are
    guarded on tape replay."""
    if out is not None:
        raise TypeError(f"np.{name}(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    if weights is not None or method != "linear":
        what = "weights=" if weights is not None else f"method={method!r}"
        raise NonDifferentiableError(
            f"np.{name}(..., {what}) on traced values: tapead differentiates "
            "method='linear' (numpy's default, without weights) only. Use it, or "
            "np.sort plus indexing for another rule (method='lower': sort(a)[k]).")
    a = a if isinstance(a, Box) else np.asanyarray(a)
    if np.issubdtype(np.result_type(lanes_of(a)), np.complexfloating):
        raise TypeError("a must be an array of real numbers")
    if batching.batched_in(q) is not None:          # under vmap, each lane its own q
        return _quantile_batched_q(name, a, q, axis, keepdims, scale)
    traced_q = isinstance(q, Box)
    q_traced = q
    q = concrete(q) if traced_q else q
    weak_q = type(q) in (int, float)
    q = np.true_divide(q, scale)
    if not (np.all(0 <= q) and np.all(q <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100 else
                         "Quantiles must be in the range [0, 1]")
    if np.ndim(q) > 2:
        raise ValueError("q must be a scalar or 1d")
    shape = shape_of(a)
    s, ax = _flatten_axes(a, axis)
    n = shape_of(s)[ax]
    if n == 0:
        raise ValueError(f"{name} of an empty array")
    s = sort(moveaxis(s, ax, 0), axis=0)
    virtual = np.asanyarray((n - 1) * q)
    prev, nxt = _neighbours(virtual, n, traced_q)
    gamma = np.asanyarray(virtual - prev, dtype=virtual.dtype)
    if traced_q:                      # the same operations on the traced q
        guard_value(q_traced, lambda v: _neighbours(
            np.asanyarray((n - 1) * np.true_divide(concrete(v), scale)), n, True)[0], prev,
            f"the sorted positions np.{name} interpolates between")
        t = (n - 1) * (q_traced / scale) - (float(prev) if weak_q else
                                           prev.astype(virtual.dtype))
    else:
        t = float(gamma) if weak_q else gamma
    prev, nxt = prev.astype(np.intp), nxt.astype(np.intp)
    lo, hi = s[prev], s[nxt]
    diff = hi - lo
    if weak_q:
        y = hi - diff * (1 - t) if float(gamma) >= 0.5 else lo + diff * t
    else:
        lead = gamma.shape + (1,) * (len(shape_of(s)) - 1)
        t = reshape(t, lead) if traced_q else t.reshape(lead)
        y = where(gamma.reshape(lead) >= 0.5, hi - diff * (1 - t), lo + diff * t)
    nans = _nan_mask(s, name)[-1]
    if batching.reduce_values(np.any, nans):
        y = where(nans, np.nan, y)
    if keepdims:
        y = reshape(y, np.shape(q) + _kept_shape(shape, axis))
    return y


def _quantile_batched_q(name, a, q, axis, keepdims, scale):
    """``_quantile`` for a ``q`` batched under vmap (each lane its own q): the
    positions and weights of every lane from the lanes' q values together,
    each lane's neighbours gathered from its own sorted values (a gather by a
    batched index), blended as in ``_quantile`` (``where`` picks numpy's
    ``_lerp`` form, so every lane's value is the one the loop computes)."""
    q_traced = q
    qv = batching.value_of(q)
    qs = batching.elementwise_values(lambda v: np.true_divide(v, scale), qv)
    if batching.any_value(lambda v: ~((0 <= v) & (v <= 1)), qs):
        raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100 else
                         "Quantiles must be in the range [0, 1]")
    q_shape = shape_of(q)
    if len(q_shape) > 2:
        raise ValueError("q must be a scalar or 1d")
    shape = shape_of(a)
    s, ax = _flatten_axes(a, axis)
    n = shape_of(s)[ax]
    if n == 0:
        raise ValueError(f"{name} of an empty array")
    s = sort(moveaxis(s, ax, 0), axis=0)
    prev = batching.guarded_values(
        lambda v: _neighbours(np.asanyarray((n - 1) * np.true_divide(v, scale)), n, True)[0],
        q_traced, f"the sorted positions np.{name} interpolates between")
    virtual = batching.elementwise_values(lambda v: np.asanyarray((n - 1) * v), qs)
    nxt = batching.elementwise_values(lambda v: _neighbours(v, n, True)[1], virtual)
    gamma = batching.elementwise_values(lambda v, p: np.asanyarray(v - p, dtype=v.dtype),
                                        virtual, prev)
    t = (n - 1) * (q_traced / scale) - batching.elementwise_values(
        lambda p, v: p.astype(v.dtype), prev, virtual)
    lo = getitem(s, batching.elementwise_values(lambda p: p.astype(np.intp), prev))
    hi = getitem(s, batching.elementwise_values(lambda p: p.astype(np.intp), nxt))
    diff = hi - lo
    lead = q_shape + (1,) * (len(shape_of(s)) - 1)
    upper = reshape(batching.elementwise_values(lambda g: g >= 0.5, gamma), lead)
    t = reshape(t, lead)
    y = where(upper, hi - diff * (1 - t), lo + diff * t)
    nans = _nan_mask(s, name)[-1]
    if batching.reduce_values(np.any, nans):
        y = where(nans, np.nan, y)
    if keepdims:
        y = reshape(y, q_shape + _kept_shape(shape, axis))
    return y


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """``np.quantile`` (method="linear"), differentiable in ``a`` and ``q``.

    Parameters
    ----------
    a : (...) array
    q : float or (k,) array in [0, 1]
    axis : None, int or tuple of int
    keepdims : bool

    Returns
    -------
    (...) or (k, ...) array: the sorted values at ``(n - 1) q`` along ``axis``,
    linearly interpolated.  The derivative goes to the two neighbouring order
    statistics with weights ``1 - gamma`` and ``gamma`` (ties: as ``np.sort``).
    ``q`` may be traced too: its derivative is ``(n - 1)`` times the gap between
    the two neighbours (one-sided where ``(n - 1) q`` is an integer: from above,
    from below at q = 1).  Other methods and ``weights=`` raise
    ``NonDifferentiableError``.

    >>> import numpy as np, tapead as ta
    >>> ta.grad(lambda x: np.quantile(x, 0.25))(np.array([4.0, 1.0, 3.0, 2.0]))
    array([0.  , 0.25, 0.  , 0.75])
    """
    if not (isinstance(a, Box) or isinstance(q, Box)):
        return np.quantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                           method=method, keepdims=keepdims, weights=weights)
    return _quantile("quantile", a, q, axis, out, overwrite_input, method, keepdims,
                     weights, 1)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """``np.percentile`` (method="linear"): ``quantile(a, q / 100)``, differentiable in
    ``a`` and ``q``; ``q`` is a float or (k,) array in [0, 100] (see ``quantile``)."""
    if not (isinstance(a, Box) or isinstance(q, Box)):
        return np.percentile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                             method=method, keepdims=keepdims, weights=weights)
    return _quantile("percentile", a, q, axis, out, overwrite_input, method, keepdims,
                     weights, 100)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.median: median, np.nansum: nansum, np.nanmean: nanmean,
                   np.nanmax: nanmax, np.nanmin: nanmin, np.quantile: quantile,
                   np.percentile: percentile}
__all__ = ["median", "quantile", "percentile", "nansum", "nanmean", "nanmax", "nanmin"]
