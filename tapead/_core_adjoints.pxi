# Adjoint bookkeeping of the reverse sweep (included by _core.pyx after
# _core_tape.pxi): gathering float adjoints, and adding a cotangent into a
# node's adjoint (floats in C, arrays in place, indexing scatters,
# indexed cotangents kept as pieces and written in one pass: _core_pieces.pxi).


cdef object _gather(double *adj, object wrt):
    cdef Py_ssize_t k, n = len(wrt), start
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    if type(wrt) is range and (<object>wrt).step == 1:
        start = (<object>wrt).start
        if n:
            memcpy(&o[0], adj + start, n * sizeof(double))
        return out
    k = 0
    for i in wrt:
        o[k] = adj[<Py_ssize_t>i]
        k += 1
    return out


@cython.final
cdef class _PendingScatters:
    """The adjoint of one array node while traced scatters into it are
    collected: ``base`` (the rest of the adjoint, or None) plus the
    ``Scatter`` cotangents whose values are boxes of an outer transform.
    Adding each of them as a dense traced array would cost the array's size
    per scatter (O(n**2) for the n elements of a loop's ``xs``); they are
    added with one traced operation when the sweep reaches the node."""
    cdef list items
    cdef object base


cdef inline bint _is_traced_scatter(object c):
    return type(c) is Scatter and (type((<Scatter>c).g) is Tracer or
                                   type((<Scatter>c).g) is Dual or
                                   type((<Scatter>c).g) is Batched)


@cython.final
cdef class _Product:
    """A cotangent ``g * d`` (``-(g * d)`` with ``negate``) not formed yet: what
    the VJP of sin or cos with its saved partner gives (``FAST_PARTNER``).  Kept
    as the adjoint of a node that has none yet (``hobj`` 4); when that node is
    ``x[idx]`` (a basic index) the sweep adds the product into x's adjoint in
    one pass (``product_into_parent``), else it is formed with numpy's calls
    (``materialize``), the numbers of the rule ``_times_saved``."""
    cdef object g, d
    cdef bint negate

    cdef object materialize(self):
        out = np.multiply(self.g, self.d)
        return out if not self.negate else np.negative(out, out=out)


cdef inline _Product new_product(object g, object d, bint negate):
    cdef _Product p = _Product.__new__(_Product)
    p.g = g
    p.d = d
    p.negate = negate
    return p


cdef extern from "_core_fused.h" nogil:
    void tapead_add_product(double *out, const double *g, const double *d, long n,
                            int negate)


cdef inline bint _c_f64(object a) noexcept:
    return (type(a) is np.ndarray and arr_type(a) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a))


include "_core_pieces.pxi"


cdef bint product_into_parent(Tape tp, Py_ssize_t i, _Product prod, unsigned char *hobj,
                              list oadj) except -1:
    """Node ``i`` is ``x[idx]`` (basic index) with the product cotangent ``prod``:
    keep it as a piece of x's adjoint when that has none yet or only pieces
    (``_core_pieces.pxi``), else, when x's adjoint is a float64 array this
    sweep owns, add ``g * d`` into its ``idx`` view in one C pass (numpy's
    roundings: the product, then the sum).  False (nothing done) for anything
    else."""
    cdef Record rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
    cdef Py_ssize_t pid
    cdef _Pieces pp
    if rec.prim is None or (<PrimitiveBase>rec.prim).fast_vjp != FAST_GETITEM or \
            len(rec.parents) != 1 or rec.params is None:
        return False
    pid = rec.parents[0]
    if pid < 0 or not (hobj[pid] == 2 or hobj[pid] == 5 or hobj[pid] == 0):
        return False
    idx = rec.params.get("idx")
    if idx is None or not _is_basic_index(idx):
        return False
    if hobj[pid] == 0:
        if not _pieces_enabled or len(rec.saved) != 1 or type(rec.saved[0]) is not ShapeOnly \
                or (<ShapeOnly>rec.saved[0]).dtype is not _FLOAT64 \
                or not (<ShapeOnly>rec.saved[0]).shape:
            return False
        pp = _pieces_new((<ShapeOnly>rec.saved[0]).shape)
        if not pieces_take_product(pp, idx, prod):
            return False
        oadj[pid] = pp
        hobj[pid] = 5
        return True
    if hobj[pid] == 5:
        if pieces_take_product(<_Pieces>oadj[pid], idx, prod):
            return True
        oadj[pid] = pieces_settle(<_Pieces>oadj[pid])
        hobj[pid] = 2
    cur = oadj[pid]
    if type(cur) is not np.ndarray or arr_type(cur) != cnp.NPY_DOUBLE:
        return False
    view = (<object>cur)[idx]
    g, d = prod.g, prod.d
    if not (_c_f64(view) and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>view) and _c_f64(g)
            and _c_f64(d) and (<object>view).shape == (<object>g).shape
            and (<object>d).shape == (<object>g).shape):
        return False
    cdef Py_ssize_t n = (<object>g).size
    if n == 0:
        return True
    tapead_add_product(<double *>cnp.PyArray_DATA(<cnp.ndarray>view),
                       <const double *>cnp.PyArray_DATA(<cnp.ndarray>g),
                       <const double *>cnp.PyArray_DATA(<cnp.ndarray>d), n, prod.negate)
    return True


