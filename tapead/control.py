"""Branches and loops of unknown length: ``cond``, ``switch``, ``while_loop``.

tapead runs eagerly, so a branch simply runs the function that the
predicate picks: its derivative is the derivative of the taken branch, and
the predicate (or index) has none.  A traced predicate is read by its
value.  Only the taken branch runs (its side effects, its cost): tapead does
not trace the others, so, unlike JAX, it cannot compare their result
structures; a branch whose result does not fit what follows fails there.

``while_loop`` without ``checkpoints`` is a Python ``while`` loop: every
step is recorded and the derivative holds the trip count fixed (the
derivative of the iterations that ran).  A loop over float carries whose
body is scalar arithmetic and whose condition is one comparison runs in C
(``_while_in_c``): the count first, then the scan of that many steps.  With
``checkpoints=s`` (or ``max_bytes=``) the loop is one tape node that keeps
at most ``s`` carries,
placed online (:mod:`tapead.online`) since the trip count is not known
until the loop ends, and recomputes the rest in the reverse sweep.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from tapead import _core, closures
from tapead._core import Box, Dual, Tape, Tracer
from tapead import patterns
from tapead._prims.base import PER_DIRECTION, PER_LANE, Primitive
from tapead._tree import tree_flatten, tree_unflatten
from tapead.checkpointing import CheckpointedChain
from tapead.errors import ShapeError
from tapead.loops import _StepTape, _closure_error, _guarded_bind, scan
from tapead.scalar_scan import _unboxed_float
from tapead.tree_util import leaf_shapes as _shapes, pack_leaves as _pack, unpack_leaves as _unpack
from tapead.online import OnlineChain
from tapead._prims.elementwise import astype
from tapead._prims.shape import stack
from tapead.transforms import jvp, vjp

__all__ = ["cond", "switch", "while_loop"]


# ---------------------------------------------------------------------------
# cond / switch
# ---------------------------------------------------------------------------

def _check_callable(f, what):
    if not callable(f):
        raise TypeError(f"{what} must be callable, got {type(f).__name__} {f!r}; pass a "
                        "function (e.g. a lambda) of the operands")


def _scalar_value(x, what):
    v = _core.concrete(x)
    if np.ndim(v) != 0:
        raise ShapeError(f"{what} must be a scalar, got shape {np.shape(v)}; reduce it "
                         "(e.g. with .all() or .any()) or index it first")
    return v


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``jax.lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``.

    Parameters
    ----------
    pred : bool or scalar
        Read by its value (a traced predicate has no derivative).
    true_fun, false_fun : callable
        ``(*operands) -> pytree``; both must return the same structure,
        shapes and dtypes.
    *operands : pytrees
        Passed to the branch.

    Returns
    -------
    pytree
        The taken branch's result; its derivatives are that branch's.

    Raises
    ------
    TypeError
        A branch is not callable, or the branches' results differ in
        structure, shape or dtype.
    ShapeError
        ``pred`` is not a scalar.

    Examples
    --------
    >>> import tapead as ta, tapead.numpy as tnp
    >>> f = lambda x: ta.cond(x > 0.0, lambda v: v * v, lambda v: -v, x)
    >>> float(ta.grad(f)(3.0)), float(ta.grad(f)(-3.0))
    (6.0, -1.0)
    """
    _check_callable(true_fun, "cond: true_fun")
    _check_callable(false_fun, "cond: false_fun")
    taken = 0 if bool(_scalar_value(pred, "cond: pred")) else 1
    branches = (true_fun, false_fun)
    out = branches[taken](*operands)
    return out


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """``jax.lax.switch``: ``branches[index](*operands)``, index clamped.

    Parameters
    ----------
    index : int or integer scalar
        Clamped to ``[0, len(branches) - 1]`` as in JAX; read by its value.
    branches : sequence of callable
        Each ``(*operands) -> pytree``, all with the same result structure,
        shapes and dtypes.
    *operands : pytrees

    Returns
    -------
    pytree
        The chosen branch's result; its derivatives are that branch's.

    Examples
    --------
    >>> import tapead as ta, tapead.numpy as tnp
    >>> fs = [lambda x: tnp.sin(x), lambda x: x ** 3, lambda x: 2.0 * x]
    >>> [float(ta.grad(lambda x: ta.switch(i, fs, x))(1.0)) for i in (-5, 1, 9)]
    [0.5403023058681398, 3.0, 2.0]
    """
    if callable(branches) or not isinstance(branches, Sequence) or not len(branches):
        raise TypeError("switch: branches must be a non-empty list or tuple of functions, "
                        f"got {type(branches).__name__}; write ta.switch(i, [f, g], x)")
    for k, fun in enumerate(branches):
        _check_callable(fun, f"switch: branches[{k}]")
    value = _scalar_value(index, "switch: index")
    if isinstance(value, (bool, np.bool_)) or not (
            isinstance(value, (int, np.integer)) or
            (isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.integer))):
        raise TypeError(f"switch: index must be an integer, got {value!r} of type "
                        f"{type(value).__name__}; convert it with int(...) or "
                        ".astype(int) (a float index is ambiguous)")
    taken = min(max(int(value), 0), len(branches) - 1)
    out = branches[taken](*operands)
    return out


