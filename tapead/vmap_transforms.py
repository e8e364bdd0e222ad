"""``vmap`` of ``grad``, ``value_and_grad``, ``jacfwd``, ``jacrev``, ``hessian``.

A transform started inside vmap's batch trace would record the stacked
lanes on its own tape, which it cannot do; instead ``vmap`` of one of these
(recognised by the ``derivative`` attribute of the function it returns) is
rewritten as the transform of a vmap, so the lanes run batched:

* ``vmap(grad(f))`` is the gradient of ``sum(vmap(f))`` with respect to
  per-lane copies of the differentiated arguments (an unmapped one is
  broadcast first): the lanes do not interact, so lane i of that gradient is
  ``grad(f)`` at lane i.  One batched recording, one sweep.
* ``vmap(jacrev(f))``: one batched recording (``vjp`` of ``vmap(f)``) swept
  once per element of one lane's output, with that element's cotangent set in
  every lane.
* ``vmap(jacfwd(f))`` (and ``hessian = jacfwd(grad)``): batched forward runs
  (``jvp`` of ``vmap(f)``), B of the K directions (elements of one lane's
  input) per run: the lanes are repeated B times and copy b of every lane
  carries direction b.  B = K (one run) for small batches; for big ones the
  run's arrays would outgrow the cache, so B shrinks to one direction a run
  (``_LANE_BUDGET``; benchmarks/bench_vmap_jacobians.py has the figures).

The rewrite applies when the differentiated arguments are mapped (or not) as
a whole and there are no keyword arguments; otherwise vmap runs the function
lane by lane (correct, slower).
"""
from __future__ import annotations

from typing import List

import numpy as np

from tapead import _core
from tapead.vmap import REWRITES, vmap
from tapead._core import Box, shape_of
from tapead._prims.reductions import sum as _sum
from tapead._prims.shape import broadcast_to, moveaxis, repeat, reshape, stack
from tapead._tree import tree_flatten, tree_map, tree_unflatten
from tapead.transforms import jvp, value_and_grad, vjp

__all__: List[str] = []


def _nums(argnums, nargs):
    nums = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
    if not nums or any(not -nargs <= k < nargs for k in nums):
        return None
    return tuple(int(k) % nargs for k in nums)


def _lanes_in_front(args, in_axes, nums, n):
    """The differentiated arguments with their lanes on axis 0 (an unmapped
    one broadcast to n copies), or None when an argument's axes are a tree."""
    new, axes = list(args), list(in_axes)
    for k in nums:
        spec = in_axes[k]
        if spec is None:
            new[k] = tree_map(lambda x: _copies(x, n), args[k])
        elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
            new[k] = tree_map(lambda x: _front(x, int(spec)), args[k])
        else:
            return None, None
        axes[k] = 0
    return new, tuple(axes)


def _copies(x, n):
    if isinstance(x, Box):
        return broadcast_to(x, (n,) + tuple(shape_of(x)))
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)
    return np.array(np.broadcast_to(x, (n,) + x.shape))


def _front(x, ax):
    ax = ax % max(len(shape_of(x)), 1)
    if ax == 0:
        return x
    return moveaxis(x, ax, 0) if isinstance(x, Box) else np.moveaxis(np.asarray(x), ax, 0)


def _scalar_lanes(out, n) -> bool:
    return all(_is_leaf_array(o) and tuple(shape_of(o)) == (n,) for o in [out])


def _is_leaf_array(x) -> bool:
    return isinstance(x, (Box, np.ndarray, float, int, np.generic))


def _of_differentiated(mapped, args, nums):
    """``mapped`` as a function of the differentiated arguments ``nums`` only
    (the others fixed at ``args``)."""
    def of_diff(*diff):
        full = list(args)
        for k, d in zip(nums, diff):
            full[k] = d
        return mapped(*full)
    return of_diff


