"""tapead on Dask: data-parallel gradients, vmap over chunks, sparse Jacobians.

Dask is the engine: the functions here build Dask task graphs whose tasks run
tapead (``ta.jit``-recorded once per block shape on each worker) and let
Dask schedule them -- on threads without a client, on a ``LocalCluster`` or
on a cluster reached with ``dask.distributed.Client(address)``; the code is
the same.

* :func:`value_and_grad`, :func:`hvp` -- a loss summed (``reduction="sum"``)
  or averaged (``reduction="mean"``) over samples, evaluated block by block
  along the sample axis of dask-array data and reduced in a tree on the
  workers.
* :func:`vmap` -- ``ta.vmap`` over the chunks of a dask array: a lazy dask
  array (or a pytree of them), computed block by block (out of core).
* :func:`sparse_jacobian` -- ``ta.sparse_jacobian`` whose colour groups are
  evaluated as tasks.

Functions travel to the workers by pickle: a ``ta.jit`` function pickles as
its function and a token, and each worker process keeps one per token, so a
worker records each input signature once however many tasks it runs.
Needs the ``dask`` extra: ``pip install "tapead[dask]"``.
"""
from __future__ import annotations

import pickle
import string
from typing import Any, Callable, List, Sequence, Tuple, Union

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as exc:                                  # pragma: no cover
    raise ImportError("tapead.dask needs Dask (dask.array and dask.distributed); "
                      "install them with:  pip install \"tapead[dask]\"") from exc

from tapead.coloring import column_coloring, jacobian_recovery
from tapead.jit import jit as _jit
from tapead.sparse import jacobian_sparsity
from tapead.transforms import hvp as _hvp, jvp as _jvp, value_and_grad as _value_and_grad
from tapead.tree_util import tree_flatten, tree_unflatten
from tapead.vmap import vmap as _vmap

__all__ = ["value_and_grad", "hvp", "vmap", "sparse_jacobian"]

ArgNums = Union[int, Sequence[int]]


# ---------------------------------------------------------------------------
# checks made on the client, before any work is sent
# ---------------------------------------------------------------------------

def _check_picklable(obj, what: str) -> None:
    """Raise a TypeError naming ``what`` if ``obj`` cannot travel to a worker
    (Dask pickles with pickle, falling back to cloudpickle)."""
    try:
        pickle.dumps(obj)
        return
    except Exception:                       # noqa: BLE001 -- cloudpickle may still manage
        pass
    try:
        import cloudpickle                  # external: installed with distributed
    except ImportError:                     # pragma: no cover
        cloudpickle = None
    if cloudpickle is not None:
        try:
            cloudpickle.dumps(obj)
            return
        except Exception as exc:            # noqa: BLE001
            err = exc
    else:                                   # pragma: no cover
        err = None
    raise TypeError(
        f"tapead.dask: {what} cannot be sent to the workers: it does not pickle "
        f"({type(err).__name__}: {err}). A function closing over an open file, a lock, "
        "a socket or a generator cannot travel; pass such values as arguments, or "
        "define the function at module level")


def _sample_chunks(data: List[Tuple[int, Any, int]], fname: str) -> Tuple[int, ...]:
    """The chunks along the sample axis, the same for every data argument.

    ``data`` holds (argument position, dask array, sample axis)."""
    first = None
    for pos, x, ax in data:
        if not isinstance(x, da.Array):
            raise TypeError(
                f"tapead.dask.{fname}: argument {pos} is a {type(x).__name__}, but it is a "
                "data argument and must be a dask array chunked along its sample axis, "
                "e.g. da.from_array(X, chunks=(10_000, -1)); pass constants through a "
                "closure or name the data arguments explicitly")
        if x.ndim <= ax:
            raise ValueError(f"tapead.dask.{fname}: argument {pos} has {x.ndim} dimensions, "
                             f"so it has no sample axis {ax}")
        chunks = x.chunks[ax]
        if any(np.isnan(c) for c in chunks):
            raise ValueError(
                f"tapead.dask.{fname}: argument {pos} has unknown chunk sizes along its "
                "sample axis; call x.compute_chunk_sizes() first")
        if first is None:
            first = (pos, chunks)
        elif chunks != first[1]:
            raise ValueError(
                f"tapead.dask.{fname}: the data arguments are chunked differently along "
                f"the sample axis: argument {first[0]} has blocks {first[1]}, argument "
                f"{pos} has {chunks}. Rechunk them alike, e.g. "
                f"y = y.rechunk({{{ax}: X.chunks[0]}})")
    if first is None:
        raise TypeError(f"tapead.dask.{fname}: no data argument: pass the data as dask "
                        "arrays (da.from_array(X, chunks=...))")
    return first[1]


