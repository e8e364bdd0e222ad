"""Graph coloring for sparse Jacobians and Hessians, and recovery.

A sparse derivative is computed from a few directional derivatives: the
columns are split into groups (colors), one seed direction per group is
pushed through forward mode, and the entries are read back from the
compressed product.

* :func:`column_coloring` -- greedy distance-2 coloring of the column
  intersection graph (Jacobians, ``B = J @ S``).
* :func:`star_coloring` -- Gebremedhin, Tarafdar, Manne & Pothen (2007),
  Algorithm 4.1 (symmetric patterns, direct recovery).
* :func:`acyclic_coloring` -- the same paper, Algorithm 3.1 (fewer colors,
  recovery by substitution along 2-colored trees).
* :func:`jacobian_recovery`, :func:`star_recovery`, :func:`acyclic_recovery`
  -- built once per pattern, then ``recover(B)`` gives the nonzero values in
  pattern order (CSR, row-major).
* :func:`is_valid_column_coloring`, :func:`is_valid_star_coloring`,
  :func:`is_valid_acyclic_coloring` -- independent numpy checkers.

The kernels are in :mod:`tapead._coloring`; this module validates input once
and converts patterns to int32 CSR/CSC.  A *pattern* is a ``scipy.sparse``
matrix or array (every stored entry is structural, even an explicit zero) or
a dense array (its nonzeros).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import _coloring

__all__ = [
    "ORDERS",
    "AUTO",
    "column_coloring",
    "star_coloring",
    "acyclic_coloring",
    "color_groups",
    "jacobian_recovery",
    "star_recovery",
    "acyclic_recovery",
    "JacobianRecovery",
    "StarRecovery",
    "AcyclicRecovery",
    "is_valid_column_coloring",
    "is_valid_star_coloring",
    "is_valid_acyclic_coloring",
]

#: Vertex orders accepted by the coloring functions.
ORDERS = ("natural", "largest_first", "smallest_last", "incidence_degree")
#: ``order="auto"``: try several orders (and, for star coloring, both
#: algorithms) and keep the coloring with fewest colors.
AUTO = "auto"
#: "auto" skips a candidate whose worst-case work bound exceeds this many
#: inner steps (a dense vertex colored early makes the greedy loops quadratic).
AUTO_WORK_LIMIT = 1e8

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


def _order(ptr_adj_or_none, n: int, order: str, build) -> np.ndarray:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; use one of "
                         f"{', '.join(ORDERS + (AUTO,))}")
    if order == "natural":
        return np.arange(n, dtype=np.int32)
    ptr, adj = ptr_adj_or_none if ptr_adj_or_none is not None else build()
    return _coloring.vertex_order(ptr, adj, order)


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

def column_coloring(pattern: Any, order: str = "natural") -> Colors:
    """Greedy distance-2 coloring of the columns of a Jacobian pattern.

    Each column, in ``order``, takes the smallest color not used by an
    earlier-colored column that shares a row with it, so columns of one color
    can share a seed direction.

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (m, n)
        Sparsity pattern of J.
    order : {"natural", "largest_first", "smallest_last", "incidence_degree", "auto"}
        Vertex order on the column intersection graph.  ``"natural"`` never
        builds that graph; the others do (its size is the sum of the squared
        row counts).  ``"auto"`` colors in natural order, then tries the
        other orders (when that graph has at most :data:`AUTO_WORK_LIMIT`
        entries) unless the natural coloring already uses as many colors as
        the longest row has entries, and keeps the fewest colors.

    Returns
    -------
    tuple of int, length n
        Color of every column, numbered from 0.

    Examples
    --------
    >>> column_coloring([[1, 0, 1], [0, 1, 0], [1, 0, 1]])
    (0, 0, 1)
    """
    pat = _Pattern(pattern)
    n = pat.shape[1]
    col_ptr, col_rows = pat.csc()
    if order == AUTO:
        return tuple(_column_auto(pat, col_ptr, col_rows).tolist())
    perm = _order(None, n, order, lambda: _coloring.intersection_graph(
        col_ptr, col_rows, pat.indptr, pat.indices))
    colors, _ = _coloring.distance2_coloring(col_ptr, col_rows, pat.indptr,
                                             pat.indices, perm)
    return tuple(colors.tolist())


def _column_auto(pat: _Pattern, col_ptr, col_rows) -> np.ndarray:
    """Fewest colors over the orders; natural first, then the others while
    the natural coloring is above the lower bound (the longest row) and the
    column intersection graph is small enough to build."""
    n = pat.shape[1]
    natural = np.arange(n, dtype=np.int32)
    best, k = _coloring.distance2_coloring(col_ptr, col_rows, pat.indptr,
                                           pat.indices, natural)
    row_counts = np.diff(pat.indptr).astype(np.float64)
    lower = int(row_counts.max(initial=0))
    if k <= max(lower, 1) or float(row_counts @ row_counts) > AUTO_WORK_LIMIT:
        return best
    ptr, adj = _coloring.intersection_graph(col_ptr, col_rows, pat.indptr, pat.indices)
    for name in ORDERS[1:]:
        perm = _coloring.vertex_order(ptr, adj, name)
        colors, kc = _coloring.distance2_coloring(col_ptr, col_rows, pat.indptr,
                                                  pat.indices, perm)
        if kc < k:
            best, k = colors, kc
            if k <= lower:
                break
    return best


def _symmetric_coloring(pattern, order, kernel, what) -> Colors:
    pat = _Pattern(pattern)
    ptr, adj, eid = pat.graph(what)
    if order == AUTO:
        return tuple(_symmetric_auto(pat, ptr, adj, eid, what).tolist())
    perm = _order((ptr, adj), pat.shape[0], order, None)
    colors, _ = kernel(ptr, adj, eid, perm)
    return tuple(colors.tolist())


def _lower_bound(ptr, adj, n: int, acyclic: bool) -> int:
    """Colors any star (or acyclic) coloring of the graph needs: 1 without
    edges; 2 for a star forest (every edge has an end of degree 1) or, for an
    acyclic coloring, any forest; otherwise 3 (a path on four vertices needs
    3 star colors, a cycle 3 acyclic colors, a triangle 3 of either)."""
    if len(adj) == 0:
        return 1 if n else 0
    if acyclic:
        graph = sp.csr_array((np.ones(len(adj), dtype=np.int8), adj, ptr), shape=(n, n))
        ncomp, _ = connected_components(graph, directed=False)
        return 2 if len(adj) // 2 == n - ncomp else 3
    deg = np.diff(ptr)
    rows = np.repeat(np.arange(n), deg)
    return 2 if np.all((deg[rows] == 1) | (deg[adj] == 1)) else 3


def _symmetric_auto(pat, ptr, adj, eid, what) -> np.ndarray:
    """The coloring with fewest colors among the candidates, in a fixed order
    (ties keep the earlier one), stopping at the lower bound.

    Star: Algorithm 4.1 of GTMP 2007 in the natural, largest-first,
    smallest-last and incidence-degree orders, then the distance-2 based
    Algorithm 4.1 of GMP 2005 in the same orders (fewer colors on irregular
    graphs; CasADi's ``star_coloring`` is that algorithm, largest first).
    Acyclic: Algorithm 3.1 in the four orders, then the distance-2 star
    coloring in largest-first order (a star coloring is acyclic).  Candidates whose worst-case work bound
    exceeds :data:`AUTO_WORK_LIMIT` are skipped (a dense vertex colored early
    makes the greedy loops quadratic); the natural order always runs.
    """
    n = pat.shape[0]
    acyclic = what.startswith("acyclic")
    lower = _lower_bound(ptr, adj, n, acyclic)
    deg = np.diff(ptr).astype(np.float64)
    greedy_ok = float(deg @ deg) <= AUTO_WORK_LIMIT
    d2_ok = _coloring.star_d2_work(ptr, adj) <= AUTO_WORK_LIMIT
    perms: dict = {}

    def perm(name):
        if name not in perms:
            perms[name] = (np.arange(n, dtype=np.int32) if name == "natural"
                           else _coloring.vertex_order(ptr, adj, name))
        return perms[name]

    gtmp = (_coloring.acyclic_coloring_kernel if acyclic
            else _coloring.star_coloring_kernel)
    candidates = [lambda name=name: gtmp(ptr, adj, eid, perm(name))
                  for name in ORDERS if name == "natural" or greedy_ok]
    if d2_ok:
        d2_orders = ORDERS[1:2] if acyclic else ORDERS[1:] + ORDERS[:1]
        candidates += [lambda name=name: _coloring.star_coloring_d2_kernel(
                           ptr, adj, perm(name))
                       for name in d2_orders]
    best, k = None, n + 1
    for candidate in candidates:
        colors, kc = candidate()
        if kc < k:
            best, k = colors, kc
            if k <= lower:
                break
    return best


def star_coloring(pattern: Any, order: str = "natural") -> Colors:
    """Star coloring of a symmetric (Hessian) pattern.

    Gebremedhin, Tarafdar, Manne & Pothen, SIAM J. Sci. Comput. 29(3), 2007,
    Algorithm 4.1.  The coloring is proper on the adjacency graph (diagonal
    ignored) and every path on four vertices uses at least three colors, so
    every entry can be read directly from ``B = H @ S`` (see
    :func:`star_recovery`).

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (n, n)
        Structurally symmetric sparsity pattern of H.
    order : {"natural", "largest_first", "smallest_last", "incidence_degree", "auto"}
        Vertex order on the adjacency graph.  ``"auto"`` keeps the fewest
        colors among this algorithm in the four orders and the distance-2
        based star coloring of Gebremedhin, Manne & Pothen (SIAM Rev. 2005,
        Algorithm 4.1; CasADi's ``star_coloring``) in the ordered ones,
        skipping candidates too costly on the pattern; it is at least as good
        as every candidate it ran.

    Returns
    -------
    tuple of int, length n

    Examples
    --------
    >>> import numpy as np
    >>> arrow = np.eye(5, dtype=bool); arrow[-1, :] = arrow[:, -1] = True
    >>> star_coloring(arrow)
    (0, 0, 0, 0, 1)
    """
    return _symmetric_coloring(pattern, order, _coloring.star_coloring_kernel,
                               "star_coloring")


def acyclic_coloring(pattern: Any, order: str = "natural") -> Colors:
    """Acyclic coloring of a symmetric (Hessian) pattern.

    Gebremedhin, Tarafdar, Manne & Pothen, SIAM J. Sci. Comput. 29(3), 2007,
    Algorithm 3.1 (disjoint-set forest of 2-colored trees).  The coloring is
    proper and every cycle uses at least three colors; it needs at most as
    many colors as a star coloring, and recovery solves along the 2-colored
    trees (:func:`acyclic_recovery`).

    Parameters
    ----------
    pattern : scipy.sparse matrix or array_like, shape (n, n)
        Structurally symmetric sparsity pattern of H.
    order : {"natural", "largest_first", "smallest_last", "incidence_degree", "auto"}
        ``"auto"``: the fewest colors of this algorithm in the four orders and
        of the distance-2 star coloring in largest-first order.

    Returns
    -------
    tuple of int, length n
    """
    return _symmetric_coloring(pattern, order, _coloring.acyclic_coloring_kernel,
                               "acyclic_coloring")


def color_groups(colors: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Column indices of each color, in increasing color and column order.

    >>> color_groups((0, 0, 1))
    ((0, 1), (2,))
    """
    arr = np.asarray(colors, dtype=np.int64)
    if arr.size == 0:
        return ()
    perm = np.argsort(arr, kind="stable")
    bounds = np.searchsorted(arr[perm], np.arange(int(arr.max()) + 2))
    return tuple(tuple(perm[bounds[c]:bounds[c + 1]].tolist())
                 for c in range(len(bounds) - 1))


# --------------------------------------------------------------------------
# Independent checkers (numpy/scipy only, no shared code with the kernels)
# --------------------------------------------------------------------------

def _coo(pattern: Any) -> tuple[tuple[int, int], np.ndarray, np.ndarray]:
    if sp.issparse(pattern):
        coo = sp.coo_array(pattern)
        return coo.shape, np.asarray(coo.row, np.int64), np.asarray(coo.col, np.int64)
    dense = np.asarray(pattern)
    rows, cols = np.nonzero(dense)
    return dense.shape, rows.astype(np.int64), cols.astype(np.int64)


def is_valid_column_coloring(pattern: Any, colors: Sequence[int]) -> bool:
    """True when no row has two distinct columns of one color."""
    (m, n), rows, cols = _coo(pattern)
    colors = np.asarray(colors, dtype=np.int64)
    if colors.shape != (n,) or (n and colors.min() < 0):
        return False
    cells = np.unique(rows * n + cols)  # distinct (row, column) entries
    r, c = cells // n, cells % n
    return len(np.unique(r * (n + 1) + colors[c])) == len(cells)


def _edges(pattern: Any, colors) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    (m, n), rows, cols = _coo(pattern)
    colors = np.asarray(colors, dtype=np.int64)
    if m != n or colors.shape != (n,):
        return None
    off = rows != cols
    cells = np.unique(np.concatenate([rows[off] * n + cols[off], cols[off] * n + rows[off]]))
    return cells // n, cells % n, colors  # both directions of every edge


def is_valid_star_coloring(pattern: Any, colors: Sequence[int]) -> bool:
    """True for a proper coloring with no 2-colored path on four vertices.

    The pattern is read as an undirected graph (diagonal ignored, symmetrized).
    A path v-w-x-y is 2-colored exactly when w has a neighbor other than x of
    color(x) and x has a neighbor other than w of color(w).
    """
    edges = _edges(pattern, colors)
    if edges is None:
        return False
    u, w, colors = edges
    if np.any(colors[u] == colors[w]):
        return False
    k = int(colors.max()) + 1 if len(colors) else 1
    key = u * k + colors[w]  # (vertex, neighbor color) for every directed edge
    uniq, count = np.unique(key, return_counts=True)
    many = count[np.searchsorted(uniq, key)] >= 2  # u has >= 2 nbrs of color(w)
    mirror = count[np.searchsorted(uniq, w * k + colors[u])] >= 2
    return not np.any(many & mirror)


def is_valid_acyclic_coloring(pattern: Any, colors: Sequence[int]) -> bool:
    """True for a proper coloring in which every cycle uses three colors.

    Each pair of color classes must induce a forest: edges = vertices -
    components, counted with ``scipy.sparse.csgraph``.
    """
    edges = _edges(pattern, colors)
    if edges is None:
        return False
    u, w, colors = edges
    if np.any(colors[u] == colors[w]):
        return False
    one = u < w
    u, w = u[one], w[one]
    if len(u) == 0:
        return True
    k = int(colors.max()) + 1
    lo = np.minimum(colors[u], colors[w])
    pair = lo * k + np.maximum(colors[u], colors[w])
    # One node per (vertex, color pair) the vertex takes part in.
    keys, inv = np.unique(np.concatenate([u * k * k + pair, w * k * k + pair]),
                          return_inverse=True)
    a, b = inv[:len(u)], inv[len(u):]
    graph = sp.coo_array((np.ones(len(a)), (a, b)), shape=(len(keys), len(keys)))
    ncomp, _ = connected_components(graph, directed=False)
    return len(u) == len(keys) - ncomp


# the recoveries live in tapead.recovery; imported last (it imports from here)
from .recovery import (AcyclicRecovery, JacobianRecovery, StarRecovery,  # noqa: E402
                       acyclic_recovery, jacobian_recovery, star_recovery)
