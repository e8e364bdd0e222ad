"""Sorting and index-valued functions: sort, argsort, argmax, argmin.

``sort`` differentiates through the permutation it applies: the tangent is
permuted like the values, the cotangent is scattered back through the
inverse permutation.  Ties are broken by a stable sort (first occurrence
first), as in JAX.

``argsort``, ``argmax`` and ``argmin`` return plain integer numpy arrays,
never traced values: their derivatives exist and are zero almost everywhere
(and undefined at the jumps), which is useless for learning.  Using their
result as an index (``x[np.argmax(x)]``) differentiates the value selected.
Such an index is a constant of the recording, guarded so that a replay at a
point where it differs raises; its sparsity pattern is the recording's (the
sparse derivatives read the pattern afresh at every call).
"""
from __future__ import annotations

import numpy as np

from tapead._core import Batched, Box, bind, concrete, guard_value, is_recorded
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._prims import batching
from tapead._prims.shape import reshape
from tapead.errors import BatchConcreteRead


def _inverse(perm, axis):
    """The inverse of a permutation along ``axis`` (same shape; batched for a
    batched one)."""
    if type(perm) is Batched:
        return perm.btrace.box(np.argsort(batching.lane_indices(perm), axis=axis + 1), 0)
    if isinstance(perm, Box):        # recorded (a replayed tape): inverted on each replay
        return batching.computed(lambda p: np.argsort(concrete(p), axis=axis), perm)
    return np.argsort(perm, axis=axis)


# permute: take_along_axis with a permutation (linear; its transpose is the inverse)
def _permute_impl(x, perm, axis):
    if type(perm) is Batched:            # a plain tangent, each lane's permutation
        return _permute_batched(x, perm, axis)
    return np.take_along_axis(x, perm, axis=axis)


permute_p = Primitive("permute_along_axis", _permute_impl, saves=(), linear=True)
permute_p.defvjp(lambda g, ans, x, perm, axis: permute(g, _inverse(perm, axis), axis))
# permute(), not np.take_along_axis: the tangents may be traced (third order)
permute_p.defbatched(lambda tans, ans, vals, params, K: permute(
    tans[0], np.broadcast_to(params["perm"][None], np.shape(tans[0])), params["axis"] + 1))
permute_p.defvmap(lambda args, bdims, perm, axis: _permute_lanes(
    batching.to_front(args[0], bdims[0]), perm, axis))


def _permute_lanes(x, perm, axis):
    if type(perm) is Batched:                 # each lane its own permutation
        return permute(x, batching.lane_indices(perm), axis + 1), 0
    return permute(x, np.broadcast_to(perm[None], np.shape(x)), axis + 1), 0
permute_p.defsparsity(patterns.MOVE)         # perm is a constant parameter


# permute_by: the same with the permutation an argument, a value computed on a
# tape that will be replayed (so each replay permutes by the new values' order)
permute_by_p = Primitive("permute_by", lambda x, perm, axis: np.take_along_axis(
    x, perm, axis=axis), saves=(1,))
permute_by_p.defvjp(lambda g, ans, x, perm, axis: permute(g, _inverse(perm, axis), axis),
                    lambda g, ans, x, perm, axis: None)      # an index: no derivative
permute_by_p.defjvp(lambda t, ans, x, perm, axis: permute(t, perm, axis),
                    lambda t, ans, x, perm, axis: None)
permute_by_p.nondiff_args = frozenset({1})
permute_by_p.defbatched(PER_DIRECTION)
permute_by_p.defvmap(PER_LANE)
permute_by_p.defsparsity(patterns.ALONG_AXIS, reason="the permutation is a value: any "
                         "element of the line may land anywhere")


def permute(x, perm, axis):
    """``np.take_along_axis(x, perm, axis)`` for a permutation ``perm``, differentiable."""
    if type(perm) is Batched:
        return _permute_batched(x, perm, axis)
    if isinstance(perm, Box):
        return bind(permute_by_p, x, perm, axis=axis)
    if isinstance(x, Box):
        return bind(permute_p, x, perm=perm, axis=axis)
    return np.take_along_axis(x, perm, axis=axis)


def _permute_batched(x, perm, axis):
    """``permute`` by a batched permutation (each lane its own, under vmap):
    one ``permute`` of the stacked lanes.  A tape recorded inside the vmap
    keeps the batched permutation as its parameter (its rules permute the
    lanes of the cotangents the same way)."""
    trace = perm.btrace
    p = batching.lane_indices(perm)
    if type(x) is Batched and x.btrace is trace:
        return trace.box(permute(batching.to_front(x.val, x.bdim), p, axis + 1), 0)
    if batching.batched_in(x) is None:                 # shared by every lane
        return trace.box(permute(batching.with_lanes(x, p.shape[0]), p, axis + 1), 0)
    if batching.batched_below(x, trace) is not None:  # a tape's box of this vmap's lanes
        return bind(permute_p, x, perm=perm, axis=axis)
    raise BatchConcreteRead(trace, "a permutation")


