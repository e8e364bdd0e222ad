"""Finite differences and quadrature on sampled values: ``np.gradient`` and
``np.trapezoid`` (``np.trapz`` where numpy still has it).

Both are linear in the sampled values, so they are compositions of slices,
arithmetic, ``concatenate`` and ``sum`` with numpy's exact formulas and
operation order (the values agree with numpy's to the last bit); their
derivatives are those of the compositions.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from tapead._core import Box, shape_of, lanes_of
from tapead._prims.elementwise import astype
from tapead.compositions.misc import _along, diff
from tapead._prims.reductions import sum as _sum
from tapead._prims.shape import concatenate, reshape
from tapead.errors import NonDifferentiableError


def _spacings(varargs, f_shape, axes):
    """numpy's spacing per axis: a float, or the 1-d differences of coordinates."""
    for v in varargs:
        if isinstance(v, Box):
            raise NonDifferentiableError(
                "np.gradient: a traced spacing (or coordinates) has no rule in tapead; "
                "pass constant spacing, or write the differences with np.diff and "
                "divide by the traced spacing yourself")
    n = len(varargs)
    if n == 0:
        return [1.0] * len(axes)
    if n == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if n != len(axes):
        raise TypeError("invalid number of arguments")
    dx = []
    for ax, distances in zip(axes, varargs):
        distances = np.asanyarray(distances)
        if distances.ndim == 0:
            dx.append(varargs[len(dx)])
            continue
        if distances.ndim != 1:
            raise ValueError("distances must be either scalars or 1d")
        if len(distances) != f_shape[ax]:
            raise ValueError("when 1d, distances must match the length of the "
                             "corresponding dimension")
        if np.issubdtype(distances.dtype, np.integer):
            distances = distances.astype(np.float64)
        diffx = np.diff(distances)
        dx.append(diffx[0] if (diffx == diffx[0]).all() else diffx)
    return dx


def _gradient_along(f, axis, nd, h, edge_order):
    """One axis of ``np.gradient``: central differences inside, one-sided at the
    two ends (order 1 or 2), numpy's formulas term by term."""
    def part(start, stop):
        return f[_along(axis, nd, slice(start, stop))]

    if np.ndim(h) == 0:
        inner = (part(2, None) - part(None, -2)) / (2. * h)
    else:
        shape = [1] * nd
        shape[axis] = -1
        dx1, dx2 = h[0:-1], h[1:]
        a = (-(dx2) / (dx1 * (dx1 + dx2))).reshape(shape)
        b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
        c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
        inner = a * part(None, -2) + b * part(1, -1) + c * part(2, None)
    if edge_order == 1:
        first = (part(1, 2) - part(0, 1)) / (h if np.ndim(h) == 0 else h[0])
        last = (part(-1, None) - part(-2, -1)) / (h if np.ndim(h) == 0 else h[-1])
    else:
        if np.ndim(h) == 0:
            a, b, c = -1.5 / h, 2. / h, -0.5 / h
        else:
            dx1, dx2 = h[0], h[1]
            a = -(2. * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = - dx1 / (dx2 * (dx1 + dx2))
        first = a * part(0, 1) + b * part(1, 2) + c * part(2, 3)
        if np.ndim(h) == 0:
            a, b, c = 0.5 / h, -2. / h, 1.5 / h
        else:
            dx1, dx2 = h[-2], h[-1]
            a = (dx2) / (dx1 * (dx1 + dx2))
            b = - (dx2 + dx1) / (dx1 * dx2)
            c = (2. * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * part(-3, -2) + b * part(-2, -1) + c * part(-1, None)
    return concatenate([first, inner, last], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=1):
    """``np.gradient``, differentiable in ``f``.

    Parameters
    ----------
    f : (...) array
        Samples on a grid.
    *varargs : constants
        The spacing as in numpy: nothing (1), one scalar for every axis, or one
        scalar or 1-d coordinate array per axis.  Traced spacing raises
        ``NonDifferentiableError``.
    axis : None, int or tuple of int
    edge_order : {1, 2}

    Returns
    -------
    array shaped like ``f`` (one axis), or a tuple of them (one per axis); the
    dtype is ``f``'s.

    >>> import numpy as np, tapead as ta
    >>> ta.jacfwd(lambda f: np.gradient(f, 0.5))(np.zeros(3))
    array([[-2.,  2.,  0.],
           [-1.,  0.,  1.],
           [ 0., -2.,  2.]])
    """
    if not any(isinstance(v, Box) for v in (f,) + varargs):
        return np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    shape = shape_of(f)
    nd = len(shape)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    dx = _spacings(varargs, shape, axes)
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    otype = np.result_type(lanes_of(f))
    out = []
    for ax, h in zip(axes, dx):
        if shape[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required.")
        g = _gradient_along(f, ax, nd, h, edge_order)
        out.append(g if np.result_type(lanes_of(g)) == otype else astype(g, otype))
    return out[0] if len(axes) == 1 else tuple(out)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """``np.trapezoid``: the trapezoidal rule along ``axis``, differentiable in ``y``,
    ``x`` and ``dx``.

    Parameters
    ----------
    y : (...) array
    x : None, (n,) array or an array shaped like ``y``
        Sample points; None uses the constant spacing ``dx``.
    dx : float
    axis : int

    Returns
    -------
    ``y``'s shape without ``axis``: ``sum(d * (y[1:] + y[:-1]) / 2)``.
    """
    if not any(isinstance(v, Box) for v in (y, x, dx)):
        return np.trapezoid(y, x=x, dx=dx, axis=axis)
    y = y if isinstance(y, Box) else np.asanyarray(y)
    nd = len(shape_of(y))
    if x is None:
        d = dx
    else:
        x = x if isinstance(x, Box) else np.asanyarray(x)
        if len(shape_of(x)) == 1:
            d = diff(x)
            shape = [1] * nd
            shape[axis] = shape_of(d)[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    return _sum(d * (y[_along(axis, nd, slice(1, None))]
                     + y[_along(axis, nd, slice(None, -1))]) / 2.0, axis=axis)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.gradient: gradient, np.trapezoid: trapezoid}
__all__ = ["gradient", "trapezoid"]
if hasattr(np, "trapz"):                     # removed in numpy 2.4
    trapz = trapezoid
    NUMPY_FUNCTIONS[np.trapz] = trapezoid
    __all__.append("trapz")
