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

try:
    import dask  # noqa: F401
    import dask.array  # noqa: F401
except ImportError as exc:                                  # pragma: no cover
    raise ImportError("tapead.dask needs Dask (dask.array and dask.distributed); "
                      "install them with:  pip install \"tapead[dask]\"") from exc

from tapead.dask.gradients import hvp, value_and_grad
from tapead.dask.mapping import vmap
from tapead.dask.sparse import sparse_jacobian

__all__ = ["value_and_grad", "hvp", "vmap", "sparse_jacobian"]
