"""Linear algebra and contractions beyond the op-spec table.

* the inverse rule of seed 001 (``dC = -C dA C``, reverse ``-C^T g C^T``),
  checked term by term;
* clear errors: singular, non-square, mismatched, not positive definite,
  repeated eigenvalues, unsupported QR modes;
* eigh: sign-invariant comparisons with JAX, the degenerate case;
* einsum over many subscript forms against JAX and finite differences;
* numpy's own names (``np.linalg.solve(tracer, b)``) dispatch to tapead;
* second order (Hessians, HVPs) through the decompositions, against JAX.
"""
import warnings

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import ShapeError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(2024)
A = RNG.uniform(-1, 1, (3, 3)) + 3 * np.eye(3)
B = RNG.uniform(-1, 1, (3, 2))
M = RNG.uniform(-1, 1, (4, 3))


def _close(a, b, rtol=1e-12):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
    assert float(np.max(np.abs(a - b), initial=0.0)) <= rtol * scale


# ---------------------------------------------------------------------------
# seed 001: the matrix inverse, rule by rule
# ---------------------------------------------------------------------------

def test_inverse_rule_of_seed_001():
    C = np.linalg.inv(A)
    dA = RNG.standard_normal((3, 3))
    out, dC = ta.jvp(tnp.linalg.inv, (A,), (dA,))
    _close(out, C)
    _close(dC, -C @ dA @ C)                          # dC = -C (dA) C
    g = RNG.standard_normal((3, 3))
    _, pullback = ta.vjp(tnp.linalg.inv, A)
    _close(pullback(g)[0], -C.T @ g @ C.T)           # dA = -C^T (dC) C^T
    # the forward K-direction sweep (jacfwd) uses the same rule, batched
    jac = ta.jacfwd(tnp.linalg.inv)(A)
    _close(jac, -np.einsum("ik,lj->ijkl", C, C))


def test_inverse_second_order_through_nesting():
    # d^2 C = 2 C dA C dA C: the VJP uses inv and matmul, so it differentiates again
    C = np.linalg.inv(A)
    dA = RNG.standard_normal((3, 3))
    second = ta.jvp(lambda a: ta.jvp(tnp.linalg.inv, (a,), (dA,))[1], (A,), (dA,))[1]
    _close(second, 2 * C @ dA @ C @ dA @ C)
    f = lambda a: tnp.sum(tnp.linalg.inv(a) ** 2)     # noqa: E731
    h = ta.hessian(f)(A)
    h_jax = jax.jit(jax.hessian(lambda a: jnp.sum(jnp.linalg.inv(a) ** 2)))(A)
    _close(h, h_jax)


# ---------------------------------------------------------------------------
# errors that say what to do
# ---------------------------------------------------------------------------

SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])


@pytest.mark.parametrize("fn", [lambda a: tnp.linalg.solve(a, np.ones(3)),
                                lambda a: np.linalg.solve(a, np.ones(3)),
                                tnp.linalg.inv], ids=["solve", "np.linalg.solve", "inv"])
def test_singular_matrix_raises_clearly(fn):
    with pytest.raises(np.linalg.LinAlgError, match="singular.*regularise"):
        ta.grad(lambda a: tnp.sum(fn(a)))(SINGULAR)
    with pytest.raises(np.linalg.LinAlgError, match="singular.*regularise"):
        tnp.linalg.solve(SINGULAR, np.ones(3))      # plain arrays: the same message


def test_shape_errors():
    with pytest.raises(ShapeError, match=r"square.*\(2, 3\)"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.inv(a)))(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="b must be"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.solve(a, np.ones(4))))(A)
    with pytest.raises(ShapeError, match="square"):
        tnp.linalg.det(np.ones(3))
    with pytest.raises(ShapeError, match="do not match|does not match"):
        ta.grad(lambda a: tnp.sum(tnp.tensordot(a, np.ones((2, 2)), axes=1)))(A)
    with pytest.raises(ShapeError, match="not aligned"):
        ta.grad(lambda a: tnp.sum(tnp.dot(a, np.ones((2, 2, 2)))))(A)
    with pytest.raises(ShapeError, match="m >= n"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.qr(a)[1]))(M.T)
    with pytest.raises(ValueError, match="mode='reduced'"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.qr(a, mode="complete")[1]))(M)


