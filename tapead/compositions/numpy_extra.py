"""More of numpy, composed exactly from tapead's primitives.

``fabs``, ``logaddexp2``, ``float_power``, ``rot90``, ``rollaxis``,
``append``, ``dsplit``, ``select``, ``partition``, ``nan_to_num``,
``real_if_close``, ``linalg.matrix_power``, ``linalg.multi_dot``, the
index tricks ``r_``/``c_`` (numpy's cannot see tracers: ``tnp.r_``,
``tnp.c_``), and the ufunc methods ``reduce``/``accumulate``/``outer`` of the
differentiable binary ufuncs.  Decisions taken from the values
(``partition``'s permutation, ``nan_to_num``'s masks, ``real_if_close``'s
test) are guarded, so a replayed tape re-checks them.
"""
from __future__ import annotations

import math

import numpy as np

from tapead._core import Box, concrete, guard_value, is_complex, lanes_of, shape_of
from tapead._prims import batching
from tapead._prims import elementwise as ew
from tapead._prims import reductions as red
from tapead._prims.linalg import inv, matmul
from tapead._prims.sorting import permute
from tapead._prims.shape import (concatenate, expand_dims, flip, moveaxis, ravel, reshape,
                                 split, stack, transpose)

__all__ = ["fabs", "logaddexp2", "float_power", "rot90", "rollaxis", "append", "dsplit",
           "select", "partition", "nan_to_num", "real_if_close", "r_", "c_"]

_LN2 = math.log(2.0)


def _box(*xs):
    return any(isinstance(x, Box) for x in xs)


def _value(x):
    return np.asarray(concrete(x))


def _no_out(name, out, kw=None):
    if out is not None:
        raise TypeError(f"{name}(..., out=...) cannot write a traced value into an array; "
                        "assign the result instead")
    bad = sorted(k for k, v in (kw or {}).items() if v is not None)
    if bad:
        raise TypeError(f"{name}: argument(s) {', '.join(bad)} are not supported on traced "
                        "values")


# elementwise ------------------------------------------------------------------
def fabs(x, /, out=None, **kw):
    """``np.fabs`` with derivatives (real values only, as numpy)."""
    if not _box(x):
        return np.fabs(x, out=out, **kw)
    _no_out("fabs", out, kw)
    if is_complex(x):
        raise TypeError("np.fabs is not defined for complex values (as in numpy); use np.abs")
    return ew.absolute(x)


def logaddexp2(x1, x2, /, out=None, **kw):
    """``np.logaddexp2``: ``log2(2**x1 + 2**x2)``, computed as
    ``logaddexp(x1 ln 2, x2 ln 2) / ln 2`` (no overflow)."""
    if not _box(x1, x2):
        return np.logaddexp2(x1, x2, out=out, **kw)
    _no_out("logaddexp2", out, kw)
    return ew.logaddexp(x1 * _LN2, x2 * _LN2) * (1.0 / _LN2)