def _one_chunk_elsewhere(x, ax: int):
    """``x`` with a single chunk along every axis but the sample axis."""
    if all(len(c) == 1 for i, c in enumerate(x.chunks) if i != ax):
        return x
    return x.rechunk({i: -1 for i in range(x.ndim) if i != ax})


def _block_table(chunks: Sequence[int]):
    """The sample indices as a dask array chunked like the data (made on the
    workers), so a task can say which block it ran."""
    return da.arange(int(sum(chunks)), chunks=(tuple(chunks),), dtype=np.int64)


def _named_block(exc: BaseException, info, n: int, chunks) -> BaseException:
    """``exc`` (same type) with the block it came from in its message."""
    start = int(info[0]) if len(info) else 0
    k = int(np.searchsorted(np.cumsum(chunks), start, side="right"))
    where = f"in block {k} (samples {start}:{start + n}): "
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (where + exc.args[0],) + exc.args[1:]
    else:
        exc.args = (where + repr(exc.args),) if exc.args else (where.rstrip(": "),)
    return exc


def _run_block(info, n, chunks, call):
    try:
        return call()
    except Exception as exc:
        raise _named_block(exc, info, n, chunks) from None


def _flat(leaves, n_rows=None) -> np.ndarray:
    """Leaves raveled into one float row (``n_rows=None``) or into rows of
    ``n_rows`` (each leaf's leading axis kept)."""
    if n_rows is None:
        parts = [np.ravel(np.asarray(x, dtype=np.float64)) for x in leaves]
        return np.concatenate(parts) if parts else np.zeros(0)
    parts = [np.asarray(x).reshape(n_rows, -1) for x in leaves]
    return np.concatenate(parts, axis=1) if parts else np.zeros((n_rows, 0))


def _unflat(vec, shapes, td):
    out, off = [], 0
    for shp in shapes:
        k = int(np.prod(shp))
        piece = vec[off:off + k].reshape(shp)
        out.append(np.float64(piece[()]) if shp == () else piece)
        off += k
    return tree_unflatten(td, out)


# ---------------------------------------------------------------------------
# data-parallel value and gradient, Hessian-vector product
# ---------------------------------------------------------------------------

class _BlockValueAndGrad:
    """``loss``'s value and gradient at ``argnums``: the function each worker
    records (picklable by reference, so standard pickle works when ``loss``
    does)."""

    def __init__(self, loss, argnums):
        self.loss, self.argnums = loss, argnums

    def __call__(self, *args):
        return _value_and_grad(self.loss, self.argnums)(*args)


class _BlockHvp:
    """``H v`` of ``loss`` in argument ``argnum``, the others held fixed."""

    def __init__(self, loss, argnum):
        self.loss, self.argnum = loss, argnum

    def __call__(self, v, *args):
        a = self.argnum

        def f(p):
            return self.loss(*args[:a], p, *args[a + 1:])
        return _hvp(f, (args[a],), (v,))


def _assemble(args, data_pos, blocks):
    full = list(args)
    for p, b in zip(data_pos, blocks):
        full[p] = b
    return full


def _vg_block(info, *blocks, fn, args, data_pos, mean, chunks):
    """One block: the row [n, w * value, w * grads...] (w = n for a mean)."""
    n = blocks[0].shape[0]

    def call():
        value, grads = fn(*_assemble(args, data_pos, blocks))
        w = float(n) if mean else 1.0
        g = _flat(tree_flatten(grads)[0])
        return np.concatenate([[float(n), w * float(value)], w * g])[None, :]
    return _run_block(info, n, chunks, call)


