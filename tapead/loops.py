"""Loops and checkpointing: ``scan``, ``fori_loop`` and ``checkpoint``.

Without ``checkpoints`` a loop is an ordinary Python loop: every step is
recorded on the tape (fast, memory proportional to the trip count).  With
``checkpoints=s`` the whole loop is *one* tape node: the forward pass keeps
only the final carry and the stacked outputs, and the reverse pass runs the
Griewank-Walther revolve schedule (computed in C by ``tapead._revolve``),
holding at most ``s`` states and recomputing the rest.  ``checkpoint(f)``
does the same for one function: its interior is recomputed in the backward
pass instead of stored.

A checkpointed body (or function) that closes over traced values is
closure-converted (``tapead.closures``): the values it reaches are found when
the loop starts and ride in the carry (or become extra arguments of the
checkpointed function), unchanged at every step, so the result and its
derivatives are those of the same loop with the values passed through the
carry.  A traced value the search cannot find (reached through a container
it does not look into) is refused with an error saying so.
"""
from __future__ import annotations

import dis
import types

from typing import Any, Callable, Optional

import numpy as np

from tapead import _core, closures
from tapead._core import Box, Tape
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._prims.shape import stack
from tapead._tree import tree_flatten, tree_unflatten
from tapead.tree_util import leaf_shapes as _shapes, pack_leaves as _pack, unpack_leaves as _unpack
from tapead.checkpointing import CheckpointedChain
from tapead.errors import GuardFlippedError, TapeReplayError
from tapead.scalar_scan import scan_scalar
from tapead.transforms import jvp, vjp

__all__ = ["checkpoint", "scan", "fori_loop"]


# ---------------------------------------------------------------------------
# packing several outputs into one flat vector (one tape node per call)
# ---------------------------------------------------------------------------

def _closure_error(what):
    return ValueError(
        f"{what}: the body used a traced value that was not passed in as an argument "
        "and that tapead could not find among what the body reaches (its closure "
        "cells, default arguments, the globals it names, attributes of objects and "
        "bound methods held there). A checkpointed body is recomputed from its inputs "
        "alone: pass that value through the carry (or as an argument of the "
        "checkpointed function), or bind it to a variable the body closes over.")


def _guarded_bind(prim, leaves, params, what):
    """bind, refusing bodies that recorded on the caller's tape by closure."""
    top = _core.top_trace(tuple(leaves))
    before = top.n_nodes if type(top) is Tape else None
    out = _core.bind(prim, *leaves, **params)
    if before is not None and top.n_nodes != before + 1:
        raise _closure_error(what)
    return out


# ---------------------------------------------------------------------------
# checkpoint(f)
# ---------------------------------------------------------------------------

def _ckpt_impl(*leaves, f, treedef, out_info, cache):
    out = f(*tree_unflatten(treedef, list(leaves)))
    o_leaves, o_tree = tree_flatten(out)
    out_info["tree"] = o_tree
    out_info["shapes"] = _shapes(o_leaves)
    if any(isinstance(x, Box) for x in o_leaves) and not any(
            isinstance(x, Box) for x in leaves):
        raise _closure_error("ta.checkpoint")
    return _pack(o_leaves)


def _ckpt_cotangents(g, leaves, f, treedef, out_info, cache):
    key = id(g)
    if cache.get("key") == key:
        return cache["cts"]
    shapes = out_info["shapes"]

    def flat_f(*ls):
        out = f(*tree_unflatten(treedef, list(ls)))
        return tuple(tree_flatten(out)[0])
    _, pullback = vjp(flat_f, *leaves)
    cts = pullback(tuple(_unpack(g, shapes)))
    cache["key"], cache["cts"], cache["g"] = key, cts, g
    return cts


ckpt_p = Primitive("checkpoint", _ckpt_impl)
ckpt_p.defvjp_any(lambda k, g, ans, *leaves, f, treedef, out_info, cache:
                  _ckpt_cotangents(g, leaves, f, treedef, out_info, cache)[k])


def _ckpt_jvp(k, t, ans, *leaves, f, treedef, out_info, cache):
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(x)))
                for j, x in enumerate(leaves)]

    def flat_f(*ls):
        return _pack(tree_flatten(f(*tree_unflatten(treedef, list(ls))))[0])
    return jvp(flat_f, tuple(leaves), tuple(tangents))[1]


