"""Linear algebra: matmul/dot/outer, solve, inv, det and slogdet (pinv and
lstsq are in ``linalg_lstsq``; the decompositions -- cholesky, eigh, qr, svd --
in ``linalg_decomp`` and ``linalg_svd``).

Every rule is written with tapead operations (``matmul``, ``solve``, ``inv``,
``einsum``...), so it can be differentiated again.  Matrix functions act on
the last two axes and broadcast over leading (batch) axes like numpy.
Decompositions with several outputs (eigh, qr, slogdet) are one primitive
whose value packs the outputs into one array; the user-facing function
slices it, so the decomposition runs once.  The other einsum-like
contractions live in ``contract``.
"""
from __future__ import annotations

import numpy as np

from tapead import _core, patterns
from tapead._core import Box, bind, ndim_of
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead._prims.contract import _dtype_of, dot_nd, einsum
from tapead.errors import ShapeError
from tapead._prims.elementwise import unbroadcast
from tapead._prims.shape import broadcast_to, reshape, stack, swapaxes


def _mT(x):
    return swapaxes(x, -1, -2)


def _plain2d(g, a, b):
    return (type(g) is np.ndarray and type(a) is np.ndarray and type(b) is np.ndarray
            and g.ndim == 2 and a.ndim == 2 and b.ndim == 2)


def _real_for(x, c):
    """c as the cotangent of a plain array x: its real part when x is real and c
    complex (x was promoted to complex)."""
    return c.real if c.dtype.kind == "c" and x.dtype.kind != "c" else c


def _batched_jvps(prim, align=False):
    """Declare the batched JVP of a primitive whose JVP rules broadcast over a
    leading axis of K directions (matmul, solve, broadcasting arithmetic):
    each argument's K tangents go through its rule in one call, not one call
    per direction.  ``align``: the arguments broadcast against each other
    (solve's stacks), so a tangent gets size-1 axes after its direction axis
    up to the largest argument's number of axes, which keeps the K axis in
    front of the broadcast batch axes."""
    def batched(tans, ans, vals, params, K):
        nd = max(np.ndim(v) for v in vals) if align else 0
        total = None
        for k, t in enumerate(tans):
            if t is None:
                continue
            pad = nd - np.ndim(vals[k])
            if pad > 0:
                t = reshape(t, (K,) + (1,) * pad + np.shape(vals[k]))
            c = prim.jvps[k](t, ans, *vals, **params)
            if c is not None:                # None: no derivative through this argument
                total = c if total is None else total + c
        want = (K,) + np.shape(ans)
        if total is None or np.shape(total) == want:
            return total
        return broadcast_to(total, want)
    return prim.defbatched(batched)


def _matmul_batched(tans, ans, vals, params, K):
    """K directions of ``da @ b + a @ db`` in one matmul per argument: the
    direction axis goes in front of the (broadcast) batch axes; a vector
    operand's K tangents are K rows (for ``a``) or K columns (for ``b``)."""
    a, b = vals
    ta, tb = tans
    na, nb = np.ndim(a), np.ndim(b)
    want = (K,) + np.shape(ans)
    total = None
    if ta is not None:
        if na == 1 and nb == 2:              # K rows times b: one GEMM
            c = matmul(ta, b)
        elif na == 1:                        # K rows of 1 x n against each batch
            c = matmul(reshape(ta, (K,) + (1,) * max(nb - 2, 0) + (1, np.shape(a)[0])), b)
        else:
            c = matmul(reshape(ta, (K,) + (1,) * max(nb - na, 0) + np.shape(a)), b)
        total = reshape(c, want)
    if tb is not None:
        if nb == 1 and na == 2:              # a @ db_k for all k: db @ a^T, one GEMM
            c = matmul(tb, _mT(a))
        elif nb == 1:                        # K columns n x 1
            c = matmul(a, reshape(tb, (K,) + (1,) * max(na - 2, 0) + (np.shape(b)[0], 1)))
        else:
            c = matmul(a, reshape(tb, (K,) + (1,) * max(na - nb, 0) + np.shape(b)))
        c = reshape(c, want)
        total = c if total is None else total + c
    return total


