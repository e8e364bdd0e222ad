"""Least squares: ``pinv`` and ``lstsq`` of matrices and stacks of them, with
derivatives for inputs of constant rank (e.g. full rank), by Golub and
Pereyra's formula for the derivative of the pseudo-inverse.

Like the rest of ``linalg``, every rule is written with tapead operations so
it can be differentiated again, and the functions act on the last two axes,
broadcasting over leading ones.
"""
from __future__ import annotations

import numpy as np

from tapead import patterns
from tapead._core import bind
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead._prims.contract import _dtype_of
from tapead._prims.linalg import _any_box, _batched_jvps, _mT, _unbroadcast, matmul
from tapead._prims.reductions import sum as _sum
from tapead._prims.shape import reshape
from tapead.errors import ShapeError


def _pinv_jvp_of(dA, A, P):
    """d pinv(A) = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
    dAT = _mT(dA)
    PPT_dAT = matmul(P, matmul(_mT(P), dAT))
    dAT_PTP = matmul(dAT, matmul(_mT(P), P))
    return (-matmul(P, matmul(dA, P)) + PPT_dAT - matmul(PPT_dAT, matmul(A, P))
            + dAT_PTP - matmul(matmul(P, A), dAT_PTP))


def _pinv_vjp_of(G, A, P):
    """The transpose of ``_pinv_jvp_of`` applied to the cotangent ``G`` of P."""
    PT, GT = _mT(P), _mT(G)
    GT_PPT = matmul(GT, matmul(P, PT))
    PTP_GT = matmul(matmul(PT, P), GT)
    return (-matmul(PT, matmul(G, PT)) + GT_PPT - matmul(matmul(A, P), GT_PPT)
            + PTP_GT - matmul(PTP_GT, matmul(P, A)))


pinv_p = Primitive("pinv", lambda a, **kw: np.linalg.pinv(a, **kw), saves=(0,))
pinv_p.defjvp(lambda t, ans, a, **kw: _pinv_jvp_of(t, a, ans))
pinv_p.defvjp(lambda g, ans, a, **kw: _pinv_vjp_of(g, a, ans))
_batched_jvps(pinv_p)
pinv_p.defvmap(batching.leading_rule(pinv_p, (2,)))
pinv_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def pinv(a, rcond=None, hermitian=False, **kwargs):
    """The Moore-Penrose pseudo-inverse (``np.linalg.pinv``), with derivatives.

    The derivative formula holds where the rank is locally constant, e.g.
    for a matrix of full rank; at a rank drop the pseudo-inverse is not
    even continuous.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> ta.jacfwd(np.linalg.pinv)(a).shape          # out.shape + in.shape
    (2, 3, 3, 2)
    """
    if not _any_box(a):
        return np.linalg.pinv(a, rcond=rcond, hermitian=hermitian, **kwargs)
    if np.ndim(a) < 2:
        raise ShapeError(f"pinv: a must be a matrix or a stack of them; got shape {np.shape(a)}")
    return bind(pinv_p, a, rcond=rcond, hermitian=hermitian, **kwargs)


def _lstsq_systems(a, b, rcond):
    """numpy's lstsq of each system of the stacks ``a`` (..., m, n) and ``b``
    (..., m, k) (numpy's lstsq takes one system): [(x, residuals, rank, s)]
    in the order of the broadcast leading axes, and their shape."""
    a, b = np.asarray(a), np.asarray(b)
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, lead + a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[-2:])
    return [np.linalg.lstsq(a[i], b[i], rcond=rcond) for i in np.ndindex(lead)], lead


def _lstsq_impl(a, b, rcond=None):
    if np.ndim(a) == 2 and np.ndim(b) == 2:
        return np.linalg.lstsq(a, b, rcond=rcond)[0]
    systems, lead = _lstsq_systems(a, b, rcond)
    if not systems:                           # no system: the shape and dtype of one
        x = np.linalg.lstsq(np.zeros(np.shape(a)[-2:], np.result_type(a)),
                            np.zeros(np.shape(b)[-2:], np.result_type(b)), rcond=rcond)[0]
        return np.zeros(lead + x.shape, x.dtype)
    return np.stack([r[0] for r in systems]).reshape(lead + systems[0][0].shape)


lstsq_p = Primitive("lstsq", _lstsq_impl, saves=(0, 1))
lstsq_p.defjvp(lambda t, ans, a, b, rcond=None: matmul(_pinv_jvp_of(t, a, pinv(a, rcond)), b),
               lambda t, ans, a, b, rcond=None: matmul(pinv(a, rcond), t))
lstsq_p.defvjp(lambda g, ans, a, b, rcond=None: _unbroadcast(
                   a, _pinv_vjp_of(matmul(g, _mT(b)), a, pinv(a, rcond))),
               lambda g, ans, a, b, rcond=None: _unbroadcast(b, matmul(_mT(pinv(a, rcond)), g)))
_batched_jvps(lstsq_p, align=True)       # pinv(a) once for K directions
# stacks of systems (under vmap) are solved one by one, as numpy solves one
lstsq_p.defvmap(batching.leading_rule(lstsq_p, (2, 2)))
lstsq_p.defsparsity(patterns.DENSE, reason="x = pinv(A) b: every entry of x depends on "
                    "every entry of A and b")


def lstsq(a, b, rcond=None):
    """Least squares ``min ||a x - b||`` (``np.linalg.lstsq``), with derivatives.

    Returns ``(x, residuals, rank, s)`` like numpy.  ``x = pinv(a) @ b`` and
    the residuals (``m > n``, full rank) are differentiable in ``a`` and
    ``b``; ``rank`` and the singular values ``s`` are returned as constants
    (no derivative: use ``eigvalsh(a.T @ a)`` for differentiable singular
    values).  The derivative needs a locally constant rank (e.g. full rank).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> y = np.array([1.0, 2.0, 2.0])
    >>> fit = lambda y: np.linalg.lstsq(a, y, rcond=None)[0]
    >>> bool(np.allclose(ta.jacrev(fit)(y), np.linalg.pinv(a), rtol=0, atol=1e-14))
    True
    """
    if not _any_box(a, b):
        return np.linalg.lstsq(a, b, rcond=rcond)
    sa, sb = np.shape(a), np.shape(b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
        raise ShapeError(f"lstsq: a must be (m, n) and b (m,) or (m, k); got shapes {sa} "
                         f"and {sb}")
    m, n = sa
    vector = len(sb) == 1
    b2 = reshape(b, (m, 1)) if vector else b
    x = bind(lstsq_p, a, b2, rcond=rcond)
    trace, (av, bv) = batching.stacked_values(a, b)
    if trace is None:
        _, _, rank, s = np.linalg.lstsq(av, bv, rcond=rcond)
    else:                                     # every lane's rank and singular values
        systems, _ = _lstsq_systems(av, bv[..., None] if vector else bv, rcond)
        rank = trace.box(np.array([r[2] for r in systems], dtype=np.intp), 0)
        s = trace.box(np.stack([r[3] for r in systems]) if systems else
                      np.zeros((0, min(m, n)), np.result_type(av)), 0)
    if rank == n and m > n:
        r = b2 - matmul(a, x)
        res = _sum(r * r, axis=0)
    else:
        res = np.empty((0,), dtype=_dtype_of(a, b))
    return (reshape(x, (n,)) if vector else x), res, rank, s


#: the names of ``tapead.numpy.linalg`` defined here
LINALG_NAMES = ["pinv", "lstsq"]

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {getattr(np.linalg, name): globals()[name] for name in LINALG_NAMES}
__all__ = []