def _hvp_block(info, *blocks, fn, v, args, data_pos, mean, chunks):
    """One block: the row [n, w * (H v)...]."""
    n = blocks[0].shape[0]

    def call():
        hv = fn(v, *_assemble(args, data_pos, blocks))
        w = float(n) if mean else 1.0
        return np.concatenate([[float(n)], w * _flat(tree_flatten(hv)[0])])[None, :]
    return _run_block(info, n, chunks, call)


def _reduced(block_fn, inputs, data_pos, width, split_every, fname, **kw):
    """The dask array (width,) that sums the blocks' rows in a tree."""
    data = [(p, inputs[p], 0) for p in data_pos]
    chunks = _sample_chunks(data, fname)
    letters = iter(string.ascii_letters.replace("i", "").replace("z", ""))
    pairs = [_block_table(chunks), "i"]
    for p, x, _ in data:
        x = _one_chunk_elsewhere(x, 0)
        pairs += [x, "i" + "".join(next(letters) for _ in range(x.ndim - 1))]
    rows = da.blockwise(block_fn, "iz", *pairs, new_axes={"z": width},
                        adjust_chunks={"i": 1}, concatenate=True, dtype=np.float64,
                        meta=np.empty((0, 0)), data_pos=data_pos, chunks=chunks, **kw)
    return rows.sum(axis=0, split_every=split_every), int(sum(chunks))


def _check_reduction(reduction, fname):
    if reduction not in ("sum", "mean"):
        raise ValueError(f"tapead.dask.{fname}: reduction must be 'sum' (the loss adds "
                         "over samples) or 'mean' (it averages them), got "
                         f"{reduction!r}")
    return reduction == "mean"


def _data_positions(args, argnums, data_argnums, fname):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    nums = tuple(i % len(args) for i in nums)
    if data_argnums is None:
        pos = tuple(i for i in range(len(args)) if i not in nums)
    else:
        pos = ((data_argnums,) if isinstance(data_argnums, int) else tuple(data_argnums))
        pos = tuple(i % len(args) for i in pos)
        both = set(pos) & set(nums)
        if both:
            raise ValueError(f"tapead.dask.{fname}: argument {min(both)} is both "
                             "differentiated (argnums) and data (data_argnums)")
    for i in nums:
        if isinstance(args[i], da.Array) or any(isinstance(x, da.Array)
                                                for x in tree_flatten(args[i])[0]):
            raise TypeError(f"tapead.dask.{fname}: argument {i} is differentiated "
                            "(argnums) but is a dask array; the parameters must be "
                            "numpy arrays or floats (pytrees of them)")
    return nums, pos


