"""Derivatives as graph transformations: gradient, forward, jacobian, hessian.

The sweeps (reverse adjoints, forward tangents) are ``tapead.scaly.sweeps``;
here their results are wrapped into derived Functions that can be called,
printed and differentiated again.  The sweeps' names are importable from
here too.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from tapead.scaly import layout as lay
from tapead.errors import LayoutError, NonScalarGradientError
from tapead.scaly.expr import Expr, const, sym, zeros
from tapead.scaly.function import Function, derived, leaf_like
from tapead.scaly.types import TensorType
from tapead.scaly.sparsity import dense_jacobian_expr
from tapead.scaly.sweeps import (forward_tangents, forward_tangents_many, pick as _pick,
                                 reverse_adjoints)


def jacobian_expr(y: Expr, x: Expr) -> Expr:
    """The dense ``(y.size, x.size)`` Jacobian, by colored forward mode.

    Columns that share no row of the Jacobian's pattern share a direction:
    the pattern is found without numbers, colored, and one batched forward
    pass carries one direction per color (``x.size`` directions when the
    Jacobian is dense); the entries are then scattered into the dense matrix
    (``tapead.scaly.sparsity.dense_jacobian_expr``).
    """
    return dense_jacobian_expr(y, x)


# ---------------------------------------------------------------------------
# the user-facing transformations
# ---------------------------------------------------------------------------

def _single(f: Function, kind: str, out: str, inp: str, value: Expr) -> Function:
    label = f"{kind}_{out}_{inp}"
    leaf = leaf_like(f.style, label, TensorType(value.shape))
    return derived(f"{f.name}_{label}", f.params, leaf, f.inputs, [value], f.style)


def gradient(f: Function, out: str, inp: str) -> Function:
    """``f_grad_<out>_<inp>``: the gradient of a scalar output (reverse mode).

    Same inputs as ``f``; one output ``grad_<out>_<inp>`` shaped like the input.

    Parameters
    ----------
    f : sc.Function
    out : str
        The name of a scalar output of ``f``.
    inp : str
        The name of an input of ``f``.

    Returns
    -------
    sc.Function
        Named ``f_grad_<out>_<inp>``; callable like ``f``, on numbers or on
        expressions, and differentiable again.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def h(x):
    ...     return (x[0] * x[1]).sin()
    >>> grad = sc.gradient(h, "y", "x")
    >>> grad.name, grad(np.array([1.0, 2.0]))
    ('h_grad_y_x', array([-0.83229367, -0.41614684]))
    """
    y, x = _pick(f, out, inp)
    if y.size != 1:
        raise NonScalarGradientError(
            f"sc.gradient({f.name}, {out!r}, {inp!r}): output '{out}' has shape {y.shape}, "
            "not a single element; use sc.jacobian for a vector output")
    g = reverse_adjoints(y, const(np.ones(y.shape)), [x])[0]
    return _single(f, "grad", out, inp, g)


def _with_extra_input(f: Function, name: str, ttype: TensorType):
    """A new input node ``name`` and ``f``'s parameters with it appended."""
    if name in f.input_names:
        raise LayoutError(f"function {f.name} already has an input named {name!r}")
    node = sym(name, ttype)
    leaf = leaf_like(f.style, name, ttype)
    params = ([lay.G(f.params[0], leaf)] if f.style == "L" and len(f.params) == 1
              else f.params + [leaf])
    return node, params


def forward(f: Function, out: str, inp: str, directions: Optional[int] = None) -> Function:
    """``f_fwd_<out>_<inp>``: the directional derivative ``J v`` (forward mode).

    Takes ``f``'s inputs followed by a seed direction ``seed_<inp>`` shaped
    like the input: with ``sc.L`` layouts, one tuple ``(inputs, seed)``
    (``fwd((x, s))``); with ``sc.arg`` parameters, one more argument.

    ``directions=k`` builds a batched forward pass: the seed is a matrix of
    ``k`` directions, shape ``(k,) + inp.shape``, and the result is
    ``(k,) + out.shape``.  The directions travel through the graph together
    as a leading axis on every tangent, so direction-independent work (one
    cosine per sine node) is done once.  An op without a batched rule falls
    back to one pass per direction; ``TAPEAD_STRICT_JVP_MANY=1`` (or
    ``SCALY_STRICT_JVP_MANY=1``) turns that fallback into an error.

    Parameters
    ----------
    f : sc.Function
    out, inp : str
        Names of an output and an input of ``f``.
    directions : int, optional
        Build a batched pass over this many directions.

    Returns
    -------
    sc.Function
        Named ``f_fwd_<out>_<inp>``; its result has the output's shape (with
        a leading ``k`` axis when ``directions=k``).

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def h(x):
    ...     return (x[0] * x[1]).sin()
    >>> fwd = sc.forward(h, "y", "x")
    >>> print(round(float(fwd((np.array([1.0, 2.0]), np.array([1.0, 0.0])))), 8))
    -0.83229367
    >>> many = sc.forward(h, "y", "x", directions=2)
    >>> print(many((np.array([1.0, 2.0]), np.eye(2))))
    [-0.83229367 -0.41614684]
    """
    y, x = _pick(f, out, inp)
    if directions is None:
        seed, params = _with_extra_input(f, f"seed_{inp}", x.type)
        t = forward_tangents([y], {x.id: seed})[0]
        shape = y.shape
    else:
        k = directions
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"sc.forward(..., directions={k!r}): directions is the number "
                             "of seed directions, a positive int")
        k = int(k)
        seed, params = _with_extra_input(f, f"seed_{inp}", TensorType((k,) + x.shape))
        t = forward_tangents_many([y], {x.id: seed}, k)[0]
        shape = (k,) + y.shape
    t = zeros(shape) if t is None else t
    label = f"fwd_{out}_{inp}"
    leaf = leaf_like(f.style, label, TensorType(shape))
    return derived(f"{f.name}_{label}", params, leaf, f.inputs + [seed], [t], f.style)


