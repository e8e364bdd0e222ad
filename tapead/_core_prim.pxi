# Primitives as core objects (included by _core.pyx).
#
# ``PrimitiveBase`` holds what the tape needs at C speed -- the primal
# implementation, which arguments the VJP reads, the VJP rules -- so that
# recording an array operation and sweeping it cost a few attribute reads,
# not Python method lookups.  ``tapead._prims.base.Primitive`` subclasses it
# with the registration methods and the forward-mode rules.

cdef object _FLOAT64 = np.dtype(np.float64)
cdef object _FLOAT32 = np.dtype(np.float32)


# an ndarray's type number and dimensions read from its C struct (no Python
# attribute lookup); only for objects already checked to be exactly np.ndarray
cdef inline int arr_type(object a) noexcept:
    return cnp.PyArray_TYPE(<cnp.ndarray>a)


cdef inline int arr_ndim(object a) noexcept:
    return cnp.PyArray_NDIM(<cnp.ndarray>a)


cdef inline bint arr_same_layout(object a, object b) noexcept:
    """Same shape and same element type (for adding one into the other in place)."""
    return (cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.PyArray_TYPE(<cnp.ndarray>b)
            and cnp.PyArray_SAMESHAPE(<cnp.ndarray>a, <cnp.ndarray>b))


cdef inline tuple arr_shape(object a):
    """``a.shape`` of an ndarray from its C struct (no attribute lookup)."""
    cdef int k, nd = cnp.PyArray_NDIM(<cnp.ndarray>a)
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(<cnp.ndarray>a)
    if nd == 1:
        return (dims[0],)
    if nd == 2:
        return (dims[0], dims[1])
    return tuple([dims[k] for k in range(nd)])


@cython.freelist(256)
@cython.no_gc                   # a tuple of ints and a dtype: no reference cycles
@cython.final
cdef class ShapeOnly:
    """Stands in for an argument whose value no rule needs (shape, dtype kept)."""
    cdef readonly tuple shape
    cdef readonly object dtype

    def __cinit__(self, x):
        if type(x) is np.ndarray:
            self.shape = arr_shape(x)
            self.dtype = <object>cnp.PyArray_DESCR(<cnp.ndarray>x)
        elif type(x) is float or type(x) is int:
            self.shape = ()
            self.dtype = _FLOAT64
        else:
            self.shape = tuple(np.shape(x))
            self.dtype = x.dtype if hasattr(x, "dtype") else np.result_type(x)

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"ShapeOnly({self.shape}, {self.dtype})"


cdef class PrimitiveBase:
    """The fields of a primitive that the tape reads (see ``Primitive``)."""
    cdef public str name
    cdef public object impl
    cdef public object saves          # frozenset of argument positions, or None (all)
    cdef public int opcode
    cdef public bint linear
    cdef public bint elementwise
    cdef public list vjps
    cdef public list jvps
    cdef public object vjp_any
    cdef public object jvp_any
    cdef public object jvp_batched
    cdef public object save_fn        # custom (vals, ans) -> saved tuple
    #: fused forward rule ``fwd_saved(*vals) -> (ans, saved)`` or None (then impl
    #: and saves): the value and the VJP's residuals from one pass over memory,
    #: used when a tape records plain values; ``saved`` may carry more than the
    #: arguments (the VJP rules take the extra residuals as trailing arguments)
    cdef public object fwd_saved
    cdef public int fused_jvp         # FUSED_JVP_* kind: forward mode's C shortcut, 0 for none
    cdef public object static_args
    cdef public int fast_vjp          # FAST_* kind: the sweep's C shortcut, 0 for none
    cdef public bint complex_ok       # its rules are right for complex values (JAX's convention)
    cdef public bint vmap_elementwise  # its vmap rule is VMAP_ELEMENTWISE (a C shortcut)

    def __call__(self, *args, **params):
        return _bind(self, args, params)

    def __repr__(self):
        return f"<primitive {self.name}>"

    def save(self, tuple vals, ans):
        """The argument values the VJP rules read (others as ``ShapeOnly``)."""
        return prim_save(self, vals, ans)

    def vjp(self, int k, g, ans, tuple saved, dict params):
        """Cotangent of argument ``k`` for output cotangent ``g``."""
        return prim_vjp(self, k, g, ans, saved, params)