cdef inline object _settle(object o):
    """An adjoint as a value: pending traced scatters added up, a product formed."""
    cdef _PendingScatters p
    if type(o) is _Product:
        return (<_Product>o).materialize()
    if type(o) is _Pieces:
        return pieces_settle(<_Pieces>o)
    if type(o) is not _PendingScatters:
        return o
    p = <_PendingScatters>o
    total = _box_methods["add_scatters"](p.items)
    return total if p.base is None else p.base + total


cdef inline void _accumulate(Py_ssize_t j, object c, double *adj,
                             unsigned char *hobj, list oadj) except *:
    """adjoint[j] += c.  hobj[j]: 0 = float adjoint only, 1 = object adjoint
    that may be shared with another node, 2 = object adjoint this sweep owns
    (updated in place), 3 = traced scatters pending (``_PendingScatters``),
    4 = a product not formed yet (``_Product``, the only cotangent so far),
    5 = indexed cotangents kept as pieces (``_Pieces``)."""
    cdef object cur
    cdef _PendingScatters pend
    cdef _Pieces pp
    if isinstance(c, float):
        adj[j] += <double>c
        return
    if hobj[j] == 5:
        if pieces_take_scatter(<_Pieces>oadj[j], c):
            return
        oadj[j] = pieces_settle(<_Pieces>oadj[j])      # written out; c added to it below
        hobj[j] = 2
    if type(c) is _Product:
        if not hobj[j]:
            oadj[j] = c
            hobj[j] = 4
            return
        c = (<_Product>c).materialize()
    if hobj[j] == 4:                       # a second cotangent: form the first
        oadj[j] = (<_Product>oadj[j]).materialize()
        hobj[j] = 2
    if hobj[j] == 3:
        pend = <_PendingScatters>oadj[j]
        if _is_traced_scatter(c):
            pend.items.append(c)
            return
        if type(c) is Scatter:
            c = (<Scatter>c).dense()
        pend.base = c if pend.base is None else pend.base + c
        return
    if _is_traced_scatter(c):
        pend = _PendingScatters()
        pend.items = [c]
        pend.base = oadj[j] if hobj[j] else None
        oadj[j] = pend
        hobj[j] = 3
        return
    if type(c) is Scatter:
        if not hobj[j]:
            pp = pieces_of_scatter(<Scatter>c)
            if pp is not None:
                oadj[j] = pp
                hobj[j] = 5
                return
        if hobj[j] == 2 and (<Scatter>c).fits(oadj[j]):
            (<Scatter>c).add_into(oadj[j])
            return
        dense = (<Scatter>c).dense()
        if hobj[j]:
            cur = oadj[j]
            if type(cur) is np.ndarray and (<object>cur).shape == dense.shape and \
                    (<object>cur).dtype is dense.dtype:
                np.add(dense, cur, out=dense)
            else:
                dense = dense + cur
        oadj[j] = dense
        hobj[j] = 2 if type(dense) is np.ndarray else 1
        return
    if not hobj[j] and type(c) is np.ndarray and arr_ndim(c) == 0 and \
            (<object>c).dtype is _FLOAT64:
        adj[j] += <double>float(c)
    elif hobj[j] == 2 and type(c) is np.ndarray and type(oadj[j]) is np.ndarray and \
            arr_same_layout(oadj[j], c):
        np.add(oadj[j], c, out=oadj[j])
    elif hobj[j]:
        cur = oadj[j] + c
        oadj[j] = cur
        hobj[j] = 2 if type(cur) is np.ndarray else 1
    else:
        oadj[j] = c
        hobj[j] = 1
