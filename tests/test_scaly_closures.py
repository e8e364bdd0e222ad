"""Closures in the graph API's loops and branches: a body Function defined
while another Function's body is traced may use that Function's inputs
without declaring them; ``sc.scan`` passes them in as ``sc.broadcast``
inputs, ``sc.while_loop`` as ``params``, ``sc.cond`` as further operands.
The closure form gives what the explicit form gives (values, gradients,
forward derivatives, Hessians), checkpointed or not, and the checkpointed
backward loop still stores at most ``checkpoints`` carries."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead.scaly as sc
from tapead.checkpointing import optimal_forward_steps
from tapead.scaly.graphs import topo_order

B = sc.TensorType((), sc.dtypes.bool_)

#: one operation of a body: (s, u, a, b) -> new s (scalars, smooth)
OPS = [
    lambda s, u, a, b: s * a + u,
    lambda s, u, a, b: (s + a).sin() * b,
    lambda s, u, a, b: (s * 0.5).tanh() * a + b * u,
    lambda s, u, a, b: s + 0.1 * a * b * (s * u).cos(),
    lambda s, u, a, b: s / (a * a + 1.5) + b,
]


def _apply(ops, s, u, a, b):
    for k in ops:
        s = OPS[k](s, u, a, b)
    return s * 0.5


def _scan_pair(ops, T, ck):
    U = np.linspace(-1.0, 1.0, T)

    @sc.function(sc.arg("x", ()), sc.arg("a", ()), sc.arg("b", ()),
                 outputs=sc.arg("y", ()))
    def closed(x, a, b):
        @sc.function(sc.arg("s", ()), sc.arg("u", ()))
        def body(s, u):
            return _apply(ops, s, u, a, b), s * a
        s, (ys,) = sc.scan(body, x, (sc.const(U),), length=T, checkpoints=ck)
        return s * s + ys.sum()

    @sc.function(sc.arg("s", ()), sc.arg("u", ()), sc.arg("a", ()), sc.arg("b", ()))
    def body(s, u, a, b):
        return _apply(ops, s, u, a, b), s * a

    @sc.function(sc.arg("x", ()), sc.arg("a", ()), sc.arg("b", ()),
                 outputs=sc.arg("y", ()))
    def explicit(x, a, b):
        s, (ys,) = sc.scan(body, x, (sc.const(U), sc.broadcast(a), sc.broadcast(b)),
                           length=T, checkpoints=ck)
        return s * s + ys.sum()
    return closed, explicit


def _same(f1, f2, args, inputs=("x", "a", "b")):
    np.testing.assert_allclose(f1(*args), f2(*args), rtol=1e-13, atol=1e-14)
    for inp in inputs:
        np.testing.assert_allclose(sc.gradient(f1, "y", inp)(*args),
                                   sc.gradient(f2, "y", inp)(*args), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(sc.forward(f1, "y", inp)(*args, 1.0),   # seed 1
                                   sc.forward(f2, "y", inp)(*args, 1.0), rtol=1e-13,
                                   atol=1e-14)
    np.testing.assert_allclose(sc.hessian(f1, "y", "a")(*args),
                               sc.hessian(f2, "y", "a")(*args), rtol=1e-12, atol=1e-13)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, len(OPS) - 1), min_size=1, max_size=3),
       st.integers(1, 7), st.sampled_from([None, 1, 2, 4]),
       st.floats(-1.0, 1.0), st.floats(0.2, 1.2), st.floats(-1.0, 1.0))
def test_scan_closure_equals_broadcast_inputs(ops, T, ck, x, a, b):
    closed, explicit = _scan_pair(ops, T, ck)
    _same(closed, explicit, (np.float64(x), np.float64(a), np.float64(b)))


@pytest.mark.parametrize("ck", [None, 3])
def test_while_loop_and_cond_closures(ck):
    def build(closed):
        @sc.function(sc.arg("x", ()), sc.arg("a", ()), outputs=sc.arg("y", ()))
        def outer(x, a):
            if closed:
                @sc.function(sc.arg("s", ()), outputs=sc.arg("go", B))
                def cond(s):
                    return s < a * 3.0

                @sc.function(sc.arg("s", ()))
                def body(s):
                    return s + (s * a).cos() * 0.5 + a

                @sc.function(sc.arg("s", ()), outputs=sc.arg("r", ()))
                def small(s):
                    return s * a

                @sc.function(sc.arg("s", ()), outputs=sc.arg("r", ()))
                def large(s):
                    return (s + a).sin()
                s, _ = sc.while_loop(cond, body, x, max_iter=50, checkpoints=ck)
                return sc.cond(s > 4.0, (small, large), s)

            @sc.function(sc.arg("s", ()), sc.arg("a", ()), outputs=sc.arg("go", B))
            def cond(s, a):
                return s < a * 3.0

            @sc.function(sc.arg("s", ()), sc.arg("a", ()))
            def body(s, a):
                return s + (s * a).cos() * 0.5 + a

            @sc.function(sc.arg("s", ()), sc.arg("a", ()), outputs=sc.arg("r", ()))
            def small(s, a):
                return s * a

            @sc.function(sc.arg("s", ()), sc.arg("a", ()), outputs=sc.arg("r", ()))
            def large(s, a):
                return (s + a).sin()
            s, _ = sc.while_loop(cond, body, x, max_iter=50, params=(a,), checkpoints=ck)
            return sc.cond(s > 4.0, (small, large), s, a)
        return outer
    for a in (1.2, 1.6):
        _same(build(True), build(False), (np.float64(0.3), np.float64(a)), ("x", "a"))


def test_nested_closures_three_levels():
    @sc.function(sc.arg("x", ()), sc.arg("a", ()), outputs=sc.arg("y", ()))
    def outer(x, a):
        @sc.function(sc.arg("s", ()))
        def mid(s):
            @sc.function(sc.arg("t", ()))
            def inner(t):                    # captures mid's s and outer's a
                return (t * s + a).sin()
            t, _ = sc.scan(inner, s, (), length=3, checkpoints=2)
            return t * a
        s, _ = sc.scan(mid, x, (), length=4, checkpoints=2)
        return s

    def ref(x, a):
        for _ in range(4):
            t = x
            for _ in range(3):
                t = np.sin(t * x + a)
            x = t * a
        return x
    assert outer(0.3, 0.7) == pytest.approx(ref(0.3, 0.7), rel=1e-15)
    h = 1e-6
    for k, inp in enumerate(("x", "a")):
        e = np.eye(2)[k] * h
        fd = (ref(0.3 + e[0], 0.7 + e[1]) - ref(0.3 - e[0], 0.7 - e[1])) / (2 * h)
        assert sc.gradient(outer, "y", inp)(0.3, 0.7) == pytest.approx(fd, rel=1e-6, abs=1e-9)
        assert sc.forward(outer, "y", inp)(0.3, 0.7, 1.0) == pytest.approx(
            sc.gradient(outer, "y", inp)(0.3, 0.7), rel=1e-13)


def test_a_captured_name_taken_by_a_parameter_is_renamed():
    @sc.function(sc.arg("s", 2), sc.arg("a", 2), outputs=sc.arg("y", ()))
    def outer(s, a):
        @sc.function(sc.arg("s", ()), sc.arg("a", ()))     # the names, other shapes
        def body(c, u):
            return c * u + a[0] * c.sin() + a[1]
        c, _ = sc.scan(body, s.sum(), (sc.const(np.array([0.5, 1.5])),), length=2,
                       checkpoints=1)
        return c
    def ref(a):
        c = 0.7 + 0.1
        for u in (0.5, 1.5):
            c = c * u + a[0] * np.sin(c) + a[1]
        return c
    a = np.array([0.4, -0.2])
    assert outer(np.array([0.7, 0.1]), a) == pytest.approx(ref(a), rel=1e-15)
    g = sc.gradient(outer, "y", "a")(np.array([0.7, 0.1]), a)
    fd = [(ref(a + e) - ref(a - e)) / 2e-6 for e in np.eye(2) * 1e-6]
    np.testing.assert_allclose(g, fd, rtol=1e-8)


def test_checkpointed_closure_keeps_the_budget():
    T, s = 60, 3

    @sc.function(sc.arg("x", ()), sc.arg("a", ()), outputs=sc.arg("y", ()))
    def outer(x, a):
        @sc.function(sc.arg("c", ()), sc.arg("u", ()))
        def body(c, u):
            return (c * a).sin() + u, c * c
        c, (ys,) = sc.scan(body, x, (sc.const(np.linspace(0, 1, T)),), length=T,
                           checkpoints=s)
        return c + ys.sum()
    grad = sc.gradient(outer, "y", "a")
    grad(0.3, 0.9)
    spec = next(n.attrs["spec"] for n in topo_order(grad.outputs)
                if n.op == "scan" and n.attrs["spec"].recompute is not None)
    sweep = spec._derived["sweep"]
    assert sweep["snapshots"] == s and sweep["backward_steps"] == T
    assert sweep["forward_steps"] == optimal_forward_steps(T, s)


def test_captured_functions_are_refused_elsewhere():
    with pytest.raises(sc.LayoutError, match="sc.vmap cannot pass them in"):
        @sc.function(sc.arg("x", 2), sc.arg("a", ()))
        def mapped(x, a):
            @sc.function(sc.L("z", 1), sc.L("y", ...))
            def stage(z):
                return (z * a).sum()
            return sc.vmap(stage, 2, [x])
    with pytest.raises(sc.LayoutError, match="a call cannot pass them in"):
        @sc.function(sc.arg("x", ()), sc.arg("a", ()))
        def calls(x, a):
            @sc.function(sc.arg("z", ()))
            def g(z):
                return z * a
            return g(x)
    z = sc.sym("z", ())
    with pytest.raises(sc.LayoutError, match="'z' that are not inputs"):
        @sc.function(sc.arg("x", ()))
        def outer(x):                       # z is nobody's input: the outer refuses
            @sc.function(sc.arg("s", ()))
            def body(s):
                return s * z
            return sc.scan(body, x, (), length=2)[0]
