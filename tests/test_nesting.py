"""Nested transforms: levels keep perturbations apart."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp


def test_perturbation_confusion_reverse_over_reverse():
    assert ta.grad(lambda x: x * ta.grad(lambda y: x * y)(3.0))(2.0) == 4.0


def test_perturbation_confusion_forward_over_forward():
    def outer(x):
        inner = ta.jvp(lambda y: x * y, (3.0,), (1.0,))[1]     # d/dy (x y) = x
        return x * inner
    assert ta.jvp(outer, (2.0,), (1.0,))[1] == 4.0


def test_perturbation_confusion_mixed_modes():
    # Siskind & Pearlmutter's example: d/dx [x * d/dy (x + y)] = 1
    inner = lambda x: ta.jvp(lambda y: x + y, (1.0,), (1.0,))[1]
    assert ta.grad(lambda x: x * inner(x))(5.0) == 1.0
    inner_r = lambda x: ta.grad(lambda y: x + y)(1.0)
    assert ta.jvp(lambda x: x * inner_r(x), (5.0,), (1.0,))[1] == 1.0


def test_dual_of_dual_second_derivative():
    def d2(f, x):
        return ta.jvp(lambda a: ta.jvp(f, (a,), (1.0,))[1], (x,), (1.0,))[1]
    assert d2(lambda x: x ** 3, 2.0) == pytest.approx(12.0, rel=1e-15)
    assert d2(tnp.sin, 0.7) == pytest.approx(-np.sin(0.7), rel=1e-15)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_high_order_grad(depth):
    f = tnp.exp
    for _ in range(depth):
        f = ta.grad(f)
    assert f(0.3) == pytest.approx(np.exp(0.3), rel=1e-15)


def test_grad_of_grad_of_array_function():
    A = np.array([[2.0, 1.0], [1.0, 3.0]])

    def q(x):
        return 0.5 * tnp.sum(x * (A @ x)) + tnp.sum(tnp.sin(x))
    x = np.array([0.3, -0.2])
    H = ta.hessian(q)(x)
    np.testing.assert_allclose(H, A - np.diag(np.sin(x)), rtol=1e-15, atol=1e-15)
    H2 = ta.jacrev(ta.grad(q))(x)
    np.testing.assert_allclose(H2, H, rtol=1e-15, atol=1e-15)
    hv = ta.hvp(q, (x,), (np.array([1.0, 2.0]),))
    np.testing.assert_allclose(hv, H @ np.array([1.0, 2.0]), rtol=1e-15)


def test_closure_over_outer_tracer_in_array_code():
    def outer(w):
        return ta.grad(lambda v: tnp.sum(w * v * v))(np.array([1.0, 2.0])).sum()
    # d/dw sum_i 2 w_i v_i  = 2 v
    np.testing.assert_allclose(ta.grad(outer)(np.array([0.5, 0.25])), [2.0, 4.0])


def test_third_order_by_jacfwd_of_hessian_through_indexing():
    # indexing's transpose (index_add) and jacfwd's blocks see tangents that an
    # outer jacfwd traces: they must stay on that trace
    def f(x):
        return tnp.sin(x[0] * x[1]) * x[2] + x[1] ** 3

    x = np.array([0.3, -0.8, 1.1])
    T = ta.jacfwd(ta.hessian(f))(x)
    a, b, c = x
    s, co = np.sin(a * b), np.cos(a * b)
    # d/dx of H[0, 1] = c (cos(ab) - ab sin(ab)), checked entry by entry
    np.testing.assert_allclose(T[0, 1], [c * (-2 * b * s - a * b * b * co),
                                         c * (-2 * a * s - a * a * b * co),
                                         co - a * b * s], rtol=1e-13)
    np.testing.assert_allclose(T[1, 1, 1], -c * a ** 3 * co + 6.0, rtol=1e-13)
    np.testing.assert_allclose(T, np.transpose(T, (1, 0, 2)), rtol=1e-13)
    np.testing.assert_allclose(T, ta.jacrev(ta.hessian(f))(x), rtol=1e-13)


def test_sin_cos_partners_under_nesting_up_to_fourth_order():
    # the VJP of sin records cos_given_sin(x, sin x): same value, derivative -sin x
    x = np.array([0.3, -1.1, 2.0])
    for f, d in ((tnp.sin, [np.cos, lambda v: -np.sin(v), lambda v: -np.cos(v), np.sin]),
                 (tnp.cos, [lambda v: -np.sin(v), lambda v: -np.cos(v), np.sin, np.cos])):
        g1 = ta.grad(lambda v: tnp.sum(f(v)))
        np.testing.assert_allclose(g1(x), d[0](x), rtol=1e-15)
        np.testing.assert_allclose(ta.jacfwd(g1)(x), np.diag(d[1](x)), rtol=1e-15)
        g2 = ta.grad(lambda v: tnp.sum(g1(v)))
        g3 = ta.grad(lambda v: tnp.sum(g2(v)))
        np.testing.assert_allclose(g2(x), d[1](x), rtol=1e-15)
        np.testing.assert_allclose(g3(x), d[2](x), rtol=1e-15)
        np.testing.assert_allclose(ta.jacfwd(g3)(x), np.diag(d[3](x)), rtol=1e-15)
