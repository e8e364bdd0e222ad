# Elements of array nodes as scalar nodes (included by _core.pyx after
# _core_adjoints.pxi).
#
# ``x[i]`` on a float64 array tracer (an integer index, or a tuple of ndim
# integers) records one *element node*: opcode OP_ELEM, ``a`` = the array's
# node id, ``b`` = the element's flat (C-order) position, ``val`` = its value,
# p0 = 1.  It costs what a scalar node costs (no Record, no Python rule), and
# the scalar tracer it returns computes on in C.  The reverse sweep adds an
# element node's float adjoint straight into its array's adjoint (one float64
# array the sweep owns, written through a cached pointer); replay reads the
# element again from the array's new value; the K-direction forward sweep
# takes the element's column of the array's tangents.
#
# ``np.stack`` / ``np.array`` of scalar tracers is one ``stack`` record whose
# reverse step (``FAST_PACK``) hands the float64 cotangent's elements to the
# scalar parents in one C loop.

cimport numpy as cnp
cnp.import_array()


cdef bint _ELEMENT_PATHS = True     # off: every x[i] and small vector takes the generic path


def use_element_paths(bint on):
    """Turn the element and small-vector fast paths on or off (tests compare
    the two: values bit for bit, derivatives to rounding); returns the
    previous setting."""
    global _ELEMENT_PATHS
    cdef bint before = _ELEMENT_PATHS
    _ELEMENT_PATHS = on
    return before


cdef inline bint _int_index(object i, Py_ssize_t n, Py_ssize_t *out):
    """``i`` as a position in range(n) (negatives wrap), False when ``i`` is
    not a plain integer (bools are not) or is out of range."""
    cdef Py_ssize_t k
    if type(i) is int:
        try:
            k = <Py_ssize_t>i
        except OverflowError:
            return False
    elif isinstance(i, np.integer) and not isinstance(i, np.bool_):
        k = <Py_ssize_t>int(i)
    else:
        return False
    if k < 0:
        k += n
    if k < 0 or k >= n:
        return False
    out[0] = k
    return True


cdef bint element_at(object arr, object idx, Py_ssize_t *flat, double *value):
    """Whether ``arr[idx]`` is one element of a native float64 ndarray picked
    by integers (one per axis); if so its C-order position and value."""
    cdef cnp.ndarray a
    cdef int nd, d
    cdef Py_ssize_t k, f = 0
    cdef char *p
    if not cnp.PyArray_CheckExact(arr):
        return False
    a = <cnp.ndarray>arr
    if cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or not cnp.PyArray_ISNOTSWAPPED(a):
        return False
    nd = cnp.PyArray_NDIM(a)
    if nd == 0 or cnp.PyArray_SIZE(a) >= 2147483647:
        return False
    p = cnp.PyArray_BYTES(a)
    if nd == 1:
        if not _int_index(idx, cnp.PyArray_DIM(a, 0), &k):
            return False
        flat[0] = k
        value[0] = (<double *>(p + k * cnp.PyArray_STRIDE(a, 0)))[0]
        return True
    if type(idx) is not tuple or len(<tuple>idx) != nd:
        return False
    for d in range(nd):
        if not _int_index((<tuple>idx)[d], cnp.PyArray_DIM(a, d), &k):
            return False
        f = f * cnp.PyArray_DIM(a, d) + k
        p += k * cnp.PyArray_STRIDE(a, d)
    flat[0] = f
    value[0] = (<double *>p)[0]
    return True


cdef inline double read_flat(cnp.ndarray a, Py_ssize_t flat) noexcept:
    """Element ``flat`` (C order, in range) of float64 array ``a``, any strides."""
    cdef int d
    cdef Py_ssize_t k
    cdef char *p = cnp.PyArray_BYTES(a)
    if cnp.PyArray_IS_C_CONTIGUOUS(a):
        return (<double *>p)[flat]
    for d in range(cnp.PyArray_NDIM(a) - 1, -1, -1):
        k = flat % cnp.PyArray_DIM(a, d)
        flat = flat // cnp.PyArray_DIM(a, d)
        p += k * cnp.PyArray_STRIDE(a, d)
    return (<double *>p)[0]