# ---------------------------------------------------------------------------
# while_loop
# ---------------------------------------------------------------------------

def _truth(pred):
    v = _scalar_value(pred, "while_loop: cond_fun's result")
    return bool(v)


def _carry_checker(tree, shapes, dtypes):
    def check(leaves, t):
        if t != tree or _shapes(leaves) != shapes or \
                [np.result_type(_core.concrete(v)) for v in leaves] != dtypes:
            raise TypeError(
                "while_loop: body_fun must return a carry with the structure, shapes and "
                f"dtypes of init_val ({tree}, shapes {shapes}, dtypes "
                f"{[d.name for d in dtypes]}); it returned {t}, shapes "
                f"{_shapes(leaves)}; cast or reshape inside body_fun")
    return check


def _while_plain(cond_fun, body_fun, init_val, check):
    val = init_val
    while _truth(cond_fun(val)):
        val = body_fun(val)
        check(*tree_flatten(val))
    return val


def _split(leaves):
    """Positions of the inexact (differentiable) leaves."""
    return [k for k, v in enumerate(leaves)
            if np.issubdtype(np.result_type(_core.concrete(v)), np.inexact)]


def _make_step(body_fun, tree, check):
    def step(state, i):
        out = body_fun(tree_unflatten(tree, list(state)))
        leaves, t = tree_flatten(out)
        check(leaves, t)
        return tuple(leaves)
    return step


def _with_floats(state, fpos, floats):
    full = list(state)
    for k, v in zip(fpos, floats):
        full[k] = v
    return tuple(full)


def _while_impl(*floats, cond_fun, body_fun, tree, others, fpos, s, info, cache):
    check = info["check"]
    step = _make_step(body_fun, tree, check)
    state0 = _with_floats(others, fpos, floats)
    chain = OnlineChain(step, state0, s)
    final = chain.forward(lambda st: _truth(cond_fun(tree_unflatten(tree, list(st)))))
    info["n"] = chain.n
    info["final"] = final
    cache["chain"] = chain                 # its snapshots serve the first reverse sweep
    out = [final[k] for k in fpos]
    if any(isinstance(x, Box) for x in out):
        raise _closure_error("ta.while_loop(checkpoints=...)")
    return _pack(out)


