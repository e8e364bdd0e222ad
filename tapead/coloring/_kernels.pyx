"""Graph coloring kernels for sparse Jacobians and Hessians.

Each kernel is a ``noexcept nogil`` function on int32 memoryviews that
writes into arrays allocated by its ``def`` wrapper, which returns them as
numpy arrays; errors come back as return codes and are raised in Python by
:mod:`tapead.coloring`, the user-facing API.  Graph code is iterative and
deterministic (no recursion, no hashing).

Conventions: ``ptr, adj`` is the CSR of a graph or pattern; ``eid[p]`` the
id of the undirected edge at position ``p`` (same for ``(u, w)`` and
``(w, u)``); ``color[v] == -1`` means not colored yet; ``forbidden[c] == v``
means color ``c`` is forbidden for ``v``; being stamped with the vertex id,
it is never cleared.
"""
import numpy as np


cdef inline int _smallest_free(const int[::1] forbidden, int v) noexcept nogil:
    cdef int c = 0
    while forbidden[c] == v:
        c += 1
    return c


# ---- Distance-2 (column) coloring and the column intersection graph ---------

cdef int _distance2_kernel(const int[::1] col_ptr, const int[::1] col_rows,
                           const int[::1] row_ptr, const int[::1] row_cols,
                           const int[::1] order, int[::1] color,
                           int[::1] forbidden) noexcept nogil:
    cdef int n = order.shape[0], t, j, p, q, c, ncolors = 0, r
    for t in range(n):
        j = order[t]
        for p in range(col_ptr[j], col_ptr[j + 1]):
            r = col_rows[p]
            for q in range(row_ptr[r], row_ptr[r + 1]):
                c = color[row_cols[q]]
                if c >= 0:
                    forbidden[c] = j
        c = _smallest_free(forbidden, j)
        color[j] = c
        if c >= ncolors:
            ncolors = c + 1
    return ncolors


def distance2_coloring(const int[::1] col_ptr, const int[::1] col_rows,
                       const int[::1] row_ptr, const int[::1] row_cols,
                       const int[::1] order):
    """Greedy distance-2 column coloring; returns ``(colors, ncolors)``."""
    cdef int n = order.shape[0], ncolors
    color = np.full(n, -1, dtype=np.int32)
    forbidden = np.full(n + 1, -1, dtype=np.int32)
    cdef int[::1] color_v = color, forbidden_v = forbidden
    with nogil:
        ncolors = _distance2_kernel(col_ptr, col_rows, row_ptr, row_cols,
                                    order, color_v, forbidden_v)
    return color, ncolors


cdef long long _intersection_kernel(const int[::1] col_ptr, const int[::1] col_rows,
                                    const int[::1] row_ptr, const int[::1] row_cols,
                                    int[::1] stamp, int[::1] ptr, int[::1] adj,
                                    bint fill) noexcept nogil:
    # Pass 1 (fill=False) counts neighbours into ptr; pass 2 writes adj.
    cdef int n = col_ptr.shape[0] - 1, j, p, q, k, pos = 0
    cdef long long total = 0, deg
    for j in range(n):
        stamp[j] = j
        deg = 0
        for p in range(col_ptr[j], col_ptr[j + 1]):
            for q in range(row_ptr[col_rows[p]], row_ptr[col_rows[p] + 1]):
                k = row_cols[q]
                if stamp[k] != j:
                    stamp[k] = j
                    if fill:
                        adj[pos] = k
                        pos += 1
                    deg += 1
        total += deg
        if not fill:
            ptr[j + 1] = <int>deg
    return total


def intersection_graph(const int[::1] col_ptr, const int[::1] col_rows,
                       const int[::1] row_ptr, const int[::1] row_cols):
    """Column intersection graph (columns sharing a row) as ``(ptr, adj)``."""
    cdef int n = col_ptr.shape[0] - 1
    cdef long long total
    ptr = np.zeros(n + 1, dtype=np.int32)
    stamp = np.full(n, -1, dtype=np.int32)
    cdef int[::1] ptr_v = ptr, stamp_v = stamp, adj_v
    with nogil:
        total = _intersection_kernel(col_ptr, col_rows, row_ptr, row_cols,
                                     stamp_v, ptr_v, ptr_v, False)
    if total > 2**31 - 1:
        raise ValueError("the column intersection graph has more than 2**31 edges; "
                         "use order='natural', which does not build it")
    np.cumsum(ptr, out=ptr)
    adj = np.empty(total, dtype=np.int32)
    adj_v = adj
    stamp.fill(-1)
    with nogil:
        _intersection_kernel(col_ptr, col_rows, row_ptr, row_cols,
                             stamp_v, ptr_v, adj_v, True)
    return ptr, adj