cdef Tracer _element_node(Tape tp, Py_ssize_t arr_id, cnp.ndarray arr, Py_ssize_t flat,
                          double v):
    """The element node of ``arr[flat]`` (array node ``arr_id``): recorded on
    the first read, the same node on every later one (``x[i]`` and
    ``x[i + 1]`` in a loop read each element twice), so a replay reads and a
    sweep scatters each element once.

    The nodes read so far are kept in a dict per array until an eighth of its
    elements have one, then in an int32 array of the array's size (at most
    32 bytes per element node, less than the node itself); the last array's
    index is kept as a pointer, so a loop over one array looks up in C.
    """
    cdef Py_ssize_t nid, k, size = cnp.PyArray_SIZE(arr)
    cdef cnp.ndarray ids
    cdef int32_t *p
    if tp.en_array != arr_id:
        if tp.elem_nodes is None:
            tp.elem_nodes = {}
        ent = tp.elem_nodes.get(arr_id)
        if type(ent) is not np.ndarray:             # few elements read yet: a dict
            if ent is None:
                ent = {}
                tp.elem_nodes[arr_id] = ent
            old = (<dict>ent).get(flat)
            if old is not None:
                return new_tracer(tp, <Py_ssize_t>old, v, None)
            nid = tp.push(OP_ELEM, arr_id, flat, v, 1.0, 0.0)
            (<dict>ent)[flat] = nid
            if 8 * len(<dict>ent) >= size:          # many read: a dense index
                ids = np.full(size, -1, dtype=np.int32)
                p = <int32_t *>cnp.PyArray_DATA(ids)
                for key, node in (<dict>ent).items():
                    k = key
                    p[k] = <int32_t>(<Py_ssize_t>node)
                tp.elem_nodes[arr_id] = ids
                tp.en_array = arr_id
                tp.en_ids = p
            return new_tracer(tp, nid, v, None)
        tp.en_array = arr_id
        tp.en_ids = <int32_t *>cnp.PyArray_DATA(<cnp.ndarray>ent)
    nid = tp.en_ids[flat]
    if nid >= 0:
        return new_tracer(tp, nid, v, None)
    nid = tp.push(OP_ELEM, arr_id, flat, v, 1.0, 0.0)
    tp.en_ids[flat] = <int32_t>nid
    return new_tracer(tp, nid, v, None)


cdef object _GETITEM_PRIM = None      # tapead._prims.indexing.getitem_p, once registered
cdef object _GETITEM_VMAP = None      # its vmap rule when registered


def set_getitem_fast(prim):
    """Register the getitem primitive (with its vmap rule defined) for
    ``box_getitem``'s C paths of basic indices (slices and ints) on array
    tracers and on batched arrays (the latter only while the primitive's vmap
    rule is the one registered here)."""
    global _GETITEM_PRIM, _GETITEM_VMAP
    if not isinstance(prim, PrimitiveBase):
        raise TypeError(f"set_getitem_fast: {prim!r} is not a primitive")
    _GETITEM_PRIM = prim
    _GETITEM_VMAP = getattr(prim, "vmap_rule", None)


cdef object _ALL_LANES = slice(None)


cdef inline bint _plain_slice_part(object v) noexcept:
    return v is None or type(v) is int


cdef bint _basic_plain_index(object idx):
    """A slice of ints, an int, or a tuple of those: an index numpy applies as
    it is and that ``_index_key`` keeps unchanged."""
    cdef object it
    if type(idx) is slice:
        return _plain_slice_part((<slice>idx).start) and \
            _plain_slice_part((<slice>idx).stop) and _plain_slice_part((<slice>idx).step)
    if type(idx) is int:
        return True
    if type(idx) is not tuple or len(<tuple>idx) == 0:
        return False
    for it in <tuple>idx:
        if type(it) is int:
            continue
        if type(it) is not slice or not (_plain_slice_part((<slice>it).start) and
                                         _plain_slice_part((<slice>it).stop) and
                                         _plain_slice_part((<slice>it).step)):
            return False
    return True


