"""What the parts of :mod:`tapead.dask` share: the checks made on the client
before any work is sent (data chunked alike, functions that pickle), the
table that tells a task which block it runs, and leaves <-> one row."""
from __future__ import annotations

import pickle
from typing import Any, List, Sequence, Tuple, Union

import dask.array as da
import numpy as np

from tapead.tree_util import tree_unflatten

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


def _assemble(args, data_pos, blocks):
    """``args`` with the blocks in the data arguments' places."""
    full = list(args)
    for p, blk in zip(data_pos, blocks):
        full[p] = blk
    return full


def _flat(leaves) -> np.ndarray:
    """Leaves raveled into one float row."""
    parts = [np.ravel(np.asarray(x, dtype=np.float64)) for x in leaves]
    return np.concatenate(parts) if parts else np.zeros(0)


def _unflat(vec, shapes, td):
    """The inverse of :func:`_flat`: ``vec`` cut into leaves of ``shapes``."""
    out, off = [], 0
    for shp in shapes:
        k = int(np.prod(shp))
        piece = vec[off:off + k].reshape(shp)
        out.append(np.float64(piece[()]) if shp == () else piece)
        off += k
    return tree_unflatten(td, out)