def float_power(x1, x2, /, out=None, **kw):
    """``np.float_power``: ``x1 ** x2`` in float64 (complex128 for complex input)."""
    if not _box(x1, x2):
        return np.float_power(x1, x2, out=out, **kw)
    _no_out("float_power", out, kw)
    wide = np.complex128 if is_complex(x1) or is_complex(x2) else np.float64
    return ew.power(*(x.astype(wide) if isinstance(x, Box) else np.asarray(x, wide)
                      for x in (x1, x2)))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``np.nan_to_num`` with derivatives: 1 where ``x`` is finite, 0 where it was
    replaced."""
    if not _box(x):
        return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    if is_complex(x):
        return (nan_to_num(ew.real(x), nan=nan, posinf=posinf, neginf=neginf)
                + 1j * nan_to_num(ew.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    dtype = np.result_type(lanes_of(x))
    info = np.finfo(dtype)
    big = info.max if posinf is None else posinf
    small = info.min if neginf is None else neginf
    what = "where nan_to_num replaces values"      # batched under vmap, guarded on replay
    isn, isp, ism = (batching.guarded_values(f, x, what)
                     for f in (np.isnan, np.isposinf, np.isneginf))
    if not any(batching.reduce_values(np.any, m) for m in (isn, isp, ism)):
        return x
    bad = batching.elementwise_values(lambda n_, p_, m_: n_ | p_ | m_, isn, isp, ism)
    safe = ew.where(bad, np.zeros((), dtype), x)
    fill = batching.elementwise_values(
        lambda n_, p_: np.where(n_, nan, np.where(p_, big, small)).astype(dtype), isn, isp)
    return ew.where(bad, fill, safe)


def real_if_close(a, tol=100):
    """``np.real_if_close``: the real part when every imaginary part is within
    ``tol`` machine epsilons of zero (``tol`` > 1), else ``a`` unchanged."""
    if not _box(a):
        return np.real_if_close(a, tol=tol)
    if not is_complex(a):
        return a
    v = _value(a)
    if tol > 1:
        tol = np.finfo(v.dtype).eps * tol

    def close(w):
        return bool(np.all(np.abs(np.imag(np.asarray(concrete(w)))) < tol))

    ok = close(a)
    guard_value(a, close, ok, "whether real_if_close drops the imaginary part")
    return ew.real(a) if ok else a


# shapes ------------------------------------------------------------------------
def _norm_axis(name, axis, nd):
    axis = int(axis)
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(f"{name}: axis {axis} is out of bounds for an array "
                                      f"of dimension {nd}")
    return axis % nd


def rot90(m, k=1, axes=(0, 1)):
    """``np.rot90`` with derivatives (flips and a transpose, as numpy)."""
    if not _box(m):
        return np.rot90(m, k=k, axes=axes)
    axes = tuple(axes)
    nd = np.ndim(m)
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ValueError("rot90: axes must be different")
    a0, a1 = (_norm_axis("rot90", a, nd) for a in axes)
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), tuple(perm))
    return flip(transpose(m, tuple(perm)), a1)


def rollaxis(a, axis, start=0):
    """``np.rollaxis`` with derivatives (a transpose)."""
    if not _box(a):
        return np.rollaxis(a, axis, start=start)
    n = np.ndim(a)
    axis = _norm_axis("rollaxis", axis, n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"rollaxis: start {start} must be in [-{n}, {n}]")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return transpose(a, tuple(axes))


def append(arr, values, axis=None):
    """``np.append`` with derivatives (``axis=None`` flattens both, as numpy)."""
    if not _box(arr, values):
        return np.append(arr, values, axis=axis)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def dsplit(ary, indices_or_sections):
    """``np.dsplit`` with derivatives: :func:`split` along the third axis."""
    if not _box(ary):
        return np.dsplit(ary, indices_or_sections)
    if np.ndim(ary) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, axis=2)


def select(condlist, choicelist, default=0):
    """``np.select`` with derivatives through the choices and ``default``
    (the conditions are boolean arrays: no derivative)."""
    if not _box(default, *choicelist):
        return np.select([_value(c) for c in condlist], choicelist, default)
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    conds = [_value(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != bool:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    out = default
    for c, v in zip(conds[::-1], list(choicelist)[::-1]):
        out = ew.where(c, v, out)
    return out


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """``np.partition`` with derivatives: numpy's arrangement of the values (a
    permutation of ``a``; the derivative moves with it)."""
    if not _box(a):
        return np.partition(a, kth, axis=axis, kind=kind, order=order)
    if order is not None:
        raise TypeError("partition(..., order=...) sorts structured arrays; traced values "
                        "are plain float arrays: drop order=")
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis = _norm_axis("partition", axis, np.ndim(a))

    p = batching.guarded_lanes(lambda v: np.argpartition(v, kth, axis=axis, kind=kind), a,
                               "the partition's arrangement")
    return permute(a, p, axis)


# linalg ----------------------------------------------------------------------
def matrix_power(a, n):
    """``np.linalg.matrix_power`` with derivatives (repeated squaring, as numpy;
    ``n < 0`` inverts first).

    Parameters
    ----------
    a : array_like, shape (..., M, M)
    n : int

    Returns
    -------
    ndarray, shape (..., M, M)

    >>> import numpy as np, tapead as ta
    >>> print(ta.grad(lambda a: np.trace(np.linalg.matrix_power(a, 3)))(np.eye(2)))  # 3 (a^2)^T
    [[3. 0.]
     [0. 3.]]
    """
    if not _box(a):
        return np.linalg.matrix_power(a, n)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError("matrix_power: the exponent must be an integer")
    shape = shape_of(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise np.linalg.LinAlgError(f"matrix_power needs square matrices (..., M, M), got "
                                    f"shape {shape}")
    n = int(n)
    if n == 0:
        eye = np.broadcast_to(np.eye(shape[-1], dtype=np.result_type(lanes_of(a))), shape)
        return a * 0 + eye
    if n < 0:
        a, n = inv(a), -n
    result, z = None, a
    while True:                       # binary decomposition of n
        if n & 1:
            result = z if result is None else matmul(result, z)
        n >>= 1
        if not n:
            return result
        z = matmul(z, z)


def _chain_order(shapes):
    """numpy's matrix-chain order: s[i][j] splits the product of arrays i..j."""
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    n = len(shapes)
    cost = [[0] * n for _ in range(n)]
    split_at = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split_at[i][j] = c, k
    return split_at


