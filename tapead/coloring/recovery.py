"""Recovering derivative values from compressed products ``B = J S``.

The recoveries are built once per pattern and coloring (the indices are
precomputed) and applied at every evaluation: a fixed gather for column
and star colorings, a substitution along 2-colored trees for acyclic
colorings.  ``tapead.coloring`` re-exports everything here.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from tapead.coloring import _kernels as _coloring
from tapead.coloring._pattern import _colors_array, _Pattern

__all__ = ["jacobian_recovery", "star_recovery", "acyclic_recovery", "JacobianRecovery",
           "StarRecovery", "AcyclicRecovery"]

class _Recovery:
    """Common part: the seed matrix, the shape check and ``to_sparse``."""

    _kind = "J"

    def __init__(self, pat: _Pattern, colors: np.ndarray, ncolors: int):
        self.shape = pat.shape
        self.colors = colors
        self.ncolors = ncolors
        self.nnz = pat.nnz
        self._indptr = pat.indptr
        self._indices = pat.indices
        self._seed = None

    @property
    def seed(self) -> np.ndarray:
        """Seed matrix S, shape (n, ncolors): ``S[j, colors[j]] = 1``."""
        if self._seed is None:
            n = self.shape[1]
            seed = np.zeros((n, self.ncolors))
            seed[np.arange(n), self.colors] = 1.0
            seed.flags.writeable = False
            self._seed = seed
        return self._seed

    def _flat(self, B: Any) -> np.ndarray:
        B = np.asarray(B)
        want = (self.shape[0], self.ncolors)
        if B.shape != want:
            raise ValueError(
                f"B has shape {B.shape}, but the compressed product {self._kind} @ S "
                f"for this pattern has shape {want}: evaluate {self._kind} times "
                "each column of `seed` (forward mode) and stack the results as columns")
        if not np.issubdtype(B.dtype, np.inexact):
            B = B.astype(np.float64)
        return np.ascontiguousarray(B).reshape(-1)

    def to_sparse(self, values: Any) -> sp.csr_array:
        """Values in pattern order -> ``scipy.sparse.csr_array``."""
        values = np.asarray(values)
        if values.shape != (self.nnz,):
            raise ValueError(f"expected {self.nnz} values in pattern order, got shape "
                             f"{values.shape}; pass the output of recover(B)")
        return sp.csr_array((values, self._indices.copy(), self._indptr.copy()),
                            shape=self.shape)

    def _flat_tangents(self, T: Any) -> np.ndarray:
        T = np.asarray(T)
        want = (self.ncolors, self.shape[0])
        if T.shape != want:
            raise ValueError(
                f"T has shape {T.shape}, but the tangents {self._kind} @ S of this pattern, "
                f"one row per direction, have shape {want}: pass B.T, or use recover(B)")
        if T.dtype != np.float64:
            T = T.astype(np.float64)
        return np.ascontiguousarray(T).reshape(-1)

    def _transposed(self, gather: np.ndarray) -> np.ndarray:
        """Flat indices into ``B`` (m, K) -> the same entries of ``B.T``."""
        nc = max(self.ncolors, 1)
        return (gather % nc) * self.shape[0] + gather // nc

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, nnz={self.nnz}, "
                f"ncolors={self.ncolors})")


class JacobianRecovery(_Recovery):
    """Recover J's nonzeros from ``B = J @ S`` by a fixed gather.

    Attributes
    ----------
    seed : ndarray, shape (n, ncolors)
    gather : ndarray of intp, shape (nnz,)
        Flat index into ``B`` (C order) of every nonzero, in pattern order.
    """

    def __init__(self, pat: _Pattern, colors: np.ndarray, ncolors: int, gather):
        super().__init__(pat, colors, ncolors)
        self.gather = gather
        self._gather_t = self._transposed(gather)

    def recover(self, B: Any) -> np.ndarray:
        """Nonzero values of J in pattern (CSR) order, shape (nnz,)."""
        return np.take(self._flat(B), self.gather)

    def recover_tangents(self, T: Any) -> np.ndarray:
        """``recover(T.T)`` for ``T`` of shape (ncolors, m): the layout of a
        K-direction forward sweep (one row per direction), without a transpose."""
        return np.take(self._flat_tangents(T), self._gather_t)


class StarRecovery(JacobianRecovery):
    """Recover a symmetric H from ``B = H @ S`` by a fixed gather."""

    _kind = "H"


class AcyclicRecovery(_Recovery):
    """Recover a symmetric H from ``B = H @ S`` by substitution on trees.

    The off-diagonal entries are solved along the 2-colored trees of the
    acyclic coloring, leaves first, in an order fixed at construction; the
    diagonal is a gather.
    """

    _kind = "H"

    def __init__(self, pat, colors, ncolors, plan, tree_ptr, gather, diag_pos,
                 diag_gather):
        super().__init__(pat, colors, ncolors)
        self.plan = plan
        self.tree_ptr = tree_ptr
        self.gather = gather
        self.diag_pos = diag_pos
        self.diag_gather = diag_gather
        self._gather_t = self._transposed(gather)
        self._diag_gather_t = self._transposed(diag_gather)

    def _solve(self, flat, gather, diag_gather) -> np.ndarray:
        values = np.zeros(self.nnz)
        values[self.diag_pos] = flat[diag_gather]
        acc = np.zeros(self.shape[0] + 1)        # per call: threads may share self
        _coloring.substitute(flat, gather, self.plan, self.tree_ptr, acc, values)
        return values

    def recover(self, B: Any) -> np.ndarray:
        """Nonzero values of H in pattern (CSR) order, shape (nnz,)."""
        flat = np.asarray(self._flat(B), dtype=np.float64)
        return self._solve(flat, self.gather, self.diag_gather)

    def recover_tangents(self, T: Any) -> np.ndarray:
        """``recover(T.T)`` for ``T`` of shape (ncolors, n), without a transpose."""
        return self._solve(self._flat_tangents(T), self._gather_t, self._diag_gather_t)


def jacobian_recovery(pattern: Any, colors: Sequence[int]) -> JacobianRecovery:
    """Build the recovery of a Jacobian from its compressed product.

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (m, n)
    colors : sequence of int, length n
        A column coloring, e.g. from :func:`column_coloring`.

    Returns
    -------
    JacobianRecovery
        ``.seed`` (n, ncolors); ``.recover(B)`` with ``B = J @ seed`` of shape
        (m, ncolors) returns the nnz values in pattern order;
        ``.to_sparse(values)`` returns a ``scipy.sparse.csr_array``.

    Examples
    --------
    >>> import numpy as np
    >>> J = np.array([[3.0, 0, 1], [0, 4, 0], [2, 0, 6]])
    >>> rec = jacobian_recovery(J != 0, (0, 0, 1))
    >>> rec.recover(J @ rec.seed)
    array([3., 1., 4., 2., 6.])
    """
    pat = _Pattern(pattern)
    arr, nc = _colors_array(colors, pat.shape[1])
    unique = _coloring.unique_in_row(pat.indptr, pat.indices, arr, nc).view(bool)
    rows = pat.rows()
    if not unique.all():
        raise ValueError(f"row {rows[np.argmin(unique)]} has two columns of one color, "
                         "so their entries mix in B; use column_coloring(pattern) for "
                         "the colors")
    gather = rows.astype(np.intp) * nc + arr[pat.indices]
    return JacobianRecovery(pat, arr, nc, gather)


def star_recovery(pattern: Any, colors: Sequence[int]) -> StarRecovery:
    """Build the direct recovery of a symmetric H from ``B = H @ S``.

    Entry (i, j) is read from ``B[i, colors[j]]`` when no other column of
    that color has an entry in row i, and otherwise from ``B[j, colors[i]]``;
    a star coloring guarantees one of the two.  The indices are precomputed.

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (n, n)
        Structurally symmetric pattern of H.
    colors : sequence of int, length n
        A star coloring, e.g. from :func:`star_coloring`.

    Returns
    -------
    StarRecovery
    """
    pat = _Pattern(pattern)
    mirror, _, _ = pat.symmetric("star_recovery")
    arr, nc = _colors_array(colors, pat.shape[1])
    unique = _coloring.unique_in_row(pat.indptr, pat.indices, arr, nc).view(bool)
    mirrored = unique[mirror]  # (j, i) is alone of color(i) in row j
    rows = pat.rows()
    if not (unique | mirrored).all():
        raise ValueError(f"an entry in row {rows[np.argmin(unique | mirrored)]} cannot be "
                         "read from B at either of its two places; the colors are not a "
                         "star coloring: use star_coloring(pattern), or "
                         "acyclic_recovery for an acyclic coloring")
    gather = np.where(unique, rows.astype(np.intp) * nc + arr[pat.indices],
                      pat.indices.astype(np.intp) * nc + arr[rows])
    return StarRecovery(pat, arr, nc, gather)


def acyclic_recovery(pattern: Any, colors: Sequence[int]) -> AcyclicRecovery:
    """Build the substitution recovery of a symmetric H from ``B = H @ S``.

    Gebremedhin, Pothen, Tarafdar & Walther, INFORMS J. Computing 21(2),
    2009.  Each 2-colored tree is solved leaves first: a leaf's entry is its
    row sum in B less the entries already solved in that row.

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (n, n)
        Structurally symmetric pattern of H.
    colors : sequence of int, length n
        An acyclic (or star) coloring, e.g. from :func:`acyclic_coloring`.

    Returns
    -------
    AcyclicRecovery
    """
    pat = _Pattern(pattern)
    mirror, eid, ends = pat.symmetric("acyclic_recovery")
    arr, nc = _colors_array(colors, pat.shape[1])
    plan, tree_ptr, bad = _coloring.tree_plan(pat.indptr, pat.indices, mirror, eid,
                                              ends, arr, nc)
    if bad >= 0:
        raise ValueError(f"vertex {bad} has a neighbor of its own color or lies on a "
                         "2-colored cycle; the colors are not an acyclic coloring: use "
                         "acyclic_coloring(pattern)")
    gather = plan[:, 0].astype(np.intp) * nc + arr[plan[:, 1]]
    rows = pat.rows()
    diag_pos = np.flatnonzero(pat.indices == rows)
    diag_gather = rows[diag_pos].astype(np.intp) * nc + arr[rows[diag_pos]]
    return AcyclicRecovery(pat, arr, nc, plan, tree_ptr, gather, diag_pos, diag_gather)
