"""``ta.vmap`` over the blocks of dask arrays: a lazy dask array (or a pytree
of them), one task per block."""
from __future__ import annotations

import string
from typing import Callable, Sequence, Union

import dask
import dask.array as da
import numpy as np

from tapead.dask._blocks import (_assemble, _block_table, _check_picklable, _one_chunk_elsewhere,
                                 _run_block, _sample_chunks)
from tapead.jit import jit as _jit
from tapead.tree_util import tree_flatten, tree_unflatten
from tapead.vmap import vmap as _vmap

__all__ = ["vmap"]


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
