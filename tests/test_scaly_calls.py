"""Call nodes and mapped calls (sc.vmap) in Scaly graphs."""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead.scaly.calls import callees, expand_calls
from tapead.scaly.graphs import topo_order


@sc.function(sc.G(sc.L("x", 1), sc.L("p", 1)), sc.L("c", ...))
def stage(inputs):
    x, p = inputs
    return (x * p).sin().sum()


def total_for(n):
    @sc.function(sc.L("w", n + 1), sc.L("cost", ...))
    def total(w):
        return sc.vmap(stage, n, [w[:n], w[n:]]).sum()
    return total


@sc.function(sc.G(sc.L("zz", 2), sc.L("p", 1)), sc.L("c", ...))
def link(inputs):
    zz, p = inputs
    return p[0] * (zz[1] - zz[0].sin()) ** 2


def chain_for(n):
    @sc.function(sc.G(sc.L("z", n + 1), sc.L("p", 1)), sc.L("cost", ...))
    def chain(inputs):
        z, p = inputs
        return sc.vmap(link, n, [(z, 0, 1), p]).sum()
    return chain


def test_call_nodes_are_printed_with_their_callee():
    @sc.function(sc.arg("x", ()))
    def g(x):
        return x.sin() * x

    @sc.function(sc.arg("x", ()))
    def f(x):
        return g(x * x) + g(x)

    text = sc.render_expr_assembly(f)
    assert 'expr.call(%1) {callee="g", output=0}' in text
    assert text.count("expr.func @g(") == 1 and text.index("@f(") < text.index("@g(")
    assert [c.name for c in callees(f.outputs)] == ["g"]
    x = 0.7
    assert f(x) == pytest.approx(np.sin(x * x) * x * x + np.sin(x) * x, rel=1e-15)
    df = sc.gradient(f, "out", "x")(x)
    assert df == pytest.approx(ta.grad(lambda x: tnp.sin(x * x) * x * x + tnp.sin(x) * x)(x),
                               rel=1e-14)
    assert all(n.op != "call" for n in topo_order(sc.gradient(f, "out", "x").outputs))


def test_nested_calls_expand_level_by_level():
    @sc.function(sc.arg("x", 2))
    def a(x):
        return (x * x).sum()

    @sc.function(sc.arg("x", 2))
    def b(x):
        return a(x * 2.0) + a(x)

    @sc.function(sc.arg("x", 2))
    def c(x):
        return b(x.sin())

    assert [f.name for f in callees(c.outputs)] == ["b", "a"]
    (flat,) = expand_calls(c.outputs)
    assert all(n.op not in ("call", "vmap") for n in topo_order([flat]))
    x = np.array([0.3, -1.2])
    assert c(x) == pytest.approx(5 * np.sum(np.sin(x) ** 2), rel=1e-14)
    np.testing.assert_allclose(sc.gradient(c, "out", "x")(x),
                               10 * np.sin(x) * np.cos(x), rtol=1e-14)


