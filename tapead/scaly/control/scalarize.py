"""A small Function as scalar operations on the elements of its arrays.

``scalarize(fn)`` rewrites a float64 Function whose graph uses elementwise
arithmetic, reductions, indexing, stacking, reshapes, transposes and matrix
products into a Function of one scalar input per input element and one
scalar output per output element: every array op becomes the scalar ops on
its elements.  Its tape is then all scalar nodes, which a loop runs step
after step in C (``_core.scalar_scan``; see ``tapead.scaly.control.lowering``).
A graph with any other op (a nested loop, a print, a comparison), a
non-float value (but a step number, see ``as_float``) or more than
``SCALAR_LIMIT`` scalar nodes is not rewritten
(``None``): the loop then steps the Function's own tape from Python.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from tapead.scaly.expr import Expr, apply, const, sym
from tapead.scaly.graphs import topo_order
from tapead.scaly.types import dtypes
from tapead.scaly.control.spec import fresh, make_function

#: the most scalar nodes a rewritten graph may have
SCALAR_LIMIT = 4096

_ELEMENTWISE = frozenset(("add", "sub", "mul", "div", "pow", "neg", "sin", "cos", "tan",
                          "exp", "log", "sqrt", "tanh", "abs", "sign"))


def _positions(node: Expr, shape) -> np.ndarray:
    """Flat positions of ``node``'s elements broadcast to ``shape``."""
    idx = np.arange(node.size, dtype=np.int64).reshape(node.shape)
    return np.broadcast_to(idx, shape).reshape(-1)


def _total(terms: List[Expr]) -> Expr:
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _elements(node: Expr, ops: List[List[Expr]]) -> Optional[List[Expr]]:
    """The scalar expressions of ``node``'s elements (C order), or None."""
    op, a = node.op, node.attrs
    if op == "const":
        return [const(v) for v in np.asarray(a["value"]).reshape(-1)]
    if op in _ELEMENTWISE:
        where = [_positions(o, node.shape) for o in node.operands]
        return [apply(op, *[e[w[i]] for e, w in zip(ops, where)]) for i in range(node.size)]
    x = ops[0] if ops else None
    if op in ("reshape",):
        return list(x)
    if op == "gather":
        return [x[i] for i in a["indices"]]
    if op == "scatter":
        out: List[Optional[Expr]] = [None] * node.size
        for j, i in enumerate(a["indices"]):
            out[i] = x[j] if out[i] is None else out[i] + x[j]
        return [const(0.0) if e is None else e for e in out]
    if op == "sum":
        src = node.operands[0]
        idx = np.arange(src.size, dtype=np.int64).reshape(src.shape)
        keep = [d for d in range(src.ndim) if d not in a["axes"]]
        idx = np.transpose(idx, keep + list(a["axes"])).reshape(node.size, -1)
        return [_total([x[i] for i in row]) if len(row) else const(0.0) for row in idx]
    if op == "stack":
        parts = [np.arange(o.size, dtype=np.int64).reshape(o.shape) + sum(
            p.size for p in node.operands[:k]) for k, o in enumerate(node.operands)]
        flat = [e for es in ops for e in es]
        return [flat[i] for i in np.stack(parts, axis=a["axis"]).reshape(-1)]
    if op == "transpose":
        src = node.operands[0]
        idx = np.transpose(np.arange(src.size).reshape(src.shape), a["axes"]).reshape(-1)
        return [x[i] for i in idx]
    if op == "matmul":
        u, v = node.operands
        A = np.arange(u.size).reshape(u.shape if u.ndim == 2 else (1,) + u.shape)
        B = np.arange(v.size).reshape(v.shape if v.ndim == 2 else v.shape + (1,))
        xs, ys = ops
        return [_total([xs[A[i, k]] * ys[B[k, j]] for k in range(A.shape[1])])
                for i in range(A.shape[0]) for j in range(B.shape[1])]
    return None


def scalarize(fn, as_float: Sequence[int] = ()) -> Optional[object]:
    """``fn`` with one scalar input per input element and one scalar output per
    output element (inputs, then outputs, in order, C order within each), or
    None when its graph cannot be rewritten (see the module docstring).

    ``as_float``: ids of int64 scalar inputs (a loop's step number) taken as
    float64 values, which is exact when every op that reads them computes in
    float64 (any other use leaves the graph as it is: None).
    """
    outputs = fn.simplified_outputs()
    floats = set(as_float)
    if any(n.dtype != dtypes.float64 and not (n.id in floats and n.shape == ())
           for n in fn.inputs) or any(y.dtype != dtypes.float64 for y in outputs):
        return None
    taken = set(fn.input_names) | set(fn.output_names)
    elems: Dict[int, List[Expr]] = {}
    inputs: List[Expr] = []
    for node in fn.inputs:
        if node.id in floats:
            scalars = [sym(fresh(f"{node.attrs['name']}_value", taken), ())]
        elif node.shape == ():
            scalars = [node]
        else:
            name = node.attrs["name"]
            scalars = [sym(fresh(f"{name}_{i}", taken), ()) for i in range(node.size)]
        elems[node.id] = scalars
        inputs.extend(scalars)
    count = 0
    for node in topo_order(outputs):
        if node.id in elems:
            continue
        if node.op == "input" or node.dtype != dtypes.float64:
            return None
        values = _elements(node, [elems[o.id] for o in node.operands])
        if values is None:
            return None
        count += len(values)
        if count > SCALAR_LIMIT:
            return None
        elems[node.id] = values
    named = [(fresh(f"{leaf}_{i}", taken), e) for leaf, y in zip(fn.output_names, outputs)
             for i, e in enumerate(elems[y.id])]
    return make_function(f"{fn.name}_scalar", inputs, named)
