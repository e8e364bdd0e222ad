# vmap's batch trace (included by _core.pyx): the ``Batched`` box's trace,
# its constructor and the signals a batched value sends when code reads one
# value out of it.  The batching itself (rules, per-lane fallback) is the
# Python handler the trace was created with (tapead._prims.batching).

from cpython.ref cimport Py_INCREF

cdef bint _VMAP_FAST_ON = True         # the C forms of vmap rules below (``vmap_fast``)

cdef extern from "numpy/arrayobject.h":
    # steals a reference to descr
    object _array_from_descr "PyArray_NewFromDescr" (
        type subtype, cnp.dtype descr, int nd, cnp.npy_intp* dims, cnp.npy_intp* strides,
        void* data, int flags, object obj)


@cython.final
cdef class BatchTrace(Trace):
    """A running ``vmap``: boxes are ``Batched`` (the stacked lanes).

    ``_bind`` hands every primitive applied to one of its boxes to
    ``handler(trace, prim, args, params)`` before any value is computed.

    Attributes
    ----------
    size : int
        The number of lanes.
    handler : callable
        The batching of one primitive call.
    """
    cdef public object size
    cdef public object handler

    def __init__(self, size, handler):
        self.size = size
        self.handler = handler

    def box(self, val, int bdim):
        """A ``Batched`` of this trace: lanes ``val`` stacked along ``bdim``."""
        return new_batched(self, val, bdim)


cdef inline Batched new_batched(BatchTrace trace, object val, int bdim):
    cdef Batched b = Batched.__new__(Batched)
    b.btrace = trace
    b.val = val
    b.bdim = bdim
    return b


cpdef object lanes_of(object x):
    """Strip every level of boxing, the lanes of ``Batched`` boxes included: the
    plain stacked array (for dtypes and kinds only: its shape is not a lane's)."""
    while True:
        if type(x) is Batched:
            x = (<Batched>x).val
        elif type(x) is Tracer or type(x) is Dual:
            x = primal_of(x)
        else:
            return x


cdef raise_batch_read(object x, str what):
    raise BatchConcreteRead((<Batched>x).btrace, what)


cdef object batch_bool(Batched b):
    """``bool()`` of a batched value: the lanes' common truth value; lanes that
    disagree raise ``BatchSplit`` (vmap reruns the function on each group)."""
    cdef object v = b.val, w = b.val
    cdef Py_ssize_t k, m, step
    cdef const char *p
    cdef char first_byte
    if type(v) is np.ndarray and arr_type(v) == cnp.NPY_BOOL and arr_ndim(v) == 1:
        # one boolean per lane (a comparison of scalars): the lanes read in C
        m = cnp.PyArray_DIMS(<cnp.ndarray>v)[0]
        if m > 0:
            p = <const char *>cnp.PyArray_DATA(<cnp.ndarray>v)
            step = cnp.PyArray_STRIDES(<cnp.ndarray>v)[0]
            first_byte = p[0]
            for k in range(1, m):
                if (p[k * step] != 0) != (first_byte != 0):
                    raise BatchSplit(b.btrace, np.array(v, dtype=np.bool_))
            return first_byte != 0
    while type(w) is Tracer or type(w) is Dual:
        w = primal_of(w)
    if type(w) is Batched:            # lanes of an outer vmap too: decide lane by lane
        raise_batch_read(b, "bool()")
    if lanes_of(v).dtype != np.bool_:
        v = compare(v, 0.0, 5)
    v = np.moveaxis(np.asarray(lanes_of(v)), b.bdim, 0)
    n = v.shape[0]
    if n == 0:
        raise_batch_read(b, "bool()")
    if v[0].size != 1:
        raise ValueError("The truth value of an array with more than one element is "
                         "ambiguous. Use a.any() or a.all()")
    lanes = v.reshape(n)
    first = bool(lanes[0])
    if first:
        if lanes.all():
            return True
    elif not lanes.any():
        return False
    raise BatchSplit(b.btrace, lanes.copy())


def compare_values(x, y, int code):
    """The comparison ``code`` (0-5: < <= > >= == !=) of x and y, as the boxes'
    operators do it (guards recorded on tapes)."""
    return compare(x, y, code)


