"""``np.linalg.norm``: vector and matrix norms, written with the reductions,
elementwise functions and (for ``ord=2``, ``-2``, ``'nuc'``) singular values.

It defines no primitive; it sits above the decompositions because the
spectral and nuclear norms read singular values.
"""
from __future__ import annotations

import numpy as np

from tapead._core import Box
from tapead._prims import batching
from tapead._prims.elementwise import absolute, sqrt
from tapead._prims.linalg_svd import svdvals
from tapead._prims.reductions import _abs2, _as_const, _pack, max, min, sum
from tapead._prims.shape import moveaxis
from tapead._prims.structural import reshape


# norm: vector and matrix norms, composites ----------------------------------------
def _keep(out, shape, axes, keepdims):
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def norm(x, ord=None, axis=None, keepdims=False):
    """``np.linalg.norm`` with derivatives.

    Vector norms (1-d input, or an integer ``axis``): ``ord`` None/2, 1,
    inf, -inf, 0 (a count: no derivative) and any other p.  Matrix norms (2-d
    input, or a pair ``axis``): ``None``/``'fro'``, 1, -1, inf, -inf, and from
    the singular values ``'nuc'`` (their sum), 2 and -2 (the largest and the
    smallest; their derivative needs distinct singular values, see
    ``tapead.numpy.linalg.svdvals``).  The 2-norm at the zero vector has a nan derivative (as in JAX).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> print(ta.grad(np.linalg.norm)(np.array([3.0, 4.0])))     # x / |x|
    [0.6 0.8]
    >>> print(ta.grad(lambda x: np.linalg.norm(x, 1))(np.array([3.0, -4.0])))
    [ 1. -1.]
    """
    x = _pack(x)
    if not isinstance(x, Box):
        return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    shape = np.shape(x)
    nd = len(shape)
    if axis is None and (ord is None or nd <= 1):
        axes = tuple(range(nd))
        if ord is None or nd == 0:
            return _keep(sqrt(sum(_abs2(x))), shape, axes, keepdims)
    elif axis is None:
        axes = tuple(range(nd))
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(int(a) % nd for a in axes)
    if len(axes) == 1:
        if ord is None or ord == 2:
            out = sqrt(sum(_abs2(x), axis=axes))
        elif ord == np.inf:
            out = max(absolute(x), axis=axes)
        elif ord == -np.inf:
            out = min(absolute(x), axis=axes)
        elif ord == 0:
            nonzero = batching.elementwise_values(lambda v: np.asarray(v) != 0, x)
            out = _as_const(batching.reduce_values(np.sum, nonzero, axis=axes), x)
        elif ord == 1:
            out = sum(absolute(x), axis=axes)
        elif isinstance(ord, str):
            raise ValueError(f"norm: ord={ord!r} is a matrix norm; a vector (one axis) "
                             "takes ord None, 1, 2, inf, -inf, 0 or a number")
        else:
            p = float(ord)
            out = sum(absolute(x) ** p, axis=axes) ** (1.0 / p)
        return _keep(out, shape, axes, keepdims)
    if len(axes) != 2:
        raise ValueError(f"norm: axis must be an int or a pair of ints; got {axis!r} for a "
                         f"{nd}-d array (pass axis= to choose the vector or matrix axes)")
    row, col = axes
    if ord is None or ord == "fro":
        out = sqrt(sum(_abs2(x), axis=axes))
    elif ord in (1, -1, np.inf, -np.inf):
        pick = max if ord > 0 else min
        if ord in (1, -1):          # largest column sum: sum over rows, then over columns
            inner, outer = row, col
        else:                       # largest row sum
            inner, outer = col, row
        s = sum(absolute(x), axis=inner)
        out = pick(s, axis=outer - 1 if outer > inner else outer)
    elif ord in (2, -2, "nuc"):     # singular values of the matrices (moved last)
        sv = svdvals(moveaxis(x, (row, col), (-2, -1)))
        out = sum(sv, axis=-1) if ord == "nuc" else (max if ord == 2 else min)(sv, axis=-1)
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices; use None, 'fro', "
                         "'nuc', 1, -1, 2, -2, inf or -inf")
    return _keep(out, shape, axes, keepdims)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.linalg.norm: norm}
