"""Scaly's loops: ``sc.scan`` and ``sc.while_loop`` (branches and prints are
in ``tapead.scaly.control.branches``, ``sc.custom_derivative`` in
``tapead.scaly.control.custom``).

A Python loop in an ``@sc.function`` body is unrolled while the body is
traced; these record a loop whose body is a Scaly Function
instead, so the caller's graph holds one node per loop output whatever the
number of steps.  The nodes, their derivatives and the output numbering are
in ``tapead.scaly.control.rules``; their evaluation in
``tapead.scaly.control.lowering``.
"""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly.calls import _spec as _input_spec
from tapead.scaly.calls import broadcast, window
from tapead.scaly.control.spec import LoopSpec, check_function as _check_function
from tapead.scaly.control.spec import closure_converted
from tapead.errors import LayoutError, ScalyShapeError
from tapead.scaly.expr import Expr, as_expr, const
from tapead.scaly.types import TensorType, dtypes
from tapead.scaly.control.nodes import as_typed, leaf_types, numbers, pack, results


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return int(value)


def _carries(fn, init, where: str) -> Tuple[List[Any], List[Expr], bool]:
    """(carry parameter layouts, carry leaf expressions, init was a tuple)."""
    entries = list(init) if isinstance(init, tuple) else [init]
    if len(fn.params) < len(entries):
        raise LayoutError(f"{where}: {len(entries)} carries but {fn.name} has only "
                          f"{len(fn.params)} parameter(s); declare one parameter per carry")
    layouts = fn.params[:len(entries)]
    flat = lay.flatten(layouts, entries, f"{where} (its carries)")
    leaves = lay.leaves(layouts)
    exprs = [as_typed(v, leaf.type, f"{where}: carry '{leaf.name}'")
             for v, leaf in zip(flat, leaves)]
    return layouts, exprs, isinstance(init, tuple)


def _checkpoints(value, where: str):
    if value is None:
        return None
    value = _count(value, f"{where}: checkpoints")
    if value < 1:
        raise ValueError(f"{where}: checkpoints counts the stored carries, the initial one "
                         "included; give at least 1")
    return value


def _index_param(fn, pos: int, where: str) -> None:
    if len(fn.params) <= pos or not isinstance(fn.params[pos], lay.Leaf) or \
            fn.params[pos].type != TensorType((), dtypes.int64):
        raise LayoutError(f"{where}: index=True passes the step number, an int64 scalar, "
                          f"after the carries; declare parameter {pos} of {fn.name} as "
                          "sc.arg(name, sc.TensorType((), sc.dtypes.int64))")


def _check_next_carries(fn, carry_layouts, where: str) -> List[Any]:
    """The items of ``fn``'s outputs after the next carries (which must keep the
    carries' shapes and dtypes)."""
    out = fn.output_layout
    items = [out] if isinstance(out, lay.Leaf) else list(out.items)
    m = len(carry_layouts)
    if len(items) < m:
        raise LayoutError(f"{where}: {fn.name} must return its {m} next carr"
                          f"{'y' if m == 1 else 'ies'} first, but it returns {len(items)} "
                          "result(s)")
    for k, (carry, result) in enumerate(zip(carry_layouts, items[:m])):
        cl, rl = lay.leaves([carry]), lay.leaves([result])
        if len(cl) != len(rl):
            raise LayoutError(f"{where}: result {k} of {fn.name} must have the structure "
                              f"of carry {carry!r} ({len(cl)} leaves), got {len(rl)} leaves")
        for c, r in zip(cl, rl):
            if c.type.shape != r.type.shape:
                raise ScalyShapeError(
                    f"{where}: carry '{c.name}' has shape {c.type.shape}, but {fn.name} "
                    f"returns its next value '{r.name}' with shape {r.type.shape}; a "
                    "carry keeps its shape through the loop")
            if c.type.dtype != r.type.dtype:
                raise LayoutError(
                    f"{where}: carry '{c.name}' is {c.type.dtype_name}, but {fn.name} "
                    f"returns its next value '{r.name}' as {r.type.dtype_name}; a carry "
                    "keeps its dtype through the loop")
    return items[m:]


