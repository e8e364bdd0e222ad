"""Matrix decompositions: cholesky, eigh, eigvalsh, qr, eig and eigvals (svd is in
``linalg_svd``).

Split from ``linalg`` along the seam between solves/inverses/determinants
and factorisations; ``tapead.numpy.linalg`` and numpy's dispatch see one
``linalg`` namespace.  Decompositions with several outputs are one
primitive whose value packs the outputs into one array; the user-facing
function slices it, so the decomposition runs once.  Every rule is written
with tapead operations, so it can be differentiated again.
"""
from __future__ import annotations

import warnings

import numpy as np

from tapead._core import Box, bind, is_complex
from tapead import patterns
from tapead._prims.base import Primitive
from tapead._prims import batching
from tapead._prims.contract import _dtype_of, einsum
from tapead._prims.linalg import (_any_box, _batched_jvps, _lapack, _mT, _result_type, _row,
                                  _solve_right, _square, _sym, _tri, matmul, solve)
from tapead.errors import ShapeError
from tapead._prims.elementwise import conjugate, real
from tapead._prims.reductions import sum as _sum
from tapead._prims.shape import concatenate, reshape

_NOT_PD = ("cholesky needs a symmetric positive definite matrix: check that it is "
           "symmetric and that its eigenvalues (tapead.numpy.linalg.eigvalsh) are "
           "positive, or add a small multiple of the identity.")
def _leading_axis_jvps(prim):
    """The batched JVP of rules that broadcast over a leading axis of K
    directions (matmul, broadcasting arithmetic): the K tangents in one call
    per argument instead of one call per direction; and the dense pattern of a
    matrix function."""
    def batched(tans, ans, vals, params, K):
        total = None
        for k, t in enumerate(tans):
            if t is not None:
                c = prim.jvps[k](t, ans, *vals, **params)
                total = c if total is None else total + c
        return total
    prim.defbatched(batched)
    return prim.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


_EighResult = _result_type("eigh", np.eye(1))
_QRResult = _result_type("qr", np.eye(1))


# ---------------------------------------------------------------------------
# cholesky: dL = L Phi(L^-1 sym(dA) L^-T), Phi = lower triangle, half diagonal
# ---------------------------------------------------------------------------

def _phi(x):
    n = np.shape(x)[-1]
    dt = _dtype_of(x)
    return x * (np.tri(n, dtype=dt) - 0.5 * np.eye(n, dtype=dt))


def _cholesky_jvp(t, L, a, UPLO="L"):
    return matmul(L, _phi(_solve_right(solve(L, _read_symmetric(t, UPLO)), _mT(L))))


def _cholesky_vjp(g, L, a, UPLO="L"):
    # <g, L Phi(X)> = <L^-T Phi(L^T g) L^-1, sym(dA)>
    return _read_symmetric_adjoint(
        _sym(_solve_right(solve(_mT(L), _phi(matmul(_mT(L), g))), L)), UPLO)


def _cholesky_impl(a, UPLO="L"):
    """The lower factor L of the symmetric matrix read from the UPLO triangle."""
    if UPLO == "L":
        return _lapack("cholesky", np.linalg.cholesky, a, hint=_NOT_PD)
    return np.swapaxes(_lapack("cholesky", np.linalg.cholesky, a, hint=_NOT_PD, upper=True),
                       -1, -2)


cholesky_p = Primitive("cholesky", _cholesky_impl, saves=())
cholesky_p.defjvp(_cholesky_jvp)
cholesky_p.defvjp(_cholesky_vjp)
_batched_jvps(cholesky_p)
cholesky_p.defvmap(batching.leading_rule(cholesky_p, (2,)))
cholesky_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def cholesky(a, /, *, upper=False):
    """The Cholesky factor of a symmetric positive definite matrix, with derivatives.

    Parameters
    ----------
    a : (..., n, n) array
        Symmetric positive definite.  Like numpy, only one triangle is read
        (the lower one, or the upper one with ``upper=True``): the value is
        that of the symmetric matrix with that triangle, and so is the
        derivative, which is zero for the entries of the other triangle
        (JAX and PyTorch symmetrize instead, which agrees on the sum of a
        mirrored pair of entries).
    upper : bool
        Return ``U = L^T`` (``a = U^T U``) instead of ``L`` (``a = L L^T``).

    Raises ``LinAlgError`` (with what to do) when ``a`` is not positive
    definite.  The rules use ``solve`` for the triangular solves.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> L = np.linalg.cholesky(A)
    >>> Ld = ta.jvp(np.linalg.cholesky, (A,), (np.eye(2),))[1]   # along dA = I
    >>> bool(np.allclose(Ld @ L.T + L @ Ld.T, np.eye(2), rtol=0, atol=1e-14))
    True
    """
    _square("cholesky", a)
    if not _any_box(a):
        return _lapack("cholesky", np.linalg.cholesky, a, hint=_NOT_PD, upper=upper)
    L = bind(cholesky_p, a, UPLO="U" if upper else "L")
    return _mT(L) if upper else L


