"""vmap's batching: one primitive call on the stacked lanes.

Under ``ta.vmap`` the arguments are ``Batched`` boxes of a ``BatchTrace``
(the lanes stacked along one axis, ``bdim``).  ``_bind`` hands every
primitive applied to such a box to :func:`process`, before any value is
computed: it unboxes the trace's own boxes (the other arguments are shared by
every lane), applies the primitive's vmap rule (``Primitive.defvmap``,
registered right under the primitive) and boxes the result again.  Rules use
tapead operations on the stacked values, which may be boxes of outer
transforms (a tape of an enclosing ``grad``): those record as usual, so
``grad(vmap(f))``, ``jvp(vmap(f))`` and ``vmap(vmap(f))`` need nothing more.

A primitive without a rule runs once per lane (its lanes sliced out, the
results stacked), with a one-time warning naming it; ``TAPEAD_STRICT_VMAP=1``
turns that into a ``VmapFallbackError``.  ``PER_LANE`` declares that fallback
on purpose (primitives that run arbitrary user code), without the warning.

This module also holds the family helpers of the rules: elementwise
(operands padded to one rank), one axis parameter shifted past the lane axis,
and the lane-axis moves the rules share.
"""
from __future__ import annotations

import os
import warnings
from typing import Optional

import numpy as np

from tapead import _core
from tapead._core import Batched, Box, bind, ndim_of, shape_of
from tapead._prims.base import PER_LANE, VMAP_ELEMENTWISE, Primitive, defzero
from tapead.errors import BatchConcreteRead, VmapFallbackError

#: counters since the last ``reset_stats`` (see ``ta.vmap_stats``)
STATS = {"splits": 0, "per_lane_calls": 0, "per_lane_runs": 0}
_WARNED: set = set()


def reset_stats() -> None:
    for k in STATS:
        STATS[k] = 0


def strict() -> bool:
    """Whether ``TAPEAD_STRICT_VMAP`` asks for an error instead of a per-lane run."""
    return os.environ.get("TAPEAD_STRICT_VMAP", "") not in ("", "0")


# ---------------------------------------------------------------------------
# lane-axis moves shared by the rules
# ---------------------------------------------------------------------------

def to_front(x, bdim: int):
    """``x`` with its lane axis ``bdim`` moved to axis 0."""
    if bdim == 0:
        return x
    return np.moveaxis(x, bdim, 0)          # a box: tapead's moveaxis, by NEP 18


def to_back(x, bdim: int):
    """``x`` with its lane axis ``bdim`` moved to the last axis."""
    nd = ndim_of(x)
    if bdim == nd - 1:
        return x
    return np.moveaxis(x, bdim, nd - 1)


def reshape(x, shape):
    return np.reshape(x, shape)             # a box: tapead's reshape, by NEP 18


def padded(x, bdim: int, rank: int):
    """The lanes of ``x`` in front, each lane padded with leading 1-axes to
    ``rank`` dims: shape ``(n,) + (1,) * (rank - lane rank) + lane shape``,
    so that numpy broadcasting pairs lane axes with lane axes."""
    x = to_front(x, bdim)
    shape = shape_of(x)
    if len(shape) - 1 >= rank:
        return x
    return reshape(x, shape[:1] + (1,) * (rank - len(shape) + 1) + shape[1:])


def lane_ndim(x, bdim: Optional[int]) -> int:
    return ndim_of(x) - (bdim is not None)


def with_lanes(x, n: int):
    """An argument every lane shares, given a lane axis in front (broadcast)."""
    shape = shape_of(x)
    x = x if isinstance(x, Box) or type(x) is np.ndarray else np.asarray(x)
    return np.broadcast_to(x, (n,) + tuple(shape))   # a box: tapead's, by NEP 18


def all_front(args, bdims, n: int):
    """Every argument with its lanes in front (shared ones broadcast)."""
    return [with_lanes(a, n) if d is None else to_front(a, d) for a, d in zip(args, bdims)]


