"""The worked examples of seeds 001 and 004, computed by tapead."""
import math

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp


def f(x, y):
    return x * y + tnp.sin(x)


def test_forward_mode_two_passes():
    value, dx = ta.jvp(f, (1.0, 2.0), (1.0, 0.0))
    _, dy = ta.jvp(f, (1.0, 2.0), (0.0, 1.0))
    assert value == pytest.approx(2.0 + math.sin(1.0), rel=1e-15)
    assert dx == pytest.approx(2.0 + math.cos(1.0), rel=1e-15)
    assert round(dx, 4) == 2.5403 and dy == 1.0


def test_reverse_mode_one_sweep():
    tape_values = []

    def g(x, y):
        out = f(x, y)
        tape_values.append(out.tape.n_nodes)
        return out
    gx, gy = ta.grad(g, argnums=(0, 1))(1.0, 2.0)
    assert gx == 2.0 + math.cos(1.0) and gy == 1.0
    assert tape_values == [5]          # v0..v4 of seed 004's tape


def test_vjp_example():
    out, pullback = ta.vjp(lambda x, y: (x * y, tnp.sin(x)), 1.0, 2.0)
    assert out == (2.0, math.sin(1.0))
    u = pullback((2.0, -1.0))
    assert u[0] == pytest.approx(4.0 - math.cos(1.0), rel=1e-15)
    assert round(u[0], 4) == 3.4597 and u[1] == 2.0


def test_hvp_example():
    hv = ta.hvp(f, (1.0, 2.0), (1.0, 0.0))
    assert hv[0] == pytest.approx(-math.sin(1.0), rel=1e-15)
    assert round(hv[0], 7) == -0.8414710 and hv[1] == 1.0


def program(x1, x2):
    a = x1 * x2
    for i in range(2):
        a = a + (x2 ** 2)
    return tnp.log(a)


def test_lecture_program_with_loop():
    x1, x2 = 1.5, 2.0
    z7 = x1 * x2 + 2 * x2 ** 2
    g1, g2 = ta.grad(program, argnums=(0, 1))(x1, x2)
    assert g1 == pytest.approx(x2 / z7, rel=1e-15)
    assert g2 == pytest.approx((x1 + 4 * x2) / z7, rel=1e-15)
    # forward mode with the seed direction of the lecture's table
    _, t = ta.jvp(program, (x1, x2), (1.0, 0.0))
    assert t == pytest.approx(g1, rel=1e-15)
    rec = ta.record(program, x1, x2)
    assert rec.n_nodes == 8            # z1..z8 of the unrolled graph


def test_jacobian_example():
    def F(x):
        return tnp.stack([x[0] ** 2 + x[1] ** 2, x[0] * x[1]])
    x = np.array([1.5, -0.5])
    expected = np.array([[2 * x[0], 2 * x[1]], [x[1], x[0]]])
    np.testing.assert_array_equal(ta.jacfwd(F)(x), expected)
    np.testing.assert_array_equal(ta.jacrev(F)(x), expected)
    # JVP gives a column, VJP a row
    _, col = ta.jvp(F, (x,), (np.array([1.0, 0.0]),))
    np.testing.assert_array_equal(col, expected[:, 0])
    _, pb = ta.vjp(F, x)
    np.testing.assert_array_equal(pb(np.array([1.0, 0.0]))[0], expected[0])


def test_sum_sin_gradient_matches_hand_derivative():
    rng = np.random.default_rng(3)
    xs = [float(v) for v in rng.standard_normal(50)]

    def h(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + tnp.sin(x[i]) * x[i + 1]
        return s
    g = np.array(ta.grad(h)(xs))
    x = np.array(xs)
    expected = np.zeros_like(x)
    expected[:-1] += np.cos(x[:-1]) * x[1:]
    expected[1:] += np.sin(x[:-1])
    np.testing.assert_allclose(g, expected, rtol=1e-15, atol=1e-15)
