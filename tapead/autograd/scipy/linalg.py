"""``autograd.scipy.linalg``: scipy.linalg's names; differentiable on traced
values: ``solve``, ``inv``, ``det``, ``eigh``, ``cholesky``, ``cho_factor``,
``cho_solve``, ``solve_triangular``, ``solve_banded``, ``solve_sylvester``,
``sqrtm``, ``expm``, ``svd``, ``pinv``, ``norm`` (tapead's
rules, scipy's signatures).  The other functions are scipy's own: they
cannot take traced values (scipy converts its inputs to arrays, and tapead
refuses that with an error).

>>> import numpy as np
>>> from tapead.autograd import grad
>>> import tapead.autograd.scipy.linalg as spla
>>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
>>> grad(lambda a: spla.solve(a, np.ones(2))[0])(A)
array([[-0.24, -0.12],
       [ 0.08,  0.04]])
"""
import numpy as _np
import scipy.linalg as _sla

globals().update({_n: getattr(_sla, _n) for _n in dir(_sla) if not _n.startswith("_")})

from tapead import _core  # noqa: E402
from tapead import numpy as _tnp  # noqa: E402
from tapead.scipy.linalg import (cho_factor, cho_solve, cholesky, expm,  # noqa: F401,E402
                                 solve_banded, solve_sylvester, solve_triangular, sqrtm)
from tapead.numpy.linalg import det, inv, norm, pinv  # noqa: F401,E402


def _traced(*xs):
    return any(isinstance(x, _core.Box) for x in xs)


def _triangle_symmetric(a, lower):
    """The symmetric matrix scipy reads from one triangle of ``a``."""
    t = _tnp.tril(a) if lower else _tnp.triu(a)
    return t + _tnp.swapaxes(_tnp.tril(a, -1) if lower else _tnp.triu(a, 1), -1, -2)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """``scipy.linalg.solve``: ``a x = b`` (``a.T x = b`` with ``transposed``); for
    ``assume_a`` in ``'sym'``, ``'her'``, ``'pos'`` only the ``lower``/upper triangle
    of ``a`` is read, as scipy does."""
    if not _traced(a, b):
        kw = {} if assume_a is None else {"assume_a": assume_a}
        return _sla.solve(a, b, lower=lower, overwrite_a=overwrite_a, overwrite_b=overwrite_b,
                          check_finite=check_finite, transposed=transposed, **kw)
    if assume_a in ("sym", "her", "pos", "symmetric", "hermitian", "positive definite"):
        a = _triangle_symmetric(a, lower)
    if transposed:
        a = _tnp.swapaxes(a, -1, -2)
    return _tnp.linalg.solve(a, b)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None,
         driver=None):
    """``scipy.linalg.eigh`` of one symmetric matrix (its ``lower`` or upper
    triangle); the generalized problem (``b``) and subsets have no derivative."""
    if not _traced(a, b):
        return _sla.eigh(a, b, lower=lower, eigvals_only=eigvals_only, overwrite_a=overwrite_a,
                         overwrite_b=overwrite_b, type=type, check_finite=check_finite,
                         subset_by_index=subset_by_index, subset_by_value=subset_by_value,
                         driver=driver)
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise NotImplementedError("scipy.linalg.eigh on traced values: only the standard "
                                  "problem of one symmetric matrix (no b=, no subsets) has a "
                                  "derivative in tapead")
    w, v = _tnp.linalg.eigh(a, UPLO="L" if lower else "U")
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``scipy.linalg.svd``: ``(U, s, Vh)`` (``s`` alone without ``compute_uv``)."""
    if not _traced(a):
        return _sla.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                        overwrite_a=overwrite_a, check_finite=check_finite,
                        lapack_driver=lapack_driver)
    return _tnp.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``scipy.linalg.qr`` with ``mode='economic'`` or ``'r'`` on traced values
    (``'full'`` of a tall matrix has no unique derivative)."""
    if not _traced(a):
        return _sla.qr(a, overwrite_a=overwrite_a, lwork=lwork, mode=mode, pivoting=pivoting,
                       check_finite=check_finite)
    m, n = _np.shape(_core.concrete(a))[-2:]
    if pivoting or mode not in ("economic", "r") and not (mode == "full" and m == n):
        raise NotImplementedError("scipy.linalg.qr on traced values: use mode='economic' or "
                                  "mode='r' (or a square matrix), without pivoting")
    if mode == "r":
        return (_tnp.linalg.qr(a, mode="r"),)
    return _tnp.linalg.qr(a, mode="reduced")
