"""Indexing primitives: ``x[idx]``, its transpose, and functional index updates.

* ``getitem``: basic slicing, integers, integer arrays, boolean masks.  Its
  VJP is a ``Scatter`` that the reverse sweep adds into the parent's adjoint
  in place (``np.add.at`` when indices may repeat).
* ``index_add_zeros``: zeros with values added at ``idx`` (the transpose of
  ``getitem``; ``diag`` of a vector uses it).
* ``index_update(x, v, idx, mode)``: a *new* array, ``x`` with ``v`` written
  (``"set"``) or accumulated (``"add"``) at ``idx``.  ``y[idx] = v`` on a
  traced array records one and rebinds ``y`` to it
  (``tapead._prims._setitem``), so in-place numpy code differentiates.
  ``at(x)[idx].set(v)`` / ``.add(v)`` / ``.get()`` is the same update in
  JAX's spelling.

Index semantics are numpy's.  In particular ``y[[0, 0]] += 1`` adds *once*
(Python runs it as ``y[[0, 0]] = y[[0, 0]] + 1``: the last write wins),
while ``at(y)[[0, 0]].add(1)`` accumulates both, like ``np.add.at`` and
JAX's ``.at[].add``.

All three are linear (jointly in their array arguments), so their JVP is the
primitive applied to the tangents; their batched JVPs carry the K
directions on a *trailing* axis, which no index can reach.
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, Scatter, bind
from tapead import patterns
from tapead._prims.base import Primitive
from tapead._prims import batching, integers
from tapead.errors import BatchConcreteRead
from tapead._prims.structural import broadcast_to, concatenate, reshape, stack, unbroadcast


def _dtype(x):
    return np.result_type(_core.lanes_of(x))


# index keys ----------------------------------------------------------------------
def has_box(obj) -> bool:
    """True when ``obj`` is a box or a (nested) list or tuple holding one."""
    if isinstance(obj, Box):
        return True
    if isinstance(obj, (list, tuple)):
        return any(has_box(o) for o in obj)
    return False


def _index_key(idx):
    """Make an index safe to keep: lists become arrays, boxes are errors."""
    items = idx if isinstance(idx, tuple) else (idx,)
    out = []
    for it in items:
        if has_box(it):
            raise TypeError("an index cannot be a traced value (its derivative would be "
                            "lost); use an integer array or a boolean mask computed from "
                            "concrete values, e.g. x.value > 0 or ta.stop_gradient(i)")
        if isinstance(it, list):
            it = np.asarray(it)
        out.append(it)
    return tuple(out) if isinstance(idx, tuple) else out[0]


def _is_basic(idx) -> bool:
    """Basic indexing (ints, slices, None, Ellipsis) never repeats an element."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis
               for i in items) or (not isinstance(idx, tuple) and isinstance(idx, np.ndarray)
                                   and idx.dtype == bool)


def _expand_ellipsis(idx, ndim):
    """``idx`` as a tuple without ``...`` (explicit slices), so that an extra
    trailing axis of K directions is never indexed."""
    items = idx if isinstance(idx, tuple) else (idx,)
    if not any(i is Ellipsis for i in items):
        return items
    used = 0
    for i in items:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, np.ndarray) and i.dtype == bool:
            used += i.ndim
        else:
            used += 1
    k = next(j for j, i in enumerate(items) if i is Ellipsis)
    return items[:k] + (slice(None),) * (ndim - used) + items[k + 1:]


def _k_last(t):
    return np.moveaxis(t, 0, -1)


def _k_first(t):
    return np.moveaxis(t, -1, 0)


# getitem -------------------------------------------------------------------------
def _getitem_impl(x, idx):
    if type(idx) is _core.Batched:       # a plain tangent gathered by each lane's index
        return _gather_lanes(x, idx)
    return x[idx]


getitem_p = Primitive("getitem", _getitem_impl, saves=(), linear=True)


def _getitem_vjp(g, ans, x, idx):
    if type(idx) is _core.Batched:       # each lane its own index (under vmap)
        return _scatter_lanes(g, idx, _core.shape_of(x), _dtype(x))
    # the sweep adds it in place (plain g) or collects it (traced g, see
    # add_scatters); only the tape's sweep reads Scatters
    return Scatter(g, idx, np.shape(x), x.dtype)


#: at most this many basic-index scatters are summed by in-place additions
#: (each one copies the array once); more are joined into one np.add.at
_CHAIN_MAX = 8


