"""Closure conversion: the traced values a function reaches without receiving
them as arguments, found and made explicit inputs.

A checkpointed loop body or ``ta.checkpoint`` function runs again in the
reverse pass, from the inputs of its tape node alone; ``jax.closure_convert``
turns the values a function closes over into extra arguments for the same
reason.  :func:`find` walks what the function can reach (iteratively, no
recursion): its closure cells, its default arguments, the module globals its
code names, the functions, ``functools.partial`` objects, bound methods and
plain objects held there (their attributes), and collects every traced value
(a box of a transform still running) held in them, inside pytrees too.
:meth:`Closure.call` runs the function with other values in those places for
the duration of one call, and puts the originals back.
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable, List, Sequence

from tapead import _core
from tapead._core import Box
from tapead._tree import tree_flatten, tree_unflatten

__all__ = ["Closure", "find"]

#: how far :func:`find` follows attributes of plain objects (obj.a.b.c)
_OBJECT_DEPTH = 3


def _live(x) -> bool:
    """Whether box ``x`` belongs to a transform that is still running."""
    trace = _core.top_trace((x,))
    return bool(getattr(trace, "active", False))


class _Place:
    """One place that holds traced values: how to read and write it, and the
    pytree it holds (``where``: the leaves that are traced values, ``ids``:
    their positions in the closure's list of values)."""
    __slots__ = ("read", "write", "tree", "leaves", "where", "ids")

    def __init__(self, read, write, tree, leaves, where, ids):
        self.read, self.write = read, write
        self.tree, self.leaves, self.where, self.ids = tree, leaves, where, ids


class Closure:
    """The traced values a function reaches (``values``, in a fixed order, each
    once) and the places that hold them."""

    def __init__(self, places: List[_Place], values: List[Any]):
        self.places = places
        self.values = values

    def __bool__(self):
        return bool(self.values)

    @contextlib.contextmanager
    def swapped(self, values: Sequence[Any]):
        """``values[k]`` in place of ``self.values[k]`` while the block runs;
        the originals are put back afterwards, whatever happens."""
        saved = [p.read() for p in self.places]
        try:
            for p in self.places:
                new = list(p.leaves)
                for k, j in zip(p.where, p.ids):
                    new[k] = values[j]
                p.write(tree_unflatten(p.tree, new))
            yield
        finally:
            for p, v in zip(self.places, saved):
                p.write(v)

    def call(self, f: Callable, values: Sequence[Any], *args, **kwargs):
        """``f(*args, **kwargs)`` with ``values[k]`` in place of ``self.values[k]``."""
        with self.swapped(values):
            return f(*args, **kwargs)


def _cell_place(cell):
    def write(v):
        cell.cell_contents = v
    return (lambda: cell.cell_contents), write


def _dict_place(d, key):
    def write(v):
        d[key] = v
    return (lambda: d[key]), write


def _attr_place(obj, name):
    return (lambda: getattr(obj, name)), (lambda v: setattr(obj, name, v))


def _partial_place(p, k):
    """Argument ``k`` of a ``functools.partial`` (its state is replaced)."""
    def read():
        return p.args[k]

    def write(v):
        func, args, kwds, d = p.__reduce__()[2]
        args = args[:k] + (v,) + args[k + 1:]
        p.__setstate__((func, args, kwds, d))
    return read, write


def _names_of(code) -> List[str]:
    """The global names ``code`` and the code objects nested in it use."""
    out, stack = [], [code]
    while stack:
        c = stack.pop()
        out.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


def _plain_object(v) -> bool:
    return hasattr(v, "__dict__") and not isinstance(
        v, (type, types.ModuleType, types.FunctionType, types.MethodType, Closure,
            functools.partial))


def find(*fns: Callable) -> Closure:
    """The traced values the functions ``fns`` reach (see the module doc)."""
    places: List[_Place] = []
    values: List[Any] = []
    index: dict = {}
    seen: set = set()
    stack = [(f, 0) for f in reversed(fns)]

    def visit(value, read, write, depth):
        """A held value: a pytree holding traced values becomes a place; a
        function or object is walked further."""
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) or (
                depth < _OBJECT_DEPTH and _plain_object(value) and not isinstance(value, Box)):
            stack.append((value, depth + 1))
            return
        if isinstance(value, (types.ModuleType, type)):
            return
        leaves, tree = tree_flatten(value)
        where = [k for k, v in enumerate(leaves) if isinstance(v, Box) and _live(v)]
        if not where:
            return
        ids = []
        for k in where:
            key = id(leaves[k])
            if key not in index:
                index[key] = len(values)
                values.append(leaves[k])
            ids.append(index[key])
        places.append(_Place(read, write, tree, list(leaves), where, ids))

    while stack:
        obj, depth = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.MethodType):
            stack.append((obj.__func__, depth))
            if _plain_object(obj.__self__):      # self.W of a bound method
                stack.append((obj.__self__, depth))
            continue
        if isinstance(obj, functools.partial):
            stack.append((obj.func, depth))
            for k, a in enumerate(obj.args):
                visit(a, *_partial_place(obj, k), depth)
            for name in list(obj.keywords):
                visit(obj.keywords[name], *_dict_place(obj.keywords, name), depth)
            continue
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:          # an empty cell
                    continue
                visit(value, *_cell_place(cell), depth)
            if obj.__defaults__:
                for k, value in enumerate(obj.__defaults__):
                    def write(v, f=obj, k=k):
                        d = list(f.__defaults__)
                        d[k] = v
                        f.__defaults__ = tuple(d)
                    visit(value, (lambda f=obj, k=k: f.__defaults__[k]), write, depth)
            for name, value in list((obj.__kwdefaults__ or {}).items()):
                visit(value, *_dict_place(obj.__kwdefaults__, name), depth)
            g = obj.__globals__
            for name in dict.fromkeys(_names_of(obj.__code__)):
                if name in g:
                    visit(g[name], *_dict_place(g, name), depth)
            continue
        if _plain_object(obj):                   # a callable object, a model...
            call = getattr(type(obj), "__call__", None)
            if isinstance(call, types.FunctionType):
                stack.append((call, depth))
            for name, value in list(vars(obj).items()):
                visit(value, *_attr_place(obj, name), depth)
    return Closure(places, values)
