"""Batched forward passes, Lagrangian Hessians and matmul in the Scaly graph API.

A batched forward pass must give exactly what one ``sc.forward`` call per
direction gives; the Lagrangian Hessian must equal the weighted sum of
per-output Hessians from tapead's own ``ta.hessian``.
"""
import numpy as np
import pytest

import tapead.scaly as sc
from tapead.errors import MissingRuleError
from tapead.scaly.expr import OPS, apply
from tapead.scaly.graphs import topo_order
from tapead.scaly.ops import register

STRICT = ("TAPEAD_STRICT_JVP_MANY", "SCALY_STRICT_JVP_MANY")


@pytest.fixture(autouse=True)
def _lenient(monkeypatch):
    for name in STRICT:
        monkeypatch.delenv(name, raising=False)


def mixed_function():
    """Every op with a batched rule: broadcasting, sums, gathers, stacks, pow."""
    @sc.function(sc.arg("x", (2, 3)), sc.arg("a", 3), outputs=sc.arg("y", ...))
    def f(x, a):
        b = (x * a).sin() + a.exp() / (1.5 + x * x)
        c = (b.sum(axis=0) - a).tanh() * x[1] ** 3
        d = sc.stack([c[0] * c[2], (c[1] - b[0, 2]).cos(), -c[2].sqrt().abs()])
        e = (x.reshape(6)[::2] * 0.5 + d).log() + b.sum()
        return sc.stack([e, d * a], axis=1)
    return f


def per_direction(fwd1, xv, av, seeds):
    return np.stack([fwd1(xv, av, s) for s in seeds])


@pytest.mark.parametrize("k", [1, 3])
def test_batched_forward_equals_separate_forward_calls(k):
    f = mixed_function()
    rng = np.random.default_rng(k)
    xv, av = rng.uniform(0.2, 1.0, (2, 3)), rng.uniform(0.2, 1.0, 3)
    seeds = rng.standard_normal((k, 2, 3))
    many = sc.forward(f, "y", "x", directions=k)
    assert many.input_names == ["x", "a", "seed_x"]
    out = many(xv, av, seeds)
    assert out.shape == (k, 3, 2)
    expected = per_direction(sc.forward(f, "y", "x"), xv, av, seeds)
    np.testing.assert_allclose(out, expected, rtol=1e-15, atol=1e-15)
    # with respect to the broadcast operand too
    many_a = sc.forward(f, "y", "a", directions=k)
    sa = rng.standard_normal((k, 3))
    np.testing.assert_allclose(many_a(xv, av, sa), per_direction(sc.forward(f, "y", "a"),
                                                                   xv, av, sa),
                               rtol=1e-15, atol=1e-15)


