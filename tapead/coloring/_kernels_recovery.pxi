# Included by _coloring.pyx: the kernels of tapead.recovery.

# ---- Recovery: isolated entries (gathers), substitution along 2-colored trees ---

def unique_in_row(const int[::1] ptr, const int[::1] idx, const int[::1] color,
                  int ncolors):
    """For every CSR position ``(i, j)``: is ``j`` the only column of its color
    in row ``i``?  Then ``B[i, color[j]]`` is the entry itself (int8 0/1).
    """
    cdef int m = ptr.shape[0] - 1, i, p, c
    unique = np.empty(idx.shape[0], dtype=np.int8)
    work = np.full((2, ncolors + 1), -1, dtype=np.int32)
    cdef signed char[::1] unique_v = unique
    cdef int[::1] stamp = work[0], count = work[1]
    with nogil:
        for i in range(m):
            for p in range(ptr[i], ptr[i + 1]):
                c = color[idx[p]]
                if stamp[c] != i:
                    stamp[c] = i
                    count[c] = 0
                count[c] += 1
            for p in range(ptr[i], ptr[i + 1]):
                unique_v[p] = count[color[idx[p]]] == 1
    return unique


cdef int _components_kernel(const int[::1] ptr, const int[::1] idx, const int[::1] eid,
                            const int[::1] color, int[::1] parent, int[::1] rank,
                            int[:, ::1] first, int[::1] root) noexcept nogil:
    # Union the edges of each 2-colored component: at a vertex v, the edges
    # to neighbours of one color lie in one component.  Returns -1, or a
    # vertex with a neighbour of its own color.
    cdef int n = ptr.shape[0] - 1, v, w, p, c, e
    for v in range(n):
        for p in range(ptr[v], ptr[v + 1]):
            w = idx[p]
            if w == v:
                continue
            c = color[w]
            if c == color[v]:
                return v
            if first[c, 0] != v:
                first[c, 0] = v
                first[c, 1] = eid[p]
            else:
                _union(parent, rank, _find(parent, eid[p]), _find(parent, first[c, 1]))
    for e in range(root.shape[0]):
        root[e] = _find(parent, e)
    return -1


cdef int _peel_kernel(const int[::1] mirror, const int[:, ::1] ends,
                      const int[::1] tree_ptr, const int[::1] tree_edges,
                      int[::1] deg, int[::1] exor, int[::1] stack,
                      int[:, ::1] plan) noexcept nogil:
    # Peel each tree from its leaves.  A leaf's one remaining edge is the xor
    # of the ids of its remaining edges.  Plan row = (leaf, other, position
    # of (leaf, other), position of (other, leaf)).  Returns -1, or a vertex
    # of a component that is not a tree (a 2-colored cycle).
    cdef int t, k, e, v, a, b, p, top, out = 0
    for t in range(tree_ptr.shape[0] - 1):
        for k in range(tree_ptr[t], tree_ptr[t + 1]):
            e = tree_edges[k]
            for a in range(2):
                v = ends[e, a]
                deg[v] += 1
                exor[v] ^= e
        top = 0
        for k in range(tree_ptr[t], tree_ptr[t + 1]):
            for a in range(2):
                v = ends[tree_edges[k], a]
                if deg[v] == 1:  # each leaf is the end of exactly one edge
                    stack[top] = v
                    top += 1
        while top > 0:
            top -= 1
            a = stack[top]
            if deg[a] != 1:
                continue
            e = exor[a]
            b = ends[e, 1] if ends[e, 0] == a else ends[e, 0]
            p = ends[e, 2] if ends[e, 0] == a else mirror[ends[e, 2]]
            plan[out, 0] = a
            plan[out, 1] = b
            plan[out, 2] = p
            plan[out, 3] = mirror[p]
            out += 1
            deg[a] = 0
            exor[a] = 0
            deg[b] -= 1
            exor[b] ^= e
            if deg[b] == 1:
                stack[top] = b
                top += 1
        if out != tree_ptr[t + 1]:
            return ends[tree_edges[tree_ptr[t]], 0]
    return -1


def tree_plan(const int[::1] ptr, const int[::1] idx, const int[::1] mirror,
              const int[::1] eid, const int[:, ::1] ends, const int[::1] color,
              int ncolors):
    """Substitution order along the 2-colored trees of an acyclic coloring.

    Returns ``(plan, tree_ptr, bad)``: ``plan`` is ``(nedges, 4)`` int32 with
    rows ``(leaf, other, pos_leaf, pos_other)`` in solve order, the rows of
    tree ``t`` being ``tree_ptr[t]:tree_ptr[t + 1]``; ``bad >= 0`` names a
    vertex where the coloring is not proper or closes a 2-colored cycle.
    """
    cdef int n = ptr.shape[0] - 1, ne = ends.shape[0], bad
    parent = np.arange(ne, dtype=np.int32)
    work = np.zeros((2, ne), dtype=np.int32)
    vwork = np.zeros((3, n + 1), dtype=np.int32)
    first = np.full((ncolors + 1, 2), -1, dtype=np.int32)
    plan = np.empty((ne, 4), dtype=np.int32)
    cdef int[::1] parent_v = parent, rank = work[0], root = work[1]
    cdef int[::1] deg = vwork[0], exor = vwork[1], stack = vwork[2]
    cdef int[:, ::1] first_v = first, plan_v = plan
    with nogil:
        bad = _components_kernel(ptr, idx, eid, color, parent_v, rank, first_v, root)
    if bad >= 0:
        return plan, np.zeros(1, dtype=np.int32), bad
    _, tree_of = np.unique(work[1], return_inverse=True)
    tree_edges = np.argsort(tree_of, kind="stable").astype(np.int32)
    tree_ptr = np.zeros(tree_of.max(initial=-1) + 2, dtype=np.int32)
    np.cumsum(np.bincount(tree_of), out=tree_ptr[1:])
    cdef int[::1] tree_ptr_v = tree_ptr, tree_edges_v = tree_edges
    with nogil:
        bad = _peel_kernel(mirror, ends, tree_ptr_v, tree_edges_v, deg, exor, stack,
                           plan_v)
    return plan, tree_ptr, bad


def substitute(const double[::1] b, const Py_ssize_t[::1] gather,
               const int[:, ::1] plan, const int[::1] tree_ptr,
               double[::1] acc, double[::1] values):
    """Solve for the off-diagonal values along the trees, leaves first.

    ``b`` is the flattened compressed product and ``gather[k]`` the index in
    it of plan row ``k`` (``leaf * ncolors + color[other]``).  A leaf's entry
    is its row sum in ``b`` less the entries already solved in that row of the
    tree, accumulated in ``acc`` (zeros, one per vertex, left as zeros).
    ``values`` (pattern order) receives each value at both mirrored places.
    """
    cdef int t, k, a, w, ntrees = tree_ptr.shape[0] - 1
    cdef double val
    with nogil:
        for t in range(ntrees):
            for k in range(tree_ptr[t], tree_ptr[t + 1]):
                a = plan[k, 0]
                w = plan[k, 1]
                val = b[gather[k]] - acc[a]
                acc[a] = 0.0
                acc[w] += val
                values[plan[k, 2]] = val
                values[plan[k, 3]] = val
            acc[plan[tree_ptr[t + 1] - 1, 1]] = 0.0