ckpt_p.defjvp_any(_ckpt_jvp)
ckpt_p.defbatched(PER_DIRECTION)
ckpt_p.defvmap(PER_LANE)           # runs user code: once per lane
ckpt_p.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)


def checkpoint(f: Callable) -> Callable:
    """``f`` whose interior is recomputed in the backward pass, not stored.

    The tape keeps one node for the call (its inputs and outputs); the
    reverse sweep runs ``f`` again under ``vjp`` to get the cotangents.

    >>> import numpy as np, tapead as ta, tapead.numpy as tnp
    >>> block = ta.checkpoint(lambda x: tnp.sin(tnp.sin(x)))
    >>> g = ta.grad(lambda x: block(x) * 2.0)(0.5)
    >>> bool(np.isclose(g, 2 * np.cos(np.sin(0.5)) * np.cos(0.5)))
    True
    """
    def wrapped(*args):
        closure = closures.find(f)
        if closure:                    # traced values f closes over: extra arguments
            n = len(args)
            return _checkpointed(lambda *a: closure.call(f, a[n:], *a[:n]),
                                 args + tuple(closure.values))
        return _checkpointed(f, args)
    wrapped.__wrapped__ = f
    return wrapped


def _checkpointed(f, args):
    """``checkpoint(f)(*args)`` for an ``f`` that reaches no traced value but
    through ``args``."""
    leaves, treedef = tree_flatten(args)
    if not any(isinstance(x, Box) for x in leaves):
        return f(*args)
    out_info: dict = {}
    flat = _guarded_bind(ckpt_p, leaves, dict(f=f, treedef=treedef, out_info=out_info,
                                              cache={}), "ta.checkpoint")
    return tree_unflatten(out_info["tree"], _unpack(flat, out_info["shapes"]))


# ---------------------------------------------------------------------------
# scan
# ---------------------------------------------------------------------------

def _scan_plain(f, init, xs, length, reverse, fast=True):
    """The eager loop: every step recorded on the tape (or plain numpy); a
    scan over float carries and 1-d xs runs in C when its body allows it
    (``tapead.scalar_scan``)."""
    if fast:
        done = scan_scalar(f, init, xs, length, reverse, _scan_step_by_step)
        if done is not None:
            return done
    x_leaves, x_tree = tree_flatten(xs) if xs is not None else ([], None)
    carry, ys = init, []
    order = range(length - 1, -1, -1) if reverse else range(length)
    c_tree = tree_flatten(init)[1]

    def checked(out):                 # the first step's result, checked
        _step_out(out, c_tree)
        return out
    if xs is not None and x_tree.kind == "leaf":       # one array: no pytree per step
        leaf = x_leaves[0]
        for i in order:
            carry, y = checked(f(carry, leaf[i])) if not ys else f(carry, leaf[i])
            ys.append(y)
    else:
        for i in order:
            x = tree_unflatten(x_tree, [leaf[i] for leaf in x_leaves]) \
                if xs is not None else None
            carry, y = checked(f(carry, x)) if not ys else f(carry, x)
            ys.append(y)
    if reverse:
        ys.reverse()
    return carry, _stack_ys(ys)


def _scan_step_by_step(f, init, xs, length, reverse):
    """``_scan_plain`` without the C path (what ``tapead.scalar_scan``'s rules
    of higher order differentiate)."""
    return _scan_plain(f, init, xs, length, reverse, fast=False)


def _stack_leaf(items):
    if any(isinstance(v, Box) for v in items):
        return stack(items)
    return np.stack([np.asarray(v) for v in items])


def _stack_ys(ys):
    if not ys or ys[0] is None:
        return None
    if isinstance(ys[0], (Box, float, np.ndarray, np.generic)):   # one leaf per step
        return stack(ys)
    leaves0, tree = tree_flatten(ys[0])
    per_leaf = list(zip(*[tree_flatten(y)[0] for y in ys]))
    return tree_unflatten(tree, [stack(list(col)) for col in per_leaf])


def _x_at(x_tree, xs_leaves, j, index_offset):
    if x_tree is not None:
        return tree_unflatten(x_tree, [leaf[j] for leaf in xs_leaves])
    return None if index_offset is None else index_offset + j


