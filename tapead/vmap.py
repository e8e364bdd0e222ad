"""``ta.vmap``: map a function over an axis of its arguments.

``vmap(f)`` runs ``f`` once on all the lanes: the mapped arguments become
``Batched`` boxes of a ``BatchTrace`` (the lanes stacked along one axis; one
lane's shape), and every primitive applied to them runs once on the stacked
lanes through its vmap rule (``tapead._prims.batching``).  A Python branch
whose lanes disagree splits the batch (``BatchSplit``): the function runs
again on each group of agreeing lanes, from an explicit work list, and the
outputs are put back in lane order.  Code that reads one lane's value
(``BatchConcreteRead``) makes the function run lane by lane.  Either way
``vmap(f)`` equals the loop over the lanes.  ``vmap`` of ``jacfwd``/
``jacrev``/``hessian`` (and of ``grad`` over boxes of outer transforms) is
rewritten by ``tapead.vmap_transforms`` as the transform of a vmap.

``in_axes``/``out_axes`` follow JAX: an int, None, or a pytree prefix of the
arguments/outputs whose leaves are ints (negative ones count from the end) or
None (not mapped).  An output that does not depend on the lanes is broadcast
along its ``out_axes`` like JAX; ``out_axes=None`` asks for an output that is
the same in every lane, and is refused when the lanes differ.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import numpy as np

from tapead import _core
from tapead._core import Box, shape_of
from tapead._prims import batching
from tapead._tree import LEAF, TreeDef, tree_flatten, tree_unflatten
from tapead.program import derivative_of
from tapead.vmap_axes import (arg_names as _arg_names, broadcast_prefix as _broadcast_prefix,
                               check_axis as _check_axis,
                               is_array_like as _is_array_like, is_axis_leaf as _is_axis_leaf)
from tapead.vmap_lanes import (Placer, broadcast_lanes, concat_lanes, finish, lane_rank,
                               lane_template, move_axis, run_batched, run_groups,
                               same_everywhere, scatter_lanes, shared_output, stack_lanes,
                               take_lanes, to_front)

__all__ = ["vmap", "vmap_stats"]

_EMPTY_DICT_TD = tree_flatten({})[1]


class _Mapped:
    """The callable ``vmap`` returns."""

    def __init__(self, f, in_axes, out_axes, axis_size, chunk_size):
        self.f = f
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.axis_size = axis_size
        self.chunk_size = chunk_size
        self._names = {}
        functools.update_wrapper(self, f, updated=())

    def __call__(self, *args, **kwargs):
        with _core.pooled():          # the lanes' intermediates reuse the last call's memory
            return self._call(args, kwargs)

    def _call(self, args, kwargs):
        """Run the mapped function: a rewritten derivative transform, zero lanes,
        or the lanes in groups (``tapead.vmap_lanes``), outputs joined."""
        f = self.f
        in_axes, leaves, axes, in_td, kw_td, n_pos, whole, n = self._arguments(args, kwargs)
        chunk = self.chunk_size
        if chunk is not None and (not isinstance(chunk, (int, np.integer)) or chunk < 1):
            raise ValueError(f"vmap: chunk_size={chunk!r}; it must be a positive int or None")

        def call(inputs):
            pos = tree_unflatten(in_td, inputs[:n_pos])
            if whole:        # unmapped arguments are passed as they are, not rebuilt
                pos = tuple(args[j] if j in whole else a for j, a in enumerate(pos))
            return f(*pos, **tree_unflatten(kw_td, inputs[n_pos:]))

        rewrite = _rewrite_of(f) if n > 0 and not kwargs else None
        if getattr(rewrite, "needs_boxes", False) and not any(isinstance(x, Box)
                                                              for x in leaves):
            rewrite = None      # plain arrays: the transform's own tape records the lanes
        if rewrite is not None:
            out = self._rewritten(rewrite, f, args, in_axes, leaves, axes, in_td, n, chunk)
            if out is not NotImplemented:
                return out
        if n == 0:
            # the batched run on zero lanes gives the output shapes; where it
            # cannot (a branch, a value read, numpy refusing an empty stack),
            # f runs once on a stand-in lane of ones
            try:
                with np.errstate(all="ignore"):
                    r = run_batched(call, leaves, axes, None, 0)
            except Exception:
                r = ("failed",)
            if r[0] == "done":
                return self._join([(np.arange(0), r[1], r[2], r[3])], 0)
            return self._zero_lanes(f, leaves, axes, in_td, n_pos, kw_td, whole, args)
        placer = Placer(n) if type(self.out_axes) is int else None
        groups = run_groups(call, leaves, axes, n, chunk, placer)
        return self._join(groups, n, placer)

    def _arguments(self, args, kwargs):
        """The arguments flattened: ``in_axes`` one entry per positional
        argument, the leaves and their mapped axes (checked), the trees to
        rebuild them, the positional arguments passed whole, the lane count."""
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
        names = self._names.get(len(args))
        if names is None:                  # inspect.signature costs more than a lane
            names = self._names[len(args)] = _arg_names(f, len(args))
        specs, leaves, where, tds, whole = [], [], [], [], set()
        for i, a in enumerate(args):          # each argument flattened once
            ls, td = tree_flatten(a)
            spec = in_axes[i]
            if _is_axis_leaf(spec):
                specs.extend([spec] * len(ls))
                if spec is None:
                    whole.add(i)
            else:
                own = _broadcast_prefix(spec, a, f"in_axes for {names[i]}")
                specs.extend(own)
                if all(ax is None for ax in own):
                    whole.add(i)
            leaves.extend(ls)
            tds.append(td)
            where.extend([names[i]] * len(ls))
        if kwargs:
            kw_leaves, kw_td = tree_flatten(kwargs)   # keyword arguments map over axis 0
        else:
            kw_leaves, kw_td = [], _EMPTY_DICT_TD
        specs.extend([0] * len(kw_leaves))
        leaves.extend(kw_leaves)
        where.extend(["a keyword argument"] * len(kw_leaves))
        in_td = TreeDef("tuple", None, tuple(tds), flat=all(td is LEAF for td in tds))
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
        return in_axes, leaves, axes, in_td, kw_td, n_pos, whole, n

    def _rewritten(self, rewrite, f, args, in_axes, leaves, axes, in_td, n, chunk):
        """vmap of a derivative transform (``grad``, ``jacfwd``...): the transform of
        a vmap, whose output has the lanes in front; chunk by chunk."""
        starts = [0] if chunk is None or chunk >= n else list(range(0, n, chunk))
        parts = []
        for s in starts:
            if len(starts) == 1:
                part_args = args
            else:
                idx = np.arange(s, min(s + chunk, n))
                lanes = [x if ax is None else take_lanes(x, idx, ax)
                         for x, ax in zip(leaves, axes)]
                part_args = tree_unflatten(in_td, lanes)
                part_args = tuple(args[j] if in_axes[j] is None else a
                                  for j, a in enumerate(part_args))
            out = rewrite(f, part_args, in_axes, len(idx) if len(starts) > 1 else n)
            if out is NotImplemented:
                return out
            parts.append(out)
        outs, td = tree_flatten(parts[0])
        if len(parts) > 1:
            cols = [concat_lanes([tree_flatten(p)[0][k] for p in parts]) for k in range(len(outs))]
        else:
            cols = outs
        idx = np.arange(n)
        return self._join([(idx, td, parts[0], [("lanes", c) for c in cols])], n)

    def _zero_lanes(self, f, leaves, axes, in_td, n_pos, kw_td, whole, args):
        """Zero lanes: ``f`` runs once on a stand-in lane of ones to learn the
        output shapes."""
        lane = [x if ax is None else lane_template(to_front(x, ax), 0)
                for x, ax in zip(leaves, axes)]
        pos = tree_unflatten(in_td, lane[:n_pos])
        if whole:
            pos = tuple(args[j] if j in whole else a for j, a in enumerate(pos))
        with np.errstate(all="ignore"):
            template = f(*pos, **tree_unflatten(kw_td, lane[n_pos:]))
        outs, out_td = tree_flatten(template)
        return self._assemble([[o] for o in outs], out_td, template, empty=True)

    def _join(self, groups, n, placer=None):
        """The outputs of every group of lanes, in lane order, lane axes at
        ``out_axes`` (columns a ``Placer`` already wrote in lane order are
        taken as they are)."""
        idx0, td0, first0, cols0 = groups[0]
        out_axes = self.out_axes
        if len(groups) == 1 and type(out_axes) is int and out_axes == 0:
            # the common case: one batched run, lanes in front where they are
            results = []
            for k, (kind, v) in enumerate(cols0):
                if kind != "lanes":
                    if not _is_array_like(v):
                        raise TypeError(f"vmap: output {k} of the function is {v!r}, not an "
                                        "array; vmap stacks array outputs only")
                    v = broadcast_lanes(v, len(idx0))
                results.append(finish(v))
            return tree_unflatten(td0, results)
        for idx, td, _, _ in groups[1:]:
            if td != td0:
                raise ValueError(f"vmap: the function returned differently structured "
                                 f"outputs for different lanes ({td0} and {td}); every lane "
                                 "must return the same pytree structure")
        if placer is not None and out_axes == 0 and not placer.raw and \
                len(placer.bufs) == len(cols0):
            # every output placed in lane order by the groups as they finished
            return tree_unflatten(td0, [placer.bufs[k] for k in range(len(cols0))])
        if isinstance(out_axes, list) and not isinstance(first0, list):
            out_axes = tuple(out_axes)
        if _is_axis_leaf(out_axes):
            specs = [out_axes] * len(groups[0][3])
        else:
            specs = _broadcast_prefix(out_axes, first0, "out_axes")
        order = np.concatenate([g[0] for g in groups]) if len(groups) > 1 else None
        if order is not None and np.array_equal(order, np.arange(n)):
            order = None
        results = []
        for k, ax in enumerate(specs):
            entries = [(g[0], g[3][k]) for g in groups]
            if placer is not None:
                col = placer.column(k, entries)
                if col is not None:
                    ax = _check_axis(int(ax), col.ndim, f"output {k} (out_axes)")
                    results.append(finish(move_axis(col, 0, ax)))
                    continue
            kind0, v0 = entries[0][1]
            if not _is_array_like(v0):
                raise TypeError(f"vmap: output {k} of the function is {v0!r}, not an "
                                "array; vmap stacks array outputs only")
            if ax is None:
                results.append(shared_output(entries, k))
                continue
            ax = _check_axis(int(ax), lane_rank(kind0, v0) + 1, f"output {k} (out_axes)")
            cols = [v if kind == "lanes" else broadcast_lanes(v, len(idx))
                    for idx, (kind, v) in entries]
            if order is not None and not any(isinstance(c, Box) for c in cols):
                col = scatter_lanes([g[0] for g in groups], cols, n, k)
            else:
                col = cols[0] if len(cols) == 1 else concat_lanes(cols)
                if order is not None:
                    col = take_lanes(col, np.argsort(order, kind="stable"), 0)
            results.append(finish(move_axis(col, 0, ax)))
        return tree_unflatten(td0, results)

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
                if not same_everywhere(col):
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
                results.append(stack_lanes(col, ax))
        return tree_unflatten(out_td, results)


#: kind -> rewrite(f, args, in_axes, n) of a derivative transform under vmap,
#: registered by tapead.vmap_transforms (a higher layer: it knows grad and
#: jacfwd); returns the output with the lanes in front, or NotImplemented
REWRITES: dict = {}


def _rewrite_of(f):
    """The rewrite of ``f`` when ``f`` is the function a derivative transform
    returned (its ``derivative`` attribute says which)."""
    d = derivative_of(f)
    return REWRITES.get(d.kind) if d is not None else None


def vmap_stats(reset: bool = False) -> dict:
    """What ``vmap`` did since the last reset, as a dict of counts.

    ``splits``: how many times a batch was split in two because its lanes
    disagreed on a Python branch; ``per_lane_calls``: primitive calls that
    ran once per lane (no vmap rule); ``per_lane_runs``: how many times the
    whole function ran lane by lane because code read one lane's value.

    Parameters
    ----------
    reset : bool
        Set the counts back to zero (after reading them).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> _ = ta.vmap_stats(reset=True)
    >>> f = lambda x: x * 2.0 if x > 0 else -x
    >>> ta.vmap(f)(np.array([1.0, -2.0, 3.0]))
    array([2., 2., 6.])
    >>> ta.vmap_stats()["splits"]
    1
    """
    out = dict(batching.STATS)
    if reset:
        batching.reset_stats()
    return out


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
        Run this many lanes at a time and concatenate the outputs (less
        working memory, same numbers).

    Returns
    -------
    callable
        Takes the arguments of ``f`` with an extra mapped axis of size ``n``
        (every mapped argument the same ``n``); returns ``f``'s outputs with
        an axis of size ``n`` inserted at ``out_axes``: numpy arrays at top
        level, traced arrays under an enclosing transform.

    Notes
    -----
    ``f`` runs once, on the stacked lanes: inside it a mapped argument is a
    batched value whose ``shape`` is one lane's, and each tapead operation
    runs once for all the lanes.  A Python ``if``/``while`` on a batched
    value whose lanes disagree splits the batch and runs ``f`` on each group
    (``vmap_stats()["splits"]`` counts them), so the result is exactly that
    of the loop over the lanes.  Code that reads one lane's value
    (``float(x)``, an index, a value-dependent decision inside a tapead
    function) makes ``f`` run lane by lane; a primitive without a vmap rule
    runs once per lane with a one-time warning.  ``TAPEAD_STRICT_VMAP=1``
    turns both fallbacks into ``VmapFallbackError``.  With zero lanes the
    output shapes come from a batched run on the empty stack (or one run on
    a stand-in lane of ones).

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
