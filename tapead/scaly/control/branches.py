"""Scaly's branches and prints: ``sc.cond`` (one node whose selected branch
Function runs) and ``sc.print`` (a node that prints its operand whenever the
program computes it).  Their rules are in ``tapead.scaly.control.rules``;
their evaluation in ``tapead.scaly.control.lowering``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly import tracing
from tapead.scaly.control.nodes import as_typed, leaf_types, pack, results
from tapead.scaly.control.spec import LoopSpec, check_function as _check_function
from tapead.scaly.control.spec import closure_converted
from tapead.errors import LayoutError, ScalyShapeError
from tapead.scaly.expr import Expr, as_expr, const, make_node
from tapead.scaly.types import dtypes


# ---------------------------------------------------------------------------
# sc.cond
# ---------------------------------------------------------------------------

def _structure(layout) -> Any:
    if isinstance(layout, lay.Leaf):
        return "leaf"
    return tuple(_structure(item) for item in layout.items)


def cond(selector, branches, *operands):
    """Call one of ``branches`` on ``operands``: only the selected one runs.

    Parameters
    ----------
    selector : bool or int64 scalar expression
        ``False`` selects ``branches[0]``, ``True`` ``branches[1]``; an int
        selects ``branches[selector]``, clamped to the valid indices.  It has
        no derivative.
    branches : sequence of sc.Function
        Same parameters; matching output structures, shapes and dtypes.
    *operands
        One per parameter of the branches.

    Returns
    -------
    Expr or tuple
        Laid out like the branches' outputs.
    
    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    ... def neg(x):
    ...     return -x
    >>> @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    ... def pos(x):
    ...     return x
    >>> @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    ... def absval(x):
    ...     return sc.cond(x > 0.0, (neg, pos), x)
    >>> absval(np.array(-3.0)), sc.gradient(absval, "y", "x")(np.array(-3.0))
    (np.float64(3.0), np.float64(-1.0))
    """
    branches = list(branches) if isinstance(branches, (tuple, list)) else [branches]
    if not branches:
        raise ValueError("sc.cond needs at least one branch")
    for k, fn in enumerate(branches):
        _check_function(fn, f"sc.cond's branch {k}", captured_ok=True)
    branches, extra = closure_converted(branches)     # captured symbols: more operands
    operands = tuple(operands) + tuple(extra)
    first = branches[0]
    where = f"sc.cond({', '.join(f.name for f in branches)})"
    if not isinstance(selector, Expr):
        if isinstance(selector, (bool, np.bool_)):
            selector = const(bool(selector))
        else:
            selector = const(np.int64(selector))
    if selector.shape != () or selector.dtype not in (dtypes.bool_, dtypes.int64):
        raise LayoutError(f"{where}: the selector must be a bool or int64 scalar, got "
                          f"{selector.type.render()}")
    for k, fn in enumerate(branches[1:], 1):
        if leaf_types(fn.params) != leaf_types(first.params):
            raise LayoutError(f"{where}: every branch takes the same operands; {fn.name} "
                              f"takes {fn.params!r}, {first.name} takes {first.params!r}")
        if _structure(fn.output_layout) != _structure(first.output_layout):
            raise LayoutError(f"{where}: branch {k} ({fn.name}) returns the structure "
                              f"{_structure(fn.output_layout)!r} but branch 0 "
                              f"({first.name}) returns {_structure(first.output_layout)!r}; "
                              "the branches must return matching tuple structures")
        for a, b in zip(first.output_leaves, fn.output_leaves):
            if a.type != b.type:
                raise ScalyShapeError(
                    f"{where}: output '{b.name}' of branch {k} ({fn.name}) is "
                    f"{b.type.render()} but output '{a.name}' of branch 0 ({first.name}) is "
                    f"{a.type.render()}; the branches must return matching shapes and dtypes")
    if len(operands) != len(first.params):
        raise LayoutError(f"{where}: the branches take {len(first.params)} operand(s), got "
                          f"{len(operands)}")
    flat = lay.flatten(first.params, operands, f"{where} (its operands)")
    ops = [as_typed(v, leaf.type, f"{where}: operand '{leaf.name}'")
           for v, leaf in zip(flat, first.input_leaves)]
    spec = LoopSpec("cond", first.name, branches=branches,
                    xs_types=[leaf.type for leaf in first.input_leaves],
                    out_types=[leaf.type for leaf in first.output_leaves])
    nodes = results(spec, [selector] + ops)
    return pack([first.output_layout], nodes)[0]


# ---------------------------------------------------------------------------
# sc.print
# ---------------------------------------------------------------------------

def print(fmt: str, x) -> Expr:  # noqa: A001  (Scaly's name)
    """``x``, printed as ``fmt.format(x)`` whenever the program computes it.

    In a loop body it prints once per executed step (not at all in a
    zero-trip loop or an unselected branch).  Use the returned expression:
    a print that no output of the traced Function reaches raises ValueError.

    Parameters
    ----------
    fmt : str
        A format with one ``{}`` for the value (numbers print in their
        shortest form, ``1`` for 1.0; arrays as ``[1, 0.5]``).
    x : expression, any shape

    Returns
    -------
    Expr
        ``x`` itself (same shape and dtype; its derivative is the identity).
    
    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()))
    ... def step(x):
    ...     return sc.print("x={}", x) * 2.0
    >>> @sc.function(sc.arg("x0", ()), outputs=sc.arg("y", ()))
    ... def twice(x0):
    ...     return sc.scan(step, x0, length=2)[0]
    >>> twice(np.array(1.5))
    x=1.5
    x=3
    np.float64(6.0)
    """
    if not isinstance(fmt, str):
        raise TypeError(f"sc.print(fmt, x): fmt must be a str, got {fmt!r}")
    node = make_node("print", [as_expr(x)], {"fmt": fmt})
    tracing.record_print(node)
    return node


__all__ = ["cond", "print"]