def _matmul_vjp_a(g, ans, a, b):
    if _plain2d(g, a, b):             # the common case, without the general machinery
        return _real_for(a, g @ b.T)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 1 and nb == 1:
        return unbroadcast(a, g * b)
    if nb == 1:                       # (..., m, k) @ (k,) -> (..., m)
        return unbroadcast(a, reshape(g, _core.shape_of(g) + (1,)) * b)
    if na == 1 and nb == 2:           # (k,) @ (k, n) -> (n,): g @ b^T
        return unbroadcast(a, matmul(g, _mT(b)))
    if na == 1:                       # (k,) @ (..., k, n) -> (..., n)
        ga = matmul(b, reshape(g, _core.shape_of(g) + (1,)))
        return unbroadcast(a, reshape(ga, _core.shape_of(ga)[:-1]))
    return unbroadcast(a, matmul(g, _mT(b)))


def _matmul_vjp_b(g, ans, a, b):
    if _plain2d(g, a, b):
        return _real_for(b, a.T @ g)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 1 and nb == 1:
        return unbroadcast(b, g * a)
    if nb == 1:                       # gb_k = sum_m a_mk g_m
        gb = matmul(reshape(g, _core.shape_of(g)[:-1] + (1, _core.shape_of(g)[-1])), a)
        return unbroadcast(b, reshape(gb, _core.shape_of(gb)[:-2] + (_core.shape_of(gb)[-1],)))
    if na == 1:                       # gb_kn = a_k g_n
        gs = _core.shape_of(g)
        if len(gs) == 1:              # (k,) @ (k, n): the outer product
            return unbroadcast(b, reshape(a, (_core.shape_of(a)[0], 1)) * g)
        return unbroadcast(b, reshape(a, (_core.shape_of(a)[0], 1))
                           * reshape(g, gs[:-1] + (1, gs[-1])))
    return unbroadcast(b, matmul(_mT(a), g))


