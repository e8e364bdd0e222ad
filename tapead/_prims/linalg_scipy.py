"""scipy.linalg's functions: solve_triangular, cho_factor, cho_solve, expm, sqrtm,
solve_sylvester and solve_banded.

``solve_triangular`` and ``expm`` are primitives; ``cho_factor`` is numpy's
Cholesky factor (``linalg_decomp.cholesky``) and ``cho_solve`` two triangular
solves.  Every rule is written with tapead operations (the triangular solve
itself, traced ``expm`` of a block matrix), so it can be differentiated again.
The public names live in ``tapead.scipy.linalg``; scipy's own functions do not
dispatch on tracers (they convert their arguments to numpy arrays first).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from tapead._core import bind, is_complex
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead._prims.contract import _dtype_of
from tapead._prims.linalg import _any_box, _mT, _square, _unbroadcast, matmul
from tapead._prims.linalg_decomp import _leading_axis_jvps, cholesky
from tapead.errors import NonDifferentiableError, ShapeError
from tapead._prims.shape import concatenate, reshape, stack


# ---------------------------------------------------------------------------
# solve_triangular: x = op(T)^-1 b, T the triangle of a (unit diagonal if asked)
# ---------------------------------------------------------------------------

def _transposed(trans) -> bool:
    if trans in (0, "N", "n"):
        return False
    if trans in (1, "T", "t", 2, "C", "c"):
        return True                                  # real matrices: 'C' is 'T'
    raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C'; got {trans!r}")


def _triangle_mask(a, lower, unit_diagonal):
    """The entries of ``a`` that solve_triangular reads, as a 0/1 matrix."""
    n, dt = np.shape(a)[-1], _dtype_of(a)
    m = np.tri(n, k=-1 if unit_diagonal else 0, dtype=dt)
    return m if lower else m.T


def _st_impl(a, b, trans=0, lower=False, unit_diagonal=False):
    return scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower,
                                         unit_diagonal=unit_diagonal)


def _st(a, b, trans, lower, unit_diagonal):
    """The traced (or plain) triangular solve with the same parameters."""
    if _any_box(a, b):
        return bind(solve_triangular_p, a, b, trans=trans, lower=lower,
                    unit_diagonal=unit_diagonal)
    return _st_impl(a, b, trans, lower, unit_diagonal)


def _op(x, trans):
    return _mT(x) if _transposed(trans) else x


def _st_jvp_a(t, x, a, b, trans=0, lower=False, unit_diagonal=False):
    dT = t * _triangle_mask(a, lower, unit_diagonal)  # dx = -op(T)^-1 op(dT) x
    return -_st(a, matmul(_op(dT, trans), x), trans, lower, unit_diagonal)


def _st_vjp_a(g, x, a, b, trans=0, lower=False, unit_diagonal=False):
    gb = _st(a, g, 0 if _transposed(trans) else 1, lower, unit_diagonal)
    gT = -matmul(x, _mT(gb)) if _transposed(trans) else -matmul(gb, _mT(x))
    return _unbroadcast(a, gT * _triangle_mask(a, lower, unit_diagonal))


solve_triangular_p = Primitive("solve_triangular", _st_impl, saves=(0,))
# scipy (>= 1.15) solves a stack of systems, each as on its own (the same
# numbers): lanes in front, over the leading axes
solve_triangular_p.defvmap(batching.leading_rule(solve_triangular_p, (2, 2)))
solve_triangular_p.defjvp(
    _st_jvp_a,
    lambda t, x, a, b, trans=0, lower=False, unit_diagonal=False:
        _st(a, t, trans, lower, unit_diagonal))
solve_triangular_p.defvjp(
    _st_vjp_a,
    lambda g, x, a, b, trans=0, lower=False, unit_diagonal=False: _unbroadcast(
        b, _st(a, g, 0 if _transposed(trans) else 1, lower, unit_diagonal)))
_leading_axis_jvps(solve_triangular_p)      # scipy broadcasts a over the K directions


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """Solve ``op(a) x = b`` for a triangular ``a`` (``scipy.linalg.solve_triangular``),
    with derivatives in ``a`` and ``b``.

    Parameters
    ----------
    a : (..., n, n) array
        Only its lower (``lower=True``) or upper triangle is read, without the
        diagonal when ``unit_diagonal=True`` (taken as ones); the derivative in
        ``a`` is zero outside the entries read.
    b : (n,) or (..., n, k) array
    trans : {0, 1, 2, 'N', 'T', 'C'}
        ``op(a)`` is ``a`` (0, 'N') or ``a.T`` (1, 'T'; 2, 'C' for real ``a``).
    lower, unit_diagonal : bool
    overwrite_b, check_finite : bool
        As scipy on plain inputs; ignored on traced ones.

    Returns
    -------
    x : shaped like ``b`` (batch axes broadcast).

    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.linalg import solve_triangular
    >>> L = np.array([[2.0, 0.0], [1.0, 4.0]])
    >>> ta.grad(lambda b: solve_triangular(L, b, lower=True).sum())(np.ones(2))
    array([0.375, 0.25 ])
    """
    if not _any_box(a, b):
        return scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower,
                                             unit_diagonal=unit_diagonal,
                                             overwrite_b=overwrite_b, check_finite=check_finite)
    n = _square("solve_triangular", a)
    _transposed(trans)
    sb = np.shape(b)
    vector = len(sb) == 1
    if not sb or (sb[0] if vector else sb[-2]) != n:
        raise ShapeError(f"solve_triangular: a has shape {np.shape(a)} and b has shape {sb}; "
                         f"b must be (n,) or (..., n, k) with n = {n}")
    params = dict(trans=trans, lower=bool(lower), unit_diagonal=bool(unit_diagonal))
    if vector:
        x = bind(solve_triangular_p, a, reshape(b, (n, 1)), **params)
        return reshape(x, np.shape(x)[:-1])
    return bind(solve_triangular_p, a, b, **params)


# ---------------------------------------------------------------------------
# cho_factor / cho_solve
# ---------------------------------------------------------------------------

def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor in scipy's ``(c, lower)`` form, with derivatives.

    Parameters
    ----------
    a : (..., n, n) array
        Symmetric positive definite; like scipy, only the lower
        (``lower=True``) or upper triangle is read.  The derivative treats
        ``a`` as symmetric (see ``tapead.numpy.linalg.cholesky``).
    lower : bool

    Returns
    -------
    (c, lower): ``c`` (..., n, n) holds ``L`` (``a = L L^T``) or ``U = L^T``.  On
    traced inputs the other triangle of ``c`` is zero; scipy leaves arbitrary
    values there, which ``cho_solve`` never reads.
    """
    if not _any_box(a):
        return scipy.linalg.cho_factor(a, lower=lower, overwrite_a=overwrite_a,
                                       check_finite=check_finite)
    if lower:
        return cholesky(a), True
    return _mT(cholesky(_mT(a))), False               # reads a's upper triangle


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` from ``cho_factor(a)`` (``scipy.linalg.cho_solve``): two
    triangular solves, differentiable in the factor and in ``b``.

    Parameters
    ----------
    c_and_lower : (c (..., n, n), lower bool)
        As returned by ``cho_factor``; only ``c``'s triangle is read.
    b : (n,) or (..., n, k) array
    """
    c, lower = c_and_lower
    if not _any_box(c, b):
        return scipy.linalg.cho_solve((c, lower), b, overwrite_b=overwrite_b,
                                      check_finite=check_finite)
    if lower:                                        # L L^T x = b
        y = solve_triangular(c, b, lower=True)
        return solve_triangular(c, y, trans=1, lower=True)
    y = solve_triangular(c, b, trans=1, lower=False)  # U^T U x = b
    return solve_triangular(c, y, lower=False)


# ---------------------------------------------------------------------------
# expm: the Frechet derivative L(A, E) = expm([[A, E], [0, A]])[:n, n:]
# ---------------------------------------------------------------------------

def _frechet(a, e):
    """``L(a, e)``, the directional derivative of expm at ``a`` along ``e``,
    by the block-matrix identity (Higham, Functions of Matrices, thm. 3.6)."""
    n = np.shape(a)[-1]
    zero = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(e)), dtype=_dtype_of(a, e))
    a = a + zero                                     # broadcast the batch axes
    big = concatenate([concatenate([a, e + zero], axis=-1),
                       concatenate([zero, a], axis=-1)], axis=-2)
    return expm(big)[..., :n, n:]


expm_p = Primitive("expm", scipy.linalg.expm, saves=(0,))
expm_p.defvmap(batching.leading_rule(expm_p, (2,)))
expm_p.defjvp(lambda t, ans, a: _frechet(a, t))
expm_p.defvjp(lambda g, ans, a: _frechet(_mT(a), g))   # L(A, .)^T = L(A^T, .)
_leading_axis_jvps(expm_p)                  # one stacked expm for the K directions


def expm(A):
    """The matrix exponential (``scipy.linalg.expm``), with derivatives.

    Parameters
    ----------
    A : (..., n, n) array

    Returns
    -------
    (..., n, n) array.  The derivative along ``E`` is the Fréchet derivative
    ``L(A, E)``, the upper-right block of ``expm([[A, E], [0, A]])``; the
    reverse rule is ``L(A^T, G)``.  Both call ``expm`` again, so higher orders
    work; each derivative costs one exponential of a 2n x 2n matrix.
    """
    _square("expm", A)
    if not _any_box(A):
        return scipy.linalg.expm(A)
    if is_complex(A):
        raise TypeError("expm: tapead differentiates real matrices only")
    return bind(expm_p, A)


# ---------------------------------------------------------------------------
# scipy's 2-d solvers over stacks of matrices (vmap's lanes, K directions)
# ---------------------------------------------------------------------------

def _over_stacks(fn, args, ranks, core):
    """``fn`` (scipy, 2-d) of each matrix of the stacks ``args`` (argument k has
    ``ranks[k]`` core axes, the leading ones broadcast), stacked; ``core``: the
    core shape of the result (for stacks of no matrix)."""
    lead = np.broadcast_shapes(*[np.shape(a)[:np.ndim(a) - r] for a, r in zip(args, ranks)])
    if not lead:
        return fn(*args)
    args = [np.broadcast_to(a, lead + np.shape(a)[np.ndim(a) - r:])
            for a, r in zip(args, ranks)]
    outs = [fn(*[a[i] for a in args]) for i in np.ndindex(lead)]
    if not outs:
        return np.zeros(lead + tuple(core), dtype=np.result_type(*args, 1.0))
    return np.stack(outs).reshape(lead + np.shape(outs[0]))


# ---------------------------------------------------------------------------
# solve_sylvester: A X + X B = Q
# ---------------------------------------------------------------------------

def _sylv_impl(a, b, q):
    return _over_stacks(scipy.linalg.solve_sylvester, (a, b, q), (2, 2, 2), np.shape(q)[-2:])


def _sylv(a, b, q):
    return bind(solve_sylvester_p, a, b, q) if _any_box(a, b, q) else _sylv_impl(a, b, q)


def _sylv_cotangent(g, a, b):
    """The cotangent of Q: the adjoint equation A^T L + L B^T = G (transposes,
    not conjugates: JAX's convention for complex values)."""
    return _sylv(_mT(a), _mT(b), g)


solve_sylvester_p = Primitive("solve_sylvester", _sylv_impl, saves=(0, 1))
# dA X + A dX + dX B + X dB = dQ: dX solves the same equation with dQ - dA X - X dB
solve_sylvester_p.defjvp(lambda t, x, a, b, q: _sylv(a, b, -matmul(t, x)),
                         lambda t, x, a, b, q: _sylv(a, b, -matmul(x, t)),
                         lambda t, x, a, b, q: _sylv(a, b, t))
solve_sylvester_p.defvjp(
    lambda g, x, a, b, q: _unbroadcast(a, -matmul(_sylv_cotangent(g, a, b), _mT(x))),
    lambda g, x, a, b, q: _unbroadcast(b, -matmul(_mT(x), _sylv_cotangent(g, a, b))),
    lambda g, x, a, b, q: _unbroadcast(q, _sylv_cotangent(g, a, b)))
solve_sylvester_p.complex_ok = True      # the rules hold for complex matrices as written
# scipy solves one 2-d equation at a time: stacks (lanes, K directions) one by one
solve_sylvester_p.defvmap(batching.leading_rule(solve_sylvester_p, (2, 2, 2)))
_leading_axis_jvps(solve_sylvester_p)


def solve_sylvester(a, b, q):
    """Solve ``a x + x b = q`` (``scipy.linalg.solve_sylvester``), with derivatives
    in ``a``, ``b`` and ``q`` (each an adjoint equation of the same kind).

    Parameters
    ----------
    a : (m, m) array
    b : (n, n) array
    q : (m, n) array
        Real or complex.  The solution is unique when no eigenvalue of ``a`` is
        the negative of one of ``b``.

    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.linalg import solve_sylvester
    >>> float(ta.grad(lambda s: solve_sylvester(s * np.eye(2), np.eye(2), np.ones((2, 2))).sum())(1.0))
    -1.0
    """
    if not _any_box(a, b, q):
        return scipy.linalg.solve_sylvester(a, b, q)
    m, n = _square("solve_sylvester", a), _square("solve_sylvester", b)
    if tuple(np.shape(q)) != (m, n) or np.ndim(a) != 2 or np.ndim(b) != 2:
        raise ShapeError(f"solve_sylvester: a is {np.shape(a)}, b is {np.shape(b)}, so q must "
                         f"be ({m}, {n}); got {np.shape(q)}")
    return bind(solve_sylvester_p, a, b, q)


# ---------------------------------------------------------------------------
# sqrtm: X X = A, so X dX + dX X = dA (a Sylvester equation for dX)
# ---------------------------------------------------------------------------

def _sqrtm_impl(a):
    return _over_stacks(scipy.linalg.sqrtm, (a,), (2,), np.shape(a)[-2:])


def _sqrtm_check(x):
    """The derivative exists where the Sylvester operator Y -> X Y + Y X is
    invertible: no two eigenvalues of X sum to 0 (A singular, or a square root
    that is not the principal one).  Under vmap: every lane."""
    _, (xc,) = batching.stacked_values(x)
    if xc.size == 0:
        return
    w = np.linalg.eigvals(xc)
    sums = np.abs(w[..., :, None] + w[..., None, :])
    if sums.min() <= 1e3 * np.finfo(np.float64).eps * max(np.abs(w).max(), 1e-300):
        raise NonDifferentiableError(
            "sqrtm: the matrix is singular (or its square root has eigenvalues that sum "
            "to zero), where the square root has no derivative; differentiate at a "
            "nonsingular matrix")


def _sqrtm_jvp(t, x, a):
    _sqrtm_check(x)
    return _sylv(x, x, t)


def _sqrtm_vjp(g, x, a):
    _sqrtm_check(x)
    return _unbroadcast(a, _sylv(_mT(x), _mT(x), g))


sqrtm_p = Primitive("sqrtm", _sqrtm_impl, saves=())
sqrtm_p.defjvp(_sqrtm_jvp)
sqrtm_p.defvjp(_sqrtm_vjp)
sqrtm_p.complex_ok = True      # the rules hold for complex square roots as written
sqrtm_p.defvmap(batching.leading_rule(sqrtm_p, (2,)))
_leading_axis_jvps(sqrtm_p)


def sqrtm(A, disp=True, blocksize=64):
    """The principal matrix square root (``scipy.linalg.sqrtm``), with derivatives.

    Parameters
    ----------
    A : (n, n) array
        Nonsingular (the square root has no derivative at a singular matrix).
        Like scipy, a real matrix with eigenvalues on the negative real axis
        has a complex square root.

    Returns
    -------
    (n, n) array X with X @ X = A.  Its derivative along E solves the
    Sylvester equation X dX + dX X = E; the reverse rule solves the transposed
    one, X^T G + G X^T = cotangent.
    """
    if not _any_box(A):
        return scipy.linalg.sqrtm(A) if disp else scipy.linalg.sqrtm(A, disp=False)
    if np.ndim(A) != 2:
        raise ShapeError(f"sqrtm: A must be an (n, n) matrix; got shape {np.shape(A)}")
    _square("sqrtm", A)
    return bind(sqrtm_p, A)


# ---------------------------------------------------------------------------
# solve_banded: A x = b, A in LAPACK's band storage ab[u + i - j, j] = A[i, j]
# ---------------------------------------------------------------------------

def _band_rows(n, l, u):
    """For each row r of the band storage: (r, offset, j0, j1): the entries
    ab[r, j0:j1] are A[j + offset, j] (offset = r - u), the others unused."""
    out = []
    for r in range(l + u + 1):
        off = r - u
        out.append((r, off, max(0, -off), min(n, n - off)))
    return out


def _pad(x, axis, before, after):
    """``x`` with zeros added along ``axis`` (negative)."""
    width = [(0, 0)] * _core_ndim(x)
    width[axis] = (before, after)
    return np.pad(x, width)                          # a box: tapead's pad, by NEP 18


def _core_ndim(x):
    return len(np.shape(x))


def _band_matvec(ab, x, l, u):
    """A x for A in band storage (ab (..., l + u + 1, n), x (..., n, k))."""
    n = np.shape(ab)[-1]
    total = None
    for r, off, j0, j1 in _band_rows(n, l, u):
        if j1 <= j0:
            continue
        term = ab[..., r, j0:j1, None] * x[..., j0:j1, :]
        term = _pad(term, -2, j0 + off, n - (j1 + off))
        total = term if total is None else total + term
    return total


def _band_transpose(ab, l, u):
    """The band storage of A^T ((u, l) bands): abT[k, j] = ab[l + u - k, j + k - l]."""
    n = np.shape(ab)[-1]
    rows = []
    for k in range(l + u + 1):
        r, s = l + u - k, k - l
        rows.append(_pad(ab[..., r, s:], -1, 0, s) if s >= 0 else
                    _pad(ab[..., r, :n + s], -1, -s, 0))
    return stack(rows, axis=-2)


def _band_outer(lam, x, l, u):
    """The band part of -lam x^T (summed over the columns): the cotangent of ab,
    zero at the storage's unused entries."""
    n = np.shape(lam)[-2]
    rows = []
    for r, off, j0, j1 in _band_rows(n, l, u):
        if j1 <= j0:
            rows.append(np.zeros(np.broadcast_shapes(np.shape(lam)[:-2], np.shape(x)[:-2])
                                 + (n,), dtype=_dtype_of(lam, x)))
            continue
        v = np.sum(lam[..., j0 + off:j1 + off, :] * x[..., j0:j1, :], axis=-1)
        rows.append(_pad(-v, -1, j0, n - j1))
    return stack(rows, axis=-2)


def _banded_impl(ab, b, l, u):
    return _over_stacks(lambda ab, b: scipy.linalg.solve_banded((l, u), ab, b), (ab, b),
                        (2, 2), np.shape(b)[-2:])


def _banded(ab, b, l, u):
    return bind(solve_banded_p, ab, b, l=l, u=u) if _any_box(ab, b) else \
        _banded_impl(ab, b, l, u)


solve_banded_p = Primitive("solve_banded", _banded_impl, saves=(0,))
solve_banded_p.defjvp(lambda t, x, ab, b, l, u: -_banded(ab, _band_matvec(t, x, l, u), l, u),
                      lambda t, x, ab, b, l, u: _banded(ab, t, l, u))
solve_banded_p.defvjp(
    lambda g, x, ab, b, l, u: _unbroadcast(ab, _band_outer(
        _banded(_band_transpose(ab, l, u), g, u, l), x, l, u)),
    lambda g, x, ab, b, l, u: _unbroadcast(b, _banded(_band_transpose(ab, l, u), g, u, l)))
solve_banded_p.complex_ok = True
solve_banded_p.defvmap(batching.leading_rule(solve_banded_p, (2, 2)))
_leading_axis_jvps(solve_banded_p)        # one stacked solve for the K directions


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """Solve ``A x = b`` for a banded ``A`` (``scipy.linalg.solve_banded``), with
    derivatives in the band ``ab`` and in ``b``.

    Parameters
    ----------
    l_and_u : (int, int)
        The numbers of nonzero lower and upper diagonals.
    ab : (l + u + 1, n) array
        ``A`` in LAPACK's band storage, ``ab[u + i - j, j] = A[i, j]``; the
        unused corners are not read (their derivative is zero).
    b : (n,) or (n, k) array

    >>> import numpy as np, tapead as ta
    >>> from tapead.scipy.linalg import solve_banded
    >>> ab = np.array([[0.0, 1.0, 1.0], [4.0, 4.0, 4.0], [1.0, 1.0, 0.0]])
    >>> g = ta.grad(lambda b: solve_banded((1, 1), ab, b).sum())(np.ones(3))
    >>> bool(np.allclose(g, np.linalg.solve(np.array([[4., 1, 0], [1, 4, 1], [0, 1, 4]]).T,
    ...                                      np.ones(3))))
    True
    """
    l, u = (int(v) for v in l_and_u)
    if not _any_box(ab, b):
        return scipy.linalg.solve_banded((l, u), ab, b, overwrite_ab=overwrite_ab,
                                         overwrite_b=overwrite_b, check_finite=check_finite)
    sa, sb = np.shape(ab), np.shape(b)
    if len(sa) != 2 or sa[0] != l + u + 1 or len(sb) not in (1, 2) or sb[0] != sa[1]:
        raise ShapeError(f"solve_banded: with (l, u) = ({l}, {u}) ab must be ({l + u + 1}, n) "
                         f"and b (n,) or (n, k); got ab {sa}, b {sb}")
    if len(sb) == 1:                                 # a vector: one column
        x = bind(solve_banded_p, ab, reshape(b, (sb[0], 1)), l=l, u=u)
        return reshape(x, np.shape(x)[:-1])
    return bind(solve_banded_p, ab, b, l=l, u=u)


__all__ = []          # public names: tapead.scipy.linalg
SCIPY_LINALG_NAMES = ["solve_triangular", "cho_factor", "cho_solve", "expm", "sqrtm",
                      "solve_sylvester", "solve_banded"]