cdef object _plain_front(BatchTrace trace, object a):
    """The stacked lanes of ``a`` (a ``Batched`` of ``trace`` holding a plain,
    non-object ndarray) with the lane axis moved to axis 0 (``np.moveaxis``'s
    view), or None for any other value (a box below: the Python rule)."""
    cdef int bdim, nd, k
    cdef object v
    if type(a) is not Batched or (<Batched>a).btrace is not trace:
        return None
    v = (<Batched>a).val
    if type(v) is not np.ndarray or arr_type(v) == cnp.NPY_OBJECT:
        return None
    bdim = (<Batched>a).bdim
    if bdim == 0:
        return v
    nd = cnp.PyArray_NDIM(<cnp.ndarray>v)
    perm = [bdim]
    for k in range(nd):
        if k != bdim:
            perm.append(k)
    return v.transpose(perm)


cdef inline bint _plain_shared(object a) noexcept:
    return type(a) is np.ndarray and arr_type(a) != cnp.NPY_OBJECT


cdef object _pad_lanes(object v, int rank):
    """Plain stacked lanes ``v`` (lanes in front) padded with 1-axes after the
    lane axis to lane rank ``rank`` (``batching.padded``)."""
    cdef int nd = cnp.PyArray_NDIM(<cnp.ndarray>v)
    shape = v.shape
    if nd - 1 >= rank:
        return v
    return v.reshape(shape[:1] + (1,) * (rank - nd + 1) + shape[1:])


cdef object _batch_elementwise(BatchTrace trace, PrimitiveBase prim, tuple args, dict params):
    """The elementwise vmap rule in C: every batched operand has its lanes
    moved in front and is padded to the largest lane rank, so numpy
    broadcasting pairs lane axes and the primitive applies to the stacked
    values once (as ``batching.elementwise`` does).  Operands already in
    front at the full rank pass as they are (whatever they hold); one that
    needs moving or padding must hold a plain array here, else None (the
    Python rule moves boxes with tapead operations)."""
    cdef Py_ssize_t i, n = len(args)
    cdef int rank = 0, r
    cdef list vals = [None] * n
    cdef object a, v
    for i in range(n):
        a = args[i]
        if type(a) is Batched and (<Batched>a).btrace is trace:
            r = ndim_of((<Batched>a).val) - 1
        else:
            r = ndim_of(a)
        if r > rank:
            rank = r
    for i in range(n):
        a = args[i]
        if type(a) is Batched and (<Batched>a).btrace is trace:
            if (<Batched>a).bdim == 0 and ndim_of((<Batched>a).val) - 1 == rank:
                vals[i] = (<Batched>a).val
                continue
            v = _plain_front(trace, a)
            if v is None or not _VMAP_FAST_ON:
                return None
            vals[i] = _pad_lanes(v, rank)
        else:
            vals[i] = a
    if n == 2 and prim is _VMAP_MULTIPLY and _VMAP_FAST_ON:
        out = _lane_outer(vals[0], vals[1])
        if out is not None:
            return new_batched(trace, out, 0)
    return new_batched(trace, _bind(prim, tuple(vals), params), 0)


cdef inline int _c_real_3d(object a) noexcept:
    """The type number of a native C-contiguous 3-d float64 or float32 array, 0
    for anything else."""
    cdef int t
    if type(a) is not np.ndarray or cnp.PyArray_NDIM(<cnp.ndarray>a) != 3 \
            or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a) \
            or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a):
        return 0
    t = arr_type(a)
    return t if t == cnp.NPY_DOUBLE or t == cnp.NPY_FLOAT else 0


ctypedef fused _real:
    float
    double