cdef tuple prim_save(PrimitiveBase p, tuple vals, object ans):
    cdef Py_ssize_t i, n
    if p.save_fn is not None:
        return p.save_fn(vals, ans)
    if p.saves is None:
        return vals
    n = len(vals)
    if n == 2 and not p.saves:          # add, subtract: shapes only, no list
        return (ShapeOnly.__new__(ShapeOnly, vals[0]), ShapeOnly.__new__(ShapeOnly, vals[1]))
    if n == 1 and not p.saves:          # tanh, exp and the like (they read their output)
        return (ShapeOnly.__new__(ShapeOnly, vals[0]),)
    out = []
    for i in range(n):
        v = vals[i]
        out.append(v if i in p.saves else ShapeOnly.__new__(ShapeOnly, v))
    return tuple(out)


cdef object prim_vjp(PrimitiveBase p, int k, object g, object ans, tuple saved,
                     dict params):
    cdef object rule = None
    if k < len(p.vjps):
        rule = p.vjps[k]
    if rule is not None:
        if not params:                  # no keyword dict to build
            return rule(g, ans, *saved)
        return rule(g, ans, *saved, **params)
    if p.vjp_any is not None:
        return p.vjp_any(k, g, ans, *saved, **params)
    raise MissingRuleError(
        f"primitive '{p.name}' has no VJP (reverse-mode) rule for argument {k}; "
        "register one with defvjp, or wrap the function in ta.custom_vjp")


cdef bint _is_basic_index(object idx):
    """Basic indexing (ints, slices, None, Ellipsis) never repeats an element."""
    items = idx if type(idx) is tuple else (idx,)
    for i in items:
        if not (isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis):
            return False
    return True


@cython.final
cdef class Scatter:
    """A cotangent that is ``g`` placed at ``idx`` of zeros(shape): what the
    VJP of indexing returns.  The reverse sweep adds it into the parent's
    adjoint in place instead of building the dense array.  When ``g`` is
    traced by an outer transform (second order) the sweep collects the
    parent's scatters and adds them with one traced operation when it
    reaches the parent (``_PendingScatters``)."""
    cdef readonly object g, idx, shape, dtype
    cdef bint basic

    def __cinit__(self, g, idx, shape, dtype):
        self.g = g
        self.idx = idx
        self.shape = tuple(shape)
        self.dtype = np.result_type(dtype, lanes_of(g))
        self.basic = _is_basic_index(idx)

    cdef bint fits(self, object cur):
        return type(cur) is np.ndarray and (<object>cur).shape == self.shape and \
            (<object>cur).dtype == self.dtype

    cdef add_into(self, object out):
        if self.basic:
            out[self.idx] += self.g
        else:
            np.add.at(out, self.idx, self.g)

    def dense(self):
        """The cotangent as an array (zeros with ``g`` added at ``idx``)."""
        cdef object out = self._dense_rows()
        if out is not None:
            return out
        out = np.zeros(self.shape, dtype=self.dtype)
        self.add_into(out)
        return out

    cdef object _dense_rows(self):
        """``dense()`` of a slice of leading rows (``x[a:b]``, the VJP of a shifted
        window) in one pass: ``g + 0.0`` written into the rows (the bits of
        ``0.0 + g``, signed zeros included) and only the other rows zeroed; None
        for other indices."""
        cdef object idx = self.idx, g = self.g
        cdef Py_ssize_t start, stop, step, n
        if type(idx) is tuple and len(<tuple>idx) == 1:
            idx = (<tuple>idx)[0]
        if type(idx) is not slice or not self.shape or type(g) is not np.ndarray or \
                (<object>g).dtype != self.dtype or \
                cnp.PyTypeNum_ISCOMPLEX(arr_type(g)) or \
                not cnp.PyTypeNum_ISFLOAT(arr_type(g)):
            return None
        n = self.shape[0]
        start, stop, step = (<slice>idx).indices(n)
        if step != 1 or stop < start or (<object>g).shape != (stop - start,) + self.shape[1:]:
            return None
        out = np.empty(self.shape, dtype=self.dtype)
        if start > 0:
            out[:start] = 0
        if stop < n:
            out[stop:] = 0
        np.add(g, 0.0, out=out[start:stop])
        return out