def multi_dot(arrays, *, out=None):
    """``np.linalg.multi_dot`` with derivatives, in numpy's cheapest order (a 1-d
    first array is a row vector, a 1-d last one a column).

    Parameters
    ----------
    arrays : sequence of array_like
        Shapes (N,) or (K, N), then (N, M), ..., then (M,) or (M, L).

    Returns
    -------
    ndarray: the product, shape (K, L) with the 1-d ends dropped

    >>> import numpy as np, tapead as ta
    >>> A = np.array([[1.0, 2.0], [0.0, 1.0]])
    >>> print(ta.grad(lambda x: np.linalg.multi_dot([x, A, A, x]))(np.array([1.0, 0.0])))
    [2. 4.]
    """
    arrays = list(arrays)
    if not _box(*arrays):
        return np.linalg.multi_dot(arrays, out=out)
    _no_out("multi_dot", out)
    n = len(arrays)
    if n < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    first, last = np.ndim(arrays[0]), np.ndim(arrays[-1])
    if first == 1:
        arrays[0] = reshape(arrays[0], (1, -1))
    if last == 1:
        arrays[-1] = reshape(arrays[-1], (-1, 1))
    for i, x in enumerate(arrays):
        if np.ndim(x) != 2:
            raise np.linalg.LinAlgError(f"multi_dot: array {i} is {np.ndim(x)}-dimensional, "
                                        "but the arrays must be 2-d (the first and last may "
                                        "be 1-d)")
    order = _chain_order([np.shape(x) for x in arrays])
    stack_ = [(0, n - 1, None)]        # explicit stack: (i, j, None) to expand, results
    results = []
    while stack_:
        i, j, done = stack_.pop()
        if done is not None:
            right, left = results.pop(), results.pop()
            results.append(matmul(left, right))
        elif i == j:
            results.append(arrays[i])
        else:
            k = order[i][j]
            stack_.append((i, j, True))
            stack_.append((k + 1, j, None))
            stack_.append((i, k, None))
    res = results[0]
    if first == 1 and last == 1:
        return reshape(res, ())
    if first == 1:
        return reshape(res, (-1,))
    if last == 1:
        return reshape(res, (-1,))
    return res


# index tricks ----------------------------------------------------------------------
class _Concatenator:
    """``tnp.r_`` / ``tnp.c_``: numpy's index tricks for traced entries."""

    def __init__(self, name, columns):
        self.name = name
        self.columns = columns

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis = -1 if self.columns else 0
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            try:
                axis = int(directive)
            except ValueError:
                raise ValueError(f"tnp.{self.name}: only an integer axis directive "
                                 f"('0', '1', ...) is supported, got {directive!r}; "
                                 "use np.concatenate / np.stack") from None
        if not _box(*items):
            return getattr(np, self.name)[key]
        arrays = [np.asarray(lanes_of(it)) for it in items      # dtypes only
                  if isinstance(it, Box) or np.ndim(it)]
        dtype = np.result_type(*arrays) if arrays else None
        pieces = []
        for it in items:
            if not isinstance(it, Box) and isinstance(it, (int, float, complex)):
                it = np.asarray(it, dtype=np.result_type(dtype, it) if dtype else None)
            if isinstance(it, slice):
                it = np.r_[it]
            if isinstance(it, str):
                raise ValueError(f"tnp.{self.name}: a directive string must come first")
            nd = np.ndim(it)
            if self.columns:
                if nd == 0:
                    raise ValueError("tnp.c_: scalar entries are not supported; pass "
                                     "1-d or 2-d arrays")
                if nd == 1:
                    it = reshape(it, (-1, 1))
            elif nd == 0:
                it = reshape(it, (1,))
            pieces.append(it)
        return concatenate(pieces, axis=axis)