cdef void _outer_kernel(const _real* a, const _real* g, _real* out, Py_ssize_t n,
                        Py_ssize_t k, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t i, j, l
    cdef _real x
    cdef const _real* gi
    for i in range(n):
        gi = g + i * m
        for j in range(k):
            x = a[i * k + j]
            for l in range(m):
                out[l] = x * gi[l]
            out += m


cdef object _lane_outer(object a, object g):
    """``a * g`` for C-contiguous float64 (or float32) stacks of columns ``a``
    (n, k, 1) and rows ``g`` (n, 1, m) of one dtype (either order): every
    lane's outer product (the cotangent of a matrix that multiplies a vector
    lane), in one C loop where numpy's broadcasting loop buffers its
    operands; each element is the one product numpy computes.  None for
    other operands."""
    cdef cnp.npy_intp dims[3]
    cdef Py_ssize_t n, k, m
    cdef int t = _c_real_3d(a)
    if t == 0 or _c_real_3d(g) != t:
        return None
    if cnp.PyArray_DIM(<cnp.ndarray>a, 2) != 1:
        a, g = g, a                   # rows first: the product is the same
    n = cnp.PyArray_DIM(<cnp.ndarray>a, 0)
    k = cnp.PyArray_DIM(<cnp.ndarray>a, 1)
    m = cnp.PyArray_DIM(<cnp.ndarray>g, 2)
    if cnp.PyArray_DIM(<cnp.ndarray>a, 2) != 1 or cnp.PyArray_DIM(<cnp.ndarray>g, 1) != 1 \
            or cnp.PyArray_DIM(<cnp.ndarray>g, 0) != n or k == 1 or m == 1:
        return None
    dims[0] = n
    dims[1] = k
    dims[2] = m
    out = cnp.PyArray_EMPTY(3, dims, t, 0)
    if t == cnp.NPY_DOUBLE:
        with nogil:
            _outer_kernel(<const double*>cnp.PyArray_DATA(<cnp.ndarray>a),
                          <const double*>cnp.PyArray_DATA(<cnp.ndarray>g),
                          <double*>cnp.PyArray_DATA(<cnp.ndarray>out), n, k, m)
    else:
        with nogil:
            _outer_kernel(<const float*>cnp.PyArray_DATA(<cnp.ndarray>a),
                          <const float*>cnp.PyArray_DATA(<cnp.ndarray>g),
                          <float*>cnp.PyArray_DATA(<cnp.ndarray>out), n, k, m)
    return out


# ---------------------------------------------------------------------------
# C forms of the vmap rules of the structural primitives an MLP's forward
# and reverse passes use, for stacked lanes that are plain arrays: each gives
# what the primitive's Python rule gives (the same numpy calls on the same
# arrays), or None where that rule must run (boxes below, other cases).
# ---------------------------------------------------------------------------

cdef enum:
    VMAP_FAST_RESHAPE = 1
    VMAP_FAST_TRANSPOSE = 2
    VMAP_FAST_BROADCAST = 3
    VMAP_FAST_AXIS = 4          # batching.axis_rule(prim) with name "axis"
    VMAP_FAST_MATMUL = 5

cdef dict _VMAP_FAST = {}
cdef object _VMAP_MULTIPLY = None     # elementwise ``mul``: lanes' outer products in C
cdef dict _VMAP_FAST_KINDS = {"reshape": VMAP_FAST_RESHAPE, "transpose": VMAP_FAST_TRANSPOSE,
                              "broadcast_to": VMAP_FAST_BROADCAST, "axis": VMAP_FAST_AXIS,
                              "matmul": VMAP_FAST_MATMUL}


def vmap_fast(bint on):
    """Whether vmap uses the C forms of the rules (``set_vmap_fast``) and the C
    outer product; off, every primitive runs its Python rule (tests compare
    the two); returns the previous setting."""
    global _VMAP_FAST_ON
    old = _VMAP_FAST_ON
    _VMAP_FAST_ON = on
    return old


cdef int _vmap_fast_code(PrimitiveBase prim):
    """The C form of ``prim``'s vmap rule (VMAP_FAST_*), 0 for none."""
    if not _VMAP_FAST_ON:
        return 0
    entry = _VMAP_FAST.get(prim)
    if entry is None or (<tuple>entry)[1] is not getattr(prim, "vmap_rule", None):
        return 0
    return <int>(<tuple>entry)[0]


def set_vmap_fast(PrimitiveBase prim, str kind, rule=None):
    """Give ``prim``'s vmap rule ``rule`` (default: its rule now) the C form
    ``kind``: ``"reshape"``, ``"transpose"``, ``"broadcast_to"``, ``"matmul"``,
    or ``"axis"`` for a one-array primitive batched by ``batching.axis_rule``
    on its ``axis`` parameter; ``"multiply"``: the elementwise product, whose
    lanes' outer products get a C loop.  Registered right under the rule it
    stands for; the C form serves only while ``prim.vmap_rule`` is ``rule``
    (a rule defined again later is not bypassed)."""
    global _VMAP_MULTIPLY
    if kind == "multiply":
        _VMAP_MULTIPLY = prim
        return
    if kind not in _VMAP_FAST_KINDS:
        raise ValueError(f"set_vmap_fast({prim!r}, {kind!r}): kind must be one of "
                         f"{sorted(_VMAP_FAST_KINDS) + ['multiply']}")
    _VMAP_FAST[prim] = (_VMAP_FAST_KINDS[kind], prim.vmap_rule if rule is None else rule)


def vmap_fast_kind(PrimitiveBase prim):
    """The C form serving ``prim``'s vmap rule now (a kind of ``set_vmap_fast``)
    or None (None for every primitive while ``vmap_fast(False)``)."""
    if prim is _VMAP_MULTIPLY:
        return "multiply" if prim.vmap_elementwise and _VMAP_FAST_ON else None
    code = _vmap_fast_code(prim)
    for name, c in _VMAP_FAST_KINDS.items():
        if c == code:
            return name
    return None


cdef object _shifted_axis(object axis, int nd):
    """``batching.shift_axis``: a lane's axis parameter for lanes in front."""
    cdef int m = nd if nd > 1 else 1
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % m + 1 for a in axis)
    return int(axis) % m + 1


