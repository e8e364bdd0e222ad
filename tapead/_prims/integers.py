"""Integers computed from traced values, and indexing by them.

An integer result of traced values (``x.astype(int)``, ``np.floor(x).astype(int)``,
``np.round(x).astype(np.int64)``) is a traced value without derivative: an
``astype`` node, recomputed when a tape is replayed, batched (one integer per
lane) under vmap.  What is gathered through such integers keeps its derivative
with respect to the array it is gathered from, as in JAX:

* ``x[i, j]`` with ``i``/``j`` traced integers (``x`` traced or not, through a
  traced value's indexing or ``tapead.numpy.at(x)[i, j].get()``) records two
  nodes: ``index_positions``, the flat positions the index picks (integers,
  recomputed on replay: the index of a replayed tape is never the recorded
  one), and ``take_flat``, the gather, linear in ``x`` (its VJP adds the
  cotangent at the positions, ``scatter_flat``).
* Where numpy itself needs the number -- ``field[i]`` of a plain numpy array
  calls ``i.__index__()`` or ``i.__array__()``, ``np.asarray(x, dtype=int)``,
  ``np.int64(x)``, ``range(n)``, ``int(n)`` of an integer value -- the value is
  handed over as a constant and recorded as a guard on every tape that holds
  it: a replay at inputs where the integer differs raises
  ``GuardFlippedError`` (``ta.jit`` records again there) instead of reusing a
  stale index.  Under vmap the lanes' integers differ, so such a read makes
  vmap run the function lane by lane.

``float(x)`` and ``int(x)`` of a traced *float* stay errors (the derivative
would be dropped silently).
"""
from __future__ import annotations

import functools

import numpy as np

from tapead import _core, patterns
from tapead._core import Box, Scatter, bind, concrete, guard_value, ndim_of, shape_of
from tapead._prims import batching
from tapead._prims.base import Primitive, defzero
from tapead._prims.structural import stack

#: the place of a traced integer operand in an index template
SLOT = "traced"
_GATHERED = ("the positions gathered are values computed from the inputs: any element "
             "of the array may be picked, at another point another one")


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _kind(x) -> str:
    return np.dtype(x.dtype).kind


# plain integers out of traced ones: guarded constants ---------------------------
def _as_int(v):
    return int(concrete(v))


def _as_array(dtype, v):
    v = np.asarray(concrete(v))
    return v.astype(dtype) if dtype is not None else v


def integer_value(x, kind: str) -> int:
    """``int(x)`` / ``operator.index(x)`` of a traced integer (``x.dtype`` is
    an integer or bool type): its value, guarded on its tapes.  The boxes'
    ``__int__``/``__index__`` call it."""
    v = concrete(x)                     # BatchConcreteRead under vmap: lane by lane
    if np.ndim(v) != 0:
        raise TypeError(f"only 0-d integer values convert to a Python int; this one has "
                        f"shape {np.shape(v)}" + (" (numpy then tries it as an integer "
                                                  "array)" if kind == "index" else ""))
    out = int(v)
    guard_value(x, _as_int, out, "an integer computed from traced values")
    return out


def array_value(x, dtype):
    """``np.asarray(x, dtype)`` of a traced value when no derivative is lost:
    ``x`` holds integers (or bools), or ``dtype`` is an integer/bool type and
    ``x`` is real (``np.asarray(x, dtype=int)``, ``np.int64(x)``, numpy's
    indexing by a traced integer array).  The value as a plain array, guarded
    on ``x``'s tapes; None when the conversion would drop a derivative (the
    boxes' ``__array__`` then raises)."""
    want = None if dtype is None else np.dtype(dtype)
    if want is not None and want.kind == "O":
        return None
    src = _kind(x)
    if not (src in "iub" or (want is not None and want.kind in "iub" and src == "f")):
        return None
    out = np.array(_as_array(want, x))      # a copy: the caller may write into it
    guard_value(x, functools.partial(_as_array, want), out,
                "an integer array computed from traced values")
    return out


# index_positions: the flat positions an index with traced integers picks -------
_WHERE: dict = {}


def _where(shape, lanes: int):
    """``arange(size).reshape(shape[lanes:])`` (cached, read-only), broadcast over
    ``lanes`` leading lane axes: the positions within one lane's array."""
    core = tuple(shape[lanes:])
    base = _WHERE.get(core)
    if base is None:
        if len(_WHERE) >= 32:
            _WHERE.clear()
        base = np.arange(_size(core), dtype=np.intp).reshape(core)
        base.flags.writeable = False
        _WHERE[core] = base
    return np.broadcast_to(base, tuple(shape)) if lanes else base


def _fill(template, ints):
    it = iter(ints)
    return tuple(next(it) if isinstance(t, str) else t for t in template)


def _positions_impl(*ints, template, shape, lanes=0, perm=None):
    out = np.asarray(_where(shape, lanes)[_fill(template, ints)])
    return out if perm is None else np.transpose(out, perm)