def _while_cotangents(g, floats, cond_fun, body_fun, tree, others, fpos, s, info, cache):
    if cache.get("key") == id(g):
        return cache["cts"]
    shapes = [np.shape(_core.concrete(x)) for x in floats]
    step = _make_step(body_fun, tree, info["check"])

    # all-float carries at first order: record the body once and replay it per
    # reversed step (in C); integer leaves would be frozen in a recording
    replay = {"tape": None, "ok": len(fpos) == len(others) and not isinstance(g, Box)
              and not any(isinstance(x, Box) for x in floats)}

    def backward_step(state, i, adj):
        def one(*fl):
            out = step(_with_floats(state, fpos, fl), i)
            return tuple(out[k] for k in fpos)
        if replay["ok"]:
            if replay["tape"] is None:
                replay["tape"] = _StepTape.record(one, list(state))
                replay["ok"] = replay["tape"] is not None
            if replay["ok"]:
                cts = replay["tape"].pullback(list(state), list(adj))
                if cts is not None:
                    return tuple(cts)
        _, pullback = vjp(one, *[state[k] for k in fpos])
        return tuple(pullback(tuple(adj)))

    seed = tuple(_unpack(g, shapes))
    chain = cache.pop("chain", None)
    if chain is not None and not any(isinstance(x, Box) for x in floats):
        adj = chain.reverse(backward_step, seed)
    else:   # a second sweep, or traced inputs (higher order): recompute, n is known now
        state0 = _with_floats(others, fpos, floats)
        rerun = CheckpointedChain(step, state0, info["n"], s)
        rerun.forward()
        adj = rerun.reverse(backward_step, seed)
    cts = list(adj)
    cache["key"], cache["cts"], cache["g"] = id(g), cts, g
    return cts


while_p = Primitive("while_loop", _while_impl)
while_p.defvjp_any(lambda k, g, ans, *floats, **p: _while_cotangents(g, floats, **p)[k])


def _while_jvp(k, t, ans, *floats, cond_fun, body_fun, tree, others, fpos, s, info, cache):
    """The trip count is fixed: push the tangent through the n steps that ran."""
    step = _make_step(body_fun, tree, info["check"])
    n = info["n"]

    def run(*fl):
        state = _with_floats(others, fpos, fl)
        for i in range(n):
            state = step(state, i)
        return _pack([state[j] for j in fpos])
    tangents = [t if j == k else np.zeros_like(np.asarray(_core.concrete(x)))
                for j, x in enumerate(floats)]
    return jvp(run, tuple(floats), tuple(tangents))[1]


while_p.defjvp_any(_while_jvp)
while_p.defbatched(PER_DIRECTION)
while_p.defvmap(PER_LANE)           # runs user code: once per lane
while_p.defsparsity(patterns.DENSE, reason=patterns.USER_CODE)


