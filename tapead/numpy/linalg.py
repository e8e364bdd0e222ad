"""``numpy.linalg``'s names, differentiable: ``tapead.numpy.linalg.solve`` etc.

On plain numpy inputs every function is numpy's own; on traced values it
records (reverse mode) or pushes tangents (forward mode).  The same
functions answer ``np.linalg.solve(tracer, b)`` through numpy's
``__array_function__`` protocol.  Requirements of the derivatives (symmetric
input for ``eigh``/``cholesky``, distinct eigenvalues, full rank) are in
each docstring and in ``docs/linalg.md``.
"""
from numpy.linalg import LinAlgError  # noqa: F401

from tapead._prims.contract import linalg_diagonal as diagonal  # noqa: F401
from tapead._prims.contract import linalg_trace as trace  # noqa: F401
from tapead._prims.contract import matrix_transpose, tensordot  # noqa: F401
from tapead._prims.linalg import det, inv, matmul, outer, slogdet, solve  # noqa: F401
from tapead._prims.linalg_decomp import cholesky, eig, eigh, eigvals, eigvalsh, qr  # noqa: F401
from tapead._prims.linalg_lstsq import lstsq, pinv  # noqa: F401
from tapead._prims.linalg_svd import svd, svdvals  # noqa: F401
from tapead.compositions.numpy_extra import matrix_power, multi_dot  # noqa: F401
from tapead.compositions.norms import norm  # noqa: F401

__all__ = ["LinAlgError", "cholesky", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_power", "multi_dot", "matrix_transpose", "norm",
           "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace"]
