"""Minimal pytrees: nested tuples, lists and dicts of leaves."""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

from tapead._core import classify_leaves


class TreeDef:
    """The structure of a pytree (its leaves removed)."""

    __slots__ = ("kind", "meta", "children", "flat", "all_float")

    def __init__(self, kind, meta, children, flat=False):
        self.kind = kind          # "leaf", "tuple", "list", "dict", "none"
        self.meta = meta          # dict keys (sorted) for dicts
        self.children = children
        self.flat = flat          # a tuple/list whose children are all leaves
        self.all_float = False    # set by the transforms: every leaf a Python float

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __repr__(self):
        return f"TreeDef({self.kind}, {self.meta}, {self.children})"

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf", None, ())


def tree_flatten(tree: Any) -> Tuple[List[Any], TreeDef]:
    """A pytree's leaves in order, and its structure.

    Tuples, lists and dicts are containers (dict entries in sorted key
    order), ``None`` is an empty subtree, anything else is a leaf.
    Iterative: no recursion limit on the nesting depth.

    Parameters
    ----------
    tree : pytree

    Returns
    -------
    leaves : list
    treedef : TreeDef
        The structure, for :func:`tree_unflatten`; two trees have equal
        ``treedef`` when they have the same containers and keys.

    Examples
    --------
    >>> import tapead as ta
    >>> leaves, treedef = ta.tree_flatten({"b": (1.0, None), "a": [2.0, 3.0]})
    >>> leaves
    [2.0, 3.0, 1.0]
    """
    if type(tree) is dict:
        keys = sorted(tree)
        values = [tree[k] for k in keys]
        kind = classify_leaves(values)
        if kind:
            td = TreeDef("dict", tuple(keys), (LEAF,) * len(keys), flat=True)
            td.all_float = kind == 2
            return values, td
    elif type(tree) in (list, tuple):
        kind = classify_leaves(tree)
        if kind:
            # fast path: a flat sequence of numbers/arrays
            td = TreeDef("tuple" if type(tree) is tuple else "list", None,
                         (LEAF,) * len(tree), flat=True)
            td.all_float = kind == 2
            return list(tree), td
    leaves: List[Any] = []
    # build with an explicit stack of (node, parent_children_list)
    root_holder: list = []
    stack = [(tree, root_holder)]
    while stack:
        node, out = stack.pop()
        if isinstance(node, (tuple, list)) and not hasattr(node, "_fields"):
            children: list = []
            out.append(TreeDef("tuple" if isinstance(node, tuple) else "list", None, children))
            for child in reversed(node):
                stack.append((child, _Slot(children)))
        elif isinstance(node, dict):
            keys = sorted(node)
            children = []
            out.append(TreeDef("dict", tuple(keys), children))
            for k in reversed(keys):
                stack.append((node[k], _Slot(children)))
        elif node is None:
            out.append(TreeDef("none", None, ()))
        else:
            leaves.append(node)
            out.append(LEAF)
    return leaves, _freeze(root_holder[0])


class _Slot:
    """Appends children in traversal order (the stack pops them in order)."""

    __slots__ = ("target",)

    def __init__(self, target):
        self.target = target

    def append(self, item):
        self.target.append(item)


def _freeze(td: TreeDef) -> TreeDef:
    stack = [td]
    while stack:
        t = stack.pop()
        if isinstance(t.children, list):
            stack.extend(t.children)
            t.children = tuple(t.children)
    return td


_CLOSE = object()     # tree_unflatten's marker: a node's children are all built


def tree_unflatten(treedef: TreeDef, leaves: List[Any]) -> Any:
    """Inverse of ``tree_flatten``: put ``leaves`` into ``treedef``'s structure.

    Iterative, with an explicit stack (a closure that calls itself is a
    reference cycle, which kept every call's leaves alive until the garbage
    collector ran).

    Parameters
    ----------
    treedef : TreeDef
        From :func:`tree_flatten`.
    leaves : sequence
        ``treedef.num_leaves`` new leaves, in the order ``tree_flatten``
        gives them.

    Returns
    -------
    pytree

    Examples
    --------
    >>> import tapead as ta
    >>> _, treedef = ta.tree_flatten({"b": (1.0, None), "a": [2.0, 3.0]})
    >>> ta.tree_unflatten(treedef, [20.0, 30.0, 10.0])
    {'a': [20.0, 30.0], 'b': (10.0, None)}
    """
    if treedef.flat:
        if treedef.kind == "dict":
            return dict(zip(treedef.meta, leaves))
        return tuple(leaves) if treedef.kind == "tuple" else list(leaves)
    it = iter(leaves)
    root: List[Any] = []
    stack: List[Any] = [(treedef, root)]
    while stack:
        td, out = stack.pop()
        if td is _CLOSE:
            node, kids, parent = out
            parent.append(tuple(kids) if node.kind == "tuple" else kids
                          if node.kind == "list" else dict(zip(node.meta, kids)))
        elif td.kind == "leaf":
            out.append(next(it))
        elif td.kind == "none":
            out.append(None)
        else:
            kids: List[Any] = []
            stack.append((_CLOSE, (td, kids, out)))
            stack.extend((c, kids) for c in reversed(td.children))
    return root[0]


def tree_map(f: Callable, tree: Any, *rest: Any) -> Any:
    """Apply ``f`` leaf by leaf: ``f(leaf, *corresponding leaves of rest)``.

    Parameters
    ----------
    f : callable
        Takes ``1 + len(rest)`` leaves.
    tree : pytree
    *rest : pytree
        Trees with the structure of ``tree``.

    Returns
    -------
    pytree
        ``tree``'s structure with ``f``'s results as leaves.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> params = {"w": np.array([1.0, 2.0]), "b": 0.5}
    >>> grads = {"w": np.array([0.5, -0.5]), "b": 1.0}
    >>> ta.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    {'b': 0.4, 'w': array([0.95, 2.05])}
    """
    leaves, td = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(td, [f(x, *ys) for x, *ys in zip(leaves, *others)])