def _step_out(out, c_tree):
    """``f``'s ``(carry, y)``, checked: the carry keeps ``init``'s structure."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError("scan: f must return a pair (carry, y); use (carry, None) when "
                        f"there is no per-step output (got {type(out).__name__})")
    carry, y = out
    leaves, tree = tree_flatten(carry)
    if tree != c_tree:
        raise TypeError(f"scan: f returned a carry structured as {tree}, but init is "
                        f"{c_tree}; return the carry with init's structure")
    return leaves, y


def _step_fn(f, c_tree, x_tree, n_c, xs_leaves, reverse, length, index_offset):
    """state, i -> next state on flat carry leaves (plain values)."""
    def step(state, i):
        j = length - 1 - i if reverse else i
        x = _x_at(x_tree, xs_leaves, j, index_offset)
        leaves, y = _step_out(f(tree_unflatten(c_tree, list(state)), x), c_tree)
        return tuple(leaves), y
    return step


def _scan_impl(*leaves, f, c_tree, x_tree, n_c, length, reverse, s, info, cache,
               index_offset):
    c_leaves, xs_leaves = list(leaves[:n_c]), list(leaves[n_c:])
    step = _step_fn(f, c_tree, x_tree, n_c, xs_leaves, reverse, length, index_offset)
    state, ys = tuple(c_leaves), []
    for i in range(length):
        state, y = step(state, i)
        ys.append(y)
    if reverse:
        ys.reverse()
    y_leaves, y_tree = (tree_flatten(ys[0]) if ys and ys[0] is not None else ([], None))
    stacked = [_stack_leaf([tree_flatten(y)[0][k] for y in ys]) for k in range(len(y_leaves))]
    info["y_tree"] = y_tree
    info["c_shapes"] = _shapes(state)
    info["c_tree_out"] = c_tree
    info["y_shapes"] = _shapes(stacked)
    out = list(state) + stacked
    if any(isinstance(x, Box) for x in out) and not any(isinstance(x, Box) for x in leaves):
        raise _closure_error("ta.scan(checkpoints=...)")
    return _pack(out)


def _scan_cotangents(g, leaves, f, c_tree, x_tree, n_c, length, reverse, s, info, cache,
                     index_offset):
    if cache.get("key") == id(g):
        return cache["cts"]
    c_leaves, xs_leaves = list(leaves[:n_c]), list(leaves[n_c:])
    parts = _unpack(g, info["c_shapes"] + info["y_shapes"])
    g_carry, g_ys = parts[:n_c], parts[n_c:]
    step = _step_fn(f, c_tree, x_tree, n_c, xs_leaves, reverse, length, index_offset)
    xs_ct = [np.zeros(np.shape(_core.concrete(x)), dtype=np.result_type(_core.concrete(x)))
             if not isinstance(x, Box) else None for x in xs_leaves]
    xs_ct_boxes = [[None] * length for _ in xs_leaves]

    replayed = _StepTape.for_scan(f, c_tree, x_tree, n_c, xs_leaves, leaves, g,
                                  index_offset, reverse, length)

    def backward_step(state, i, adj_next):
        j = length - 1 - i if reverse else i
        x_now = [leaf[j] for leaf in xs_leaves]
        if replayed is not None:
            cts = replayed.pullback(list(state) + x_now,
                                    list(adj_next) + [gy[j] for gy in g_ys])
            if cts is not None:
                for k in range(len(xs_leaves)):
                    xs_ct[k][j] += cts[n_c + k]
                return tuple(cts[:n_c])

        def one(*flat):
            st, xl = flat[:n_c], flat[n_c:]
            carry, y = f(tree_unflatten(c_tree, list(st)),
                         tree_unflatten(x_tree, list(xl)) if x_tree is not None
                         else _x_at(None, [], j, index_offset))
            return tuple(tree_flatten(carry)[0]) + tuple(tree_flatten(y)[0] if y is not None
                                                         else [])
        outs, pullback = vjp(one, *state, *x_now)
        ct_out = list(adj_next) + [gy[j] for gy in g_ys]
        ct_out = [c if np.shape(c) == np.shape(o) else np.broadcast_to(c, np.shape(o))
                  for c, o in zip(ct_out, outs)]
        cts = pullback(tuple(ct_out))
        for k in range(len(xs_leaves)):
            c = cts[n_c + k]
            if xs_ct[k] is not None and not isinstance(c, Box):
                xs_ct[k][j] += c
            else:
                xs_ct_boxes[k][j] = c
        return tuple(cts[:n_c])

    chain = CheckpointedChain(lambda st, i: step(st, i)[0], tuple(c_leaves), length, s)
    chain.forward()
    adj0 = chain.reverse(backward_step, tuple(g_carry))
    x_cts = []
    for k, leaf in enumerate(xs_leaves):
        if xs_ct[k] is not None and all(b is None for b in xs_ct_boxes[k]):
            x_cts.append(xs_ct[k])
        else:
            col = [b if b is not None else np.zeros(np.shape(_core.concrete(leaf))[1:])
                   for b in xs_ct_boxes[k]]
            x_cts.append(stack(col))
    cts = list(adj0) + x_cts
    cache["key"], cache["cts"], cache["g"] = id(g), cts, g
    cache["stats"] = chain.stats
    return cts


class _StepTape:
    """A loop body recorded once on its own tape and replayed at each step.

    The reverse sweep of a checkpointed loop reverses every step from its
    input state; recording the body anew each time (``vjp``) re-runs the
    Python code, while a replay of the recorded tape re-evaluates it in C and
    one reverse sweep gives the step's cotangents.  Used for first
    derivatives of plain (untraced) states only; a replay whose recorded
    branch flips (a guard) returns None and the caller records that step
    the slow way.
    """

    def __init__(self, tape, in_ids, out_ids, out_like, in_like):
        self.tape, self.in_ids, self.out_ids = tape, in_ids, out_ids
        self.out_like, self.in_like = out_like, in_like

    @classmethod
    def record(cls, one, inputs):
        """Record ``one(*inputs) -> tuple of leaves``, or None if it cannot be
        replayed safely (an inner transform, an output that is not a value of
        this tape, an input that is not a float array or number)."""
        if not all(type(x) in (float, np.float64) or (
                type(x) is np.ndarray and x.dtype.kind == "f") for x in inputs):
            return None
        started = _core.traces_started()
        tape = Tape()
        try:
            try:
                tracers = tape.input_many(list(inputs))
                outs = one(*tracers)
            finally:
                tape.active = False
        except Exception:
            return None
        if _core.traces_started() - started > 1 or tape.values_read:
            return None                     # an inner transform saw recorded values, or
            #                                 Python read a traced number (x.primal)
        out_ids = []
        for x in outs:
            # a value of another transform (a closure over it) would be frozen
            if not (type(x) is _core.Tracer and x.tape is tape) or isinstance(_core.primal_of(x), Box):
                return None
            out_ids.append(x.idx)
        in_ids = list(tape.inputs[len(tape.inputs) - len(inputs):])
        return cls(tape, in_ids, out_ids, [_core.primal_of(x) for x in outs], list(inputs))

    @classmethod
    def for_scan(cls, f, c_tree, x_tree, n_c, xs_leaves, leaves, g, index_offset,
                 reverse, length):
        if index_offset is not None or x_tree is None or isinstance(g, Box) or \
                any(isinstance(x, Box) for x in leaves) or length == 0:
            return None                    # fori_loop's index is baked in; higher order
        j = length - 1 if reverse else 0

        def one(*flat):
            carry, y = f(tree_unflatten(c_tree, list(flat[:n_c])),
                         tree_unflatten(x_tree, list(flat[n_c:])))
            return tuple(tree_flatten(carry)[0]) + (tuple(tree_flatten(y)[0])
                                                    if y is not None else ())
        inputs = [_core.concrete(x) for x in leaves[:n_c]] + [leaf[j] for leaf in xs_leaves]
        return cls.record(one, inputs)

    def pullback(self, inputs, cotangents):
        """Cotangents of the inputs at ``inputs`` (a list per input), or None
        when the recorded program does not apply there."""
        try:
            self.tape.replay(inputs)
        except (GuardFlippedError, TapeReplayError):
            return None
        seeds = [float(c) if np.ndim(c) == 0 else np.broadcast_to(c, np.shape(o))
                 for c, o in zip(cotangents, self.out_like)]
        adj = self.tape.backward(self.out_ids, seeds, self.in_ids)
        return [np.float64(a) if type(a) is float else
                (np.zeros_like(x) if a is None else a) for a, x in zip(adj, inputs)]


scan_p = Primitive("scan", _scan_impl)
scan_p.defvjp_any(lambda k, g, ans, *leaves, **p: _scan_cotangents(g, leaves, **p)[k])


def _scan_jvp(k, t, ans, *leaves, f, c_tree, x_tree, n_c, length, reverse, s, info, cache,
              index_offset):
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(x)))
                for j, x in enumerate(leaves)]

    def flat(*ls):
        return _scan_impl(*ls, f=f, c_tree=c_tree, x_tree=x_tree, n_c=n_c, length=length,
                          reverse=reverse, s=s, info={}, cache={}, index_offset=index_offset)
    return jvp(flat, tuple(leaves), tuple(tangents))[1]


scan_p.defjvp_any(_scan_jvp)
scan_p.defbatched(PER_DIRECTION)
scan_p.defvmap(PER_LANE)           # runs user code: once per lane
scan_p.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)


def _scan_closed(f, closure, init, xs, length, reverse, checkpoints, index_offset):
    """The checkpointed scan of a body that reaches the traced values
    ``closure.values`` without receiving them: they ride in the carry,
    unchanged at every step (the same objects, so a stored carry holds no
    copy of them), and their cotangents accumulate over the steps."""
    def body(carry, x):
        c, consts = carry
        new_c, y = closure.call(f, consts, c, x)
        return (new_c, consts), y
    (carry, _), ys = scan(body, (init, tuple(closure.values)), xs, length, reverse,
                          checkpoints, index_offset, _closed=True)
    return carry, ys


def scan(f: Callable, init: Any, xs: Any = None, length: Optional[int] = None,
         reverse: bool = False, checkpoints: Optional[int] = None, _index_offset=None,
         _closed=False):
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` over the leading axis of xs.

    Parameters
    ----------
    f : callable
        ``(carry, x) -> (carry, y)``; ``y`` may be None.
    init : pytree
        The initial carry.
    xs : pytree of arrays, optional
        Scanned over their leading axis (length ``length`` when None).
    length : int, optional
        Number of steps when ``xs`` is None.
    reverse : bool
        Scan from the last element to the first.
    checkpoints : int, optional
        Reverse-mode memory budget: the number of states held at once
        (revolve).  None records every step (fastest, most memory).

    Notes
    -----
    With float carries and 1-d float64 ``xs``, a body made of scalar
    operations is recorded once and all steps run in C (one tape node for
    the loop; see ``tapead.scalar_scan``); a checkpointed scan replays one
    recording of the body for each reversed step.  Both require the body to
    compute from its arguments only (Python branches on traced values are
    checked; Python state that changes between steps is not seen); anything
    else is recorded step by step.

    Returns
    -------
    (carry, ys)
        The final carry (the structure and shapes of ``init``) and the
        stacked ``y``: each leaf of shape ``(length,) + y_leaf.shape`` (None
        when ``f`` returns None).

    Raises
    ------
    ValueError
        ``xs`` leaves of different lengths, neither ``xs`` nor ``length``,
        ``checkpoints < 1``, or (with ``checkpoints``) a body that uses a
        traced value it neither receives nor closes over where tapead looks
        (see the module doc: closures are converted to carried inputs).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> def cumsum(xs):
    ...     return ta.scan(lambda c, x: (c + x, c + x), 0.0, xs)
    >>> total, partial = cumsum(np.array([1.0, 2.0, 3.0]))
    >>> print(total, partial)
    6.0 [1. 3. 6.]
    >>> print(ta.grad(lambda xs: cumsum(xs)[1].sum())(np.array([1.0, 2.0, 3.0])))
    [3. 2. 1.]
    """
    x_leaves, x_tree = tree_flatten(xs) if xs is not None else ([], None)
    if xs is not None:
        lengths = {np.shape(_core.concrete(x))[0] if np.ndim(_core.concrete(x)) else None
                   for x in x_leaves}
        if len(lengths) != 1 or None in lengths:
            raise ValueError("scan: every leaf of xs needs the same leading axis length")
        n = lengths.pop()
        if length is not None and length != n:
            raise ValueError(f"scan: length={length} but xs have leading length {n}")
        length = n
    if length is None:
        raise ValueError("scan: give xs or length")
    if checkpoints is not None and length > 0 and not _closed:
        closure = closures.find(f)
        if closure:
            return _scan_closed(f, closure, init, xs, length, reverse, checkpoints,
                                _index_offset)
    c_leaves, c_tree = tree_flatten(init)
    leaves = list(c_leaves) + list(x_leaves)
    if checkpoints is None or not any(isinstance(x, Box) for x in leaves) or length == 0:
        if _index_offset is not None:
            carry = init
            for i in range(length):
                carry, _ = f(carry, _index_offset + i)
            return carry, None
        return _scan_plain(f, init, xs, length, reverse)
    if int(checkpoints) < 1:
        raise ValueError(f"scan: checkpoints={checkpoints} must be a positive number of "
                         "stored states (or None to store every step)")
    if _index_offset is None:
        done = scan_scalar(f, init, xs, length, reverse, _scan_step_by_step,
                           checkpoints=int(checkpoints))
        if done is not None:
            return done
    info: dict = {}
    params = dict(f=f, c_tree=c_tree, x_tree=x_tree, n_c=len(c_leaves), length=length,
                  reverse=reverse, s=int(checkpoints), info=info, cache={},
                  index_offset=_index_offset)
    flat = _guarded_bind(scan_p, leaves, params, "ta.scan(checkpoints=...)")
    parts = _unpack(flat, info["c_shapes"] + info["y_shapes"])
    n_c = len(c_leaves)
    carry = tree_unflatten(c_tree, parts[:n_c])
    ys = tree_unflatten(info["y_tree"], parts[n_c:]) if info["y_tree"] is not None else None
    return carry, ys


