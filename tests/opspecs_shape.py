"""Op-spec rows of the shape and indexing family (joined to opspecs.SPECS).

Each ``body(m, *args)`` is written once for ``tapead.numpy``, numpy and
``jax.numpy``.  Index assignment is written the numpy way (``y[idx] = v``
on a copy) for numpy and tapead, and as ``y.at[idx].set(v)`` for JAX,
whose arrays are immutable (``_set`` / ``_iadd`` / ``_at_add`` pick).
Rows whose numpy result depends on the order of repeated writes
(``y[[0, 0]] = ...``) have no JAX counterpart and live in
``test_shape_indexing.py``.
"""
import numpy as np

import tapead.numpy as tnp
from opspecs import COLS, MASK, ROWS, _array_op as A

M23 = (("array", ((2, 3),)),)
M34 = (("array", ((3, 4),)),)
V5 = (("array", ((5,),)),)
T234 = (("array", ((2, 3, 4),)),)
SQ3 = (("array", ((3, 3),)),)
COUNTS = np.array([2, 0, 1, 3])          # per-element repeat counts


def _is_jax(y):
    return hasattr(y, "at")


def _set(y, idx, v):
    """numpy's ``y[idx] = v`` on a copy; JAX's ``y.at[idx].set(v)``."""
    if _is_jax(y):
        return y.at[idx].set(v)
    y = y * 1.0
    y[idx] = v
    return y


def _iadd(y, idx, v):
    """numpy's ``y[idx] += v`` on a copy (indices must not repeat)."""
    if _is_jax(y):
        return y.at[idx].add(v)
    y = y * 1.0
    y[idx] += v
    return y


def _at_add(y, idx, v):
    """``at(y)[idx].add(v)``: repeated indices accumulate (np.add.at)."""
    return y.at[idx].add(v) if _is_jax(y) else tnp.at(y)[idx].add(v)


