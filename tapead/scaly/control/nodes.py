"""The nodes of a loop or branch as the control-flow API builds them: operands
checked against their declared types, the output nodes (evaluated at once
when every operand is a constant and nothing is being traced), the outputs
laid out as the Function's outputs (numbers for constant results).
"""
from __future__ import annotations

from typing import Any, List

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly import tracing
from tapead.scaly.control import batched, rules  # noqa: F401  (the nodes' op table entries)
from tapead.scaly.control.lowering import run
from tapead.scaly.control.spec import LoopSpec
from tapead.errors import LayoutError, ScalyShapeError
from tapead.scaly.expr import Expr, const
from tapead.scaly.types import TensorType


def leaf_types(layouts) -> List[TensorType]:
    return [leaf.type for leaf in lay.leaves(layouts)]


def as_typed(value: Any, ttype: TensorType, what: str) -> Expr:
    """``value`` as an expression of type ``ttype`` (numbers are converted)."""
    if isinstance(value, Expr):
        e = value
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise LayoutError(f"{what}: expected a number, an array or an sc.Expr, got "
                              f"{type(value).__name__}")
        with np.errstate(all="ignore"):
            converted = arr.astype(ttype.dtype)
            same = np.array_equal(converted.astype(arr.dtype), arr)
        if not same:
            raise LayoutError(f"{what} is {ttype.dtype_name}, and {value!r} would change in "
                              f"the conversion; pass a {ttype.dtype_name} value")
        e = const(converted)
    if e.shape != ttype.shape:
        raise ScalyShapeError(f"{what} is declared with shape {ttype.shape}, got shape "
                              f"{e.shape}")
    if e.dtype != ttype.dtype:
        raise LayoutError(f"{what} is declared {ttype.dtype_name}, got "
                          f"{e.type.dtype_name}")
    return e


def results(spec: LoopSpec, operands: List[Expr]) -> List[Expr]:
    """The output nodes, evaluated right away when no operand depends on an
    input and no Function is being traced (numbers in, numbers out)."""
    nodes = spec.nodes(operands)
    if all(o.op == "const" for o in operands) and not tracing.tracing():
        values = run(spec, [o.attrs["value"] for o in operands])
        return [const(np.asarray(v, dtype=t.dtype)) for v, t in
                zip(values[:spec.traj_offset], spec.out_types)]
    return nodes


def numbers(x):
    """Results on constant operands are numbers (numpy), like ``sc.vmap``'s."""
    if isinstance(x, Expr) and x.op == "const":
        return x.attrs["value"].copy()[()] if x.ndim == 0 else x.attrs["value"].copy()
    return x


def pack(layouts, leaves: List[Expr]) -> List[Any]:
    return [_tree_map(v) for v in lay.unflatten(layouts, leaves)]


def _tree_map(v):
    if isinstance(v, tuple):
        return tuple(_tree_map(x) for x in v)
    return numbers(v)

