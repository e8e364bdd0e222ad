"""Common numpy functions that are not a family of their own, written with
the primitives (this module defines none).

* the **piecewise-constant** primitives (``floor``, ``ceil``, ``rint``,
  ``trunc``, ``fix``, ``round``, ``heaviside``) are in ``tapead._prims.piecewise``
  (``tapead.numpy`` exports them from there);
* **Constants from shapes** (``zeros_like``...) return plain arrays of the
  traced value's shape and dtype; ``full_like`` with a traced fill value is
  differentiable in it.
* **Compositions** of differentiable functions (``remainder``, ``diff``,
  ``interp``, ``median``, ``sinc``, ``convolve``...): every order of
  derivative comes for free.  Decisions taken on concrete values (an
  interpolation segment, a NaN mask, where ``sinc`` meets 0) are recorded as
  guards, so replaying a tape at inputs where they differ raises
  ``GuardFlippedError`` instead of returning stale values.

The predicates (``isclose``, ``isnan``...) and ``searchsorted`` are in
``tapead.compositions.predicates``.
"""
from __future__ import annotations

import math

import numpy as np

from tapead._core import Box, concrete, guard_value, lanes_of, shape_of
from tapead._prims import batching
from tapead._prims.piecewise import (_copysign_one, floor, integer_fmod, integer_remainder,
                                     trunc)
from tapead._prims.elementwise import absolute, sin, where
from tapead._prims.linalg import matmul
from tapead._prims.reductions import mean as _mean, sum as _sum
from tapead._prims.shape import (broadcast_to, concatenate, expand_dims, moveaxis, reshape,
                                 stack)
from tapead.errors import NonDifferentiableError

_NO = np._NoValue


def _box(*xs) -> bool:
    return any(isinstance(x, Box) for x in xs)


def _plain(x):
    """The concrete value of a box, or ``x`` itself."""
    return concrete(x) if isinstance(x, Box) else x


def _like(x):
    """A stand-in for a box's value that has its shape and dtype (zeros; under
    vmap one lane's shape, so no lane is read); ``x`` itself if no box."""
    if not isinstance(x, Box):
        return x
    return np.zeros(shape_of(x), dtype=np.result_type(lanes_of(x)))


def _arr(x):
    """A box as it is; anything else (lists...) as a numpy array."""
    return x if isinstance(x, Box) else np.asarray(x)


def _along(axis, ndim, index):
    """An index tuple selecting ``index`` along ``axis``."""
    return (slice(None),) * (axis % ndim) + (index,)


# ---------------------------------------------------------------------------
# constants from shapes
# ---------------------------------------------------------------------------

def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.zeros_like`` of the value: a plain array (no derivative)."""
    return np.zeros_like(_like(a), dtype=dtype, order=order, subok=subok, shape=shape, **kw)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.ones_like`` of the value: a plain array (no derivative)."""
    return np.ones_like(_like(a), dtype=dtype, order=order, subok=subok, shape=shape, **kw)


def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.empty_like`` of the value: a plain array (no derivative)."""
    return np.empty_like(_like(prototype), dtype=dtype, order=order, subok=subok,
                         shape=shape, **kw)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.full_like``; a traced ``fill_value`` is broadcast (differentiably)."""
    if not isinstance(fill_value, Box):
        return np.full_like(_like(a), fill_value, dtype=dtype, order=order, subok=subok,
                            shape=shape, **kw)
    base = np.zeros_like(_like(a), dtype=dtype, shape=shape)
    return broadcast_to(fill_value + base, np.shape(base))


# ---------------------------------------------------------------------------
# elementwise compositions
# ---------------------------------------------------------------------------

def _integral(*xs) -> bool:
    """Whether every operand holds integers or bools (Python ints included)."""
    return all(np.result_type(lanes_of(x) if isinstance(x, Box) else x).kind in "iub"
               for x in xs)


def remainder(x, y):
    """``np.remainder`` / ``np.mod`` as ``x - floor(x / y) * y`` (sign of ``y``)."""
    if not _box(x, y):
        return np.remainder(x, y)
    if _integral(x, y):                  # integers: numpy's exact values, no derivative
        return integer_remainder(x, y)
    return x - floor(x / y) * y


mod = remainder


def fmod(x, y):
    """``np.fmod`` as ``x - trunc(x / y) * y`` (sign of ``x``)."""
    if not _box(x, y):
        return np.fmod(x, y)
    if _integral(x, y):
        return integer_fmod(x, y)
    return x - trunc(x / y) * y


