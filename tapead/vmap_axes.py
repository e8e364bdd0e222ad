"""The argument rules of ``ta.vmap``: ``in_axes``/``out_axes`` as JAX's pytree
prefixes of the arguments and outputs (``broadcast_prefix``), axis checks, and
the descriptions its error messages give of a value or an argument.
"""
from __future__ import annotations

import inspect
from typing import Any, List

import numpy as np

from tapead._core import Box, shape_of
from tapead._tree import _node_children, tree_flatten
from tapead.errors import ShapeError

__all__ = ["arg_names", "broadcast_prefix", "check_axis", "describe", "is_array_like",
           "is_axis_leaf"]


def is_axis_leaf(spec) -> bool:
    return spec is None or (isinstance(spec, (int, np.integer)) and not isinstance(spec, bool))


def broadcast_prefix(spec, tree, what: str) -> List[Any]:
    """One axis spec per leaf of ``tree``: ``spec`` is a pytree prefix of ``tree``
    whose leaves (ints or None) apply to every leaf below them."""
    out: List[Any] = []
    stack = [(spec, tree, what)]
    while stack:
        s, t, where = stack.pop()
        if is_axis_leaf(s):
            out.extend([s] * len(tree_flatten(t)[0]))
            continue
        if isinstance(s, bool):
            raise TypeError(f"vmap: {where} is {s!r}; an axis is an int or None")
        ks, kt = _node_children(s), _node_children(t)
        if ks is None:
            raise TypeError(f"vmap: {where} is {s!r}; an axis spec is an int, None or a "
                            "pytree (tuple/list/dict) of them")
        if kt is None or ks[0] != kt[0] or ks[1] != kt[1] or len(ks[2]) != len(kt[2]):
            raise ValueError(
                f"vmap: {where} has the structure of {s!r}, which does not match the value "
                f"it maps ({describe(t)}); give an int/None for the whole value, or a "
                "tree with one entry per element of it")
        for j in range(len(ks[2]) - 1, -1, -1):
            stack.append((ks[2][j], kt[2][j], f"{where}[{_key(ks, j)}]"))
    return out


def _key(kind, j):
    return repr(kind[1][j]) if kind[0] == "dict" else str(j)


def describe(t) -> str:
    kt = _node_children(t)
    if kt is None:
        return f"an array of shape {tuple(shape_of(t))}" if is_array_like(t) else repr(t)
    if kt[0] == "dict":
        return f"a dict with keys {list(kt[1])}"
    return f"a {type(t).__name__} of {len(kt[2])}"


def is_array_like(x) -> bool:
    return isinstance(x, (Box, np.ndarray, np.generic, int, float, complex))


def arg_names(f, n: int) -> List[str]:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names.append(f"argument {i} ({params[i].name})")
        else:
            names.append(f"argument {i}")
    return names


def check_axis(ax, ndim: int, where: str) -> int:
    if not -ndim <= ax < ndim:
        raise ShapeError(f"vmap: {where} is mapped over axis {ax}, but it has rank {ndim}; "
                         f"an axis between {-ndim} and {ndim - 1} is needed"
                         + (" (a scalar cannot be mapped: use in_axes None for it)"
                            if ndim == 0 else ""))
    return ax % ndim