# --------------------------------------------------------------------------
# C shortcuts of a few hot VJP rules (plain float arrays only).  Each computes
# exactly what the primitive's Python rule computes, with the same numpy
# calls, minus the Python frames; anything unusual falls back to the rule.
# --------------------------------------------------------------------------

cdef enum:
    FAST_PASS = 1       # add: the cotangent passes through (same shape)
    FAST_SUB = 2        # sub: g and -g
    FAST_TANH = 3       # tanh: g * (1 - ans**2)
    FAST_MATMUL = 4     # 2-d matmul: g @ b.T and a.T @ g
    FAST_PACK = 5       # stack of scalars: element k of g to parent k (the sweep's own loop)
    FAST_PARTNER = 6    # sin, cos with the partner saved: g * c, -(g * s), left as a product
    FAST_GETITEM = 7    # x[idx]: a product cotangent added into x's adjoint in one pass

FAST_VJP = {"pass": FAST_PASS, "sub": FAST_SUB, "tanh": FAST_TANH, "matmul": FAST_MATMUL,
            "pack": FAST_PACK, "partner": FAST_PARTNER, "getitem": FAST_GETITEM}

cdef object _NOFAST = object()
cdef object _np_multiply = np.multiply
cdef object _np_subtract = np.subtract
cdef object _np_negative = np.negative
cdef object _np_matmul = np.matmul
cdef object _np_add_reduce = np.add.reduce


cdef inline object _shape_of_saved(object t):
    if type(t) is ShapeOnly:
        return (<ShapeOnly>t).shape
    if type(t) is np.ndarray:
        return (<object>t).shape
    return None


cdef tuple _LEAD_AXES_1 = (0,)


cdef Py_ssize_t _leading_axes(object shape, object g) except -2:
    """How many leading axes of ndarray ``g`` a value of ``shape`` (a tuple) was
    broadcast along: 0 for the same shape, -1 when ``shape`` is not the tail of
    ``g``'s shape (compared in C, no shape tuple of ``g`` built)."""
    cdef Py_ssize_t k, m = len(<tuple>shape), nd = arr_ndim(g), lead = nd - m
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(<cnp.ndarray>g)
    if lead < 0:
        return -1
    for k in range(m):
        if <Py_ssize_t>(<tuple>shape)[k] != dims[lead + k]:
            return -1
    return lead