def copysign(x, y):
    """``np.copysign``: ``|x|`` with the sign of ``y``; no derivative in ``y``."""
    if not _box(x, y):
        return np.copysign(x, y)
    return absolute(x) * _copysign_one(y)


_DEG = math.pi / 180.0
_RAD = 180.0 / math.pi


def deg2rad(x):
    """``np.deg2rad`` / ``np.radians``."""
    return x * _DEG if isinstance(x, Box) else np.deg2rad(x)


def rad2deg(x):
    """``np.rad2deg`` / ``np.degrees``."""
    return x * _RAD if isinstance(x, Box) else np.rad2deg(x)


radians = deg2rad
degrees = rad2deg


_SINC_SERIES_BELOW = 0.01     # |pi x| below this: the Maclaurin series


def sinc(x):
    """``np.sinc``: ``sin(pi x) / (pi x)``, 1 at 0.

    Where ``|pi x| < 0.01`` the value is the Maclaurin series ``1 - u^2/6 +
    u^4/120 - u^6/5040`` (``u = pi x``; truncation below 1e-21), so the
    derivative at 0 is 0, the second -pi^2/3, and derivatives near 0 do not
    suffer the cancellation of ``(u cos u - sin u) / u^2``.  Which points take
    the series is decided on the concrete values and guarded for replay.
    """
    if not isinstance(x, Box):
        return np.sinc(x)

    small = batching.guarded_values(lambda v: np.abs(v) * math.pi < _SINC_SERIES_BELOW, x,
                                    "where sinc takes its series near 0")
    u = x * math.pi
    if not batching.reduce_values(np.any, small):
        return sin(u) / u
    u2 = u * u
    series = 1.0 + u2 * (-1.0 / 6.0 + u2 * (1.0 / 120.0 - u2 * (1.0 / 5040.0)))
    if batching.reduce_values(np.all, small):
        return series
    safe = where(small, 1.0, u)
    return where(small, series, sin(safe) / safe)


UFUNCS = {np.remainder: remainder, np.fmod: fmod, np.copysign: copysign,
          np.deg2rad: deg2rad, np.rad2deg: rad2deg}


# ---------------------------------------------------------------------------
# differences, averages, ranges, products
# ---------------------------------------------------------------------------

def _edge(v, a, axis):
    """A prepend/append value broadcast to ``a``'s shape with length-1 ``axis``."""
    shape = list(shape_of(a))
    if len(shape_of(v)) == 0:
        shape[axis] = 1
        return broadcast_to(v, tuple(shape)) if isinstance(v, Box) else \
            np.broadcast_to(v, tuple(shape))
    return v


def diff(a, n=1, axis=-1, prepend=_NO, append=_NO):
    """``np.diff`` by slices: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times."""
    if not _box(a, prepend, append):
        kw = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not _NO}
        return np.diff(a, n=n, axis=axis, **kw)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    a = _arr(a)
    nd = len(shape_of(a))
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = axis % nd
    parts = ([_edge(prepend, a, axis)] if prepend is not _NO else []) + [a] + \
        ([_edge(append, a, axis)] if append is not _NO else [])
    if len(parts) > 1:
        a = concatenate(parts, axis=axis)
    for _ in range(n):
        a = a[_along(axis, nd, slice(1, None))] - a[_along(axis, nd, slice(None, -1))]
    return a


