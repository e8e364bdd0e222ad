"""The graph API cannot drift from the tape.

Every ``tapead.scaly`` op names its tape counterpart (``OpRule.tape``, the
primitive its ``fn`` records).  For each elementwise pair, Scaly's value,
gradient and Hessian (its own derivative rules, built as expressions) are
compared with the tape's (the primitive's rules: the C kernel for scalars,
the Python rule for arrays) at smooth points and at the conventions of
docs/nonsmooth.md: pow at 0, abs and sign at 0, sqrt at 0, where.  The
structural ops (sum, reshape, gather, scatter, stack, transpose, matmul) are
compared the same way inside a smooth function.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead import _core
from tapead._prims.base import Primitive
from tapead.scaly.expr import OPS, apply
from tapead.program import Program


def _record(*args):
    """(tape, output) of a recording, as the transforms make it."""
    prog = Program.record(*args)
    return prog.tape, prog.out

#: ops without a tape counterpart: leaves, and calls of other Functions
NO_COUNTERPART = {"const", "input", "call", "vmap"}


def test_every_op_names_its_tape_counterpart():
    for name, rule in OPS.items():
        module = getattr(rule.fn, "__module__", None) or "tapead"
        if name in NO_COUNTERPART or not module.startswith("tapead"):
            continue                   # a leaf, a call, or an op a test registered
        assert isinstance(rule.tape, Primitive), (
            f"scaly op {name!r} does not name its tape counterpart: add it to "
            "tapead.scaly.ops.TAPE (or register(..., tape=prim))")


# ---------------------------------------------------------------------------
# elementwise ops: (name, arity, smooth points, convention points)
# ---------------------------------------------------------------------------

RNG = np.random.default_rng(3)
SMOOTH = {
    "add": [(0.3, -1.2), (2.0, 0.5)], "sub": [(0.3, -1.2)], "mul": [(0.3, -1.2)],
    "div": [(0.3, -1.2), (2.0, 0.7)], "pow": [(1.5, 2.5), (0.7, -1.3), (2.0, 3.0)],
    "neg": [(0.4,)], "sin": [(0.4,), (-2.0,)], "cos": [(0.4,), (2.5,)],
    "tan": [(0.4,), (-1.1,)], "exp": [(0.4,), (-2.0,)], "log": [(0.4,), (3.0,)],
    "sqrt": [(0.4,), (3.0,)], "tanh": [(0.4,), (-1.5,)], "abs": [(0.4,), (-1.5,)],
    "sign": [(0.4,), (-1.5,)],
}
CONVENTIONS = {
    # d/dy 0**y = 0 (x**y == 0); d/dx x**0 = 0; x**0 at x = 0
    "pow": [(0.0, 2.0), (0.0, 3.0), (2.0, 0.0), (-1.5, 0.0), (0.0, 0.0), (0.0, 1.0)],
    "abs": [(0.0,)],                     # sign(0) = 0
    "sign": [(0.0,)],                    # derivative 0 everywhere
    "sqrt": [(0.0,)],                    # inf at 0
    "div": [(0.0, 2.0)],
    "mul": [(0.0, 0.0)],
}
#: points where the tape's own forward-over-reverse and reverse-over-reverse
#: second derivatives differ (0 * inf in a zero tangent); only values and
#: first derivatives are compared there
FIRST_ORDER_ONLY = {("pow", (0.0, 0.0)), ("pow", (0.0, 1.0))}
ELEMENTWISE = sorted(SMOOTH)


def _scaly(name, arity):
    @sc.function(sc.arg("x", arity), outputs=sc.arg("y", ()))
    def f(x):
        return apply(name, *[x[k] for k in range(arity)])
    return f, sc.gradient(f, "y", "x"), sc.hessian(f, "y", "x")


def _tape_scalar(prim, arity):
    """The primitive on scalar tracers: the C kernel when it has an opcode."""
    if prim.opcode >= 0:
        if arity == 1:
            return lambda a: _core.apply_unary(prim.opcode, a)
        return lambda a, b: _core.apply_binary(prim.opcode, a, b)
    return lambda *a: _core.bind(prim, *a)


def _scalar_derivatives(t, point):
    n = len(point)
    g = np.array([ta.grad(t, argnums=k)(*point) for k in range(n)], dtype=float)
    H = np.array([[ta.grad(lambda *a, k=k: ta.grad(t, argnums=k)(*a), argnums=j)(*point)
                   for j in range(n)] for k in range(n)], dtype=float)
    return float(t(*point)), g, H


def _array_derivatives(prim, point):
    """The primitive's Python rules on one-element arrays (forward over reverse)."""
    n = len(point)

    def t(v):
        return tnp.sum(_core.bind(prim, *[v[k:k + 1] for k in range(n)]))
    v = np.array(point, dtype=float)
    return float(t(v)), ta.grad(t)(v), ta.hessian(t)(v)


def _same(a, b, what):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=1e-13, atol=1e-13, equal_nan=True, err_msg=what)


CASES = [(name, p, "smooth") for name in ELEMENTWISE for p in SMOOTH[name]] + \
        [(name, p, "convention") for name in sorted(CONVENTIONS) for p in CONVENTIONS[name]]


@pytest.mark.parametrize("name, point, kind", CASES,
                         ids=[f"{n}-{k}-{p}" for n, p, k in CASES])