def test_cholesky_of_indefinite_matrix_says_what_to_do():
    with pytest.raises(np.linalg.LinAlgError, match="positive definite.*identity"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.cholesky(a)))(-np.eye(3))


# ---------------------------------------------------------------------------
# eigh: signs, degeneracy
# ---------------------------------------------------------------------------

S = A + A.T


def _eig_loss(m, a):
    """Invariant to the eigenvectors' signs: sum_k w_k^2 (v_k . c)^2."""
    w, v = m.linalg.eigh(a + a.T)
    c = np.array([1.0, -2.0, 0.5])
    return m.sum(w ** 2 * (c @ v) ** 2)


def test_eigh_sign_invariant_loss_matches_jax():
    f_j = lambda a: _eig_loss(jnp, a)                 # noqa: E731
    g_j, h_j = jax.jit(lambda a: (jax.grad(f_j)(a), jax.hessian(f_j)(a)))(A)
    _close(ta.grad(lambda a: _eig_loss(tnp, a))(A), g_j)
    _close(ta.hessian(lambda a: _eig_loss(tnp, a))(A), h_j, 1e-10)


def test_eigh_reconstruction_and_projectors():
    # V diag(w) V^T rebuilds the symmetric matrix numpy reads: the lower triangle
    # mirrored. Its Jacobian copies a[k, l] (k >= l) to (k, l) and (l, k), and
    # ignores the upper triangle, in both modes.
    def rebuild(a):
        w, v = tnp.linalg.eigh(a)
        return (v * w) @ v.T
    want = np.zeros((3, 3, 3, 3))
    for i in range(3):
        for j in range(3):
            k, l = max(i, j), min(i, j)
            want[i, j, k, l] = 1.0
    _close(ta.jacrev(rebuild)(S), want, 1e-10)
    _close(ta.jacfwd(rebuild)(S), want, 1e-10)
    upper = lambda a: np.linalg.eigh(a, "U")   # noqa: E731
    jac_u = ta.jacrev(lambda a: (tnp.linalg.eigh(a, "U")[1] * tnp.linalg.eigh(a, "U")[0])
                      @ tnp.linalg.eigh(a, "U")[1].T)(S)
    _close(jac_u, np.transpose(want, (1, 0, 3, 2)), 1e-10)
    assert upper(S)[0].shape == (3,)


def test_eigh_degenerate_spectrum():
    Q = np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    D = Q @ np.diag([1.0, 1.0, 3.0]) @ Q.T
    D = 0.5 * (D + D.T)
    w_exact = np.linalg.eigh(D)[0]
    if np.min(np.diff(w_exact)) > 1e-13:     # rounding may split the pair
        D = np.diag([1.0, 1.0, 3.0])
    # a function of the eigenvalues only: the reverse gradient needs no gap
    g = ta.grad(lambda a: tnp.sum(tnp.linalg.eigvalsh(a) ** 2))(D)
    _close(g, 2 * D * (2 * np.tri(3) - np.eye(3)), 1e-12)     # the lower triangle read
    # the eigenvectors' derivative does not exist there: a clear error
    with pytest.raises(np.linalg.LinAlgError, match="distinct eigenvalues"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.eigh(a)[1] ** 3))(D)
    with pytest.raises(np.linalg.LinAlgError, match="distinct eigenvalues"):
        ta.jvp(lambda a: tnp.linalg.eigh(a)[1], (D,), (np.eye(3),))


def test_eigh_nearly_degenerate_warns():
    D = np.diag([1.0, 1.0 + 1e-10, 3.0])
    with pytest.warns(RuntimeWarning, match="nearly repeated"):
        ta.grad(lambda a: tnp.sum(tnp.linalg.eigh(a)[1][0] ** 3))(D)


# ---------------------------------------------------------------------------
# einsum: many subscript forms, against JAX (value, gradient) and finite differences
# ---------------------------------------------------------------------------

