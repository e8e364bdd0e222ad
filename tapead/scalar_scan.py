"""``scan`` over scalar carries, run in C.

A scan whose carry is a few floats and whose ``xs`` are 1-d float64 arrays
(a rollout, a recurrence) spends its time in Python when every step is
recorded: a few microseconds of interpreter work per step for a handful of
floating-point operations.  Here the body is recorded once, at the first
step, on a tape of its own; when that tape holds scalar nodes only (no
array operation, no Python branch on a traced value, no inner transform)
the whole loop becomes one node of the caller's tape, whose value and
reverse sweep run all T steps in C (``_core.ScalarLoop``).  Anything else
returns None and the caller records the steps one by one, as before.

The body must compute its results from its arguments only: a recording
cannot see Python state that changes between steps (a closed-over counter,
a value read with ``.value``); a body that closes over a traced value is
detected and recorded step by step instead.
"""
from __future__ import annotations

import math

import numpy as np

from tapead import _core
from tapead._core import Box, Dual, Tape, Tracer
from tapead._prims.base import PER_LANE, Primitive
from tapead.compiler import eager
from tapead._tree import tree_flatten, tree_unflatten
from tapead._prims.shape import concatenate, getitem, reshape, stack
from tapead.transforms import jvp, vjp
from tapead.tree_util import pack_leaves

__all__ = ["scan_scalar"]


def _inner(x, tape):
    """The plain value inside ``x``: ``x`` itself for a constant; for a tracer
    (of ``tape``, or of a transform around it: ``ta.jit``'s recording, a dual
    number of ``jvp``) the value under every tape and forward level; None
    for a batched value (vmap runs such a loop lane by lane)."""
    while type(x) is Tracer or type(x) is Dual:
        x = _core.primal_of(x)
    return None if isinstance(x, Box) else x


def _unboxed_float(x, tape):
    """The float inside ``x`` (plain, or traced holding a float), or None."""
    x = _inner(x, tape)
    if type(x) is float or type(x) is np.float64:
        return float(x)
    if type(x) is np.ndarray and x.shape == () and x.dtype == np.float64:
        return float(x)
    return None


def _unboxed_column(x, tape, T):
    x = _inner(x, tape)
    if type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (T,):
        return x
    return None


def scan_scalar(f, init, xs, length, reverse, plain, checkpoints=None):
    """``(carry, ys)`` of the scan run in C, or None when it does not apply.

    ``plain(f, init, xs, length, reverse)``: the same scan recorded step by
    step (``tapead.loops``), which the rules of higher order differentiate.
    ``checkpoints=s``: the reverse sweep keeps at most ``s`` carries and
    recomputes the rest (revolve, in C) instead of every step's partials."""
    c_leaves, c_tree = tree_flatten(init)
    x_leaves, x_tree = tree_flatten(xs) if xs is not None else ([], None)
    leaves = list(c_leaves) + list(x_leaves)
    top = _core.top_trace(tuple(leaves))
    if type(top) is not Tape or length == 0 or not c_leaves:
        return None
    sizes = [_small_vector_size(c, top) for c in c_leaves]
    if any(n is not None for n in sizes):
        return _scan_small_vectors(f, c_leaves, c_tree, sizes, xs, length, reverse, plain,
                                   checkpoints)
    carry0 = [_unboxed_float(c, top) for c in c_leaves]
    cols = [_unboxed_column(x, top, length) for x in x_leaves]
    if any(v is None for v in carry0) or any(v is None for v in cols):
        return None
    m, k = len(carry0), len(cols)
    first = length - 1 if reverse else 0
    body = Tape()
    before, started = top.n_nodes, _core.traces_started()
    try:
        try:
            ins = body.input_many([np.float64(v) for v in carry0] +
                                  [np.float64(col[first]) for col in cols])
            carry, y = f(tree_unflatten(c_tree, list(ins[:m])),
                         tree_unflatten(x_tree, list(ins[m:])) if x_tree is not None else None)
        finally:
            body.active = False
    except Exception:
        return None                        # the step-by-step loop reports it
    if top.n_nodes != before or _core.traces_started() - started > 1 or body.values_read:
        return None                        # a closure over a traced value, a transform, or
        #                                    Python reading a traced number (x.primal)
    out_c, t_c = tree_flatten(carry)
    if t_c != c_tree:
        return None
    out_y, y_tree = tree_flatten(y) if y is not None else ([], None)
    outs = list(out_c) + list(out_y)
    if not all(type(v) is Tracer and v.tape is body and type(_core.primal_of(v)) is float
               for v in outs):
        return None
    try:
        loop = _core.ScalarLoop(body, body.inputs[:m], body.inputs[m:m + k],
                                [v.idx for v in out_c], [v.idx for v in out_y])
    except ValueError:
        return None
    eager.for_eager(loop, length)      # compiled code, once this process has it
    q = len(out_y)
    flat = _core.bind(scan_scalar_p, *leaves, loop=loop, m=m, T=length, q=q,
                      reverse=reverse, f=f, plain=plain, c_tree=c_tree, x_tree=x_tree,
                      s=checkpoints,
                      cache={})
    carry_out = tree_unflatten(c_tree, [getitem(flat, j) for j in range(m)])
    if y_tree is None:
        return carry_out, None
    ys = tree_unflatten(y_tree, [getitem(flat, slice(m + j, None, q)) for j in range(q)])
    return carry_out, ys