def _matmul_impl(a, b):
    """``np.matmul``; lanes of ``a`` against one matrix that ``b`` repeats along
    its leading axis (stride 0: ``vmap``'s copies of a shared weight, each lane
    differentiating its own) as one GEMM over all the lanes' rows, where numpy
    would run one small matmul per lane."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 3 and b.ndim == 3 \
            and b.strides[0] == 0 and a.shape[0] == b.shape[0] > 1 \
            and a.shape[2] == b.shape[1]:
        n, m, k = a.shape
        return np.matmul(a.reshape(n * m, k), b[0]).reshape(n, m, b.shape[2])
    return np.matmul(a, b)


matmul_p = Primitive("matmul", _matmul_impl)
matmul_p.defvjp(_matmul_vjp_a, _matmul_vjp_b)
matmul_p.defjvp(lambda t, ans, a, b: matmul(t, b), lambda t, ans, a, b: matmul(a, t))
matmul_p.defbatched(_matmul_batched)   # one matmul per argument for K directions


def _matmul_vmap(args, bdims):
    """Lanes in front; a batched vector lane becomes a one-row (a) or
    one-column (b) matrix, squeezed again after; batch axes padded so that
    numpy broadcasts shared operands against every lane."""
    (a, b), (da, db) = args, bdims
    na, nb = batching.lane_ndim(a, da), batching.lane_ndim(b, db)
    fast = _matmul_vmap_shared(a, b, da, db, na, nb)
    if fast is not None:
        return fast, 0
    if db is None and nb == 2:         # lanes of many rows @ a shared W: numpy broadcasts
        return matmul(batching.to_front(a, da), b), 0
    top = max(na, nb, 2) - 2
    drop = []
    if da is not None:
        a = batching.to_front(a, da)
        if na == 1:                  # its row axis is the output's -2 (-1 by a vector b)
            a = batching.reshape(a, _core.shape_of(a)[:1] + (1,) + _core.shape_of(a)[1:])
            drop.append(-2 if db is not None or nb >= 2 else -1)
        a = batching.padded(a, 0, top + 2)
    if db is not None:
        b = batching.to_front(b, db)
        if nb == 1:
            b = batching.reshape(b, _core.shape_of(b) + (1,))
            drop.append(-1)
        b = batching.padded(b, 0, top + 2)
    out = matmul(a, b)
    if drop:
        shape = _core.shape_of(out)
        gone = {len(shape) + k for k in drop}
        out = reshape(out, tuple(s for i, s in enumerate(shape) if i not in gone))
    return out, 0


def _matmul_vmap_shared(a, b, da, db, na, nb):
    """One operand shared by every lane and at most 2-d, the other's lanes at
    most 2-d: one GEMM over all the lanes (numpy would otherwise loop over
    the lanes one small matmul each), or None for the other cases.

    Lanes of ``b`` (n, k) against a shared (m, k) matrix are ``b @ a^T``; lanes
    of ``a`` (n, k) or (n, m, k) against a shared ``b`` stack their rows into
    one (n * m, k) matrix.
    """
    if da is None and db is not None and na == 2 and nb == 1:
        at = a.T if type(a) is np.ndarray else _mT(a)
        return matmul(batching.to_front(b, db), at)                 # (n, m)
    if da is not None and db is None and nb <= 2 and na <= 2:
        a = batching.to_front(a, da)
        if na == 1:
            return matmul(a, b)                                     # (n, k) @ b
        n, m, k = _core.shape_of(a)
        out = matmul(reshape(a, (n * m, k)), b)                     # rows of every lane
        return reshape(out, (n, m) + tuple(_core.shape_of(out))[1:])
    return None


matmul_p.defvmap(_matmul_vmap)
_core.set_vmap_fast(matmul_p, "matmul")  # _matmul_vmap_shared in C for plain lanes
matmul_p.defsparsity(patterns.MATMUL)
matmul_p.fast_vjp = _core.FAST_VJP["matmul"]      # the sweep's C shortcut for plain 2-d
matmul_p.complex_ok = True    # bilinear: transposes, no conjugates (JAX's convention)


def matmul(a, b):
    """``a @ b`` with derivatives (1-d, 2-d and batched operands).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> print(ta.grad(lambda x: (A @ x).sum())(np.array([1.0, 1.0])))      # A^T @ ones
    [4. 6.]
    """
    if ndim_of(a) == 0 or ndim_of(b) == 0:
        raise ValueError("matmul: operands must be at least 1-d; use * for scalars")
    if isinstance(a, Box) or isinstance(b, Box):
        return bind(matmul_p, a, b)
    return np.matmul(a, b)


def dot(a, b, out=None):
    """``np.dot`` with derivatives: scalars multiply, up to 2-d it is ``matmul``,
    above 2-d the last axis of ``a`` meets the second-to-last of ``b``."""
    if out is not None:
        if not (isinstance(a, Box) or isinstance(b, Box)):
            return np.dot(a, b, out=out)
        raise TypeError("np.dot(..., out=...) cannot write a traced value into an array; "
                        "assign the result instead")
    if ndim_of(a) == 0 or ndim_of(b) == 0:
        return a * b
    if ndim_of(a) > 2 or ndim_of(b) > 2:
        if not (isinstance(a, Box) or isinstance(b, Box)):
            return np.dot(a, b)
        return dot_nd(a, b)
    return matmul(a, b)


def outer(a, b, out=None):
    """``np.outer`` with derivatives.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> print(ta.grad(lambda x: np.outer(x, x).sum())(np.array([1.0, 2.0])))   # 2 sum(x)
    [6. 6.]
    """
    if out is not None:
        if not (isinstance(a, Box) or isinstance(b, Box)):
            return np.outer(a, b, out=out)
        raise TypeError("np.outer(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    a = reshape(a, (-1, 1)) if isinstance(a, Box) else np.reshape(a, (-1, 1))
    b = reshape(b, (1, -1)) if isinstance(b, Box) else np.reshape(b, (1, -1))
    return a * b


# ---------------------------------------------------------------------------
# helpers: matrix transpose, symmetric part, masks, checks
# ---------------------------------------------------------------------------

def _any_box(*xs) -> bool:
    return any(isinstance(x, Box) for x in xs)


def _sym(x):
    """The symmetric part (x + x^T) / 2 of a (stack of) square matrices."""
    return 0.5 * (x + _mT(x))


def _solve_right(x, m):
    """``x m^{-1}``, as ``(m^{-T} x^T)^T``."""
    return _mT(solve(_mT(m), _mT(x)))


def _bmat(x):
    """A (stack of) scalars as a (stack of) 1 x 1 matrices, for broadcasting."""
    return reshape(x, np.shape(x) + (1, 1))


def _row(x):
    """(..., n) -> (..., 1, n)."""
    return reshape(x, np.shape(x)[:-1] + (1, np.shape(x)[-1]))


def _tri(x, k, lower=True):
    """``np.tril(x, k)`` (or ``np.triu``) on the last two axes, as a constant mask."""
    n, dt = np.shape(x)[-1], _dtype_of(x)
    return x * (np.tri(n, k=k, dtype=dt) if lower else 1 - np.tri(n, k=k - 1, dtype=dt))


def _trace(x):
    return einsum("...ii->...", x)


def _square(name: str, a, what: str = "a") -> int:
    s = np.shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{name}: {what} must be a square matrix or a stack of them, "
                         f"shape (..., n, n); got shape {s}")
    return s[-1]


_SINGULAR = ("The matrix is singular (or numerically so). Check it for dependent rows "
             "or columns, regularise it (a + eps * I), or use "
             "tapead.numpy.linalg.lstsq / pinv for a least-squares answer.")


def _lapack(name: str, fn, *args, hint: str, **kw):
    """Call numpy's LAPACK wrapper; re-raise its error with what to do."""
    try:
        return fn(*args, **kw)
    except np.linalg.LinAlgError as e:
        raise np.linalg.LinAlgError(f"np.linalg.{name}: {e}. {hint}") from None