cdef object fast_vjp(int kind, int k, object g, Record rec):
    cdef object a, b, d, shape
    cdef Py_ssize_t lead
    if type(g) is not np.ndarray or cnp.PyTypeNum_ISCOMPLEX(arr_type(g)):
        return _NOFAST        # complex cotangents take the rules (real parts for real inputs)
    if kind == FAST_PASS or kind == FAST_SUB:
        shape = _shape_of_saved(rec.saved[k])
        if shape is None:
            return _NOFAST
        lead = _leading_axes(shape, g)
        if lead < 0:
            return _NOFAST
        if lead > 0:
            # a broadcast operand (a bias): sum over the leading axes, as unbroadcast does
            d = sum_leading(g, lead)     # one C pass over the rows, numpy's bits
            g = d if d is not None else \
                _np_add_reduce(g, _LEAD_AXES_1 if lead == 1 else tuple(range(lead)))
        if kind == FAST_SUB and k == 1:
            return _np_negative(g)
        return g
    if kind == FAST_TANH:
        a = rec.ans
        if type(a) is np.ndarray and (<object>a).shape == (<object>g).shape and \
                (<object>a).dtype is (<object>g).dtype:
            d = tanh_vjp(a, g)          # one C pass for C-contiguous float64/float32
            if d is not None:
                return d
            d = _np_multiply(a, a)
            _np_subtract(1.0, d, out=d)
            _np_multiply(d, g, out=d)
            return d
        return _NOFAST
    if kind == FAST_PARTNER:
        # saved = (x's shape, partner) when the forward pass kept the partner
        # (sin: cos x; cos: sin x); the product is formed when it is added
        if len(rec.saved) == 2:
            d = rec.saved[1]
            if arr_type(g) == cnp.NPY_DOUBLE and type(d) is np.ndarray and \
                    arr_type(d) == cnp.NPY_DOUBLE and \
                    cnp.PyArray_SAMESHAPE(<cnp.ndarray>g, <cnp.ndarray>d):
                return new_product(g, d, (<PrimitiveBase>rec.prim).name == "cos")
        return _NOFAST
    if kind == FAST_MATMUL:
        a = rec.saved[0]
        b = rec.saved[1]
        if type(a) is np.ndarray and type(b) is np.ndarray and arr_ndim(a) == 2 \
                and arr_ndim(b) == 2 and arr_ndim(g) == 2:
            return _np_matmul(g, (<object>b).T) if k == 0 else _np_matmul((<object>a).T, g)
    return _NOFAST


# -- complex values: which primitives may see them, and the kind of a derivative --

cdef inline bint is_complex_value(object x):
    """Whether ``x`` (a number, an array, a box, a ``Scatter``) holds complex values."""
    cdef object t = type(x)
    if t is float or t is int or x is None:
        return False
    if t is Scatter:
        x = (<Scatter>x).g
        t = type(x)
    if t is Tracer or t is Dual or t is Batched:
        x = lanes_of(x)
        t = type(x)
    if t is np.ndarray:
        return cnp.PyTypeNum_ISCOMPLEX(arr_type(x))
    if t is complex:
        return True
    if t is ShapeOnly:
        return (<ShapeOnly>x).dtype.kind == "c"
    if isinstance(x, np.generic):
        return isinstance(x, np.complexfloating)
    return False


cdef int check_complex_support(PrimitiveBase prim, tuple vals, object ans) except -1:
    """Refuse a primitive without complex rules on complex values."""
    if is_complex_value(ans):
        raise NonDifferentiableError(_complex_refusal(prim))
    for v in vals:
        if is_complex_value(v):
            raise NonDifferentiableError(_complex_refusal(prim))
    return 0


cdef str _complex_refusal(PrimitiveBase prim):
    return (f"'{prim.name}' has no derivative rule for complex values, so tapead refuses "
            "to differentiate it rather than return a wrong derivative. Write the "
            "complex part with operations that have one (+ - * / **, exp, abs, real, "
            "imag, conj, angle, sum, matmul, ...), or split the value into real and "
            "imaginary parts (np.real / np.imag) before this operation")


cdef int check_cotangent_kind(PrimitiveBase prim, object c, bint parent_real) except -1:
    """A real-valued node must receive a real cotangent (or tangent)."""
    if parent_real and is_complex_value(c):
        raise NonDifferentiableError(
            f"'{prim.name}' produced a complex derivative for a real value (it would "
            "be cast to real, dropping the imaginary part). This is a missing or "
            "wrong complex rule of that primitive: take np.real explicitly where "
            "the computation goes from complex back to real")
    return 0


def check_derivative_kind(prim, c, value):
    """Raise ``NonDifferentiableError`` naming ``prim`` when the derivative ``c``
    of a real ``value`` is complex (it would be cast to real)."""
    check_cotangent_kind(<PrimitiveBase>prim, c, not is_complex_value(value))


def is_complex(x):
    """Whether ``x`` (number, array, box, ``ShapeOnly``) holds complex values."""
    return is_complex_value(x)
