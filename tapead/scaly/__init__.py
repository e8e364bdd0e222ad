"""tapead.scaly: the Scaly graph API (``import tapead.scaly as sc``).

A Scaly Function is a symbolic expression DAG traced from a Python body;
derivatives are graph transformations that return Functions again, and every
Function is evaluated by lowering its simplified graph onto a tapead tape and
evaluating it (``Tape.evaluate``).

>>> import numpy as np
>>> import tapead.scaly as sc
>>> @sc.function(sc.L("x", ()), sc.L("y", ...))
... def f(x):
...     return (x * x).sin()
>>> float(sc.gradient(f, "y", "x")(np.array(1.0)))
1.0806046117362795
"""
from tapead.scaly import ops as _ops  # noqa: F401  (fills the op table)
from tapead.scaly.calls import broadcast, window
from tapead.scaly.mapped import vmap
from tapead.scaly.control.branches import cond, print
from tapead.scaly.control.custom import custom_derivative
from tapead.scaly.control.loops import scan, while_loop
from tapead.scaly.derivatives import forward, gradient, hessian, jacobian
from tapead.errors import (LayoutError, NonScalarGradientError, ScalyShapeError,
                           SymbolicBoolError, UnknownNameError)
from tapead.scaly.expr import Expr, const, stack, sumsqr, sym
from tapead.scaly.function import Function, function
from tapead.scaly.layout import G, L, arg, group
from tapead.scaly.render import render_expr_assembly, render_lowered_program
from tapead.scaly.simplify import simplify
from tapead.scaly.sparsity import (Sparsity, acyclic_coloring, color_groups, column_coloring,
                                   jacobian_sparsity, sparse_hessian, sparse_jacobian,
                                   star_coloring)
from tapead.scaly.types import TensorType, dtypes

__all__ = ["Sparsity", "acyclic_coloring", "color_groups", "column_coloring",
           "jacobian_sparsity", "sparse_hessian", "sparse_jacobian", "star_coloring",
           "Expr", "Function", "G", "L", "LayoutError", "NonScalarGradientError",
           "ScalyShapeError", "SymbolicBoolError", "TensorType", "UnknownNameError", "arg",
           "const", "dtypes", "forward", "function", "gradient", "group", "hessian",
           "jacobian", "render_expr_assembly", "render_lowered_program", "simplify", "stack",
           "sumsqr", "sym", "vmap", "broadcast", "window", "scan", "while_loop", "cond",
           "print", "custom_derivative"]
