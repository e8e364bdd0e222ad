"""Order statistics and NaN-ignoring reductions: median, nansum, nanmean,
nanmax, nanmin -- compositions of sort, where and the reductions, with the
NaN masks guarded on tape replay."""
from __future__ import annotations

import numpy as np

from tapead._core import Box, concrete, guard_value, shape_of
from tapead._prims import elementwise as ew
from tapead._prims.elementwise import where
from tapead._prims.misc import _NO, _along
from tapead._prims.reductions import max as _max, mean as _mean, min as _min, sum as _sum
from tapead._prims.shape import moveaxis, reshape
from tapead._prims.sorting import sort


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


def _keep(y, shape, axis):
    """Restore reduced axes as length 1 (keepdims=True)."""
    nd = len(shape)
    axes = range(nd) if axis is None else (
        [int(ax) % nd for ax in axis] if isinstance(axis, (tuple, list)) else [int(axis) % nd])
    kept = tuple(1 if k in axes else n for k, n in enumerate(shape))
    return reshape(y, kept)


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
    nans = np.any(_nan_mask(s, "median"), axis=ax)
    if nans.any():
        y = where(nans, np.nan, y)
    return _keep(y, shape, axis) if keepdims else y


def _nan_mask(a, what):
    mask = np.isnan(np.asarray(concrete(a)))
    guard_value(a, lambda v: np.isnan(np.asarray(concrete(v))), mask, f"the NaNs of a {what}")
    return mask


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
    return _sum(ew.where(mask, 0.0, a) if mask.any() else a, axis=axis, keepdims=keep)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=_NO, *, where=_NO):
    """``np.nanmean``: the mean of the non-NaN entries."""
    if not isinstance(a, Box):
        kw = {k: v for k, v in (("keepdims", keepdims), ("where", where)) if v is not _NO}
        return np.nanmean(a, axis=axis, dtype=dtype, out=out, **kw)
    _nan_reject("nanmean", dtype=dtype, out=out, where=where)
    keep = keepdims is not _NO and bool(keepdims)
    mask = _nan_mask(a, "nanmean")
    if not mask.any():
        return _mean(a, axis=axis, keepdims=keep)
    count = np.sum(~mask, axis=axis, keepdims=keep)
    dt = np.result_type(concrete(a))
    return _sum(ew.where(mask, 0.0, a), axis=axis, keepdims=keep) / count.astype(dt)


def _nan_extremum(name, npfunc, reduce, fill):
    def func(a, axis=None, out=None, keepdims=_NO, initial=_NO, where=_NO):
        if not isinstance(a, Box):
            kw = {k: v for k, v in (("keepdims", keepdims), ("initial", initial),
                                    ("where", where)) if v is not _NO}
            return npfunc(a, axis=axis, out=out, **kw)
        _nan_reject(name, out=out, initial=initial, where=where)
        keep = keepdims is not _NO and bool(keepdims)
        mask = _nan_mask(a, name)
        if not mask.any():
            return reduce(a, axis=axis, keepdims=keep)
        if np.any(np.all(mask, axis=axis)):
            raise ValueError(f"{name}: an all-NaN slice has no extremum to differentiate")
        return reduce(ew.where(mask, fill, a), axis=axis, keepdims=keep)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = f"``np.{name}``: NaNs are ignored (ties share the derivative)."
    return func


nanmax = _nan_extremum("nanmax", np.nanmax, _max, -np.inf)
nanmin = _nan_extremum("nanmin", np.nanmin, _min, np.inf)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.median: median, np.nansum: nansum, np.nanmean: nanmean,
                   np.nanmax: nanmax, np.nanmin: nanmin}
__all__ = ["median", "nansum", "nanmean", "nanmax", "nanmin"]