def shift_axis(axis, nd: int):
    """A lane's ``axis`` parameter (int, tuple or None = all) for lanes in front."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % max(nd, 1) + 1 for a in axis)
    return int(axis) % max(nd, 1) + 1


# ---------------------------------------------------------------------------
# family rules
# ---------------------------------------------------------------------------

def elementwise(prim, args, bdims, params):
    """Elementwise primitives: lanes in front, every batched operand padded to
    the output's lane rank (shared operands broadcast by numpy)."""
    rank = max(lane_ndim(a, d) for a, d in zip(args, bdims))
    new = [a if d is None else padded(a, d, rank) for a, d in zip(args, bdims)]
    return bind(prim, *new, **params), 0


def elementwise_rule(prim):
    """The elementwise vmap rule for a primitive that acts element by element
    but is not flagged ``elementwise`` (zero-derivative functions...)."""
    def rule(args, bdims, **params):
        return elementwise(prim, args, bdims, params)
    rule.__name__ = f"vmap_{prim.name}"
    return rule


def axis_rule(prim, name: str = "axis", none_means_all: bool = True):
    """A vmap rule for a one-array primitive whose ``name`` parameter counts lane
    axes (reductions, cumulative sums, sorts, FFTs): lanes in front, the axis
    shifted by one.  ``none_means_all``: ``axis=None`` means every lane axis."""
    def rule(args, bdims, **params):
        x = to_front(args[0], bdims[0])
        nd = ndim_of(x) - 1
        ax = params.get(name)
        if ax is None and not none_means_all:
            raise VmapFallbackError(f"{prim.name}: {name}=None has no batched form")
        params[name] = shift_axis(ax, nd)
        rest = [a if d is None else to_front(a, d) for a, d in zip(args[1:], bdims[1:])]
        return bind(prim, x, *rest, **params), 0
    rule.__name__ = f"vmap_{prim.name}"
    if name == "axis" and none_means_all:
        _core.set_vmap_fast(prim, "axis", rule)   # its C form, for one array of plain lanes
    return rule


def leading_rule(prim, core_ranks):
    """A vmap rule for primitives that broadcast over leading axes (numpy's
    linalg): argument k's lane has ``core_ranks[k]`` core axes; lanes go in
    front and each batched argument is padded to the largest batch rank, so
    numpy's broadcasting pairs the shared arguments with every lane."""
    def rule(args, bdims, **params):
        ranks = [lane_ndim(a, d) - c for a, d, c in zip(args, bdims, core_ranks)]
        top = max(ranks)
        new = [a if d is None else padded(a, d, top + c)
               for a, d, c in zip(args, bdims, core_ranks)]
        return bind(prim, *new, **params), 0
    rule.__name__ = f"vmap_{prim.name}"
    return rule


def n_lanes(args, bdims) -> int:
    """The number of lanes (the size of the first batched argument's lane axis)."""
    for a, d in zip(args, bdims):
        if d is not None:
            return shape_of(a)[d]
    raise AssertionError("a vmap rule called without a batched argument")


# ---------------------------------------------------------------------------
# the handler of BatchTrace
# ---------------------------------------------------------------------------

def _lane(x, bdim: int, i: int):
    idx = (slice(None),) * bdim + (i,)
    if isinstance(x, Box):
        return x[idx]                        # the box's getitem
    return np.asarray(x)[idx]


def _stack(outs):
    if any(isinstance(o, Box) for o in outs):
        return np.stack(outs)                # boxes: tapead's stack, by NEP 18
    return np.stack([np.asarray(o) for o in outs])


