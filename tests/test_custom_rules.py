"""custom_jvp / custom_vjp: seed 001's example, both modes, and check_grads on a wrong rule."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp


@ta.custom_jvp
def f(x, y):
    return tnp.sin(x) * y


@f.defjvp
def f_jvp(primals, tangents):
    x, y = primals
    x_dot, y_dot = tangents
    return f(x, y), tnp.cos(x) * x_dot * y + tnp.sin(x) * y_dot


def test_seed_001_custom_jvp_example():
    # the seed prints JAX's float32 values; tapead's float64 ones agree to that precision
    assert abs(f(2.0, 3.0) - 2.7278922) < 1e-7
    y, y_dot = ta.jvp(f, (2.0, 3.0), (1.0, 0.0))
    assert abs(y - 2.7278922) < 1e-7 and abs(y_dot - -1.2484405) < 1e-7
    assert y == np.sin(2.0) * 3.0 and y_dot == np.cos(2.0) * 3.0


def test_custom_jvp_in_reverse_mode_and_second_order():
    gx, gy = ta.grad(f, argnums=(0, 1))(2.0, 3.0)
    assert gx == pytest.approx(3 * np.cos(2.0), rel=1e-15) and gy == pytest.approx(np.sin(2.0))
    ta.check_grads(f, (0.7, -1.3), order=2)
    x = np.array([0.1, 0.5, 2.0])
    ta.check_grads(lambda a, b: tnp.sum(f(a, b)), (x, x[::-1].copy()), order=2)


def _make_custom_jvp(wrong):
    @ta.custom_jvp
    def g(x):
        return tnp.exp(x) * x

    @g.defjvp
    def g_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        d = tnp.exp(x) * x if wrong else tnp.exp(x) * (x + 1.0)
        return g(x), d * t
    return g


def test_check_grads_flags_a_wrong_custom_jvp():
    ta.check_grads(_make_custom_jvp(False), (0.4,), order=2)
    with pytest.raises(AssertionError, match="disagree"):
        ta.check_grads(_make_custom_jvp(True), (0.4,), order=1)


def _make_custom_vjp(wrong):
    @ta.custom_vjp
    def safe_log1pexp(x):
        return tnp.log1p(tnp.exp(x))

    def fwd(x):
        return safe_log1pexp(x), x

    def bwd(x, g):
        s = 1.0 / (1.0 + tnp.exp(-x))
        return ((g * (1.0 - s)) if wrong else (g * s),)
    safe_log1pexp.defvjp(fwd, bwd)
    return safe_log1pexp


def test_custom_vjp_both_modes_and_wrong_rule_is_flagged():
    h = _make_custom_vjp(False)
    x = np.array([-3.0, 0.2, 4.0])
    g = ta.grad(lambda v: tnp.sum(h(v)))(x)
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-x)), rtol=1e-15)
    ta.check_grads(lambda v: tnp.sum(h(v)), (x,), order=2)
    bad = _make_custom_vjp(True)
    with pytest.raises(AssertionError, match="disagree"):
        ta.check_grads(lambda v: tnp.sum(bad(v)), (x,), order=1)


def test_custom_vjp_errors():
    @ta.custom_vjp
    def k(x):
        return x * 2.0
    with pytest.raises(ta.MissingRuleError, match="defvjp"):
        ta.grad(k)(1.0)
    k.defvjp(lambda x: (x * 2.0, None), lambda res, g: g * 2.0)
    with pytest.raises(TypeError, match="tuple"):
        ta.grad(k)(1.0)
