# vmap's batch trace (included by _core.pyx): the ``Batched`` box's trace,
# its constructor and the signals a batched value sends when code reads one
# value out of it.  The batching itself (rules, per-lane fallback) is the
# Python handler the trace was created with (tapead._prims.batching).


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


cdef object _batch_elementwise(BatchTrace trace, PrimitiveBase prim, tuple args, dict params):
    """The elementwise vmap rule's common case in C: every batched operand has
    its lanes in front and the largest lane rank, so numpy broadcasting pairs
    lane axes already and the primitive applies to the stacked values as
    they are.  None when some operand needs moving or padding (the Python
    rule, ``batching.elementwise``, does that)."""
    cdef Py_ssize_t i, n = len(args)
    cdef int rank = 0, r
    cdef list vals = [None] * n
    cdef object a
    for i in range(n):
        a = args[i]
        if type(a) is Batched and (<Batched>a).btrace is trace:
            if (<Batched>a).bdim != 0:
                return None
            r = ndim_of((<Batched>a).val) - 1
        else:
            r = ndim_of(a)
        if r > rank:
            rank = r
    for i in range(n):
        a = args[i]
        if type(a) is Batched and (<Batched>a).btrace is trace:
            if ndim_of((<Batched>a).val) - 1 != rank:
                return None
            vals[i] = (<Batched>a).val
        else:
            vals[i] = a
    return new_batched(trace, _bind(prim, tuple(vals), params), 0)
