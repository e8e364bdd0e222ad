"""Call nodes: a Function used inside another Function's graph.

Calling a Function on expressions builds one ``expr.call`` node per output
of the callee (``{callee="g", output=k}``); ``sc.vmap(stage, n, inputs)``
(``tapead.scaly.mapped``) builds one ``expr.vmap`` node per output of the
stage Function, applied to ``n`` windows of its inputs, whose argument rules
(``sc.broadcast``, ``sc.window``, ``(array, start, stride)``) live here as
``sc.scan`` shares them.  The callee stays a separate Function: listings
print it as its own ``expr.func``, and its graph is shared, not copied, by
every call.

Before a graph is differentiated or analysed for sparsity, its ordinary
calls are *expanded*: the callee's outputs are substituted into the caller
with its inputs replaced by the call's arguments.  For reverse mode this is
Scaly's rule that "the adjoint of a call is inlined".  Mapped calls stay
mapped there: their derivatives are mapped calls of stage derivative
Functions (``tapead.scaly.mapped``).  Evaluation expands mapped calls too
(one copy of the stage per stage; nodes are interned, so stages that
compute the same thing share them).  Expansion is a loop over nesting
levels, not a recursion.
"""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from tapead.scaly import layout as lay
from tapead.errors import LayoutError, ScalyShapeError
from tapead.scaly.expr import Expr, as_expr, gather, make_node, reshape, stack
from tapead.scaly.graphs import rebuild, same_op, substitute, topo_order
from tapead.scaly.ops import register
from tapead.scaly.types import TensorType

CALL_OPS = ("call", "vmap")
#: ops whose node calls Functions that stay separate (loops, branches, custom
#: derivatives; ``tapead.scaly.control``): never expanded, listed as callees
LOOP_OPS = ("scan", "while_loop", "cond", "custom_call")


class broadcast:  # noqa: N801  (Scaly's name)
    """``sc.broadcast(p)``: pass the whole of ``p`` to every stage or step.

    An entry of ``sc.vmap``'s inputs or ``sc.scan``'s ``xs``; ``p`` (an
    expression or array) has the size of the parameter it feeds.
    
    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()), sc.arg("w", 3))
    ... def acc(x, w):
    ...     return x + w.sum()
    >>> @sc.function(sc.arg("w", 3), outputs=sc.arg("y", ()))
    ... def f(w):
    ...     return sc.scan(acc, sc.const(0.0), (sc.broadcast(w),), length=4)[0]
    >>> print(f(np.array([1.0, 2.0, 3.0])))
    24.0
    """

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"sc.broadcast({self.value!r})"


class window:  # noqa: N801  (Scaly's name)
    """``sc.window(outer, start, stride)``: stage (step) ``k`` reads the
    contiguous elements ``start + k * stride ...`` of the flat ``outer``, as
    many as the parameter it feeds declares.

    Parameters
    ----------
    outer : expression or array
        Read flat (C order); windows may overlap.
    start, stride : int
        Non-negative; ``stride=0`` gives every stage the same window.
    
    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()), sc.arg("zz", 2))
    ... def pair(x, zz):
    ...     return x + zz[0] * zz[1]
    >>> @sc.function(sc.arg("z", 5), outputs=sc.arg("y", ()))
    ... def g(z):
    ...     return sc.scan(pair, sc.const(0.0), (sc.window(z, 0, 1),), length=4)[0]
    >>> print(g(np.arange(5.0)))          # 0*1 + 1*2 + 2*3 + 3*4
    20.0
    """

    __slots__ = ("outer", "start", "stride")

    def __init__(self, outer, start: int, stride: int):
        self.outer, self.start, self.stride = outer, start, stride

    def __repr__(self) -> str:
        return f"sc.window({self.outer!r}, {self.start!r}, {self.stride!r})"


# ---------------------------------------------------------------------------
# the call op (``expr.vmap``, the mapped call, lives in tapead.scaly.mapped)
# ---------------------------------------------------------------------------

def _call_infer(operands, attrs) -> TensorType:
    return attrs["fn"].outputs[attrs["output"]].type


def _call_fn(*values, fn, callee, output):
    """Evaluate the callee on numbers (constant folding of a call)."""
    return fn.evaluate([np.asarray(v) for v in values])[output]


# Calls are expanded before any derivative rule could run, so they have none.
register("call", _call_infer, _call_fn)


def call_nodes(fn, args: Sequence[Any]) -> List[Expr]:
    """One ``call`` node per output of ``fn`` on the expressions ``args``."""
    operands = []
    for leaf, node, value in zip(fn.input_leaves, fn.inputs, args):
        e = as_expr(value, node)
        if e.shape != leaf.type.shape:
            raise ScalyShapeError(
                f"function {fn.name}: input '{leaf.name}' expects shape "
                f"{leaf.type.shape}, got an expression of shape {e.shape}")
        if e.dtype != node.dtype:
            raise LayoutError(f"function {fn.name}: input '{leaf.name}' expects "
                              f"{node.type.dtype_name}, got {e.type.dtype_name}")
        operands.append(e)
    return [make_node("call", operands, {"callee": fn.name, "fn": fn, "output": k})
            for k in range(len(fn.outputs))]


# ---------------------------------------------------------------------------
# the argument rules of mapped calls and loops
# ---------------------------------------------------------------------------