def _grad_rewrite(f, args, in_axes, n):
    kind, fun, argnums, has_aux, holomorphic, _ = f.derivative
    nums = _nums(argnums, len(args))
    if holomorphic or nums is None or not any(
            isinstance(x, Box) for x in tree_flatten(args)[0]):
        return NotImplemented    # plain arguments: grad's own tape records the lanes
    new, axes = _lanes_in_front(args, in_axes, nums, n)
    if new is None:
        return NotImplemented
    mapped = vmap(fun, in_axes=axes)
    seen = {}

    def total(*a):
        out = mapped(*a)
        aux = None
        if has_aux:
            out, aux = out
        if not _scalar_lanes(out, n):
            raise _NotScalar()
        seen["out"] = out
        return _sum(out), (out, aux)
    try:
        (_, (value, aux)), g = value_and_grad(total, nums if len(nums) > 1 or not isinstance(
            argnums, (int, np.integer)) else nums[0], has_aux=True)(*new)
    except _NotScalar:
        return NotImplemented            # per lane: grad raises its own error there
    if kind == "grad":
        return (g, aux) if has_aux else g
    return ((value, aux), g) if has_aux else (value, g)


_grad_rewrite.needs_boxes = True     # vmap skips it for plain arrays (see the first test)


class _NotScalar(Exception):
    """The function's lanes are not scalars: grad's own error, lane by lane."""


def _jac_rewrite(f, args, in_axes, n):
    kind, fun, argnums, has_aux, holomorphic, _ = f.derivative
    nums = _nums(argnums, len(args))
    if holomorphic or nums is None:
        return NotImplemented
    new, axes = _lanes_in_front(args, in_axes, nums, n)
    if new is None:
        return NotImplemented
    single = isinstance(argnums, (int, np.integer))
    of_diff = _of_differentiated(vmap(fun, in_axes=axes), new, nums)
    diff = tuple(new[k] for k in nums)
    in_flat = [tree_flatten(d) for d in diff]
    if kind == "jacrev":
        blocks, out_td, aux = _jacrev_blocks(of_diff, diff, in_flat, has_aux, n)
    else:
        blocks, out_td, aux = _jacfwd_blocks(fun, new, axes, nums, in_flat, has_aux, n)
    per_out = []
    for row in blocks:                      # one row per output leaf
        trees = [tree_unflatten(td, row[k]) for k, (_, td) in enumerate(in_flat)]
        per_out.append(trees[0] if single else tuple(trees))
    jac = tree_unflatten(out_td, per_out)
    return (jac, aux) if has_aux else jac


def _zeros(x):
    return np.zeros(tuple(shape_of(x)), dtype=np.result_type(_core.lanes_of(x)))


def _lane_size(x) -> int:
    return int(np.prod(tuple(shape_of(x))[1:], dtype=np.int64))


def _unit(x, j):
    """Zeros of x's shape with element j of every lane set to one."""
    e = _zeros(x)
    e.reshape(e.shape[0], -1)[:, j] = 1.0
    return e


def _join(cols, n, oshape, ishape, last):
    """Columns (one per element of a lane's input, or rows per element of a lane's
    output) stacked into (n,) + oshape + ishape."""
    if any(isinstance(c, Box) for c in cols):
        st, rs = stack, reshape
    else:
        st, rs = np.stack, np.reshape
        cols = [np.asarray(c) for c in cols]
    if not cols:
        return np.zeros((n,) + oshape + ishape)
    if last:                                # columns (n,) + oshape, one per input element
        return rs(st(cols, axis=-1), (n,) + oshape + ishape)
    return rs(st(cols, axis=1), (n,) + oshape + ishape)   # rows (n,) + ishape


def _jacrev_blocks(of_diff, diff, in_flat, has_aux, n):
    out, pullback, *rest = vjp(of_diff, *diff, has_aux=has_aux)
    aux = rest[0] if has_aux else None
    out_leaves, out_td = tree_flatten(out)
    blocks = []
    for o in out_leaves:
        oshape = tuple(shape_of(o))[1:]
        rows = []
        for j in range(_lane_size(o)):
            ct = tree_unflatten(out_td, [_unit(p, j) if p is o else _zeros(p)
                                         for p in out_leaves])
            rows.append(pullback(ct))
        row = []
        for k, (leaves, _) in enumerate(in_flat):
            cts = [tree_flatten(r[k])[0] for r in rows]
            row.append([_join([c[m] for c in cts], n, oshape, tuple(shape_of(x))[1:], False)
                        for m, x in enumerate(leaves)])
        blocks.append(row)
    return blocks, out_td, aux