r_ = _Concatenator("r_", columns=False)
c_ = _Concatenator("c_", columns=True)


# ufunc methods ------------------------------------------------------------------
def _fold(f, x, axis, initial):
    """Left fold of the binary ``f`` along ``axis`` (numpy's ufunc.reduce)."""
    n = np.shape(x)[axis]
    parts = [x[(slice(None),) * axis + (i,)] for i in range(n)]
    acc = initial
    for p in parts:
        acc = p if acc is None else f(acc, p)
    if acc is None:
        raise ValueError("zero-size array to reduction operation with no identity")
    return acc


def ufunc_reduce(ufunc, f, x, axis=0, dtype=None, out=None, keepdims=False,
                 initial=np._NoValue, where=True):
    """``ufunc.reduce`` of a differentiable binary ufunc on a traced value."""
    name = f"np.{ufunc.__name__}.reduce"
    _no_out(name, out, {"dtype": dtype})
    if where is not True:
        raise TypeError(f"{name}(..., where=...) is not supported on traced values; "
                        "reduce np.where(mask, x, identity) instead")
    init = None if initial is np._NoValue else initial
    nd = np.ndim(x)
    if nd == 0:
        raise ValueError(f"{name}: cannot reduce a 0-d value")
    axes = tuple(range(nd)) if axis is None else \
        tuple(_norm_axis(name, a, nd) for a in np.atleast_1d(axis))
    quick = {np.add: red.sum, np.multiply: red.prod, np.maximum: red.max,
             np.minimum: red.min}.get(ufunc)
    if quick is not None:
        out = quick(x, axis=axes, keepdims=keepdims)
        return out if init is None else f(out, init)
    if len(axes) > 1:
        raise ValueError(f"reduction operation '{ufunc.__name__}' is not reorderable, "
                         "so at most one axis may be specified")
    out = _fold(f, x, axes[0], init)
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else s for i, s in enumerate(np.shape(x))))
    return out


def ufunc_accumulate(ufunc, f, x, axis=0, dtype=None, out=None):
    """``ufunc.accumulate`` of a differentiable binary ufunc on a traced value."""
    name = f"np.{ufunc.__name__}.accumulate"
    _no_out(name, out, {"dtype": dtype})
    nd = np.ndim(x)
    if nd == 0:
        raise ValueError(f"{name}: cannot accumulate on a scalar")
    axis = _norm_axis(name, axis, nd)
    if ufunc is np.add:
        return red.cumsum(x, axis=axis)
    if ufunc is np.multiply:
        return red.cumprod(x, axis=axis)
    n = np.shape(x)[axis]
    acc, parts = None, []
    for i in range(n):
        p = x[(slice(None),) * axis + (i,)]
        acc = p if acc is None else f(acc, p)
        parts.append(acc)
    return stack(parts, axis=axis) if parts else x


def ufunc_outer(ufunc, f, a, b, out=None, **kw):
    """``ufunc.outer``: ``f(a[..., None, ...], b)`` over every pair of elements."""
    _no_out(f"np.{ufunc.__name__}.outer", out, {k: v for k, v in kw.items()})
    a = reshape(a, np.shape(a) + (1,) * np.ndim(b))
    return f(a, b)


UFUNCS = {np.fabs: fabs, np.logaddexp2: logaddexp2, np.float_power: float_power}

NUMPY_FUNCTIONS = {
    np.rot90: rot90, np.rollaxis: rollaxis, np.append: append, np.dsplit: dsplit,
    np.select: select, np.partition: partition, np.nan_to_num: nan_to_num,
    np.real_if_close: real_if_close, np.linalg.matrix_power: matrix_power,
    np.linalg.multi_dot: multi_dot,
}

_ = (expand_dims, moveaxis)