# ---------------------------------------------------------------------------
# eigh: w, V packed as one (..., n + 1, n) array [w; V]
# ---------------------------------------------------------------------------

def _eigh_impl(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO)
    return np.concatenate([w[..., None, :], v], axis=-2)


def _check_spectrum(w):
    """Raise at a repeated eigenvalue, warn at a nearly repeated one (under
    vmap: in any lane)."""
    _, (w,) = batching.stacked_values(w)
    if w.shape[-1] < 2 or w.size == 0:
        return
    eps = np.finfo(w.dtype if np.issubdtype(w.dtype, np.floating) else np.float64).eps
    scale = np.maximum(np.max(np.abs(w), axis=-1, keepdims=True), np.finfo(np.float64).tiny)
    gap = float(np.min(np.diff(w, axis=-1) / scale))
    if gap <= 100 * eps:
        raise np.linalg.LinAlgError(
            f"eigh: the spectrum has a repeated eigenvalue (relative gap {gap:.1e}), where "
            "the eigenvectors have no derivative. eigh's derivative needs distinct "
            "eigenvalues: perturb the matrix, or, for a function of the eigenvalues only, "
            "use reverse mode (ta.grad) once, which does not need the gaps.")
    if gap < np.sqrt(eps):
        warnings.warn(f"eigh: nearly repeated eigenvalues (relative gap {gap:.1e}); the "
                      "derivatives of the eigenvectors scale like 1/gap and may be "
                      "inaccurate", RuntimeWarning, stacklevel=2)


def _gap_inverse(w):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    _check_spectrum(w)
    n = np.shape(w)[-1]
    eye = np.eye(n, dtype=_dtype_of(w))
    d = _row(w) - reshape(w, np.shape(w) + (1,))
    return (1.0 - eye) / (d + eye)


def _triangle_masks(n, UPLO, dtype):
    """(the read triangle with its diagonal, the read triangle without it)."""
    lower = UPLO.upper() == "L"
    full = np.tril(np.ones((n, n), dtype)) if lower else np.triu(np.ones((n, n), dtype))
    return full, full - np.eye(n, dtype=dtype)


def _read_symmetric(t, UPLO):
    """The symmetric (Hermitian, for complex ``t``) matrix numpy's eigh sees in
    ``t``: the ``UPLO`` triangle mirrored (the other triangle is never read; for
    complex values LAPACK takes the diagonal's real part)."""
    full, strict = _triangle_masks(np.shape(t)[-1], UPLO, _float_of(t))
    if is_complex(t):
        low = t * strict
        return low + _mH(low) + real(t) * (full - strict)
    return t * full + _mT(t * strict)


def _read_symmetric_adjoint(G, UPLO):
    """Adjoint of ``_read_symmetric`` for a symmetric (Hermitian) ``G``: twice
    ``G`` on the read triangle's off-diagonal entries, ``G`` on the diagonal
    (real for a Hermitian ``G``), 0 elsewhere."""
    full, strict = _triangle_masks(np.shape(G)[-1], UPLO, _float_of(G))
    return G * (full + strict)


def _float_of(x):
    """The real dtype of ``x`` (masks stay real for complex values)."""
    return np.finfo(_dtype_of(x)).dtype


def _mH(x):
    return conjugate(_mT(x))


def _eigh_parts(ans):
    """(w, V) of the packed value; w real (the row of a complex pack is)."""
    w, V = ans[..., 0, :], ans[..., 1:, :]
    return (real(w) if is_complex(w) else w), V


def _eigh_jvp(t, ans, a, UPLO="L"):
    w, V = _eigh_parts(ans)
    cplx = is_complex(V)
    M = matmul(_mH(V) if cplx else _mT(V), matmul(_read_symmetric(t, UPLO), V))
    dw = einsum("...ii->...i", M)
    dV = matmul(V, _gap_inverse(w) * M)               # JAX's gauge: (V^H dV)_ii = 0
    return concatenate([_row(real(dw) if cplx else dw), dV], axis=-2)