positions_p = Primitive("index_positions", _positions_impl, saves=())
positions_p.defvjp_any(lambda k, g, ans, *ints, **params: None)      # integers: none
positions_p.defjvp_any(lambda k, t, ans, *ints, **params: None)
defzero(positions_p)                 # no tangent, empty pattern


def _advanced(t) -> bool:
    return isinstance(t, (str, np.ndarray)) or (isinstance(t, (int, np.integer))
                                                and not isinstance(t, bool))


def _positions_vmap(args, bdims, template, shape, lanes=0, perm=None):
    """Every lane's positions at once: the lane number joins the index as a
    leading integer array over ``lanes + 1`` lane axes (the positions stay
    those within one lane's array); numpy's placement of the broadcast axes
    of advanced indices is undone by ``perm``."""
    n = batching.n_lanes(args, bdims)
    lane_shapes = [shape_of(a)[:d] + shape_of(a)[d + 1:] if d is not None else shape_of(a)
                   for a, d in zip(args, bdims)]
    lane_shapes += [np.shape(t) for t in template if isinstance(t, np.ndarray)]
    B = max((len(s) for s in lane_shapes), default=0)
    new = []
    for a, d in zip(args, bdims):
        if d is None:
            new.append(a)                    # shared: broadcasts against the lanes
        else:
            a = batching.to_front(a, d)
            s = shape_of(a)[1:]
            new.append(batching.reshape(a, (n,) + (1,) * (B - len(s)) + s))
    adv = [k for k, t in enumerate(template) if _advanced(t)]
    if perm is not None:
        new_perm = (0,) + tuple(p + 1 for p in perm)
    elif adv and adv[0] > 0 and adv == list(range(adv[0], adv[0] + len(adv))):
        # one block of advanced indices after slices: numpy keeps its axes in
        # place for a lane, but moves them to the front behind the lane index
        pre = adv[0]
        rank = B + sum(1 for t in template if not _advanced(t)) + \
            len(shape) - sum(1 for t in template if t is not None)
        new_perm = ((0,) + tuple(range(B + 1, B + 1 + pre)) + tuple(range(1, B + 1))
                    + tuple(range(B + 1 + pre, rank + 1)))
    else:
        new_perm = None
    lane = np.arange(n, dtype=np.intp).reshape((n,) + (1,) * B)
    return bind(positions_p, *new, template=(lane,) + tuple(template),
                shape=(n,) + tuple(shape), lanes=lanes + 1, perm=new_perm), 0


positions_p.defvmap(_positions_vmap)


