"""``sc.custom_derivative``: a Function whose derivatives are other Functions.

Its node is a ``custom_call`` loop node (``tapead.scaly.control.spec``);
its derivative rules are ``custom_jvp`` and ``custom_vjp`` in
``tapead.scaly.control.rules``.
"""
from __future__ import annotations

from typing import Sequence

from tapead.scaly.control.spec import LoopSpec, check_function
from tapead.scaly.function import Function
from tapead.errors import LayoutError
from tapead.scaly.types import TensorType


# ---------------------------------------------------------------------------
# sc.custom_derivative
# ---------------------------------------------------------------------------

def _check_signature(fn, deriv, kind: str, extra: Sequence[TensorType],
                     outs: Sequence[TensorType]) -> None:
    want_in = [leaf.type for leaf in fn.input_leaves] + list(extra)
    got_in = [leaf.type for leaf in deriv.input_leaves]
    got_out = [leaf.type for leaf in deriv.output_leaves]
    what = {"forward": "the inputs of {f} followed by one tangent per input",
            "reverse": "the inputs of {f} followed by one adjoint per output"}[kind]
    res = {"forward": "one tangent per output of {f}",
           "reverse": "one adjoint per input of {f}"}[kind]
    if got_in != want_in:
        raise LayoutError(f"sc.custom_derivative({fn.name}): the {kind} Function "
                          f"{deriv.name} must take {what.format(f=fn.name)} "
                          f"({', '.join(t.render() for t in want_in)}), got "
                          f"({', '.join(t.render() for t in got_in)})")
    if got_out != list(outs):
        raise LayoutError(f"sc.custom_derivative({fn.name}): the {kind} Function "
                          f"{deriv.name} must return {res.format(f=fn.name)} "
                          f"({', '.join(t.render() for t in outs)}), got "
                          f"({', '.join(t.render() for t in got_out)})")


def custom_derivative(fn, forward=None, reverse=None):
    """``fn`` with derivatives supplied by other Functions.

    Parameters
    ----------
    fn : sc.Function
    forward : sc.Function, optional
        Takes ``fn``'s inputs followed by one tangent per input leaf; returns
        one tangent per output leaf.  Without it forward mode differentiates
        ``fn``'s graph.
    reverse : sc.Function, optional
        Takes ``fn``'s inputs followed by one adjoint per output leaf; returns
        one adjoint per input leaf.  Without it reverse mode differentiates
        ``fn``'s graph.

    Returns
    -------
    sc.Function
        Same name, inputs and outputs as ``fn``; evaluating it evaluates
        ``fn``; its derivatives are the given Functions (differentiable
        again, for higher orders).
    
    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    ... def cube(x):
    ...     return x * x * x
    >>> @sc.function(sc.arg("x", ()), sc.arg("g", ()), outputs=sc.arg("gx", ()))
    ... def cube_reverse(x, g):
    ...     return 3.0 * x * x * g
    >>> fast = sc.custom_derivative(cube, reverse=cube_reverse)
    >>> fast(np.array(2.0)), sc.gradient(fast, "y", "x")(np.array(2.0))
    (np.float64(8.0), np.float64(12.0))
    """
    fn = check_function(fn, "sc.custom_derivative's function")
    ins = [leaf.type for leaf in fn.input_leaves]
    outs = [leaf.type for leaf in fn.output_leaves]
    if forward is not None:
        _check_signature(fn, check_function(forward, "forward"), "forward", ins, outs)
    if reverse is not None:
        _check_signature(fn, check_function(reverse, "reverse"), "reverse", outs, ins)
    spec = LoopSpec("custom_call", fn.name, body=fn, xs_types=ins, out_types=outs,
                    forward=forward, reverse_fn=reverse)
    nodes = spec.nodes(fn.inputs)
    return Function(fn.name, fn.params, fn.output_layout, fn.inputs, nodes, fn.style)


__all__ = ["custom_derivative"]
