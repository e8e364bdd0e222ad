"""Pytrees: nested tuples, lists, dicts, namedtuples, dataclasses and the
container types registered with ``register_pytree_node``, with arrays and
numbers as leaves.  Flattening and unflattening are iterative (no recursion
limit)."""
from __future__ import annotations

import itertools

import dataclasses
from typing import Any, Callable, List, Tuple

import numpy as np

from tapead._core import Batched, Dual, Tracer, classify_leaves

#: the leaf types met most, answered before the container checks
_LEAF_TYPES = frozenset({np.ndarray, float, int, complex, bool, np.float64, np.float32,
                         np.int64, np.complex128, Tracer, Dual, Batched})

#: type -> (flatten(node) -> (children, aux_data), unflatten(aux_data, children) -> node)
_REGISTRY: dict = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """Make instances of ``nodetype`` pytree nodes (same signature as JAX's).

    Parameters
    ----------
    nodetype : type
        The container class.
    flatten_func : callable
        ``flatten_func(node) -> (children, aux_data)``: the children (an iterable
        of pytrees) and hashable, comparable static data.
    unflatten_func : callable
        ``unflatten_func(aux_data, children) -> node``.

    Examples
    --------
    >>> import tapead as ta
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> ta.tree_util.register_pytree_node(
    ...     Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
    >>> g = ta.grad(lambda p: p.a * p.b)(Pair(2.0, 3.0))
    >>> float(g.a), float(g.b)
    (3.0, 2.0)
    """
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node: {nodetype!r} is not a class")
    if not (callable(flatten_func) and callable(unflatten_func)):
        raise TypeError("register_pytree_node(nodetype, flatten_func, unflatten_func): "
                        "both functions must be callable")
    if nodetype in (tuple, list, dict, type(None)):
        raise ValueError(f"register_pytree_node: {nodetype.__name__} is already a pytree node")
    _REGISTRY[nodetype] = (flatten_func, unflatten_func)


def _node_children(node):
    """(kind, meta, children) for a container node, or None for a leaf."""
    t = type(node)
    if t in _LEAF_TYPES:
        return None
    if t is tuple:
        return "tuple", None, node
    if t is list:
        return "list", None, node
    if t is dict:
        keys = sorted(node)
        return "dict", tuple(keys), [node[k] for k in keys]
    if node is None:
        return "none", None, ()
    reg = _REGISTRY.get(t)
    if reg is not None:
        children, aux = reg[0](node)
        return "custom", (t, aux), list(children)
    if isinstance(node, tuple) and hasattr(t, "_fields"):
        return "namedtuple", t, node
    if isinstance(node, dict):
        keys = sorted(node)
        return "dict", tuple(keys), [node[k] for k in keys]
    if isinstance(node, (tuple, list)):
        return ("tuple" if isinstance(node, tuple) else "list"), None, node
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        names = tuple(f.name for f in dataclasses.fields(node))
        return "dataclass", (t, names), [getattr(node, n) for n in names]
    return None


def _rebuild(td, kids):
    kind = td.kind
    if kind == "tuple":
        return tuple(kids)
    if kind == "list":
        return kids
    if kind == "dict":
        return dict(zip(td.meta, kids))
    if kind == "namedtuple":
        return td.meta(*kids)
    if kind == "dataclass":
        cls, names = td.meta
        obj = object.__new__(cls)
        for n, v in zip(names, kids):
            object.__setattr__(obj, n, v)
        return obj
    if kind == "custom":
        cls, aux = td.meta
        return _REGISTRY[cls][1](aux, kids)
    raise AssertionError(kind)


class TreeDef:
    """The structure of a pytree (its leaves removed)."""

    __slots__ = ("kind", "meta", "children", "flat", "all_float", "all_f64")

    def __init__(self, kind, meta, children, flat=False):
        self.kind = kind          # "leaf", "tuple", "list", "dict", "none", "namedtuple",
        #                           "dataclass", "custom"
        self.meta = meta          # dict keys (sorted); the class (and field names or
        #                           aux data) for the other containers
        self.children = children
        self.flat = flat          # a tuple/list whose children are all leaves
        self.all_float = False    # set by tree_flatten: every leaf a Python float
        self.all_f64 = False      # every leaf a np.float64 scalar (``list(array)``)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeDef):
            return False
        if self.flat and other.flat:        # children all leaves: only their count differs
            return (self.kind == other.kind and self.meta == other.meta
                    and len(self.children) == len(other.children))
        return (self.kind == other.kind and self.meta == other.meta
                and self.children == other.children)

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
    if type(tree) in _LEAF_TYPES:
        return [tree], LEAF
    if type(tree) is dict:
        keys = sorted(tree)
        values = [tree[k] for k in keys]
        kind = classify_leaves(values)
        if kind:
            td = TreeDef("dict", tuple(keys), (LEAF,) * len(keys), flat=True)
            td.all_float = kind == 2
            td.all_f64 = kind == 3
            return values, td
    elif type(tree) in (list, tuple):
        kind = classify_leaves(tree)
        if kind:
            # fast path: a flat sequence of numbers/arrays
            td = TreeDef("tuple" if type(tree) is tuple else "list", None,
                         (LEAF,) * len(tree), flat=True)
            td.all_float = kind == 2
            td.all_f64 = kind == 3
            return list(tree), td
    leaves: List[Any] = []
    # build with an explicit stack of (node, parent_children_list)
    root_holder: list = []
    stack = [(tree, root_holder)]
    while stack:
        node, out = stack.pop()
        spec = _node_children(node)
        if spec is None:
            leaves.append(node)
            out.append(LEAF)
            continue
        kind, meta, kids = spec
        if kind == "none":
            out.append(TreeDef("none", None, ()))
            continue
        children: list = []
        out.append(TreeDef(kind, meta, children))
        for child in reversed(kids):
            stack.append((child, _Slot(children)))
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
            if t.kind in _FLAT_KINDS and all(c is LEAF for c in t.children):
                t.flat = True         # a plain container of leaves (unflattened in one step)
    return td


_FLAT_KINDS = ("tuple", "list", "dict")


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
            parent.append(_rebuild(node, kids))
        elif td.kind == "leaf":
            out.append(next(it))
        elif td.kind == "none":
            out.append(None)
        elif td.flat:                     # a flat container: its leaves in one step
            out.append(tree_unflatten(td, list(itertools.islice(it, len(td.children)))))
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


def tree_leaves(tree: Any) -> List[Any]:
    """The leaves of ``tree`` in flattening order (dict keys sorted).

    >>> import tapead as ta
    >>> ta.tree_util.tree_leaves({"b": [2.0, 3.0], "a": 1.0})
    [1.0, 2.0, 3.0]
    """
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> TreeDef:
    """The structure of ``tree`` (its ``TreeDef``): equal for trees that differ
    only in their leaves.

    >>> import tapead as ta
    >>> ta.tree_util.tree_structure((1.0, [2.0])) == ta.tree_util.tree_structure((5.0, [6.0]))
    True
    """
    return tree_flatten(tree)[1]
