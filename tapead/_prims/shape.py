"""Shape primitives: reshape, transpose, broadcast_to, indexing, stacking."""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, Scatter, bind, is_complex  # noqa: F401  (Scatter: old path)
from tapead import patterns
from tapead._prims.base import Primitive
# indexing lives in its own module; these names stay importable from here
from tapead._prims.indexing import (  # noqa: F401
    _batched_getitem, _getitem_vjp, _index_add_impl, _index_key, _is_basic, getitem,
    getitem_p, has_box, index_add_p, index_add_zeros, index_update, take)


def _any_box(*xs):
    return any(isinstance(x, Box) for x in xs)


# reshape ---------------------------------------------------------------------
reshape_p = Primitive("reshape", lambda x, shape: np.reshape(x, shape), saves=(), linear=True)
reshape_p.defvjp(lambda g, ans, x, shape: reshape(g, np.shape(x)))
reshape_p.complex_ok = True      # linear: the same rule holds for complex values
reshape_p.defbatched(lambda tans, ans, vals, params, K: np.reshape(
    tans[0], (K,) + np.shape(ans)))
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
        shape = np.empty(np.shape(x), dtype=np.uint8).reshape(shape).shape
        if shape == np.shape(x):
            return x
        return bind(reshape_p, x, shape=shape)
    if order == "C" and copy is None:
        return np.reshape(x, shape)
    return np.reshape(x, shape, order=order, copy=copy)


# transpose -------------------------------------------------------------------
def _transpose_impl(x, axes):
    return np.transpose(x, axes)


transpose_p = Primitive("transpose", _transpose_impl, saves=(), linear=True)
transpose_p.defvjp(lambda g, ans, x, axes: transpose(g, tuple(np.argsort(axes))))
transpose_p.complex_ok = True      # linear: the same rule holds for complex values
transpose_p.defbatched(lambda tans, ans, vals, params, K: np.transpose(
    tans[0], (0,) + tuple(a + 1 for a in params["axes"])))
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


def swapaxes(a, axis1, axis2):
    """``np.swapaxes`` with derivatives: axes ``axis1`` and ``axis2`` exchanged
    (numpy's parameter names)."""
    axes = list(range(np.ndim(a)))
    axis1, axis2 = _axes(axis1, len(axes), "swapaxes")[0], _axes(axis2, len(axes), "swapaxes")[0]
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, tuple(axes))


# broadcast_to ------------------------------------------------------------------
broadcast_p = Primitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                        saves=(), linear=True)


def _broadcast_vjp(g, ans, x, shape):
    from tapead._prims.elementwise import unbroadcast  # cycle: _prims.elementwise -> here
    return unbroadcast(x, g)


broadcast_p.defvjp(_broadcast_vjp)
broadcast_p.complex_ok = True      # linear: the same rule holds for complex values
broadcast_p.defbatched(lambda tans, ans, vals, params, K: np.broadcast_to(
    np.reshape(tans[0], (K,) + (1,) * (len(params["shape"]) - np.ndim(vals[0]))
               + np.shape(vals[0])), (K,) + tuple(params["shape"])))
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
    from tapead._prims.elementwise import real      # elementwise imports this module
    return real(g)


concat_p = Primitive("concatenate", _concat_impl, saves=(), linear=True)


def _concat_vjp(k, g, ans, axis=0, bounds=None, real=()):
    sl = [slice(None)] * np.ndim(ans)
    sl[axis] = slice(bounds[k], bounds[k + 1])
    g = getitem(g, tuple(sl))
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
    dtype = np.result_type(_core.concrete(ans))
    return [np.zeros((K,) + np.shape(v), dtype) if t is None else
            t if np.shape(t) == (K,) + np.shape(v) else reshape(t, (K,) + np.shape(v))
            for t, v in zip(tans, vals)]


