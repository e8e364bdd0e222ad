"""The singular value decomposition: ``svd`` (all of numpy's forms) and
``svdvals``, one primitive whose value packs ``u``, ``s`` and ``vh``.

Split from ``linalg_decomp`` (cholesky, eigh, qr); the rules are written with
tapead operations, so they can be differentiated again.  Where singular
values are repeated or zero the derivative of ``u``/``vh`` does not exist and
is refused (``_check_singular_values``); ``s`` alone stays differentiable.
"""
from __future__ import annotations

import warnings

import numpy as np

from tapead._core import Box, bind, is_complex
from tapead._prims.base import Primitive
from tapead._prims import batching
from tapead._prims.contract import _dtype_of, einsum
from tapead._prims.linalg import _any_box, _mT, _result_type, _row, matmul
from tapead._prims.linalg_decomp import _leading_axis_jvps
from tapead.errors import NonDifferentiableError, ShapeError
from tapead._prims.elementwise import conjugate, imag, real
from tapead._prims.reductions import sum as _sum
from tapead._prims.shape import concatenate, reshape

_SVDResult = _result_type("svd", np.eye(1))


# ---------------------------------------------------------------------------
# svd (reduced, real): U^T, s and Vh packed side by side, (..., k, m + 1 + n)
# ---------------------------------------------------------------------------

