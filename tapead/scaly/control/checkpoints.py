"""Reverse mode through ``sc.scan(..., checkpoints=s)``: revolve instead of a
stored trajectory.

The backward loop of a checkpointed scan does not read the primal
trajectory.  Its node takes the primal's initial carries instead, and its
evaluation (``tapead.scaly.control.lowering.run_checkpointed``) runs the primal
steps and the backward steps under the binomial schedule of
``tapead.checkpointing`` (Griewank & Walther's revolve), holding at most
``s`` carries at a time and recomputing the others.

A checkpointed while loop (``sc.while_loop(..., checkpoints=s)``) stores its
carries as it runs, placed by the online schedule of ``tapead.online`` (it
does not know how many steps it will take), and hands them to its backward
node as one more operand (the loop's ``snapshot_output``), which reverses
the executed steps from them (``tapead.online.OnlineChain.reverse``).

That node stands for the ordinary backward loop (the *equivalent* spec) with
the primal trajectory as its input; its own derivatives are those of the
equivalent loop.  Forward over reverse (Hessians) keeps the checkpoints: the
tangent loop of the equivalent loop reads the primal trajectory and its
tangent, which are the trajectory of the primal's tangent loop, so it
becomes a checkpointed backward loop again, recomputing its steps with that
tangent loop from the initial carries and their tangents
(``_keep_checkpoints``; one or ``k`` directions).  Reverse over reverse and
derivatives of third order read the stored trajectory.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from tapead.errors import MissingRuleError
from tapead.scaly.control.spec import FLOAT, LoopSpec, make_function
from tapead.scaly.expr import Expr, zeros
from tapead.scaly.graphs import substitute


def checkpointed_spec(spec, backward: LoopSpec, zero_traj_adjoints: int = 0) -> LoopSpec:
    """The checkpointed variant of ``backward``, the backward loop of ``spec``.

    ``zero_traj_adjoints``: when the trajectory's adjoints (the last per-step
    inputs of ``backward``, this many) are zero, as in a first derivative,
    the variant takes one zero carry for each, passed whole to every step,
    instead of a stacked ``(length,) + shape`` zero: nothing of the length
    of the loop is stored.
    """
    key = ("vjp_checkpointed", zero_traj_adjoints)
    cached = spec._derived.get(key)
    if cached is not None:
        return cached
    windows = list(backward.windows)
    if zero_traj_adjoints:
        windows[-zero_traj_adjoints:] = [(0, 0)] * zero_traj_adjoints
    new = LoopSpec("scan", backward.name, body=backward.body,
                   carry_types=backward.carry_types, xs_types=backward.xs_types,
                   windows=windows, y_types=backward.y_types,
                   length=backward.length, index=backward.index,
                   reverse=backward.reverse, has_trip=backward.has_trip,
                   checkpoints=spec.checkpoints)
    new.recompute, new.equivalent = spec, backward
    new.zero_traj_adjoints = zero_traj_adjoints
    spec._derived[key] = new
    return new


def _loop_operands(node: Expr) -> list:
    """The operands of a checkpointed backward node but the stored carries of
    a while loop (their derivatives are those of the trajectory)."""
    ops = list(node.operands)
    return ops[:-1] if node.attrs["spec"].recompute.snapshot_output is not None else ops


def _parts(node: Expr):
    """(equivalent node, primal operands, trajectory nodes, position of the
    first initial carry) of a checkpointed backward node."""
    spec = node.attrs["spec"]
    primal = spec.recompute
    ops = _loop_operands(node)
    pos = spec.n_carry + (1 if spec.has_trip else 0)
    nc = primal.n_carry
    init, rest = ops[pos:pos + nc], ops[pos + nc:]
    trip = ops[spec.n_carry:pos] if primal.has_trip else []
    primal_ops = init + trip + rest[:len(primal.xs_types)]
    traj = primal.nodes(primal_ops)[primal.traj_offset:primal.traj_offset + nc]
    z = spec.zero_traj_adjoints
    if z:                  # the stacked zeros the equivalent loop reads instead
        rest = rest[:-z] + [zeros((primal.length,) + t.shape) for t in spec.xs_types[-z:]]
    equivalent = spec.equivalent.nodes(ops[:pos] + traj + rest)[node.attrs["output"]]
    return equivalent, primal_ops, traj, pos


def _primal_tangents(node: Expr, ts, pos: int) -> list:
    spec = node.attrs["spec"]
    primal = spec.recompute
    nc = primal.n_carry
    trip = ts[spec.n_carry:pos] if primal.has_trip else []
    return list(ts[pos:pos + nc]) + list(trip) + list(ts[pos + nc:pos + nc +
                                                         len(primal.xs_types)])


def checkpointed_jvp(ts, node: Expr, rule, *k) -> Optional[Expr]:
    """``rule`` (the forward rule of loops, batched with ``k``) on the
    equivalent node, made a checkpointed backward loop again
    (``_keep_checkpoints``): no trajectory is stored."""
    equivalent, primal_ops, traj, pos = _parts(node)
    pts = _primal_tangents(node, ts, pos)
    nc = len(traj)
    t_traj = [None if all(t is None for t in pts) else rule(pts, tr, *k) for tr in traj]
    equiv_ts = list(ts[:pos]) + t_traj + list(ts[pos + nc:len(_loop_operands(node))])
    if all(t is None for t in equiv_ts):
        return None
    result = rule(equiv_ts, equivalent, *k)
    if result is None:
        return None
    if nc == 0:
        return result                       # no carries: no trajectory
    if all(t is None for t in pts):         # the primal's tangent loop, with zero tangents
        lead = (k[0],) if k else ()
        pts = [zeros(lead + o.shape) if o.dtype == FLOAT else None for o in primal_ops]
        t_traj = [rule(pts, traj[0], *k)]
    return _keep_checkpoints(node, result, _loop_node(t_traj[0]))


def _loop_node(expr: Optional[Expr]) -> Optional[Expr]:
    """The loop node an output of a forward rule reads (itself, or under the
    transpose of a batched stacked output)."""
    if expr is not None and expr.op == "transpose":
        expr = expr.operands[0]
    return expr if expr is not None and expr.op in ("scan", "while_loop") else None


def _refuse(node: Expr, why: str):
    raise MissingRuleError(
        f"forward mode through the checkpointed backward loop of "
        f"'{node.attrs['spec'].recompute.name}': {why}; it would have to store the "
        "trajectory the checkpoints avoid. Differentiate the loop without checkpoints= "
        "(storing its trajectory) for this derivative")


def _keep_checkpoints(node: Expr, result: Expr, primal_t: Optional[Expr]) -> Expr:
    """``result`` (the forward rule on the equivalent loop: an output of its
    tangent loop, which reads the primal trajectory and its tangent) with
    that tangent loop replaced by a checkpointed backward loop recomputing
    its steps with ``primal_t``, the primal's tangent loop."""
    tangent = _loop_node(result)
    if tangent is None or primal_t is None:
        _refuse(node, "its tangent is not one loop")
    spec = node.attrs["spec"]
    E, P, Pt = spec.equivalent, spec.recompute, primal_t.attrs["spec"]
    Et = tangent.attrs["spec"]
    key = ("jvp_checkpointed", id(Et), id(Pt))
    cached = spec._derived.get(key)
    if cached is None:
        cached = spec._derived[key] = _checkpointed_tangent_spec(node, spec, E, P, Pt, Et)
    new, order, zero = cached
    ops, p_ops = tangent.operands, primal_t.operands
    pos = Et.n_carry + (1 if Et.has_trip else 0)
    p_pos = Pt.n_carry + (1 if Pt.has_trip else 0)
    xs = list(ops[pos:])
    others = [xs[i] for i in order[Pt.n_carry + len(Pt.xs_types):]]
    if zero:                                # one zero per step input, not a stacked zero
        others[-zero:] = [zeros(t.shape) for t in new.xs_types[-zero:]]
    operands = (list(ops[:pos]) + list(p_ops[:Pt.n_carry]) + list(p_ops[p_pos:])
                + others)
    out = new.nodes(operands)[tangent.attrs["output"]]
    return substitute([result], {tangent.id: out})[0]