def _concat_batched(tans, ans, vals, params, K):
    """K directions at once: the tangents concatenated one axis further in."""
    return concatenate(_direction_pieces(tans, ans, vals, K), axis=params["axis"] + 1)


concat_p.defbatched(_concat_batched)
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
        gk = getitem(g, tuple(sl))
    return _real_piece(gk) if k in real else gk


stack_p.defvjp_any(_stack_vjp)
stack_p.complex_ok = True      # linear: the same rule holds for complex values


def _stack_batched(tans, ans, vals, params, K):
    """K directions at once: the tangents stacked one axis further in."""
    return stack(_direction_pieces(tans, ans, vals, K), axis=params["axis"] + 1)


stack_p.defbatched(_stack_batched)
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


def _axes(axis, ndim, what):
    """``axis`` (int or tuple) as a tuple of non-negative axes."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim, what)
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return tuple(out)


# reshaping: ravel, moveaxis, expand_dims, squeeze, atleast_nd -------------------------
def ravel(a, order="C"):
    """``np.ravel`` with derivatives (C order)."""
    if not isinstance(a, Box):
        return np.ravel(a, order=order)
    if order != "C":
        raise ValueError(f"ravel of a traced array supports order='C' only, not {order!r}; "
                         "transpose first (x.T.ravel() is Fortran order)")
    return reshape(a, (-1,))


def moveaxis(a, source, destination):
    """``np.moveaxis`` with derivatives (a transpose)."""
    if not isinstance(a, Box):
        return np.moveaxis(a, source, destination)
    nd = np.ndim(a)
    src = _axes(source, nd, "moveaxis source")
    dst = _axes(destination, nd, "moveaxis destination")
    if len(src) != len(dst):
        raise ValueError("moveaxis: `source` and `destination` arguments must have "
                         "the same number of elements")
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, tuple(order))


def expand_dims(a, axis):
    """``np.expand_dims`` with derivatives (axis may be a tuple)."""
    if not isinstance(a, Box):
        return np.expand_dims(a, axis)
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = _axes(axis, np.ndim(a) + n_new, "expand_dims")
    it = iter(np.shape(a))
    return reshape(a, tuple(1 if i in axes else next(it)
                            for i in range(np.ndim(a) + n_new)))


def squeeze(a, axis=None):
    """``np.squeeze`` with derivatives."""
    if not isinstance(a, Box):
        return np.squeeze(a, axis=axis)
    shape = np.shape(a)
    if axis is None:
        return reshape(a, tuple(n for n in shape if n != 1))
    axes = _axes(axis, len(shape), "squeeze")
    for ax in axes:
        if shape[ax] != 1:
            raise ValueError(f"squeeze: axis {ax} has size {shape[ax]}, not 1; only "
                             "axes of size one can be squeezed out")
    return reshape(a, tuple(n for i, n in enumerate(shape) if i not in axes))


def _atleast(nd_min, arys, where):
    out = []
    for x in arys:
        s = np.shape(x)
        if len(s) < nd_min:
            s = (1,) * nd_min if not s else (where(s) if len(s) == 1 else s + (1,))
            x = reshape(x, s) if isinstance(x, Box) else np.reshape(x, s)
        out.append(x)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """``np.atleast_1d`` with derivatives."""
    return _atleast(1, arys, None)


def atleast_2d(*arys):
    """``np.atleast_2d`` with derivatives."""
    return _atleast(2, arys, lambda s: (1,) + s)


def atleast_3d(*arys):
    """``np.atleast_3d`` with derivatives."""
    return _atleast(3, arys, lambda s: (1,) + s + (1,))


# joining and splitting ---------------------------------------------------------------
def hstack(tup, *, dtype=None, casting="same_kind"):
    """``np.hstack`` with derivatives."""
    arrs = [atleast_1d(x) for x in tup]
    return concatenate(arrs, axis=0 if np.ndim(arrs[0]) == 1 else 1)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """``np.vstack`` with derivatives."""
    return concatenate([atleast_2d(x) for x in tup], axis=0)


def dstack(tup):
    """``np.dstack`` with derivatives."""
    return concatenate([atleast_3d(x) for x in tup], axis=2)


def column_stack(tup):
    """``np.column_stack`` with derivatives."""
    cols = [reshape(x, (-1, 1)) if np.ndim(x) < 2 and isinstance(x, Box)
            else (np.reshape(x, (-1, 1)) if np.ndim(x) < 2 else x) for x in tup]
    return concatenate(cols, axis=1)


def array_split(ary, indices_or_sections, axis=0):
    """``np.array_split`` with derivatives: a list of slices of ``ary``."""
    if not isinstance(ary, Box):
        return np.array_split(ary, indices_or_sections, axis=axis)
    axis = _axes(axis, np.ndim(ary), "array_split")[0]
    n = np.shape(ary)[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("array_split: number sections must be larger than 0")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    lead = (slice(None),) * axis
    return [getitem(ary, lead + (slice(lo, hi),)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary, indices_or_sections, axis=0):
    """``np.split`` with derivatives: a list of slices of ``ary``."""
    if not isinstance(ary, Box):
        return np.split(ary, indices_or_sections, axis=axis)
    if np.ndim(indices_or_sections) == 0:
        n = np.shape(ary)[_axes(axis, np.ndim(ary), "split")[0]]
        if n % int(indices_or_sections):
            raise ValueError(f"split: an axis of length {n} cannot be split into "
                             f"{int(indices_or_sections)} equal parts; use array_split")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    """``np.hsplit`` with derivatives."""
    return split(ary, indices_or_sections, axis=1 if np.ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    """``np.vsplit`` with derivatives."""
    if np.ndim(ary) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, axis=0)


# repetition: tile, repeat ---------------------------------------------------------
def tile(A, reps):
    """``np.tile`` with derivatives (a broadcast between two reshapes)."""
    if not isinstance(A, Box):
        return np.tile(A, reps)
    reps = tuple(int(r) for r in np.atleast_1d(reps))
    shape = np.shape(A)
    d = max(len(reps), len(shape))
    shape = (1,) * (d - len(shape)) + shape
    reps = (1,) * (d - len(reps)) + reps
    inter = tuple(v for r, n in zip(reps, shape) for v in (1, n))
    wide = tuple(v for r, n in zip(reps, shape) for v in (r, n))
    x = broadcast_to(reshape(A, inter), wide)
    return reshape(x, tuple(r * n for r, n in zip(reps, shape)))


def repeat(a, repeats, axis=None):
    """``np.repeat`` with derivatives; ``repeats`` an int or one count per element."""
    if not isinstance(a, Box):
        return np.repeat(a, repeats, axis=axis)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis = _axes(axis, np.ndim(a), "repeat")[0]
    shape = np.shape(a)
    n = shape[axis]
    r = np.asarray(_index_key(repeats))
    if r.size == 1:                 # one count: a broadcast
        r = int(r.reshape(()))
        if r < 0:
            raise ValueError("repeat: negative dimensions are not allowed")
        x = reshape(a, shape[:axis + 1] + (1,) + shape[axis + 1:])
        x = broadcast_to(x, shape[:axis + 1] + (r,) + shape[axis + 1:])
        return reshape(x, shape[:axis] + (n * r,) + shape[axis + 1:])
    idx = np.repeat(np.arange(n), r)        # checks the counts as numpy does
    return getitem(a, (slice(None),) * axis + (idx,))


# reordering: flip, roll ---------------------------------------------------------------
def flip(m, axis=None):
    """``np.flip`` with derivatives."""
    if not isinstance(m, Box):
        return np.flip(m, axis=axis)
    nd = np.ndim(m)
    axes = tuple(range(nd)) if axis is None else _axes(axis, nd, "flip")
    return getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None)
                            for i in range(nd)))


def fliplr(m):
    """``np.fliplr`` with derivatives."""
    if np.ndim(m) < 2:
        raise ValueError("fliplr: the array must be at least 2-d")
    return flip(m, 1)


def flipud(m):
    """``np.flipud`` with derivatives."""
    if np.ndim(m) < 1:
        raise ValueError("flipud: the array must be at least 1-d")
    return flip(m, 0)


def roll(a, shift, axis=None):
    """``np.roll`` with derivatives (a gather with a rotated index)."""
    if not isinstance(a, Box):
        return np.roll(a, shift, axis=axis)
    if axis is None:
        return reshape(roll(reshape(a, (-1,)), shift, 0), np.shape(a))
    shifts = np.broadcast(np.asarray(shift), np.asarray(axis))
    total = {}
    for s, ax in shifts:
        ax = _axes(int(ax), np.ndim(a), "roll")[0]
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = np.shape(a)[ax]
        if n and s % n:
            a = getitem(a, (slice(None),) * ax + (np.roll(np.arange(n), s),))
    return a


# diagonals and triangles ----------------------------------------------------------
def _diag_index(n, m, k):
    """Row and column indices of the k-th diagonal of an n x m matrix."""
    i0, j0 = max(-k, 0), max(k, 0)
    length = max(0, min(n - i0, m - j0))
    return np.arange(i0, i0 + length), np.arange(j0, j0 + length)


def diag(v, k=0):
    """``np.diag``: a 1-d ``v`` gives a 2-d matrix with ``v`` on diagonal ``k``;
    a 2-d ``v`` gives its ``k``-th diagonal."""
    if not isinstance(v, Box):
        return np.diag(v, k)
    nd = np.ndim(v)
    if nd == 1:
        n = np.shape(v)[0] + abs(k)
        rows, cols = _diag_index(n, n, k)
        return index_add_zeros(v, (rows, cols), (n, n), np.result_type(_core.concrete(v)))
    if nd == 2:
        return getitem(v, _diag_index(*np.shape(v), k))
    raise ValueError(f"diag: the input must be 1-d or 2-d, not {nd}-d")


def diagonal(a, offset=0, axis1=0, axis2=1):
    """``np.diagonal`` with derivatives (the diagonal axis goes last)."""
    if not isinstance(a, Box):
        return np.diagonal(a, offset, axis1, axis2)
    nd = np.ndim(a)
    if nd < 2:
        raise ValueError("diagonal: the array must be at least 2-d")
    a1, a2 = _axes((axis1, axis2), nd, "diagonal")
    rest = tuple(i for i in range(nd) if i not in (a1, a2))
    x = transpose(a, rest + (a1, a2))
    rows, cols = _diag_index(np.shape(a)[a1], np.shape(a)[a2], offset)
    return getitem(x, (slice(None),) * len(rest) + (rows, cols))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """``np.trace`` with derivatives: the sum of a diagonal."""
    if not isinstance(a, Box):
        return np.trace(a, offset, axis1, axis2, dtype=dtype, out=out)
    if out is not None:
        raise TypeError("trace(..., out=...) cannot write a traced value into an array; "
                        "use the returned value")
    from tapead._prims.reductions import sum as _sum  # cycle: _prims.reductions -> here
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _triangle(m, keep):
    from tapead._prims.elementwise import where  # cycle: _prims.elementwise -> here
    return where(keep, m, np.zeros((), np.result_type(_core.concrete(m))))


def tril(m, k=0):
    """``np.tril`` with derivatives (zero above diagonal ``k``)."""
    if not isinstance(m, Box):
        return np.tril(m, k)
    return _triangle(m, np.tri(*np.shape(m)[-2:], k=k, dtype=bool))


def triu(m, k=0):
    """``np.triu`` with derivatives (zero below diagonal ``k``)."""
    if not isinstance(m, Box):
        return np.triu(m, k)
    return _triangle(m, ~np.tri(*np.shape(m)[-2:], k=k - 1, dtype=bool))


# pad ------------------------------------------------------------------------------
_GATHER_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")


def pad(array, pad_width, mode="constant", **kwargs):
    """``np.pad`` with derivatives.

    ``mode="constant"`` (``constant_values`` concrete) writes the array
    into a constant frame; ``"edge"``, ``"reflect"``, ``"symmetric"`` and
    ``"wrap"`` gather with numpy's padded index.  Other modes raise.
    """
    if not isinstance(array, Box):
        return np.pad(array, pad_width, mode=mode, **kwargs)
    shape = np.shape(array)
    dtype = np.result_type(_core.concrete(array))
    if mode == "constant":
        cv = kwargs.pop("constant_values", 0)
        if kwargs:
            raise TypeError(f"pad: unexpected arguments {sorted(kwargs)} for mode 'constant'")
        if has_box(cv):
            raise TypeError("pad: constant_values must be concrete numbers; to pad with a "
                            "traced value c, pad with 0 and add c * (1 - mask) where mask "
                            "is np.pad(np.ones(shape), pad_width)")
        frame = np.pad(np.zeros(shape, dtype), pad_width, mode="constant",
                       constant_values=cv)
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (len(shape), 2))
        inner = tuple(slice(int(b), int(b) + n) for (b, _), n in zip(widths, shape))
        return index_update(frame, array, inner, "set")
    if mode in _GATHER_PAD_MODES:
        if kwargs.get("reflect_type", "even") != "even":
            raise ValueError("pad: reflect_type='odd' is not supported on traced arrays")
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (len(shape), 2))
        idx = [np.pad(np.arange(n), (int(b), int(e)), mode=mode)
               for (b, e), n in zip(widths, shape)]
        return getitem(array, np.ix_(*idx))
    raise NotImplementedError(
        f"pad: mode {mode!r} is not differentiable in tapead; use 'constant', "
        f"{', '.join(repr(m) for m in _GATHER_PAD_MODES)}")


def _method_shape(args):
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike."""
    return args[0] if len(args) == 1 else args


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {
    np.reshape: reshape, np.transpose: transpose, np.swapaxes: swapaxes,
    np.broadcast_to: broadcast_to, np.concatenate: concatenate, np.stack: stack,
    np.ravel: ravel, np.moveaxis: moveaxis, np.expand_dims: expand_dims,
    np.squeeze: squeeze, np.atleast_1d: atleast_1d, np.atleast_2d: atleast_2d,
    np.atleast_3d: atleast_3d, np.hstack: hstack, np.vstack: vstack, np.dstack: dstack,
    np.column_stack: column_stack, np.split: split, np.array_split: array_split,
    np.hsplit: hsplit, np.vsplit: vsplit, np.tile: tile, np.repeat: repeat,
    np.flip: flip, np.fliplr: fliplr, np.flipud: flipud, np.roll: roll, np.diag: diag,
    np.diagonal: diagonal, np.trace: trace, np.tril: tril, np.triu: triu, np.pad: pad,
}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {
    "reshape": lambda x, *s, **kw: reshape(x, _method_shape(s), **kw),
    "transpose": lambda x, *axes: transpose(
        x, None if not axes else (axes[0] if len(axes) == 1 else axes)),
    "ravel": ravel,
    "flatten": ravel,
    "swapaxes": swapaxes,
    "squeeze": squeeze,
    "repeat": repeat,
    "diagonal": diagonal,
    "trace": trace,
}
__all__ = ["reshape", "transpose", "swapaxes", "broadcast_to", "concatenate", "stack",
           "ravel", "moveaxis", "expand_dims", "squeeze", "atleast_1d", "atleast_2d",
           "atleast_3d", "hstack", "vstack", "dstack", "column_stack", "split",
           "array_split", "hsplit", "vsplit", "tile", "repeat", "flip", "fliplr", "flipud",
           "roll", "diag", "diagonal", "trace", "tril", "triu", "pad"]