def _budget(leaves, checkpoints, max_bytes):
    s = None
    if checkpoints is not None:
        if isinstance(checkpoints, bool) or int(checkpoints) != checkpoints or checkpoints < 1:
            raise ValueError(f"while_loop: checkpoints={checkpoints!r} must be a positive "
                             "number of stored carries (or None to store every step)")
        s = int(checkpoints)
    if max_bytes is not None:
        per = sum(np.asarray(_core.concrete(v)).nbytes for v in leaves)
        if max_bytes < per:
            raise ValueError(f"while_loop: max_bytes={max_bytes} is less than one stored "
                             f"carry ({per} bytes); raise max_bytes or use checkpoints=")
        by_bytes = int(max_bytes // max(per, 1))
        s = by_bytes if s is None else min(s, by_bytes)
    return s


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any,
               checkpoints: Optional[int] = None, max_bytes: Optional[int] = None) -> Any:
    """``jax.lax.while_loop``, reverse-mode differentiable.

    Parameters
    ----------
    cond_fun : callable
        ``carry -> bool`` (a scalar; a traced one is read by its value).
    body_fun : callable
        ``carry -> carry`` with the structure, shapes and dtypes of
        ``init_val``.
    init_val : pytree
        The initial carry.
    checkpoints : int, optional
        Reverse-mode memory budget: the most carries held at once (the
        initial one included).  None records every step (fastest, memory
        proportional to the trip count).
    max_bytes : int, optional
        The same budget in bytes: ``max_bytes // carry_bytes`` carries
        (the smaller of the two when both are given).

    Returns
    -------
    pytree
        The carry once ``cond_fun`` is false.  Derivatives hold the trip
        count fixed: they are those of the iterations that ran.

    Notes
    -----
    The checkpointed loop does not know its trip count in advance, so it
    places its snapshots online; :func:`tapead.checkpoint_cost` with
    ``online=True`` reports the forward steps it will recompute.  A loop whose
    carry is floats, whose body is scalar arithmetic and whose condition is
    one comparison of its values runs in C instead: its count is found
    first, and the loop is the scan of that many steps (revolve's schedule
    with ``checkpoints``).  Traced
    values that ``cond_fun`` or ``body_fun`` close over ride in the carry,
    unchanged (``tapead.closures``), so the derivatives are those of the loop
    with the values passed through the carry.

    Examples
    --------
    >>> import tapead as ta
    >>> def halvings(x):       # halve until below 1: x / 2**n
    ...     return ta.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x, checkpoints=2)
    >>> halvings(10.0), float(ta.grad(halvings)(10.0))
    (0.625, 0.0625)
    """
    _check_callable(cond_fun, "while_loop: cond_fun")
    _check_callable(body_fun, "while_loop: body_fun")
    leaves, tree = tree_flatten(init_val)
    check = _carry_checker(tree, _shapes(leaves),
                           [np.result_type(_core.concrete(v)) for v in leaves])
    s = _budget(leaves, checkpoints, max_bytes)
    closure = closures.find(cond_fun, body_fun) if s is not None else None
    if closure:
        # traced values the functions close over: carried, unchanged (the same
        # objects: a stored carry holds no copy, so the budget is the carry's)
        def body(c):
            out = closure.call(body_fun, c[1], c[0])
            check(*tree_flatten(out))              # the error speaks of init_val
            return out, c[1]
        out = _while_checkpointed(lambda c: closure.call(cond_fun, c[1], c[0]), body,
                                  (init_val, tuple(closure.values)), s)
        return out[0]
    return _while_checkpointed(cond_fun, body_fun, init_val, s, check)


#: steps a while loop run in C takes between two looks at Python's signals
#: (so that Ctrl-C stops a loop that does not end)
_C_CHUNK = 1 << 20


def _under_replay(leaves) -> bool:
    """Whether a value of ``leaves`` is traced by a tape that replays (``ta.jit``,
    ``ta.record``), at any level: a count found once would be frozen there."""
    for x in leaves:
        while type(x) is Tracer or type(x) is Dual:
            if type(x) is Tracer and x.tape.replayable:
                return True
            x = _core.primal_of(x)
    return False