ARRAY_OPS = [
    # reshaping
    A("ravel", lambda m, x: m.ravel(x), *T234),
    A("ravel_method", lambda m, x: x.T.ravel(), *M23),
    A("flatten_method", lambda m, x: x.flatten(), *M23),
    A("moveaxis", lambda m, x: m.moveaxis(x, 0, -1), *T234),
    A("moveaxis_many", lambda m, x: m.moveaxis(x, (0, 1), (2, 0)), *T234),
    A("expand_dims", lambda m, x: m.expand_dims(x, 1), *M23),
    A("expand_dims_tuple", lambda m, x: m.expand_dims(x, (0, -1)), *M23),
    A("squeeze", lambda m, x: m.squeeze(x), ("array", ((1, 3, 1),))),
    A("squeeze_axis", lambda m, x: m.squeeze(x, axis=2), ("array", ((1, 3, 1),))),
    A("squeeze_method", lambda m, x: x.squeeze(0), ("array", ((1, 3, 1),))),
    A("atleast_1d", lambda m, x: m.atleast_1d(x), ("scalar", ((),))),
    A("atleast_2d", lambda m, x: m.atleast_2d(x), ("array", ((3,),))),
    A("atleast_3d", lambda m, x: m.atleast_3d(x), ("array", ((2, 3),))),
    # joining and splitting
    A("hstack", lambda m, x, y: m.hstack([x, y]),
      ("vectors", ((2,), (3,))), ("matrices", ((2, 3), (2, 1)))),
    A("vstack", lambda m, x, y: m.vstack([x, y]),
      ("vectors", ((3,), (3,))), ("matrices", ((2, 3), (1, 3)))),
    A("dstack", lambda m, x, y: m.dstack([x, y]), ("array", ((2, 3), (2, 3)))),
    A("column_stack", lambda m, x, y: m.column_stack([x, y]), ("array", ((3,), (3, 2)))),
    A("split", lambda m, x: m.split(x, 3, axis=1)[0] * m.split(x, 3, axis=1)[2], *M23),
    A("split_indices", lambda m, x: m.split(x, [1, 3])[2] - m.split(x, [1, 3])[0] ** 2, *V5),
    A("array_split", lambda m, x: m.concatenate(
        [p ** (k + 1) for k, p in enumerate(m.array_split(x, 3))]), *V5),
    A("hsplit", lambda m, x: m.hsplit(x, [1])[1] * m.hsplit(x, [1])[0], *M23),
    A("vsplit", lambda m, x: m.vsplit(x, 3)[0] * m.vsplit(x, 3)[2], *M34),
    # repetition
    A("tile", lambda m, x: m.tile(x, 3), ("array", ((2,),))),
    A("tile_2d", lambda m, x: m.tile(x, (2, 1, 2)), *M23),
    A("repeat", lambda m, x: m.repeat(x, 2), *M23),
    A("repeat_axis", lambda m, x: m.repeat(x, 3, axis=1), *M23),
    A("repeat_counts", lambda m, x: m.repeat(x, COUNTS, axis=1), *M34),
    A("repeat_method", lambda m, x: x.repeat(2, axis=0), *M23),
    # reordering
    A("flip", lambda m, x: m.flip(x), *M23),
    A("flip_axis", lambda m, x: m.flip(x, axis=1), *T234),
    A("flip_axes", lambda m, x: m.flip(x, axis=(0, 2)), *T234),
    A("fliplr", lambda m, x: m.fliplr(x), *M23),
    A("flipud", lambda m, x: m.flipud(x), *M23),
    A("roll", lambda m, x: m.roll(x, 2), *M34),
    A("roll_axis", lambda m, x: m.roll(x, -1, axis=1), *M34),
    A("roll_axes", lambda m, x: m.roll(x, (1, 2), axis=(0, 1)), *M34),
    # diagonals and triangles
    A("diag_vector", lambda m, x: m.diag(x), ("array", ((3,),))),
    A("diag_vector_k", lambda m, x: m.diag(x, k=-2), ("array", ((3,),))),
    A("diag_matrix", lambda m, x: m.diag(x), *M34),
    A("diag_matrix_k", lambda m, x: m.diag(x, 1), *M34),
    A("diagonal", lambda m, x: m.diagonal(x), *M34),
    A("diagonal_offset_axes", lambda m, x: m.diagonal(x, -1, 2, 0), *T234),
    A("diagonal_method", lambda m, x: x.diagonal(1), *M34),
    A("trace", lambda m, x: m.trace(x), *SQ3),
    A("trace_offset_axes", lambda m, x: m.trace(x, 1, 1, 2), *T234),
    A("triu", lambda m, x: m.triu(x), *M34),
    A("triu_k", lambda m, x: m.triu(x, -1), *T234),
    A("tril", lambda m, x: m.tril(x), *M34),
    A("tril_k", lambda m, x: m.tril(x, 1), *M34),
    A("pad", lambda m, x: m.pad(x, 1), *M23),
    A("pad_widths_values", lambda m, x: m.pad(x, ((1, 0), (2, 1)), constant_values=0.5), *M23),
    A("pad_edge", lambda m, x: m.pad(x, (1, 2), mode="edge"), *M23),
    A("pad_reflect", lambda m, x: m.pad(x, 2, mode="reflect"), *M34),
    A("pad_symmetric", lambda m, x: m.pad(x, ((0, 3),), mode="symmetric"), *V5),
    A("pad_wrap", lambda m, x: m.pad(x, 3, mode="wrap"), ("array", ((2,),))),
    # indexing (getitem itself has rows in opspecs.py)
    A("getitem_ellipsis_newaxis", lambda m, x: x[..., None, 1:], *T234),
    A("getitem_mixed_advanced", lambda m, x: x[np.array([1, 0, 1]), :, COLS], *T234),
    A("getitem_mask_rows", lambda m, x: x[np.array([True, False, True])], *M34),
    A("take", lambda m, x: m.take(x, ROWS), *M34),
    A("take_axis", lambda m, x: m.take(x, np.array([[0, 3], [3, 3]]), axis=1), *M34),
    A("take_scalar_index", lambda m, x: m.take(x, 2, axis=0), *M34),
    A("take_method", lambda m, x: x.take(COLS, axis=1), *M34),
    A("copy", lambda m, x: m.copy(x) * x, *M23),
    # index assignment: y[idx] = v, y[idx] += v (no repeated indices)
    A("setitem_row", lambda m, x, v: _set(x, 1, v), ("array", ((3, 4), (4,))),
      ("bcast", ((3, 4), ()))),
    A("setitem_slice", lambda m, x, v: _set(x, (slice(1, 3), slice(None, None, 2)), v),
      ("array", ((3, 4), (2, 2))), ("bcast", ((3, 4), (2,)))),
    A("setitem_element", lambda m, x, v: _set(x, (0, 0), v), ("scalar", ((3, 4), ()))),
    A("setitem_intarray", lambda m, x, v: _set(x, np.array([2, 0]), v),
      ("array", ((3, 4), (2, 4))), ("bcast", ((3, 4), (4,)))),
    A("setitem_mask", lambda m, x, v: _set(x, MASK, v),
      ("array", ((3, 4), (7,))), ("scalar", ((3, 4), ()))),
    A("setitem_self", lambda m, x: _set(x, 0, x[1] * x[2]), *M34),
    A("iadd_mask", lambda m, x, v: _iadd(x, MASK, v), ("array", ((3, 4), (7,)))),
    A("iadd_slice", lambda m, x, v: _iadd(x, (Ellipsis, slice(1, None)), v),
      ("array", ((3, 4), (3, 3))), ("bcast", ((3, 4), (3,)))),
    # index_update(mode="add") via at(x)[idx].add: repeated indices accumulate
    A("at_add_repeats", lambda m, x, v: _at_add(x, ROWS, v), ("array", ((3, 4), (4, 4))),
      ("bcast", ((3, 4), (4,)))),
    A("at_add_cols", lambda m, x, v: _at_add(x, (slice(None), COLS), v),
      ("array", ((3, 4), (3, 3)))),
]
