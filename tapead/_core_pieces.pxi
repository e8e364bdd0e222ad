# An array adjoint kept as its pieces until it is read (included by
# _core_adjoints.pxi).
#
# The cotangents that reach an array x through basic indices -- a ``Scatter``
# of g into x[a:b] (the VJP of indexing), a product g * d added through x[c:d]
# (the VJP of sin or cos with the partner saved, ``_Product``) -- would each
# cost a pass over x's adjoint: zeros, then g added, then the product added.
# When each piece covers a C-contiguous block of x (a slice of leading rows,
# an int index, ...) the sweep keeps them (``hobj`` 5, at most PIECES_MAX of
# them) and writes the adjoint in one pass when it is read: every element
# 0.0 + (the first piece that covers it) + (the next one) ..., in the order the
# pieces arrived: the roundings of the unfused path, which starts from zeros
# and adds each cotangent in place as it arrives.  Anything else that arrives
# (an array, a traced value, a fifth piece) writes the pieces out first and is
# added as before.

cdef extern from "_core_fused.h" nogil:
    void tapead_pieces_first(double *out, long n, int k1, const double *p1,
                             const double *q1)
    void tapead_pieces_first2(double *out, long n, int k1, const double *p1,
                              const double *q1, int k2, const double *p2, const double *q2)
    void tapead_pieces_add(double *out, long n, int k, const double *p, const double *q)

cdef enum:
    PIECES_MAX = 4              # pieces kept per adjoint; a fifth writes them out
    PIECE_VALUE = 0             # an array g
    PIECE_PRODUCT = 1           # g * d, rounded
    PIECE_NEG_PRODUCT = 2       # -(g * d)

cdef bint _pieces_enabled = True
cdef unsigned long long _pieces_written = 0     # adjoints written from pieces (introspection)


def set_adjoint_pieces(bint on):
    """Turn the one-pass writing of indexed cotangents on or off (for tests that
    compare it with the unfused path); returns the previous setting."""
    global _pieces_enabled
    old = _pieces_enabled
    _pieces_enabled = on
    return old


def adjoint_pieces_written():
    """How many adjoints the reverse sweeps have written from pieces since import."""
    return _pieces_written


@cython.final
cdef class _Pieces:
    """The adjoint of a float64 array node as the cotangents that reached it
    through basic indices, not added yet: ``out`` (uninitialised, the node's
    shape) and, for each piece in arrival order, the flat block of ``out`` it
    covers (``off``, ``size``), its kind and its operand arrays (kept alive in
    ``keep``)."""
    cdef object out
    cdef Py_ssize_t n, count
    cdef bint written
    cdef Py_ssize_t off[PIECES_MAX]
    cdef Py_ssize_t size[PIECES_MAX]
    cdef int kind[PIECES_MAX]
    cdef const double *p[PIECES_MAX]
    cdef const double *q[PIECES_MAX]
    cdef list keep


cdef _Pieces _pieces_new(object shape):
    cdef _Pieces pp = _Pieces.__new__(_Pieces)
    pp.out = np.empty(shape, dtype=np.float64)
    pp.n = (<object>pp.out).size
    pp.count = 0
    pp.written = False
    pp.keep = []
    return pp


cdef Py_ssize_t _piece_offset(_Pieces pp, object idx, object g) except -2:
    """The flat offset of the block ``out[idx]`` when that view is C-contiguous
    with ``g``'s shape (``g`` a C-contiguous float64 array), else -1."""
    if not _c_f64(g):
        return -1
    view = (<object>pp.out)[idx]
    if not (type(view) is np.ndarray and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>view)
            and cnp.PyArray_SAMESHAPE(<cnp.ndarray>view, <cnp.ndarray>g)):
        return -1
    return (<char *>cnp.PyArray_DATA(<cnp.ndarray>view)
            - <char *>cnp.PyArray_DATA(<cnp.ndarray>pp.out)) // <Py_ssize_t>sizeof(double)