def _eigh_vjp(g, ans, a, UPLO="L"):
    """The transpose of ``_eigh_jvp`` in JAX's convention (no conjugation of the
    cotangent): K = diag(gw) + F o (V^T gV), the cotangent conj(V) K V^T
    made Hermitian and read back through the triangle."""
    w, V = _eigh_parts(ans)
    cplx = is_complex(V)
    gw, gV = g[..., 0, :], g[..., 1:, :]
    gw = real(gw) if is_complex(gw) else gw
    K = _row(gw) * np.eye(np.shape(w)[-1], dtype=_dtype_of(gw))
    if isinstance(gV, Box) or np.any(gV):            # skipped for eigenvalues only
        K = K + _gap_inverse(w) * matmul(_mT(V), gV)
    if cplx:
        G = matmul(conjugate(V), matmul(K, _mT(V)))
        return _read_symmetric_adjoint(0.5 * (G + _mH(G)), UPLO)
    return _read_symmetric_adjoint(_sym(matmul(V, matmul(K, _mT(V)))), UPLO)


eigh_p = Primitive("eigh", _eigh_impl, saves=())
eigh_p.defjvp(_eigh_jvp)
eigh_p.defvjp(_eigh_vjp)
eigh_p.complex_ok = True        # Hermitian matrices: the rules above, in JAX's gauge
_batched_jvps(eigh_p)
eigh_p.defvmap(batching.leading_rule(eigh_p, (2,)))
eigh_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def eigh(a, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, with derivatives.

    Parameters
    ----------
    a : (..., n, n) array
        Like numpy, only one triangle (``UPLO``) is read: the value is that
        of the symmetric matrix with that triangle, and so is the
        derivative, which is therefore zero for the entries of the other
        triangle (``docs/linalg.md``; JAX symmetrizes instead, which agrees
        on the sum of a mirrored pair of entries).
    UPLO : {"L", "U"}

    Returns
    -------
    EighResult(eigenvalues (..., n), eigenvectors (..., n, n))

    Notes
    -----
    A complex ``a`` is read as Hermitian (the triangle, with the diagonal's
    real part); the eigenvalues are real, the eigenvectors complex, each
    defined up to a phase: the derivatives take JAX's choice, ``V^H dV`` with
    a zero diagonal, so compare phase-invariant quantities (``|V|^2``,
    ``V diag(f(w)) V^H``).  The derivative of the eigenvectors needs **distinct eigenvalues**: it
    divides by the gaps ``w_j - w_i``.  At a repeated eigenvalue the rules
    raise ``LinAlgError``; at a nearly repeated one (relative gap below
    ``sqrt(eps)``) they warn.  The one exception: the gradient (reverse
    mode, first order) of a function of the eigenvalues only never divides
    by a gap.  Eigenvectors are defined up to sign; the derivative is that
    of numpy's choice, which is locally constant: compare sign-invariant
    quantities (``V * V``, ``V @ f(w) @ V.T``) across libraries.

    Examples
    --------
    The derivative of an eigenvalue ``w_i`` along a symmetric perturbation is
    ``v_i v_i^T``; numpy reads the lower triangle, so the gradient lives
    there (an off-diagonal entry stands for itself and its mirror):

    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> g = ta.grad(lambda A: np.linalg.eigh(A).eigenvalues[1])(A)
    >>> P = np.outer(*[np.linalg.eigh(A).eigenvectors[:, 1]] * 2)
    >>> bool(np.allclose(g, np.tril(2 * P) - np.diag(np.diag(P)), rtol=0, atol=1e-14))
    True
    """
    _square("eigh", a)
    if not _any_box(a):
        return np.linalg.eigh(a, UPLO)
    p = bind(eigh_p, a, UPLO=UPLO)
    return _EighResult(*_eigh_parts(p))


def eigvalsh(a, UPLO="L"):
    """The eigenvalues of a symmetric matrix (see ``eigh`` for the requirements).

    On traced values they come from ``eigh`` (one decomposition; the
    eigenvectors are needed for the derivative).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> g = ta.grad(lambda A: np.linalg.eigvalsh(A).sum())(A)       # d trace = I
    >>> bool(np.allclose(g, np.eye(2), rtol=0, atol=1e-14))
    True
    """
    if not _any_box(a):
        return np.linalg.eigvalsh(a, UPLO)
    return eigh(a, UPLO)[0]


# ---------------------------------------------------------------------------
# qr (reduced, m >= n, full column rank): Q and R packed as [Q; R]
# ---------------------------------------------------------------------------

def _qr_impl(a):
    q, r = np.linalg.qr(a)
    return np.concatenate([q, r], axis=-2)


def _qr_jvp(t, ans, a):
    m = np.shape(a)[-2]
    Q, R = ans[..., :m, :], ans[..., m:, :]
    B = _solve_right(t, R)                           # dA R^-1
    X = matmul(_mT(Q), B)
    low = _tri(X, -1)
    omega = low - _mT(low)                           # Q^T dQ, skew-symmetric
    return concatenate([matmul(Q, omega - X) + B, matmul(X - omega, R)], axis=-2)


def _qr_vjp(g, ans, a):
    m = np.shape(a)[-2]
    Q, R = ans[..., :m, :], ans[..., m:, :]
    gQ, gR = g[..., :m, :], g[..., m:, :]
    N = matmul(gR, _mT(R)) - matmul(_mT(Q), gQ)
    N = _tri(N, 0, lower=False) + _mT(_tri(N, 1, lower=False))  # upper triangle mirrored
    return _solve_right(gQ + matmul(Q, N), _mT(R))   # (gQ + Q N) R^-T


qr_p = Primitive("qr", _qr_impl, saves=())
qr_p.defjvp(_qr_jvp)
qr_p.defvjp(_qr_vjp)
_batched_jvps(qr_p)
qr_p.defvmap(batching.leading_rule(qr_p, (2,)))
qr_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def qr(a, mode="reduced"):
    """QR factorisation (``np.linalg.qr``), with derivatives in modes 'reduced' and 'r'.

    The derivative needs a tall or square ``a`` (``m >= n``) of **full
    column rank** (R invertible).  Q's columns and R's rows are defined up
    to sign; the derivative is that of numpy's (LAPACK's) choice.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> a = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 1.0]])
    >>> def r00(a):
    ...     return np.linalg.qr(a)[1][0, 0]          # |R00| is the norm of column 0
    >>> g = ta.grad(r00)(a)
    >>> bool(np.allclose(np.abs(g[:, 0]), np.abs(a[:, 0]) / np.linalg.norm(a[:, 0])))
    True
    """
    if not _any_box(a):
        return np.linalg.qr(a, mode)
    s = np.shape(a)
    if len(s) < 2:
        raise ShapeError(f"qr: a must be a matrix or a stack of them; got shape {s}")
    if mode not in ("reduced", "r"):
        raise ValueError(f"qr: mode={mode!r} has no derivative in tapead; use mode='reduced' "
                         "(or 'r' for R alone)")
    m, n = s[-2:]
    if m < n:
        raise ShapeError(f"qr: derivatives need m >= n (a tall or square matrix of full column "
                         f"rank); got shape {s}. Factor the transpose instead (an LQ "
                         "factorisation of a).")
    p = bind(qr_p, a)
    R = p[..., m:, :]
    return R if mode == "r" else _QRResult(p[..., :m, :], R)



# ---------------------------------------------------------------------------
# eig (general matrices): w, V packed as one complex (..., n + 1, n) array [w; V]
# ---------------------------------------------------------------------------

_EigResult = _result_type("eig", np.eye(1))


def _eig_impl(a):
    w, v = np.linalg.eig(a)
    ct = np.result_type(w.dtype, v.dtype, np.complex64)
    return np.concatenate([w[..., None, :].astype(ct), v.astype(ct)], axis=-2)


def _eig_gaps(w):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it; refuses a
    repeated eigenvalue (where the eigenvectors have no derivative)."""
    _, (wc,) = batching.stacked_values(w)
    if wc.shape[-1] > 1 and wc.size:
        d = np.where(np.eye(wc.shape[-1], dtype=bool), np.inf,
                     np.abs(wc[..., None, :] - wc[..., :, None]))
        scale = np.maximum(np.max(np.abs(wc)), np.finfo(np.float64).tiny)
        if float(np.min(d)) / scale <= 100 * np.finfo(np.float64).eps:
            raise np.linalg.LinAlgError(
                "eig: a repeated eigenvalue, where the eigenvectors have no derivative "
                "(any basis of the eigenspace is one); perturb the matrix, or, for a "
                "function of the eigenvalues only, use reverse mode (ta.grad) once, "
                "which does not need the gaps")
    n = np.shape(w)[-1]
    eye = np.eye(n, dtype=_dtype_of(w))
    return (1.0 - eye) / (_row(w) - reshape(w, np.shape(w) + (1,)) + eye)