def _one_element(idx, ndim) -> bool:
    """Whether basic index ``idx`` picks one element of an ``ndim``-d array."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return len(items) == ndim and all(isinstance(i, (int, np.integer)) for i in items)


def add_scatters(items):
    """The sum of several ``Scatter`` cotangents of one array, with traced
    values: one ``index_add_zeros`` of their values concatenated (at flat
    positions), so the cost is the elements scattered plus one array, not
    one array per scatter.  The reverse sweep calls it."""
    first = items[0]
    shape = first.shape
    dtype = np.result_type(*[s.dtype for s in items])
    if len(items) == 1:
        return index_add_zeros(first.g, first.idx, shape, dtype)
    if len(items) <= _CHAIN_MAX and dtype.kind == "f" and all(
            _is_basic(s.idx) for s in items) and not all(
            _one_element(s.idx, len(shape)) for s in items):
        # a few slices (x[:-1], x[1:]) of a real array: added in place one after
        # the other, each element in the order np.add.at would add it (the same
        # bits), without joining the values or scattering through positions
        # (complex values keep the joined scatter, whose rules hold for them)
        total = index_add_zeros(first.g, first.idx, shape, dtype)
        for s in items[1:]:
            total = index_update(total, s.g, s.idx, mode="add")
        return total
    # cycle: _prims.shape -> here
    size = int(np.prod(shape, dtype=np.int64))
    where = np.arange(size).reshape(shape)
    flat, values = [], []
    for s in items:
        pos = where[s.idx]
        flat.append(pos)
        g = s.g if np.shape(s.g) == np.shape(pos) else broadcast_to(s.g, np.shape(pos))
        values.append(g)
    if all(np.ndim(p) == 0 for p in flat):      # elements x[i]: one stack of the scalars
        joined, at = stack(values), np.asarray(flat, dtype=np.intp)
    else:
        joined = concatenate([reshape(g, (-1,)) for g in values])
        at = np.concatenate([np.ravel(p) for p in flat])
    total = index_add_zeros(joined, at, (size,), dtype)
    return reshape(total, shape)


getitem_p.defvjp(_getitem_vjp)
getitem_p.complex_ok = True      # linear: the same rule holds for complex values
getitem_p.fast_vjp = _core.FAST_VJP["getitem"]   # the sweep adds a product cotangent in one pass


def _after_k(idx):
    """``(slice(None),) + idx`` when that indexes the same elements behind a
    leading axis (basic indices, or one boolean mask), else None: numpy
    moves the axes of advanced indices mixed with slices."""
    items = idx if isinstance(idx, tuple) else (idx,)
    if all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis
           for i in items) or (len(items) == 1 and isinstance(items[0], np.ndarray)
                               and items[0].dtype == bool):
        return (slice(None),) + items
    return None


def _batched_getitem(t, idx):
    """``t[:, idx]`` for tangents with a leading axis of K directions."""
    lead = _after_k(idx)
    if lead is not None:
        return t[lead]
    return _k_first(_k_last(t)[_expand_ellipsis(idx, np.ndim(t) - 1)])


getitem_p.defbatched(lambda tans, ans, vals, params, K: _batched_getitem(
    tans[0], params["idx"]))


def _getitem_vmap(args, bdims, idx):
    """Lanes in front behind basic indices; else lanes last, where advanced
    indices (which numpy may move to the front) never reach them."""
    x, d = args[0], bdims[0]
    if type(idx) is _core.Batched:       # a tape's gather by each lane's own index
        i = batching.lane_indices(idx)
        return getitem(batching.to_front(x, d), (_lane_column(i), i)), 0
    lead = _after_k(idx)
    if lead is not None:
        return getitem(batching.to_front(x, d), lead), 0
    nd = _core.ndim_of(x) - 1
    out = getitem(batching.to_back(x, d), _expand_ellipsis(idx, nd))
    return out, _core.ndim_of(out) - 1


getitem_p.defvmap(_getitem_vmap)
_core.set_getitem_fast(getitem_p)    # x[1:], x[:, 0] on a tape or on lanes: from C
getitem_p.defsparsity(patterns.MOVE)


def getitem(x, idx):
    """``x[idx]`` with derivatives (slices, integers, integer arrays, masks)."""
    if type(idx) is _core.Batched and type(idx.val) is np.ndarray:
        return _gather_lanes(x, idx)     # each lane's plain index (argsort under vmap)
    if has_box(idx):                     # traced integers: positions recomputed on replay
        return integers.gather(x, idx)
    idx = _index_key(idx)
    if isinstance(x, Box):
        return bind(getitem_p, x, idx=idx)
    return np.asarray(x)[idx] if isinstance(x, (int, float)) else x[idx]


def _gather_lanes(x, idx):
    """``x[idx]`` for a batched integer index (each lane its own, from argsort
    or argmax under vmap): one gather on the stacked lanes.  A tape recorded
    inside the vmap keeps the batched index as its node's parameter (the vmap
    rule gathers, the VJP scatters each lane's cotangent); lanes of another
    vmap make the function run per lane."""
    trace = idx.btrace
    i = batching.lane_indices(idx)
    if type(x) is _core.Batched and x.btrace is trace:
        return trace.box(getitem(batching.to_front(x.val, x.bdim), (_lane_column(i), i)), 0)
    if batching.batched_in(x) is None:                 # shared by every lane
        return trace.box(getitem(x, i), 0)
    if batching.batched_below(x, trace) is not None:   # a tape's box of this vmap's lanes
        return bind(getitem_p, x, idx=idx)
    raise BatchConcreteRead(trace, "an index")


def _lane_column(i):
    """The lane numbers, shaped to pair with the stacked indices ``i``."""
    n = i.shape[0]
    return np.arange(n).reshape((n,) + (1,) * (i.ndim - 1))


def _scatter_lanes(g, idx, shape, dtype):
    """The VJP of a gather by a batched index: each lane's cotangent added at
    its own indices, zeros of one lane's ``shape`` elsewhere (batched)."""
    trace = idx.btrace
    i = batching.lane_indices(idx)
    n = i.shape[0]
    if type(g) is _core.Batched and g.btrace is trace:
        gl = batching.to_front(g.val, g.bdim)
    elif batching.batched_in(g) is None:               # the same cotangent in every lane
        gl = batching.with_lanes(g, n)
    else:
        raise BatchConcreteRead(trace, "an index")
    out = index_add_zeros(gl, (_lane_column(i), i), (n,) + tuple(shape), dtype)
    return trace.box(out, 0)