cdef bint _pieces_take(_Pieces pp, object idx, int kind, object g, object d) except -1:
    """Keep the piece ``g`` (kind 0) or ``g * d`` placed at ``idx``; False (nothing
    kept) when it does not cover a C-contiguous block or the pieces are full."""
    cdef Py_ssize_t k = pp.count, off
    if k >= PIECES_MAX:
        return False
    if kind != PIECE_VALUE and not (_c_f64(d) and cnp.PyArray_SAMESHAPE(<cnp.ndarray>d,
                                                                        <cnp.ndarray>g)):
        return False
    off = _piece_offset(pp, idx, g)
    if off < 0:
        return False
    if (<object>g).size == 0:
        return True                     # adds nothing
    pp.off[k] = off
    pp.size[k] = (<object>g).size
    pp.kind[k] = kind
    pp.p[k] = <const double *>cnp.PyArray_DATA(<cnp.ndarray>g)
    pp.q[k] = pp.p[k] if kind == PIECE_VALUE else \
        <const double *>cnp.PyArray_DATA(<cnp.ndarray>d)
    pp.keep.append(g)
    if kind != PIECE_VALUE:
        pp.keep.append(d)
    pp.count = k + 1
    return True


cdef _Pieces pieces_of_scatter(Scatter c):
    """A new ``_Pieces`` holding the scatter ``c`` (plain float64 values at a basic
    index of a float64 array), or None (the caller adds ``c`` as before)."""
    if not _pieces_enabled or not c.basic or c.dtype is not _FLOAT64 or not c.shape \
            or not _c_f64(c.g):
        return None
    pp = _pieces_new(c.shape)
    if not _pieces_take(pp, c.idx, PIECE_VALUE, c.g, None):
        return None
    return pp


cdef bint pieces_take_scatter(_Pieces pp, object c) except -1:
    """Keep the cotangent ``c`` as one more piece if it is such a scatter."""
    if type(c) is not Scatter or not (<Scatter>c).basic or \
            (<Scatter>c).dtype is not _FLOAT64 or (<Scatter>c).shape != (<object>pp.out).shape:
        return False
    return _pieces_take(pp, (<Scatter>c).idx, PIECE_VALUE, (<Scatter>c).g, None)


cdef bint pieces_take_product(_Pieces pp, object idx, _Product prod) except -1:
    return _pieces_take(pp, idx, PIECE_NEG_PRODUCT if prod.negate else PIECE_PRODUCT,
                        prod.g, prod.d)


cdef void _pieces_write(_Pieces pp, double *out) noexcept nogil:
    """Every element of ``out``: 0.0 (no piece), else 0.0 + the first covering
    piece's value, then each later covering piece's added, stretch by stretch
    between the pieces' ends."""
    cdef Py_ssize_t cuts[2 * PIECES_MAX + 2]
    cdef int cover[PIECES_MAX]
    cdef Py_ssize_t ncut = 0, a, b, lo, hi, m, t, r
    cdef int k, nc, j
    cuts[ncut] = 0
    ncut += 1
    cuts[ncut] = pp.n
    ncut += 1
    for k in range(pp.count):
        cuts[ncut] = pp.off[k]
        cuts[ncut + 1] = pp.off[k] + pp.size[k]
        ncut += 2
    for a in range(1, ncut):            # insertion sort: at most ten cuts
        t = cuts[a]
        b = a - 1
        while b >= 0 and cuts[b] > t:
            cuts[b + 1] = cuts[b]
            b -= 1
        cuts[b + 1] = t
    for a in range(ncut - 1):
        lo = cuts[a]
        hi = cuts[a + 1]
        if hi <= lo:
            continue
        m = hi - lo
        nc = 0
        for k in range(pp.count):
            if pp.off[k] <= lo and hi <= pp.off[k] + pp.size[k]:
                cover[nc] = k
                nc += 1
        if nc == 0:
            memset(out + lo, 0, m * sizeof(double))
            continue
        k = cover[0]
        r = lo - pp.off[k]
        if nc == 1:
            tapead_pieces_first(out + lo, m, pp.kind[k], pp.p[k] + r, pp.q[k] + r)
            continue
        j = cover[1]
        t = lo - pp.off[j]
        tapead_pieces_first2(out + lo, m, pp.kind[k], pp.p[k] + r, pp.q[k] + r,
                             pp.kind[j], pp.p[j] + t, pp.q[j] + t)
        for b in range(2, nc):
            j = cover[b]
            t = lo - pp.off[j]
            tapead_pieces_add(out + lo, m, pp.kind[j], pp.p[j] + t, pp.q[j] + t)


cdef object pieces_settle(_Pieces pp):
    """The adjoint the pieces add up to (a new C-contiguous float64 array; the
    same one if asked again)."""
    out = pp.out
    global _pieces_written
    if pp.written:
        return out
    cdef double *data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    if pp.n:
        if pp.n >= SINCOS_NOGIL:
            with nogil:
                _pieces_write(pp, data)
        else:
            _pieces_write(pp, data)
    pp.written = True
    _pieces_written += 1
    pp.count = 0
    pp.keep = None
    return out