def _small_vector_size(x, tape):
    """n for a carry leaf holding a 1-d float64 array of n <= SMALL_ARRAY_MAX
    elements (a small vector: its scan computes element by element), else None."""
    v = _inner(x, tape)
    if type(v) is np.ndarray and v.ndim == 1 and v.dtype == np.float64 and \
            0 < v.shape[0] <= _core.SMALL_ARRAY_MAX:
        return v.shape[0]
    return None


def _scan_small_vectors(f, c_leaves, c_tree, sizes, xs, length, reverse, plain, checkpoints):
    """A scan whose carry holds small vectors, as a scan over their elements:
    the body sees the vectors (stacked from the elements, so its array
    arithmetic records one scalar node per element) and hands back their
    elements; None where that does not apply."""
    flat_init = []
    for leaf, n in zip(c_leaves, sizes):
        flat_init.extend([leaf] if n is None else [getitem(leaf, j) for j in range(n)])

    def f_flat(carry, x):
        parts, j = [], 0
        for n in sizes:
            parts.append(carry[j] if n is None else stack(list(carry[j:j + n])))
            j += 1 if n is None else n
        c, y = f(tree_unflatten(c_tree, parts), x)
        out_leaves, out_tree = tree_flatten(c)
        if out_tree != c_tree:
            raise ValueError("scan: the body's carry changed its structure")
        out = []
        for leaf, n in zip(out_leaves, sizes):
            if n is None:
                out.append(leaf)
            elif np.shape(leaf) != (n,):
                raise ValueError("scan: the body's carry changed its shape")
            else:
                out.extend(getitem(leaf, j) for j in range(n))
        return tuple(out), y
    done = scan_scalar(f_flat, tuple(flat_init), xs, length, reverse, plain, checkpoints)
    if done is None:
        return None
    flat, ys = done
    parts, j = [], 0
    for n in sizes:
        parts.append(flat[j] if n is None else stack(list(flat[j:j + n])))
        j += 1 if n is None else n
    return tree_unflatten(c_tree, parts), ys


def _columns(vals, m, reverse, T):
    if len(vals) == m:                  # no xs (a fori_loop)
        return np.zeros((T, 0))
    if len(vals) == m + 1:
        xs = np.asarray(vals[m], dtype=np.float64).reshape(-1, 1)
    else:
        xs = np.column_stack([np.asarray(v, dtype=np.float64) for v in vals[m:]])
    return xs[::-1] if reverse else xs


def _scan_scalar_impl(*vals, loop, m, T, q, reverse, f, plain, c_tree, x_tree, s, cache):
    carry, ys = loop.forward(np.array(vals[:m], dtype=np.float64), _columns(vals, m, reverse, T),
                             keep=s is None)
    cache["forward"] = vals if s is None else None    # what loop.reverse would reverse
    if reverse:
        ys = ys[::-1]
    return np.concatenate([carry, ys.ravel()])


def _eager_flat(f, plain, c_tree, x_tree, m, reverse, T):
    """The same scan recorded step by step, on flat leaves (rules of higher order)."""
    def run(*vals):
        xs = tree_unflatten(x_tree, list(vals[m:])) if x_tree is not None else None
        carry, ys = plain(f, tree_unflatten(c_tree, list(vals[:m])), xs, T, reverse)
        c = tree_flatten(carry)[0]
        y = tree_flatten(ys)[0] if ys is not None else []
        out = pack_leaves(c)
        if y:
            ycols = stack(list(y), axis=1) if len(y) > 1 else reshape(y[0], (-1, 1))
            return concatenate([out, reshape(ycols, (-1,))])
        return out
    return run


def _same_input(a, b) -> bool:
    """Whether a loop input is the one of the last forward run: the same array
    object, or a float with the same bits (a replay reads scalar nodes into
    new float objects)."""
    if a is b:
        return True
    if type(a) in _FLOATS and type(b) in _FLOATS:
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (a != a and b != b)
    return False


_FLOATS = (float, np.float64)


