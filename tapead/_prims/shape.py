"""Shape primitives: reshape, transpose, broadcast_to, indexing, stacking."""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box
# the structural set lives below every family (the public ones are in this module's __all__)
from tapead._prims.structural import (broadcast_to, concatenate, reshape, stack, sum as _sum,
                                      transpose)
from tapead._prims.elementwise import where
from tapead._prims.indexing import (_index_key, getitem, has_box, index_add_zeros,
                                    index_update)


def swapaxes(a, axis1, axis2):
    """``np.swapaxes`` with derivatives: axes ``axis1`` and ``axis2`` exchanged
    (numpy's parameter names)."""
    axes = list(range(np.ndim(a)))
    axis1, axis2 = _axes(axis1, len(axes), "swapaxes")[0], _axes(axis2, len(axes), "swapaxes")[0]
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, tuple(axes))


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
        return index_add_zeros(v, (rows, cols), (n, n), np.result_type(_core.lanes_of(v)))
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
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _triangle(m, keep):
    return where(keep, m, np.zeros((), np.result_type(_core.lanes_of(m))))


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
    dtype = np.result_type(_core.lanes_of(array))
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
