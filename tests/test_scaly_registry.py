"""Every scaly op names its primitive, and takes its rules from it.

Each ``tapead.scaly`` op names the primitive its ``fn`` records
(``OpRule.prim``).  The elementwise ops built by ``ops.from_primitive`` take
their VJP, JVP, batched JVP and ``diff`` flag from the primitive (its local
partials, its batching and its sparsity); the others keep rules of their own,
each with a stated reason (``OpRule.own``), and the list of them is fixed
here so that a change is deliberate.  Patterns come from the primitives'
sparsity rules on the lowered tape.

Every op is then compared with its primitive numerically: for each
elementwise op, Scaly's value, gradient and Hessian with the tape's (the C
kernel for scalars, the Python rule for arrays) at smooth points and at the
conventions of docs/nonsmooth.md (pow at 0, abs and sign at 0, sqrt at 0,
where); the batched forward rules with the tape's forward Jacobians,
broadcasting included; the structural ops (sum, reshape, gather, scatter,
stack, transpose, matmul) the same way inside a smooth function.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead import _core, patterns
from tapead._prims.base import BROADCAST, Primitive
from tapead.scaly import ops as sc_ops
from tapead.scaly.expr import OPS, apply
from tapead.program import Program


def _record(*args):
    """(tape, output) of a recording, as the transforms make it."""
    prog = Program.record(*args)
    return prog.tape, prog.out

#: ops without a primitive: leaves, and calls of other Functions
NO_PRIMITIVE = {"const", "input", "call", "vmap"}

#: ops whose rules are the primitive's (tapead.scaly.ops.from_primitive)
FROM_PRIMITIVE = {"add", "sub", "mul", "neg", "sin", "cos", "tan", "exp", "log", "sqrt", "tanh",
                  "abs", "sign",
                  "lt", "le", "gt", "ge", "eq", "ne"}
#: ops that keep rules of their own (the reason is OpRule.own)
OWN = {"div", "pow", "where",
       "sum", "reshape", "gather", "scatter", "stack", "transpose", "matmul",
       "scan", "while_loop", "cond", "custom_call", "print"}


def _table():
    """The ops tapead registers (tests may register ops of their own)."""
    return {name: rule for name, rule in OPS.items()
            if (getattr(rule.fn, "__module__", None) or "tapead").startswith("tapead")}


def test_every_op_names_its_primitive():
    for name, rule in _table().items():
        if name in NO_PRIMITIVE:
            assert rule.prim is None and rule.own is None, name
            continue
        assert isinstance(rule.prim, Primitive), (
            f"scaly op {name!r} does not name its primitive: register(..., prim=...)")
        assert rule.prim.sparsity is not None, (
            f"the primitive of scaly op {name!r} declares no sparsity rule")


def test_every_op_takes_its_rules_from_its_primitive_or_says_why_not():
    table = _table()
    assert set(table) == NO_PRIMITIVE | FROM_PRIMITIVE | OWN, (
        "an op was added or removed: put it in FROM_PRIMITIVE (ops.from_primitive) or "
        "in OWN (register(..., own=reason))")
    for name in FROM_PRIMITIVE:
        assert table[name].own is None, name
    for name in OWN:
        reason = table[name].own
        assert isinstance(reason, str) and len(reason) > 20, (name, reason)
    assert sc_ops.own_rules() == {n: table[n].own for n in OWN}


def _node(name):
    """The op applied to symbols of shape (2,): (node, operands)."""
    arity = len(OPS[name].prim.partials) if getattr(OPS[name].prim, "partials", None) \
        else 1
    xs = [sc.sym(f"reg_{name}_{k}", 2) for k in range(arity)]
    return apply(name, *xs), xs


DIFFERENTIABLE = sorted(n for n in FROM_PRIMITIVE if OPS[n].diff)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_derived_rules_read_the_primitive(name, monkeypatch):
    """Replace the primitive's partials by a marker: the scaly rules follow."""
    prim = OPS[name].prim
    node, xs = _node(name)
    g = sc.sym("reg_g", 2)
    ts = [sc.sym(f"reg_t{k}", 2) for k in range(len(xs))]
    marks = [sc.sym(f"reg_mark{k}", 2) for k in range(len(xs))]
    if getattr(prim, "partials", None) is not None:
        monkeypatch.setattr(prim, "partials",
                            tuple(lambda x, y, a, m=m: m * a for m in marks))
    else:
        monkeypatch.setattr(prim, "partial", lambda x, a: marks[0] * a)
    want = [m * node for m in marks]
    got = OPS[name].vjp(g, node)               # interned: identity is equality
    assert len(got) == len(want) and all(a is g * w for a, w in zip(got, want))
    tangent = None
    for t, w in zip(ts, want):
        tangent = t * w if tangent is None else tangent + t * w
    assert OPS[name].jvp(ts, node) is tangent
    k = 3
    many = [sc.sym(f"reg_many{j}", (k, 2)) for j in range(len(xs))]
    batched = None
    for t, w in zip(many, want):
        batched = t * w if batched is None else batched + t * w
    assert OPS[name].jvp_many(many, node, k) is batched