def _in_place(spec_value, fn, carry_layouts, where: str) -> Tuple[tuple, tuple]:
    """(the request as given, the carries it names)."""
    if spec_value is None:
        return (), ()
    items = spec_value if isinstance(spec_value, (tuple, list)) else (spec_value,)
    carry_names = [leaf.name for leaf in lay.leaves(carry_layouts)]
    strict = []
    for item in items:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not 0 <= item < len(carry_layouts):
                raise ValueError(f"{where}: in_place={item!r} is not a carry position (there "
                                 f"are {len(carry_layouts)} carries)")
            strict.append(int(item))
        elif isinstance(item, str):
            if item not in fn.input_names:
                raise ValueError(f"{where}: in_place names {item!r}, which is not an input "
                                 f"of {fn.name} ({', '.join(fn.input_names)})")
            if item in carry_names:
                strict.append(item)
        else:
            raise TypeError(f"{where}: in_place takes carry positions (int) and input names "
                            f"(str), got {item!r}")
    return tuple(items), tuple(strict)


# ---------------------------------------------------------------------------
# sc.scan
# ---------------------------------------------------------------------------

def scan(body, init, xs=(), length=None, index=False, reverse=False, trip=None,
         in_place=None, max_trajectory=None, checkpoints=None):
    """Thread a carry through ``length`` calls of ``body``, stacking its outputs.

    Parameters
    ----------
    body : sc.Function
        Parameters: the carries (one per entry of ``init``), then with
        ``index=True`` an int64 scalar step number, then one per entry of
        ``xs``.  Returns the next carries (same shapes and dtypes) followed
        by any per-step outputs.
    init : expression, number or tuple
        The initial carry; a tuple gives several carries (each may be a
        nested tuple matching a group parameter).
    xs : sequence
        One entry per further parameter: an expression whose leading axis
        indexes the steps (shape ``(length,) + parameter shape``),
        ``sc.broadcast(p)`` (the whole ``p`` at every step) or
        ``sc.window(outer, start, stride)`` (step ``k`` reads the
        parameter's size of elements of the flat ``outer`` from
        ``start + k * stride``).
    length : int
        The number of steps (a static int; 0 is allowed).
    index : bool
        Pass the step number after the carries.
    reverse : bool
        Run the steps in descending order; step ``k`` still reads slice
        ``k`` and writes stacked output ``k``.
    trip : int64 scalar expression, optional
        A run-time step count, clamped to ``[0, length]``; unused stacked
        entries are zero (a reverse scan starts at the clamped count minus one).
    in_place : int, str or sequence, optional
        Carry positions or input names to update in place (checked; a carry
        named here cannot be differentiated in reverse mode).
    max_trajectory : int, optional
        The most scalar carry elements (``length`` times the carries' size)
        reverse mode may store for this loop; more raises ValueError.
    checkpoints : int, optional
        Reverse mode stores at most this many carries (revolve snapshots,
        the initial carry included) and recomputes the other steps, instead
        of storing the whole trajectory.  Derivatives of that reverse pass
        (Hessians) store the trajectory.

    Returns
    -------
    (final, stacked)
        ``final`` is laid out like ``init``; ``stacked`` is a tuple with one
        entry per per-step output of ``body``, shape ``(length,) + shape``.

    >>> import tapead.scaly as sc
    >>> @sc.function(sc.arg("s", ()), sc.arg("u", ()))
    ... def step(s, u):
    ...     return s + u, s * u
    >>> @sc.function(sc.arg("u", 3), outputs=sc.group(sc.arg("s", ()), sc.arg("p", 3)))
    ... def run(u):
    ...     s, (p,) = sc.scan(step, sc.const(0.0), (u,), length=3)
    ...     return s, p
    >>> run([1.0, 2.0, 3.0])
    (np.float64(6.0), array([0., 2., 9.]))
    """
    body = _check_function(body, "sc.scan's body", captured_ok=True)
    where = f"sc.scan({body.name})"
    xs = list(xs) if isinstance(xs, (tuple, list)) else [xs]
    (body,), extra = closure_converted([body])     # captured symbols: whole at every step
    xs += [broadcast(e) for e in extra]
    carry_layouts, carries, was_tuple = _carries(body, init, where)
    m, n_idx = len(carry_layouts), 1 if index else 0
    if index:
        _index_param(body, m, where)
    if len(body.params) != m + n_idx + len(xs):
        raise LayoutError(
            f"{where}: {body.name} has {len(body.params)} parameters, but the scan passes "
            f"{m} carr{'y' if m == 1 else 'ies'}{', the step number' if index else ''} and "
            f"{len(xs)} input(s) from xs; give one xs entry per remaining parameter")
    x_params = body.params[m + n_idx:]
    for p in x_params:
        if not isinstance(p, lay.Leaf):
            raise LayoutError(f"{where}: the parameters fed by xs must be single tensors, "
                              f"got the group {p!r}")
    if length is None:
        sliced = [e for e in xs if not isinstance(e, (broadcast, window))]
        if not sliced:
            raise ValueError(f"{where}: give length= (no xs entry has a leading step axis)")
        length = as_expr(sliced[0]).shape[0] if as_expr(sliced[0]).ndim else 0
    length = _count(length, f"{where}: length")
    operands_x, windows = [], []
    for e, leaf in zip(xs, x_params):
        if not isinstance(e, (broadcast, window)):
            e = as_expr(e)
            if e.ndim == 0 or e.size != length * leaf.type.size:
                raise ScalyShapeError(
                    f"{where}: the xs entry for '{leaf.name}' must have a leading axis of "
                    f"{length} steps, shape {(length,) + leaf.type.shape}, got shape "
                    f"{e.shape}; pass sc.broadcast(p) to give every step the whole of p")
        expr, start, stride = _input_spec(e, leaf, length, where)
        if expr.dtype != leaf.type.dtype and expr.op == "const" and np.can_cast(
                expr.dtype, leaf.type.dtype, casting="same_kind"):
            expr = const(expr.attrs["value"], leaf.type.dtype)
        if expr.dtype != leaf.type.dtype:
            raise LayoutError(f"{where}: input '{leaf.name}' is {leaf.type.dtype_name}, "
                              f"got {expr.type.dtype_name}")
        operands_x.append(expr)
        windows.append((start, stride))
    y_items = _check_next_carries(body, carry_layouts, where)
    trip_ops = []
    if trip is not None:
        trip_ops = [as_typed(trip, TensorType((), dtypes.int64), f"{where}: trip")]
    if max_trajectory is not None:
        max_trajectory = _count(max_trajectory, f"{where}: max_trajectory")
    requested, strict = _in_place(in_place, body, carry_layouts, where)
    checkpoints = _checkpoints(checkpoints, where)
    spec = LoopSpec("scan", body.name, body=body, carry_types=[c.type for c in carries],
                    xs_types=[p.type for p in x_params], windows=windows,
                    y_types=leaf_types(y_items), length=length, index=index,
                    reverse=reverse, has_trip=trip is not None,
                    max_trajectory=max_trajectory, in_place=requested,
                    strict_carries=strict, checkpoints=checkpoints)
    nodes = results(spec, carries + trip_ops + operands_x)
    nc = spec.n_carry
    final = pack(carry_layouts, nodes[:nc])
    stacked_layouts = [_stacked_layout(item, length) for item in y_items]
    stacked = tuple(pack(stacked_layouts, nodes[nc:spec.traj_offset]))
    return (tuple(final) if was_tuple else final[0]), stacked