def _eig_jvp(t, ans, a):
    """JAX's rule with its eigenvector derivatives on: X = V^-1 dA V, dw = diag X,
    dV = V (F o X) less each column's real part along itself (numpy's columns
    have unit norm).  A column's phase stays JAX's choice: compare
    phase-invariant quantities."""
    w, V = ans[..., 0, :], ans[..., 1:, :]
    X = solve(V, matmul(t, V))
    dw = einsum("...ii->...i", X)
    dV = matmul(V, _eig_gaps(w) * X)
    dV = dV - V * _row(real(_sum(conjugate(V) * dV, axis=-2)))
    return concatenate([_row(dw), dV], axis=-2)


def _eig_vjp(g, ans, a):
    """The transpose of ``_eig_jvp`` (JAX's convention): with
    gV' = gV - conj(V) Re(sum(gV o V, rows)) and K = diag(gw) + F o (V^T gV'),
    the cotangent of A is V^-T K V^T (its real part for a real A)."""
    w, V = ans[..., 0, :], ans[..., 1:, :]
    gw, gV = g[..., 0, :], g[..., 1:, :]
    K = _row(gw) * np.eye(np.shape(w)[-1], dtype=_dtype_of(gw))
    if isinstance(gV, Box) or np.any(gV):            # skipped for eigenvalues only
        gV = gV - conjugate(V) * _row(real(_sum(gV * V, axis=-2)))
        K = K + _eig_gaps(w) * matmul(_mT(V), gV)
    gA = solve(_mT(V), matmul(K, _mT(V)))
    return gA if is_complex(a) else real(gA)