cdef object _broadcast_view(object v, tuple shape):
    """``np.broadcast_to(v, shape)`` for a plain array of the same rank: a
    read-only view with stride 0 along the stretched axes; None when some
    axis cannot stretch (numpy's own call then raises its error)."""
    cdef int k, nd = cnp.PyArray_NDIM(<cnp.ndarray>v)
    cdef cnp.npy_intp dims[32]
    cdef cnp.npy_intp strides[32]
    cdef cnp.npy_intp s
    if nd != len(shape) or nd > 32:
        return None
    for k in range(nd):
        s = shape[k]
        if s < 0:
            return None
        dims[k] = s
        if cnp.PyArray_DIM(<cnp.ndarray>v, k) == s:
            strides[k] = cnp.PyArray_STRIDE(<cnp.ndarray>v, k)
        elif cnp.PyArray_DIM(<cnp.ndarray>v, k) == 1:
            strides[k] = 0
        else:
            return None
    cdef cnp.dtype descr = v.dtype
    Py_INCREF(descr)                  # PyArray_NewFromDescr steals it
    out = _array_from_descr(np.ndarray, descr, nd, dims, strides,
                            cnp.PyArray_DATA(<cnp.ndarray>v), 0, None)
    cnp.set_array_base(<cnp.ndarray>out, v)
    return out


cdef object _batch_fast(BatchTrace trace, PrimitiveBase prim, int code, tuple args,
                        dict params):
    cdef object x, a, b, out
    cdef int nd, na
    cdef Py_ssize_t n
    if code == VMAP_FAST_MATMUL:
        if len(args) != 2 or params:
            return None
        a, b = args[0], args[1]
        x = _plain_front(trace, a)
        if x is not None and _plain_shared(b) and 1 <= cnp.PyArray_NDIM(<cnp.ndarray>b) <= 2:
            na = cnp.PyArray_NDIM(<cnp.ndarray>x) - 1
            if na == 1:                                   # (n, k) @ b
                return new_batched(trace, _np_matmul(x, b), 0)
            if na == 2:                                   # rows of every lane, one GEMM
                shape = x.shape
                out = _np_matmul(x.reshape((shape[0] * shape[1], shape[2])), b)
                return new_batched(trace, out.reshape(shape[:2] + out.shape[1:]), 0)
            return None
        x = _plain_front(trace, b)
        if x is not None and _plain_shared(a) and cnp.PyArray_NDIM(<cnp.ndarray>a) == 2 \
                and cnp.PyArray_NDIM(<cnp.ndarray>x) == 2:   # lanes of vectors: b @ a^T
            return new_batched(trace, _np_matmul(x, a.T), 0)
        return None
    if len(args) != 1:
        return None
    x = _plain_front(trace, args[0])
    if x is None:
        return None
    nd = cnp.PyArray_NDIM(<cnp.ndarray>x) - 1
    n = cnp.PyArray_DIM(<cnp.ndarray>x, 0)
    if code == VMAP_FAST_RESHAPE:
        if len(params) != 1 or "shape" not in params:
            return None
        return new_batched(trace, x.reshape((n,) + tuple(params["shape"])), 0)
    if code == VMAP_FAST_TRANSPOSE:
        if len(params) != 1 or "axes" not in params:
            return None
        return new_batched(trace, x.transpose((0,) + tuple(k + 1 for k in params["axes"])), 0)
    if code == VMAP_FAST_BROADCAST:
        if len(params) != 1 or "shape" not in params:
            return None
        shape = tuple(params["shape"])
        if len(shape) < nd:
            return None
        out = _broadcast_view(_pad_lanes(x, len(shape)), (n,) + shape)
        return None if out is None else new_batched(trace, out, 0)
    if code == VMAP_FAST_AXIS:
        p = dict(params)
        p["axis"] = _shifted_axis(params.get("axis"), nd)
        return new_batched(trace, prim.impl(x, **p), 0)
    return None
