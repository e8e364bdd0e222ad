"""Small building blocks for training loops: an MLP, a loss, tape memory.

``mse`` is one primitive (it keeps only the difference array for its
backward pass), so the tape of an MLP holds exactly the arrays counted in
``docs/training.md``.
"""
from __future__ import annotations

import functools
from typing import Dict, Sequence

import numpy as np

from tapead._core import Box, bind, shape_of
from tapead import patterns
from tapead._prims import batching
from tapead._prims.base import PER_DIRECTION, Primitive
from tapead._prims.reductions import mean
from tapead._core import tanh  # the C entry point (scalar fast path, no Python wrapper)

__all__ = ["mse", "init_mlp", "mlp", "mlp_tape_nbytes"]


_add_reduce = np.add.reduce


def _mse_impl(pred, target):
    d = pred - target
    if type(d) is np.ndarray:       # np.mean's value, without its Python wrapper
        return np.add.reduce(d * d, axis=None) / d.size
    return np.mean(d * d)


mse_p = Primitive("mse", _mse_impl, saves=())


def _mse_save(vals, ans):
    pred, target = vals
    return (pred - target,)            # the difference array, nothing else


mse_p.save_fn = _mse_save


def _mse_fwd(pred, target):
    """The loss and the difference array from one subtraction (what the tape keeps)."""
    if type(pred) is not np.ndarray or type(target) is not np.ndarray:
        return None
    d = pred - target
    return _add_reduce(d * d, None) / d.size, (d,)     # np.mean's value, no keyword dict


mse_p.fwd_saved = _mse_fwd
mse_p.defvjp(lambda g, ans, d: (2.0 / d.size) * g * d,
             lambda g, ans, d: (-2.0 / d.size) * g * d)
mse_p.defjvp(lambda t, ans, pred, target: 2.0 * np.mean((pred - target) * t),
             lambda t, ans, pred, target: -2.0 * np.mean((pred - target) * t))
mse_p.defbatched(PER_DIRECTION)


def _mse_vmap(args, bdims):
    """One mean of squares per lane (tapead operations: differentiable again)."""
    rank = max(batching.lane_ndim(a, d) for a, d in zip(args, bdims))
    p, t = [a if d is None else batching.padded(a, d, rank) for a, d in zip(args, bdims)]
    d = p - t
    return mean(d * d, axis=tuple(range(1, rank + 1))), 0


mse_p.defvmap(_mse_vmap)
mse_p.defsparsity(patterns.DENSE, reason="one number, the mean over every element of both")


def mse(pred, target):
    """Mean squared error ``mean((pred - target) ** 2)`` as one primitive.

    Its tape node keeps the difference array (for the backward pass) and the
    scalar loss, nothing else.

    Parameters
    ----------
    pred, target : array_like
        The same shape (a ``ValueError`` says how to fix a mismatch, e.g. a
        target of shape ``(n,)`` for predictions of shape ``(n, 1)``).

    Returns
    -------
    scalar

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.nn import mse
    >>> print(ta.grad(mse)(np.array([1.0, 3.0]), np.array([0.0, 0.0])))
    [1. 3.]
    """
    if shape_of(pred) != shape_of(target):
        raise ValueError(f"mse: prediction shape {shape_of(pred)} and target shape "
                         f"{shape_of(target)} differ; reshape the target (e.g. y[:, None])")
    if isinstance(pred, Box) or isinstance(target, Box):
        return bind(mse_p, pred, target)
    return _mse_impl(pred, target)


def init_mlp(sizes: Sequence[int], rng: np.random.Generator,
             dtype=np.float64) -> Dict[str, np.ndarray]:
    """Weights ``W{i}`` (scaled normal, variance 1/fan-in) and zero biases ``b{i}``.

    Parameters
    ----------
    sizes : sequence of int
        Layer widths ``[inputs, hidden..., outputs]``.
    rng : numpy.random.Generator
    dtype : numpy dtype

    Returns
    -------
    dict
        ``W{i}`` of shape ``(sizes[i], sizes[i + 1])`` and ``b{i}`` of shape
        ``(sizes[i + 1],)``.

    Examples
    --------
    >>> import numpy as np
    >>> from tapead.nn import init_mlp
    >>> p = init_mlp([2, 16, 1], np.random.default_rng(0))
    >>> sorted(p), p["W0"].shape, p["b1"].shape
    (['W0', 'W1', 'b0', 'b1'], (2, 16), (1,))
    """
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype)
        params[f"b{i}"] = np.zeros(n, dtype=dtype)
    return params


def mlp(params: Dict[str, np.ndarray], x, activation=tanh):
    """``x @ W0 + b0 -> tanh -> ... -> @ W{L-1} + b{L-1}`` (linear output).

    Parameters
    ----------
    params : dict
        From :func:`init_mlp` (or the same keys and shapes).
    x : array, shape (batch, sizes[0])
    activation : callable
        Applied after every layer but the last.

    Returns
    -------
    array, shape (batch, sizes[-1])

    Examples
    --------
    >>> import numpy as np
    >>> from tapead.nn import init_mlp, mlp
    >>> p = init_mlp([2, 16, 1], np.random.default_rng(0))
    >>> mlp(p, np.zeros((5, 2))).shape
    (5, 1)
    """
    keys = _layer_keys(len(params) // 2)
    h = x
    for i, (w, b) in enumerate(keys):
        h = h @ params[w] + params[b]
        if i < len(keys) - 1:
            h = activation(h)
    return h


@functools.lru_cache(maxsize=None)
def _layer_keys(n_layers):
    return tuple((f"W{i}", f"b{i}") for i in range(n_layers))


def mlp_tape_nbytes(sizes: Sequence[int], batch: int, itemsize: int = 8) -> int:
    """Bytes the tape of ``mse(mlp(params, x), y)`` holds, from shapes alone.

    Counted array by array (the table in ``docs/training.md``): the input
    batch; per layer the weight matrix and the matmul and bias-add outputs;
    per hidden layer the tanh output; the loss's difference array and the
    scalar loss.  Biases are not saved (adding a bias needs no stored value
    to differentiate).

    Parameters
    ----------
    sizes : sequence of int
        Layer widths ``[inputs, hidden..., outputs]``.
    batch : int
        Rows of the input batch.
    itemsize : int
        Bytes per number (8 for float64, 4 for float32).

    Returns
    -------
    int
        What ``ta.record(loss, params, x, t).nbytes`` reports.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> from tapead.nn import init_mlp, mlp, mse, mlp_tape_nbytes
    >>> params = init_mlp([2, 8, 1], np.random.default_rng(0))
    >>> x, t = np.ones((4, 2)), np.zeros((4, 1))
    >>> rec = ta.record(lambda p, x, t: mse(mlp(p, x), t), params, x, t)
    >>> rec.nbytes == mlp_tape_nbytes([2, 8, 1], 4)
    True
    """
    sizes = list(sizes)
    if len(sizes) < 2 or batch < 1:
        raise ValueError("mlp_tape_nbytes: give at least [inputs, outputs] sizes and batch >= 1")
    numbers = batch * sizes[0]
    n_layers = len(sizes) - 1
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        numbers += m * n + 2 * batch * n
        if i < n_layers - 1:
            numbers += batch * n
    numbers += batch * sizes[-1] + 1
    return numbers * itemsize
