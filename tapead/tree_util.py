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
from tapead._tree import (TreeDef, register_pytree_node, tree_flatten, tree_leaves,  # noqa
                          tree_map, tree_structure, tree_unflatten)

__all__ = ["TreeDef", "register_pytree_node", "tree_flatten", "tree_leaves", "tree_map",
           "tree_structure", "tree_unflatten"]