def value_and_grad(loss: Callable, argnums: ArgNums = 0, reduction: str = "mean",
                   data_argnums: ArgNums = None, jit: bool = True,
                   split_every: int = 8) -> Callable:
    """Value and gradient of a loss over samples, computed block by block.

    ``loss(params, X, y, ...)`` is evaluated on each block of the data
    arguments (dask arrays chunked along axis 0, the sample axis) in a Dask
    task, with its gradient with respect to ``argnums``; the blocks' values
    and gradients are added in a tree on the workers (``split_every`` at a
    time) and only the total comes back.

    Parameters
    ----------
    loss : callable
        A scalar function of the parameters and a block of samples, either
        their sum over the block (``reduction="sum"``) or their mean
        (``reduction="mean"``; the blocks are then weighted by their sizes,
        so a ragged last block counts for what it holds).  Terms that do not
        belong to samples (a regulariser) should be added outside: inside
        the loss they would be counted once per block.
    argnums : int or tuple of int
        The arguments to differentiate (numpy arrays, floats or pytrees).
    reduction : {"mean", "sum"}
        How ``loss`` combines the samples of a block.
    data_argnums : int or tuple of int, optional
        The data arguments; by default every argument not in ``argnums``.
        Each must be a dask array; they must have the same blocks along
        axis 0.  Other arguments are passed to every block unchanged.
    jit : bool
        Record the block's value and gradient once per block shape on each
        worker (``ta.jit``) and replay it for the other blocks.
    split_every : int
        Fan-in of the tree reduction.

    Returns
    -------
    callable
        ``(*args) -> (value, grads)``, the same as ``ta.value_and_grad``
        on the whole data (grads shaped like the arguments at ``argnums``).
        ``.lazy(*args)`` returns a ``dask.delayed`` of
        ``(value, grads, n_samples)`` instead; ``.jitted`` is the recorded
        function the workers share.

    Examples
    --------
    >>> import numpy as np, dask, dask.array as da, tapead as ta, tapead.dask as tdask
    >>> Xn, yn = np.arange(10.0).reshape(5, 2), np.ones(5)
    >>> X = da.from_array(Xn, chunks=(2, 2))        # blocks of 2, 2 and 1 samples
    >>> y = da.from_array(yn, chunks=2)
    >>> loss = lambda w, X, y: ((X @ w - y) ** 2).mean()
    >>> with dask.config.set(scheduler="synchronous"):
    ...     value, g = tdask.value_and_grad(loss)(np.array([0.1, 0.0]), X, y)
    >>> print(f"{value:.12f}", g)
    0.440000000000 [-3.2 -4.4]
    >>> v1, g1 = ta.value_and_grad(loss)(np.array([0.1, 0.0]), Xn, yn)   # one process
    >>> print(f"{v1:.12f}", g1)
    0.440000000000 [-3.2 -4.4]
    """
    mean = _check_reduction(reduction, "value_and_grad")
    block = _BlockValueAndGrad(loss, argnums)
    fn = _jit(block) if jit else block
    checked = []

    def lazy(*args):
        nums, pos = _data_positions(args, argnums, data_argnums, "value_and_grad")
        if not checked:
            _check_picklable(fn, "the loss")
            checked.append(True)
        consts = [None if i in pos else a for i, a in enumerate(args)]
        diffd = args[nums[0]] if isinstance(argnums, int) else tuple(args[i] for i in nums)
        leaves, td = tree_flatten(diffd)
        shapes = [np.shape(x) for x in leaves]
        width = 2 + int(sum(np.prod(s) for s in shapes))
        total, n = _reduced(_vg_block, args, pos, width, split_every, "value_and_grad",
                            fn=fn, args=consts, mean=mean)
        return dask.delayed(_finish_value_and_grad)(total, n, shapes, td, mean)

    def value_and_grad_(*args):
        value, grads, _ = dask.compute(lazy(*args))[0]
        return value, grads

    value_and_grad_.lazy = lazy
    value_and_grad_.jitted = fn
    value_and_grad_.__doc__ = f"Data-parallel value and gradient of {loss!r}."
    return value_and_grad_


def _counted(vec, n, fname):
    got = int(round(vec[0]))
    if got != n:
        raise RuntimeError(f"tapead.dask.{fname}: the reduction added {got} samples, but "
                           f"the data holds {n}; a block was lost or counted twice")


def _finish_value_and_grad(vec, n, shapes, td, mean):
    _counted(vec, n, "value_and_grad")
    scale = 1.0 / n if mean else 1.0
    return np.float64(vec[1] * scale), _unflat(vec[2:] * scale, shapes, td), n