def per_lane(trace, prim, args, bdims, params):
    """The primitive once per lane, the results stacked (lane axis 0)."""
    declared = prim.vmap_rule is PER_LANE
    if strict():
        raise VmapFallbackError(
            f"vmap would run primitive {prim.name!r} once per lane ("
            + ("declared PER_LANE" if declared else "it has no vmap rule")
            + ") and TAPEAD_STRICT_VMAP is set; register a rule with "
            f"{prim.name}.defvmap(rule), or unset TAPEAD_STRICT_VMAP")
    if not declared and prim.name not in _WARNED:
        _WARNED.add(prim.name)
        warnings.warn(f"vmap: primitive {prim.name!r} has no vmap rule; it runs once "
                      "per lane (correct, n times the calls). Register one with "
                      f"defvmap right under its definition", stacklevel=4)
    STATS["per_lane_calls"] += 1
    n = trace.size
    if n == 0:
        raise _core_read(trace, f"{prim.name} on zero lanes")
    outs = []
    for i in range(n):
        lane = [a if d is None else _lane(a, d, i) for a, d in zip(args, bdims)]
        outs.append(bind(prim, *lane, **params))
    if isinstance(outs[0], (tuple, list)):
        return tuple(_stack([o[k] for o in outs]) for k in range(len(outs[0]))), 0
    return _stack(outs), 0


def _core_read(trace, what):
    return BatchConcreteRead(trace, what)


def process(trace, prim, args, params):
    """Apply ``prim`` to ``args`` (some of them ``trace``'s Batched boxes) once,
    on the stacked lanes; the ``handler`` of every ``BatchTrace``."""
    vals, bdims = [], []
    for a in args:
        if type(a) is Batched and a.btrace is trace:
            vals.append(a.val)
            bdims.append(a.bdim)
        else:
            vals.append(a)
            bdims.append(None)
    rule = prim.vmap_rule
    params = dict(params)
    if rule is VMAP_ELEMENTWISE:
        out, od = elementwise(prim, vals, bdims, params)
    elif rule is None or rule is PER_LANE:
        out, od = per_lane(trace, prim, vals, bdims, params)
    else:
        out, od = rule(vals, bdims, **params)
    if od is None:
        return out
    if isinstance(out, tuple):
        ods = od if isinstance(od, tuple) else (od,) * len(out)
        return tuple(o if d is None else trace.box(o, d) for o, d in zip(out, ods))
    return trace.box(out, od)


def batched_in(*xs):
    """The innermost batch trace among ``xs`` (through boxes of outer
    transforms), or None."""
    top = None
    for x in xs:
        while isinstance(x, Box):
            if type(x) is Batched:
                if top is None or x.btrace.level > top.level:
                    top = x.btrace
                x = x.val
            else:
                x = _core.primal_of(x)
    return top


# ---------------------------------------------------------------------------
# constants computed from values while a tape that will be replayed records
# ---------------------------------------------------------------------------
#
# A rule or a composition that computes a constant from a traced value (the
# sign in abs's derivative, the mask of relu, a count of zeros) reads the
# number inside the box.  On a tape that ``ta.jit`` replays at new inputs such
# a number would be frozen at the recorded point.  So, while such a tape
# records the value (``_core.is_recorded``), the helpers below either record
# the computation as a node without derivative (``computed``: a replay runs
# ``fn`` again on the new values) or, for a number Python branches on, record
# a guard (a replay checks it and re-records when it changed).

def _computed_impl(*xs, fn):
    return fn(*xs)


computed_p = Primitive("computed", _computed_impl, saves=())
computed_p.defvjp_any(lambda k, g, ans, *xs, fn: None)
computed_p.defjvp_any(lambda k, t, ans, *xs, fn: None)
computed_p.complex_ok = True
defzero(computed_p)
computed_p.defvmap(PER_LANE)


def computed(fn, *xs):
    """``fn`` (numpy, no derivative) of the values of ``xs``, recorded as a node:
    a box on the innermost tape among ``xs``; each replay recomputes it."""
    return bind(computed_p, *xs, fn=fn)


def _concrete_of(fn):
    return lambda *v: fn(*[_core.concrete(a) for a in v])


def guarded_result(fn, x, what: str):
    """``fn`` (numpy) of the value of ``x`` as a plain number or array, guarded
    on every tape that records ``x`` when one of them will be replayed (a
    replay checks that it comes out the same)."""
    res = fn(_core.concrete(x))
    if _core.is_recorded(x):
        _core.guard_value(x, lambda v: fn(_core.concrete(v)), res, what)
    return res


