"""Constant powers by multiplication: values against numpy (bit for bit where
numpy multiplies, else within 2 ulp), the scalar C kernel against the array
rule, dtypes, the conventions at 0 and second derivatives.  The finite
difference and JAX checks are the pow_* rows of tests/opspecs_elementwise.py."""
import warnings

import numpy as np
import pytest

import tapead as ta

X = np.random.default_rng(0).uniform(-3.0, 3.0, 2000)


def _value_and_tangent(x, k):
    return ta.jvp(lambda v: v ** k, (x,), (np.ones_like(x),))


@pytest.mark.parametrize("k", [2, 2.0, -1, -1.0, 0.5])
def test_values_bit_identical_to_numpy_where_numpy_multiplies(k):
    x = np.abs(X) if k == 0.5 else X
    assert np.array_equal(_value_and_tangent(x, k)[0], x ** k)
    assert np.array_equal(np.array([ta.value_and_grad(lambda v: v ** k)(float(t))[0]
                                    for t in x[:300]]), x[:300] ** k)


@pytest.mark.parametrize("k", [3, 4, 3.0, 4.0])
def test_values_within_two_ulp_of_numpy(k):
    v = _value_and_tangent(X, k)[0]
    ref = X ** k
    assert np.max(np.abs(v - ref) / np.spacing(np.abs(ref))) <= 2.0
    s = np.array([ta.value_and_grad(lambda v: v ** k)(float(t))[0] for t in X[:300]])
    np.testing.assert_array_equal(s, v[:300])        # the C kernel equals the array rule


@pytest.mark.parametrize("k", [2, 3, 4, -1, 0.5, 0, 1, 5, 2.5])
def test_scalar_kernel_and_array_rule_agree(k):
    x = np.abs(X[:300]) + 0.1 if k in (0.5, 2.5) else X[:300]
    g_arr = ta.grad(lambda v: (v ** k).sum())(x)
    g_sc = np.array([ta.grad(lambda v: v ** k)(float(t)) for t in x])
    np.testing.assert_allclose(g_sc, g_arr, rtol=1e-15, atol=0)
    ref = k * x ** (k - 1.0) if k != 0 else 0.0 * x
    np.testing.assert_allclose(g_arr, ref, rtol=1e-15, atol=0)


@pytest.mark.parametrize("k", [2, 3, 4, -1, 0.5])
def test_float32_stays_float32(k):
    x = np.abs(X[:6]).astype(np.float32).reshape(2, 3) + np.float32(0.5)
    v, t = _value_and_tangent(x, k)
    assert v.dtype == np.float32 and t.dtype == np.float32
    np.testing.assert_allclose(v, x.astype(np.float64) ** k, rtol=2e-6)


def test_conventions_at_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for k, d in [(0, 0.0), (1, 1.0), (2, 0.0), (3, 0.0), (4, 0.0), (-1, -np.inf),
                     (0.5, np.inf)]:
            assert ta.grad(lambda v: v ** k)(0.0) == d
            assert ta.grad(lambda v: (v ** k).sum())(np.zeros(2))[0] == d
        assert ta.value_and_grad(lambda v: v ** 0.5)(-0.0)[0] == (-0.0) ** 0.5


def test_second_derivatives():
    x = np.array([0.7, 1.3, 2.1])
    for k in (2, 3, 4, -1, 0.5):
        h = ta.hessian(lambda v: (v ** k).sum())(x)
        np.testing.assert_allclose(np.diag(h), k * (k - 1) * x ** (k - 2.0), rtol=1e-14)
        np.testing.assert_allclose(ta.grad(ta.grad(lambda v: v ** k))(1.3),
                                   k * (k - 1) * 1.3 ** (k - 2.0), rtol=1e-14)
