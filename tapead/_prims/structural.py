"""Structural primitives: reshape, transpose, broadcast_to, concatenate, stack
and sum, with ``unbroadcast``.

This set is closed under differentiation: each rule is written with members
of the set (the VJP of ``sum`` broadcasts, the VJP of ``broadcast_to`` sums,
the VJP of a stack or concatenation slices the cotangent through the box's
own indexing), so it sits below every other family and imports none of them.
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, ShapeOnly, bind, is_complex, lanes_of
from tapead import patterns
from tapead._prims import batching
from tapead._prims.base import Primitive


def _any_box(*xs):
    return any(isinstance(x, Box) for x in xs)


# reshape ---------------------------------------------------------------------
reshape_p = Primitive("reshape", lambda x, shape: np.reshape(x, shape), saves=(), linear=True)
reshape_p.defvjp(lambda g, ans, x, shape: reshape(g, np.shape(x)))
reshape_p.complex_ok = True      # linear: the same rule holds for complex values
reshape_p.defbatched(lambda tans, ans, vals, params, K: np.reshape(
    tans[0], (K,) + np.shape(ans)))
reshape_p.defvmap(lambda args, bdims, shape: (reshape(
    batching.to_front(args[0], bdims[0]), (_core.shape_of(args[0])[bdims[0]],) + tuple(shape)),
    0))
_core.set_vmap_fast(reshape_p, "reshape")     # the rule in C for plain lanes
reshape_p.defsparsity(patterns.MOVE)


def reshape(x, shape, order="C", *, copy=None):
    """``np.reshape`` with derivatives (``-1`` allowed; C order only on traced
    values)."""
    if isinstance(shape, int):
        shape = (shape,)
    if isinstance(x, Box):
        if order != "C":
            raise TypeError(f"reshape(..., order={order!r}) on traced values: only C order "
                            "is supported; transpose first (x.T.reshape(...).T is "
                            "Fortran order)")
        old = _core.shape_of(x)
        shape = _resolved_shape(old, shape)
        if shape == old:
            return x
        return bind(reshape_p, x, shape=shape)
    if order == "C" and copy is None:
        return np.reshape(x, shape)
    return np.reshape(x, shape, order=order, copy=copy)


def _resolved_shape(old, shape) -> tuple:
    """``shape`` with its ``-1`` filled in for an array of shape ``old``
    (numpy's error when the sizes cannot match)."""
    try:
        new = tuple(int(s) for s in shape)
    except TypeError:
        new = None
    if new is not None and -1 not in new and all(s >= 0 for s in new):
        size = 1
        for s in old:
            size *= s
        total = 1
        for s in new:
            total *= s
        if total == size:
            return new
    return np.empty(old, dtype=np.uint8).reshape(shape).shape


# transpose -------------------------------------------------------------------
def _transpose_impl(x, axes):
    return np.transpose(x, axes)


transpose_p = Primitive("transpose", _transpose_impl, saves=(), linear=True)
transpose_p.defvjp(lambda g, ans, x, axes: transpose(g, tuple(np.argsort(axes))))
transpose_p.complex_ok = True      # linear: the same rule holds for complex values
transpose_p.defbatched(lambda tans, ans, vals, params, K: np.transpose(
    tans[0], (0,) + tuple(a + 1 for a in params["axes"])))
transpose_p.defvmap(lambda args, bdims, axes: (transpose(
    batching.to_front(args[0], bdims[0]), (0,) + tuple(a + 1 for a in axes)), 0))
_core.set_vmap_fast(transpose_p, "transpose")     # the rule in C for plain lanes
transpose_p.defsparsity(patterns.MOVE)


def transpose(a, axes=None):
    """``np.transpose`` with derivatives."""
    nd = np.ndim(a)
    axes = tuple(range(nd))[::-1] if axes is None else tuple(i % nd for i in axes)
    if isinstance(a, Box):
        if axes == tuple(range(nd)):
            return a
        return bind(transpose_p, a, axes=axes)
    return np.transpose(a, axes)


# broadcast_to ------------------------------------------------------------------
broadcast_p = Primitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                        saves=(), linear=True)


