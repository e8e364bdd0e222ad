"""Printing graphs: the ``expr.module`` listing and the lowered program."""
from __future__ import annotations

import re
from typing import Dict, List

import numpy as np

from tapead.scaly.expr import Expr
from tapead.scaly.graphs import topo_order
from tapead.scaly.function import Function
from tapead.scaly.calls import callees

# attributes that the result type already shows
_HIDDEN = {"gather": ("shape",), "scatter": ("shape",), "input": ("shape", "dtype"),
           "call": ("fn",), "vmap": ("fn",), "scan": ("spec",), "while_loop": ("spec",),
           "cond": ("spec",), "custom_call": ("spec",)}


def _format_value(value) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    arr = np.asarray(value)
    if arr.size == 0 and arr.ndim == 1:
        return "[]"
    text = np.array2string(arr, separator=", ", threshold=10, edgeitems=3)
    return re.sub(r"\n\s*", " ", text)          # one line per node, also for 2-d values


def _attrs(node: Expr) -> str:
    hidden = _HIDDEN.get(node.op, ())
    items = [(k, v) for k, v in sorted(node.attrs.items()) if k not in hidden]
    if node.op in ("const", "input"):
        items.insert(0, ("lowering", "auto"))
    if not items:
        return ""
    return " {" + ", ".join(f"{k}={_format_value(v)}" for k, v in items) + "}"


def render_expr_assembly(fn: Function) -> str:
    """The ``expr.module { expr.func @name(...) ... }`` listing of ``fn``.

    Nodes are numbered in depth-first post-order from the outputs (operands
    in order); inputs and outputs carry their tensor types, ``diff`` marking
    values that depend on a differentiable input.  Functions called from
    ``fn`` (``expr.call``/``expr.vmap`` nodes) follow as their own
    ``expr.func`` blocks, in first-use order.

    Parameters
    ----------
    fn : sc.Function

    Returns
    -------
    str

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> @sc.function(sc.L("x", ()), sc.L("y", ...))
    ... def f(x):
    ...     return x.sin()
    >>> print(sc.render_expr_assembly(f))
    expr.module {
      expr.func @f(%x: tensor<float64 diff>) -> (%y: tensor<float64 diff>) {
        %0 = expr.input {lowering="auto", name="x"} : tensor<float64 diff>
        %1 = expr.sin(%0) : tensor<float64 diff>
        expr.return %1
      }
    }
    """
    lines = ["expr.module {"]
    for f in [fn] + callees(fn.outputs):
        lines += _render_func(f)
    lines.append("}")
    return "\n".join(lines)


def _render_func(fn: Function) -> List[str]:
    order = topo_order(fn.outputs)
    number = {node.id: k for k, node in enumerate(order)}
    ins = ", ".join(f"%{leaf.name}: {node.type.render(node.diff)}"
                    for leaf, node in zip(fn.input_leaves, fn.inputs))
    outs = ", ".join(f"%{leaf.name}: {node.type.render(node.diff)}"
                     for leaf, node in zip(fn.output_leaves, fn.outputs))
    lines = [f"  expr.func @{fn.name}({ins}) -> ({outs}) {{"]
    for node in order:
        operands = ""
        if node.operands:
            operands = "(" + ", ".join(f"%{number[o.id]}" for o in node.operands) + ")"
        lines.append(f"    %{number[node.id]} = expr.{node.op}{operands}{_attrs(node)} : "
                     f"{node.type.render(node.diff)}")
    lines.append("    expr.return " + ", ".join(f"%{number[o.id]}" for o in fn.outputs))
    lines.append("  }")
    return lines


# ---------------------------------------------------------------------------
# the lowered program
# ---------------------------------------------------------------------------

def _scalar_type(node: Expr) -> str:
    name = node.type.dtype_name
    return name if not node.shape else "x".join(map(str, node.shape)) + "x" + name


def _const_text(value: np.ndarray) -> str:
    if value.ndim == 0:
        v = value.item()
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return repr(v)
    return "prog.const(" + _format_value(value) + ")"


def _slot(name: str, node: Expr) -> str:
    return f"%{name}[0]" if not node.shape else f"%{name}[0:{node.size}]"


def render_lowered_program(fn: Function) -> str:
    """The simplified program that evaluation lowers onto the tape.

    Inputs are loaded into ``%vN`` values; a node used more than once gets its
    own statement, nodes used once are written inline; each output is one
    ``prog.store`` statement.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> @sc.function(sc.L("x", ()), sc.L("y", ...))
    ... def f(x):
    ...     return (x * 1.0).sin()           # x * 1 is simplified away
    >>> print(sc.render_lowered_program(f))
    prog.func @f {
      %v0 = prog.load %x[0] : float64
      prog.store prog.sin(%v0), %y[0] : float64
    }
    """
    outputs = fn.simplified_outputs()
    order = topo_order(outputs)
    uses: Dict[int, int] = {}
    for node in order:
        for o in node.operands:
            uses[o.id] = uses.get(o.id, 0) + 1
    for o in outputs:
        uses[o.id] = uses.get(o.id, 0) + 1
    text: Dict[int, str] = {}
    lines: List[str] = []
    names = {node.id: leaf.name for leaf, node in zip(fn.input_leaves, fn.inputs)}
    counter = 0
    for node in order:
        if node.op == "input":
            text[node.id] = f"%v{counter}"
            lines.append(f"  %v{counter} = prog.load {_slot(names[node.id], node)} : "
                         f"{_scalar_type(node)}")
            counter += 1
            continue
        if node.op == "const":
            text[node.id] = _const_text(node.attrs["value"])
            continue
        args = [text[o.id] for o in node.operands]
        hidden = _HIDDEN.get(node.op, ())
        args += [f"{k}={_format_value(v)}" for k, v in sorted(node.attrs.items())
                 if k not in hidden or node.op in ("gather", "scatter")]
        expr = f"prog.{node.op}({', '.join(args)})"
        if uses.get(node.id, 0) > 1:
            lines.append(f"  %v{counter} = {expr} : {_scalar_type(node)}")
            text[node.id] = f"%v{counter}"
            counter += 1
        else:
            text[node.id] = expr
    for leaf, node in zip(fn.output_leaves, outputs):
        lines.append(f"  prog.store {text[node.id]}, {_slot(leaf.name, node)} : "
                     f"{_scalar_type(node)}")
    return "\n".join([f"prog.func @{fn.name} {{"] + lines + ["}"])
