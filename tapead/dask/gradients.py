"""Data-parallel value and gradient, and Hessian-vector products, of a loss
over the samples of dask-array data: one task per block, the blocks' rows
added in a tree on the workers."""
from __future__ import annotations

import string
from typing import Callable

import dask
import dask.array as da
import numpy as np

from tapead.dask._blocks import (ArgNums, _assemble, _block_table, _check_picklable, _flat,
                                 _one_chunk_elsewhere, _run_block, _sample_chunks, _unflat)
from tapead.jit import jit as _jit
from tapead.transforms import hvp as _hvp, value_and_grad as _value_and_grad
from tapead.tree_util import tree_flatten

__all__ = ["value_and_grad", "hvp"]


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
