"""Greedy colorings of Jacobian and Hessian patterns, and independent checkers
(``tapead.coloring`` re-exports everything here)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from tapead.coloring import _kernels as _coloring
from tapead.coloring._pattern import Colors, _Pattern

__all__ = ["ORDERS", "AUTO", "column_coloring", "star_coloring", "acyclic_coloring",
           "color_groups", "is_valid_column_coloring", "is_valid_star_coloring",
           "is_valid_acyclic_coloring"]

#: Vertex orders accepted by the coloring functions.
ORDERS = ("natural", "largest_first", "smallest_last", "incidence_degree")
#: ``order="auto"``: try several orders (and, for star coloring, both
#: algorithms) and keep the coloring with fewest colors.
AUTO = "auto"
#: "auto" skips a candidate whose worst-case work bound exceeds this many
#: inner steps (a dense vertex colored early makes the greedy loops quadratic).
AUTO_WORK_LIMIT = 1e8



def _order(ptr_adj_or_none, n: int, order: str, build) -> np.ndarray:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; use one of "
                         f"{', '.join(ORDERS + (AUTO,))}")
    if order == "natural":
        return np.arange(n, dtype=np.int32)
    ptr, adj = ptr_adj_or_none if ptr_adj_or_none is not None else build()
    return _coloring.vertex_order(ptr, adj, order)


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