def hvp(loss: Callable, argnums: int = 0, reduction: str = "mean",
        data_argnums: ArgNums = None, jit: bool = True, split_every: int = 8) -> Callable:
    """Hessian-vector product of a loss over samples, block by block.

    The same arguments as :func:`value_and_grad` (one differentiated
    argument).  The returned function takes the vector first:
    ``hvp(loss)(v, params, X, y)`` is ``H v`` of the whole loss at ``params``
    (``v`` shaped like ``params``), the blocks' products added in a tree on
    the workers -- what Newton-CG needs at each inner iteration.
    ``.lazy(v, *args)`` returns a ``dask.delayed`` of ``(H v, n_samples)``.
    """
    if not isinstance(argnums, int):
        raise TypeError("tapead.dask.hvp: argnums must be one int (the Hessian of one "
                        "argument, which may be a pytree)")
    mean = _check_reduction(reduction, "hvp")
    block = _BlockHvp(loss, argnums)
    fn = _jit(block) if jit else block
    checked = []

    def lazy(v, *args):
        nums, pos = _data_positions(args, argnums, data_argnums, "hvp")
        if not checked:
            _check_picklable(fn, "the loss")
            checked.append(True)
        leaves, td = tree_flatten(args[nums[0]])
        vleaves, vtd = tree_flatten(v)
        if vtd != td or [np.shape(a) for a in vleaves] != [np.shape(a) for a in leaves]:
            raise ValueError("tapead.dask.hvp: v must have the structure and shapes of "
                             f"argument {nums[0]}")
        consts = [None if i in pos else a for i, a in enumerate(args)]
        shapes = [np.shape(x) for x in leaves]
        width = 1 + int(sum(np.prod(s) for s in shapes))
        total, n = _reduced(_hvp_block, args, pos, width, split_every, "hvp",
                            fn=fn, v=v, args=consts, mean=mean)
        return dask.delayed(_finish_hvp)(total, n, shapes, td, mean)

    def hvp_(v, *args):
        return dask.compute(lazy(v, *args))[0][0]

    hvp_.lazy = lazy
    hvp_.jitted = fn
    return hvp_


def _finish_hvp(vec, n, shapes, td, mean):
    _counted(vec, n, "hvp")
    return _unflat(vec[1:] * (1.0 / n if mean else 1.0), shapes, td), n


# ---------------------------------------------------------------------------
# vmap over the chunks of a dask array
# ---------------------------------------------------------------------------

def _vmap_block(info, *blocks, fn, args, data_pos, in_axes, chunks, shapes, single):
    """One block: ``f``'s output leaves, each with the block's examples first
    (the one array itself when ``f`` returns one array)."""
    ax0 = in_axes[data_pos[0]]
    n = blocks[0].shape[ax0]

    def call():
        leaves = [np.asarray(x) for x in tree_flatten(fn(*_assemble(args, data_pos, blocks)))[0]]
        got = [x.shape for x in leaves]
        want = [(n,) + tuple(s) for s in shapes]
        if got != want:
            raise ValueError(f"the outputs have shapes {got} here, but {want} from the "
                             "first example: the output's shape must not depend on the "
                             "values")
        return leaves[0] if single else tuple(leaves)
    return _run_block(info, n, chunks, call)


def _leaf(block, k):
    return block[k]


def _normalised_axes(in_axes, nargs):
    if isinstance(in_axes, (list, tuple)):
        if len(in_axes) != nargs:
            raise ValueError(f"tapead.dask.vmap: in_axes has {len(in_axes)} entries for "
                             f"{nargs} arguments")
        axes = list(in_axes)
    else:
        axes = [in_axes] * nargs
    for a in axes:
        if a is not None and not isinstance(a, int):
            raise TypeError("tapead.dask.vmap: each in_axes entry must be an int (the "
                            "mapped axis of a dask array) or None (passed whole)")
    return axes