EINSUMS = [
    ("ii->", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij,kj->ik", [(2, 3), (2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("bij,bkj->bik", [(2, 2, 3), (2, 2, 3)]),
    ("...ij,...jk", [(2, 2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(3, 2, 2)]),
    ("ij,jk,kl->li", [(2, 3), (3, 2), (2, 2)]),
    ("iij,jk->ik", [(2, 2, 3), (3, 2)]),
    ("Ba,a->B", [(2, 3), (3,)]),
]


@pytest.mark.parametrize("subs, shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_against_jax(subs, shapes):
    args = tuple(RNG.standard_normal(s) for s in shapes)
    nums = tuple(range(len(args)))
    for opt in (False, True):
        f = lambda *a: tnp.einsum(subs, *a, optimize=opt)    # noqa: E731
        _close(f(*args), np.einsum(subs, *args), 1e-14)
        g = ta.grad(lambda *a: tnp.sum(tnp.sin(f(*a))), argnums=nums)(*args)
        gj = jax.grad(lambda *a: jnp.sum(jnp.sin(jnp.einsum(subs, *a))), argnums=nums)(*args)
        for x, y in zip(g, gj):
            _close(x, y)
    ta.check_grads(lambda *a: tnp.einsum(subs, *a), args, order=2)


def test_einsum_interleaved_form_and_explicit_path():
    x, y = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    f = lambda x, y: tnp.einsum(x, [0, 1], y, [1, 2], [2, 0])       # noqa: E731
    _close(f(x, y), np.einsum(x, [0, 1], y, [1, 2], [2, 0]), 1e-15)
    ta.check_grads(f, (x, y), order=2)
    path = np.einsum_path("ij,jk->ik", x, y)[0]
    g = ta.grad(lambda x: tnp.sum(tnp.einsum("ij,jk->ik", x, y, optimize=path) ** 2))(x)
    _close(g, 2 * (x @ y) @ y.T)


def test_einsum_float32_stays_float32():
    x = RNG.standard_normal((3, 3)).astype(np.float32)
    for subs in ("ii->", "ii->i", "ij->"):
        g = ta.grad(lambda a: tnp.sum(tnp.einsum(subs, a)))(x)
        assert g.dtype == np.float32, subs


# ---------------------------------------------------------------------------
# numpy's names dispatch to tapead (__array_function__)
# ---------------------------------------------------------------------------

DISPATCH = [
    ("solve", lambda m, a: m.linalg.solve(a, B[:, 0]), A),
    ("solve_matrix", lambda m, a: m.linalg.solve(a, B), A),
    ("inv", lambda m, a: m.linalg.inv(a), A),
    ("det", lambda m, a: m.linalg.det(a), A),
    ("slogdet", lambda m, a: m.linalg.slogdet(a)[1] * m.linalg.slogdet(a)[0], A),
    ("cholesky", lambda m, a: m.linalg.cholesky(a @ a.T), A),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(a @ a.T, upper=True), A),
    ("eigh", lambda m, a: m.linalg.eigh(a + a.T).eigenvalues, A),
    ("eigvalsh", lambda m, a: m.linalg.eigvalsh(a + a.T), A),
    ("qr", lambda m, a: m.linalg.qr(a).R ** 2, M),
    ("qr_r", lambda m, a: m.linalg.qr(a, mode="r") ** 2, M),
    ("pinv", lambda m, a: m.linalg.pinv(a), M),
    ("lstsq", lambda m, a: m.linalg.lstsq(a, np.arange(4.0), rcond=None)[0], M),
    ("lstsq_residuals", lambda m, a: m.linalg.lstsq(a, np.arange(4.0), rcond=None)[1], M),
    ("trace", lambda m, a: m.linalg.trace(a), A),
    ("einsum", lambda m, a: m.einsum("ij,jk->ik", a, a), A),
    ("tensordot", lambda m, a: m.tensordot(a, a, axes=([0], [1])), A),
    ("linalg.tensordot", lambda m, a: m.linalg.tensordot(a, a, axes=1), A),
    ("inner", lambda m, a: m.inner(a, a), A),
    ("kron", lambda m, a: m.kron(a, a[:2]), A),
    ("dot_3d", lambda m, a: m.dot(a[None], a), A),
    ("linalg.matmul", lambda m, a: m.linalg.matmul(a, a), A),
]


@pytest.mark.parametrize("name, body, x", DISPATCH, ids=[d[0] for d in DISPATCH])
def test_numpy_names_dispatch(name, body, x):
    via_numpy = ta.grad(lambda a: tnp.sum(body(np, a)))(x)
    via_tapead = ta.grad(lambda a: tnp.sum(body(tnp, a)))(x)
    _close(via_numpy, via_tapead, 1e-15)
    _close(body(np, x), body(tnp, x), 1e-15)
    ta.check_grads(lambda a: body(np, a), (x,), order=2)


def test_results_have_numpy_structure():
    w, v = ta.jvp(lambda a: tuple(tnp.linalg.eigh(a + a.T)), (A,), (np.eye(3),))[0]
    assert w.shape == (3,) and v.shape == (3, 3)

    def f(a):
        x, res, rank, s = tnp.linalg.lstsq(a, np.arange(4.0), rcond=None)
        assert rank == 3 and np.shape(s) == (3,) and np.shape(res) == (1,)
        return x
    ta.check_grads(f, (M,), order=1)


# ---------------------------------------------------------------------------
# second order through the decompositions, against JAX
# ---------------------------------------------------------------------------

def _logdet_chol(m, a):            # log det of the SPD a a^T + I, via cholesky
    L = m.linalg.cholesky(a @ a.T + np.eye(3))
    return 2.0 * m.sum(m.log(m.linalg.diagonal(L)))


def _gp(m, a):                     # a Gaussian-process style objective
    K = a @ a.T + np.eye(3)
    y = np.array([1.0, -0.5, 2.0])
    return m.dot(y, m.linalg.solve(K, y)) + m.linalg.slogdet(K)[1]


def _qr_stuff(m, a):
    q, r = m.linalg.qr(a)
    return m.sum((q @ q.T) ** 2 * m.arange(16.0).reshape(4, 4)) + m.sum(r ** 2)


SECOND = [("logdet_chol", _logdet_chol, A), ("gp", _gp, A), ("qr", _qr_stuff, M)]


@pytest.mark.parametrize("name, body, x", SECOND, ids=[s[0] for s in SECOND])
def test_hessian_and_hvp_match_jax(name, body, x):
    f_t = lambda a: body(tnp, a)     # noqa: E731
    f_j = lambda a: body(jnp, a)     # noqa: E731
    v = RNG.standard_normal(x.shape)
    h_j, hv_j = jax.jit(lambda a: (jax.hessian(f_j)(a), jax.jvp(jax.grad(f_j), (a,), (v,))[1]))(x)
    _close(ta.hessian(f_t)(x), h_j, 1e-10)
    _close(ta.hvp(f_t, (x,), (v,)), hv_j, 1e-10)


def test_batched_leading_dimensions():
    As = np.stack([A, A.T + np.eye(3), 2 * A])
    g = ta.grad(lambda a: tnp.sum(tnp.linalg.slogdet(a)[1]) + tnp.sum(tnp.linalg.inv(a)))(As)
    gj = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.slogdet(a)[1])
                          + jnp.sum(jnp.linalg.inv(a))))(As)
    _close(g, gj)


def test_float32_in_float32_out():
    a32 = A.astype(np.float32)
    for fn in (lambda a: tnp.linalg.slogdet(a)[1], lambda a: tnp.sum(tnp.linalg.inv(a)),
               lambda a: tnp.sum(tnp.linalg.eigvalsh(a + a.T) ** 2),
               lambda a: tnp.sum(tnp.linalg.cholesky(a @ a.T)),
               lambda a: tnp.sum(tnp.linalg.solve(a, np.ones(3, np.float32)))):
        g = ta.grad(fn)(a32)
        assert g.dtype == np.float32
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ta.hessian(fn)(a32)
