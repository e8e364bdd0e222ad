"""Call nodes: a Function used inside another Function's graph.

Calling a Function on expressions builds one ``expr.call`` node per output
of the callee (``{callee="g", output=k}``); ``sc.vmap(stage, n, inputs)``
builds one ``expr.vmap`` node per output of the stage Function, applied to
``n`` slices of its inputs.  The callee stays a separate Function: listings
print it as its own ``expr.func``, and its graph is shared, not copied, by
every call.

Before a graph is differentiated, analysed for sparsity or evaluated, its
calls are *expanded*: the callee's outputs are substituted into the caller
with its inputs replaced by the call's arguments.  For reverse mode this is
Scaly's rule that "the adjoint of a call is inlined"; since nodes are
interned, the n stages of an expanded ``vmap`` that compute the same thing
share their nodes.  Expansion is a loop over nesting levels, not a
recursion.  (Differentiating a mapped call into a mapped call of the stage
derivative is not done yet; today the stages are expanded.)
"""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly.errors import LayoutError, ScalyShapeError
from tapead.scaly.expr import (Expr, as_expr, gather, make_node, rebuild, reshape, same_op,
                               stack, substitute, topo_order)
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
# the two ops
# ---------------------------------------------------------------------------

def _call_infer(operands, attrs) -> TensorType:
    return attrs["fn"].outputs[attrs["output"]].type


def _call_fn(*values, fn, callee, output):
    """Evaluate the callee on numbers (constant folding of a call)."""
    return fn.evaluate([np.asarray(v) for v in values])[output]


def _vmap_infer(operands, attrs) -> TensorType:
    out = attrs["fn"].outputs[attrs["output"]].type
    return TensorType((attrs["length"] * attrs["slice_size"],), out.dtype)


def _vmap_fn(*values, fn, callee, length, output, slice_size, starts, strides):
    pieces = []
    for k in range(length):
        args = [_stage_slice(np.asarray(v), leaf, start + k * stride)
                for v, leaf, start, stride in zip(values, fn.input_leaves, starts, strides)]
        pieces.append(np.ravel(fn.evaluate(args)[output]))
    return np.concatenate(pieces)


def _stage_slice(value: np.ndarray, leaf: lay.Leaf, start: int) -> np.ndarray:
    size = leaf.type.size
    return value.reshape(-1)[start:start + size].reshape(leaf.type.shape)


# Calls are expanded before any derivative rule could run, so they have none.
register("call", _call_infer, _call_fn)
register("vmap", _vmap_infer, _vmap_fn)


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
# sc.vmap
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


def vmap(stage, n: int, inputs: Sequence[Any]):
    """``stage`` applied to ``n`` slices of its inputs: a mapped call.

    Parameters
    ----------
    stage : sc.Function
        The stage function; its input leaves, in order, match ``inputs``.
    n : int
        Number of stages.
    inputs : list
        One entry per input leaf of ``stage``: an expression of ``n`` times
        the leaf's size (stage ``k`` reads the ``k``-th slice of the flat
        array), an expression of the leaf's size (shared by every stage;
        ``sc.broadcast(p)`` says so explicitly), or a window
        ``sc.window(array, start, stride)`` or ``(array, start, stride)``
        (stage ``k`` reads the leaf's size of elements from
        ``start + k * stride``; windows may overlap).

    Returns
    -------
    Expr or tuple
        Per output of ``stage``, the stages' results stacked on a leading
        axis: shape ``(n,) + output shape`` (a tuple laid out like the stage's
        outputs for several outputs).  On numpy inputs the stages are
        evaluated right away and numpy arrays are returned.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def stage(x):
    ...     return (x * x).sum()
    >>> @sc.function(sc.L("z", 6), sc.L("s", ...))
    ... def mapped(z):
    ...     return sc.vmap(stage, 3, [z])
    >>> print(mapped(np.arange(6.0)))
    [ 1. 13. 41.]
    """
    from tapead.scaly.function import Function  # cycle: scaly.function -> here
    if not isinstance(stage, Function):
        raise TypeError(f"sc.vmap needs an sc.Function as stage, got {stage!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"sc.vmap({stage.name}, n={n!r}): n is the number of stages, a "
                         "positive int")
    n = int(n)
    inputs = list(inputs)
    where = f"sc.vmap({stage.name}, {n}, ...)"
    if len(inputs) != len(stage.input_leaves):
        raise LayoutError(f"{where}: {stage.name} has {len(stage.input_leaves)} input "
                          f"leaves ({', '.join(stage.input_names)}), got {len(inputs)} "
                          "mapped inputs")
    specs = [_spec(s, leaf, n, where) for s, leaf in zip(inputs, stage.input_leaves)]
    operands = [e for e, _, _ in specs]
    for (e, _, _), node, leaf in zip(specs, stage.inputs, stage.input_leaves):
        if e.dtype != node.dtype:
            raise LayoutError(f"{where}: input '{leaf.name}' expects "
                              f"{node.type.dtype_name}, got {e.type.dtype_name}")
    starts = tuple(s for _, s, _ in specs)
    strides = tuple(s for _, _, s in specs)
    nodes = [make_node("vmap", operands, {
        "callee": stage.name, "fn": stage, "length": n, "output": k,
        "slice_size": y.size, "starts": starts, "strides": strides})
        for k, y in enumerate(stage.outputs)]
    shapes = [(n,) + y.shape for y in stage.outputs]
    if all(e.op == "const" for e in operands):      # numbers in, numbers out
        values = [e.attrs["value"] for e in operands]
        outs = [_vmap_fn(*values, **node.attrs).reshape(shape)
                for node, shape in zip(nodes, shapes)]
    else:
        outs = [node if node.shape == shape else reshape(node, shape)
                for node, shape in zip(nodes, shapes)]
    return lay.unflatten([stage.output_layout], outs)[0]


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


def _expand_one(node: Expr, operands) -> Expr:
    if node.op == "call":
        return _expand_call(node, operands)
    if node.op == "vmap":
        return _expand_vmap(node, operands)
    return same_op(node, operands)


def expand_calls(outputs: Sequence[Expr]) -> List[Expr]:
    """``outputs`` with every call and mapped call replaced by the callee's graph.

    Each pass expands the calls visible at one nesting level; callees that
    call other Functions leave new call nodes for the next pass.
    """
    outputs = list(outputs)
    while any(node.op in CALL_OPS for node in topo_order(outputs)):
        outputs = rebuild(outputs, _expand_one)
    return outputs


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


__all__ = ["vmap", "broadcast", "window", "expand_calls", "call_nodes", "callees",
           "CALL_OPS", "LOOP_OPS"]
