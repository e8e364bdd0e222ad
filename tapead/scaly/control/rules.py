"""Derivatives of loop and branch nodes (``tapead.scaly.control.spec``) and
their entries in the op table.

Derivatives are loops again:

* forward mode runs a *tangent loop* whose carries are the primal carries
  followed by their tangents, with the body's forward derivative as body
  (batched forward: the tangents carry the directions on a leading axis,
  ``tapead.scaly.control.batched``);
* reverse mode runs a *backward loop* over the executed steps in the
  opposite order, reading the primal trajectory; its carries are the
  carries' adjoints and the accumulated adjoints of whole (broadcast)
  parameters, and it stacks the adjoints of per-step inputs.  A while loop's
  backward loop is a reverse scan over ``max_iter`` steps with the count as
  its trip;
* a branch differentiates into a branch over the branches' derivatives,
  selected by the same selector.

Derived loops are built once per loop (cached on its spec), so forward over
reverse (Hessians) differentiates the backward loop again the same way.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from tapead.scaly.control.checkpoints import (checkpointed_jvp, checkpointed_spec,
                                              checkpointed_vjp)
from tapead.scaly.control.spec import (LoopSpec, floats, names_of, new_inputs,
                                       step_parts, zero_if_none, fresh, make_function)
from tapead.scaly.sweeps import GROUP_VJPS, forward_tangents, reverse_adjoints_many
from tapead.scaly.expr import Expr, reshape, scatter, zeros
from tapead.scaly.graphs import substitute
from tapead.scaly.control.lowering import eval_fn, pick_p, print_fn, print_p
from tapead.scaly.ops import register
from tapead.scaly.types import TensorType


# ---------------------------------------------------------------------------
# forward mode: the tangent loop
# ---------------------------------------------------------------------------

def tangent_spec(spec) -> Tuple[LoopSpec, Dict[str, list]]:
    """The tangent loop of a scan or while loop (built once per spec)."""
    cached = spec._derived.get("jvp")
    if cached is not None:
        return cached
    carries, idx, xs, c_out, ys = step_parts(spec)
    fc, fx, fy = floats(carries), floats(xs), floats(ys)
    taken = names_of(spec.body) | (names_of(spec.cond) if spec.cond is not None else set())
    tc = new_inputs("tan_", [carries[j] for j in fc], taken)
    tx = new_inputs("tan_", [xs[j] for j in fx], taken)
    seeds = {carries[j].id: t for j, t in zip(fc, tc)}
    seeds.update({xs[j].id: t for j, t in zip(fx, tx)})
    outs = list(c_out) + list(ys)
    touts = forward_tangents(outs, seeds)
    inputs = list(carries) + tc + ([idx] if idx is not None else []) + list(xs) + tx
    onames = spec.body.output_names
    outputs = [(onames[j], c_out[j]) for j in range(len(c_out))]
    outputs += [(fresh(f"tan_{onames[j]}", taken),
                 zero_if_none(touts[j], c_out[j].type)) for j in fc]
    outputs += [(onames[len(c_out) + j], ys[j]) for j in range(len(ys))]
    outputs += [(fresh(f"tan_{onames[len(c_out) + j]}", taken),
                 zero_if_none(touts[len(c_out) + j], ys[j].type)) for j in fy]
    body_t = make_function(f"{spec.body.name}_fwd", inputs, outputs)
    cond_t = None
    if spec.op == "while_loop":
        cond_t = make_function(f"{spec.cond.name}_fwd", inputs,
                               [(spec.cond.output_names[0], spec.cond.expanded_outputs()[0])])
    carry_types = spec.carry_types + [spec.carry_types[j] for j in fc]
    xs_types = spec.xs_types + [spec.xs_types[j] for j in fx]
    windows = spec.windows + [spec.windows[j] for j in fx]
    new = LoopSpec(spec.op, body_t.name, body=body_t, cond=cond_t, carry_types=carry_types,
                   xs_types=xs_types, windows=windows,
                   y_types=spec.y_types + [spec.y_types[j] for j in fy],
                   length=spec.length, index=spec.index, reverse=spec.reverse,
                   has_trip=spec.has_trip)
    info = {"fc": fc, "fx": fx, "fy": fy}
    spec._derived["jvp"] = (new, info)
    return new, info


def _tangent_output(spec, new, info, k: int) -> Optional[int]:
    """Output of the tangent loop holding the tangent of output ``k``."""
    nc, fc, fy = spec.n_carry, info["fc"], info["fy"]
    ntc = len(fc)
    if k < nc:
        return nc + fc.index(k) if k in fc else None
    if spec.op == "scan":
        ny = len(spec.y_types)
        if k < nc + ny:
            j = k - nc
            return nc + ntc + ny + fy.index(j) if j in fy else None
        j = k - nc - ny
        return new.traj_offset + nc + fc.index(j) if j in fc else None
    if k == nc:                                  # the count has no tangent
        return None
    j = k - nc - 1
    return new.traj_offset + nc + fc.index(j) if j in fc else None


def loop_jvp(ts, node):
    spec = node.attrs["spec"]
    if spec.recompute is not None:
        return checkpointed_jvp(ts, node, loop_jvp)
    new, info = tangent_spec(spec)
    k = _tangent_output(spec, new, info, node.attrs["output"])
    if k is None:
        return None
    ops, nc = node.operands, spec.n_carry
    pos = nc + (1 if spec.has_trip else 0)
    carries, xs = ops[:nc], ops[pos:]
    tcs = [zero_if_none(ts[j], carries[j].type) for j in info["fc"]]
    txs = [zero_if_none(ts[pos + j], xs[j].type) for j in info["fx"]]
    operands = list(carries) + tcs + list(ops[nc:pos]) + list(xs) + txs
    return new.nodes(operands)[k]


# ---------------------------------------------------------------------------
# reverse mode: the backward loop
# ---------------------------------------------------------------------------

def trajectory_size(spec) -> int:
    """Scalar elements of the trajectory reverse mode stores (``checkpoints``
    carries at most, with checkpoints)."""
    steps = spec.length if spec.checkpoints is None else min(spec.length, spec.checkpoints)
    return steps * sum(t.size for t in spec.carry_types)


def _check_reverse(spec) -> None:
    if spec.max_trajectory is not None and trajectory_size(spec) > spec.max_trajectory:
        sizes = " + ".join(str(t.size) for t in spec.carry_types) or "0"
        raise ValueError(
            f"reverse mode through {spec.op} '{spec.name}' would store a trajectory of "
            f"{trajectory_size(spec) // max(1, sum(t.size for t in spec.carry_types))} "
            f"steps x ({sizes}) carry elements = {trajectory_size(spec)} "
            f"elements, more than max_trajectory={spec.max_trajectory}; raise the limit, or "
            "give the loop's Function a derivative that stores no trajectory with "
            "sc.custom_derivative")
    if spec.strict_carries:
        raise ValueError(
            f"{spec.op} '{spec.name}': in_place={spec.in_place!r} asks to update the "
            f"carries {spec.strict_carries!r} in place, but reverse mode reads the carries "
            "entering every step (the trajectory); leave in_place unset when requesting "
            "reverse-mode derivatives")


def backward_spec(spec) -> Tuple[LoopSpec, Dict[str, list]]:
    """The backward loop of a scan or while loop (built once per spec)."""
    cached = spec._derived.get("vjp")
    if cached is not None:
        return cached
    carries, idx, xs, c_out, ys = step_parts(spec)
    fc, fy = floats(carries), floats(ys)
    fb = [j for j in floats(xs) if spec.windows[j][1] == 0]          # passed whole
    fs = [j for j in floats(xs) if spec.windows[j][1] != 0]          # per step
    taken = names_of(spec.body)
    gc = new_inputs("adj_", [carries[j] for j in fc], taken)
    gp = new_inputs("adj_", [xs[j] for j in fb], taken)
    ynames = spec.body.output_names[len(c_out):]
    gy = new_inputs("adj_", [ys[j] for j in fy], taken, [ynames[j] for j in fy])
    # the adjoint of the trajectory output at this step (the carry entering it)
    gt = new_inputs("adj_traj_", [carries[j] for j in fc], taken)
    weights = [None] * len(c_out) + [None] * len(ys)
    for j, g in zip(fc, gc):
        weights[j] = g
    for j, g in zip(fy, gy):
        weights[len(c_out) + j] = g
    wrt = [carries[j] for j in fc] + [xs[j] for j in fb] + [xs[j] for j in fs]
    adj = reverse_adjoints_many(list(c_out) + list(ys), weights, wrt)
    a_c, a_b, a_s = adj[:len(fc)], adj[len(fc):len(fc) + len(fb)], adj[len(fc) + len(fb):]
    inputs = (gc + gp + ([idx] if idx is not None else []) + list(carries) + list(xs) + gy
              + gt)
    outputs = [(fresh(f"adj_{carries[j].attrs['name']}_in", taken), a + t)
               for j, a, t in zip(fc, a_c, gt)]
    outputs += [(fresh(f"adj_{g.attrs['name']}_sum", taken), g + a) for g, a in zip(gp, a_b)]
    outputs += [(fresh(f"adj_{xs[j].attrs['name']}_step", taken), a)
                for j, a in zip(fs, a_s)]
    body_b = make_function(f"{spec.body.name}_rev", inputs, outputs)
    carry_types = [spec.carry_types[j] for j in fc] + [spec.xs_types[j] for j in fb]
    xs_types = (list(spec.carry_types) + spec.xs_types + [spec.y_types[j] for j in fy]
                + [spec.carry_types[j] for j in fc])
    windows = ([(0, t.size) for t in spec.carry_types] + spec.windows
               + [(0, spec.y_types[j].size) for j in fy]
               + [(0, spec.carry_types[j].size) for j in fc])
    new = LoopSpec("scan", body_b.name, body=body_b, carry_types=carry_types,
                   xs_types=xs_types, windows=windows,
                   y_types=[spec.xs_types[j] for j in fs], length=spec.length,
                   index=spec.index, reverse=not spec.reverse if spec.op == "scan" else True,
                   has_trip=spec.has_trip or spec.op == "while_loop")
    info = {"fc": fc, "fy": fy, "fb": fb, "fs": fs}
    spec._derived["vjp"] = (new, info)
    return new, info


def _window_indices(spec, j: int, operand: Expr) -> np.ndarray:
    start, stride = spec.windows[j]
    size = spec.xs_types[j].size
    k = np.arange(spec.length, dtype=np.int64)[:, None]
    return (start + k * stride + np.arange(size, dtype=np.int64)[None, :]).reshape(-1)


def loop_vjp(gs: Dict[int, Expr], node):
    """The reverse rule of loops: ``gs`` maps output numbers to adjoints (every
    output of the loop used by the differentiated graph, reversed together)."""
    spec = node.attrs["spec"]
    if spec.recompute is not None:
        return checkpointed_vjp(gs, node, loop_vjp)
    _check_reverse(spec)
    new, info = backward_spec(spec)
    ops, nc = node.operands, spec.n_carry
    pos = nc + (1 if spec.has_trip else 0) if spec.op == "scan" else nc
    xs = ops[pos:]
    primal = spec.nodes(ops)
    fc, fy, fb, fs = info["fc"], info["fy"], info["fb"], info["fs"]
    L = spec.length
    gc = [gs.get(j, zeros(spec.carry_types[j].shape)) for j in fc]
    gp = [zeros(spec.xs_types[j].shape) for j in fb]
    gy = [gs.get(nc + j, zeros((L,) + spec.y_types[j].shape)) for j in fy]
    gt = [gs.get(spec.traj_offset + j) for j in fc]
    # checkpointed, first order: one zero per carry, not a stacked zero of length L
    zero_gt = len(fc) if spec.checkpoints is not None and all(g is None for g in gt) else 0
    gt = [zeros((() if zero_gt else (L,)) + spec.carry_types[j].shape) if g is None else g
          for j, g in zip(fc, gt)]
    trip = ([ops[nc]] if spec.has_trip and spec.op == "scan" else
            [primal[nc]] if spec.op == "while_loop" else [])
    traj = primal[spec.traj_offset:spec.traj_offset + nc]
    if spec.checkpoints is not None:          # the initial carries instead of traj
        stored = [] if spec.snapshot_output is None else [primal[spec.snapshot_output]]
        back = checkpointed_spec(spec, new, zero_gt).nodes(gc + gp + trip + list(ops[:nc])
                                                           + list(xs) + gy + gt + stored)
    else:
        back = new.nodes(gc + gp + trip + traj + list(xs) + gy + gt)
    out: List[Optional[Expr]] = [None] * len(ops)
    for i, j in enumerate(fc):
        out[j] = back[i]
    for i, j in enumerate(fb):
        out[pos + j] = _to_operand(back[len(fc) + i], spec.windows[j][0], xs[j])
    for i, j in enumerate(fs):
        stacked = back[new.n_carry + i]                    # (length,) + leaf shape
        operand = xs[j]
        start, stride = spec.windows[j]
        if start == 0 and stride == spec.xs_types[j].size and \
                operand.size == spec.length * stride:
            out[pos + j] = reshape(stacked, operand.shape)
        else:
            out[pos + j] = scatter(stacked, _window_indices(spec, j, operand), operand.shape)
    return out


def _to_operand(adj: Expr, start: int, operand: Expr) -> Expr:
    """The adjoint of a parameter passed whole (or one fixed window) as a
    contribution to the operand it was read from."""
    if start == 0 and adj.size == operand.size:
        return adj if adj.shape == operand.shape else reshape(adj, operand.shape)
    return scatter(adj, np.arange(start, start + adj.size), operand.shape)


# ---------------------------------------------------------------------------
# branches and custom derivatives
# ---------------------------------------------------------------------------

def _branch_derivative(spec, kind: str):
    cached = spec._derived.get(kind)
    if cached is not None:
        return cached
    branches, fin, fout = [], None, None
    for fn in spec.branches:
        ins, outs = fn.inputs, fn.expanded_outputs()
        fin, fout = floats(ins), floats(outs)
        taken = names_of(fn)
        if kind == "jvp":
            tin = new_inputs("tan_", [ins[j] for j in fin], taken)
            touts = forward_tangents(outs, {ins[j].id: t for j, t in zip(fin, tin)})
            outputs = [(n, e) for n, e in zip(fn.output_names, outs)]
            outputs += [(fresh(f"tan_{fn.output_names[j]}", taken),
                         zero_if_none(touts[j], outs[j].type)) for j in fout]
            branches.append(make_function(f"{fn.name}_fwd", list(ins) + tin, outputs))
        else:
            gin = new_inputs("adj_", [outs[j] for j in fout], taken,
                              [fn.output_names[j] for j in fout])
            weights = [None] * len(outs)
            for j, w in zip(fout, gin):
                weights[j] = w
            adj = reverse_adjoints_many(outs, weights, [ins[j] for j in fin])
            outputs = [(fresh(f"adj_{ins[j].attrs['name']}", taken), a)
                       for j, a in zip(fin, adj)]
            branches.append(make_function(f"{fn.name}_rev", list(ins) + gin, outputs))
    fn0 = branches[0]
    new = LoopSpec("cond", fn0.name, branches=branches,
                   xs_types=[n.type for n in fn0.inputs], out_types=[n.type for n in fn0.outputs])
    spec._derived[kind] = (new, fin, fout)
    return spec._derived[kind]


def cond_jvp(ts, node):
    spec = node.attrs["spec"]
    new, fin, fout = _branch_derivative(spec, "jvp")
    k = node.attrs["output"]
    if k not in fout:
        return None
    ops = node.operands
    tin = [zero_if_none(ts[1 + j], ops[1 + j].type) for j in fin]
    return new.nodes(list(ops) + tin)[len(spec.out_types) + fout.index(k)]


def cond_vjp(gs: Dict[int, Expr], node):
    spec = node.attrs["spec"]
    new, fin, fout = _branch_derivative(spec, "vjp")
    ops = node.operands
    weights = [gs.get(j, zeros(spec.out_types[j].shape)) for j in fout]
    back = new.nodes(list(ops) + weights)
    out: List[Optional[Expr]] = [None] * len(ops)
    for i, j in enumerate(fin):
        out[1 + j] = back[i]
    return out


def _inline(fn, operands) -> List[Expr]:
    return substitute(fn.expanded_outputs(), {i.id: o for i, o in zip(fn.inputs, operands)})


def custom_jvp(ts, node):
    spec, k, ops = node.attrs["spec"], node.attrs["output"], node.operands
    if spec.custom_forward is None:          # forward mode stores nothing: the graph
        fn = spec.body
        seeds = {i.id: t for i, t in zip(fn.inputs, ts) if t is not None}
        t = forward_tangents([fn.expanded_outputs()[k]], seeds)[0]
        if t is None:
            return None
        return substitute([t], {i.id: o for i, o in zip(fn.inputs, ops)})[0]
    tin = [zero_if_none(t, o.type) for t, o in zip(ts, ops)]
    return _inline(spec.custom_forward, list(ops) + tin)[k]


def custom_vjp(gs: Dict[int, Expr], node):
    spec, ops = node.attrs["spec"], node.operands
    weights = [gs.get(j, zeros(t.shape)) for j, t in enumerate(spec.out_types)]
    if spec.custom_reverse is None:
        fn = spec.body
        adj = reverse_adjoints_many(fn.expanded_outputs(), weights, fn.inputs)
        return substitute(adj, {i.id: o for i, o in zip(fn.inputs, ops)})
    return _inline(spec.custom_reverse, list(ops) + weights)


# ---------------------------------------------------------------------------
# the op table entries
# ---------------------------------------------------------------------------

def _loop_infer(operands, attrs) -> TensorType:
    return attrs["spec"].out_types[attrs["output"]]


def _one_output(group_rule):
    """The op table's ``vjp(g, node)``: the group rule for one output."""
    return lambda g, node: group_rule({node.attrs["output"]: g}, node)


for _op, _vjp, _jvp in (("scan", loop_vjp, loop_jvp), ("while_loop", loop_vjp, loop_jvp),
                        ("cond", cond_vjp, cond_jvp), ("custom_call", custom_vjp, custom_jvp)):
    # on the tape, each output of a loop is a pick of the loop node's result
    register(_op, _loop_infer, eval_fn, vjp=_one_output(_vjp), jvp=_jvp, prim=pick_p,
             own="a control op: its rules differentiate the body Function")
    GROUP_VJPS[_op] = _vjp
register("print", lambda ops, a: ops[0].type, print_fn,
         vjp=lambda g, n: [g], jvp=lambda ts, n: ts[0], jvp_many=lambda ts, n, k: ts[0],
         prim=print_p, own="the identity: its rules pass the tangent on")