def jacobian(f: Function, out: str, inp: str) -> Function:
    """``f_jac_<out>_<inp>``: the dense Jacobian, shape ``(out.size, inp.size)``,
    by forward mode with one direction per color of its pattern's columns.

    Parameters
    ----------
    f : sc.Function
    out, inp : str
        Names of an output and an input of ``f``.

    Returns
    -------
    sc.Function
        Named ``f_jac_<out>_<inp>``, returning an ``(out.size, inp.size)``
        array.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 3), sc.L("y", ...))
    ... def v(x):
    ...     return sc.stack([x[0] * x[2], x[1] ** 2, 2.0 * x[0] + x[2] ** 2])
    >>> print(sc.jacobian(v, "y", "x")(np.array([1.0, 2.0, 3.0])))
    [[3. 0. 1.]
     [0. 4. 0.]
     [2. 0. 6.]]
    """
    y, x = _pick(f, out, inp)
    return _single(f, "jac", out, inp, jacobian_expr(y, x))


def hessian(f: Function, out: str, inp: str, weights=None) -> Function:
    """``f_hess_<out>_<inp>``: the dense Hessian, forward over reverse.

    One reverse pass gives the gradient as an expression; forward mode then
    differentiates it, one direction per input element, except that
    columns of the Hessian that share no row share a direction (the
    gradient's pattern is colored first, so a banded Hessian takes a few
    passes however large it is).  Shape ``(inp.size, inp.size)``.

    ``weights=True`` (input named ``weights_<out>``) or ``weights="name"``
    builds the Lagrangian Hessian of a vector output: the Hessian of
    ``sum_i w_i y_i``, with the weights ``w`` (shaped like the output) an
    extra input of the derivative Function, after ``f``'s inputs.  The
    weighted sum is one scalar, so it takes a single reverse pass however
    many outputs (constraints) there are.

    Parameters
    ----------
    f : sc.Function
    out : str
        A scalar output of ``f`` (or any output, with ``weights``).
    inp : str
        An input of ``f``.
    weights : True or str, optional
        Build the Lagrangian Hessian, with the weights as an extra input.

    Returns
    -------
    sc.Function
        Named ``f_hess_<out>_<inp>``, returning an ``(inp.size, inp.size)``
        array.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def h(x):
    ...     return x[0] ** 2 * x[1]
    >>> print(sc.hessian(h, "y", "x")(np.array([1.0, 3.0])))
    [[6. 2.]
     [2. 0.]]
    """
    y, x = _pick(f, out, inp)
    if weights is None or weights is False:
        if y.size != 1:
            raise NonScalarGradientError(
                f"sc.hessian({f.name}, {out!r}, {inp!r}): output '{out}' has shape "
                f"{y.shape}, not a single element; pass weights=True for the Lagrangian "
                "Hessian (the Hessian of the weighted sum of the outputs)")
        g = reverse_adjoints(y, const(np.ones(y.shape)), [x])[0]
        return _single(f, "hess", out, inp, jacobian_expr(g, x))
    if weights is True:
        name = f"weights_{out}"
    elif isinstance(weights, str) and weights:
        name = weights
    else:
        raise TypeError(f"sc.hessian(..., weights={weights!r}): pass weights=True or the "
                        "name of the weights input (a str)")
    w, params = _with_extra_input(f, name, TensorType(y.shape))
    g = reverse_adjoints(y, w, [x])[0]          # one reverse pass for every output
    label = f"hess_{out}_{inp}"
    leaf = leaf_like(f.style, label, TensorType((x.size, x.size)))
    return derived(f"{f.name}_{label}", params, leaf, f.inputs + [w],
                   [jacobian_expr(g, x)], f.style)