eig_p = Primitive("eig", _eig_impl, saves=())
eig_p.defjvp(_eig_jvp)
eig_p.defvjp(_eig_vjp)
eig_p.complex_ok = True
_batched_jvps(eig_p)
eig_p.defvmap(batching.leading_rule(eig_p, (2,)))
eig_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def _real_spectrum(v):
    """Whether numpy's eig returns real arrays for the (real) matrix ``v``: all
    imaginary parts exactly zero."""
    v = np.asarray(v)
    return bool(not np.iscomplexobj(v) and np.all(np.linalg.eigvals(v).imag == 0))


def eig(a):
    """Eigenvalues and (unit-norm) eigenvectors of a general matrix
    (``np.linalg.eig``), with derivatives.

    Parameters
    ----------
    a : (..., n, n) array
        Real or complex.  Like numpy, a real matrix whose eigenvalues are all
        real gives real results, else complex ones (which the recording guards:
        a replay where this changes records again).

    Returns
    -------
    EigResult(eigenvalues (..., n), eigenvectors (..., n, n))

    Notes
    -----
    The rules are JAX's (``jax.lax.linalg.eig`` with its eigenvector
    derivatives turned on): they need **distinct eigenvalues** (a repeated one
    raises ``LinAlgError``, except for the gradient of a function of the
    eigenvalues alone).  An eigenvector is defined up to a complex factor of
    modulus 1; the derivative takes JAX's choice, so only phase-invariant
    quantities (``|V|^2``, ``V diag(f(w)) V^-1``) are comparable across
    libraries -- and with finite differences of numpy's own choice.

    >>> import numpy as np, tapead as ta
    >>> A = np.array([[2.0, 1.0], [0.5, 3.0]])
    >>> g = ta.grad(lambda A: np.linalg.eig(A).eigenvalues.real.sum())(A)   # d trace = I
    >>> bool(np.allclose(g, np.eye(2), rtol=0, atol=1e-14))
    True
    """
    if not _any_box(a):
        return np.linalg.eig(a)
    _square("eig", a)
    p = bind(eig_p, a)
    w, V = p[..., 0, :], p[..., 1:, :]
    if not is_complex(a):
        real_w = batching.guarded_values(lambda v: np.asarray(_real_spectrum(v)), a,
                                         "whether eig's eigenvalues are real")
        if real_w:
            w, V = real(w), real(V)
    return _EigResult(w, V)


def eigvals(a):
    """The eigenvalues of a general matrix (``np.linalg.eigvals``), with
    derivatives (see ``eig``; their gradient needs no gaps).

    >>> import numpy as np, tapead.numpy as tnp
    >>> np.round(tnp.linalg.eigvals(np.diag([1.0, 2.0])).real, 12).tolist()
    [1.0, 2.0]
    """
    if not _any_box(a):
        return np.linalg.eigvals(a)
    return eig(a)[0]


#: the names of ``tapead.numpy.linalg`` defined here
LINALG_NAMES = ["cholesky", "eigh", "eigvalsh", "qr", "eig", "eigvals"]

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {getattr(np.linalg, name): globals()[name] for name in LINALG_NAMES}
__all__ = []