def test_call_argument_errors():
    @sc.function(sc.arg("x", 2))
    def a(x):
        return x.sum()
    with pytest.raises(sc.ScalyShapeError, match=r"expects shape \(2,\)"):
        a(sc.sym("y", 3))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_vmap_values_and_derivatives_match_a_loop(n):
    total = total_for(n)
    w = np.linspace(0.3, 1.9, n + 1)
    f = lambda w: tnp.sum(tnp.sin(w[:-1] * w[-1]))      # noqa: E731
    assert total(w) == pytest.approx(float(np.sum(np.sin(w[:-1] * w[-1]))), rel=1e-14)
    np.testing.assert_allclose(sc.gradient(total, "cost", "w")(w), ta.grad(f)(w),
                               rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(sc.hessian(total, "cost", "w")(w), ta.hessian(f)(w),
                               rtol=1e-13, atol=1e-14)


def test_vmap_windows_overlap_and_shared_inputs():
    n = 4
    chain = chain_for(n)
    z, p = np.array([0.1, -0.4, 0.8, 1.3, 0.2]), np.array([1.7])

    def ref(z, p):
        return p[0] * tnp.sum((z[1:] - tnp.sin(z[:-1])) ** 2)
    assert chain((z, p)) == pytest.approx(float(ref(z, p)), rel=1e-14)
    np.testing.assert_allclose(sc.gradient(chain, "cost", "z")((z, p)),
                               ta.grad(ref, argnums=0)(z, p), rtol=1e-14)
    np.testing.assert_allclose(sc.gradient(chain, "cost", "p")((z, p)),
                               ta.grad(ref, argnums=1)(z, p), rtol=1e-14)
    text = sc.render_expr_assembly(chain)
    assert ('expr.vmap(%0, %1) {callee="link", length=4, output=0, slice_size=1, '
            'starts=[0, 0], strides=[1, 0]} : tensor<4xfloat64 diff>') in text


def test_vmap_on_numbers_and_array_outputs():
    @sc.function(sc.arg("u", 2), outputs=sc.group(sc.arg("a", 2), sc.arg("b", ())))
    def two(u):
        return u * 2.0, u.sum()
    u = np.arange(6.0)
    a, b = sc.vmap(two, 3, [u])
    np.testing.assert_allclose(a, (u * 2).reshape(3, 2))
    np.testing.assert_allclose(b, u.reshape(3, 2).sum(axis=1))
    ue = sc.sym("u6", 6)
    ae, be = sc.vmap(two, 3, [ue])
    assert ae.shape == (3, 2) and be.shape == (3,)


def test_vmap_errors_say_what_to_pass():
    w = sc.sym("w", 5)
    with pytest.raises(sc.ScalyShapeError, match="one slice per stage"):
        sc.vmap(stage, 4, [w[:3], w[4:]])
    with pytest.raises(sc.ScalyShapeError, match="only 5 elements"):
        sc.vmap(link, 5, [(w, 0, 1), w[:1]])
    with pytest.raises(sc.LayoutError, match="2 input leaves"):
        sc.vmap(stage, 4, [w[:4]])
    with pytest.raises(ValueError, match="positive int"):
        sc.vmap(stage, 0, [w[:4], w[4:]])
    with pytest.raises(TypeError, match="sc.Function"):
        sc.vmap(lambda x: x, 4, [w[:4], w[4:]])


def test_derivatives_of_composed_functions_to_any_depth():
    @sc.function(sc.arg("u", 2))
    def inner(u):
        return (u[0] * u[1]).sin() + u[1] ** 3

    @sc.function(sc.arg("x", 2))
    def outer(x):
        return inner(x * 1.5) * x[0]

    def ref(x):
        u = x * 1.5
        return (tnp.sin(u[0] * u[1]) + u[1] ** 3) * x[0]

    x = np.array([0.4, -0.7])
    np.testing.assert_allclose(sc.hessian(outer, "out", "x")(x), ta.hessian(ref)(x),
                               rtol=1e-13)
    g = sc.gradient(outer, "out", "x")

    @sc.function(sc.arg("x", 2))
    def g0(x):                       # a derivative Function called inside a Function
        return g(x)[0]
    gg = sc.gradient(g0, "out", "x")
    np.testing.assert_allclose(gg(x), ta.hessian(ref)(x)[0], rtol=1e-13)
    # third order: the gradient of one entry of the gradient of that, twice over
    @sc.function(sc.arg("x", 2))
    def g01(x):
        return gg(x)[1]
    ggg = sc.gradient(g01, "out", "x")
    third = ta.jacfwd(lambda x: ta.hessian(ref)(x)[0, 1])(x)
    np.testing.assert_allclose(ggg(x), third, rtol=1e-12)
    assert "expr.call" in sc.render_expr_assembly(g01)
