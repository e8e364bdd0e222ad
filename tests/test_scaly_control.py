"""Scaly's control-flow page: every program prints what the page prints.

The programs are in ``scaly_control_programs`` (as on the page); options,
derivatives and errors of the loops are tested in
``test_scaly_control_loops.py``, ``test_scaly_control_branches.py``,
``test_scaly_control_combined.py`` and ``test_scaly_control_evaluation.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapead.scaly as sc
from tapead.scaly.graphs import topo_order
from scaly_control_programs import (absolute_root, model, numpy_rollout, printed_rollout,
                                    printed_step, root, rollout)


def test_rollout_prints_the_page(capsys):
    final, cost = rollout(np.array([1.0, 0.0]), np.zeros(20))
    print(final, cost)
    assert capsys.readouterr().out == "[1. 0.] 20.0\n"


def test_rollout_matches_numpy_at_other_inputs():
    rng = np.random.default_rng(0)
    x0, u = rng.normal(size=2), rng.normal(size=20)
    final, cost = rollout(x0, u)
    ref_final, ref_cost = numpy_rollout(x0, u)
    np.testing.assert_allclose(final, ref_final, rtol=1e-14)
    assert cost == pytest.approx(ref_cost, rel=1e-14)


def test_root_prints_the_page(capsys):
    print(root(np.array(2.0)))
    assert capsys.readouterr().out == "1.414213562373095\n"


def test_absolute_root_prints_the_page(capsys):
    print(absolute_root(np.array(-4.0)))
    print(sc.gradient(absolute_root, "root", "x")(np.array(-4.0)))
    assert capsys.readouterr().out == "2.0\n-0.25\n"


def test_derivatives_print_the_page(capsys):
    control_gradient = sc.gradient(rollout, "cost", "controls")
    print(control_gradient(np.array([1.0, 0.0]), np.zeros(20)).shape)
    root_derivative = sc.gradient(root, "root", "a")
    root_second_derivative = sc.hessian(root, "root", "a")
    print(root_derivative(np.array(2.0)))
    print(root_second_derivative(np.array(2.0)))
    assert capsys.readouterr().out == ("(20,)\n0.35355339059327373\n[[-0.08838835]]\n")


def test_printed_gradient_prints_the_page(capsys):
    printed_gradient = sc.gradient(printed_rollout, "final", "initial")
    print(printed_gradient(np.array(1.0)))
    assert capsys.readouterr().out == "x=1\nx=2\nx=5\nx=5\nx=2\nx=1\n80.0\n"
    print(printed_gradient(np.array(1.0)))             # re-evaluation prints again
    assert capsys.readouterr().out == "x=1\nx=2\nx=5\nx=5\nx=2\nx=1\n80.0\n"


def test_value_and_gradient_runs_the_primal_loop_once(capsys):
    grad = sc.gradient(printed_rollout, "final", "initial")

    @sc.function(sc.arg("initial", ()),
                 outputs=sc.group(sc.arg("final", ()), sc.arg("slope", ())))
    def value_and_slope(initial):
        return printed_rollout(initial), grad(initial)

    value, slope = value_and_slope(np.array(1.0))
    assert (float(value), float(slope)) == (26.0, 80.0)
    assert capsys.readouterr().out == "x=1\nx=2\nx=5\nx=5\nx=2\nx=1\n"


def test_the_listing_shows_one_loop_node_and_its_body():
    text = sc.render_expr_assembly(rollout)
    assert 'expr.scan(%0, %1) {callee="model", length=20, output=0} : tensor<2xfloat64 diff>' \
        in text
    assert 'expr.scan(%0, %1) {callee="model", length=20, output=1} : tensor<20xfloat64 diff>' \
        in text
    assert text.count("expr.func @model(") == 1 and text.index("@rollout(") < \
        text.index("@model(")
    grad = sc.render_expr_assembly(sc.gradient(rollout, "cost", "controls"))
    assert 'callee="model_rev", length=20, output=1, reverse=true' in grad
    assert "expr.func @model_rev(" in grad


def _rollout_of_length(n):
    @sc.function(sc.arg("x0", 2), sc.arg("controls", n),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def long_rollout(x0, controls):
        final, (costs,) = sc.scan(model, x0, (controls,), length=n)
        return final, costs.sum()
    return long_rollout


def _unrolled_of_length(n):
    @sc.function(sc.arg("x0", 2), sc.arg("controls", n),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def unrolled(x0, controls):
        x, cost = x0, 0.0
        for k in range(n):
            cost = cost + sc.sumsqr(x)
            x = x + 0.1 * sc.stack([x[1], controls[k]])
        return x, cost
    return unrolled


def test_graph_size_does_not_depend_on_the_number_of_steps():
    short, long = _rollout_of_length(20), _rollout_of_length(200)
    assert short.n_nodes == long.n_nodes
    gs, gl = (sc.gradient(f, "cost", "controls") for f in (short, long))
    assert gs.n_nodes == gl.n_nodes
    hs, hl = (sc.hessian(f, "cost", "x0") for f in (short, long))
    assert hs.n_nodes == hl.n_nodes
    # the lowered program too: one loop node and one node per output read
    x0 = np.array([0.3, -0.2])
    short(x0, np.zeros(20)), long(x0, np.zeros(200))
    assert short._programs[True].n_nodes == long._programs[True].n_nodes
    # a Python loop in the body is unrolled instead
    assert _unrolled_of_length(200).n_nodes > 9 * _unrolled_of_length(20).n_nodes


def test_rollout_derivatives_match_the_unrolled_function(monkeypatch):
    monkeypatch.setenv("TAPEAD_STRICT_JVP_MANY", "1")    # Jacobians run batched loops
    rng = np.random.default_rng(1)
    x0, u = rng.normal(size=2), rng.normal(size=20)
    unrolled = _unrolled_of_length(20)
    for out, inp in (("cost", "controls"), ("cost", "x0")):
        np.testing.assert_allclose(sc.gradient(rollout, out, inp)(x0, u),
                                   sc.gradient(unrolled, out, inp)(x0, u),
                                   rtol=1e-12, atol=1e-13)
    for out, inp in (("final", "controls"), ("final", "x0")):
        np.testing.assert_allclose(sc.jacobian(rollout, out, inp)(x0, u),
                                   sc.jacobian(unrolled, out, inp)(x0, u),
                                   rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sc.hessian(rollout, "cost", "x0")(x0, u),
                               sc.hessian(unrolled, "cost", "x0")(x0, u),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sc.hessian(rollout, "cost", "controls")(x0, u),
                               sc.hessian(unrolled, "cost", "controls")(x0, u),
                               rtol=1e-12, atol=1e-12)


def test_root_derivatives_match_finite_differences_and_the_closed_form():
    a, eps = 2.0, 1e-5
    d = float(sc.gradient(root, "root", "a")(np.array(a)))
    assert d == pytest.approx(0.5 / np.sqrt(a), rel=1e-14)
    fd = (float(root(np.array(a + eps))) - float(root(np.array(a - eps)))) / (2 * eps)
    assert d == pytest.approx(fd, rel=1e-8)
    h = sc.hessian(root, "root", "a")(np.array(a))
    assert h.shape == (1, 1)
    assert h[0, 0] == pytest.approx(-0.25 * a ** -1.5, rel=1e-12)
    fwd = sc.forward(root, "root", "a")(np.array(a), np.array(1.0))
    assert float(fwd) == pytest.approx(d, rel=1e-14)


def test_absolute_root_both_branches():
    for x in (-4.0, 9.0, 0.25):
        assert float(absolute_root(np.array(x))) == pytest.approx(np.sqrt(abs(x)), rel=1e-15)
        g = float(sc.gradient(absolute_root, "root", "x")(np.array(x)))
        assert g == pytest.approx(np.sign(x) * 0.5 / np.sqrt(abs(x)), rel=1e-15)
        f = float(sc.forward(absolute_root, "root", "x")(np.array(x), np.array(1.0)))
        assert f == pytest.approx(g, rel=1e-15)
        h = sc.hessian(absolute_root, "root", "x")(np.array(x))
        assert h[0, 0] == pytest.approx(-0.25 * abs(x) ** -1.5, rel=1e-13)


def test_the_gradient_graph_has_no_expanded_steps():
    grad = sc.gradient(rollout, "cost", "controls")
    ops = [n.op for n in topo_order(grad.outputs)]
    assert ops.count("scan") == 2 and "stack" not in ops


def test_printed_step_alone_prints_once(capsys):
    assert float(printed_step(np.array(3.0))) == 10.0
    assert capsys.readouterr().out == "x=3\n"