# ---- Vertex orders on a graph (ptr, adj) ------------------------------------

cdef inline void _bucket_push(int[::1] head, int[::1] nxt, int[::1] prv,
                              int b, int v) noexcept nogil:
    nxt[v] = head[b]
    prv[v] = -1
    if head[b] >= 0:
        prv[head[b]] = v
    head[b] = v


cdef inline void _bucket_remove(int[::1] head, int[::1] nxt, int[::1] prv,
                                int b, int v) noexcept nogil:
    if prv[v] >= 0:
        nxt[prv[v]] = nxt[v]
    else:
        head[b] = nxt[v]
    if nxt[v] >= 0:
        prv[nxt[v]] = prv[v]


cdef void _bucket_order_kernel(const int[::1] ptr, const int[::1] adj,
                               bint smallest_last, int[::1] key, int[::1] head,
                               int[::1] nxt, int[::1] prv, int[::1] done,
                               int[::1] order) noexcept nogil:
    # smallest_last: repeatedly remove a vertex of minimum remaining degree,
    # the order is the reverse of removal.  Otherwise incidence degree:
    # repeatedly pick the vertex with most already-ordered neighbours.
    cdef int n = ptr.shape[0] - 1, v, w, p, t, b = 0
    for v in range(n - 1, -1, -1):
        key[v] = ptr[v + 1] - ptr[v] if smallest_last else 0
        _bucket_push(head, nxt, prv, key[v], v)
    for t in range(n):
        if smallest_last:
            if b > 0:
                b -= 1
            while head[b] < 0:
                b += 1
        else:
            while b > 0 and head[b] < 0:
                b -= 1
        v = head[b]
        _bucket_remove(head, nxt, prv, b, v)
        done[v] = 1
        order[n - 1 - t if smallest_last else t] = v
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            if done[w]:
                continue
            _bucket_remove(head, nxt, prv, key[w], w)
            key[w] += -1 if smallest_last else 1
            _bucket_push(head, nxt, prv, key[w], w)
            if not smallest_last and key[w] > b:
                b = key[w]


def vertex_order(const int[::1] ptr, const int[::1] adj, str name):
    """Order the vertices of the graph ``(ptr, adj)`` as an int32 permutation.

    ``name`` is ``"largest_first"`` (degree descending, ties by index),
    ``"smallest_last"`` or ``"incidence_degree"``.
    """
    cdef int n = ptr.shape[0] - 1
    if name == "largest_first":
        return np.argsort(-np.diff(ptr), kind="stable").astype(np.int32)
    order = np.empty(n, dtype=np.int32)
    work = np.full((4, n + 1), -1, dtype=np.int32)
    done = np.zeros(n, dtype=np.int32)
    cdef int[::1] order_v = order, key = work[0], head = work[1]
    cdef int[::1] nxt = work[2], prv = work[3], done_v = done
    cdef bint smallest_last = name == "smallest_last"
    with nogil:
        _bucket_order_kernel(ptr, adj, smallest_last, key, head, nxt, prv,
                             done_v, order_v)
    return order


# ---- Adjacency graph of a symmetric pattern: mirrors and edge ids -----------

cdef int _mirror_kernel(const int[::1] ptr, const int[::1] idx, int[::1] fill,
                        int[::1] mirror) noexcept nogil:
    # With sorted rows, walking rows in order fills each transposed row in
    # sorted order, so position ptr[w] + fill[w] is the mirror of (u, w).
    cdef int n = ptr.shape[0] - 1, u, w, p, q
    for u in range(n):
        fill[u] = ptr[u]
    for u in range(n):
        for p in range(ptr[u], ptr[u + 1]):
            w = idx[p]
            q = fill[w]
            if q >= ptr[w + 1] or idx[q] != u:
                return u
            mirror[p] = q
            fill[w] = q + 1
    return -1


