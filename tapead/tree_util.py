"""Pytree utilities (``ta.tree_util``), named as in ``jax.tree_util``.

A pytree is a nested structure of containers — tuples, lists, dicts,
``None``, namedtuples, dataclasses and any class registered with
:func:`register_pytree_node` — whose leaves are arrays and numbers. Every
transform accepts pytrees wherever it accepts an array, and returns results
with the same structure.

>>> import collections
>>> import tapead as ta
>>> Params = collections.namedtuple("Params", "w b")
>>> g = ta.grad(lambda p, x: (p.w * x + p.b) ** 2)(Params(1.0, 0.5), 2.0)
>>> g
Params(w=np.float64(10.0), b=np.float64(5.0))
"""
import numpy as np

from tapead import _core
from tapead._core import Box
from tapead._prims.shape import concatenate, getitem, reshape
from tapead._tree import (TreeDef, register_pytree_node, tree_flatten, tree_leaves,  # noqa
                          tree_map, tree_structure, tree_unflatten)

__all__ = ["TreeDef", "register_pytree_node", "tree_flatten", "tree_leaves", "tree_map",
           "tree_structure", "tree_unflatten"]


# leaves <-> one flat vector: what loops, custom rules and implicit functions
# pass through a primitive as a single operand (not public API)

def pack_leaves(leaves):
    """The leaves raveled and concatenated into one 1-d array (boxes allowed)."""
    if not leaves:
        return np.zeros(0)
    flat = [reshape(x, (-1,)) if isinstance(x, Box) else np.ravel(x) for x in leaves]
    if any(isinstance(x, Box) for x in flat):
        return concatenate(flat)
    return np.concatenate(flat)


def unpack_leaves(vec, shapes):
    """The inverse of :func:`pack_leaves`: ``vec`` cut into arrays of ``shapes``."""
    out, off = [], 0
    for shp in shapes:
        n = int(np.prod(shp))
        piece = vec[off:off + n] if not isinstance(vec, Box) else getitem(vec, slice(off, off + n))
        out.append(reshape(piece, shp) if isinstance(piece, Box) else np.reshape(piece, shp))
        off += n
    return out


def leaf_shapes(leaves):
    """The shape of each leaf (of its value, for traced leaves)."""
    return [np.shape(_core.concrete(x)) for x in leaves]