def average(a, axis=None, weights=None, returned=False, *, keepdims=_NO):
    """``np.average``, differentiable in ``a`` and ``weights``."""
    if not _box(a, weights):
        kw = {} if keepdims is _NO else {"keepdims": keepdims}
        return np.average(a, axis=axis, weights=weights, returned=returned, **kw)
    keep = bool(keepdims) if keepdims is not _NO else False
    if weights is None:
        avg = _mean(a, axis=axis, keepdims=keep)
        scl = np.broadcast_to(np.asarray(math.prod(shape_of(a)) / max(math.prod(shape_of(avg)), 1),
                                         np.result_type(lanes_of(avg))), shape_of(avg))
    else:
        weights = _arr(weights)
        ashape, wshape = shape_of(a), shape_of(weights)
        if ashape != wshape:
            if axis is None:
                raise TypeError("average: axis must be given when a and weights differ "
                                "in shape")
            if len(wshape) != 1 or not isinstance(axis, (int, np.integer)):
                raise TypeError("average: 1-d weights need an integer axis")
            if wshape[0] != ashape[axis]:
                raise ValueError("Length of weights not compatible with specified axis.")
            shape = [1] * len(ashape)
            shape[axis % len(ashape)] = wshape[0]
            weights = reshape(weights, tuple(shape)) if isinstance(weights, Box) else \
                np.reshape(weights, tuple(shape))
        scl = _sum(weights, axis=axis, keepdims=keep)
        if batching.any_value(lambda v: np.asarray(v) == 0, scl):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = _sum(a * weights, axis=axis, keepdims=keep) / scl
    if returned:
        if shape_of(scl) != shape_of(avg):
            scl = broadcast_to(scl, shape_of(avg)) if isinstance(scl, Box) else \
                np.broadcast_to(scl, shape_of(avg))
        return avg, scl
    return avg


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, **kw):
    """``np.linspace`` with traced ``start``/``stop`` (scalars or arrays)."""
    if not _box(start, stop):
        return np.linspace(start, stop, num=num, endpoint=endpoint, retstep=retstep,
                           dtype=dtype, axis=axis, **kw)
    num, start, stop = int(num), _arr(start), _arr(stop)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    dt = np.result_type(lanes_of(start), lanes_of(stop), 1.0)
    if dtype is not None and np.dtype(dtype) != dt:
        raise TypeError(f"linspace(..., dtype={np.dtype(dtype)}) on traced values of dtype "
                        f"{dt}: a traced value cannot change dtype; drop dtype=")
    div = num - 1 if endpoint else num
    delta = stop - start
    nd = len(shape_of(delta))
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * nd)
    if div > 0:
        step = delta / float(div)
        y = y * step + start
    else:
        step = np.nan
        y = y * delta + start
    if endpoint and num > 1:
        last = broadcast_to(stop + np.zeros(shape_of(delta), dt), shape_of(delta))
        y = concatenate([y[:-1], expand_dims(last, 0)], axis=0)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    return (y, step) if retstep else y


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``np.cross`` of 3-vectors along ``axisa``/``axisb`` (``axis`` sets all
    three), broadcasting the rest; the result's vectors along ``axisc``."""
    if not _box(a, b):
        return np.cross(a, b, axisa=axisa, axisb=axisb, axisc=axisc, axis=axis)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _arr(a), _arr(b)
    try:
        a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    except (ValueError, IndexError, np.exceptions.AxisError) as e:
        raise np.exceptions.AxisError(f"cross: {e}") from None
    if shape_of(a)[-1:] != (3,) or shape_of(b)[-1:] != (3,):
        raise ValueError("cross on traced values needs 3-vectors along axisa/axisb (numpy "
                         f"deprecates 2-vectors), got shapes {shape_of(a)} and {shape_of(b)}"
                         " with the vector axis moved last")
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    c = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    nd = len(shape_of(c))
    if not -nd <= int(axisc) < nd:
        raise np.exceptions.AxisError(f"cross: axisc {axisc} is out of bounds for a result "
                                      f"of dimension {nd}")
    return moveaxis(c, -1, axisc)


def polyval(p, x):
    """``np.polyval`` by Horner's rule (as numpy: ``y = y * x + p[k]``)."""
    if not _box(p, x):
        return np.polyval(p, x)
    p, x = _arr(p), _arr(x)
    y = np.zeros(shape_of(x), dtype=np.result_type(lanes_of(x), lanes_of(p)))
    for k in range(shape_of(p)[0]):
        y = y * x + p[k]
    return y


