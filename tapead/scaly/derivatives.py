"""Derivatives as graph transformations: gradient, forward, jacobian, hessian.

Reverse mode walks the DAG from an output back to the inputs (reverse
topological order, no recursion), calling each op's ``vjp`` rule, which
creates new interned nodes; forward mode walks it from the inputs, calling
each op's ``jvp`` rule on tangent expressions.  The results are ordinary
expressions, wrapped into derived Functions that can be called, printed and
differentiated again.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from tapead.errors import MissingRuleError
from tapead.scaly import layout as lay
from tapead.scaly.errors import LayoutError, NonScalarGradientError
from tapead.scaly.expr import (OPS, Expr, apply, const, ones, reshape, stack, sym,
                               topo_order, zeros)
from tapead.scaly.function import Function, derived, leaf_like
from tapead.scaly.types import TensorType, dtypes


# ---------------------------------------------------------------------------
# the two sweeps
# ---------------------------------------------------------------------------

def unbroadcast(c: Expr, shape) -> Expr:
    """Sum a broadcast contribution back down to ``shape``."""
    if c.shape == tuple(shape):
        return c
    lead = c.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and c.shape[lead + i] != 1)
    out = apply("sum", c, axes=axes) if axes else c
    return out if out.shape == tuple(shape) else reshape(out, shape)


def reverse_adjoints(output: Expr, weight: Expr, wrt: Sequence[Expr]) -> List[Expr]:
    """``weight``-weighted adjoints of ``output`` with respect to ``wrt`` nodes.

    Visits the nodes from the output back to the inputs once each; a node's
    contributions are added left to right (``add(c1, c2)``), so two equal
    contributions are one interned node added to itself.
    """
    return reverse_adjoints_many([output], [weight], wrt)


#: op name -> ``rule(adjoints, node)`` for ops with one node per output that
#: share one computation (loops, branches; ``tapead.scaly.control_rules``):
#: ``adjoints`` maps output numbers to their adjoints, and the rule returns one
#: contribution per operand for all of them, so a loop whose outputs are used
#: several times is reversed once.
GROUP_VJPS: Dict[str, Callable] = {}

#: op name -> ``rule(g, node, wanted)`` for ops whose reverse rule builds
#: something per operand that is worth skipping when no adjoint is asked of
#: it (a mapped call builds one stage adjoint Function per operand;
#: ``tapead.scaly.mapped``): ``wanted[j]`` says whether operand ``j`` leads to
#: a requested input.
MASKED_VJPS: Dict[str, Callable] = {}


def _live(order: Sequence[Expr], wrt: Sequence[Expr]) -> set:
    """Ids of the nodes of ``order`` (topological) that depend on a ``wrt`` node."""
    live = {x.id for x in wrt}
    for node in order:
        if node.id not in live and any(o.id in live for o in node.operands):
            live.add(node.id)
    return live


def _group_key(node: Expr):
    return (id(node.attrs["spec"]), tuple(o.id for o in node.operands))


def reverse_adjoints_many(outputs: Sequence[Expr], weights: Sequence[Optional[Expr]],
                          wrt: Sequence[Expr]) -> List[Expr]:
    """``reverse_adjoints`` of several outputs at once: the adjoints of
    ``sum_k <weights[k], outputs[k]>`` (a ``None`` weight is zero)."""
    adjoint: Dict[int, Expr] = {}
    for y, w in zip(outputs, weights):
        if w is not None:
            adjoint[y.id] = w if y.id not in adjoint else adjoint[y.id] + w
    order = topo_order(list(outputs))
    live = _live(order, wrt)
    # the sibling outputs of a grouped node are handled together at the first
    # of them in topological order: every user of every sibling comes later
    first: Dict[tuple, int] = {}
    for node in order:
        if node.op in GROUP_VJPS:
            first.setdefault(_group_key(node), node.id)
    pending: Dict[tuple, Dict[int, Expr]] = {}
    for node in reversed(order):
        g = adjoint.get(node.id)
        if node.op in GROUP_VJPS:
            key = _group_key(node)
            if g is not None and node.diff:
                pending.setdefault(key, {})[node.attrs["output"]] = g
            if node.id != first[key] or key not in pending:
                continue
            contributions = GROUP_VJPS[node.op](pending.pop(key), node)
        else:
            if (g is None or not node.diff or node.op in ("input", "const")
                    or node.id not in live):
                continue
            masked = MASKED_VJPS.get(node.op)
            rule = OPS[node.op]
            if rule.vjp is None and masked is None:
                raise MissingRuleError(f"Scaly op '{node.op}' has no reverse-mode (vjp) rule")
            contributions = (rule.vjp(g, node) if masked is None else
                             masked(g, node, [o.id in live for o in node.operands]))
        for operand, c in zip(node.operands, contributions):
            if c is None or not operand.diff or operand.id not in live:
                continue
            c = unbroadcast(c, operand.shape)
            prev = adjoint.get(operand.id)
            adjoint[operand.id] = c if prev is None else prev + c
    return [adjoint[x.id] if x.id in adjoint else zeros(x.shape) for x in wrt]


def forward_tangents(outputs: Sequence[Expr], seeds: Dict[int, Expr]) -> List[Optional[Expr]]:
    """Tangents of ``outputs`` given tangent expressions of some inputs.

    ``seeds`` maps input node ids to their tangents; ``None`` in the result
    is a known zero.
    """
    tangent: Dict[int, Expr] = dict(seeds)
    for node in topo_order(outputs):
        if node.id in tangent or not node.diff or node.op in ("input", "const"):
            continue
        ts = [tangent.get(o.id) if o.diff else None for o in node.operands]
        if all(t is None for t in ts):
            continue
        rule = OPS[node.op]
        if rule.jvp is None:
            raise MissingRuleError(f"Scaly op '{node.op}' has no forward-mode (jvp) rule")
        t = rule.jvp(ts, node)
        if t is not None:
            if t.shape != node.shape:
                t = t * ones(node.shape)
            tangent[node.id] = t
    return [tangent.get(y.id) for y in outputs]


STRICT_JVP_MANY_VARS = ("TAPEAD_STRICT_JVP_MANY", "SCALY_STRICT_JVP_MANY")


def strict_jvp_many() -> bool:
    """Whether a missing batched rule is an error (``TAPEAD_STRICT_JVP_MANY=1``,
    or Scaly's own name ``SCALY_STRICT_JVP_MANY``)."""
    return any(os.environ.get(v, "").strip() not in ("", "0") for v in STRICT_JVP_MANY_VARS)


def _per_direction(rule, ts, node: Expr, k: int) -> Optional[Expr]:
    """The fallback for an op without a batched rule: ``jvp`` once per direction."""
    if strict_jvp_many():
        raise MissingRuleError(
            f"Scaly op '{node.op}' has no batched forward rule (jvp_many), so a batched "
            f"forward pass would fall back to {k} passes, one per direction; "
            f"{STRICT_JVP_MANY_VARS[0]} is set, which makes this an error. Give the op a "
            "jvp_many rule or unset the variable")
    outs = []
    for j in range(k):
        t = rule.jvp([None if t is None else t[j] for t in ts], node)
        if t is None:
            t = zeros(node.shape)
        elif t.shape != node.shape:
            t = t * ones(node.shape)
        outs.append(t)
    return stack(outs, axis=0)


def forward_tangents_many(outputs: Sequence[Expr], seeds: Dict[int, Expr],
                          k: int) -> List[Optional[Expr]]:
    """Batched tangents: ``k`` directions as a leading axis on every tangent.

    ``seeds`` maps input node ids to tangents of shape ``(k,) + input.shape``;
    each result is ``(k,) + output.shape`` (``None`` is a known zero).  Each
    op's ``jvp_many`` rule builds the direction-independent partials once;
    an op without one falls back to one ``jvp`` per direction (an error when
    ``TAPEAD_STRICT_JVP_MANY`` is set).
    """
    tangent: Dict[int, Expr] = dict(seeds)
    for node in topo_order(outputs):
        if node.id in tangent or not node.diff or node.op in ("input", "const"):
            continue
        ts = [tangent.get(o.id) if o.diff else None for o in node.operands]
        if all(t is None for t in ts):
            continue
        rule = OPS[node.op]
        if rule.jvp is None and rule.jvp_many is None:
            raise MissingRuleError(f"Scaly op '{node.op}' has no forward-mode (jvp) rule")
        if rule.jvp_many is not None:
            t = rule.jvp_many(ts, node, k)
        else:
            t = _per_direction(rule, ts, node, k)
        if t is not None:
            shape = (k,) + node.shape
            if t.shape != shape:
                t = t * ones(shape)
            tangent[node.id] = t
    return [tangent.get(y.id) for y in outputs]


def jacobian_expr(y: Expr, x: Expr) -> Expr:
    """The dense ``(y.size, x.size)`` Jacobian, by colored forward mode.

    Columns that share no row of the Jacobian's pattern share a direction:
    the pattern is found without numbers, colored, and one batched forward
    pass carries one direction per color (``x.size`` directions when the
    Jacobian is dense); the entries are then scattered into the dense matrix
    (``tapead.scaly.sparsity.dense_jacobian_expr``).
    """
    from tapead.scaly.sparsity import dense_jacobian_expr  # cycle: scaly.sparsity -> here
    return dense_jacobian_expr(y, x)


# ---------------------------------------------------------------------------
# the user-facing transformations
# ---------------------------------------------------------------------------

def _pick(f: Function, out: str, inp: str):
    if not isinstance(f, Function):
        raise TypeError(f"expected an sc.Function (made with @sc.function), got {f!r}")
    f.output(out)                         # checks the name
    y, x = f.mapped_outputs()[f.output_names.index(out)], f.input(inp)
    if x.dtype != dtypes.float64:
        raise LayoutError(f"function {f.name}: input '{inp}' is {x.type.dtype_name}, which "
                          "has no derivative; differentiate with respect to a float64 input")
    if y.dtype != dtypes.float64:
        raise LayoutError(f"function {f.name}: output '{out}' is {y.type.dtype_name}, which "
                          "has no derivative")
    return y, x


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