def _result_type(name, *args):
    """numpy's result namedtuple (EighResult, QRResult, SlogdetResult)."""
    return type(getattr(np.linalg, name)(*args))


_SlogdetResult = _result_type("slogdet", np.eye(1))


# ---------------------------------------------------------------------------
# solve(a, b): b is (..., n, k) inside the primitive; a vector b is a column
# ---------------------------------------------------------------------------

def _solve_impl(a, b):
    return _lapack("solve", np.linalg.solve, a, b, hint=_SINGULAR)


def _unbroadcast(x, g):
    return unbroadcast(x, g)


solve_p = Primitive("solve", _solve_impl, saves=(0,))
solve_p.defvjp(lambda g, ans, a, b: _unbroadcast(a, -matmul(solve(_mT(a), g), _mT(ans))),
               lambda g, ans, a, b: _unbroadcast(b, solve(_mT(a), g)))
solve_p.defjvp(lambda t, ans, a, b: -solve(a, matmul(t, ans)),        # dx = -A^-1 dA x
               lambda t, ans, a, b: solve(a, t))
_batched_jvps(solve_p, align=True)       # one stacked solve for K directions
solve_p.complex_ok = True      # holomorphic: the rules (transposes, not conjugates) hold
solve_p.defvmap(batching.leading_rule(solve_p, (2, 2)))
solve_p.defsparsity(patterns.DENSE, reason="x = A^-1 b: every entry of x depends on every "
                    "entry of A and b")


def solve(a, b):
    """Solve ``a @ x = b`` (``np.linalg.solve``), with derivatives in ``a`` and ``b``.

    Parameters
    ----------
    a : (..., n, n) array
        Non-singular.
    b : (n,) or (..., n, k) array
        One right-hand side (a vector) or k of them (columns).

    Raises
    ------
    ShapeError
        ``a`` not square, or ``b`` not ``(n,)`` / ``(..., n, k)``.
    numpy.linalg.LinAlgError
        ``a`` is singular.

    Returns
    -------
    array
        ``x``, shaped like ``b``.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> b = np.array([1.0, 2.0])
    >>> gb = ta.grad(lambda b: np.linalg.solve(A, b).sum())(b)     # A^-T @ ones
    >>> bool(np.allclose(gb, np.linalg.solve(A.T, np.ones(2)), rtol=1e-14, atol=0))
    True
    """
    n = _square("solve", a)
    sb = np.shape(b)
    vector = len(sb) == 1
    if not sb or (sb[0] if vector else sb[-2]) != n:
        raise ShapeError(f"solve: a has shape {np.shape(a)} and b has shape {sb}; b must be "
                         f"(n,) or (..., n, k) with n = {n}")
    if not _any_box(a, b):
        return _solve_impl(a, b)
    if vector:
        x = bind(solve_p, a, reshape(b, (n, 1)))
        return reshape(x, np.shape(x)[:-1])
    return bind(solve_p, a, b)


# ---------------------------------------------------------------------------
# inv: dC = -C dA C, VJP -C^T g C^T; nothing saved but C
# ---------------------------------------------------------------------------

