"""Sparse Jacobians whose colour groups are Dask tasks: the pattern, the
colouring and the recovery of ``ta.sparse_jacobian`` on the client, the
compressed columns on the workers."""
from __future__ import annotations

from typing import Callable

import dask
import numpy as np

from tapead.coloring import column_coloring, jacobian_recovery
from tapead.dask._blocks import _check_picklable
from tapead.jit import jit as _jit
from tapead.sparse import jacobian_sparsity
from tapead.transforms import jvp as _jvp
from tapead.vmap import vmap as _vmap

__all__ = ["sparse_jacobian"]


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