# index_add_zeros: the transpose of getitem -----------------------------------------
def _index_add_impl(g, idx, shape, dtype):
    out = np.zeros(shape, dtype=np.result_type(dtype, np.asarray(g).dtype))
    if _is_basic(idx):
        out[idx] += g
    else:
        np.add.at(out, idx, g)
    return out


def _index_add_batched(tans, ans, vals, params, K):
    if isinstance(tans[0], Box):       # tangents traced by an outer transform: stay on it
        t = reshape(tans[0], (K,) + np.shape(vals[0]))
        return stack([index_add_zeros(t[k], params["idx"], params["shape"], params["dtype"])
                      for k in range(K)])
    out = np.zeros((K,) + tuple(params["shape"]), dtype=_dtype(ans))
    lead = _after_k(params["idx"])
    if lead is not None and _is_basic(params["idx"]):     # no repeated elements
        out[lead] += np.reshape(tans[0], (K,) + np.shape(vals[0]))
        return out
    view = _k_last(out)
    idx = _expand_ellipsis(params["idx"], len(params["shape"]))
    g = _k_last(np.reshape(tans[0], (K,) + np.shape(vals[0])))
    if _is_basic(params["idx"]):
        view[idx] += g
    else:
        np.add.at(view, idx, g)
    return out


index_add_p = Primitive("index_add_zeros", _index_add_impl, saves=(), linear=True)
index_add_p.defvjp(lambda g, ans, u, idx, shape, dtype: getitem(g, idx))
index_add_p.defbatched(_index_add_batched)
index_add_p.defvmap(lambda args, bdims, idx, shape, dtype: (bind(
    index_add_p, batching.to_back(args[0], bdims[0]), idx=_expand_ellipsis(idx, len(shape)),
    shape=tuple(shape) + (_core.shape_of(args[0])[bdims[0]],), dtype=dtype), len(shape)))
index_add_p.defsparsity(patterns.INDEX_ADD_ZEROS)
index_add_p.complex_ok = True      # linear: the same rule holds for complex values


def index_add_zeros(g, idx, shape, dtype):
    """zeros(shape) with ``g`` added at ``idx`` (the transpose of indexing)."""
    if isinstance(g, Box):
        return bind(index_add_p, g, idx=idx, shape=shape, dtype=dtype)
    return _index_add_impl(g, idx, shape, dtype)


# index_update: x with v set (or accumulated) at idx ---------------------------------
_MODES = ("set", "add")


