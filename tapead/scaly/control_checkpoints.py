"""Reverse mode through ``sc.scan(..., checkpoints=s)``: revolve instead of a
stored trajectory.

The backward loop of a checkpointed scan does not read the primal
trajectory.  Its node takes the primal's initial carries instead, and its
evaluation (``tapead.scaly.loops_lower.run_checkpointed``) runs the primal
steps and the backward steps under the binomial schedule of
``tapead.checkpointing`` (Griewank & Walther's revolve), holding at most
``s`` carries at a time and recomputing the others.

A checkpointed while loop (``sc.while_loop(..., checkpoints=s)``) stores its
carries as it runs, placed by the online schedule of ``tapead.online`` (it
does not know how many steps it will take), and hands them to its backward
node as one more operand (the loop's ``snapshot_output``), which reverses
the executed steps from them (``tapead.online.OnlineChain.reverse``).

That node stands for the ordinary backward loop (the *equivalent* spec) with
the primal trajectory as its input; its own derivatives (forward over
reverse for Hessians, reverse over reverse) are those of the equivalent
loop, which reads the stored trajectory: higher derivatives store it.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from tapead.scaly.control_spec import LoopSpec
from tapead.scaly.expr import Expr, zeros


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
    equivalent node; the trajectory's tangents come from the primal's rule."""
    equivalent, primal_ops, traj, pos = _parts(node)
    pts = _primal_tangents(node, ts, pos)
    nc = len(traj)
    t_traj = [None if all(t is None for t in pts) else rule(pts, tr, *k) for tr in traj]
    equiv_ts = list(ts[:pos]) + t_traj + list(ts[pos + nc:len(_loop_operands(node))])
    if all(t is None for t in equiv_ts):
        return None
    return rule(equiv_ts, equivalent, *k)


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
