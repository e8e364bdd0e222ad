"""scipy.linalg's functions: solve_triangular, cho_factor, cho_solve and expm.

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

from tapead._core import bind, concrete, is_complex
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead._prims.contract import _dtype_of
from tapead._prims.linalg import _any_box, _mT, _square, _unbroadcast, matmul
from tapead._prims.linalg_decomp import _leading_axis_jvps, cholesky
from tapead.errors import ShapeError
from tapead._prims.shape import concatenate, reshape


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


__all__ = []          # public names: tapead.scipy.linalg
SCIPY_LINALG_NAMES = ["solve_triangular", "cho_factor", "cho_solve", "expm"]