def _write(out, idx, v, mode):
    if mode == "set":
        out[idx] = v
    elif _is_basic(idx):
        out[idx] += v
    else:
        np.add.at(out, idx, v)


def _update_impl(x, v, idx, mode):
    out = np.array(x, copy=True)        # x's dtype: numpy casts v on assignment
    _write(out, idx, v, mode)
    return out


def _winners(idx, shape):
    """Boolean array of ``x[idx]``'s shape: which positions of the indexed
    region land in the result of ``x[idx] = v`` (with repeated indices only
    the last write of an element survives, as in numpy)."""
    pos = np.full(shape, -1, dtype=np.intp)
    region = pos[idx]
    ids = np.arange(region.size, dtype=np.intp).reshape(region.shape)
    pos[idx] = ids
    return pos[idx] == ids


def _sum_to(g, shape):
    """Sum the cotangent ``g`` of a broadcast value back to ``shape``."""
    # cycle: _prims.elementwise -> _prims.shape -> here
    shape = tuple(shape)
    if np.shape(g) == shape:
        return g
    extra = len(shape) - np.ndim(g)         # v had leading size-1 axes numpy dropped
    core = shape[extra:] if extra > 0 else shape
    g = unbroadcast(np.broadcast_to(np.zeros((), _dtype(g)), core), g)
    return reshape(g, shape) if np.shape(g) != shape else g


def _update_vjp_x(g, ans, x, v, idx, mode):
    if mode == "add":
        return g
    return index_update(g, np.zeros((), _dtype(g)), idx, "set")


def _update_vjp_v(g, ans, x, v, idx, mode):
    gv = getitem(g, idx)
    if mode == "set" and not _is_basic(idx):
        win = _winners(idx, np.shape(x))
        if not win.all():
            gv = gv * win.astype(_dtype(gv))
    return _sum_to(gv, np.shape(v))


def _update_batched(tans, ans, vals, params, K):
    x, v = vals
    idx, mode = params["idx"], params["mode"]
    dtype = _dtype(ans)
    tx, tv = tans
    if isinstance(tx, Box) or isinstance(tv, Box):  # traced by an outer transform: stay on it
        rows = []
        tx = None if tx is None else broadcast_to(tx, (K,) + np.shape(x))
        tv = None if tv is None else reshape(tv, (K,) + np.shape(v))
        for k in range(K):
            xk = np.zeros(np.shape(x), dtype) if tx is None else tx[k]
            if tv is not None:
                rows.append(index_update(xk, tv[k], idx, mode))
            else:
                rows.append(index_update(xk, 0.0, idx, "set") if mode == "set" else xk)
        return stack(rows)
    out = (np.zeros((K,) + np.shape(x), dtype) if tx is None
           else np.array(np.broadcast_to(tx, (K,) + np.shape(x)), dtype=dtype))
    view = _k_last(out)
    idx = _expand_ellipsis(idx, np.ndim(x))
    if tv is None:
        if mode == "set":
            view[idx] = 0
        return out
    tv = _k_last(np.reshape(tv, (K,) + np.shape(v)))
    _write(view, idx, tv, mode)
    return out


index_update_p = Primitive("index_update", _update_impl, saves=(), linear=True)
index_update_p.defvjp(_update_vjp_x, _update_vjp_v)
index_update_p.defbatched(_update_batched)


def _update_vmap(args, bdims, idx, mode):
    """Lanes last (see getitem's rule); a shared ``v`` gets a size-1 lane axis."""
    (x, v), (dx, dv) = args, bdims
    n = batching.n_lanes(args, bdims)
    x = batching.with_lanes(x, n) if dx is None else x
    nd = _core.ndim_of(x) - 1
    x = batching.to_back(x, 0 if dx is None else dx)
    if dv is None:
        v = batching.reshape(v, _core.shape_of(v) + (1,))
    else:
        v = batching.to_back(v, dv)
    return bind(index_update_p, x, v, idx=_expand_ellipsis(idx, nd), mode=mode), nd


index_update_p.defvmap(_update_vmap)
index_update_p.defsparsity(patterns.INDEX_UPDATE)     # "set" moves, "add" unions


