"""``flatten(value) -> (vector, unflatten)`` for nested tuples, lists and dicts of
arrays and numbers, as autograd's (dict keys in sorted order).

``unflatten`` is differentiable, so an objective of a flat vector can be
written with the structured parameters:

>>> import numpy as np
>>> from tapead.autograd.misc import flatten
>>> params = {"w": np.ones((2, 2)), "b": [0.5, np.zeros(1)]}
>>> vec, unflatten = flatten(params)
>>> vec
array([0.5, 0. , 1. , 1. , 1. , 1. ])
>>> unflatten(2.0 * vec)["w"]
array([[2., 2.],
       [2., 2.]])
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead import numpy as tnp
from tapead._tree import tree_flatten, tree_unflatten
from tapead.tree_util import unpack_leaves

__all__ = ["flatten", "flatten_func"]


def _ravel(x):
    return tnp.ravel(x) if isinstance(x, _core.Box) else np.ravel(x)


def flatten(value):
    """``(vector, unflatten)``: the leaves of ``value`` raveled and concatenated
    (tuples and lists in order, dicts by sorted key), and the function that
    cuts a vector of that length back into the structure (every leaf an
    array of its shape). Works on traced values too."""
    leaves, tree = tree_flatten(value)
    shapes = [np.shape(_core.concrete(x)) for x in leaves]
    if not leaves:
        flat = np.array([])
    elif any(isinstance(x, _core.Box) for x in leaves):
        flat = tnp.concatenate([_ravel(x) for x in leaves])
    else:
        flat = np.concatenate([np.ravel(x) for x in leaves])
    size = int(np.size(_core.concrete(flat)))

    def unflatten(vector):
        if np.shape(_core.concrete(vector)) != (size,):
            raise ValueError(f"unflatten: expected a vector of {size} values, got shape "
                             f"{np.shape(_core.concrete(vector))}")
        return tree_unflatten(tree, unpack_leaves(vector, shapes))
    return flat, unflatten


def flatten_func(func, example):
    """``(flat_func, unflatten, flat_example)``: ``flat_func(vector, *args)`` is
    ``func`` of the unflattened vector, its output flattened."""
    flat_example, unflatten = flatten(example)

    def flat_func(x, *args):
        return flatten(func(unflatten(x), *args))[0]
    return flat_func, unflatten, flat_example