cdef object element_of(Tracer t, object idx):
    """``t[idx]`` as an element node when ``idx`` picks one element of the
    float64 array ``t`` holds (or the node of a stacked scalar), else None."""
    cdef Record rec
    cdef Py_ssize_t flat
    cdef double v
    if not _ELEMENT_PATHS or t.oval is None or not t.tape.active or \
            not element_at(t.oval, idx, &flat, &v):
        return None
    rec = _stack_of_scalars(t.tape, t.idx)
    if rec is not None and <Py_ssize_t>rec.parents[flat] >= 0:
        # an element of a stack of scalars is that scalar's node
        return new_tracer(t.tape, <Py_ssize_t>rec.parents[flat], v, None)
    return _element_node(t.tape, t.idx, <cnp.ndarray>t.oval, flat, v)


cdef object box_getitem(object x, object idx):
    """``x[idx]`` of a box: an element node (tracers) or an unboxed dual
    (duals) when ``idx`` picks one element of a float64 array, else the
    ``getitem`` primitive."""
    cdef Tracer t
    cdef Dual d
    cdef Batched b
    cdef Record rec
    cdef Py_ssize_t flat, flat_t
    cdef double v, dt
    if not _ELEMENT_PATHS:
        pass
    elif type(x) is Tracer:
        t = <Tracer>x
        r = element_of(t, idx)
        if r is not None:
            return r
        if type(idx) is slice and t.oval is not None:
            r = small_slice(t, idx)
            if r is not None:
                return r
        if _GETITEM_PRIM is not None and type(t.oval) is np.ndarray and t.tape.active \
                and _basic_plain_index(idx):
            # x[1:], x[:, 2:5], x[0]: what bind(getitem_p, x, idx=idx) records,
            # without the Python layer (the index needs no conversion)
            return t.tape._process(<PrimitiveBase>_GETITEM_PRIM, (x,), (t.oval,),
                                   (<object>t.oval)[idx], {"idx": idx})
    elif type(x) is Batched:
        b = <Batched>x
        if b.bdim == 0 and type(b.val) is np.ndarray and b.btrace.active and \
                _GETITEM_VMAP is not None and _VMAP_FAST_ON and \
                getattr(_GETITEM_PRIM, "vmap_rule", None) is _GETITEM_VMAP and \
                _basic_plain_index(idx):
            # each lane's x[idx] on the stacked lanes (axis 0): a view, as the rule's
            return new_batched(b.btrace, (<object>b.val)[
                (_ALL_LANES,) + (<tuple>idx if type(idx) is tuple else (idx,))], 0)
    elif type(x) is Dual:
        d = <Dual>x
        if d.op is not None and d.ftrace.active and element_at(d.op, idx, &flat, &v) \
                and element_at(d.ot, idx, &flat_t, &dt) and \
                (<object>d.op).shape == (<object>d.ot).shape:
            return new_dual(d.ftrace, v, dt, None, None)
    return _box_methods["getitem"](x, idx)


def element(x, idx):
    """``x[idx]`` through the element fast path when it applies (tests call it
    beside ``getitem``); the same as ``x[idx]``."""
    return box_getitem(x, idx)


# --------------------------------------------------------------------------
# the reverse sweep's side: element adjoints into the array's adjoint
# --------------------------------------------------------------------------

@cython.final
cdef class _ElemTarget:
    """The array adjoint the last element node wrote into: its node id, the
    adjoint object (kept alive, so ``is`` identifies it) and its data."""
    cdef Py_ssize_t pid
    cdef object obj
    cdef double *data


cdef inline object _parent_shape(Tape tp, Py_ssize_t pid):
    return (<object>(<Record>tp.recs[<Py_ssize_t>tp.p0[pid]]).ans).shape