inv_p = Primitive("inv", lambda a: _lapack("inv", np.linalg.inv, a, hint=_SINGULAR), saves=())
inv_p.defjvp(lambda t, ans, a: -matmul(ans, matmul(t, ans)))
inv_p.defvjp(lambda g, ans, a: -matmul(_mT(ans), matmul(g, _mT(ans))))
inv_p.defbatched(lambda tans, ans, vals, params, K: -matmul(
    ans, matmul(tans[0], ans)))                   # K directions in one broadcast
inv_p.defvmap(batching.leading_rule(inv_p, (2,)))
inv_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def inv(a):
    """The inverse of a (stack of) non-singular square matrices (``np.linalg.inv``).

    Derivatives: ``dC = -C dA C`` and ``dA = -C^T dC C^T`` with ``C = inv(a)``.
    Raises ``ShapeError`` for a non-square ``a`` and ``LinAlgError`` for a
    singular one.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> g = ta.grad(lambda A: np.linalg.inv(A)[0, 0])(A)
    >>> C = np.linalg.inv(A)
    >>> bool(np.allclose(g, -np.outer(C[:, 0], C[0, :]), rtol=1e-14, atol=0))
    True
    """
    _square("inv", a)
    if not _any_box(a):
        return inv_p.impl(a)
    return bind(inv_p, a)


# ---------------------------------------------------------------------------
# det and slogdet: d log|det A| = tr(A^-1 dA)
# ---------------------------------------------------------------------------

det_p = Primitive("det", np.linalg.det, saves=(0,))
det_p.defjvp(lambda t, ans, a: ans * _trace(solve(a, t)))
det_p.defvjp(lambda g, ans, a: _bmat(g * ans) * _mT(inv(a)))
_batched_jvps(det_p)
det_p.defvmap(batching.leading_rule(det_p, (2,)))
det_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def det(a):
    """``np.linalg.det`` with derivatives (``d det = det · tr(A^-1 dA)``).

    The derivative rules use ``A^-1``: they raise ``LinAlgError`` at a
    singular matrix (where the derivative, the adjugate, still exists).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> g = ta.grad(np.linalg.det)(A)          # det(A) A^-T, the cofactors
    >>> print(np.round(g, 12))
    [[ 3. -1.]
     [-1.  4.]]
    """
    _square("det", a)
    if not _any_box(a):
        return np.linalg.det(a)
    return bind(det_p, a)


def _slogdet_impl(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.stack([sign, logabsdet], axis=-1)      # one LU for both


def _slogdet_jvp(t, ans, a):
    d = _trace(solve(a, t))
    return stack([0.0 * d, d], axis=-1)              # the sign has no derivative


slogdet_p = Primitive("slogdet", _slogdet_impl, saves=(0,))
slogdet_p.defjvp(_slogdet_jvp)
slogdet_p.defvjp(lambda g, ans, a: _bmat(g[..., 1]) * _mT(inv(a)))
_batched_jvps(slogdet_p)
slogdet_p.defvmap(batching.leading_rule(slogdet_p, (2,)))
slogdet_p.defsparsity(patterns.DENSE, reason=patterns.MATRIX_FUNCTION)


def slogdet(a):
    """``(sign, logabsdet)`` of ``np.linalg.slogdet``, with derivatives.

    ``logabsdet`` has derivative ``tr(A^-1 dA)``; ``sign`` is piecewise
    constant (derivative zero).  Raises ``LinAlgError`` when differentiated
    at a singular matrix (where ``logabsdet`` is ``-inf``).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> g = ta.grad(lambda A: np.linalg.slogdet(A)[1])(A)    # A^-T
    >>> bool(np.allclose(g, np.linalg.inv(A).T, rtol=1e-14, atol=0))
    True
    """
    _square("slogdet", a)
    if not _any_box(a):
        return np.linalg.slogdet(a)
    p = bind(slogdet_p, a)
    return _SlogdetResult(p[..., 0], p[..., 1])


#: the names of ``tapead.numpy.linalg`` defined here
LINALG_NAMES = ["solve", "inv", "det", "slogdet"]

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.matmul: matmul, np.dot: dot, np.outer: outer,
                   np.linalg.matmul: matmul, np.linalg.outer: outer}
NUMPY_FUNCTIONS.update({getattr(np.linalg, name): globals()[name] for name in LINALG_NAMES})
TRACER_METHODS = {"dot": dot}
__all__ = ["matmul", "dot", "outer"]
