"""Batched forward rules (``jvp_many``) of loop and branch nodes.

A batched forward pass carries ``k`` directions as a leading axis on every
tangent.  Through a loop this is one *batched tangent loop*: its carries are
the primal carries followed by their tangents of shape ``(k,) + carry
shape``, and its body is the body's batched forward derivative, so the
primal steps run once for all ``k`` directions (a Hessian or Jacobian with
several colors costs one loop, not one per direction).

Per-step inputs are handed to the tangent loop laid out step by step: the
tangent of a sliced input, ``(k, length, ...)``, becomes ``(length, k, ...)``
(a transpose), a window's is gathered into that layout; stacked outputs and
trajectories come back as ``(length, k, ...)`` and are transposed to
``(k, length, ...)``.  These rules are added to the op-table entries of
``tapead.scaly.control.rules``.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from tapead.scaly.control import rules  # noqa: F401  (registers the entries extended here)
from tapead.scaly.control.checkpoints import checkpointed_jvp
from tapead.scaly.control.spec import (LoopSpec, floats, fresh, make_function, names_of,
                                       step_parts)
from tapead.scaly.derivatives import forward_tangents_many
from tapead.scaly.expr import OPS, Expr, gather, reshape, stack, sym, zeros
from tapead.scaly.graphs import substitute
from tapead.scaly.ops import transpose
from tapead.scaly.types import TensorType


def _batched(ttype: TensorType, k: int) -> TensorType:
    return TensorType((k,) + ttype.shape, ttype.dtype)


def _swap(x: Expr) -> Expr:
    """Exchange the two leading axes."""
    return transpose(x, (1, 0) + tuple(range(2, x.ndim)))


def _zeros_or(t: Optional[Expr], shape) -> Expr:
    return zeros(shape) if t is None else t


# ---------------------------------------------------------------------------
# scan and while_loop
# ---------------------------------------------------------------------------

def batched_tangent_spec(spec, k: int) -> Tuple[LoopSpec, dict]:
    """The batched tangent loop of a scan or while loop for ``k`` directions."""
    key = ("jvp_many", k)
    cached = spec._derived.get(key)
    if cached is not None:
        return cached
    carries, idx, xs, c_out, ys = step_parts(spec)
    fc, fx, fy = floats(carries), floats(xs), floats(ys)
    taken = names_of(spec.body) | (names_of(spec.cond) if spec.cond is not None else set())
    tc = [sym(fresh(f"tan_{carries[j].attrs['name']}", taken), _batched(carries[j].type, k))
          for j in fc]
    tx = [sym(fresh(f"tan_{xs[j].attrs['name']}", taken), _batched(xs[j].type, k))
          for j in fx]
    seeds = {carries[j].id: t for j, t in zip(fc, tc)}
    seeds.update({xs[j].id: t for j, t in zip(fx, tx)})
    touts = forward_tangents_many(list(c_out) + list(ys), seeds, k)
    inputs = list(carries) + tc + ([idx] if idx is not None else []) + list(xs) + tx
    onames, nc = spec.body.output_names, len(c_out)
    outputs = [(onames[j], c_out[j]) for j in range(nc)]
    outputs += [(fresh(f"tan_{onames[j]}", taken),
                 _zeros_or(touts[j], (k,) + c_out[j].shape)) for j in fc]
    outputs += [(onames[nc + j], ys[j]) for j in range(len(ys))]
    outputs += [(fresh(f"tan_{onames[nc + j]}", taken),
                 _zeros_or(touts[nc + j], (k,) + ys[j].shape)) for j in fy]
    body_t = make_function(f"{spec.body.name}_fwd{k}", inputs, outputs)
    cond_t = None
    if spec.op == "while_loop":
        cond_t = make_function(f"{spec.cond.name}_fwd{k}", inputs,
                               [(spec.cond.output_names[0], spec.cond.expanded_outputs()[0])])
    windows = spec.windows + [(0, 0) if spec.windows[j][1] == 0
                              else (0, k * spec.xs_types[j].size) for j in fx]
    new = LoopSpec(spec.op, body_t.name, body=body_t, cond=cond_t,
                   carry_types=spec.carry_types + [_batched(spec.carry_types[j], k)
                                                   for j in fc],
                   xs_types=spec.xs_types + [_batched(spec.xs_types[j], k) for j in fx],
                   windows=windows,
                   y_types=spec.y_types + [_batched(spec.y_types[j], k) for j in fy],
                   length=spec.length, index=spec.index, reverse=spec.reverse,
                   has_trip=spec.has_trip)
    info = {"fc": fc, "fx": fx, "fy": fy}
    spec._derived[key] = (new, info)
    return new, info


def _per_step(spec, j: int, t: Expr, operand: Expr, k: int) -> Expr:
    """The batched tangent ``(k,) + operand.shape`` of xs entry ``j`` in the
    layout of the batched tangent loop."""
    start, stride = spec.windows[j]
    leaf = spec.xs_types[j]
    size, L = leaf.size, spec.length
    if stride == 0:
        if start == 0 and operand.size == size:
            return t if t.shape == (k,) + leaf.shape else reshape(t, (k,) + leaf.shape)
        idx = (np.arange(k)[:, None] * operand.size + start + np.arange(size)[None, :])
        return gather(t, idx.reshape(-1), (k,) + leaf.shape)
    if start == 0 and stride == size and operand.size == L * size:
        return _swap(reshape(t, (k, L, size)))
    s, d, i = np.ix_(np.arange(L), np.arange(k), np.arange(size))
    idx = d * operand.size + start + s * stride + i
    return gather(t, idx.reshape(-1), (L, k, size))


def loop_jvp_many(ts, node, k: int):
    spec = node.attrs["spec"]
    if spec.recompute is not None:
        return checkpointed_jvp(ts, node, loop_jvp_many, k)
    new, info = batched_tangent_spec(spec, k)
    fc, fx, fy = info["fc"], info["fx"], info["fy"]
    out, nc = node.attrs["output"], spec.n_carry
    ops = node.operands
    pos = nc + (1 if spec.has_trip else 0)
    carries, xs = ops[:nc], ops[pos:]
    tcs = [_zeros_or(ts[j], (k,) + carries[j].shape) for j in fc]
    txs = [_per_step(spec, j, _zeros_or(ts[pos + j], (k,) + xs[j].shape), xs[j], k)
           for j in fx]
    nodes = new.nodes(list(carries) + tcs + list(ops[nc:pos]) + list(xs) + txs)
    ntc = len(fc)
    if out < nc:
        return nodes[nc + fc.index(out)] if out in fc else None
    ny = len(spec.y_types) if spec.op == "scan" else 0
    if out < nc + ny:
        j = out - nc
        return _swap(nodes[nc + ntc + ny + fy.index(j)]) if j in fy else None
    if spec.op == "while_loop" and out == nc:
        return None                               # the count
    j = out - spec.traj_offset
    return _swap(nodes[new.traj_offset + nc + fc.index(j)]) if j in fc else None


# ---------------------------------------------------------------------------
# cond and custom_call
# ---------------------------------------------------------------------------

def _batched_branches(spec, k: int):
    key = ("jvp_many", k)
    cached = spec._derived.get(key)
    if cached is not None:
        return cached
    branches, fin, fout = [], None, None
    for fn in spec.branches:
        ins, outs = fn.inputs, fn.expanded_outputs()
        fin, fout = floats(ins), floats(outs)
        taken = names_of(fn)
        tin = [sym(fresh(f"tan_{ins[j].attrs['name']}", taken), _batched(ins[j].type, k))
               for j in fin]
        touts = forward_tangents_many(outs, {ins[j].id: t for j, t in zip(fin, tin)}, k)
        outputs = list(zip(fn.output_names, outs))
        outputs += [(fresh(f"tan_{fn.output_names[j]}", taken),
                     _zeros_or(touts[j], (k,) + outs[j].shape)) for j in fout]
        branches.append(make_function(f"{fn.name}_fwd{k}", list(ins) + tin, outputs))
    first = branches[0]
    new = LoopSpec("cond", first.name, branches=branches,
                   xs_types=[n.type for n in first.inputs],
                   out_types=[n.type for n in first.outputs])
    spec._derived[key] = (new, fin, fout)
    return spec._derived[key]


def cond_jvp_many(ts, node, k: int):
    spec = node.attrs["spec"]
    new, fin, fout = _batched_branches(spec, k)
    out, ops = node.attrs["output"], node.operands
    if out not in fout:
        return None
    tin = [_zeros_or(ts[1 + j], (k,) + ops[1 + j].shape) for j in fin]
    return new.nodes(list(ops) + tin)[len(spec.out_types) + fout.index(out)]


def custom_jvp_many(ts, node, k: int):
    spec, out, ops = node.attrs["spec"], node.attrs["output"], node.operands
    if spec.custom_forward is None:               # the Function's own graph
        fn = spec.body
        seeds = {i.id: t for i, t in zip(fn.inputs, ts) if t is not None}
        t = forward_tangents_many([fn.expanded_outputs()[out]], seeds, k)[0]
        if t is None:
            return None
        return substitute([t], {i.id: o for i, o in zip(fn.inputs, ops)})[0]
    forward = spec.custom_forward
    pieces = []
    for d in range(k):                            # the given rule, once per direction
        tin = [zeros(o.shape) if t is None else t[d] for t, o in zip(ts, ops)]
        mapping = {i.id: v for i, v in zip(forward.inputs, list(ops) + tin)}
        pieces.append(substitute([forward.expanded_outputs()[out]], mapping)[0])
    return stack(pieces, axis=0)


OPS["scan"].jvp_many = loop_jvp_many
OPS["while_loop"].jvp_many = loop_jvp_many
OPS["cond"].jvp_many = cond_jvp_many
OPS["custom_call"].jvp_many = custom_jvp_many
