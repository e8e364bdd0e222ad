"""The SVD and the refusal of eig beyond the op-spec table.

* clear errors: repeated or zero singular values (where U, V have no
  derivative), full_matrices=True on a non-square traced matrix, hermitian=True,
  np.linalg.eig / eigvals on traced matrices;
* the singular values alone at a repeated value (the nuclear norm at I);
* full_matrices=True on a square matrix (the same as reduced);
* second order (Hessian, HVP) against JAX, and against finite differences.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import NonDifferentiableError

RNG = np.random.default_rng(11)
W = RNG.standard_normal((4, 4))


def _spread(m, n):
    d = np.zeros((m, n))
    k = min(m, n)
    d[range(k), range(k)] = 1.5 * np.arange(k, 0, -1)
    return d + 0.25 * RNG.uniform(-1, 1, (m, n))


def _fn(m, a):
    """A sign-invariant scalar of U, s and Vh."""
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return m.sum(m.matmul(u * m.sin(s)[..., None, :], vh) * W[:a.shape[0], :a.shape[1]]) \
        + m.sum(s ** 3)


# ---------------------------------------------------------------------------
# clear errors
# ---------------------------------------------------------------------------

def test_repeated_singular_values_refuse_the_vectors_derivative():
    a = np.diag([2.0, 2.0, 1.0])
    for d in (lambda f: ta.grad(f)(a), lambda f: ta.jvp(f, (a,), (np.eye(3),))):
        with pytest.raises(NonDifferentiableError, match="repeated.*compute_uv=False"):
            d(lambda a: tnp.sum(np.linalg.svd(a)[0] * W[:3, :3]))


def test_zero_singular_value_is_refused_even_for_the_values():
    a = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    with pytest.raises(NonDifferentiableError, match="zero.*rank deficient"):
        ta.grad(lambda a: tnp.sum(np.linalg.svd(a, compute_uv=False)))(a)
    with pytest.raises(NonDifferentiableError, match="zero"):
        ta.jvp(lambda a: np.linalg.svd(a, full_matrices=False)[0], (a,), (np.ones((3, 2)),))


def test_nearly_repeated_singular_values_warn():
    a = np.diag([2.0, 2.0 + 1e-9, 1.0])
    with pytest.warns(RuntimeWarning, match="nearly repeated"):
        ta.grad(lambda a: tnp.sum(np.linalg.svd(a)[0] * W[:3, :3]))(a)


def test_full_matrices_on_a_non_square_traced_matrix_is_refused():
    with pytest.raises(NonDifferentiableError, match="full_matrices=False"):
        ta.grad(lambda a: tnp.sum(np.linalg.svd(a)[1]))(_spread(4, 3))
    with pytest.raises(NonDifferentiableError, match="hermitian=False"):
        ta.grad(lambda a: tnp.sum(np.linalg.svd(a, hermitian=True)[1]))(np.eye(3) + 1)


@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_eig_on_plain_arrays_is_numpys(name):
    # traced ones differentiate (tests/test_complex_linalg.py)
    f = getattr(np.linalg, name)
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    plain = getattr(tnp.linalg, name)(a)           # plain arrays: numpy's own
    np.testing.assert_array_equal(plain[0] if name == "eig" else plain,
                                  f(a)[0] if name == "eig" else f(a))


def test_svd_of_a_vector_is_a_shape_error():
    with pytest.raises(ValueError, match=r"\(\.\.\., m, n\)"):
        ta.grad(lambda x: tnp.sum(np.linalg.svd(x, compute_uv=False)))(np.ones(3))


# ---------------------------------------------------------------------------
# what is differentiable
# ---------------------------------------------------------------------------

def test_singular_values_alone_at_a_repeated_value():
    # the nuclear norm at I: sum(s(I + E)) = 3 + tr(E) + O(E^2), gradient I
    for f in (lambda a: tnp.sum(np.linalg.svd(a, compute_uv=False)),
              lambda a: tnp.sum(np.linalg.svdvals(a)),
              lambda a: tnp.sum(np.linalg.svd(a)[1])):         # reverse: no gaps needed
        np.testing.assert_allclose(ta.grad(f)(np.eye(3)), np.eye(3), atol=1e-14)
    _, t = ta.jvp(lambda a: np.linalg.svd(a, compute_uv=False), (np.eye(3),),
                  (np.diag([1.0, 2.0, 3.0]),))
    np.testing.assert_allclose(np.sort(t), [1.0, 2.0, 3.0], atol=1e-14)


def test_full_matrices_on_a_square_matrix_and_stacks():
    a = _spread(3, 3)
    f = lambda a: tnp.sum(np.linalg.svd(a)[0] ** 2 * W[:3, :3]) + tnp.sum(  # noqa: E731
        np.linalg.svd(a)[2] ** 2 * W[:3, :3].T)
    ta.check_grads(f, (a,), order=2)
    stack = np.stack([_spread(4, 3), _spread(4, 3)])
    ta.check_grads(lambda s: tnp.sum(tnp.sin(np.linalg.svd(s, full_matrices=False)[0])
                                     ** 2), (stack,), order=2)
    u, s, vh = tnp.linalg.svd(stack, full_matrices=False)     # plain: numpy's own
    np.testing.assert_allclose(u @ (s[..., None] * vh), stack, atol=1e-14)


def test_float32_in_float32_out():
    a = _spread(3, 4).astype(np.float32)
    g = ta.grad(lambda a: _fn(tnp, a))(a)
    assert g.dtype == np.float32


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
def test_second_order_against_jax(shape):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    a = _spread(*shape)
    v = RNG.standard_normal(shape)
    H = ta.hessian(lambda a: _fn(tnp, a))(a)
    Hj = np.asarray(jax.hessian(lambda a: _fn(jnp, a))(a))
    assert np.max(np.abs(H - Hj)) <= 1e-12 * np.max(np.abs(Hj))
    hv = ta.hvp(lambda a: _fn(tnp, a), (a,), (v,))
    hvj = np.asarray(jax.jvp(jax.grad(lambda a: _fn(jnp, a)), (a,), (v,))[1])
    assert np.max(np.abs(hv - hvj)) <= 1e-12 * np.max(np.abs(hvj))
