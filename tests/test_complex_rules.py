"""The complex rules of eigh, svd and eig, and the functions added beside them
(stdtr, the singular multivariate normal, sqrtm, solve_sylvester,
solve_banded, np.iscomplex & co.), beyond their op-spec rows
(tests/opspecs_complex.py, tests/opspecs_scipy_extra.py):

* each decomposition's VJP is the transpose of its JVP in JAX's convention
  (Re <g, jvp(t)> = Re <vjp(g), t> for random complex t and g), which holds
  whatever phase the eigenvectors take;
* gauge-invariant losses agree with JAX (eig with its eigenvector derivatives
  turned on) and with finite differences;
* the errors: repeated eigenvalues, a singular sqrtm, stdtr's mixed
  derivative at t = 0, covariance that is not positive semidefinite.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.linalg as tsl
import tapead.scipy.special as tsp
import tapead.scipy.stats as tst
from tapead._prims import linalg_decomp, linalg_svd
from tapead.errors import GuardFlippedError, NonDifferentiableError


def _rng(seed):
    return np.random.default_rng(seed)


def _cplx(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _adjoint_gap(jvp, vjp, ans, a, rng):
    t = _cplx(rng, np.shape(a))
    g = _cplx(rng, np.shape(ans))
    lhs = np.real(np.sum(g * jvp(t, ans, a)))
    rhs = np.real(np.sum(vjp(g, ans, a) * t))
    return abs(lhs - rhs) / max(abs(lhs), 1e-300)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 3)])
def test_svd_vjp_is_the_transpose_of_its_jvp(shape):
    rng = _rng(sum(shape))
    a = _cplx(rng, shape)
    ans = linalg_svd._svd_impl(a)
    for _ in range(4):
        assert _adjoint_gap(linalg_svd._svd_jvp, linalg_svd._svd_vjp, ans, a, rng) < 1e-13


@pytest.mark.parametrize("n", [2, 4])
def test_eigh_and_eig_vjps_are_the_transposes_of_their_jvps(n):
    rng = _rng(n)
    z = _cplx(rng, (n, n))
    h = z + z.conj().T
    ans = linalg_decomp._eigh_impl(h)
    for _ in range(4):
        assert _adjoint_gap(linalg_decomp._eigh_jvp, linalg_decomp._eigh_vjp, ans, h, rng) < 1e-13
    for a in (z, z.real.copy()):
        ans = linalg_decomp._eig_impl(a)
        for _ in range(4):
            assert _adjoint_gap(linalg_decomp._eig_jvp, linalg_decomp._eig_vjp, ans, a + 0j,
                                rng) < 1e-12


def test_complex_svd_and_eigh_values_are_numpys():
    rng = _rng(7)
    z = _cplx(rng, (3, 3))
    out = ta.jvp(lambda x: np.linalg.svd(x + 1j * z.imag, full_matrices=False)[1],
                 (z.real,), (np.ones((3, 3)),))
    np.testing.assert_array_equal(out[0], np.linalg.svd(z, full_matrices=False)[1])
    assert out[1].dtype == np.float64                 # a real output has a real tangent
    h = z + z.conj().T
    w, V = ta.jvp(lambda x: tuple(np.linalg.eigh(h + x)), (np.zeros((3, 3)),),
                  (np.eye(3),))[0]
    np.testing.assert_array_equal(w, np.linalg.eigh(h)[0])
    assert w.dtype == np.float64 and V.dtype == np.complex128


def test_eig_against_jax_with_eigenvector_derivatives():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    rng = _rng(11)
    W = rng.standard_normal((3, 3))

    def loss(m, eig):
        def f(x, y):
            w, V = eig(x + 1j * y)
            return m.sum(m.abs(V) ** 2 * W * m.abs(w)) + m.sum(m.real(w ** 2))
        return f
    x, y = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    jeig = (lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=False,
                                         enable_eigvec_derivs=True))
    ours = ta.grad(loss(np, np.linalg.eig), argnums=(0, 1))(x, y)
    theirs = jax.grad(loss(jnp, jeig), argnums=(0, 1))(x, y)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-13)


def test_eig_of_a_real_matrix_follows_numpys_dtype_and_guards_it():
    real_eigs = np.array([[2.0, 1.0], [0.5, 3.0]])
    complex_eigs = np.array([[0.0, 1.0], [-1.0, 0.0]])
    w, V = ta.jvp(lambda a: tuple(np.linalg.eig(a)), (real_eigs,), (np.eye(2),))[0]
    assert w.dtype == np.float64 and V.dtype == np.float64
    f = lambda a: np.sum(np.abs(np.linalg.eigvals(a)))      # noqa: E731
    rec = ta.record(f, real_eigs)
    assert rec(real_eigs * 2.0) == pytest.approx(f(real_eigs * 2.0), rel=1e-14)
    with pytest.raises(GuardFlippedError, match="eig's eigenvalues are real"):
        rec(complex_eigs)
    g = ta.grad(f)(complex_eigs + np.array([[0.1, 0.0], [0.0, 0.3]]))
    assert g.dtype == np.float64


def test_repeated_eigenvalues_are_refused_but_eigenvalue_gradients_are_not():
    a = np.diag([2.0, 2.0, 1.0]) + np.triu(np.ones((3, 3)), 1) * 0.0
    with pytest.raises(np.linalg.LinAlgError, match="repeated eigenvalue"):
        ta.grad(lambda a: np.sum(np.abs(np.linalg.eig(a)[1]) ** 2 * np.arange(9.0).reshape(3, 3)))(a)
    g = ta.grad(lambda a: np.sum(np.linalg.eigvals(a).real))(a)
    np.testing.assert_allclose(g, np.eye(3), atol=1e-14)


def test_max_min_of_complex_values_follow_numpy_order():
    z = np.array([0.3 + 0.4j, 0.3 + 0.2j, -0.5 + 0.9j, 0.3 + 0.4j])    # a tie at the max
    assert tnp.max(z) == np.max(z) and tnp.min(z) == np.min(z)
    g = ta.grad(lambda x: np.real(np.max(x * (1 + 0j) + 1j * z.imag)))(z.real)
    np.testing.assert_array_equal(g, [0.5, 0.0, 0.0, 0.5])            # ties split, as JAX
    g = ta.grad(lambda y: np.imag(np.min(z.real + 1j * y)))(z.imag)
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0, 0.0])


def test_std_and_var_of_complex_inputs_have_real_tangents():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    z = np.array([[0.3 + 0.1j, 0.6 - 0.4j, -0.2 + 1j], [1.0, 2.0j, -0.5 - 0.5j]])
    t = np.array([[1.0 + 0.2j, 0.3 - 1j, -0.5], [0.1j, 0.7, -0.2 + 0.3j]])
    for name in ("std", "var"):
        for kw in ({}, {"axis": 0}, {"axis": 1, "ddof": 1}):
            out, tan = ta.jvp(lambda z: getattr(np, name)(z, **kw), (z,), (t,))
            ref = jax.jvp(lambda z: getattr(jnp, name)(z, **kw), (z,), (t,))
            assert not np.iscomplexobj(tan)
            np.testing.assert_allclose(tan, np.asarray(ref[1]), rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(out, np.asarray(ref[0]), rtol=1e-14)
    # slices of one element: std is identically 0, a real 0 with a real tangent
    for zz, tt, kw in ((z[0, 0], t[0, 0], {}), (z[:, :1], t[:, :1], {"axis": 1})):
        out, tan = ta.jvp(lambda z: np.std(z, **kw), (zz,), (tt,))
        assert not np.iscomplexobj(out) and not np.iscomplexobj(tan)
        np.testing.assert_array_equal(tan, np.zeros(np.shape(np.std(zz, **kw))))


def test_complex_erf_is_holomorphic():
    z0 = 0.4 - 0.7j
    g = ta.grad(lambda z: tsp.erf(z), holomorphic=True)(z0)
    assert g == pytest.approx(2 / np.sqrt(np.pi) * np.exp(-z0 * z0), rel=1e-15)
    g = ta.grad(lambda z: tsp.erfc(z * z), holomorphic=True)(z0)
    assert g == pytest.approx(-2 / np.sqrt(np.pi) * np.exp(-z0 ** 4) * 2 * z0, rel=1e-14)


def test_iscomplex_isreal_and_friends_on_traced_values():
    x = np.array([0.5, -1.0, 2.0])

    def f(x):
        z = x + 1j * np.where(np.array([True, False, True]), x, 0.0)
        assert np.iscomplexobj(z) and not np.isrealobj(z)
        assert not np.iscomplexobj(x) and np.isrealobj(x)
        np.testing.assert_array_equal(np.iscomplex(z), [True, False, True])
        np.testing.assert_array_equal(np.isreal(z), [False, True, False])
        np.testing.assert_array_equal(np.iscomplex(x), [False] * 3)
        return np.sum(np.real(z) * np.isreal(z))
    np.testing.assert_array_equal(ta.grad(f)(x), [0.0, 1.0, 0.0])
    rec = ta.record(lambda x: np.sum(x * np.isreal(x + 1j * np.maximum(x, 0.0))), x)
    assert rec(x * 2.0) == pytest.approx(-2.0)
    with pytest.raises(GuardFlippedError, match="isreal"):
        rec(-x)


def test_stdtr_in_df_at_t_zero():
    # stdtr(df, 0) = 1/2 for every df: its derivative in df is 0, and the t
    # derivative (the density) is exact at 0
    assert ta.grad(lambda d: tsp.stdtr(d, 0.0))(3.0) == 0.0
    assert ta.grad(lambda t: tsp.stdtr(3.0, t))(0.0) == pytest.approx(
        tst.t.pdf(0.0, 3.0), rel=1e-15)
    with pytest.raises(NonDifferentiableError, match="t == 0"):
        ta.hessian(lambda v: tsp.stdtr(v[0], v[1]))(np.array([3.0, 0.0]))
    ta.check_grads(lambda v: tsp.stdtr(v[0], v[1]), (np.array([3.0, 0.4]),), order=2)


def test_singular_multivariate_normal():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = _rng(3)
    a, c, mean = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(3)
    cov = a @ a.T
    x = mean + a @ c
    mvn = tst.multivariate_normal
    assert mvn.logpdf(x, mean, cov, allow_singular=True) == pytest.approx(
        scipy_stats.multivariate_normal.logpdf(x, mean, cov, allow_singular=True), rel=1e-13)
    # off the support: -inf, like scipy, with no derivative
    out = ta.value_and_grad(lambda m: mvn.logpdf(x + np.array([1.0, 0, 0]), m, cov,
                                                 allow_singular=True))(mean)
    assert out[0] == -np.inf and np.all(out[1] == 0.0)
    # full rank with allow_singular=True: the positive definite formula
    spd = cov + np.eye(3)
    g1 = ta.grad(lambda s: mvn.logpdf(x, mean, s, allow_singular=True))(spd)
    g2 = ta.grad(lambda s: mvn.logpdf(x, mean, s))(spd)
    np.testing.assert_allclose(g1, g2, rtol=1e-14)
    # the gradient of the pseudo-determinant in cov is the pseudo-inverse
    g = ta.grad(lambda s: mvn.entropy(None, s))(cov)
    np.testing.assert_allclose(g, 0.5 * np.linalg.pinv(cov), rtol=1e-10, atol=1e-12)
    # a replay at a covariance of another rank is refused
    rec = ta.record(lambda s: mvn.entropy(None, s), cov)
    assert rec(cov * 2.0) == pytest.approx(scipy_stats.multivariate_normal.entropy(
        None, cov * 2.0), rel=1e-13)
    with pytest.raises(GuardFlippedError, match="rank"):
        rec(spd)
    ta.check_grads(lambda a, c: mvn.logpdf(mean + a @ c, mean, a @ a.T, allow_singular=True),
                   (a, c), order=2)


def test_matrix_equations_and_their_errors():
    rng = _rng(5)
    with pytest.raises(NonDifferentiableError, match="singular"), \
            pytest.warns(Warning, match="singular"):       # scipy's own warning
        ta.grad(lambda a: np.sum(tsl.sqrtm(a)))(np.diag([1.0, 0.0]))
    # sqrtm of a matrix with a negative eigenvalue is complex, like scipy's
    a = np.array([[2.0, 0.5], [0.3, -1.5]])
    g = ta.grad(lambda a: np.sum(np.abs(tsl.sqrtm(a)) ** 2))(a)
    import scipy.linalg
    f = lambda a: np.sum(np.abs(scipy.linalg.sqrtm(a)) ** 2)    # noqa: E731
    fd = np.array([[(f(a + 1e-6 * e) - f(a - 1e-6 * e)) / 2e-6 for e in row]
                   for row in np.eye(4).reshape(2, 2, 2, 2)])
    np.testing.assert_allclose(g, fd, rtol=1e-7)
    # vmap of the per-lane rules
    A = np.stack([np.eye(3) * 2 + 0.3 * rng.standard_normal((3, 3)) for _ in range(3)])
    Q = rng.standard_normal((3, 3, 2))
    got = ta.vmap(ta.grad(lambda a, q: np.sum(tsl.solve_sylvester(a, np.eye(2), q) ** 2)))(A, Q)
    for k in range(3):
        np.testing.assert_allclose(got[k], ta.grad(lambda a: np.sum(tsl.solve_sylvester(
            a, np.eye(2), Q[k]) ** 2))(A[k]), rtol=1e-14)
    with pytest.raises(ValueError, match=r"ab must be \(3, n\)"):
        ta.grad(lambda ab: np.sum(tsl.solve_banded((1, 1), ab, np.ones(3))))(np.ones((2, 3)))
