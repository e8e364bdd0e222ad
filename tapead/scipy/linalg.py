"""``scipy.linalg``'s names, differentiable: ``import tapead.scipy.linalg as tsl``.

On plain inputs each function is scipy's own; on traced values it records
(reverse mode) or pushes tangents (forward mode).  scipy's functions convert
their arguments to numpy arrays, so ``scipy.linalg.solve_triangular(tracer, b)``
cannot see a traced value: call these instead.  The numpy-level linear
algebra (solve, inv, cholesky, eigh, svd, ...) is ``tapead.numpy.linalg``, also
reachable as ``np.linalg.*`` on traced values.

>>> import numpy as np, tapead as ta
>>> from tapead.scipy.linalg import expm
>>> g = ta.grad(lambda t: expm(t * np.array([[0.0, 1.0], [-1.0, 0.0]]))[0, 0])(0.5)
>>> round(float(g), 12)             # d/dt cos(t) at 0.5
-0.479425538604
"""
from tapead._prims.linalg_scipy import (  # noqa: F401
    cho_factor, cho_solve, expm, solve_banded, solve_sylvester, solve_triangular, sqrtm)
from tapead._core import Box


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cholesky``: the upper factor ``U`` (``a = U^T U``) by default,
    the lower ``L`` with ``lower=True``; differentiable (see
    ``tapead.numpy.linalg.cholesky``).  Like scipy, only that triangle of ``a``
    is read."""
    if not isinstance(a, Box):
        import scipy.linalg
        return scipy.linalg.cholesky(a, lower=lower, overwrite_a=overwrite_a,
                                     check_finite=check_finite)
    return cho_factor(a, lower=lower)[0]


__all__ = ["cho_factor", "cho_solve", "cholesky", "expm", "solve_banded", "solve_sylvester",
           "solve_triangular", "sqrtm"]