def _stacked_layout(layout, length: int):
    if isinstance(layout, lay.Leaf):
        return lay.arg(layout.name, TensorType((length,) + layout.type.shape,
                                               layout.type.dtype))
    return lay.group(*(_stacked_layout(item, length) for item in layout.items))


# ---------------------------------------------------------------------------
# sc.while_loop
# ---------------------------------------------------------------------------

def while_loop(cond, body, init, max_iter=None, params=(), index=False, max_trajectory=None,
               checkpoints=None):
    """Repeat ``body`` while ``cond`` holds, at most ``max_iter`` times.

    Parameters
    ----------
    cond : sc.Function
        Same parameters as ``body``; returns one bool scalar.  Checked before
        each step.
    body : sc.Function
        Parameters: the carries, then with ``index=True`` the int64 step
        number, then ``params``.  Returns only the next carries.
    init : expression, number or tuple
        The initial carries.
    max_iter : int
        The most steps (static); reaching it returns the current carry
        without an error.
    params : sequence
        Expressions passed whole to every step.
    index : bool
        Pass the step number after the carries.
    max_trajectory : int, optional
        As for ``sc.scan``, counted over ``max_iter`` steps (over
        ``min(max_iter, checkpoints)`` stored carries with ``checkpoints``).
    checkpoints : int, optional
        Reverse mode stores at most this many carries (the initial one
        included) instead of the trajectory: the loop places them while it
        runs, not knowing how many steps it will take (the online schedule
        of ``ta.while_loop``, ``tapead.online``), and the backward loop
        recomputes the other steps from them, ``ta.checkpoint_cost(n, s,
        online=True)["forward_step_calls"]`` body calls in all for ``n``
        steps.  Derivatives of that reverse pass (Hessians) store the
        trajectory.

    Returns
    -------
    (final, count)
        ``final`` laid out like ``init``; ``count`` the int64 number of steps
        executed (0 when ``cond`` is false at entry or ``max_iter=0``).
    
    Examples
    --------
    Newton's iteration for sqrt(a), and the number of steps it took:

    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()), sc.arg("a", ()),
    ...              outputs=sc.arg("go", sc.TensorType((), sc.dtypes.bool_)))
    ... def unsolved(x, a):
    ...     return (x * x - a).abs() > 1e-12
    >>> @sc.function(sc.arg("x", ()), sc.arg("a", ()))
    ... def newton(x, a):
    ...     return 0.5 * (x + a / x)
    >>> @sc.function(sc.arg("a", ()), outputs=sc.group(
    ...     sc.arg("root", ()), sc.arg("n", sc.TensorType((), sc.dtypes.int64))))
    ... def root(a):
    ...     return sc.while_loop(unsolved, newton, sc.const(1.0), max_iter=30, params=(a,))
    >>> root(np.array(2.0))
    (np.float64(1.414213562373095), np.int64(5))
    """
    cond = _check_function(cond, "sc.while_loop's condition", captured_ok=True)
    body = _check_function(body, "sc.while_loop's body", captured_ok=True)
    where = f"sc.while_loop({cond.name}, {body.name})"
    if max_iter is None:
        raise ValueError(f"{where}: give max_iter=, the most steps the loop may take")
    max_iter = _count(max_iter, f"{where}: max_iter")
    params = list(params) if isinstance(params, (tuple, list)) else [params]
    (cond, body), extra = closure_converted([cond, body])   # captured symbols: params
    params += extra
    carry_layouts, carries, was_tuple = _carries(body, init, where)
    m, n_idx = len(carry_layouts), 1 if index else 0
    if index:
        _index_param(body, m, where)
    for fn in (cond, body):
        if len(fn.params) != m + n_idx + len(params):
            raise LayoutError(
                f"{where}: {fn.name} has {len(fn.params)} parameters, but the loop passes "
                f"{m} carr{'y' if m == 1 else 'ies'}{', the step number' if index else ''} "
                f"and {len(params)} parameter(s) from params=")
    if leaf_types(cond.params) != leaf_types(body.params):
        raise LayoutError(f"{where}: the condition and the body take the same inputs; "
                          f"{cond.name} takes {cond!r}, {body.name} takes {body!r}")
    if len(cond.outputs) != 1 or cond.outputs[0].type != TensorType((), dtypes.bool_):
        raise LayoutError(f"{where}: the condition {cond.name} must return one bool scalar "
                          "(declare outputs=sc.arg(name, sc.TensorType((), sc.dtypes.bool_)))")
    rest = _check_next_carries(body, carry_layouts, where)
    if rest:
        raise LayoutError(f"{where}: the body {body.name} returns only its next carries; it "
                          f"returns {len(rest)} more result(s)")
    p_leaves = lay.leaves(body.params[m + n_idx:])
    p_layouts = body.params[m + n_idx:]
    flat = lay.flatten(p_layouts, params, f"{where} (its params)")
    operands_p = [as_typed(v, leaf.type, f"{where}: parameter '{leaf.name}'")
                  for v, leaf in zip(flat, p_leaves)]
    if max_trajectory is not None:
        max_trajectory = _count(max_trajectory, f"{where}: max_trajectory")
    spec = LoopSpec("while_loop", body.name, body=body, cond=cond,
                    carry_types=[c.type for c in carries],
                    xs_types=[leaf.type for leaf in p_leaves],
                    windows=[(0, 0)] * len(p_leaves), length=max_iter, index=index,
                    max_trajectory=max_trajectory,
                    checkpoints=_checkpoints(checkpoints, where))
    nodes = results(spec, carries + operands_p)
    final = pack(carry_layouts, nodes[:spec.n_carry])
    return (tuple(final) if was_tuple else final[0]), numbers(nodes[spec.n_carry])


__all__ = ["scan", "while_loop"]