cdef bint _own_adjoint(Tape tp, Py_ssize_t pid, unsigned char *hobj, list oadj,
                       _ElemTarget tgt) except -1:
    """Point ``tgt`` at node ``pid``'s adjoint as a C-contiguous float64 array
    this sweep owns (made from zeros, or copied from a shared one); False when
    the adjoint is something else (a box, pending scatters), for the caller
    to add a ``Scatter`` instead."""
    cdef object cur
    shape = _parent_shape(tp, pid)
    if hobj[pid] == 5:                  # indexed pieces: written out, then owned
        oadj[pid] = pieces_settle(<_Pieces>oadj[pid])
        hobj[pid] = 2
    if hobj[pid] == 0:
        cur = np.zeros(shape, dtype=np.float64)
    elif hobj[pid] == 1 or hobj[pid] == 2:
        cur = oadj[pid]
        if not (cnp.PyArray_CheckExact(cur) and (<object>cur).shape == shape and
                cnp.PyArray_TYPE(<cnp.ndarray>cur) == cnp.NPY_DOUBLE and
                cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>cur)):
            return False
        if hobj[pid] == 1 or not (cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>cur) and
                                  cnp.PyArray_ISWRITEABLE(<cnp.ndarray>cur)):
            cur = np.array(cur, dtype=np.float64, order="C")
    else:
        return False
    oadj[pid] = cur
    hobj[pid] = 2
    tgt.pid = pid
    tgt.obj = cur
    tgt.data = <double *>cnp.PyArray_DATA(<cnp.ndarray>cur)
    return True


cdef int elem_reverse(Tape tp, Py_ssize_t i, double *adj, unsigned char *hobj,
                      list oadj, _ElemTarget tgt) except -1:
    """The reverse step of element node ``i``: its adjoint into its array's."""
    cdef Py_ssize_t pid = tp.a[i], flat = tp.b[i]
    cdef double g
    if hobj[i]:
        gobj = _settle(oadj[i])
        if adj[i] != 0.0:
            gobj = gobj + adj[i]
        shape = _parent_shape(tp, pid)
        _accumulate(pid, Scatter(gobj, np.unravel_index(flat, shape), shape, np.float64),
                    adj, hobj, oadj)
        return 1
    g = adj[i]
    if g == 0.0:
        return 0
    if not (tgt.pid == pid and oadj[pid] is tgt.obj):
        if not _own_adjoint(tp, pid, hobj, oadj, tgt):
            tgt.pid = -1
            tgt.obj = None
            shape = _parent_shape(tp, pid)
            _accumulate(pid, Scatter(g, np.unravel_index(flat, shape), shape, np.float64),
                        adj, hobj, oadj)
            return 1
    tgt.data[flat] += g
    return 1


cdef bint pack_reverse(Record rec, object g, double *adj) except -1:
    """The reverse step of a stack of scalars (``FAST_PACK``): element k of a
    float64 cotangent to parent k, in one C loop; False (nothing done) when
    the cotangent or the pieces are not of that kind."""
    cdef cnp.ndarray ga
    cdef tuple parents = rec.parents
    cdef Py_ssize_t k, n = len(parents), pid
    cdef char *p
    cdef Py_ssize_t stride
    if not cnp.PyArray_CheckExact(g):
        return False
    ga = <cnp.ndarray>g
    if cnp.PyArray_TYPE(ga) != cnp.NPY_DOUBLE or not cnp.PyArray_ISNOTSWAPPED(ga) or \
            cnp.PyArray_NDIM(ga) != 1 or cnp.PyArray_DIM(ga, 0) != n:
        return False
    if rec.params.get("axis", 0) != 0:
        return False
    p = cnp.PyArray_BYTES(ga)
    stride = cnp.PyArray_STRIDE(ga, 0)
    for k in range(n):
        pid = <Py_ssize_t>parents[k]
        if pid >= 0:
            adj[pid] += (<double *>(p + k * stride))[0]
    return True