def test_elementwise_op_agrees_with_its_tape_counterpart(name, point, kind):
    prim = OPS[name].tape
    arity = len(point)
    f, g, h = _scaly(name, arity)
    x = np.array(point, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sv, sg, sh = float(f(x)), g(x), h(x)
        for mode, (tv, tg, th) in (
                ("C kernel", _scalar_derivatives(_tape_scalar(prim, arity), point)),
                ("array rule", _array_derivatives(prim, point))):
            _same(sv, tv, f"{name}{point} value vs the tape's {mode}")
            _same(sg, tg, f"{name}{point} gradient vs the tape's {mode}")
            if (name, point) not in FIRST_ORDER_ONLY:
                _same(sh, th, f"{name}{point} Hessian vs the tape's {mode}")


def test_pow_follows_the_tape_convention():
    """The drift this file exists for: d/dy 0**y at y = 2 and d/dx x**x at 0."""
    f, g, _ = _scaly("pow", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert g(np.array([0.0, 2.0])).tolist() == [0.0, 0.0]

        @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
        def xx(x):
            return x ** x
        assert sc.gradient(xx, "y", "x")(0.0) == -np.inf == ta.grad(lambda x: x ** x)(0.0)


@pytest.mark.parametrize("point", [(0.3, -1.2, 2.0), (1.0, 1.0, -0.5), (2.0, 0.0, 0.0)])
def test_where_agrees_with_the_tape(point):
    """where(x > y, x * z, sin(y)): the branch taken; at a tie the second."""
    @sc.function(sc.arg("x", 3), outputs=sc.arg("y", ()))
    def f(v):
        return apply("where", v[0] > v[1], v[0] * v[2], v[1].sin())

    def t(v):
        c = _core.concrete(v[0]) > _core.concrete(v[1])
        return tnp.sum(_core.bind(OPS["where"].tape, np.array([c]), v[0:1] * v[2:3],
                                  tnp.sin(v[1:2])))
    x = np.array(point)
    _same(f(x), t(x), "value")
    _same(sc.gradient(f, "y", "x")(x), ta.grad(t)(x), "gradient")
    _same(sc.hessian(f, "y", "x")(x), ta.hessian(t)(x), "Hessian")


def test_where_condition_is_recomputed_on_replay():
    """A Function's tape replays at new points: the condition is an operand of
    the where node, not a constant of the first point."""
    @sc.function(sc.arg("x", 2), outputs=sc.arg("y", ()))
    def f(v):
        return apply("where", v[0] > v[1], v[0] * v[0], v[1])
    g = sc.gradient(f, "y", "x")
    for x in ([2.0, 1.0], [1.0, 2.0], [3.0, 0.0]):
        x = np.array(x)
        assert f(x) == (x[0] ** 2 if x[0] > x[1] else x[1])
        assert g(x).tolist() == ([2 * x[0], 0.0] if x[0] > x[1] else [0.0, 1.0])


# ---------------------------------------------------------------------------
# structural ops inside a smooth function
# ---------------------------------------------------------------------------

W = np.array([0.7, -1.3, 0.4, 2.1, -0.6, 1.1])


def _structural():
    """name -> (scaly body on x (6,), tape body on v (6,))."""
    from tapead.scaly.expr import gather, reshape, scatter
    from tapead.scaly.ops import transpose
    return {
        "sum": (lambda x: apply("sum", reshape(x, (2, 3)), axes=(1,)),
                lambda v: tnp.sum(tnp.reshape(v, (2, 3)), axis=(1,))),
        "reshape": (lambda x: reshape(x, (3, 2)), lambda v: tnp.reshape(v, (3, 2))),
        "gather": (lambda x: gather(x, (4, 0, 0, 2), (2, 2)),
                   lambda v: tnp.reshape(v[np.array([4, 0, 0, 2])], (2, 2))),
        "scatter": (lambda x: scatter(x, (1, 1, 3, 0, 5, 2), (7,)),
                    lambda v: tnp.at(np.zeros(7))[np.array([1, 1, 3, 0, 5, 2])].add(v)),
        "stack": (lambda x: sc.stack([x, x * x], axis=1),
                  lambda v: tnp.stack([v, v * v], axis=1)),
        "transpose": (lambda x: transpose(reshape(x, (2, 3)), (1, 0)),
                      lambda v: tnp.transpose(tnp.reshape(v, (2, 3)), (1, 0))),
        "matmul": (lambda x: apply("matmul", reshape(x, (2, 3)), reshape(x, (3, 2))),
                   lambda v: tnp.matmul(tnp.reshape(v, (2, 3)), tnp.reshape(v, (3, 2)))),
    }


@pytest.mark.parametrize("name", sorted(_structural()))
def test_structural_op_agrees_with_its_tape_counterpart(name):
    body_sc, body_ta = _structural()[name]

    @sc.function(sc.arg("x", 6), outputs=sc.arg("y", ()))
    def f(x):
        return (body_sc(x).sin()).sum()

    def t(v):
        return tnp.sum(tnp.sin(body_ta(v)))

    # the counterpart is what the tape records for the op
    tape, *_ = _record(body_ta, (W,), {}, 0, "test")
    op = np.asarray(tape.export_nodes()[0])
    prims = {tape.record(int(i)).prim for i in np.flatnonzero(op == 1)}
    assert OPS[name].tape in prims
    _same(f(W), t(W), "value")
    _same(sc.gradient(f, "y", "x")(W), ta.grad(t)(W), "gradient")
    _same(sc.hessian(f, "y", "x")(W), ta.hessian(t)(W), "Hessian")