def lanes_apply(fn, x):
    """``fn`` of one lane's value, for every lane of ``x``: a constant (no
    derivative) that is itself batched, for code that computes a constant
    from values (the shift of logsumexp).  Plain ``fn(value)`` when ``x`` is
    not batched; a ``BatchConcreteRead`` (vmap runs the function per lane)
    when it is batched by two nested vmaps."""
    if type(x) is not Batched:
        if _core.is_recorded(x):
            return computed(_concrete_of(fn), x)
        return fn(_core.concrete(x))
    v = x.val
    if batched_in(v) is not None:
        raise _core_read(x.btrace, "a value under nested vmaps")
    bdim = x.bdim

    def per_lane(v):
        lanes = np.moveaxis(np.asarray(_core.concrete(v)), bdim, 0)
        return np.stack([np.asarray(fn(lane)) for lane in lanes])
    if _core.is_recorded(v):
        return x.btrace.box(computed(per_lane, v), 0)
    return x.btrace.box(per_lane(v), 0)


def elementwise_values(fn, *xs):
    """``fn`` (elementwise, numpy) of the values of ``xs``: a constant, batched
    when some ``x`` is (the lanes' values stacked, so no lane is read on its
    own), for rules that decide per element from values (a kink's side)."""
    trace = batched_in(*xs)
    if trace is None:
        if _core.any_recorded(*xs):
            return computed(_concrete_of(fn), *xs)
        return fn(*[_core.concrete(x) for x in xs])
    bdims = [x.bdim if type(x) is Batched and x.btrace is trace else None for x in xs]
    vals = [x.val if d is not None else x for x, d in zip(xs, bdims)]
    if batched_in(*vals) is not None:
        raise _core_read(trace, "values under nested vmaps")
    rank = max(lane_ndim(v, d) for v, d in zip(vals, bdims))
    lanes = [v if d is None else padded(v, d, rank) for v, d in zip(vals, bdims)]
    if _core.any_recorded(*lanes):
        return trace.box(computed(lambda *v: np.asarray(_concrete_of(fn)(*v)), *lanes), 0)
    plain = [_core.concrete(v) if d is None else np.asarray(_core.concrete(v))
             for v, d in zip(lanes, bdims)]
    return trace.box(np.asarray(fn(*plain)), 0)


def value_ufunc(ufunc, inputs, kwargs):
    """A ufunc without derivative (comparisons, isnan...) of batched values:
    the lanes' results, batched (None when no input is batched)."""
    trace = batched_in(*inputs)
    if trace is None:
        return None
    bdims = [a.bdim if type(a) is Batched and a.btrace is trace else None for a in inputs]
    vals = [a.val if d is not None else a for a, d in zip(inputs, bdims)]
    rank = max(lane_ndim(a, d) for a, d in zip(vals, bdims))
    new = [a if d is None else padded(a, d, rank) for a, d in zip(vals, bdims)]
    if _core.any_recorded(*new):
        return trace.box(computed(lambda *v: ufunc(*v, **kwargs), *new), 0)
    out = ufunc(*[_core.concrete(a) if type(a) is not Batched else a for a in new], **kwargs)
    return trace.box(out, 0)


def batch_compare(x, y, code: int):
    """A comparison with a Batched operand: the lanes' booleans, batched (the
    innermost vmap among the operands; guards recorded on tapes below)."""
    tx = x.btrace if type(x) is Batched else None
    ty = y.btrace if type(y) is Batched else None
    trace = tx if ty is None or (tx is not None and tx.level >= ty.level) else ty
    args = [x, y]
    bdims = [a.bdim if type(a) is Batched and a.btrace is trace else None for a in args]
    vals = [a.val if d is not None else a for a, d in zip(args, bdims)]
    rank = max(lane_ndim(a, d) for a, d in zip(vals, bdims))
    new = [a if d is None else padded(a, d, rank) for a, d in zip(vals, bdims)]
    out = _core.compare_values(new[0], new[1], code)
    return trace.box(np.asarray(out) if not isinstance(out, Box) else out, 0)