def _svd_impl(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.concatenate([np.swapaxes(u, -1, -2), s[..., None], vh], axis=-1)


def _svd_parts(p, m):
    """(U, s, Vh) of the packed value (s real: the column of a complex pack is)."""
    s = p[..., m]
    return _mT(p[..., :m]), (real(s) if is_complex(s) else s), p[..., m + 1:]


def _mH(x):
    return conjugate(_mT(x))


def _check_singular_values(s, gaps: bool):
    """Raise at a zero singular value (always) or at a repeated one (``gaps``);
    warn when one of them is nearly so (under vmap: in any lane)."""
    _, (s,) = batching.stacked_values(s)
    if s.size == 0:
        return
    eps = float(np.finfo(s.dtype if np.issubdtype(s.dtype, np.floating) else np.float64).eps)
    top = np.maximum(np.max(s, axis=-1, keepdims=True), np.finfo(np.float64).tiny)
    rel = s / top
    smallest = float(np.min(rel))
    if smallest <= 100 * eps:
        raise NonDifferentiableError(
            f"svd: a singular value is zero (relative size {smallest:.1e}): the matrix is "
            "rank deficient, where the singular values have a kink (like |x| at 0) and "
            "the singular vectors no derivative. Differentiate at a full-rank matrix, or "
            "write the quantity without the SVD (e.g. the squared Frobenius norm "
            "sum(a * a) instead of sum(s ** 2)).")
    gap = float(np.min(rel[..., :-1] - rel[..., 1:])) + 0.0 if s.shape[-1] > 1 else np.inf
    if gaps and gap <= 100 * eps:
        raise NonDifferentiableError(
            f"svd: the singular values are repeated (relative gap {gap:.1e}), where the "
            "singular vectors U, V have no derivative (any rotation within the repeated "
            "pair is a valid basis). Perturb the matrix, or, for a function of the "
            "singular values only, use np.linalg.svd(a, compute_uv=False), whose "
            "first derivative does not need distinct values.")
    if min(smallest, gap if gaps else np.inf) < np.sqrt(eps):
        warnings.warn(f"svd: nearly repeated or nearly zero singular values (relative "
                      f"gap {min(smallest, gap):.1e}); the derivatives of the singular "
                      "vectors scale like 1/gap and may be inaccurate", RuntimeWarning,
                      stacklevel=2)


def _svd_gap_inverse(s):
    """F[..., i, j] = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it."""
    _check_singular_values(s, gaps=True)
    eye = np.eye(np.shape(s)[-1], dtype=_dtype_of(s))
    s2 = s * s
    return (1.0 - eye) / (_row(s2) - reshape(s2, np.shape(s2) + (1,)) + eye)


def _svd_jvp(t, ans, a):
    """JAX's rule (``_svd_jvp_rule``): with dS = U^H dA V, ds = Re diag(dS),
    dU = U (F o (dS S + S dS^H) + D), dV = V (F o (S dS + dS^H S)), where D is
    diagonal, i Im(dS_ii) / s_i (complex matrices: JAX's choice of phase), plus
    the parts of dA outside the span of U (tall) or of V (wide)."""
    m, n = np.shape(a)[-2:]
    U, s, Vh = _svd_parts(ans, m)
    cplx = is_complex(ans)
    H = _mH if cplx else _mT
    V = H(Vh)
    F = _svd_gap_inverse(s)
    dAV = matmul(t, V)
    dS = matmul(H(U), dAV)
    ds = einsum("...ii->...i", dS)
    s_row, s_col = _row(s), reshape(s, np.shape(s) + (1,))
    dSS, SdS = dS * s_row, s_col * dS
    dU = matmul(U, F * (dSS + H(dSS)))
    if cplx:
        ds = real(ds)
        dU = dU + U * _row(1j * imag(einsum("...ii->...i", dS)) / s)
    dV = matmul(V, F * (SdS + H(SdS)))
    if m > n:
        dU = dU + (dAV - matmul(U, dS)) / s_row
    if n > m:
        dAhU = matmul(H(t), U)
        dV = dV + (dAhU - matmul(V, matmul(Vh, dAhU))) / s_row
    return concatenate([_mT(dU), reshape(ds, np.shape(ds) + (1,)), H(dV)], axis=-1)


def _svd_vjp(g, ans, a):
    """The transpose of ``_svd_jvp`` (autograd's ``grad_svd`` for real
    matrices) in JAX's convention for complex ones (no conjugation of the
    cotangent): with A_U = U^T gU and A_V = conj(Vh) gVh^H,
    G = diag(gs) + (F o (A_U - A_U^H)) S + S (F o (A_V - A_V^H)) [+ i Im diag(A_U) / s],
    the cotangent of A is conj(U) G conj(Vh) plus the tall/wide parts."""
    m, n = np.shape(a)[-2:]
    U, s, Vh = _svd_parts(ans, m)
    gU, gs, gVh = _svd_parts(g, m)
    cplx = is_complex(ans)
    Uc, Vhc = (conjugate(U), conjugate(Vh)) if cplx else (U, Vh)
    k = np.shape(s)[-1]
    eye = np.eye(k, dtype=_dtype_of(gs))
    inner = _row(gs) * eye                             # diag(gs)
    vectors = isinstance(gU, Box) or isinstance(gVh, Box) or np.any(gU) or np.any(gVh)
    if not vectors:                                    # singular values only: no gaps
        _check_singular_values(s, gaps=False)
        return matmul(Uc, matmul(inner, Vhc))
    H = _mH if cplx else _mT
    F = _svd_gap_inverse(s)
    s_row, s_col = _row(s), reshape(s, np.shape(s) + (1,))
    AU = matmul(_mT(U), gU)
    AV = matmul(Vhc, H(gVh)) if cplx else matmul(Vh, _mT(gVh))
    inner = inner + (F * (AU - H(AU))) * s_row + s_col * (F * (AV - H(AV)))
    if cplx:
        inner = inner + _row(1j * imag(einsum("...ii->...i", AU)) / s) * eye
    gA = matmul(Uc, matmul(inner, Vhc))
    if m > n:                                          # (I - U U^T) gU S^-1 V^T
        gA = gA + matmul((gU - matmul(Uc, AU)) / s_row, Vhc)
    if n > m:                                          # U S^-1 gV^T (I - V V^T)
        gA = gA + matmul(Uc / s_row, gVh - matmul(matmul(gVh, _mT(Vh)), Vhc))
    return gA


svd_p = Primitive("svd", _svd_impl, saves=())          # the rules read a's shape only
svd_p.complex_ok = True        # complex matrices: the rules above, in JAX's phase
svd_p.defvmap(batching.leading_rule(svd_p, (2,)))
svd_p.defjvp(_svd_jvp)
svd_p.defvjp(_svd_vjp)
_leading_axis_jvps(svd_p)


def _svd_values_jvp(t, s, a):
    """ds = Re diag(U^H dA V), with U, V of the (traced) reduced decomposition."""
    _check_singular_values(s, gaps=False)
    U, _, Vh = _svd_parts(bind(svd_p, a) if isinstance(a, Box) else _svd_impl(a),
                          np.shape(a)[-2])
    if is_complex(U):
        return real(_sum(conjugate(U) * matmul(t, _mH(Vh)), axis=-2))
    return _sum(U * matmul(t, _mT(Vh)), axis=-2)


def _svd_values_vjp(g, s, a):
    """U diag(g) V^T (conj(U) diag(g) conj(Vh) for complex matrices)."""
    _check_singular_values(s, gaps=False)
    U, _, Vh = _svd_parts(bind(svd_p, a) if isinstance(a, Box) else _svd_impl(a),
                          np.shape(a)[-2])
    if is_complex(U):
        return matmul(conjugate(U) * _row(g), conjugate(Vh))
    return matmul(U * _row(g), Vh)


svd_values_p = Primitive("svd_values", lambda a: np.linalg.svd(a, compute_uv=False),
                         saves=(0,))
svd_values_p.defvmap(batching.leading_rule(svd_values_p, (2,)))
svd_values_p.defjvp(_svd_values_jvp)
svd_values_p.defvjp(_svd_values_vjp)
_leading_axis_jvps(svd_values_p)           # one SVD for all K directions
svd_values_p.complex_ok = True


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular value decomposition ``a = U diag(s) Vh`` (``np.linalg.svd``), with
    derivatives.

    Parameters
    ----------
    a : (..., m, n) array
        Real or complex; leading axes are a stack of matrices.
    full_matrices : bool
        As numpy.  On a traced non-square ``a`` with ``compute_uv=True`` the
        extra ``|m - n|`` columns of U (or rows of Vh) are an arbitrary
        orthonormal basis of a complement and have no derivative, so this
        raises ``NonDifferentiableError``: pass ``full_matrices=False`` (same
        ``s``, same leading columns).  For a square ``a`` both are the same.
    compute_uv : bool
        False: the singular values alone, shape (..., k), ``k = min(m, n)``.
    hermitian : bool
        As numpy for the values; on a traced ``a`` with ``compute_uv=True``
        it must be False (numpy's hermitian path picks other signs).

    Returns
    -------
    SVDResult(U (..., m, k), S (..., k), Vh (..., k, n)) with ``full_matrices=False``
    (``U`` is (..., m, m) and ``Vh`` (..., n, n) with ``full_matrices=True``), or
    ``s`` (..., k) when ``compute_uv=False``.

    Notes
    -----
    Derivatives follow JAX (``jax.numpy.linalg.svd``).  They need **nonzero**
    singular values (a zero one is a kink, like ``|x|`` at 0) and, for U and V,
    **distinct** ones: the rules divide by ``s_j^2 - s_i^2``.  Otherwise they
    raise ``NonDifferentiableError``; nearly repeated or nearly zero values
    (relative gap below ``sqrt(eps)``) warn.  The first derivative of the
    singular values alone (``compute_uv=False``, or a function of ``S`` only
    in reverse mode) needs no gaps; at an exactly repeated value it is the
    derivative of functions symmetric in the repeated values (their sum, a
    norm), since the values themselves cross there.  Singular vectors are
    defined up to a joint sign flip of ``U[:, i]`` and ``Vh[i]``: compare
    sign-invariant quantities (``U * U``, ``U @ diag(f(s)) @ Vh``).  For complex
    matrices the vectors are defined up to a joint phase ``e^{i t}`` of
    ``U[:, i]`` and ``Vh[i]``; the derivatives take JAX's choice (the phase
    moves with ``U``), so compare phase-invariant quantities (``|U|^2``,
    ``U @ diag(f(s)) @ Vh``).

    >>> import numpy as np, tapead as ta
    >>> a = np.array([[3.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    >>> ta.grad(lambda a: np.linalg.svd(a, compute_uv=False)[0])(a)
    array([[1., 0.],
           [0., 0.],
           [0., 0.]])
    """
    if not _any_box(a):
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                             hermitian=hermitian)
    s = np.shape(a)
    if len(s) < 2:
        raise ShapeError(f"svd: a must be a matrix or a stack of them, shape (..., m, n); "
                         f"got shape {s}")
    if not compute_uv:
        return bind(svd_values_p, a)
    m, n = s[-2:]
    if hermitian:
        raise NonDifferentiableError(
            "svd(a, hermitian=True) on a traced matrix: pass hermitian=False (the same "
            "decomposition; numpy's hermitian path picks other signs), or use "
            "np.linalg.eigh for a symmetric matrix")
    if full_matrices and m != n:
        raise NonDifferentiableError(
            f"svd of a traced {m} x {n} matrix with full_matrices=True (numpy's default): "
            "the extra columns of U (or rows of Vh) are an arbitrary orthonormal basis of "
            "a complement and have no derivative. Pass full_matrices=False (the same "
            "singular values and leading vectors), or compute_uv=False for the singular "
            "values alone.")
    p = bind(svd_p, a)
    U, sv, Vh = _svd_parts(p, m)
    return _SVDResult(U, sv, Vh)


def svdvals(x, /):
    """The singular values (``np.linalg.svdvals``): ``svd(x, compute_uv=False)``.

    The derivative of a distinct singular value ``s_i`` is ``u_i v_i^T``:

    >>> import numpy as np, tapead as ta
    >>> g = ta.grad(lambda A: np.linalg.svdvals(A)[0])(np.diag([3.0, 1.0]))
    >>> print(g)
    [[1. 0.]
     [0. 0.]]
    """
    return svd(x, compute_uv=False)


#: the names of ``tapead.numpy.linalg`` defined here
LINALG_NAMES = ["svd", "svdvals"]

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {getattr(np.linalg, name): globals()[name] for name in LINALG_NAMES}
__all__ = []
