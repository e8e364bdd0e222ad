"""Patterns at the boundary of the coloring package: input validated once and
converted to int32 CSR/CSC (``_Pattern``), colors as int32 arrays.  A leaf
module: the colorings and the recoveries both build on it."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from tapead.coloring import _kernels as _coloring

Colors = tuple[int, ...]


# --------------------------------------------------------------------------
# Patterns at the boundary
# --------------------------------------------------------------------------

class _Pattern:
    """Canonical int32 CSR (sorted rows, no duplicates) of a pattern."""

    __slots__ = ("shape", "indptr", "indices", "_csc", "_sym")

    def __init__(self, pattern: Any):
        if sp.issparse(pattern):
            csr = sp.csr_array(pattern)
            if not csr.has_canonical_format:
                csr = csr.copy()
                csr.sum_duplicates()
            shape = csr.shape
            indptr, indices = csr.indptr, csr.indices
        else:
            dense = np.asarray(pattern)
            if dense.ndim != 2:
                raise ValueError(
                    f"a sparsity pattern must be 2-D, got an array of shape {dense.shape}; "
                    "pass a scipy.sparse matrix or a 2-D boolean array")
            shape = dense.shape
            mask = dense != 0
            indptr = np.concatenate(([0], np.cumsum(mask.sum(axis=1))))
            indices = np.nonzero(mask)[1]
        if max(shape) >= 2**31 - 1 or len(indices) >= 2**31 - 1:
            raise ValueError("patterns with 2**31 rows, columns or entries or more "
                             "are not supported")
        self.shape = (int(shape[0]), int(shape[1]))
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int32)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self._csc = None
        self._sym = None

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def rows(self) -> np.ndarray:
        """Row index of every CSR position."""
        return np.repeat(np.arange(self.shape[0], dtype=np.int32), np.diff(self.indptr))

    def csc(self) -> tuple[np.ndarray, np.ndarray]:
        if self._csc is None:
            csc = sp.csr_array((np.ones(self.nnz, dtype=np.int8), self.indices,
                                self.indptr), shape=self.shape).tocsc()
            csc.sort_indices()
            self._csc = (np.ascontiguousarray(csc.indptr, dtype=np.int32),
                         np.ascontiguousarray(csc.indices, dtype=np.int32))
        return self._csc

    def symmetric(self, what: str):
        """``(mirror, eid, ends)`` of a structurally symmetric square pattern."""
        if self._sym is None:
            m, n = self.shape
            if m != n:
                raise ValueError(
                    f"{what} needs a square symmetric pattern (a Hessian), got shape "
                    f"{self.shape}; for a Jacobian use column_coloring and "
                    "jacobian_recovery")
            mirror, eid, ends, bad = _coloring.symmetric_structure(self.indptr,
                                                                   self.indices)
            if bad >= 0:
                raise ValueError(
                    f"{what} needs a symmetric pattern, but row {bad} has an entry "
                    "whose mirror is missing; pass the pattern of H, or "
                    "(P + P.T) if you only have one triangle P")
            self._sym = (mirror, eid, ends)
        return self._sym

    def graph(self, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Adjacency graph ``(ptr, adj, eid)``: the pattern without its diagonal."""
        _, eid, _ = self.symmetric(what)
        rows = self.rows()
        keep = self.indices != rows
        ptr = np.zeros(self.shape[0] + 1, dtype=np.int32)
        np.cumsum(np.bincount(rows[keep], minlength=self.shape[0]), out=ptr[1:])
        return ptr, self.indices[keep], eid[keep]


def _colors_array(colors: Sequence[int], n: int) -> tuple[np.ndarray, int]:
    arr = np.ascontiguousarray(colors, dtype=np.int32)
    if arr.shape != (n,):
        raise ValueError(f"expected one color per column ({n}), got shape {arr.shape}; "
                         "pass the tuple returned by the coloring function")
    if n and arr.min() < 0:
        raise ValueError("colors must be non-negative integers")
    return arr, (int(arr.max()) + 1 if n else 0)


# --------------------------------------------------------------------------
# Colorings
# --------------------------------------------------------------------------