# ---------------------------------------------------------------------------
# values read by compositions, kept batched
# ---------------------------------------------------------------------------

def batched_below(x, trace):
    """``x`` with the tape and dual levels above ``trace``'s box stripped, or
    None when ``x`` is no box of ``trace`` under such levels."""
    while type(x) is _core.Tracer or type(x) is _core.Dual:
        x = _core.primal_of(x)
    if type(x) is Batched and x.btrace is trace:
        return x
    return None


def _lanes_below(x, what: str):
    """The ``Batched`` of the innermost vmap under ``x``'s tape levels, or None
    when ``x`` is not batched; a ``BatchConcreteRead`` under nested vmaps."""
    trace = batched_in(x)
    if trace is None:
        return None
    b = batched_below(x, trace)
    if b is None or batched_in(b.val) is not None:
        raise _core_read(trace, what)
    return b


def guarded_values(fn, x, what: str):
    """``fn`` (numpy, elementwise, no derivative: ``np.isnan``...) of the value
    of ``x``, recorded as a guard on every tape that holds that value (a replay
    re-checks it, ``GuardFlippedError`` if it changed).

    Under vmap the result is batched: the lanes' values are read together (no
    lane on its own) and the guard is recorded on the tapes outside the vmap,
    whose nodes hold the stacked lanes.  A tape started inside the vmap (a
    ``grad`` taken per lane) evaluates eagerly and records no guard.
    """
    def of(v):
        return fn(np.asarray(_core.concrete(v)))
    b = _lanes_below(x, what)
    if b is None:                   # not batched: the value, guarded on its tapes
        res = of(x)
        _core.guard_value(x, of, res, what)
        return res
    res = of(b.val)
    _core.guard_value(b.val, of, res, what)
    return b.btrace.box(np.asarray(res), b.bdim)


def reduce_values(npfunc, x, axis=None, keepdims=False):
    """``npfunc(x, axis=axis, keepdims=keepdims)`` (``np.any``, ``np.all``,
    ``np.sum``: no derivative) of a value such as a mask from
    :func:`guarded_values`, batched when ``x`` is: each lane reduced along
    its own axes."""
    if type(x) is not Batched:
        return guarded_result(lambda v: npfunc(v, axis=axis, keepdims=keepdims), x,
                              f"np.{getattr(npfunc, '__name__', 'reduction')} of a value")
    if batched_in(x.val) is not None:
        raise _core_read(x.btrace, "a value under nested vmaps")
    bdim = x.bdim

    def lanes(val):
        v = np.moveaxis(np.asarray(val), bdim, 0)
        return np.asarray(npfunc(v, axis=shift_axis(axis, v.ndim - 1), keepdims=keepdims))
    return x.btrace.box(guarded_result(lanes, x.val, "a reduction of the lanes' values"), 0)


def value_of(x):
    """The value of ``x`` without any derivative: the plain value, or under
    vmap the lanes' values, batched (for a condition or a mask computed from
    values); a ``BatchConcreteRead`` under nested vmaps."""
    trace = batched_in(x)
    if trace is None:
        if _core.is_recorded(x):
            return computed(_copy_value, x)
        return _core.concrete(x)
    b = batched_below(x, trace)
    if b is None or batched_in(b.val) is not None:
        raise _core_read(trace, "a value under nested vmaps")
    if type(b.val) is np.ndarray:
        return b
    if _core.is_recorded(b.val):
        return trace.box(computed(_copy_value, b.val), b.bdim)
    return trace.box(np.asarray(_core.concrete(b.val)), b.bdim)


def _copy_value(v):
    """The value of a box as a new plain array (or number)."""
    v = _core.concrete(v)
    return np.array(v) if isinstance(v, np.ndarray) else v