# sort: the permutation is recomputed from the saved input (so a replayed tape
# sorts its new values), and applied to tangents and cotangents
def _perm(x, axis):
    """The stable sorting permutation of ``x``'s value along ``axis`` (batched
    under vmap: every lane's, by one argsort of the stacked lanes)."""
    if batching.batched_in(x) is None:
        def of(v):
            return np.argsort(np.asarray(concrete(v)), axis=axis, kind="stable")
        # on a tape that will be replayed, a node: each replay sorts the new values
        return batching.computed(of, x) if is_recorded(x) else of(x)
    v = batching.value_of(x)
    if type(v) is Batched:
        return v.btrace.box(np.argsort(batching.to_front(v.val, v.bdim), axis=axis + 1,
                                       kind="stable"), 0)
    return np.argsort(np.asarray(v), axis=axis, kind="stable")


sort_p = Primitive("sort", lambda x, axis: np.sort(x, axis=axis, kind="stable"), saves=(0,))
sort_p.defvjp(lambda g, ans, x, axis: permute(g, _inverse(_perm(x, axis), axis), axis))
sort_p.defjvp(lambda t, ans, x, axis: permute(t, _perm(x, axis), axis))
def _sort_batched(tans, ans, vals, params, K):
    axis = params["axis"]
    perm = _perm(vals[0], axis)
    if isinstance(perm, Box):           # recorded for a replay: broadcast on each replay
        shape = np.shape(tans[0])
        perm = batching.computed(lambda p: np.broadcast_to(concrete(p)[None], shape), perm)
        return permute(tans[0], perm, axis + 1)
    return np.take_along_axis(tans[0], perm[None], axis=axis + 1)


sort_p.defbatched(_sort_batched)
sort_p.defvmap(batching.axis_rule(sort_p))
sort_p.defsparsity(patterns.ALONG_AXIS, reason="which element lands where moves with the "
                  "values: structurally the whole line along the axis")


def _check_order(name, order):
    if order is not None:
        raise TypeError(f"{name}(..., order=...) sorts structured arrays; traced values "
                        "are plain float arrays: drop order=")


def sort(a, axis=-1, kind=None, order=None, **kw):
    """``np.sort`` with derivatives (ties: stable order; ``axis=None`` flattens)."""
    if not isinstance(a, Box):
        return np.sort(a, axis=axis, kind=kind, order=order, **kw)
    _check_order("sort", order)
    if axis is None or np.ndim(a) == 0:
        a, axis = reshape(a, (-1,)), 0
    return bind(sort_p, a, axis=int(axis) % np.ndim(a))


def argsort(a, axis=-1, kind=None, order=None, **kw):
    """``np.argsort`` of the concrete values: a plain integer array (no
    derivative; under vmap the lanes' argsorts, batched)."""
    _check_order("argsort", order)
    return batching.guarded_lanes(lambda v: np.argsort(v, axis=axis, kind=kind, **kw), a,
                                  "an argsort")


def argmax(a, axis=None, out=None, **kw):
    """``np.argmax`` of the concrete values: plain integers (no derivative;
    under vmap the lanes' indices, batched)."""
    if out is not None:
        res = np.argmax(np.asarray(concrete(a)), axis=axis, out=out, **kw)
        guard_value(a, lambda v: np.argmax(np.asarray(concrete(v)), axis=axis, **kw), res,
                    "an argmax")
        return res
    return batching.guarded_lanes(lambda v: np.argmax(v, axis=axis, **kw), a, "an argmax")


def argmin(a, axis=None, out=None, **kw):
    """``np.argmin`` of the concrete values: plain integers (no derivative;
    under vmap the lanes' indices, batched)."""
    if out is not None:
        res = np.argmin(np.asarray(concrete(a)), axis=axis, out=out, **kw)
        guard_value(a, lambda v: np.argmin(np.asarray(concrete(v)), axis=axis, **kw), res,
                    "an argmin")
        return res
    return batching.guarded_lanes(lambda v: np.argmin(v, axis=axis, **kw), a, "an argmin")


def _sort_method(x, *args, **kw):
    raise TypeError("x.sort() sorts in place, which a traced value cannot do; "
                    "use y = np.sort(x) (or tapead.numpy.sort) and keep the result")


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.sort: sort, np.argsort: argsort, np.argmax: argmax,
                   np.argmin: argmin}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {"argsort": argsort, "argmax": argmax, "argmin": argmin,
                  "sort": _sort_method}
__all__ = ["sort", "argsort", "argmax", "argmin"]