def _numeric_cts(g, vals, loop, m, T, q, reverse, s, cache):
    """The cotangents of carry0 (m floats) and of the xs columns (k arrays of
    T) from the flat output cotangent ``g``, in C.  The reverse sweep reads the
    partials the last forward run kept: when that run was not at ``vals`` (a
    loop object shared by vmap's lanes) the forward runs again first."""
    g = np.asarray(g, dtype=np.float64)
    gys = g[m:].reshape(T, q)
    if reverse:
        gys = gys[::-1]
    if s is None:
        last = cache.get("forward")
        if last is None or loop.steps < 0 or len(last) != len(vals) or \
                not all(_same_input(a, b) for a, b in zip(last, vals)):
            _scan_scalar_impl(*vals, loop=loop, m=m, T=T, q=q, reverse=reverse, f=None,
                              plain=None, c_tree=None, x_tree=None, s=None, cache=cache)
        gc, gx = loop.reverse(g[:m], gys)
    else:
        gc, gx, advances = loop.reverse_checkpointed(
            np.array(vals[:m], dtype=np.float64), _columns(vals, m, reverse, T), g[:m],
            gys, s)
        cache["stats"] = {"advance_steps": int(advances), "max_snapshots": min(s, T)}
    if reverse:
        gx = gx[::-1]
    return gc, gx


def _scan_scalar_cts(g, vals, loop, m, T, q, reverse, f, plain, c_tree, x_tree, s, cache):
    if cache.get("key") == id(g):
        return cache["cts"]
    top = _core.top_trace((g,) + tuple(vals))
    if type(top) is Tape and top.replayable:
        # ta.jit records this sweep to evaluate it again: the reverse loop is
        # one node of its recording (run in C at each replay), not T steps
        flat = _core.bind(scan_scalar_vjp_p, g, *vals, loop=loop, m=m, T=T, q=q,
                          reverse=reverse, f=f, plain=plain, c_tree=c_tree, x_tree=x_tree,
                          s=s, cache=cache)
        cts = [getitem(flat, j) for j in range(m)] + \
            [getitem(flat, slice(m + j * T, m + (j + 1) * T)) for j in range(len(vals) - m)]
    elif isinstance(g, Box) or any(isinstance(v, Box) for v in vals):
        cts = list(vjp(_eager_flat(f, plain, c_tree, x_tree, m, reverse, T), *vals)[1](g))
    else:
        gc, gx = _numeric_cts(g, vals, loop, m, T, q, reverse, s, cache)
        cts = [np.float64(v) for v in gc] + [np.ascontiguousarray(gx[:, j])
                                             for j in range(gx.shape[1])]
    cache["key"], cache["cts"], cache["g"] = id(g), cts, g
    return cts


scan_scalar_p = Primitive("scan_scalar", _scan_scalar_impl)
scan_scalar_p.replay_always = True      # its forward run is what the reverse node reverses
scan_scalar_p.defvjp_any(lambda k, g, ans, *vals, **p: _scan_scalar_cts(g, vals, **p)[k])


def _scan_scalar_jvp(k, t, ans, *vals, loop, m, T, q, reverse, f, plain, c_tree, x_tree,
                     s, cache):
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(v)))
                for j, v in enumerate(vals)]
    return jvp(_eager_flat(f, plain, c_tree, x_tree, m, reverse, T), tuple(vals), tuple(tangents))[1]


scan_scalar_p.defjvp_any(_scan_scalar_jvp)
scan_scalar_p.defvmap(PER_LANE)     # a scalar loop: once per lane


# -- the reverse loop as a node of a recorded derivative program ---------------

def _scan_scalar_vjp_impl(g, *vals, loop, m, T, q, reverse, f, plain, c_tree, x_tree, s,
                          cache):
    gc, gx = _numeric_cts(g, vals, loop, m, T, q, reverse, s, cache)
    return np.concatenate([np.asarray(gc, dtype=np.float64), gx.T.ravel()])


def _vjp_flat(f, plain, c_tree, x_tree, m, reverse, T):
    """``(g, *vals) -> the cotangents, flat``: what scan_scalar_vjp computes,
    on the scan recorded step by step (its rules of higher order)."""
    run = _eager_flat(f, plain, c_tree, x_tree, m, reverse, T)

    def cts(g, *vals):
        return pack_leaves(list(vjp(run, *vals)[1](g)))
    return cts


def _scan_scalar_vjp_jvp(k, t, ans, *args, loop, m, T, q, reverse, f, plain, c_tree, x_tree,
                         s, cache):
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(v)))
                for j, v in enumerate(args)]
    return jvp(_vjp_flat(f, plain, c_tree, x_tree, m, reverse, T), tuple(args),
               tuple(tangents))[1]


def _scan_scalar_vjp_cts(k, gg, ans, *args, loop, m, T, q, reverse, f, plain, c_tree,
                         x_tree, s, cache):
    key = ("vjp", id(gg))
    if cache.get("vjp_key") != key:
        cache["vjp_key"], cache["vjp_g"] = key, gg
        cache["vjp_cts"] = list(vjp(_vjp_flat(f, plain, c_tree, x_tree, m, reverse, T),
                                    *args)[1](gg))
    return cache["vjp_cts"][k]


scan_scalar_vjp_p = Primitive("scan_scalar_vjp", _scan_scalar_vjp_impl)
scan_scalar_vjp_p.defvjp_any(_scan_scalar_vjp_cts)
scan_scalar_vjp_p.defjvp_any(_scan_scalar_vjp_jvp)
scan_scalar_vjp_p.defvmap(PER_LANE)