def split_index(idx, shape):
    """``(template, ints)`` of an index holding traced integers: ``Ellipsis``
    spelled out, boolean masks as their integer arrays, lists as arrays, and
    each traced integer array replaced by ``SLOT`` (its value in ``ints``)."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    norm = []
    for it in items:
        if isinstance(it, list):
            it = stack(it) if any(isinstance(v, Box) for v in it) else np.asarray(it)
        if isinstance(it, Box):
            kind = _kind(it)
            if kind == "b":                  # a mask: its shape depends on the values
                it = array_value(it, None)
            elif kind not in "iu":
                raise IndexError(
                    f"an index must hold integers, not {np.dtype(it.dtype)} values; convert "
                    "a traced position first: np.floor(p).astype(int) (or "
                    "np.round(p).astype(int)). The integers carry no derivative; what "
                    "they gather keeps its derivative")
        elif isinstance(it, np.integer):
            it = int(it)
        norm.append(it)
    used = sum(np.ndim(it) if isinstance(it, np.ndarray) and it.dtype == bool else 1
               for it in norm if it is not None and it is not Ellipsis)
    template, ints, seen = [], [], False
    for it in norm:
        if it is Ellipsis:
            if seen:
                raise IndexError("an index can only have a single ellipsis ('...')")
            seen = True
            template += [slice(None)] * (len(shape) - used)
        elif isinstance(it, Box):
            template.append(SLOT)
            ints.append(it)
        elif isinstance(it, np.ndarray) and it.dtype == bool:
            template += list(np.nonzero(it))
        else:
            template.append(it)
    return tuple(template), ints


def positions(x_shape, idx):
    """The flat positions (in C order, an integer array traced like the index)
    that ``x[idx]`` picks from an array of shape ``x_shape``."""
    template, ints = split_index(idx, x_shape)
    return bind(positions_p, *ints, template=template, shape=tuple(x_shape), lanes=0,
                perm=None)


# take_flat: x.ravel()[pos] -------------------------------------------------------
def _take_impl(x, pos):
    return np.take(x, pos)


take_flat_p = Primitive("take_flat", _take_impl, saves=(1,))


def _take_vjp(g, ans, x, pos):
    shape, dtype = tuple(shape_of(x)), x.dtype
    if type(pos) is np.ndarray and shape:
        # the sweep adds it in place (np.add.at: repeated positions accumulate)
        return Scatter(g, np.unravel_index(pos, shape), shape, dtype)
    return scatter_flat(g, pos, shape, dtype)


def _lane_offsets(n, size, rank):
    return np.arange(n, dtype=np.intp).reshape((n,) + (1,) * rank) * size


def _none(*args, **params):
    """The rule of an integer operand: no derivative through it."""
    return None


take_flat_p.defvjp(_take_vjp, _none)
take_flat_p.defjvp(lambda t, ans, x, pos: take_flat(t, pos), _none)
take_flat_p.complex_ok = True        # linear in x: the same rules hold for complex values
take_flat_p.defbatched(lambda tans, ans, vals, params, K: None if tans[0] is None else
                       take_flat(tans[0], _lane_offsets(K, _size(shape_of(vals[0])),
                                                        ndim_of(vals[1])) + vals[1]))


def _take_vmap(args, bdims):
    (x, pos), (dx, dp) = args, bdims
    if dp is not None:
        pos = batching.to_front(pos, dp)
    if dx is None:                   # one array, each lane its own positions
        return take_flat(x, pos), 0
    x = batching.to_front(x, dx)
    s = shape_of(x)
    rank = ndim_of(pos) - (dp is not None)
    return take_flat(x, _lane_offsets(s[0], _size(s[1:]), rank) + pos), 0


take_flat_p.defvmap(_take_vmap)
take_flat_p.defsparsity(patterns.DENSE, reason=_GATHERED)


def take_flat(x, pos):
    """``np.take(x, pos)``: the elements of ``x`` (flattened) at the integer
    positions ``pos`` (shape of ``pos``), differentiable in ``x``."""
    if isinstance(x, Box) or isinstance(pos, Box):
        return bind(take_flat_p, x, pos)
    return _take_impl(x, pos)


# scatter_flat: zeros(shape) with g added at pos (the transpose of take_flat) ------
def _scatter_impl(g, pos, shape, dtype):
    pos = np.asarray(pos)
    g = np.broadcast_to(np.asarray(g), pos.shape)
    dt = np.result_type(dtype, g.dtype)
    size = _size(shape)
    if dt == np.float64 and g.dtype == np.float64:
        out = np.bincount(pos.ravel(), weights=g.ravel(), minlength=size)
    else:
        out = np.zeros(size, dtype=dt)
        np.add.at(out, pos.ravel(), g.ravel())
    return out.reshape(shape)


scatter_flat_p = Primitive("scatter_flat", _scatter_impl, saves=(1,))
scatter_flat_p.defvjp(lambda g, ans, u, pos, shape, dtype: take_flat(g, pos), _none)
scatter_flat_p.defjvp(lambda t, ans, u, pos, shape, dtype: scatter_flat(t, pos, shape, dtype),
                      _none)
scatter_flat_p.complex_ok = True     # linear in g
scatter_flat_p.defbatched(lambda tans, ans, vals, params, K: None if tans[0] is None else
                          scatter_flat(tans[0], _lane_offsets(K, _size(params["shape"]),
                                                              ndim_of(vals[1])) + vals[1],
                                       (K,) + tuple(params["shape"]), params["dtype"]))


def _scatter_vmap(args, bdims, shape, dtype):
    (g, pos), (dg, dp) = args, bdims
    n = batching.n_lanes(args, bdims)
    if dg is not None:
        g = batching.to_front(g, dg)
    if dp is not None:
        pos = batching.to_front(pos, dp)
    rank = ndim_of(pos) - (dp is not None)
    at = _lane_offsets(n, _size(shape), rank) + pos
    if dg is not None and ndim_of(g) - 1 < rank:       # a lane's g broadcast to pos
        g = batching.padded(g, 0, rank)
    return scatter_flat(g, at, (n,) + tuple(shape), dtype), 0


scatter_flat_p.defvmap(_scatter_vmap)
scatter_flat_p.defsparsity(patterns.DENSE, reason=_GATHERED)


def scatter_flat(g, pos, shape, dtype):
    """``zeros(shape)`` (flattened) with ``g`` added at the integer positions
    ``pos`` (repeated positions accumulate), differentiable in ``g``."""
    if isinstance(g, Box) or isinstance(pos, Box):
        return bind(scatter_flat_p, g, pos, shape=tuple(shape), dtype=np.dtype(dtype))
    return _scatter_impl(g, pos, shape, dtype)


# the indexing entry points ----------------------------------------------------------
def gather(x, idx):
    """``x[idx]`` where ``idx`` holds traced integers (``x`` traced or not)."""
    shape = tuple(shape_of(x))
    out = take_flat(x, positions(shape, idx))
    return out


def add_at(x, idx, v):
    """``x`` with ``v`` added at ``idx`` (traced integers; repeated positions
    accumulate, as ``np.add.at``)."""
    shape = tuple(shape_of(x))
    dtype = np.result_type(_core.lanes_of(x))
    return x + scatter_flat(v, positions(shape, idx), shape, dtype)


__all__: list = []
