"""Shape primitives: reshape, transpose, broadcast_to, indexing, stacking."""
from __future__ import annotations

import numpy as np

from tapead._core import Box, Scatter, bind
from tapead._prims.base import Primitive


def _any_box(*xs):
    return any(isinstance(x, Box) for x in xs)


# reshape ---------------------------------------------------------------------
reshape_p = Primitive("reshape", lambda x, shape: np.reshape(x, shape), saves=(), linear=True)
reshape_p.defvjp(lambda g, ans, x, shape: reshape(g, np.shape(x)))
reshape_p.jvp_batched = lambda tans, ans, vals, params, K: np.reshape(
    tans[0], (K,) + np.shape(ans))


def reshape(x, shape):
    """``np.reshape`` with derivatives (``-1`` allowed)."""
    if isinstance(shape, int):
        shape = (shape,)
    if isinstance(x, Box):
        shape = np.empty(np.shape(x), dtype=np.uint8).reshape(shape).shape
        if shape == np.shape(x):
            return x
        return bind(reshape_p, x, shape=shape)
    return np.reshape(x, shape)


# transpose -------------------------------------------------------------------
def _transpose_impl(x, axes):
    return np.transpose(x, axes)


transpose_p = Primitive("transpose", _transpose_impl, saves=(), linear=True)
transpose_p.defvjp(lambda g, ans, x, axes: transpose(g, tuple(np.argsort(axes))))
transpose_p.jvp_batched = lambda tans, ans, vals, params, K: np.transpose(
    tans[0], (0,) + tuple(a + 1 for a in params["axes"]))


def transpose(x, axes=None):
    """``np.transpose`` with derivatives."""
    nd = np.ndim(x)
    axes = tuple(range(nd))[::-1] if axes is None else tuple(a % nd for a in axes)
    if isinstance(x, Box):
        if axes == tuple(range(nd)):
            return x
        return bind(transpose_p, x, axes=axes)
    return np.transpose(x, axes)


def swapaxes(x, a, b):
    axes = list(range(np.ndim(x)))
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


# broadcast_to ------------------------------------------------------------------
broadcast_p = Primitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                        saves=(), linear=True)


def _broadcast_vjp(g, ans, x, shape):
    from tapead._prims.elementwise import unbroadcast
    return unbroadcast(x, g)


broadcast_p.defvjp(_broadcast_vjp)
broadcast_p.jvp_batched = lambda tans, ans, vals, params, K: np.broadcast_to(
    np.reshape(tans[0], (K,) + (1,) * (len(params["shape"]) - np.ndim(vals[0]))
               + np.shape(vals[0])), (K,) + tuple(params["shape"]))


def broadcast_to(x, shape):
    """``np.broadcast_to`` with derivatives."""
    shape = tuple(shape)
    if isinstance(x, Box):
        if np.shape(x) == shape:
            return x
        return bind(broadcast_p, x, shape=shape)
    return np.broadcast_to(x, shape)


# indexing ----------------------------------------------------------------------
def _index_key(idx):
    """Make an index safe to keep: boxes in it are errors."""
    items = idx if isinstance(idx, tuple) else (idx,)
    for it in items:
        if isinstance(it, Box):
            raise TypeError("an index cannot be a traced value; use an integer "
                            "array or a boolean mask computed from concrete values")
    return idx


getitem_p = Primitive("getitem", lambda x, idx: x[idx], saves=(), linear=True)
def _getitem_vjp(g, ans, x, idx):
    if isinstance(g, Box):
        return index_add_zeros(g, idx, np.shape(x), np.result_type(x.dtype))
    return Scatter(g, idx, np.shape(x), x.dtype)     # added in place by the sweep


getitem_p.defvjp(_getitem_vjp)
getitem_p.jvp_batched = lambda tans, ans, vals, params, K: _batched_getitem(tans[0], params["idx"])


def _batched_getitem(t, idx):
    idx = idx if isinstance(idx, tuple) else (idx,)
    return t[(slice(None),) + idx]


def getitem(x, idx):
    """``x[idx]`` with derivatives (slices, integers, integer arrays, masks)."""
    idx = _index_key(idx)
    if isinstance(x, Box):
        return bind(getitem_p, x, idx=idx)
    return x[idx]


def _is_basic(idx) -> bool:
    """Basic indexing (ints, slices, None, Ellipsis) never repeats an element."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis
               for i in items) or (not isinstance(idx, tuple) and isinstance(idx, np.ndarray)
                                   and idx.dtype == bool)


def _index_add_impl(g, idx, shape, dtype):
    out = np.zeros(shape, dtype=np.result_type(dtype, np.asarray(g).dtype))
    if _is_basic(idx):
        out[idx] += g
    else:
        np.add.at(out, idx, g)
    return out


index_add_p = Primitive("index_add_zeros", _index_add_impl, saves=(), linear=True)
index_add_p.defvjp(lambda g, ans, u, idx, shape, dtype: getitem(g, idx))


def index_add_zeros(g, idx, shape, dtype):
    """zeros(shape) with ``g`` added at ``idx`` (the transpose of indexing)."""
    if isinstance(g, Box):
        return bind(index_add_p, g, idx=idx, shape=shape, dtype=dtype)
    return _index_add_impl(g, idx, shape, dtype)


# concatenate / stack ---------------------------------------------------------
def _concat_impl(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


concat_p = Primitive("concatenate", _concat_impl, saves=(), linear=True)


def _concat_vjp(k, g, ans, *xs, axis=0):
    sizes = [np.shape(x)[axis] for x in xs]
    start = int(np.sum(sizes[:k]))
    sl = [slice(None)] * np.ndim(ans)
    sl[axis] = slice(start, start + sizes[k])
    return getitem(g, tuple(sl))


concat_p.defvjp_any(_concat_vjp)


def concatenate(xs, axis=0):
    """``np.concatenate`` with derivatives."""
    xs = tuple(xs)
    if _any_box(*xs):
        nd = np.ndim(xs[0])
        return bind(concat_p, *xs, axis=axis % nd)
    return np.concatenate(xs, axis=axis)


def stack(xs, axis=0):
    """``np.stack`` with derivatives."""
    xs = tuple(xs)
    if not _any_box(*xs):
        return np.stack(xs, axis=axis)
    nd = np.ndim(xs[0]) + 1
    axis = axis % nd
    expanded = [reshape(x, np.shape(x)[:axis] + (1,) + np.shape(x)[axis:]) for x in xs]
    return concatenate(expanded, axis=axis)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {
    np.reshape: reshape, np.transpose: transpose, np.swapaxes: swapaxes,
    np.broadcast_to: broadcast_to, np.concatenate: concatenate, np.stack: stack,
}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {
    "reshape": lambda x, *s, **kw: reshape(x, s[0] if len(s) == 1 else s, **kw),
    "transpose": lambda x, *axes: transpose(
        x, None if not axes else (axes[0] if len(axes) == 1 else axes)),
    "ravel": lambda x: reshape(x, (-1,)),
    "flatten": lambda x: reshape(x, (-1,)),
    "swapaxes": swapaxes,
}
__all__ = ["reshape", "transpose", "swapaxes", "broadcast_to", "concatenate", "stack"]
