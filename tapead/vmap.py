"""``ta.vmap``: map a function over an axis of its arguments.

``vmap(f)`` runs ``f`` on each lane of the mapped axis and stacks the lanes'
outputs.  The lanes run one after another (one call of ``f`` per lane), so
``vmap(f)`` equals the Python loop over the lanes for every eager program:
Python ``if``/``while`` on values whose lanes disagree, data-dependent shapes
inside ``f`` and concrete-value inspection all behave as in the loop.  The
slicing of the inputs and the stacking of the outputs are tapead operations,
so ``vmap`` composes with every transform in either order
(``grad(vmap(f))``, ``vmap(grad(f))``, ``vmap(jacfwd(f))``,
``vmap(hessian(f))``, ``vmap(vmap(f))``).

``in_axes``/``out_axes`` follow JAX: an int, None, or a pytree prefix of the
arguments/outputs whose leaves are ints (negative ones count from the end) or
None (not mapped).  An output that does not depend on the lanes is broadcast
along its ``out_axes`` like JAX; ``out_axes=None`` asks for an output that is
the same in every lane, and is refused when the lanes differ.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, List, Optional

import numpy as np

from tapead import _core
from tapead._core import Box, shape_of
from tapead._prims.shape import stack
from tapead._tree import _node_children, tree_flatten, tree_unflatten
from tapead.errors import ShapeError

__all__ = ["vmap"]


def _is_axis_leaf(spec) -> bool:
    return spec is None or (isinstance(spec, (int, np.integer)) and not isinstance(spec, bool))


def _broadcast_prefix(spec, tree, what: str) -> List[Any]:
    """One axis spec per leaf of ``tree``: ``spec`` is a pytree prefix of ``tree``
    whose leaves (ints or None) apply to every leaf below them."""
    out: List[Any] = []
    stack = [(spec, tree, what)]
    while stack:
        s, t, where = stack.pop()
        if _is_axis_leaf(s):
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
                f"it maps ({_describe(t)}); give an int/None for the whole value, or a "
                "tree with one entry per element of it")
        for j in range(len(ks[2]) - 1, -1, -1):
            stack.append((ks[2][j], kt[2][j], f"{where}[{_key(ks, j)}]"))
    return out


def _key(kind, j):
    return repr(kind[1][j]) if kind[0] == "dict" else str(j)


def _describe(t) -> str:
    kt = _node_children(t)
    if kt is None:
        return f"an array of shape {tuple(shape_of(t))}" if _is_array_like(t) else repr(t)
    if kt[0] == "dict":
        return f"a dict with keys {list(kt[1])}"
    return f"a {type(t).__name__} of {len(kt[2])}"


def _is_array_like(x) -> bool:
    return isinstance(x, (Box, np.ndarray, np.generic, int, float, complex))


def _arg_names(f, n: int) -> List[str]:
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


def _lane(x, axis: int, i: int):
    """Lane ``i`` of ``x`` (a tapead index along ``axis`` for boxes; for numpy
    arrays, whose mapped axis was moved first, a copy, so that ``f`` writing
    into its argument cannot change other lanes)."""
    if isinstance(x, Box):
        return x[(slice(None),) * axis + (i,)]
    lane = x[i]
    return lane.copy() if type(lane) is np.ndarray else lane


def _lane_template(x, axis: int):
    """A stand-in lane (ones) when the mapped axis has size 0 (numpy arrays
    have it first already)."""
    if isinstance(x, Box):
        shape, dtype = tuple(shape_of(x)), np.result_type(_core.concrete(x))
        return np.ones(shape[:axis] + shape[axis + 1:], dtype=dtype)
    return np.ones(x.shape[1:], dtype=x.dtype)


def _stack(lanes: list, axis: int):
    if any(isinstance(v, Box) for v in lanes):
        return stack(lanes, axis=axis)
    return np.stack([np.asarray(v) for v in lanes], axis=axis)


def _same_everywhere(lanes: list) -> bool:
    first = lanes[0]
    if isinstance(first, Box) or any(isinstance(v, Box) for v in lanes):
        return all(v is first for v in lanes)
    a = np.asarray(first)
    return all(np.shape(v) == a.shape and np.array_equal(np.asarray(v), a, equal_nan=True)
               for v in lanes[1:])


def _check_axis(ax, ndim: int, where: str) -> int:
    if not -ndim <= ax < ndim:
        raise ShapeError(f"vmap: {where} is mapped over axis {ax}, but it has rank {ndim}; "
                         f"an axis between {-ndim} and {ndim - 1} is needed"
                         + (" (a scalar cannot be mapped: use in_axes None for it)"
                            if ndim == 0 else ""))
    return ax % ndim


class _Mapped:
    """The callable ``vmap`` returns."""

    def __init__(self, f, in_axes, out_axes, axis_size, chunk_size):
        self.f = f
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.axis_size = axis_size
        self.chunk_size = chunk_size
        functools.update_wrapper(self, f, updated=())

    def __call__(self, *args, **kwargs):
        f = self.f
        in_axes = self.in_axes
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)
        if isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise ValueError(
                    f"vmap: in_axes has {len(in_axes)} entries but the function was called "
                    f"with {len(args)} positional arguments; give one axis (int or None) "
                    "per positional argument, or a single int/None for all of them")
        elif not _is_axis_leaf(in_axes):
            raise TypeError(f"vmap: in_axes={in_axes!r}; use an int, None, or a tuple with "
                            "one entry per positional argument")
        else:
            in_axes = (in_axes,) * len(args)
        names = _arg_names(f, len(args))
        specs, leaves, where = [], [], []
        for i, a in enumerate(args):
            ls = tree_flatten(a)[0]
            specs.extend(_broadcast_prefix(in_axes[i], a, f"in_axes for {names[i]}"))
            leaves.extend(ls)
            where.extend([names[i]] * len(ls))
        kw_leaves, kw_td = tree_flatten(kwargs)   # keyword arguments map over axis 0
        specs.extend([0] * len(kw_leaves))
        leaves.extend(kw_leaves)
        where.extend(["a keyword argument"] * len(kw_leaves))
        in_td = tree_flatten(args)[1]
        whole, start = set(), 0
        for j, a in enumerate(args):
            stop = start + len(tree_flatten(a)[0])
            if all(ax is None for ax in specs[start:stop]):
                whole.add(j)
            start = stop
        n_pos = len(leaves) - len(kw_leaves)

        axes, sizes = [], []
        for x, ax, w in zip(leaves, specs, where):
            if ax is None:
                axes.append(None)
                continue
            if not _is_array_like(x):
                raise TypeError(f"vmap: {w} is mapped but holds {x!r}, not an array; "
                                "use in_axes None for it")
            ax = _check_axis(int(ax), len(shape_of(x)), w)
            axes.append(ax)
            sizes.append((w, ax, shape_of(x)[ax]))
        n = self.axis_size
        if n is not None and (not isinstance(n, (int, np.integer)) or n < 0):
            raise ValueError(f"vmap: axis_size={n!r}; it must be a non-negative int")
        if sizes:
            distinct = sorted({s for _, _, s in sizes})
            if len(distinct) > 1 or (n is not None and distinct[0] != n):
                detail = ", ".join(f"{w} has size {s} along axis {ax}" for w, ax, s in sizes)
                extra = f" and axis_size={n}" if n is not None else ""
                raise ValueError(f"vmap got inconsistent sizes for the mapped axes: {detail}"
                                 f"{extra}; every mapped argument needs the same size")
            n = distinct[0]
        elif n is None:
            raise ValueError("vmap: every in_axes entry is None, so there is no axis to map "
                             "over; map at least one argument or pass axis_size=")
        chunk = self.chunk_size
        if chunk is not None and (not isinstance(chunk, (int, np.integer)) or chunk < 1):
            raise ValueError(f"vmap: chunk_size={chunk!r}; it must be a positive int or None")

        # numpy leaves with the mapped axis first, so a lane is one index
        front = [x if ax is None or isinstance(x, Box) else np.moveaxis(np.asarray(x), ax, 0)
                 for x, ax in zip(leaves, axes)]

        def call_lane(i):
            lane = [x if ax is None else
                    (_lane(x, ax, i) if i is not None else _lane_template(x, ax))
                    for x, ax in zip(front, axes)]
            pos = tree_unflatten(in_td, lane[:n_pos])
            if whole:        # unmapped arguments are passed as they are, not rebuilt
                pos = tuple(args[j] if j in whole else a for j, a in enumerate(pos))
            kw = tree_unflatten(kw_td, lane[n_pos:])
            return f(*pos, **kw)

        if n == 0:
            with np.errstate(all="ignore"):
                template = call_lane(None)
            outs, out_td = tree_flatten(template)
            return self._assemble([[o] for o in outs], out_td, template, empty=True)
        lane_outs, out_td, first = None, None, None
        for i in range(n):
            out = call_lane(i)
            outs, td = tree_flatten(out)
            if lane_outs is None:
                lane_outs, out_td, first = [[] for _ in outs], td, out
            elif td != out_td:
                raise ValueError(f"vmap: the function returned differently structured outputs "
                                 f"in lane 0 ({out_td}) and lane {i} ({td}); every lane must "
                                 "return the same pytree structure")
            for col, o in zip(lane_outs, outs):
                col.append(o)
        return self._assemble(lane_outs, out_td, first, empty=False)

    def _assemble(self, columns, out_td, first, empty):
        out_axes = self.out_axes
        if isinstance(out_axes, list) and not isinstance(first, list):
            out_axes = tuple(out_axes)
        specs = _broadcast_prefix(out_axes, first, "out_axes")
        results = []
        for k, (col, ax) in enumerate(zip(columns, specs)):
            if not _is_array_like(col[0]):
                raise TypeError(f"vmap: output {k} of the function is {col[0]!r}, not an "
                                "array; vmap stacks array outputs only")
            if ax is None:
                if empty:
                    results.append(np.asarray(col[0]) if not isinstance(col[0], Box) else col[0])
                    continue
                if not _same_everywhere(col):
                    raise ValueError(
                        f"vmap: out_axes is None for output {k}, but that output differs "
                        "between lanes; give it an int out_axes to stack the lanes, or "
                        "make it not depend on the mapped arguments")
                results.append(col[0] if isinstance(col[0], Box) else np.asarray(col[0]))
                continue
            ax = _check_axis(int(ax), len(shape_of(col[0])) + 1, f"output {k} (out_axes)")
            if empty:
                proto = np.asarray(_core.concrete(col[0]))
                shape = proto.shape[:ax] + (0,) + proto.shape[ax:]
                results.append(np.zeros(shape, dtype=proto.dtype))
            else:
                results.append(_stack(col, ax))
        return tree_unflatten(out_td, results)


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: Optional[int] = None,
         chunk_size: Optional[int] = None) -> Callable:
    """Map ``f`` over an axis of its arguments: ``vmap(f)(x)[i] == f(x[i])``.

    Parameters
    ----------
    f : callable
        The function of one lane.
    in_axes : int, None or pytree of them
        The mapped axis of each positional argument (a prefix of the
        arguments' tree: one int/None for all of them, or a tuple with one
        entry per argument, themselves pytree prefixes).  None: not mapped,
        every lane sees the whole value.  Negative axes count from the end.
        Keyword arguments are mapped over axis 0.
    out_axes : int, None or pytree of them
        Where the lane axis goes in each output (a prefix of the output
        tree).  None: the output is the same in every lane and is returned
        once (refused when the lanes differ).
    axis_size : int, optional
        The number of lanes; needed when no argument is mapped.
    chunk_size : int, optional
        Accepted for compatibility with chunked mapping; lanes run one at a
        time, so the peak memory is already one lane's working set.

    Returns
    -------
    callable
        Takes the arguments of ``f`` with an extra mapped axis of size ``n``
        (every mapped argument the same ``n``); returns ``f``'s outputs with
        an axis of size ``n`` inserted at ``out_axes``: numpy arrays at top
        level, traced arrays under an enclosing transform.

    Notes
    -----
    ``f`` runs once per lane, so Python control flow whose lanes disagree
    (``if x > 0`` on a mapped ``x``) gives exactly what the loop over the
    lanes gives.  With zero lanes ``f`` runs once on a stand-in lane of ones
    to learn the output shapes.

    Examples
    --------
    Per-example gradients:

    >>> import numpy as np, tapead as ta
    >>> loss = lambda w, x: ta.numpy.sum((w * x) ** 2)
    >>> ta.vmap(ta.grad(loss), in_axes=(None, 0))(np.array([1.0, 2.0]),
    ...                                           np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([[2., 0.],
           [0., 4.]])
    """
    if not callable(f):
        raise TypeError(f"vmap: the first argument must be a function, got {f!r}")
    return _Mapped(f, in_axes, out_axes, axis_size, chunk_size)
