"""The lane engine of ``ta.vmap``: the function once on the stacked lanes, split
where the lanes disagree on a Python branch, once per lane where code reads
one value, and the groups' outputs put back in lane order.

``run_groups`` drives it from an explicit work list: each item is a set of
lanes run batched (``run_batched``, one ``BatchTrace``); a ``BatchSplit``
puts the two groups of agreeing lanes back on the list, a
``BatchConcreteRead`` runs the group lane by lane (``run_lanes``).  When the
lanes run in several groups, a ``Placer`` writes each group's array outputs
into the whole outputs as soon as the group is done.  The helpers on lanes
(``take_lanes``, ``concat_lanes``, ``move_axis``...) work on numpy arrays and
on boxes of outer transforms alike.  The API (arguments, ``in_axes`` and
``out_axes``, joining the groups' outputs) is ``tapead.vmap``.
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, shape_of
from tapead._prims import batching
from tapead._prims.indexing import getitem
from tapead._prims.shape import broadcast_to, concatenate, moveaxis, stack
from tapead._tree import tree_flatten
from tapead.vmap_axes import is_array_like
from tapead.errors import BatchConcreteRead, BatchSplit, VmapFallbackError


def one_lane(x, axis: int, i: int):
    """Lane ``i`` of ``x`` (a tapead index along ``axis`` for boxes; for numpy
    arrays, whose mapped axis was moved first, a copy, so that ``f`` writing
    into its argument cannot change other lanes)."""
    if isinstance(x, Box):
        return x[(slice(None),) * axis + (i,)]
    lane = x[i]
    return lane.copy() if type(lane) is np.ndarray else lane


def lane_template(x, axis: int):
    """A stand-in lane (ones) when the mapped axis has size 0 (numpy arrays
    have it first already)."""
    if isinstance(x, Box):
        shape, dtype = tuple(shape_of(x)), np.result_type(_core.concrete(x))
        return np.ones(shape[:axis] + shape[axis + 1:], dtype=dtype)
    return np.ones(x.shape[1:], dtype=x.dtype)


def stack_lanes(lanes: list, axis: int):
    if any(isinstance(v, Box) for v in lanes):
        return stack(lanes, axis=axis)
    return np.stack([np.asarray(v) for v in lanes], axis=axis)


def same_everywhere(lanes: list) -> bool:
    first = lanes[0]
    if isinstance(first, Box) or any(isinstance(v, Box) for v in lanes):
        return all(v is first for v in lanes)
    a = np.asarray(first)
    return all(np.shape(v) == a.shape and np.array_equal(np.asarray(v), a, equal_nan=True)
               for v in lanes[1:])


def to_front(x, ax):
    return x if isinstance(x, Box) else np.moveaxis(np.asarray(x), ax, 0)


def take_lanes(x, idx, ax):
    if isinstance(x, Box):
        return getitem(x, (slice(None),) * ax + (idx,))
    return np.take(x, idx, axis=ax)


def move_axis(x, src, dst):
    if src == dst:
        return x
    return moveaxis(x, src, dst) if isinstance(x, Box) else np.moveaxis(x, src, dst)


def concat_lanes(cols):
    if any(isinstance(c, Box) for c in cols):
        return concatenate(cols, axis=0)
    return np.concatenate([np.asarray(c) for c in cols], axis=0)


def scatter_lanes(idxs, cols, n, k):
    """The groups' columns (lane axis 0) written into one new array at their
    lanes' positions: one copy of the output (concatenating and then
    re-ordering would copy it twice)."""
    cols = [np.asarray(c) for c in cols]
    shape = cols[0].shape[1:]
    for c in cols[1:]:
        if c.shape[1:] != shape:
            raise ValueError(f"vmap: output {k} of the function has shape {shape} in some "
                             f"lanes and {c.shape[1:]} in others; every lane must return "
                             "arrays of the same shape")
    out = np.empty((n,) + shape, dtype=np.result_type(*cols))
    for idx, c in zip(idxs, cols):
        out[idx] = c
    return out


def broadcast_lanes(v, m):
    shape = (m,) + tuple(shape_of(v))
    if isinstance(v, Box):
        return broadcast_to(v, shape)
    return np.broadcast_to(np.asarray(v), shape)


def lane_rank(kind, v):
    return len(shape_of(v)) - (kind == "lanes")


def finish(v):
    """A result array the caller owns (never a view of a lane's input or a
    broadcast)."""
    if type(v) is np.ndarray and (v.base is not None or not v.flags.writeable):
        return np.array(v)
    return v


def lanes_equal(v) -> bool:
    if isinstance(v, Box):
        return False
    v = np.asarray(v)
    return all(np.array_equal(v[i], v[0], equal_nan=True) for i in range(1, v.shape[0]))


def shared_output(entries, k):
    value = None
    for idx, (kind, v) in entries:
        if kind == "lanes":
            if not lanes_equal(v):
                raise ValueError(
                    f"vmap: out_axes is None for output {k}, but that output differs "
                    "between lanes; give it an int out_axes to stack the lanes, or "
                    "make it not depend on the mapped arguments")
            v = v[0]
        if value is None:
            value = v
        elif value is not v and (isinstance(v, Box) or isinstance(value, Box) or not
                                 np.array_equal(np.asarray(v), np.asarray(value),
                                                equal_nan=True)):
            raise ValueError(
                f"vmap: out_axes is None for output {k}, but that output differs "
                "between lanes; give it an int out_axes to stack the lanes")
    return value if isinstance(value, Box) else np.asarray(value)


def run_batched(call, leaves, axes, idx, n):
    """``call`` once on the lanes ``idx`` (None: all ``n``), batched; returns
    ("done", tree def, output, [(kind, value)]), ("split", lanes) or ("read", what)."""
    m = n if idx is None else len(idx)
    trace = _core.BatchTrace(m, batching.process)
    try:
        inputs = []
        for x, ax in zip(leaves, axes):
            if ax is None:
                inputs.append(x)
                continue
            v = x if idx is None else take_lanes(x, idx, ax)
            inputs.append(trace.box(v if isinstance(v, Box) else np.asarray(v), ax))
        try:
            out = call(inputs)
        except BatchSplit as e:
            if e.trace is not trace:
                raise
            return ("split", np.asarray(e.lanes, dtype=bool))
        except BatchConcreteRead as e:
            if e.trace is not trace:
                raise
            return ("read", e.what)
        outs, td = tree_flatten(out)
        cols = []
        for o in outs:
            if type(o) is _core.Batched and o.btrace is trace:
                cols.append(("lanes", batching.to_front(o.val, o.bdim)))
            else:
                cols.append(("shared", o))
        return ("done", td, out, cols)
    finally:
        trace.active = False


def run_lanes(call, leaves, axes, idx):
    """``call`` once per lane of ``idx``: the outputs stacked (lane axis 0)."""
    columns, td0, first = None, None, None
    for i in idx:
        lane = [x if ax is None else one_lane(to_front(x, ax) if not isinstance(x, Box) else x,
                                              0 if not isinstance(x, Box) else ax, int(i))
                for x, ax in zip(leaves, axes)]
        out = call(lane)
        outs, td = tree_flatten(out)
        if columns is None:
            columns, td0, first = [[] for _ in outs], td, out
        elif td != td0:
            raise ValueError(f"vmap: the function returned differently structured outputs "
                             f"in lane {int(idx[0])} ({td0}) and lane {int(i)} ({td}); every "
                             "lane must return the same pytree structure")
        for col, o in zip(columns, outs):
            col.append(o)
    cols = []
    for col in columns:
        if not all(is_array_like(v) for v in col):
            cols.append(("shared", next(v for v in col if not is_array_like(v))))
        elif len(col) > 1 and all(v is col[0] for v in col):
            cols.append(("shared", col[0]))
        else:
            cols.append(("lanes", stack_lanes(col, 0)))
    return td0, first, cols


def run_groups(call, leaves, axes, n, chunk, placer=None):
    """Every lane's outputs as groups (lane indices, tree def, one output,
    columns), from an explicit work list: a group whose lanes disagree on a
    branch is split in two by the predicate; one whose code reads a value
    runs lane by lane.  When the lanes run in more than one group, each
    group's array outputs are written into the whole outputs as soon as the
    group is done (``placer``): one copy while they are still in the cache,
    and the group's memory is free for the next group's run."""
    if chunk is None or chunk >= n:
        work = [None]
    else:
        work = [np.arange(s, min(s + chunk, n)) for s in range(0, n, chunk)][::-1]
    done = []
    while work:
        idx = work.pop()
        r = run_batched(call, leaves, axes, idx, n)
        lanes_idx = np.arange(n) if idx is None else idx
        if r[0] == "done":
            group = (lanes_idx, r[1], r[2], r[3])
            del r
            if placer is not None and (work or done):     # one group of several
                group = placer.place(group)
            done.append(group)
        elif r[0] == "split":
            batching.STATS["splits"] += 1
            work.append(lanes_idx[~r[1]])
            work.append(lanes_idx[r[1]])
        else:
            if batching.strict():
                raise VmapFallbackError(
                    f"vmap would run the function once per lane ({r[1]} read one lane's "
                    "value) and TAPEAD_STRICT_VMAP is set; compute with tapead operations "
                    "instead of reading values, or unset TAPEAD_STRICT_VMAP")
            batching.STATS["per_lane_runs"] += 1
            group = (lanes_idx,) + run_lanes(call, leaves, axes, lanes_idx)
            if placer is not None and (work or done):
                group = placer.place(group)
            done.append(group)
    return done


def lane_slot(idx):
    """Lane indices as a slice when they are consecutive (the groups' indices
    are increasing), else the index array."""
    m = len(idx)
    if m and int(idx[-1]) - int(idx[0]) == m - 1:
        return slice(int(idx[0]), int(idx[0]) + m)
    return idx


class Placer:
    """The whole outputs of a vmap whose lanes run in several groups, filled
    group by group: column k's array, with the lanes in order on axis 0.

    A column is placed when the first group that returns it gives a numpy
    value (its lanes, or one value shared by the group's lanes); a traced
    (boxed) value is left to ``_join``.  A later group's value must have the
    same lane shape (else the same error as ``_join``'s); its dtype may
    promote the column, as concatenating would."""

    def __init__(self, n):
        self.n = n
        self.bufs = {}            # column -> the whole output so far
        self.raw = set()          # columns left to _join

    def place(self, group):
        idx, td, _, cols = group
        slot = None
        out = []
        for k, (kind, v) in enumerate(cols):
            if k in self.raw or isinstance(v, Box) or not is_array_like(v):
                self.raw.add(k)             # placed entries so far are taken back out
                out.append((kind, v))
                continue
            v = np.asarray(v)
            lane_shape = v.shape[1:] if kind == "lanes" else v.shape
            buf = self.bufs.get(k)
            if buf is None:
                buf = self.bufs[k] = np.empty((self.n,) + lane_shape, dtype=v.dtype)
            elif buf.shape[1:] != lane_shape:
                raise ValueError(f"vmap: output {k} of the function has shape "
                                 f"{buf.shape[1:]} in some lanes and {lane_shape} in "
                                 "others; every lane must return arrays of the same shape")
            elif np.result_type(buf.dtype, v.dtype) != buf.dtype:
                buf = self.bufs[k] = buf.astype(np.result_type(buf.dtype, v.dtype))
            if slot is None:
                slot = lane_slot(idx)
            buf[slot] = v
            out.append(("placed", None))
        return (idx, td, None, out)    # out_axes is an int: no output tree needed

    def column(self, k, entries):
        """Column k's whole output when every group's entry was placed, else
        None (the placed entries are taken back out for ``_join``)."""
        buf = self.bufs.get(k)
        if buf is None:
            return None
        if all(e[0] == "placed" for _, e in entries):
            return buf
        for j, (idx, e) in enumerate(entries):
            if e[0] == "placed":
                entries[j] = (idx, ("lanes", buf[lane_slot(idx)]))
        return None
