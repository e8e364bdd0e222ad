"""quantile/percentile, np.gradient and np.trapezoid beyond the op-spec table:
their error paths, NaN slices, differentiating in dx, and the names exported
by tapead.numpy."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import NonDifferentiableError

X = np.array([[0.3, -1.2, 2.0, 0.9], [1.5, 0.1, -0.4, 0.7], [2.2, -0.8, 1.1, -2.0]])


@pytest.mark.parametrize("method", ["lower", "nearest", "midpoint", "inverted_cdf"])
def test_other_quantile_methods_are_refused(method):
    with pytest.raises(NonDifferentiableError, match=rf"method='{method}'.*method='linear'"):
        ta.grad(lambda x: np.percentile(x, 40.0, method=method))(X)
    with pytest.raises(NonDifferentiableError, match="weights="):
        ta.grad(lambda x: np.quantile(x, 0.4, weights=np.ones_like(X),
                                      method="inverted_cdf"))(X)


def test_quantile_errors():
    with pytest.raises(TypeError, match="out="):
        ta.grad(lambda x: np.quantile(x, 0.5, out=np.empty(())))(X)
    with pytest.raises(ValueError, match=r"range \[0, 100\]"):
        ta.grad(lambda x: np.percentile(x, 101.0))(X)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        ta.grad(lambda x: np.quantile(x, -0.1))(X)


def test_quantile_of_a_slice_with_nan_is_nan_as_in_numpy():
    x = X.copy()
    x[1, 2] = np.nan
    got = ta.jvp(lambda x: np.percentile(x, 25.0, axis=1), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(got[0], np.percentile(x, 25.0, axis=1))
    assert np.isnan(got[0][1]) and not np.isnan(got[0][[0, 2]]).any()
    np.testing.assert_allclose(got[1][[0, 2]], [1.0, 1.0])


def test_quantile_gradient_weights():
    # the 25th percentile of 4 values: 0.25 of the way from the first to the second
    g = ta.grad(lambda x: tnp.percentile(x, 25.0))(np.array([4.0, 1.0, 3.0, 2.0]))
    np.testing.assert_allclose(g, [0.0, 0.25, 0.0, 0.75], atol=1e-15)
    g = ta.grad(lambda x: tnp.quantile(x, 1.0))(np.array([4.0, 1.0, 3.0]))
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0])


def test_quantile_in_q():
    x = np.array([4.0, 1.0, 3.0, 2.0, 7.0])          # sorted: 1 2 3 4 7
    # (n - 1) q = 4 q: between the 2nd and 3rd sorted values the slope is 4 * (3 - 2)
    assert ta.grad(lambda q: np.quantile(x, q))(0.3) == pytest.approx(4.0, rel=1e-15)
    assert ta.grad(lambda q: np.percentile(x, q))(30.0) == pytest.approx(0.04, rel=1e-14)
    # one-sided at the samples: from above inside, from below at q = 1
    assert ta.grad(lambda q: np.quantile(x, q))(0.5) == pytest.approx(4.0)      # 3 -> 4
    assert ta.grad(lambda q: np.quantile(x, q))(1.0) == pytest.approx(12.0)     # 4 -> 7
    assert ta.grad(lambda q: np.quantile(x, q))(0.0) == pytest.approx(4.0)      # 1 -> 2
    for mode in (lambda f, q: ta.grad(f)(q), lambda f, q: ta.jvp(f, (q,), (1.0,))[1]):
        assert mode(lambda q: np.quantile(x, q), 0.75) == 12.0                  # 4 -> 7
        assert mode(lambda q: np.quantile(x.astype(np.float32), q),
                    np.float32(0.75)) == np.float32(12.0)
    v = ta.jvp(lambda q: np.quantile(x, q), (np.array([0.0, 0.3, 1.0]),), (np.ones(3),))
    np.testing.assert_array_equal(v[0], np.quantile(x, [0.0, 0.3, 1.0]))
    np.testing.assert_allclose(v[1], [4.0, 4.0, 12.0], rtol=1e-14)
    for q in (0.37, np.array([0.1, 0.62, 0.9])):
        ta.check_grads(lambda a, q: np.quantile(a, q), (X, q), order=2)
        ta.check_grads(lambda a, q: np.percentile(a, 100 * q, axis=1), (X, q), order=2)


def test_quantile_in_q_is_guarded_on_replay():
    x = np.array([4.0, 1.0, 3.0, 2.0, 7.0])
    rec = ta.record(lambda q: np.quantile(x, q), 0.3)
    assert rec.value_and_grad(0.4)[1] == pytest.approx(4.0)      # same pair (2, 3)
    with pytest.raises(ta.GuardFlippedError, match="sorted positions"):
        rec.value_and_grad(0.6)


def test_gradient_errors():
    f = np.linspace(0.0, 1.0, 5) ** 2
    with pytest.raises(NonDifferentiableError, match="traced spacing"):
        ta.grad(lambda h: tnp.sum(np.gradient(f * 1.0, h)))(0.5)
    with pytest.raises(ValueError, match="edge_order"):
        ta.grad(lambda f: tnp.sum(np.gradient(f, edge_order=3)))(f)
    with pytest.raises(ValueError, match="too small"):
        ta.grad(lambda f: tnp.sum(np.gradient(f, edge_order=2)))(f[:2])
    with pytest.raises(TypeError, match="invalid number of arguments"):
        ta.grad(lambda f: tnp.sum(np.gradient(f, 1.0, 2.0)))(f)
    with pytest.raises(ValueError, match="must match the length"):
        ta.grad(lambda f: tnp.sum(np.gradient(f, np.arange(4.0))))(f)
    with pytest.raises(np.exceptions.AxisError):
        ta.grad(lambda f: tnp.sum(np.gradient(f, axis=1)))(f)
    with pytest.raises(ValueError, match="repeated axis"):
        ta.grad(lambda f: tnp.sum(np.stack(np.gradient(f, axis=(0, -2)))))(np.ones((3, 3)))


def test_gradient_is_exact_on_quadratics_with_edge_order_2():
    x = np.array([0.0, 0.3, 1.0, 1.2, 2.0])
    g, t = ta.jvp(lambda c: np.gradient(c * x ** 2, x, edge_order=2), (1.5,), (1.0,))
    np.testing.assert_allclose(g, 3.0 * x, atol=1e-13)
    np.testing.assert_allclose(t, 2.0 * x, atol=1e-13)


def test_trapezoid_differentiates_in_dx_and_x():
    y = np.sin(np.linspace(0, 1, 6))
    ta.check_grads(lambda dx: np.trapezoid(y, dx=dx), (0.2,), order=2)
    ta.check_grads(lambda y, x: np.trapezoid(y * y, x=x), (y, np.linspace(0, 1, 6) ** 2),
                   order=2)
    assert ta.grad(lambda dx: np.trapezoid(y, dx=dx))(0.2) == pytest.approx(
        np.trapezoid(y), rel=1e-15)


def test_names_in_tapead_numpy():
    for name in ("percentile", "quantile", "gradient", "trapezoid"):
        assert callable(getattr(tnp, name))
    assert tnp.trapezoid(X, axis=0).tolist() == np.trapezoid(X, axis=0).tolist()
    assert np.array_equal(tnp.gradient(X, 0.5)[1], np.gradient(X, 0.5)[1])