#: lane elements (lanes x directions x elements of one lane's inputs) one
#: forward run of ``vmap(jacfwd)`` may carry: past about this, numpy's
#: elementwise work on the run's bigger arrays measured about twice as slow
#: per element (fresh pages from the allocator, cache), more than the Python
#: saved by running fewer passes
_LANE_BUDGET = 8192


def _group_size(K, n, axes, nums):
    """How many of the K directions one forward run carries."""
    if K <= 1 or any(not (ax is None or isinstance(ax, (int, np.integer)))
                     for j, ax in enumerate(axes) if j not in nums):
        return 1                             # an argument's axes are a tree: no copies
    return int(min(K, max(1, _LANE_BUDGET // (n * K))))


def _repeated(x, ax, B):
    """Each lane of x (lane axis ax) B times in a row: lane i's copies are
    lanes i * B ... i * B + B - 1."""
    return repeat(x, B, axis=ax) if isinstance(x, Box) else np.repeat(np.asarray(x), B, axis=ax)


def _jacfwd_blocks(fun, new, axes, nums, in_flat, has_aux, n):
    """Forward runs of ``jvp(vmap(fun))``, B directions per run: the lanes are
    repeated B times and copy b of every lane carries direction b, so a run
    covers n * B lanes (all K directions in one run when they fit the lane
    budget, one run per direction for big batches)."""
    sizes = [[_lane_size(x) for x in leaves] for leaves, _ in in_flat]
    dirs = [(k, m, j) for k, ss in enumerate(sizes) for m, s in enumerate(ss)
            for j in range(s)]
    B = _group_size(len(dirs), n, axes, nums)
    args = list(new)
    if B > 1:
        args = [_repeated(a, axes[i], B) if axes[i] is not None else a
                for i, a in enumerate(new)]
    of_diff = _of_differentiated(vmap(fun, in_axes=axes), args, nums)
    diff = tuple(args[k] for k in nums)
    diff_flat = [tree_flatten(d) for d in diff]
    cols: dict = {}                          # (output leaf, k, m) -> columns, one per j
    out_leaves, out_td, aux = None, None, None
    for s in range(0, max(len(dirs), 1), B):
        group = dirs[s:s + B]
        tans = []
        for k, (leaves, td) in enumerate(diff_flat):
            per_leaf = []
            for m, y in enumerate(leaves):
                e = _zeros(y)
                lanes = e.reshape(n, B, sizes[k][m])
                for b, (k2, m2, j) in enumerate(group):
                    if k2 == k and m2 == m:
                        lanes[:, b, j] = 1.0
                per_leaf.append(e)
            tans.append(tree_unflatten(td, per_leaf))
        res = jvp(of_diff, diff, tuple(tans), has_aux=has_aux)
        out_leaves, out_td = tree_flatten(res[0])
        if has_aux:
            aux = res[2]
        for o_i, t in enumerate(tree_flatten(res[1])[0]):
            if B > 1:
                t = reshape(t, (n, B) + tuple(shape_of(t))[1:]) if isinstance(t, Box) \
                    else np.reshape(t, (n, B) + np.shape(t)[1:])
            for b, (k, m, _) in enumerate(group):
                cols.setdefault((o_i, k, m), []).append(t if B == 1 else t[:, b])
    if B > 1:
        out_leaves = [o[::B] for o in out_leaves]
        if has_aux:
            aux = tree_map(lambda x: x[::B], aux)
    blocks = []
    for o_i, o in enumerate(out_leaves):
        oshape = tuple(shape_of(o))[1:]
        row = []
        for k, (leaves, _) in enumerate(in_flat):
            row.append([_join(cols.get((o_i, k, m), []), n, oshape,
                              tuple(shape_of(x))[1:], True)
                        for m, x in enumerate(leaves)])
        blocks.append(row)
    return blocks, out_td, aux


REWRITES.update(grad=_grad_rewrite, value_and_grad=_grad_rewrite,
                jacfwd=_jac_rewrite, jacrev=_jac_rewrite)