def index_update(x, v, idx, mode="set"):
    """A copy of ``x`` with ``v`` written at ``idx``: ``x[idx] = v`` as a value.

    Parameters
    ----------
    x : array (traced or not), shape S
    v : array or scalar broadcastable to ``x[idx].shape``
    idx : index
        Anything numpy accepts (slices, integers, integer arrays, masks);
        it must not be traced.
    mode : {"set", "add"}
        ``"set"``: numpy assignment (with repeated indices the last write
        wins); ``"add"``: ``np.add.at`` (repeated indices accumulate).

    Returns
    -------
    array of shape S and ``x``'s dtype.  Derivatives flow to ``x`` (outside
    the written region for ``"set"``) and to ``v``.
    """
    if mode not in _MODES:
        raise ValueError(f"index_update: mode must be 'set' or 'add', not {mode!r}")
    if has_box(idx):
        integers.split_index(idx, _core.shape_of(x))    # an index of integers
        if mode == "add":                # traced integers: positions recomputed on replay
            return integers.add_at(x, idx, v)
        raise TypeError(
            "x[i] = v with traced integers i: which write wins where i repeats depends on "
            "the values, and tapead does not record that. Add instead "
            "(tapead.numpy.at(x)[i].add(v - x[i]) when i does not repeat), build the "
            "result with np.where, or compute i from concrete values")
    idx = _index_key(idx)
    if isinstance(x, Box) or has_box(v):
        if isinstance(v, (list, tuple)):          # y[:2] = [a, b] with a, b traced
            v = stack(v) if has_box(v) else np.asarray(v)
        return bind(index_update_p, x, v, idx=idx, mode=mode)
    return _update_impl(x, v, idx, mode)


class _AtIndex:
    __slots__ = ("_x", "_idx")

    def __init__(self, x, idx):
        self._x, self._idx = x, idx

    def set(self, v):
        """A copy of the array with ``v`` written at the index."""
        return index_update(self._x, v, self._idx, "set")

    def add(self, v):
        """A copy with ``v`` added at the index; repeated indices accumulate."""
        return index_update(self._x, v, self._idx, "add")

    def get(self):
        """``x[idx]``."""
        return getitem(self._x, self._idx)


class at:
    """JAX's functional index updates: ``at(x)[idx].set(v)``, ``.add(v)``, ``.get()``.

    Each returns a new array and leaves ``x`` alone; works on traced and
    plain arrays.  ``.add`` accumulates repeated indices (``np.add.at``),
    unlike ``x[idx] += v`` in numpy, which adds once.

    >>> import numpy as np, tapead.numpy as tnp
    >>> tnp.at(np.zeros(3))[[0, 0, 2]].add(1.0)
    array([2., 0., 1.])
    """
    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        return _AtIndex(self._x, idx)


# take ------------------------------------------------------------------------------
def take(a, indices, axis=None, out=None, mode="raise"):
    """``np.take`` with derivatives (``mode`` "raise", "wrap" or "clip")."""
    if out is not None:
        raise TypeError("take(..., out=...) cannot write a traced value into an array; "
                        "use the returned value")
    if not isinstance(a, Box) and not has_box(indices):
        return np.take(a, indices, axis=axis, mode=mode)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis = axis % np.ndim(a)
    if has_box(indices):                 # traced integers
        if mode != "raise":
            raise TypeError(f"take(..., mode={mode!r}) with traced indices: wrap or clip "
                            "the positions before converting them to integers")
        return getitem(a, (slice(None),) * axis + (indices,))
    ind = np.asarray(_index_key(indices))
    n = np.shape(a)[axis]
    if mode == "wrap":
        ind = ind % n
    elif mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    elif mode != "raise":
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', not {mode!r}")
    key = ind if ind.ndim else int(ind)
    return getitem(a, (slice(None),) * axis + (key,))


# copy ------------------------------------------------------------------------------
copy_p = Primitive("copy", lambda x: np.array(x, copy=True), saves=(), linear=True)
copy_p.defvjp(lambda g, ans, x: g)
copy_p.defbatched(lambda tans, ans, vals, params, K: tans[0])
copy_p.defvmap(lambda args, bdims: (bind(copy_p, args[0]), bdims[0]))
copy_p.defsparsity(patterns.MOVE)
copy_p.complex_ok = True      # linear: the same rule holds for complex values


def copy(a, order="K", subok=False):
    """``np.copy`` / ``x.copy()``: a new array (a new box), so that writing
    into the copy (``y = x.copy(); y[0] = 1.0``) leaves ``x`` alone."""
    if isinstance(a, Box):
        return bind(copy_p, a)
    return np.copy(a, order=order, subok=subok)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.take: take, np.copy: copy}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {
    "take": take,
    "copy": lambda x, order="K": copy(x),
}
__all__ = ["getitem", "index_update", "at", "take", "copy"]
