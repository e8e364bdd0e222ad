"""tapead.scipy.linalg beyond the op-spec table: errors, plain inputs (scipy's
own results), which entries the triangular solve reads, and second order
through expm against JAX."""
import numpy as np
import pytest
import scipy.linalg as sl

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.linalg as tsl
from tapead.errors import ShapeError

RNG = np.random.default_rng(5)
A = RNG.uniform(-1, 1, (3, 3)) + 3 * np.eye(3)
B = RNG.standard_normal((3, 2))


def test_plain_inputs_are_scipys():
    np.testing.assert_array_equal(tsl.solve_triangular(A, B, lower=True),
                                  sl.solve_triangular(A, B, lower=True))
    c = tsl.cho_factor(A @ A.T)
    np.testing.assert_array_equal(c[0], sl.cho_factor(A @ A.T)[0])
    np.testing.assert_array_equal(tsl.cho_solve(c, B), sl.cho_solve(c, B))
    np.testing.assert_array_equal(tsl.expm(A), sl.expm(A))
    np.testing.assert_array_equal(tsl.cholesky(A @ A.T), sl.cholesky(A @ A.T))


def test_solve_triangular_reads_only_its_triangle():
    for kw, mask in ((dict(lower=True), np.tril(np.ones((3, 3)))),
                     (dict(), np.triu(np.ones((3, 3)))),
                     (dict(lower=True, unit_diagonal=True), np.tril(np.ones((3, 3)), -1))):
        g = ta.grad(lambda a: tnp.sum(tsl.solve_triangular(a, B, **kw) ** 2))(A)
        assert np.all(g[mask == 0] == 0) and np.all(g[mask == 1] != 0)


def test_solve_triangular_errors():
    with pytest.raises(ShapeError, match=r"b must be \(n,\)"):
        ta.grad(lambda b: tnp.sum(tsl.solve_triangular(A, b)))(np.ones(4))
    with pytest.raises(ShapeError, match="square"):
        ta.grad(lambda a: tnp.sum(tsl.solve_triangular(a, B)))(np.ones((3, 2)))
    with pytest.raises(ValueError, match="trans must be"):
        ta.grad(lambda a: tnp.sum(tsl.solve_triangular(a, B, trans="X")))(A)
    with pytest.raises(ShapeError, match="square"):
        ta.grad(lambda a: tnp.sum(tsl.expm(a)))(np.ones((2, 3)))


def test_cholesky_and_cho_factor_agree_with_scipy_on_the_triangle():
    S = A @ A.T
    for lower in (True, False):
        c, low = ta.jvp(lambda a: tsl.cho_factor(a, lower=lower)[0], (S,), (S,))[0], lower
        want = sl.cho_factor(S, lower=lower)[0]
        np.testing.assert_allclose(c, np.tril(want) if lower else np.triu(want), rtol=1e-14)
        u = ta.jvp(lambda a: tsl.cholesky(a, lower=lower), (S,), (S,))[0]
        np.testing.assert_allclose(u, sl.cholesky(S, lower=lower), rtol=1e-14)


def test_expm_float32_and_exact_derivative_of_a_rotation():
    J = np.array([[0.0, 1.0], [-1.0, 0.0]])
    # expm(tJ) = [[cos t, sin t], [-sin t, cos t]]
    d = ta.jacfwd(lambda t: tsl.expm(t * J))(0.7)
    np.testing.assert_allclose(d, [[-np.sin(0.7), np.cos(0.7)], [-np.cos(0.7), -np.sin(0.7)]],
                               atol=1e-14)
    d2 = ta.jacfwd(ta.jacfwd(lambda t: tsl.expm(t * J)))(0.7)
    np.testing.assert_allclose(d2, -tsl.expm(0.7 * J), atol=1e-13)
    g = ta.grad(lambda a: tnp.sum(tsl.expm(a)))(A.astype(np.float32) * 0.3)
    assert g.dtype == np.float32


def test_expm_second_order_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    W = RNG.standard_normal((3, 3))
    a = 0.4 * RNG.standard_normal((3, 3))
    H = ta.hessian(lambda a: tnp.sum(tsl.expm(a) * W))(a)
    Hj = np.asarray(jax.hessian(lambda a: jnp.sum(jsl.expm(a) * W))(a))
    assert np.max(np.abs(H - Hj)) <= 1e-12 * np.max(np.abs(Hj))