def _while_in_c(cond_fun, body_fun, init_val, s):
    """The final carry of a while loop over float carries whose body is scalar
    arithmetic and whose condition is one comparison of its values, or None
    (the loop does not qualify).

    Body and condition are recorded once, each on a tape of its own, and run
    in C to find the trip count n (``_core.scalar_while``); the loop is then
    the scan of n steps (``tapead.scalar_scan``: one node of the tape, run in
    C, with ``checkpoints=s`` revolve's schedule for the n now known).  The
    values are those of stepping in Python, bit for bit, and the derivative is
    the loop's (the count held fixed).  On a tape that replays (``ta.jit``)
    the count is a guard: a replay counts again in C, and a new count
    re-records, as a flipped comparison does."""
    leaves, tree = tree_flatten(init_val)
    top = _core.top_trace(tuple(leaves))
    if type(top) is not Tape or not leaves:
        return None
    if closures.find(cond_fun, body_fun):
        return None                         # a traced value reached but through the carry
    carry0 = [_unboxed_float(v, top) for v in leaves]
    if any(v is None for v in carry0):
        return None
    m = len(carry0)
    cond, body = Tape(), Tape()
    before, started = top.n_nodes, _core.traces_started()
    try:
        try:
            cins = cond.input_many([np.float64(v) for v in carry0])
            pred = cond_fun(tree_unflatten(tree, list(cins)))
        finally:
            cond.active = False
        try:
            bins = body.input_many([np.float64(v) for v in carry0])
            out = body_fun(tree_unflatten(tree, list(bins)))
        finally:
            body.active = False
    except Exception:
        return None                         # the step-by-step loop reports it
    if top.n_nodes != before or _core.traces_started() - started > 2 or \
            cond.values_read or body.values_read:
        return None                         # a closure, a transform, a value read
    guards = cond.comparison_guards()
    if len(guards) != 1 or guards[0] is None or type(pred) not in (bool, np.bool_):
        return None                         # not one comparison
    _, code, xi, yi, xv, yv, result = guards[0]
    if bool(pred) != bool(result) or any(i < 0 and not isinstance(_core.concrete(v), (
            float, int, np.floating, np.integer)) for i, v in ((xi, xv), (yi, yv))):
        return None                         # the result is not the comparison's
    out_leaves, out_tree = tree_flatten(out)
    if out_tree != tree or not all(type(v) is Tracer and v.tape is body and
                                   type(_core.primal_of(v)) is float for v in out_leaves):
        return None
    consts = [0.0 if i >= 0 else float(_core.concrete(v)) for i, v in ((xi, xv), (yi, yv))]
    outs, comparison = [v.idx for v in out_leaves], _core.COMPARISONS[code]

    def count(values) -> int:
        """The steps the loop takes from the carries ``values``, in C."""
        carry, total = np.array(values, dtype=np.float64).reshape(-1), 0
        while True:
            done = int(_core.scalar_while(
                body, body.inputs, outs, [0.0] * m, cond, cond.inputs, [xi, yi], consts,
                comparison, carry, np.zeros(0), np.zeros((0, m)), _C_CHUNK,
                cond_guards=True))
            total += done
            if done < _C_CHUNK:
                return total
    try:
        n = count(carry0)
    except ValueError:
        return None                         # not all scalar
    if _under_replay(leaves):
        # a recording that replays checks the count at its new inputs (a new
        # count re-records, as a flipped comparison does)
        _core.guard_value(stack([v if isinstance(v, Box) else np.float64(v) for v in leaves]),
                          count, n, "the trip count of a ta.while_loop")
    if n == 0:
        return init_val
    final, _ = scan(lambda c, _: (body_fun(c), None), init_val, None, length=int(n),
                    checkpoints=s)
    return final


def _while_checkpointed(cond_fun, body_fun, init_val, s, check=None):
    """``while_loop`` with the budget ``s`` (None: none) once the functions
    reach no traced value but through the carry."""
    leaves, tree = tree_flatten(init_val)
    if check is None:
        check = _carry_checker(tree, _shapes(leaves),
                               [np.result_type(_core.concrete(v)) for v in leaves])
    fast = _while_in_c(cond_fun, body_fun, init_val, s)
    if fast is not None:
        return fast
    top = _core.top_trace(tuple(leaves))
    if s is None or type(top) is not Tape:
        # no budget, nothing traced, or forward mode (which stores nothing anyway)
        return _while_plain(cond_fun, body_fun, init_val, check)
    fpos = _split(leaves)
    others = tuple(None if k in fpos else v for k, v in enumerate(leaves))
    if any(isinstance(leaves[k], Box) for k in range(len(leaves)) if k not in fpos):
        others = tuple(_core.concrete(v) if v is not None else None for v in others)
    info: dict = {"check": check}
    params = dict(cond_fun=cond_fun, body_fun=body_fun, tree=tree, others=others,
                  fpos=tuple(fpos), s=s, info=info, cache={})
    floats = [leaves[k] for k in fpos]
    if not floats:
        return _while_plain(cond_fun, body_fun, init_val, check)
    flat = _guarded_bind(while_p, floats, params, "ta.while_loop(checkpoints=...)")
    out = list(info["final"])
    for k, v in zip(fpos, _unpack(flat, [np.shape(_core.concrete(x)) for x in floats])):
        want = np.result_type(_core.concrete(leaves[k]))
        if np.result_type(_core.concrete(v)) != want:
            v = astype(v, want)
        out[k] = v
    return tree_unflatten(tree, out)