def symmetric_structure(const int[::1] ptr, const int[::1] idx):
    """Mirrors and edge ids of a square pattern with sorted rows.

    Returns ``(mirror, eid, ends, bad_row)``: ``mirror[p]`` is the position
    of ``(w, u)`` for position ``p`` of ``(u, w)``; ``eid[p]`` the id of the
    undirected edge (-1 on the diagonal); row ``e`` of ``ends`` is
    ``(u, w, p)`` with ``u < w``.  ``bad_row >= 0`` names a row with an
    entry whose mirror is missing (the others are then meaningless).
    """
    cdef int n = ptr.shape[0] - 1, u, p, e = 0, bad, ndiag = 0
    mirror = np.empty(idx.shape[0], dtype=np.int32)
    eid = np.full(idx.shape[0], -1, dtype=np.int32)
    fill = np.empty(n, dtype=np.int32)
    cdef int[::1] mirror_v = mirror, fill_v = fill, eid_v = eid
    with nogil:
        bad = _mirror_kernel(ptr, idx, fill_v, mirror_v)
        for u in range(n):
            for p in range(ptr[u], ptr[u + 1]):
                ndiag += idx[p] == u
    ends = np.empty(((idx.shape[0] - ndiag) // 2, 3), dtype=np.int32)
    cdef int[:, ::1] ends_v = ends
    if bad >= 0:
        return mirror, eid, ends, bad
    with nogil:
        for u in range(n):
            for p in range(ptr[u], ptr[u + 1]):
                if u < idx[p]:
                    eid_v[p] = e
                    eid_v[mirror_v[p]] = e
                    ends_v[e, 0] = u
                    ends_v[e, 1] = idx[p]
                    ends_v[e, 2] = p
                    e += 1
    return mirror, eid, ends, bad


# ---- Star coloring: GTMP 2007, Algorithm 4.1 (2-colored stars) --------------

cdef inline void _treat(const int[::1] ptr, const int[::1] adj, const int[::1] color,
                        int[::1] forbidden, int[::1] treated, int v, int w) noexcept nogil:
    # Forbid the colors of all neighbours of w for v.
    cdef int p, c
    for p in range(ptr[w], ptr[w + 1]):
        c = color[adj[p]]
        if c >= 0:
            forbidden[c] = v
    treated[w] = v


cdef int _star_kernel(const int[::1] ptr, const int[::1] adj, const int[::1] eid,
                      const int[::1] order, int[::1] color, int[::1] forbidden,
                      int[:, ::1] first, int[::1] treated, int[::1] star,
                      int[::1] hub) noexcept nogil:
    # first[c] = (v, w, e): the first neighbour w of colour c seen from v,
    # through edge e.  star[e] = star of edge e; hub[s] = hub of star s,
    # -1 while the star is a single edge.
    cdef int n = order.shape[0], t, v, w, x, p, q, c, cw, s, nstars = 0, ncolors = 0
    cdef bint found
    for t in range(n):
        v = order[t]
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            cw = color[w]
            if cw < 0:
                continue
            forbidden[cw] = v
            if first[cw, 0] == v:
                # Case 1: v has two neighbours q, w of colour cw, so v would be
                # the hub of a 2-colored star: forbid the colours around both.
                if treated[first[cw, 1]] != v:
                    _treat(ptr, adj, color, forbidden, treated, v, first[cw, 1])
                _treat(ptr, adj, color, forbidden, treated, v, w)
            else:
                first[cw, 0] = v
                first[cw, 1] = w
                first[cw, 2] = eid[p]
                # Case 2: x is the hub of the star holding w-x, so colour(x)
                # on v would close the 2-colored path v-w-x-y.
                for q in range(ptr[w], ptr[w + 1]):
                    x = adj[q]
                    if x != v and color[x] >= 0 and hub[star[eid[q]]] == x:
                        forbidden[color[x]] = v
        c = _smallest_free(forbidden, v)
        color[v] = c
        if c >= ncolors:
            ncolors = c + 1
        # Update the 2-colored stars containing the new edges v-w.
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            cw = color[w]
            if cw < 0:
                continue
            found = False
            for q in range(ptr[w], ptr[w + 1]):
                x = adj[q]
                if x != v and color[x] == c:
                    s = star[eid[q]]
                    hub[s] = w
                    star[eid[p]] = s
                    found = True
                    break
            if not found:
                if first[cw, 0] == v and first[cw, 1] != w:
                    s = star[first[cw, 2]]
                    hub[s] = v
                    star[eid[p]] = s
                else:
                    hub[nstars] = -1
                    star[eid[p]] = nstars
                    nstars += 1
    return ncolors


def star_coloring_kernel(const int[::1] ptr, const int[::1] adj,
                         const int[::1] eid, const int[::1] order):
    """Star coloring (GTMP 2007, Alg. 4.1); returns ``(colors, ncolors)``."""
    cdef int n = order.shape[0], ne = adj.shape[0] // 2, ncolors
    color = np.full(n, -1, dtype=np.int32)
    work = np.full((2, n + 1), -1, dtype=np.int32)
    first = np.full((n + 1, 3), -1, dtype=np.int32)
    stars = np.full((2, ne + 1), -1, dtype=np.int32)
    cdef int[::1] color_v = color, forbidden = work[0], treated = work[1]
    cdef int[::1] star = stars[0], hub = stars[1]
    cdef int[:, ::1] first_v = first
    with nogil:
        ncolors = _star_kernel(ptr, adj, eid, order, color_v, forbidden,
                               first_v, treated, star, hub)
    return color, ncolors


# ---- Star coloring: GMP 2005, Algorithm 4.1 (distance-2 based) ---------------

cdef int _star_d2_kernel(const int[::1] ptr, const int[::1] adj, const int[::1] order,
                         int[::1] color, int[::1] forbidden) noexcept nogil:
    # Gebremedhin, Manne & Pothen, SIAM Rev. 47(4), 2005, Algorithm 4.1.
    # Two vertices at distance 2 through an uncolored vertex get distinct
    # colors; through a colored w, v may take color(x) unless x already has
    # another neighbour of color(w) (the path v-w-x-y would be 2-colored).
    cdef int n = order.shape[0], t, v, w, x, y, p, q, r, c, cw, ncolors = 0
    for t in range(n):
        v = order[t]
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            cw = color[w]
            if cw >= 0:
                forbidden[cw] = v
            for q in range(ptr[w], ptr[w + 1]):
                x = adj[q]
                c = color[x]
                if c < 0 or forbidden[c] == v:
                    continue          # uncolored, or forbidden already
                if cw < 0:
                    forbidden[c] = v
                    continue
                for r in range(ptr[x], ptr[x + 1]):
                    y = adj[r]
                    if y != w and color[y] == cw:
                        forbidden[c] = v
                        break
        c = _smallest_free(forbidden, v)
        color[v] = c
        if c >= ncolors:
            ncolors = c + 1
    return ncolors


def star_coloring_d2_kernel(const int[::1] ptr, const int[::1] adj,
                            const int[::1] order):
    """Distance-2 based star coloring (GMP 2005, Alg. 4.1); ``(colors, ncolors)``.

    Often fewer colors than :func:`star_coloring_kernel` on irregular graphs,
    but its work is ``sum over edges (w, x) of deg(w) * deg(x)``: quadratic on
    a graph with a dense vertex (see :func:`star_d2_work`).
    """
    cdef int n = order.shape[0], ncolors
    color = np.full(n, -1, dtype=np.int32)
    forbidden = np.full(n + 1, -1, dtype=np.int32)
    cdef int[::1] color_v = color, forbidden_v = forbidden
    with nogil:
        ncolors = _star_d2_kernel(ptr, adj, order, color_v, forbidden_v)
    return color, ncolors


def star_d2_work(const int[::1] ptr, const int[::1] adj):
    """Upper bound on the inner steps of :func:`star_coloring_d2_kernel`:
    ``sum over directed edges (w, x) of deg(w) * (1 + deg(x))``."""
    cdef int n = ptr.shape[0] - 1, w, q
    cdef double total = 0.0, s
    with nogil:
        for w in range(n):
            s = 0.0
            for q in range(ptr[w], ptr[w + 1]):
                s += 1.0 + (ptr[adj[q] + 1] - ptr[adj[q]])
            total += s * (ptr[w + 1] - ptr[w])
    return total


# ---- Acyclic coloring: GTMP 2007, Algorithm 3.1 (disjoint-set forest of edges) ---

cdef inline int _find(int[::1] parent, int e) noexcept nogil:
    # Path halving: iterative, every visited node jumps to its grandparent.
    while parent[e] != e:
        parent[e] = parent[parent[e]]
        e = parent[e]
    return e


cdef inline void _union(int[::1] parent, int[::1] rank, int a, int b) noexcept nogil:
    # a, b are roots.
    if a == b:
        return
    if rank[a] < rank[b]:
        a, b = b, a
    parent[b] = a
    if rank[a] == rank[b]:
        rank[a] += 1


cdef int _acyclic_kernel(const int[::1] ptr, const int[::1] adj, const int[::1] eid,
                         const int[::1] order, int[::1] color, int[::1] forbidden,
                         int[:, ::1] first, int[:, ::1] visit, int[::1] parent,
                         int[::1] rank) noexcept nogil:
    # first[c] = (v, w, e) as in the star kernel; visit[root] = (v, w): the
    # first visit to the 2-colored tree with that root, from v through w.
    cdef int n = order.shape[0], t, v, w, x, p, q, c, cx, r, ncolors = 0
    for t in range(n):
        v = order[t]
        for p in range(ptr[v], ptr[v + 1]):
            c = color[adj[p]]
            if c >= 0:
                forbidden[c] = v
        for p in range(ptr[v], ptr[v + 1]):
            w = adj[p]
            if color[w] < 0:
                continue
            for q in range(ptr[w], ptr[w + 1]):
                x = adj[q]
                cx = color[x]
                if cx < 0 or forbidden[cx] == v:
                    continue
                # preventCycle: reaching one tree through two different
                # neighbours of v would close a 2-colored cycle.
                r = _find(parent, eid[q])
                if visit[r, 0] != v:
                    visit[r, 0] = v
                    visit[r, 1] = w
                elif visit[r, 1] != w:
                    forbidden[cx] = v
        c = _smallest_free(forbidden, v)
        color[v] = c
        if c >= ncolors:
            ncolors = c + 1
        for p in range(ptr[v], ptr[v + 1]):
            # growStar: merge the edges from v to neighbours of one colour.
            w = adj[p]
            cx = color[w]
            if cx < 0:
                continue
            if first[cx, 0] != v:
                first[cx, 0] = v
                first[cx, 1] = w
                first[cx, 2] = eid[p]
            else:
                _union(parent, rank, _find(parent, eid[p]), _find(parent, first[cx, 2]))
        for p in range(ptr[v], ptr[v + 1]):
            # mergeTrees: v-w-x with colour(x) == colour(v) joins two trees.
            w = adj[p]
            if color[w] < 0:
                continue
            for q in range(ptr[w], ptr[w + 1]):
                x = adj[q]
                if x != v and color[x] == c:
                    _union(parent, rank, _find(parent, eid[p]), _find(parent, eid[q]))
    return ncolors


def acyclic_coloring_kernel(const int[::1] ptr, const int[::1] adj,
                            const int[::1] eid, const int[::1] order):
    """Acyclic coloring (GTMP 2007, Alg. 3.1); returns ``(colors, ncolors)``."""
    cdef int n = order.shape[0], ne = adj.shape[0] // 2, ncolors
    color = np.full(n, -1, dtype=np.int32)
    forbidden = np.full(n + 1, -1, dtype=np.int32)
    first = np.full((n + 1, 3), -1, dtype=np.int32)
    visit = np.full((ne + 1, 2), -1, dtype=np.int32)
    parent = np.arange(ne + 1, dtype=np.int32)
    rank = np.zeros(ne + 1, dtype=np.int32)
    cdef int[::1] color_v = color, forbidden_v = forbidden
    cdef int[::1] parent_v = parent, rank_v = rank
    cdef int[:, ::1] first_v = first, visit_v = visit
    with nogil:
        ncolors = _acyclic_kernel(ptr, adj, eid, order, color_v, forbidden_v,
                                  first_v, visit_v, parent_v, rank_v)
    return color, ncolors


include "_kernels_recovery.pxi"
