"""Argument layouts: how a Function's named leaves are grouped.

``sc.L``/``sc.G`` declare one input layout and one output layout
(``sc.function(sc.L("x", 3), sc.L("y", ...))``); ``sc.arg``/``sc.group``
declare one layout per positional parameter and the outputs with
``outputs=``.  A leaf is a named tensor; a group is a tuple of layouts.
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from tapead.errors import LayoutError, ScalyShapeError
from tapead.scaly.types import TensorType


class Leaf:
    """A named tensor of a layout.

    Parameters
    ----------
    name : str
    shape : (), int, tuple of int, ``...`` (inferred; outputs only) or TensorType
    """

    def __init__(self, name: str, shape: Any = ()):
        if not isinstance(name, str) or not name.isidentifier():
            raise LayoutError(f"a layout name must be an identifier, not {name!r}")
        self.name = name
        if shape is Ellipsis:
            self.type: Optional[TensorType] = None
        elif isinstance(shape, TensorType):
            self.type = shape
        else:
            self.type = TensorType(shape)

    def resolved(self, ttype: TensorType) -> "Leaf":
        """The same leaf with its type known."""
        out = type(self).__new__(type(self))
        out.name, out.type = self.name, ttype
        return out

    def __repr__(self) -> str:
        shape = "..." if self.type is None else self.type
        return f"sc.{type(self).__name__}({self.name!r}, {shape})"


class Group:
    """A tuple of layouts, passed and returned as a Python tuple."""

    def __init__(self, *items):
        if len(items) == 1 and isinstance(items[0], (list, tuple)):
            items = tuple(items[0])
        for item in items:
            if not isinstance(item, (Leaf, Group)):
                raise LayoutError(f"a group holds leaves and groups, not {item!r}")
        self.items: Tuple[Any, ...] = tuple(items)

    def __repr__(self) -> str:
        return f"sc.{type(self).__name__}({', '.join(map(repr, self.items))})"


class L(Leaf):
    """A leaf of the ``sc.L``/``sc.G`` declaration style.

    Parameters
    ----------
    name : str
        The input's or output's name (used by ``sc.gradient(f, "y", "x")``).
    shape : (), int, tuple of int or ``...``
        ``...`` (outputs only) takes the shape the body returns.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 3), sc.L("y", ...))
    ... def norm2(x):
    ...     return (x * x).sum()
    >>> print(norm2(np.array([1.0, 2.0, 2.0])))
    9.0
    """


class G(Group):
    """A group of the ``sc.L``/``sc.G`` declaration style.

    Parameters
    ----------
    *items : sc.L or sc.G
        The members, in order; the body receives (or returns) a tuple.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.G(sc.L("a", ()), sc.L("b", ())), sc.G(sc.L("s", ...), sc.L("d", ...)))
    ... def sum_diff(ab):
    ...     a, b = ab
    ...     return a + b, a - b
    >>> [float(v) for v in sum_diff((3.0, 1.0))]
    [4.0, 2.0]
    """


class arg(Leaf):  # noqa: N801  (Scaly's name)
    """A positional parameter (or an output) of the ``sc.arg`` style.

    Parameters
    ----------
    name : str
        The parameter's or output's name.
    shape : (), int, tuple of int or ``...``
        ``...`` (outputs only) takes the shape the body returns.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.arg("x", 2), outputs=sc.arg("y", ...))
    ... def f(x):
    ...     return x[0] * x[1]
    >>> print(f(np.array([2.0, 3.0])))
    6.0
    """


class group(Group):  # noqa: N801  (Scaly's name)
    """A group of the ``sc.arg`` style, e.g. ``outputs=sc.group(...)``.

    Parameters
    ----------
    *items : sc.arg or sc.group
        The members, in order; a positional parameter declared as a group
        receives a tuple, and ``outputs=sc.group(...)`` returns one.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> @sc.function(sc.arg("x"), outputs=sc.group(sc.arg("s", ...), sc.arg("c", ...)))
    ... def sincos(x):
    ...     return x.sin(), x.cos()
    >>> [round(float(v), 6) for v in sincos(0.5)]
    [0.479426, 0.877583]
    """


def leaves(layouts: Sequence[Any]) -> List[Leaf]:
    """The leaves of ``layouts`` in order (iterative, depth first)."""
    out: List[Leaf] = []
    stack = list(reversed(layouts))
    while stack:
        item = stack.pop()
        if isinstance(item, Leaf):
            out.append(item)
        else:
            stack.extend(reversed(item.items))
    return out


def flatten(layouts: Sequence[Any], values: Sequence[Any], what: str) -> List[Any]:
    """The values of the leaves of ``values`` arranged as ``layouts``."""
    if all(isinstance(layout, Leaf) for layout in layouts):
        return list(values)[:len(layouts)]
    out: List[Any] = []
    stack = list(reversed(list(zip(layouts, values))))
    while stack:
        layout, value = stack.pop()
        if isinstance(layout, Leaf):
            out.append(value)
            continue
        if not isinstance(value, (tuple, list)) or len(value) != len(layout.items):
            got = (f"a {type(value).__name__} of {len(value)}"
                   if isinstance(value, (tuple, list)) else type(value).__name__)
            raise LayoutError(f"{what}: the group {layout!r} takes a tuple of "
                              f"{len(layout.items)} values, got {got}")
        stack.extend(reversed(list(zip(layout.items, value))))
    return out


def unflatten(layouts: Sequence[Any], flat: Sequence[Any]) -> List[Any]:
    """Inverse of ``flatten``: one value per layout, groups as tuples."""
    it = iter(flat)

    def build(layout):
        # groups nest a few levels at most; the leaves themselves are flat
        if isinstance(layout, Leaf):
            return next(it)
        return tuple(build(item) for item in layout.items)
    return [build(layout) for layout in layouts]


def infer_output_layout(result: Any) -> Any:
    """Outputs of an undeclared function: ``out`` or ``out0, out1, ...``."""
    if not isinstance(result, (tuple, list)):
        return arg("out", ...)
    counter = iter(range(10 ** 9))

    def build(value):
        if isinstance(value, (tuple, list)):
            return group(*(build(v) for v in value))
        return arg(f"out{next(counter)}", ...)
    return build(result)


def check_value_shape(leaf: Leaf, value: Any, where: str) -> np.ndarray:
    """``value`` as an array of the leaf's dtype, or a clear shape error."""
    shape, dtype = leaf.type.shape, leaf.type.dtype
    arr = value if type(value) is np.ndarray else np.asarray(value)
    if arr.dtype.hasobject:
        raise LayoutError(f"{where}: input '{leaf.name}' got a {type(value).__name__}, "
                          "which is not a number or an array")
    if arr.shape != shape:
        raise ScalyShapeError(
            f"{where}: input '{leaf.name}' expects shape {shape}, got an array of "
            f"shape {arr.shape}; pass an array of shape {shape}")
    if arr.dtype == dtype:
        return arr
    if np.can_cast(arr.dtype, dtype, casting="same_kind"):
        return arr.astype(dtype)
    return _exact_conversion(arr, leaf, where)


def _exact_conversion(arr: np.ndarray, leaf: Leaf, where: str) -> np.ndarray:
    """``arr`` in the leaf's dtype when no value changes (``[1, 0]`` for a
    bool, ``2.0`` for an int64), else a LayoutError: a truncated or
    dropped part would be a silent wrong number."""
    dtype = leaf.type.dtype
    out = None
    if arr.dtype.kind in "biufc":
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = arr.astype(dtype)
            same = np.array_equal(out.astype(arr.dtype), arr)
        if same:
            return out
    hint = {"int64": "an integer array (np.rint(v).astype(np.int64) to round)",
            "bool": "a boolean array"}.get(leaf.type.dtype_name, "a real float array")
    what = "would change in the conversion" if out is not None else "are not numbers"
    raise LayoutError(f"{where}: input '{leaf.name}' is {leaf.type.dtype_name}, and "
                      f"its {arr.dtype} values {what}; pass {hint}")