def vmap(f: Callable, in_axes: Union[int, None, Sequence] = 0, jit: bool = True) -> Callable:
    """``ta.vmap`` over the blocks of dask arrays: a lazy result.

    The mapped arguments are dask arrays; their blocks along the mapped axis
    become tasks, each running ``ta.vmap(f, in_axes)`` on its block (recorded
    once per block shape on each worker with ``jit=True``).  Nothing is
    computed until the result is: a large input made of generated chunks
    (``da.random``) flows through with one block per worker thread in
    memory.

    Parameters
    ----------
    f : callable
        Any function ``ta.vmap`` accepts, e.g. ``ta.grad(loss)`` or
        ``ta.jacfwd(g)``, of one example.
    in_axes : int, None or tuple of them
        Per positional argument: the mapped axis of a dask array, or
        ``None`` for an argument passed whole to every block (a numpy
        array, a float, a pytree).  The mapped arguments must have the same
        blocks along their mapped axes.
    jit : bool
        Record ``ta.vmap(f, in_axes)`` once per block shape on each worker.

    Returns
    -------
    callable
        ``(*args) ->`` a dask array (or a pytree of dask arrays like ``f``'s
        output) with the mapped axis first, chunked like the input.

    Examples
    --------
    >>> import numpy as np, dask.array as da, tapead as ta, tapead.dask as tdask
    >>> X = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> G = tdask.vmap(ta.grad(lambda x: (x ** 3).sum()))(X)
    >>> G
    dask.array<...>
    >>> print(G.compute(scheduler="synchronous"))
    [[ 0.  3.]
     [12. 27.]
     [48. 75.]]
    """
    made: dict = {}     # the batched function per normalised in_axes, made once

    def mapped(*args):
        axes = _normalised_axes(in_axes, len(args))
        pos = tuple(i for i, a in enumerate(axes) if a is not None)
        data = [(p, args[p], axes[p]) for p in pos]
        chunks = _sample_chunks(data, "vmap")
        for p, x, ax in data:
            axes[p] = ax % x.ndim
        if tuple(axes) not in made:
            batched = _vmap(f, in_axes=tuple(axes))
            fn = _jit(batched) if jit else batched
            _check_picklable(fn, "the function")
            made[tuple(axes)] = batched, fn
        batched, fn = made[tuple(axes)]
        consts = [None if i in pos else a for i, a in enumerate(args)]
        td, shapes, dtypes = _output_layout(batched, args, pos, axes)
        pairs = [_block_table(chunks), "i"]
        letters = iter(string.ascii_letters.replace("i", "").replace("z", "")
                       )
        for p, x, ax in data:
            x = _one_chunk_elsewhere(x, ax)
            inds = [next(letters) for _ in range(x.ndim)]
            inds[ax] = "i"
            pairs += [x, "".join(inds)]
        single = len(shapes) == 1
        kw = dict(fn=fn, args=consts, data_pos=pos, in_axes=tuple(axes), chunks=chunks,
                  shapes=shapes, single=single)
        if single:        # the block is the output
            inds = "i" + "".join(next(letters) for _ in shapes[0])
            out = [da.blockwise(_vmap_block, inds, *pairs, concatenate=True,
                                new_axes={c: s for c, s in zip(inds[1:], shapes[0])},
                                dtype=dtypes[0],
                                meta=np.empty((0,) * len(inds), dtypes[0]), **kw)]
        else:             # a tuple of the leaves per block, each leaf picked from it
            blocks = da.blockwise(_vmap_block, "i", *pairs, concatenate=True, dtype=object,
                                  meta=np.empty((0,), object), **kw)
            out = [blocks.map_blocks(_leaf, k, dtype=dt,
                                     chunks=(blocks.chunks[0],) + tuple((s,) for s in shp),
                                     new_axis=list(range(1, 1 + len(shp))),
                                     meta=np.empty((0,) * (1 + len(shp)), dt))
                   for k, (shp, dt) in enumerate(zip(shapes, dtypes))]
        return tree_unflatten(td, out)
    return mapped


def _output_layout(batched, args, pos, axes):
    """(structure, per-example shapes, dtypes) of the output leaves, from one
    example (ones; the first real example if ``f`` fails there)."""
    def one(example):
        small = list(args)
        for p, e in zip(pos, example):
            small[p] = e
        with np.errstate(all="ignore"):
            return batched(*small)
    ones = [np.ones(tuple(1 if i == axes[p] else s for i, s in enumerate(args[p].shape)),
                    dtype=args[p].dtype) for p in pos]
    try:
        out = one(ones)
    except Exception:                       # noqa: BLE001 -- try a real example
        firsts = [da.take(args[p], [0], axis=axes[p]) for p in pos]
        out = one(dask.compute(*firsts))
    leaves, td = tree_flatten(out)
    leaves = [np.asarray(x) for x in leaves]
    if not leaves:
        raise ValueError("tapead.dask.vmap: the function returns no arrays")
    return td, [x.shape[1:] for x in leaves], [x.dtype for x in leaves]