def _broadcast_vjp(g, ans, x, shape):
    return unbroadcast(x, g)


broadcast_p.defvjp(_broadcast_vjp)
broadcast_p.complex_ok = True      # linear: the same rule holds for complex values
broadcast_p.defbatched(lambda tans, ans, vals, params, K: np.broadcast_to(
    np.reshape(tans[0], (K,) + (1,) * (len(params["shape"]) - np.ndim(vals[0]))
               + np.shape(vals[0])), (K,) + tuple(params["shape"])))
broadcast_p.defvmap(lambda args, bdims, shape: (broadcast_to(
    batching.padded(args[0], bdims[0], len(shape)),
    (_core.shape_of(args[0])[bdims[0]],) + tuple(shape)), 0))
_core.set_vmap_fast(broadcast_p, "broadcast_to")     # the rule in C for plain lanes
broadcast_p.defsparsity(patterns.MOVE)


def broadcast_to(array, shape, subok=False):
    """``np.broadcast_to`` with derivatives."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if isinstance(array, Box):
        if np.shape(array) == shape:
            return array
        return bind(broadcast_p, array, shape=shape)
    return np.broadcast_to(array, shape, subok=subok)


# concatenate / stack ---------------------------------------------------------
# ``bounds`` (where each input starts along ``axis``, and the total) is
# computed once at bind time and the node saves none of its inputs, so the
# VJP of input k is one slice of the cotangent and its call carries no
# n-long argument list: reversing a concatenation of n pieces (a stack of the
# n outputs of a loop) costs O(n), not O(n**2).
def _concat_impl(*xs, axis=0, bounds=None, real=()):
    return np.concatenate(xs, axis=axis)


def _real_pieces(xs):
    """The positions of the real pieces when some piece is complex (their
    cotangents keep the real part: the pieces were promoted to complex)."""
    if not any(is_complex(x) for x in xs):
        return ()
    return tuple(k for k, x in enumerate(xs) if not is_complex(x))


def _real_piece(g):
    """The real part of a cotangent (``real`` is an elementwise primitive; a box's
    ``.real`` reaches it through the box's attribute protocol)."""
    return g.real if isinstance(g, Box) else np.real(g)


concat_p = Primitive("concatenate", _concat_impl, saves=(), linear=True)


def _concat_vjp(k, g, ans, axis=0, bounds=None, real=()):
    sl = [slice(None)] * np.ndim(ans)
    sl[axis] = slice(bounds[k], bounds[k + 1])
    g = g[tuple(sl)]          # the box's indexing: getitem
    return _real_piece(g) if k in real else g


def _concat_bounds(xs, axis):
    bounds, total = [0], 0
    for x in xs:
        total += np.shape(x)[axis]
        bounds.append(total)
    return tuple(bounds)


concat_p.defvjp_any(_concat_vjp)
concat_p.complex_ok = True      # linear: the same rule holds for complex values
concat_p.save_fn = lambda vals, ans: ()      # the rule reads ``bounds`` only


def _direction_pieces(tans, ans, vals, K):
    """Each piece's K-direction tangent, shaped ``(K,) + piece shape`` (zeros for
    a piece without one): what the batched rules of concatenate and stack join."""
    dtype = np.result_type(_core.lanes_of(ans))
    return [np.zeros((K,) + np.shape(v), dtype) if t is None else
            t if np.shape(t) == (K,) + np.shape(v) else reshape(t, (K,) + np.shape(v))
            for t, v in zip(tans, vals)]


def _concat_batched(tans, ans, vals, params, K):
    """K directions at once: the tangents concatenated one axis further in."""
    return concatenate(_direction_pieces(tans, ans, vals, K), axis=params["axis"] + 1)


concat_p.defbatched(_concat_batched)
concat_p.defvmap(lambda args, bdims, axis=0, bounds=None, real=(): (concatenate(
    batching.all_front(args, bdims, batching.n_lanes(args, bdims)), axis=axis + 1), 0))
concat_p.defsparsity(patterns.MOVE)


def concatenate(xs, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """``np.concatenate`` with derivatives."""
    xs = tuple(xs)
    if _any_box(*xs):
        _no_out_dtype("concatenate", out, dtype, casting)
        if axis == 0:
            packed = _core.concat_small(xs)     # small vectors: one stack record, in C
            if packed is not None:
                return packed
        nd = np.ndim(xs[0])
        axis = axis % nd
        return bind(concat_p, *xs, axis=axis, bounds=_concat_bounds(xs, axis),
                    real=_real_pieces(xs))
    return np.concatenate(xs, axis=axis, out=out, dtype=dtype, casting=casting)


def _shape(x):
    shape = getattr(x, "shape", None)      # boxes and arrays: no numpy dispatch
    return tuple(shape) if shape is not None else np.shape(x)


# stack: one node for n pieces (a loop's n outputs), not n reshapes and a
# concatenation; like concatenate it saves no inputs, so reversing it is O(n)
def _stack_impl(*xs, axis=0, real=()):
    return np.stack(xs, axis=axis)


stack_p = Primitive("stack", _stack_impl, saves=(), linear=True)
stack_p.save_fn = lambda vals, ans: ()
stack_p.fast_vjp = _core.FAST_VJP["pack"]      # a stack of scalars: the sweep's C loop, same result


def _stack_vjp(k, g, ans, axis=0, real=()):
    if axis == 0:
        gk = g[k]
    else:
        sl = [slice(None)] * np.ndim(ans)
        sl[axis] = k
        gk = g[tuple(sl)]
    return _real_piece(gk) if k in real else gk


stack_p.defvjp_any(_stack_vjp)
stack_p.complex_ok = True      # linear: the same rule holds for complex values


def _stack_batched(tans, ans, vals, params, K):
    """K directions at once: the tangents stacked one axis further in."""
    return stack(_direction_pieces(tans, ans, vals, K), axis=params["axis"] + 1)


stack_p.defbatched(_stack_batched)
stack_p.defvmap(lambda args, bdims, axis=0, real=(): (stack(
    batching.all_front(args, bdims, batching.n_lanes(args, bdims)), axis=axis + 1), 0))
stack_p.defsparsity(patterns.MOVE)


def _no_out_dtype(name, out, dtype, casting):
    if out is not None:
        raise TypeError(f"{name}(..., out=...) cannot write a traced value into an array; "
                        "assign the result instead")
    if dtype is not None:
        raise TypeError(f"{name}(..., dtype=...) on traced values: cast the pieces "
                        "(x.astype(dtype)) before joining them")
    _ = casting


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """``np.stack`` with derivatives: one tape node however many arrays."""
    arrays = tuple(arrays)
    if not _any_box(*arrays):
        return np.stack(arrays, axis=axis, out=out, dtype=dtype, casting=casting)
    _no_out_dtype("stack", out, dtype, casting)
    if axis == 0:
        packed = _core.pack_scalars(arrays)     # scalar tracers: one record, in C
        if packed is not None:
            return packed
    shape = _shape(arrays[0])
    if any(_shape(x) != shape for x in arrays):
        raise ValueError("all input arrays must have the same shape, got "
                         f"{sorted({np.shape(x) for x in arrays})}")
    nd = len(shape) + 1
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd, "stack")
    return bind(stack_p, *arrays, axis=axis % nd, real=_real_pieces(arrays))


def _norm_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    axes = tuple(sorted(int(a) % ndim if ndim else int(a) for a in axis))
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in {axis!r}")
    return axes


def _expand_back(g, x_shape, axis, keepdims):
    """Broadcast a reduced cotangent back to ``x_shape``."""
    if not keepdims:
        axes = _norm_axis(axis, len(x_shape))
        kept = tuple(1 if i in axes else n for i, n in enumerate(x_shape))
        g = reshape(g, kept)
    return broadcast_to(g, x_shape)


def _float_dtype(x):
    dt = np.result_type(lanes_of(x))
    return dt if np.issubdtype(dt, np.floating) else np.dtype(np.float64)


def _reject(name, dtype=None, out=None, x=None, **unsupported):
    """Clear errors for numpy arguments the traced version cannot honour."""
    if out is not None:
        raise TypeError(f"{name}(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    if dtype is not None and x is not None and np.dtype(dtype) != _float_dtype(x):
        raise TypeError(f"{name}(..., dtype={np.dtype(dtype)}) on a traced value of dtype "
                        f"{_float_dtype(x)}: tapead keeps the input's dtype; cast the input "
                        "before tracing instead")
    bad = sorted(k for k, v in unsupported.items() if v is not np._NoValue)
    if bad:
        raise TypeError(f"{name}: argument(s) {', '.join(bad)} are not supported on traced "
                        f"values; compute {name} of a masked or padded array instead")


def _batched_axes(axis, nd):
    return tuple(a + 1 for a in _norm_axis(axis, nd))


# sum -------------------------------------------------------------------------------
def _sum_impl(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:       # np.sum's Python wrapper costs more than the sum
        return np.add.reduce(x, axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


sum_p = Primitive("sum", _sum_impl, saves=(), linear=True)
sum_p.defvjp(lambda g, ans, x, axis=None, keepdims=False:
             _expand_back(g, np.shape(x), axis, keepdims))


def _sum_batched(tans, ans, vals, params, K):
    axes = _batched_axes(params.get("axis"), np.ndim(vals[0]))
    return np.sum(tans[0], axis=axes, keepdims=params.get("keepdims", False))


sum_p.defbatched(_sum_batched)
sum_p.defsparsity(patterns.REDUCTION)
sum_p.defvmap(batching.axis_rule(sum_p))
sum_p.complex_ok = True      # linear: the same rule holds for complex values


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
        where=np._NoValue, **kw):
    """``np.sum`` with derivatives (of arrays; ``reductions.sum`` also packs a
    Python list of traced values first)."""
    if isinstance(a, Box):
        if dtype is not None or out is not None or kw or initial is not np._NoValue \
                or where is not np._NoValue:
            _reject("sum", dtype, out, a, initial=initial, where=where, **kw)
        if not keepdims and (axis is None or axis == 0 or axis == -1):
            s = _core.small_sum(a)      # a small vector: scalar adds in numpy's order, in C
            if s is not None:
                return s
        return bind(sum_p, a, axis=axis, keepdims=keepdims)
    return np.sum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                  where=where, **kw)


def unbroadcast(x, g):
    """Sum ``g`` down to the shape of ``x`` (undo numpy broadcasting); for a real
    ``x`` and a complex ``g``, keep ``g``'s real part (undo the promotion to complex)."""
    if is_complex(g) and not is_complex(x):
        g = _real_piece(g)
    shape = x.shape if type(x) is ShapeOnly or type(x) is np.ndarray else _core.shape_of(x)
    gshape = g.shape if type(g) is np.ndarray else _core.shape_of(g)
    if gshape == shape:
        return g
    if type(g) is np.ndarray:          # plain arrays: reduce directly with numpy
        lead = len(gshape) - len(shape)
        axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                          if n == 1 and gshape[lead + i] != 1)
        out = np.add.reduce(g, axis=axes) if axes else g
        return out.reshape(shape) if out.shape != shape else out
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    if axes:
        g = sum(g, axis=axes)
    if np.shape(g) != shape:
        g = reshape(g, shape)
    return g