def _checkpointed_tangent_spec(node, spec, E, P, Pt, Et):
    """(the checkpointed loop, the order of its per-step inputs in those of
    ``Et``, how many of the last are zero passed whole) for the tangent loop
    ``Et`` of the equivalent loop ``E`` of ``spec``, recomputing with ``Pt``."""
    nEx = len(E.xs_types)
    fx = [j for j, t in enumerate(E.xs_types) if t.dtype == FLOAT]     # tangents, in order
    if len(Et.xs_types) != nEx + len(fx):
        _refuse(node, "its tangent loop has an unexpected layout")
    tan = {j: nEx + i for i, j in enumerate(fx)}
    ncP, nPx = P.n_carry, len(P.xs_types)

    def part(lo, hi):
        return list(range(lo, hi)), [tan[j] for j in range(lo, hi) if j in tan]

    state, t_state = part(0, ncP)
    pxs, t_pxs = part(ncP, ncP + nPx)
    nfc = len(t_state)                      # the trajectory's adjoints: one per float carry
    gy, t_gy = part(ncP + nPx, nEx - nfc)
    gt, t_gt = part(nEx - nfc, nEx)
    order = state + t_state + pxs + t_pxs + gy + t_gy + gt + t_gt
    types = [Et.xs_types[i] for i in order]
    if (types[:Pt.n_carry] != Pt.carry_types
            or types[Pt.n_carry:Pt.n_carry + len(Pt.xs_types)] != Pt.xs_types):
        _refuse(node, "the primal's tangent loop does not match its steps")
    body = Et.body
    ni = 1 if Et.index else 0
    b_in = body.inputs
    carries, idx = list(b_in[:Et.n_carry]), list(b_in[Et.n_carry:Et.n_carry + ni])
    b_xs = list(b_in[Et.n_carry + ni:])
    permuted = make_function(f"{body.name}_ck", carries + idx + [b_xs[i] for i in order],
                             list(zip(body.output_names, body.expanded_outputs())))
    zero = 2 * nfc if spec.zero_traj_adjoints else 0
    windows = [Et.windows[i] for i in order]
    equivalent = LoopSpec("scan", permuted.name, body=permuted, carry_types=Et.carry_types,
                          xs_types=types, windows=windows, y_types=Et.y_types,
                          length=Et.length, index=Et.index, reverse=Et.reverse,
                          has_trip=Et.has_trip)
    if zero:
        windows = windows[:-zero] + [(0, 0)] * zero
    new = LoopSpec("scan", permuted.name, body=permuted, carry_types=Et.carry_types,
                   xs_types=types, windows=windows, y_types=Et.y_types, length=Et.length,
                   index=Et.index, reverse=Et.reverse, has_trip=Et.has_trip,
                   checkpoints=spec.checkpoints)
    new.recompute, new.equivalent, new.zero_traj_adjoints = Pt, equivalent, zero
    return new, order, zero


