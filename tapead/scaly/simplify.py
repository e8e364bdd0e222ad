"""Algebraic simplification of expression graphs, run before evaluation.

One bottom-up rewrite (repeated until nothing changes, at most a few
times): constant folding, neutral elements (``x * 1 -> x``, ``x + 0 -> x``),
annihilators (``x * 0 -> 0``; like CasADi this drops a NaN of ``x``),
``a + a -> 2 * a``, double negation, identity gathers and reshapes.  Nodes
that no output reaches are dropped because only reachable nodes are
rebuilt.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from tapead.scaly.expr import OPS, Expr, apply, const, is_const, zeros
from tapead.scaly.graphs import rebuild, same_op

_MAX_PASSES = 4
#: ops never folded into constants: evaluating them has effects (prints) or
#: runs Functions (loops, branches), which happens when the program runs
NO_FOLD = frozenset(("print", "scan", "while_loop", "cond", "custom_call"))


def _keeps_shape(x: Expr, node: Expr) -> bool:
    return x.shape == node.shape and x.dtype == node.dtype


def _fold(node: Expr, operands: Tuple[Expr, ...]) -> Expr:
    values = [o.attrs["value"] for o in operands]
    with np.errstate(all="ignore"):
        out = OPS[node.op].fn(*values, **node.attrs)
    return const(np.asarray(out, dtype=node.dtype))


def _rewrite(node: Expr, operands: Tuple[Expr, ...]) -> Expr:
    """One node's simplification, its operands already simplified."""
    op = node.op
    if op in ("input", "const"):
        return node
    node = same_op(node, operands)
    if op in NO_FOLD:
        return node
    if all(o.op == "const" for o in operands):
        return _fold(node, operands)
    a = operands[0]
    b = operands[1] if len(operands) > 1 else None
    if op == "mul":
        for x, y in ((a, b), (b, a)):
            if is_const(x, 1.0) and _keeps_shape(y, node):
                return y
            if is_const(x, 0.0):
                return zeros(node.shape, node.dtype)
    elif op == "add":
        for x, y in ((a, b), (b, a)):
            if is_const(x, 0.0) and _keeps_shape(y, node):
                return y
        if a is b:
            return apply("mul", const(np.asarray(2.0, a.dtype)), a)
    elif op == "sub":
        if is_const(b, 0.0) and _keeps_shape(a, node):
            return a
        if is_const(a, 0.0) and _keeps_shape(b, node):
            return -b
        if a is b:
            return zeros(node.shape, node.dtype)
    elif op == "div":
        if is_const(b, 1.0) and _keeps_shape(a, node):
            return a
        if is_const(a, 0.0):
            return zeros(node.shape, node.dtype)
    elif op == "neg":
        if a.op == "neg":
            return a.operands[0]
    elif op == "pow":
        if is_const(b, 1.0) and _keeps_shape(a, node):
            return a
        if is_const(b, 2.0) and _keeps_shape(a, node):
            return a * a
    elif op == "gather":
        idx = node.attrs["indices"]
        if node.shape == a.shape and idx == tuple(range(a.size)):
            return a
        if a.op == "gather":
            inner = a.attrs["indices"]
            return apply("gather", a.operands[0], indices=tuple(inner[i] for i in idx),
                         shape=node.attrs["shape"])
    elif op == "reshape":
        if a.shape == node.shape:
            return a
        if a.op == "reshape":
            return apply("reshape", a.operands[0], shape=node.attrs["shape"])
    elif op == "sum":
        if not node.attrs["axes"]:
            return a
    return node


def simplify(outputs: Sequence[Expr]) -> List[Expr]:
    """Simplified versions of ``outputs`` (new interned nodes; inputs kept).

    Parameters
    ----------
    outputs : sequence of Expr

    Returns
    -------
    list of Expr
        One per output, the same shapes and values.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> sc.simplify([x * 1.0 + x * 1.0])          # x * 1 -> x, x + x -> 2 * x
    [<sc.Expr expr.mul : tensor<3xfloat64 diff>>]
    """
    current = list(outputs)
    for _ in range(_MAX_PASSES):
        new = rebuild(current, _rewrite)
        if all(x is y for x, y in zip(new, current)):
            break
        current = new
    return current