def fori_loop(lower: int, upper: int, body: Callable, init: Any,
              checkpoints: Optional[int] = None):
    """``jax.lax.fori_loop``: ``val = body(i, val)`` for i in [lower, upper).

    Parameters
    ----------
    lower, upper : int
        The loop range; ``body`` gets a Python ``int`` ``i``.
    body : callable
        ``(i, val) -> val``, the same structure and shapes in and out.
    init : pytree
        The initial value.
    checkpoints : int, optional
        Reverse-mode memory budget, as in :func:`scan` (the loop runs as a
        checkpointed scan; traced values ``body`` closes over ride in the
        carry).  None records every step.

    Returns
    -------
    pytree
        The final ``val`` (``init`` when ``upper <= lower``).

    Examples
    --------
    >>> import tapead as ta
    >>> newton_sqrt = lambda a: ta.fori_loop(0, 30, lambda i, x: 0.5 * (x + a / x), 1.0)
    >>> print(newton_sqrt(2.0), ta.grad(newton_sqrt)(4.0))     # d sqrt(a)/da = 1/(2 sqrt a)
    1.414213562373095 0.25
    """
    lower, upper = int(lower), int(upper)

    def f(carry, i):
        return body(int(i), carry), None
    if upper <= lower:
        return init
    if (checkpoints is None or int(checkpoints) >= 1) and _ignores_index(body) and \
            type(_core.top_trace(tuple(tree_flatten(init)[0]))) is Tape:
        # every step is the same function of the carry: a scan without xs,
        # run in C when the body is scalar code (tapead.scalar_scan)
        done = scan_scalar(lambda c, _: (body(lower, c), None), init, None, upper - lower,
                           False, _scan_step_by_step,
                           checkpoints=None if checkpoints is None else int(checkpoints))
        if done is not None:
            return done[0]
    if checkpoints is None:
        return _fori_plain(lower, upper, body, init)[0]
    carry, _ = scan(f, init, None, length=upper - lower, checkpoints=checkpoints,
                    _index_offset=lower)
    return carry


_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST",
          "STORE_FAST", "DELETE_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
          "LOAD_DEREF", "LOAD_CLOSURE")


def _ignores_index(body) -> bool:
    """Whether ``body(i, val)`` provably never reads ``i``: a plain function
    whose code neither loads its first parameter nor hands it to an inner
    function, nor calls ``locals``/``vars``.  Anything else (a method, a
    partial, a callable object) counts as reading it."""
    code = getattr(body, "__code__", None)
    if type(body) is not types.FunctionType or code is None or code.co_argcount < 1:
        return False
    name = code.co_varnames[0]
    if name in code.co_cellvars or "locals" in code.co_names or "vars" in code.co_names:
        return False
    for ins in dis.get_instructions(code):
        if ins.opname in _LOADS:
            arg = ins.argval
            if arg == name or (type(arg) is tuple and name in arg):
                return False
    return True


def _fori_plain(lower, upper, body, init):
    val = init
    for i in range(lower, upper):
        val = body(i, val)
    return val, None