def test_batched_forward_l_style_scalar_input():
    @sc.function(sc.L("x", ()), sc.L("y", ...))
    def f(x):
        return (x * x).sin()
    many = sc.forward(f, "y", "x", directions=4)
    seeds = np.array([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(many((1.3, seeds)), 2 * 1.3 * np.cos(1.3 * 1.3) * seeds,
                               rtol=1e-14)


def test_batched_forward_shares_direction_independent_work():
    """The graph does not grow with the number of directions: one cosine per sine."""
    f = mixed_function()
    sizes = []
    for k in (1, 2, 5):
        g = sc.forward(f, "y", "x", directions=k)
        nodes = topo_order(g.simplified_outputs())
        sizes.append(len(nodes))
        assert sum(n.op == "cos" for n in nodes) == 2    # sin'(x*a), and the cos node's own
    assert sizes[0] == sizes[1] == sizes[2]


def test_directions_must_be_a_positive_int():
    with pytest.raises(ValueError, match="positive int"):
        sc.forward(mixed_function(), "y", "x", directions=0)


# an op that is only used here and keeps no batched rule: the fallback path
register("test_cube", lambda ops, a: ops[0].type, lambda x: x * x * x,
         vjp=lambda g, n: [g * 3.0 * n.operands[0] * n.operands[0]],
         jvp=lambda ts, n: ts[0] * (3.0 * n.operands[0] * n.operands[0]))


def cube_function():
    @sc.function(sc.arg("x", 3), outputs=sc.arg("y", ...))
    def f(x):
        return apply("test_cube", x.sin()) * 2.0
    return f


def test_missing_batched_rule_falls_back_to_one_pass_per_direction():
    assert OPS["test_cube"].jvp_many is None
    f = cube_function()
    xv = np.array([0.1, 0.7, -1.2])
    seeds = np.eye(3)[:2] + 0.25
    many = sc.forward(f, "y", "x", directions=2)
    np.testing.assert_allclose(many(xv, seeds),
                               per_direction_1(sc.forward(f, "y", "x"), xv, seeds),
                               rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(many(xv, seeds),
                               seeds * 6 * np.sin(xv) ** 2 * np.cos(xv), rtol=1e-14)


def per_direction_1(fwd1, xv, seeds):
    return np.stack([fwd1(xv, s) for s in seeds])


@pytest.mark.parametrize("name", STRICT)
def test_strict_variable_turns_the_fallback_into_an_error(monkeypatch, name):
    monkeypatch.setenv(name, "1")
    with pytest.raises(MissingRuleError, match="test_cube"):
        sc.forward(cube_function(), "y", "x", directions=2)
    # ops with a batched rule are unaffected
    assert sc.forward(mixed_function(), "y", "x", directions=2) is not None
    monkeypatch.setenv(name, "0")
    assert sc.forward(cube_function(), "y", "x", directions=2) is not None


# ---------------------------------------------------------------------------
# Lagrangian Hessians: one reverse pass over the weighted sum of the outputs
# ---------------------------------------------------------------------------

def constraints_scaly():
    @sc.function(sc.arg("x", 3), outputs=sc.arg("c", ...))
    def c(x):
        return sc.stack([x[0] * x[1] * x[2], (x[0] * x[2]).sin() + x[1] ** 3,
                         (x * x).sum().sqrt(), x[2].exp() / (1.0 + x[0] ** 2)])
    return c


def constraints_tapead(x):
    import tapead.numpy as tnp
    return tnp.stack([x[0] * x[1] * x[2], tnp.sin(x[0] * x[2]) + x[1] ** 3,
                      tnp.sqrt(tnp.sum(x * x)), tnp.exp(x[2]) / (1.0 + x[0] ** 2)])


def test_lagrangian_hessian_equals_weighted_sum_of_tapead_hessians():
    import tapead as ta
    c = constraints_scaly()
    lag = sc.hessian(c, "c", "x", weights=True)
    assert lag.input_names == ["x", "weights_c"]
    assert lag.output_names == ["hess_c_x"]
    rng = np.random.default_rng(7)
    for _ in range(3):
        xv, wv = rng.uniform(0.3, 1.2, 3), rng.standard_normal(4)
        expected = sum(wv[i] * np.asarray(ta.hessian(
            lambda x, i=i: constraints_tapead(x)[i])(xv)) for i in range(4))
        np.testing.assert_allclose(lag(xv, wv), expected, rtol=1e-12, atol=1e-12)


def test_lagrangian_hessian_is_one_reverse_pass_and_named_weights(monkeypatch):
    from tapead.scaly import derivatives
    calls = []
    real = derivatives.reverse_adjoints
    monkeypatch.setattr(derivatives, "reverse_adjoints",
                        lambda *a: calls.append(a) or real(*a))
    c = constraints_scaly()
    lag = sc.hessian(c, "c", "x", weights="lam")
    assert len(calls) == 1 and calls[0][0] is c.output("c")
    assert lag.input_names == ["x", "lam"]
    # unit weights pick out one output's Hessian
    xv = np.array([0.4, 0.9, 1.1])
    h1 = lag(xv, np.array([0.0, 1.0, 0.0, 0.0]))
    x0, x1, x2 = xv
    s = np.sin(x0 * x2)
    expected = np.array([[-x2 * x2 * s, 0.0, np.cos(x0 * x2) - x0 * x2 * s],
                         [0.0, 6 * x1, 0.0],
                         [np.cos(x0 * x2) - x0 * x2 * s, 0.0, -x0 * x0 * s]])
    np.testing.assert_allclose(h1, expected, rtol=1e-13, atol=1e-13)
    with pytest.raises(sc.NonScalarGradientError, match="weights=True"):
        sc.hessian(c, "c", "x")
    with pytest.raises(TypeError, match="weights"):
        sc.hessian(c, "c", "x", weights=3)


def test_lagrangian_hessian_l_style():
    @sc.function(sc.L("x", 2), sc.L("y", ...))
    def f(x):
        return sc.stack([x[0] * x[1], x[0] ** 2])
    lag = sc.hessian(f, "y", "x", weights=True)
    np.testing.assert_allclose(lag((np.array([1.0, 2.0]), np.array([3.0, 5.0]))),
                               [[10.0, 3.0], [3.0, 0.0]], rtol=1e-15)


# ---------------------------------------------------------------------------
# @ on expressions (1-d and 2-d), checked against ta.grad
# ---------------------------------------------------------------------------

CASES = [((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 4)), ((3,), (3,))]


def _weights(shape):
    return np.linspace(-1.0, 1.5, int(np.prod(shape))).reshape(shape)


@pytest.mark.parametrize("sa,sb", CASES)
def test_matmul_value_gradient_and_forward(sa, sb):
    import tapead as ta
    import tapead.numpy as tnp
    out_shape = np.empty(sa)[..., :].__matmul__(np.empty(sb)).shape
    w = _weights(out_shape)

    @sc.function(sc.arg("a", sa), sc.arg("b", sb), outputs=sc.arg("y", ...))
    def f(a, b):
        return ((a.sin() @ b) * w).sum() + (a @ b.cos()).sum() ** 2

    def f_ta(a, b):
        return tnp.sum(tnp.matmul(tnp.sin(a), b) * w) + tnp.sum(tnp.matmul(a, tnp.cos(b))) ** 2

    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    av, bv = rng.standard_normal(sa), rng.standard_normal(sb)
    np.testing.assert_allclose(f(av, bv), np.sum((np.sin(av) @ bv) * w)
                               + np.sum(av @ np.cos(bv)) ** 2, rtol=1e-14)
    for name, argnum in (("a", 0), ("b", 1)):
        expected = ta.grad(f_ta, argnums=argnum)(av, bv)
        np.testing.assert_allclose(sc.gradient(f, "y", name)(av, bv), expected,
                                   rtol=1e-13, atol=1e-13)
    # forward mode, one direction and batched, through both operands
    k = 3
    sa_dirs = rng.standard_normal((k,) + sa)
    ga = ta.grad(f_ta, argnums=0)(av, bv)
    one = sc.forward(f, "y", "a")
    many = sc.forward(f, "y", "a", directions=k)
    np.testing.assert_allclose(many(av, bv, sa_dirs),
                               [one(av, bv, s) for s in sa_dirs], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(many(av, bv, sa_dirs),
                               [np.sum(ga * s) for s in sa_dirs], rtol=1e-12, atol=1e-12)
    sb_dirs = rng.standard_normal((k,) + sb)
    one_b = sc.forward(f, "y", "b")
    many_b = sc.forward(f, "y", "b", directions=k)
    np.testing.assert_allclose(many_b(av, bv, sb_dirs),
                               [one_b(av, bv, s) for s in sb_dirs], rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("sa,sb", CASES)
def test_matmul_vector_output_batched_forward_and_hessian(sa, sb):
    import tapead as ta
    import tapead.numpy as tnp
    b_const = _weights(sb)

    @sc.function(sc.arg("a", sa), outputs=sc.arg("y", ...))
    def f(a):
        return (a @ b_const).sin() * (a.T @ a).sum()

    k = 2
    rng = np.random.default_rng(3)
    av = rng.standard_normal(sa)
    dirs = rng.standard_normal((k,) + sa)
    one, many = sc.forward(f, "y", "a"), sc.forward(f, "y", "a", directions=k)
    np.testing.assert_allclose(many(av, dirs), np.stack([one(av, s) for s in dirs]),
                               rtol=1e-15, atol=1e-15)

    @sc.function(sc.arg("a", sa), outputs=sc.arg("s", ...))
    def g(a):
        return ((a @ b_const).sin()).sum()
    hess = sc.hessian(g, "s", "a")(av)
    expected = ta.hessian(lambda a: tnp.sum(tnp.sin(tnp.matmul(tnp.reshape(a, sa), b_const))))(
        av.reshape(-1))
    np.testing.assert_allclose(hess, expected, rtol=1e-12, atol=1e-12)


def test_matmul_with_numpy_operands_and_shape_errors():
    m = np.arange(6.0).reshape(2, 3)
    x = sc.sym("x", 3)
    assert (m @ x).shape == (2,) and (x @ m.T).shape == (2,)
    assert x.T is x
    with pytest.raises(sc.ScalyShapeError, match="do not match"):
        x @ m
    with pytest.raises(sc.ScalyShapeError, match="1-d and 2-d"):
        sc.sym("t", (2, 2, 2)) @ x[:2]