def interp(x, xp, fp, left=None, right=None, period=None):
    """``np.interp``, differentiable in ``x``, ``fp``, ``left`` and ``right``.

    ``xp`` is constant (pass a plain array; ``xp.value`` of a traced one).  The
    segment of each point is found on the concrete values (as ``jnp.interp``:
    a point on an interior knot takes the slope of the segment to its right)
    and guarded, so a replay that moves a point to another segment raises.
    """
    if not _box(x, xp, fp, left, right):
        return np.interp(x, xp, fp, left=left, right=right, period=period)
    if isinstance(xp, Box):
        raise NonDifferentiableError(
            "interp: tapead has no derivative with respect to xp (the sample "
            "positions); pass them as a plain array (xp.value), or write the "
            "interpolation with tapead functions")
    if period is not None:
        raise TypeError("interp(..., period=...) is not supported on traced values")
    xp, fp = np.asarray(xp), _arr(fp)
    if xp.ndim != 1 or shape_of(fp) != xp.shape:
        raise ValueError("interp: xp and fp must be 1-d sequences of the same length")

    def segment(v):
        return np.clip(np.searchsorted(xp, np.asarray(concrete(v)), side="right"),
                       1, len(xp) - 1)

    i = segment(x)
    guard_value(x, lambda v: (segment(v), np.asarray(concrete(v)) < xp[0],
                              np.asarray(concrete(v)) > xp[-1]),
                (i, np.asarray(concrete(x)) < xp[0], np.asarray(concrete(x)) > xp[-1]),
                "an interp segment")
    dx = xp[i] - xp[i - 1]
    flat = np.abs(dx) <= np.spacing(np.finfo(xp.dtype if xp.dtype.kind == "f"
                                             else np.float64).eps)
    f0 = fp[i - 1]
    slope = (fp[i] - f0) / np.where(flat, 1.0, dx)
    y = f0 + (x - xp[i - 1]) * slope
    if flat.any():
        y = where(flat, f0, y)
    xc = np.asarray(concrete(x))
    lo, hi = xc < xp[0], xc > xp[-1]
    if lo.any():
        y = where(lo, fp[0] if left is None else left, y)
    if hi.any():
        y = where(hi, fp[-1] if right is None else right, y)
    return y


# ---------------------------------------------------------------------------
# grids and convolution
# ---------------------------------------------------------------------------

def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """``np.meshgrid`` (``indexing`` 'xy' or 'ij', ``sparse``) of traced vectors."""
    if not _box(*xi):
        return np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    s0 = (1,) * nd
    shapes = [s0[:i] + (-1,) + s0[i + 1:] for i in range(nd)]
    if indexing == "xy" and nd > 1:
        shapes[0] = (1, -1) + s0[2:]
        shapes[1] = (-1, 1) + s0[2:]
    out = [reshape(x, s) if isinstance(x, Box) else np.reshape(np.asarray(x), s)
           for x, s in zip(xi, shapes)]
    if not sparse:
        full = np.broadcast_shapes(*[shape_of(o) for o in out])
        out = [broadcast_to(o, full) if isinstance(o, Box) else np.broadcast_to(o, full)
               for o in out]
    return tuple(o if isinstance(o, Box) or not copy else np.array(o) for o in out)


def convolve(a, v, mode="full"):
    """``np.convolve`` of 1-d sequences (modes 'full', 'same', 'valid').

    The full convolution is a gather of the zero-padded longer sequence by a
    constant Toeplitz index, times the shorter one: ``out[k] = sum_j
    a[k - j] v[j]``; 'same' and 'valid' slice it as numpy does.
    """
    if not _box(a, v):
        return np.convolve(a, v, mode=mode)
    a, v = _arr(a), _arr(v)
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'full', 'same', or 'valid' (got {mode!r})")
    if len(shape_of(a)) != 1 or len(shape_of(v)) != 1:
        raise ValueError("convolve on traced values needs 1-d sequences, got shapes "
                         f"{shape_of(a)} and {shape_of(v)}")
    n, m = shape_of(a)[0], shape_of(v)[0]
    if n == 0:
        raise ValueError("a cannot be empty")
    if m == 0:
        raise ValueError("v cannot be empty")
    if m > n:                                  # convolution commutes: pad the longer one
        a, v, n, m = v, a, m, n
    dt = np.result_type(lanes_of(a), lanes_of(v))
    if m > 1:
        pad = np.zeros(m - 1, dt)
        a = concatenate([pad, a, pad]) if isinstance(a, Box) else np.concatenate([pad, a, pad])
    toeplitz = np.arange(n + m - 1)[:, None] - np.arange(m)[None, :] + (m - 1)
    full = matmul(a[toeplitz], v)
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return full[start:start + n]
    return full[m - 1:n]


UFUNCS.update({np.radians: deg2rad, np.degrees: rad2deg})

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {
    np.zeros_like: zeros_like, np.ones_like: ones_like, np.empty_like: empty_like,
    np.full_like: full_like,
    np.sinc: sinc, np.diff: diff, np.average: average, np.linspace: linspace,
    np.cross: cross, np.polyval: polyval, np.interp: interp,
    np.meshgrid: meshgrid, np.convolve: convolve,
}
#: public names re-exported by tapead.numpy
__all__ = ["zeros_like", "ones_like", "empty_like", "full_like",
           "remainder", "mod", "fmod", "copysign", "deg2rad", "rad2deg", "radians",
           "degrees", "sinc", "diff", "average", "linspace", "cross", "polyval", "interp",
           "meshgrid", "convolve"]
