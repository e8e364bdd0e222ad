"""Building arrays from traced values: ``tnp.array``, ``tnp.asarray`` and the
packing of numpy object arrays of tracers.

``np.array([a, b])`` of traced scalars cannot return a traced array (numpy
always returns an ndarray), so a 0-d tracer's ``__array__`` gives numpy an
object array holding the tracer.  Such object arrays are packed into one
traced array — one ``stack`` node and a reshape — as soon as they reach a
tapead operation (``bind``) or a transform's output; numpy's own object
loops (``np.sum`` of an object array, ``obj * 2.0``) run the tracers'
operators element by element meanwhile, so they stay differentiable too.
"""
from __future__ import annotations

import numpy as np

from tapead._core import Box, lanes_of, pack_scalars, shape_of
from tapead._prims.elementwise import astype
from tapead._prims.shape import reshape, stack

__all__ = ["array", "asarray"]

_SEQUENCES = (list, tuple)


def _is_sequence(x):
    return isinstance(x, _SEQUENCES) or (type(x) is np.ndarray and x.dtype == object
                                         and x.ndim > 0)


def _leaves(obj):
    """The leaves of a nested list/tuple/object array in row-major order and the
    outer shape, level by level (no recursion).  Raises ValueError when ragged."""
    level, shape = [obj], []
    while True:
        seqs = [_is_sequence(x) for x in level]
        if not any(seqs):
            return level, tuple(shape)
        if not all(seqs):
            raise ValueError("tnp.array: the nested sequence is ragged (some entries are "
                             "sequences, others are not); give every row the same length")
        lengths = {len(x) for x in level}
        if len(lengths) != 1:
            raise ValueError(f"tnp.array: the nested sequence is ragged: rows of lengths "
                             f"{sorted(lengths)} at depth {len(shape)}; give every row the "
                             "same length")
        shape.append(lengths.pop())
        level = [child for x in level
                 for child in (x.tolist() if type(x) is np.ndarray else x)]


def _contains_box(obj):
    stack_ = [obj]
    while stack_:
        x = stack_.pop()
        if isinstance(x, Box):
            return True
        if type(x) is np.ndarray:
            if x.dtype == object:
                stack_.extend(x.ravel().tolist())
        elif isinstance(x, _SEQUENCES):
            stack_.extend(x)
    return False


def _build(obj, dtype):
    if dtype is None or np.dtype(dtype) == np.float64:
        packed = pack_scalars(obj)      # a flat sequence of scalar tracers: one record, in C
        if packed is not None:
            return packed
    leaves, outer = _leaves(obj)
    shapes = {shape_of(x) for x in leaves}
    if len(shapes) != 1:
        raise ValueError(f"tnp.array: the entries have different shapes {sorted(shapes)}; "
                         "numpy needs equal shapes to build an array")
    inner = shapes.pop()
    kind = np.result_type(*[np.result_type(lanes_of(x)) for x in leaves]) if leaves \
        else np.dtype(np.float64)
    if dtype is None and kind.kind in "biu":
        kind = np.dtype(np.float64) if any(isinstance(x, Box) for x in leaves) else kind
    target = np.dtype(dtype) if dtype is not None else kind
    leaves = [x if isinstance(x, Box) else np.asarray(x, dtype=target) for x in leaves]
    out = reshape(stack(leaves), outer + inner)
    if np.result_type(lanes_of(out)) != target:
        out = astype(out, target)
    return out


def array(object, dtype=None, *, copy=True, ndmin=0, **kwargs):  # noqa: A002
    """``np.array`` that also builds traced arrays.

    A (nested) list or tuple of tracers and numbers becomes one traced array
    (a single ``stack`` node), as ``jnp.array`` does in JAX; without tracers it
    is ``np.array``.

    >>> import tapead as ta, tapead.numpy as tnp
    >>> ta.jacfwd(lambda x: tnp.array([x[0] * x[1], 2.0]))(tnp.array([3.0, 4.0]))
    array([[4., 3.],
           [0., 0.]])
    """
    if isinstance(object, Box):
        out = object if dtype is None else astype(object, dtype)
    elif _contains_box(object):
        out = _build(object, dtype)
    else:
        return np.array(object, dtype=dtype, copy=copy, ndmin=ndmin, **kwargs)
    if ndmin and np.ndim(out) < ndmin:
        out = reshape(out, (1,) * (ndmin - np.ndim(out)) + np.shape(out))
    return out


def asarray(a, dtype=None, **kwargs):
    """``np.asarray`` that also builds traced arrays (see :func:`array`); a
    tracer is returned as it is."""
    if isinstance(a, Box):
        return a if dtype is None or np.result_type(lanes_of(a)) == np.dtype(dtype) \
            else astype(a, dtype)
    if _contains_box(a):
        return _build(a, dtype)
    return np.asarray(a, dtype=dtype, **kwargs)


def pack_objects(a):
    """An object ndarray holding tracers as one traced array (else ``a`` itself)."""
    if not _contains_box(a):
        return a
    return _build(a, None)
