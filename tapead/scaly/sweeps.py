"""The two sweeps of the graph API: reverse adjoints and forward tangents.

Reverse mode walks the DAG from an output back to the inputs (reverse
topological order, no recursion), calling each op's ``vjp`` rule, which
creates new interned nodes; forward mode walks it from the inputs, calling
each op's ``jvp`` rule on tangent expressions (``jvp_many`` for a batch of
directions).  The results are ordinary expressions; the user-facing
transformations (``tapead.scaly.derivatives``) and the sparse derivatives
(``tapead.scaly.sparsity``) are built on these.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence

from tapead.errors import MissingRuleError
from tapead.errors import LayoutError
from tapead.scaly.expr import OPS, Expr, apply, ones, reshape, stack, zeros
from tapead.scaly.graphs import topo_order
from tapead.scaly.function import Function
from tapead.scaly.types import dtypes


# ---------------------------------------------------------------------------
# the two sweeps
# ---------------------------------------------------------------------------

def unbroadcast(c: Expr, shape) -> Expr:
    """Sum a broadcast contribution back down to ``shape``."""
    if c.shape == tuple(shape):
        return c
    lead = c.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and c.shape[lead + i] != 1)
    out = apply("sum", c, axes=axes) if axes else c
    return out if out.shape == tuple(shape) else reshape(out, shape)


def reverse_adjoints(output: Expr, weight: Expr, wrt: Sequence[Expr]) -> List[Expr]:
    """``weight``-weighted adjoints of ``output`` with respect to ``wrt`` nodes.

    Visits the nodes from the output back to the inputs once each; a node's
    contributions are added left to right (``add(c1, c2)``), so two equal
    contributions are one interned node added to itself.
    """
    return reverse_adjoints_many([output], [weight], wrt)


#: op name -> ``rule(adjoints, node)`` for ops with one node per output that
#: share one computation (loops, branches; ``tapead.scaly.control.rules``):
#: ``adjoints`` maps output numbers to their adjoints, and the rule returns one
#: contribution per operand for all of them, so a loop whose outputs are used
#: several times is reversed once.
GROUP_VJPS: Dict[str, Callable] = {}

#: op name -> ``rule(g, node, wanted)`` for ops whose reverse rule builds
#: something per operand that is worth skipping when no adjoint is asked of
#: it (a mapped call builds one stage adjoint Function per operand;
#: ``tapead.scaly.mapped``): ``wanted[j]`` says whether operand ``j`` leads to
#: a requested input.
MASKED_VJPS: Dict[str, Callable] = {}


def _live(order: Sequence[Expr], wrt: Sequence[Expr]) -> set:
    """Ids of the nodes of ``order`` (topological) that depend on a ``wrt`` node."""
    live = {x.id for x in wrt}
    for node in order:
        if node.id not in live and any(o.id in live for o in node.operands):
            live.add(node.id)
    return live


def _group_key(node: Expr):
    return (id(node.attrs["spec"]), tuple(o.id for o in node.operands))


def reverse_adjoints_many(outputs: Sequence[Expr], weights: Sequence[Optional[Expr]],
                          wrt: Sequence[Expr]) -> List[Expr]:
    """``reverse_adjoints`` of several outputs at once: the adjoints of
    ``sum_k <weights[k], outputs[k]>`` (a ``None`` weight is zero)."""
    adjoint: Dict[int, Expr] = {}
    for y, w in zip(outputs, weights):
        if w is not None:
            adjoint[y.id] = w if y.id not in adjoint else adjoint[y.id] + w
    order = topo_order(list(outputs))
    live = _live(order, wrt)
    # the sibling outputs of a grouped node are handled together at the first
    # of them in topological order: every user of every sibling comes later
    first: Dict[tuple, int] = {}
    for node in order:
        if node.op in GROUP_VJPS:
            first.setdefault(_group_key(node), node.id)
    pending: Dict[tuple, Dict[int, Expr]] = {}
    for node in reversed(order):
        g = adjoint.get(node.id)
        if node.op in GROUP_VJPS:
            key = _group_key(node)
            if g is not None and node.diff:
                pending.setdefault(key, {})[node.attrs["output"]] = g
            if node.id != first[key] or key not in pending:
                continue
            contributions = GROUP_VJPS[node.op](pending.pop(key), node)
        else:
            if (g is None or not node.diff or node.op in ("input", "const")
                    or node.id not in live):
                continue
            masked = MASKED_VJPS.get(node.op)
            rule = OPS[node.op]
            if rule.vjp is None and masked is None:
                raise MissingRuleError(f"Scaly op '{node.op}' has no reverse-mode (vjp) rule")
            contributions = (rule.vjp(g, node) if masked is None else
                             masked(g, node, [o.id in live for o in node.operands]))
        for operand, c in zip(node.operands, contributions):
            if c is None or not operand.diff or operand.id not in live:
                continue
            c = unbroadcast(c, operand.shape)
            prev = adjoint.get(operand.id)
            adjoint[operand.id] = c if prev is None else prev + c
    return [adjoint[x.id] if x.id in adjoint else zeros(x.shape) for x in wrt]


def forward_tangents(outputs: Sequence[Expr], seeds: Dict[int, Expr]) -> List[Optional[Expr]]:
    """Tangents of ``outputs`` given tangent expressions of some inputs.

    ``seeds`` maps input node ids to their tangents; ``None`` in the result
    is a known zero.
    """
    tangent: Dict[int, Expr] = dict(seeds)
    for node in topo_order(outputs):
        if node.id in tangent or not node.diff or node.op in ("input", "const"):
            continue
        ts = [tangent.get(o.id) if o.diff else None for o in node.operands]
        if all(t is None for t in ts):
            continue
        rule = OPS[node.op]
        if rule.jvp is None:
            raise MissingRuleError(f"Scaly op '{node.op}' has no forward-mode (jvp) rule")
        t = rule.jvp(ts, node)
        if t is not None:
            if t.shape != node.shape:
                t = t * ones(node.shape)
            tangent[node.id] = t
    return [tangent.get(y.id) for y in outputs]


STRICT_JVP_MANY_VARS = ("TAPEAD_STRICT_JVP_MANY", "SCALY_STRICT_JVP_MANY")


def strict_jvp_many() -> bool:
    """Whether a missing batched rule is an error (``TAPEAD_STRICT_JVP_MANY=1``,
    or Scaly's own name ``SCALY_STRICT_JVP_MANY``)."""
    return any(os.environ.get(v, "").strip() not in ("", "0") for v in STRICT_JVP_MANY_VARS)


def _per_direction(rule, ts, node: Expr, k: int) -> Optional[Expr]:
    """The fallback for an op without a batched rule: ``jvp`` once per direction."""
    if strict_jvp_many():
        raise MissingRuleError(
            f"Scaly op '{node.op}' has no batched forward rule (jvp_many), so a batched "
            f"forward pass would fall back to {k} passes, one per direction; "
            f"{STRICT_JVP_MANY_VARS[0]} is set, which makes this an error. Give the op a "
            "jvp_many rule or unset the variable")
    outs = []
    for j in range(k):
        t = rule.jvp([None if t is None else t[j] for t in ts], node)
        if t is None:
            t = zeros(node.shape)
        elif t.shape != node.shape:
            t = t * ones(node.shape)
        outs.append(t)
    return stack(outs, axis=0)


def forward_tangents_many(outputs: Sequence[Expr], seeds: Dict[int, Expr],
                          k: int) -> List[Optional[Expr]]:
    """Batched tangents: ``k`` directions as a leading axis on every tangent.

    ``seeds`` maps input node ids to tangents of shape ``(k,) + input.shape``;
    each result is ``(k,) + output.shape`` (``None`` is a known zero).  Each
    op's ``jvp_many`` rule builds the direction-independent partials once;
    an op without one falls back to one ``jvp`` per direction (an error when
    ``TAPEAD_STRICT_JVP_MANY`` is set).
    """
    tangent: Dict[int, Expr] = dict(seeds)
    for node in topo_order(outputs):
        if node.id in tangent or not node.diff or node.op in ("input", "const"):
            continue
        ts = [tangent.get(o.id) if o.diff else None for o in node.operands]
        if all(t is None for t in ts):
            continue
        rule = OPS[node.op]
        if rule.jvp is None and rule.jvp_many is None:
            raise MissingRuleError(f"Scaly op '{node.op}' has no forward-mode (jvp) rule")
        if rule.jvp_many is not None:
            t = rule.jvp_many(ts, node, k)
        else:
            t = _per_direction(rule, ts, node, k)
        if t is not None:
            shape = (k,) + node.shape
            if t.shape != shape:
                t = t * ones(shape)
            tangent[node.id] = t
    return [tangent.get(y.id) for y in outputs]


def pick(f: Function, out: str, inp: str):
    """The output ``out`` (ordinary calls expanded, mapped calls kept) and the
    input ``inp`` of ``f``, checked to be differentiable."""
    if not isinstance(f, Function):
        raise TypeError(f"expected an sc.Function (made with @sc.function), got {f!r}")
    f.closed("a derivative")
    f.output(out)                         # checks the name
    y, x = f.mapped_outputs()[f.output_names.index(out)], f.input(inp)
    if x.dtype != dtypes.float64:
        raise LayoutError(f"function {f.name}: input '{inp}' is {x.type.dtype_name}, which "
                          "has no derivative; differentiate with respect to a float64 input")
    if y.dtype != dtypes.float64:
        raise LayoutError(f"function {f.name}: output '{out}' is {y.type.dtype_name}, which "
                          "has no derivative")
    return y, x
