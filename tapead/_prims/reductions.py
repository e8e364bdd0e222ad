"""Reductions: sum and mean (the rest of the family is the numpy-coverage issue)."""
from __future__ import annotations

import numpy as np

from tapead._core import Box, bind
from tapead._prims.base import Primitive


def _norm_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim if ndim else a for a in axis))


def _expand_back(g, x_shape, axis, keepdims):
    """Broadcast a reduced cotangent back to ``x_shape``."""
    from tapead._prims.shape import broadcast_to, reshape
    if not keepdims:
        axes = _norm_axis(axis, len(x_shape))
        kept = tuple(1 if i in axes else n for i, n in enumerate(x_shape))
        g = reshape(g, kept)
    return broadcast_to(g, x_shape)


def _sum_impl(x, axis=None, keepdims=False):
    return np.sum(x, axis=axis, keepdims=keepdims)


sum_p = Primitive("sum", _sum_impl, saves=(), linear=True)
sum_p.defvjp(lambda g, ans, x, axis=None, keepdims=False:
             _expand_back(g, np.shape(x), axis, keepdims))


def _sum_batched(tans, ans, vals, params, K):
    axis = params.get("axis")
    nd = np.ndim(vals[0])
    axes = tuple(a + 1 for a in _norm_axis(axis, nd))
    return np.sum(tans[0], axis=axes, keepdims=params.get("keepdims", False))


sum_p.jvp_batched = _sum_batched


def sum(x, axis=None, keepdims=False):
    """``np.sum`` with derivatives."""
    if isinstance(x, Box):
        return bind(sum_p, x, axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """``np.mean`` with derivatives (a sum times a constant)."""
    shape = np.shape(x)
    n = int(np.prod([shape[a] for a in _norm_axis(axis, len(shape))])) if shape else 1
    s = sum(x, axis=axis, keepdims=keepdims)
    return s * (1.0 / n) if n else s


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.sum: sum, np.mean: mean}
#: methods of traced arrays (x.sum(...)) : name -> function(x, *args, **kw)
TRACER_METHODS = {"sum": sum, "mean": mean}
__all__ = ["sum", "mean"]