def checkpointed_vjp(gs, node: Expr, rule) -> List[Optional[Expr]]:
    """``rule`` (the grouped reverse rule of loops, ``gs``: output number ->
    adjoint) on the equivalent node, with the trajectory's adjoints sent on to
    the primal's operands (one backward pass of the primal for all of them)."""
    equivalent, primal_ops, traj, pos = _parts(node)
    spec = node.attrs["spec"]
    primal = spec.recompute
    nc = len(traj)
    c = rule(gs, equivalent)
    out: List[Optional[Expr]] = list(c[:pos]) + [None] * nc + list(c[pos + nc:])
    if spec.zero_traj_adjoints:                              # constants here
        out[len(out) - spec.zero_traj_adjoints:] = [None] * spec.zero_traj_adjoints
    out += [None] * (len(node.operands) - len(out))           # the stored carries
    trip = 1 if primal.has_trip else 0
    # primal operand i -> position in this node's operands
    where = ([pos + j for j in range(nc)] + ([spec.n_carry] if trip else [])
             + [pos + nc + j for j in range(len(primal_ops) - nc - trip)])
    traj_gs = {primal.traj_offset + j: c[pos + j] for j in range(nc) if c[pos + j] is not None}
    if traj_gs:
        for i, contribution in enumerate(rule(traj_gs, traj[0])):
            if contribution is not None:
                at = where[i]
                out[at] = contribution if out[at] is None else out[at] + contribution
    return out


__all__: Tuple[str, ...] = ("checkpointed_spec", "checkpointed_jvp", "checkpointed_vjp")
