"""Element types and tensor types of Scaly expressions."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Tuple

import numpy as np

#: The element types an expression can have (``sc.dtypes.float64`` ...).
dtypes = SimpleNamespace(float64=np.dtype(np.float64), int64=np.dtype(np.int64),
                         bool_=np.dtype(np.bool_))

_DTYPE_NAMES = {np.dtype(np.float64): "float64", np.dtype(np.int64): "int64",
                np.dtype(np.bool_): "bool"}


_CANONICAL = {dt: dt for dt in (dtypes.float64, dtypes.int64, dtypes.bool_)}


def normalize_dtype(dtype) -> np.dtype:
    """The canonical dtype among float64, int64 and bool for ``dtype``."""
    known = _CANONICAL.get(dtype) if isinstance(dtype, np.dtype) else None
    if known is not None:
        return known
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return dtypes.bool_
    if np.issubdtype(dt, np.integer):
        return dtypes.int64
    if np.issubdtype(dt, np.floating):
        return dtypes.float64
    raise TypeError(f"Scaly expressions hold float64, int64 or bool values, not {dt}")


def normalize_shape(shape) -> Tuple[int, ...]:
    """``()``, an int ``n`` or a tuple of ints, as a tuple."""
    if type(shape) is tuple and all(type(s) is int and s >= 0 for s in shape):
        return shape
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"a shape is (), an int or a tuple of ints, not {shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"shape {out} has a negative dimension")
    return out


class TensorType:
    """A tensor's shape and element type: ``sc.TensorType((), sc.dtypes.bool_)``.

    Parameters
    ----------
    shape : (), int or tuple of int
    dtype : numpy dtype, default float64

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> sc.TensorType(3), sc.TensorType((), sc.dtypes.bool_)
    (TensorType((3,), float64), TensorType((), bool))
    """

    __slots__ = ("shape", "dtype", "size")

    def __init__(self, shape=(), dtype=dtypes.float64):
        self.shape = normalize_shape(shape)
        self.dtype = normalize_dtype(dtype)
        self.size = math.prod(self.shape)       # the number of elements

    @property
    def dtype_name(self) -> str:
        return _DTYPE_NAMES[self.dtype]

    def render(self, diff: bool = False) -> str:
        """``tensor<4x1xfloat64 diff>`` as in the listings."""
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype_name}{' diff' if diff else ''}>"

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorType) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype.str))

    def __repr__(self) -> str:
        return f"TensorType({self.shape}, {self.dtype_name})"