def test_derived_rules_follow_the_primitive_declarations():
    for name in FROM_PRIMITIVE:
        prim = OPS[name].prim
        if prim.sparsity is patterns.ZERO:       # no dependence: no derivative
            assert not OPS[name].diff and OPS[name].vjp is None, name
        else:
            assert prim.batching is BROADCAST and OPS[name].jvp_many is not None, name


def test_an_op_without_partials_is_refused():
    prim = Primitive("reg_opaque", np.cbrt, elementwise=True)
    from tapead._prims.base import defelementwise
    defelementwise(prim)
    with pytest.raises(TypeError, match="states no local partial"):
        sc_ops.from_primitive("reg_opaque", lambda ops, a: ops[0].type, np.cbrt, prim)
    assert "reg_opaque" not in OPS


def test_patterns_are_the_primitives_sparsity_rules(monkeypatch):
    """A pattern is found with the primitives' own rules: declaring stack's
    primitive dense makes the stacked rows depend on both elements."""
    x = sc.sym("reg_px", 3)
    y = sc.stack([x[0], x[1]]).sin()
    assert sc.jacobian_sparsity(y, x).to_mask().astype(int).tolist() == [[1, 0, 0],
                                                                         [0, 1, 0]]
    monkeypatch.setattr(OPS["stack"].prim, "sparsity", patterns.DENSE)
    x = sc.sym("reg_px_dense", 3)            # a new graph: no cached pattern
    y = sc.stack([x[0], x[1]]).sin()
    assert sc.jacobian_sparsity(y, x).to_mask().astype(int).tolist() == [[1, 1, 0],
                                                                         [1, 1, 0]]


# ---------------------------------------------------------------------------
# numpy's ufuncs on expressions: how the primitives' partials build expressions
# ---------------------------------------------------------------------------

def test_numpy_ufuncs_build_the_scaly_ops():
    x = sc.sym("reg_u", 2)
    assert np.cos(x) is x.cos() and np.sin(x) is x.sin() and np.sign(x) is apply("sign", x)
    assert np.abs(x) is abs(x) and np.negative(x) is -x and np.exp(x) is x.exp()


def test_numpy_operands_give_the_operators_expressions():
    """A numpy value on the left builds what Python's reflected operator built."""
    x = sc.sym("reg_v", 2)
    w = np.array([1.0, 2.0])
    assert np.float64(2.0) * x is 2.0 * x
    assert (w - x) is apply("sub", w, x)
    assert (w < x) is (x > w) and (w >= x) is (x <= w)
    assert np.multiply(x, w) is x * w


def test_other_ufuncs_on_expressions_are_refused():
    x = sc.sym("reg_w", 2)
    with pytest.raises(TypeError):
        np.arcsinh(x)                        # no Scaly op: numpy refuses
    with pytest.raises(TypeError):
        np.add(x, 1.0, out=np.zeros(2))      # an out= buffer cannot hold an expression
    with pytest.raises(TypeError):
        np.add.reduce(x)


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
def test_elementwise_op_agrees_with_its_primitive(name, point, kind):
    prim = OPS[name].prim
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


#: (name, operand shapes, point) for the batched forward rules: broadcasting
#: operands exercise the lifting of tangents
_BINARY_SHAPES = ([(3,), (3,)], [(3,), ()], [(), (3,)])
BATCHED = [(n, shapes) for n in ELEMENTWISE if OPS[n].diff
           for shapes in ([[(3,)]] if len(SMOOTH[n][0]) == 1 else _BINARY_SHAPES)]


@pytest.mark.parametrize("name, shapes", BATCHED, ids=[f"{n}-{s}" for n, s in BATCHED])
def test_batched_forward_agrees_with_the_primitive(name, shapes):
    """``jvp_many`` (every direction at once) against the tape's forward Jacobian."""
    sizes = [int(np.prod(s, dtype=int)) for s in shapes]
    offsets = np.cumsum([0] + sizes)
    n = int(offsets[-1])

    def pieces(v, reshape):
        return [reshape(v[offsets[k]:offsets[k + 1]], s) for k, s in enumerate(shapes)]

    @sc.function(sc.arg("x", n), outputs=sc.arg("y", 3))
    def f(x):
        return apply(name, *pieces(x, lambda e, s: e.reshape(s)))

    def t(v):
        return OPS[name].fn(*pieces(v, tnp.reshape))
    base = np.array([0.7, 1.3, 0.4, 1.1, 0.9, 1.6, 0.5][:n])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(sc.jacobian(f, "y", "x")(base), ta.jacfwd(t)(base), f"{name}{shapes}")


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
        return tnp.sum(_core.bind(OPS["where"].prim, np.array([c]), v[0:1] * v[2:3],
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
def test_structural_op_agrees_with_its_primitive(name):
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
    assert OPS[name].prim in prims
    _same(f(W), t(W), "value")
    _same(sc.gradient(f, "y", "x")(W), ta.grad(t)(W), "gradient")
    _same(sc.hessian(f, "y", "x")(W), ta.hessian(t)(W), "Hessian")