def any_value(fn, *xs) -> object:
    """Whether ``fn`` (numpy, elementwise) of the values of ``xs`` holds
    anywhere: a bool, batched under vmap (for checks such as a domain check,
    ``if batching.any_value(lambda v: v < 0, x): raise ...``: lanes that
    agree cost nothing, lanes that disagree split the batch)."""
    trace = batched_in(*xs)
    if trace is None:
        if _core.any_recorded(*xs):
            hit = computed(lambda *v: np.asarray(np.any(_concrete_of(fn)(*v))), *xs)
            return bool(guarded_result(bool, hit, "a check of the values"))
        return bool(np.any(fn(*[_core.concrete(x) for x in xs])))
    return reduce_values(np.any, elementwise_values(fn, *[value_of(x) for x in xs]))


def guarded_lanes(fn, x, what: str):
    """``fn`` (numpy, of one lane's value: an argsort, an argmax...) of the
    value of ``x``, guarded like :func:`guarded_values`.  Under vmap, ``fn``
    runs on each lane's value (a numpy loop, not a rerun of the function)
    and the results come back batched (lanes in front), e.g. integer indices
    for a batched gather."""
    def of(v):
        return fn(np.asarray(_core.concrete(v)))
    b = _lanes_below(x, what)
    if b is None:                   # not batched: the value, guarded on its tapes
        res = of(x)
        _core.guard_value(x, of, res, what)
        return res
    bdim = b.bdim

    def stacked(v):
        lanes = np.moveaxis(np.asarray(_core.concrete(v)), bdim, 0)
        if lanes.shape[0] == 0:                    # no lanes: the shape of one result
            one = np.asarray(fn(np.zeros(lanes.shape[1:], lanes.dtype)))
            return np.zeros((0,) + one.shape, one.dtype)
        return np.stack([np.asarray(fn(lane)) for lane in lanes])
    res = stacked(b.val)
    _core.guard_value(b.val, stacked, res, what)
    return b.btrace.box(res, 0)


def lane_indices(idx):
    """The stacked integer values (lanes in front) of a batched index from
    :func:`guarded_lanes`, or a ``BatchConcreteRead`` for any other box."""
    v = idx.val
    if type(v) is not np.ndarray or v.dtype.kind not in "iu":
        raise _core_read(idx.btrace, "an index")
    return np.moveaxis(v, idx.bdim, 0)


def stacked_values(*xs):
    """``(trace, values)``: the values of ``xs`` without derivative as numpy
    arrays, for rules that compute a constant from several values along
    axes (tie weights of max, zero counts of prod).  Outside vmap ``trace``
    is None and the values are the plain ones; under vmap every value has the
    lanes in front (shared ones broadcast to every lane), so a lane axis
    ``k`` is axis ``k + 1``; box the result with ``trace.box(result, 0)``."""
    trace = batched_in(*xs)
    for x in xs:
        if _core.is_recorded(x):        # a replay must see the very same values
            guarded_result(lambda v: np.array(v), x, "a value a derivative rule read")
    if trace is None:
        return None, [np.asarray(_core.concrete(x)) for x in xs]
    out = []
    for x in xs:
        own = batched_in(x)
        if own is None:
            v = np.asarray(_core.concrete(x))
            out.append(np.broadcast_to(v, (trace.size,) + v.shape))
        elif own is not trace:             # lanes of an outer vmap only: decide per lane
            raise _core_read(own, "values under nested vmaps")
        else:
            v = value_of(x)
            out.append(np.moveaxis(v.val, v.bdim, 0))
    return trace, out


def lanes_constant(fn, x):
    """:func:`lanes_apply` through the tapes above the batched value (a rule
    or a composition running under a tape recorded inside vmap)."""
    trace = batched_in(x)
    if trace is None:
        if _core.is_recorded(x):
            return computed(_concrete_of(fn), x)
        return fn(_core.concrete(x))
    b = batched_below(x, trace)
    if b is None:
        raise _core_read(trace, "a value under nested vmaps")
    return lanes_apply(fn, b)