# ---------------------------------------------------------------------------
# sparse Jacobians: colour groups as tasks
# ---------------------------------------------------------------------------

class _CompressedColumns:
    """``J @ S[:, c0:c1]``, one row per colour: the seed directions are made
    on the worker from the colours (``S[j, colors[j]] = 1``)."""

    def __init__(self, f):
        self.f = f

    def __call__(self, x, V):
        return _vmap(lambda v: _jvp(self.f, (x,), (v,))[1])(V)


def _compressed_task(fn, x, colors, c0, c1):
    V = np.zeros((c1 - c0, x.size))
    hit = (colors >= c0) & (colors < c1)
    V[colors[hit] - c0, np.flatnonzero(hit)] = 1.0
    try:
        T = fn(x, V)
    except Exception as exc:
        msg = f"in colours {c0}:{c1}: "
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (msg + exc.args[0],) + exc.args[1:]
        raise
    return np.asarray(T, dtype=np.float64).reshape(c1 - c0, -1)


def sparse_jacobian(f: Callable, colors_per_task: int = None, order: str = "auto",
                    jit: bool = True) -> Callable:
    """The Jacobian of ``f`` as a ``scipy.sparse`` matrix, colour groups as tasks.

    On the client: the sparsity pattern (``ta.jacobian_sparsity``), its
    column colouring and the recovery (``tapead.coloring``), as
    ``ta.sparse_jacobian`` makes them.  On the workers: the compressed
    columns ``J @ S`` of ``colors_per_task`` colours per task, by forward
    mode (``ta.vmap`` of ``ta.jvp``).  Back on the client the nonzeros are
    recovered.  Worth it when the colours are many and each forward pass is
    expensive; see the docs page for the break-even size.

    Parameters
    ----------
    f : callable
        R^n -> R^m on a 1-d float array.
    colors_per_task : int, optional
        Colours per task; by default the colours are split into twice as many
        tasks as there are worker threads (at least 1 colour each).
    order : str
        Vertex order of the colouring (``tapead.coloring.ORDERS``).
    jit : bool
        Record each task's forward pass once per group size on each worker.

    Returns
    -------
    callable
        ``x -> scipy.sparse.csr_array`` of shape (m, n).
    """
    fn = _jit(_CompressedColumns(f)) if jit else _CompressedColumns(f)
    cache: dict = {}

    def jac(x):
        x = np.asarray(x)
        if x.ndim != 1 or x.dtype.kind != "f":
            raise ValueError("tapead.dask.sparse_jacobian needs a 1-d float array x, got "
                             f"shape {x.shape} and dtype {x.dtype}")
        if not cache:
            _check_picklable(fn, "the function")
        key = (x.shape, x.dtype.str)
        if key not in cache:
            P = jacobian_sparsity(f, x)
            cache[key] = jacobian_recovery(P, column_coloring(P, order=order))
        rec = cache[key]
        K = rec.ncolors
        if K == 0:
            return rec.to_sparse(np.zeros(rec.nnz, dtype=x.dtype))
        per = colors_per_task or max(1, -(-K // (2 * _worker_threads())))
        xd, cd = dask.delayed(x), dask.delayed(np.asarray(rec.colors))
        tasks = [dask.delayed(_compressed_task)(fn, xd, cd, c0, min(c0 + per, K))
                 for c0 in range(0, K, per)]
        T = np.concatenate(dask.compute(*tasks), axis=0)
        return rec.to_sparse(rec.recover_tangents(T).astype(x.dtype, copy=False))

    jac.jitted = fn
    return jac


def _worker_threads() -> int:
    """Worker threads of the default distributed client, else the local cores."""
    try:
        from distributed import default_client      # external, optional
        return max(1, sum(default_client().nthreads().values()))
    except (ImportError, ValueError):
        import os                                   # stdlib, only needed here
        return os.cpu_count() or 1