def _spec(spec: Any, leaf: lay.Leaf, n: int, where: str):
    """(expression, start, stride) of one mapped input."""
    size = leaf.type.size
    if isinstance(spec, broadcast):
        e = as_expr(spec.value)
        if e.size != size:
            raise ScalyShapeError(f"{where}: input '{leaf.name}' has {size} element(s), so "
                                  f"sc.broadcast needs an expression of {size} elements, "
                                  f"got shape {e.shape}")
        return e, 0, 0
    if isinstance(spec, window):
        spec = (spec.outer, spec.start, spec.stride)
    if isinstance(spec, tuple):
        if len(spec) != 3:
            raise LayoutError(f"{where}: a window input is (array, start, stride), got a "
                              f"tuple of {len(spec)} items")
        e, start, stride = spec
        e = as_expr(e)
        for what, v in (("start", start), ("stride", stride)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise LayoutError(f"{where}: the window {what} of input '{leaf.name}' must "
                                  f"be a non-negative int, got {v!r}")
        start, stride = int(start), int(stride)
        last = start + (n - 1) * stride + size
        if n > 0 and last > e.size:
            raise ScalyShapeError(
                f"{where}: input '{leaf.name}' reads a window of {size} element(s) from "
                f"{start} with stride {stride} over {n} stages, up to element {last - 1}, "
                f"but the array has only {e.size} elements")
        return e, start, stride
    e = as_expr(spec)
    if e.size == n * size:
        return e, 0, size                      # stage k reads the k-th slice
    if e.size == size:
        return e, 0, 0                         # every stage reads the whole input
    raise ScalyShapeError(
        f"{where}: input '{leaf.name}' has {size} element(s) per stage, so a mapped input "
        f"must have {n} x {size} = {n * size} elements (one slice per stage) or {size} "
        f"(shared by every stage), got shape {e.shape}; pass (array, start, stride) for "
        "overlapping windows")


# ---------------------------------------------------------------------------
# expansion
# ---------------------------------------------------------------------------

def _expand_call(node: Expr, operands) -> Expr:
    fn = node.attrs["fn"]
    mapping = {inp.id: arg for inp, arg in zip(fn.inputs, operands)}
    return substitute([fn.outputs[node.attrs["output"]]], mapping)[0]


def _expand_vmap(node: Expr, operands) -> Expr:
    a = node.attrs
    fn = a["fn"]
    y = fn.outputs[a["output"]]
    stages = []
    for k in range(a["length"]):
        mapping = {}
        for inp, leaf, e, start, stride in zip(fn.inputs, fn.input_leaves, operands,
                                               a["starts"], a["strides"]):
            first = start + k * stride
            size = leaf.type.size
            if first == 0 and size == e.size:
                arg = e if e.shape == leaf.type.shape else reshape(e, leaf.type.shape)
            else:
                arg = gather(e, np.arange(first, first + size), leaf.type.shape)
            mapping[inp.id] = arg
        out = substitute([y], mapping)[0]
        stages.append(out if out.shape == (a["slice_size"],) else
                      reshape(out, (a["slice_size"],)))
    return reshape(stack(stages, axis=0), node.shape)


def expand_calls(outputs: Sequence[Expr], keep_mapped: Any = False) -> List[Expr]:
    """``outputs`` with every call and mapped call replaced by the callee's graph.

    Each pass expands the calls visible at one nesting level; callees that
    call other Functions leave new call nodes for the next pass.
    ``keep_mapped``: True keeps every mapped call (``expr.vmap``) as one node
    and expands the ordinary calls only (what the derivatives
    differentiate); a callable ``keep_mapped(node) -> bool`` keeps the mapped
    calls it accepts (what evaluation runs stage by stage in C).
    """
    keep = keep_mapped if callable(keep_mapped) else (lambda node: bool(keep_mapped))

    def pending(node: Expr) -> bool:
        return node.op == "call" or (node.op == "vmap" and not keep(node))

    def expand(node: Expr, operands) -> Expr:
        if node.op == "call":
            return _expand_call(node, operands)
        if node.op == "vmap" and not keep(node):
            return _expand_vmap(node, operands)
        return same_op(node, operands)

    outputs = list(outputs)
    while any(pending(node) for node in topo_order(outputs)):
        outputs = rebuild(outputs, expand)
    return outputs


#: ``keep(node) -> bool``: the mapped calls that evaluation keeps as one node
#: (set by ``tapead.scaly.mapped``); the others are expanded stage by stage
EVALUATION_KEEPS: List[Any] = [False]


def callees(outputs: Sequence[Expr]) -> list:
    """Functions called (directly or not) from ``outputs``, in first-use order."""
    found, seen = [], set()
    pending = [list(outputs)]
    while pending:
        for node in topo_order(pending.pop(0)):
            if node.op in CALL_OPS:
                fns = [node.attrs["fn"]]
            elif node.op in LOOP_OPS:
                fns = node.attrs["spec"].functions
            else:
                continue
            for fn in fns:
                if id(fn) not in seen:
                    seen.add(id(fn))
                    found.append(fn)
                    pending.append(fn.outputs)
    return found


__all__ = ["broadcast", "window", "expand_calls", "call_nodes", "callees",
           "CALL_OPS", "LOOP_OPS"]
