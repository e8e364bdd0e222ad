# Forward traces and ``bind``, the generic path of every primitive
# (included by _core.pyx).


@cython.final
cdef class ForwardTrace(Trace):
    """A forward-mode transform: boxes are dual numbers ``Dual``."""

    def input(self, primal, tangent):
        """A ``Dual`` seeded with ``tangent``."""
        if is_fast_number(primal) and is_fast_number(tangent):
            return new_dual(self, <double>float(primal), <double>float(tangent), None, None)
        return new_dual(self, 0.0, 0.0, primal, tangent)

    def process(self, prim, tuple args, tuple vals, ans, dict params):
        """Push the tangents of ``args`` through ``prim`` (JVP rule)."""
        cdef Py_ssize_t k, n_duals = 0
        t = None
        if (<PrimitiveBase>prim).fused_jvp == FUSED_JVP_MUL and len(args) == 2:
            x, y = args[0], args[1]
            if type(x) is Dual and type(y) is Dual and (<Dual>x).ftrace is self \
                    and (<Dual>y).ftrace is self and (<Dual>x).op is not None \
                    and (<Dual>y).op is not None:
                t = mul_tangent((<Dual>x).ot, vals[1], (<Dual>y).ot, vals[0])
                if t is not None:       # both products and their sum in one pass
                    return make_dual(self, ans, t)
        elif (<PrimitiveBase>prim).fused_jvp == FUSED_JVP_POW and len(args) == 2:
            x = args[0]
            if type(x) is Dual and (<Dual>x).ftrace is self and (<Dual>x).op is not None \
                    and not (type(args[1]) is Dual and (<Dual>args[1]).ftrace is self):
                t = pow_tangent((<Dual>x).ot, vals[0], vals[1])
                if t is not None:       # the power rule's products and tx * d in one pass
                    return make_dual(self, ans, t)
        if (<PrimitiveBase>prim).linear:
            for k in range(len(args)):
                x = args[k]
                if type(x) is Dual and (<Dual>x).ftrace is self:
                    n_duals += 1
            if n_duals > 1:
                # jointly linear: one call on all the tangents, not one per
                # argument (a concatenation of n duals is O(n), not O(n**2))
                return make_dual(self, ans, prim.jvp_linear(args, self, vals, params))
        for k in range(len(args)):
            x = args[k]
            if type(x) is Dual and (<Dual>x).ftrace is self:
                c = prim.jvp(k, (<Dual>x).tangent, ans, vals, params)
                if c is not None:
                    check_cotangent_kind(<PrimitiveBase>prim, c, not is_complex_value(ans))
                    t = c if t is None else t + c
        return make_dual(self, ans, t)


cpdef object make_dual(ForwardTrace trace, object primal, object tangent):
    """Box ``primal`` with ``tangent`` (zero tangent: no box)."""
    if tangent is None:
        return primal
    if isinstance(primal, np.ndarray) and primal.ndim == 0 and primal.dtype == np.float64:
        primal = float(primal)
    if isinstance(primal, float) and _is_scalar_float(tangent):
        return new_dual(trace, <double>primal, <double>float(tangent), None, None)
    return new_dual(trace, 0.0, 0.0, primal, tangent)


cdef inline object unbox_at(object x, Trace trace):
    if type(x) is Tracer:
        if (<Tracer>x).tape is trace:
            return (<Tracer>x).dval if (<Tracer>x).oval is None else (<Tracer>x).oval
    elif type(x) is Dual:
        if (<Dual>x).ftrace is trace:
            return (<Dual>x).dp if (<Dual>x).op is None else (<Dual>x).op
    elif type(x) is Batched:
        if (<Batched>x).btrace is trace:
            return (<Batched>x).val
    return x


cdef inline bint _is_box(object v) noexcept:
    return type(v) is Tracer or type(v) is Dual or type(v) is Batched


cdef inline Trace trace_of(object x):
    if type(x) is Tracer:
        return (<Tracer>x).tape
    if type(x) is Dual:
        return (<Dual>x).ftrace
    if type(x) is Batched:
        return (<Batched>x).btrace
    return None


cpdef object top_trace(tuple args):
    """The innermost (highest-level) trace among ``args``, or None."""
    cdef Trace top = None, t
    for x in args:
        t = trace_of(x)
        if t is not None and (top is None or t.level > top.level):
            top = t
    return top


def bind(prim, *args, **params):
    """Apply primitive ``prim`` to ``args``, recording or pushing tangents.

    The innermost transform among the arguments processes the call; its
    own boxes are unboxed and every other argument is a constant to it.
    The value is computed by binding again on the unboxed arguments, so
    outer transforms see the operation too.
    """
    return _bind(prim, args, params)


cdef object _pack_object_args(tuple args):
    """``args`` with every object array of tracers (``np.array([a, b])`` of traced
    scalars) packed into one traced array, or None when none holds a tracer."""
    cdef list out = []
    cdef bint changed = False
    pack = _box_methods["pack_objects"]
    for a in args:
        if type(a) is np.ndarray and (<object>a).dtype == _OBJECT_DTYPE:
            b = pack(a)
            if b is not a:
                changed = True
            out.append(b)
        else:
            out.append(a)
    return tuple(out) if changed else None


cdef bint _TRANSFORMS_HOLD_BATCHED = True


def transforms_hold_batched(bint on):
    """Whether tapes and forward traces started inside vmap record batched
    values of plain arrays (their rules then run batched; the default) or vmap
    reruns the function lane by lane; returns the previous setting."""
    global _TRANSFORMS_HOLD_BATCHED
    old = _TRANSFORMS_HOLD_BATCHED
    _TRANSFORMS_HOLD_BATCHED = on
    return old


cdef object _bind(PrimitiveBase prim, tuple args, dict params):
    cdef Trace top = None, t
    cdef bint inner = False
    cdef int code
    cdef Py_ssize_t i, n = len(args)
    for i in range(n):
        t = trace_of(args[i])
        if t is None and type(args[i]) is np.ndarray \
                and arr_type(args[i]) == cnp.NPY_OBJECT:
            packed = _pack_object_args(args)
            if packed is not None:
                return _bind(prim, packed, params)
        if t is not None:
            if not t.active:
                raise LeakedTracerError(
                    f"{prim} got a traced value from a transform that has "
                    "already finished (a tracer leaked out of the function "
                    "being differentiated, e.g. through a global or a closure). "
                    "Return values from the function instead of storing them.")
            if top is None:
                top = t
            elif t.level > top.level:
                top = t
                inner = True
            elif t is not top:
                inner = True
    if top is None:
        return prim.impl(*args, **params)
    if prim.opcode >= 0 and not params and (n == 1 or n == 2):
        # an opcode's primitive bound on unboxed scalars (an inner transform's
        # rule on an outer tape's values): the scalar node the operator makes
        ans = unary_scalar(prim.opcode, args[0]) if n == 1 else \
            binary_scalar(prim.opcode, args[0], args[1])
        if ans is not None:
            return ans
    elif n == 1 and prim is _GETITEM_PRIM and type(args[0]) is Tracer:
        ans = element_of(<Tracer>args[0], params["idx"])
        if ans is not None:           # one element of an array: an element node
            return ans
    if type(top) is BatchTrace:       # vmap: the batching rule, before any value
        if prim.vmap_elementwise:
            ans = _batch_elementwise(<BatchTrace>top, prim, args, params)
            if ans is not None:
                return ans
        else:
            code = _vmap_fast_code(prim)
            if code:                   # a C form of the rule (_core_batch.pxi)
                ans = _batch_fast(<BatchTrace>top, prim, code, args, params)
                if ans is not None:
                    return ans
        return (<BatchTrace>top).handler(top, prim, args, params)
    if n == 2:                          # the common arities without the list
        v = unbox_at(args[0], top)
        w = unbox_at(args[1], top)
        if not inner and (_is_box(v) or _is_box(w)):
            inner = True
        vals_t = (v, w)
    elif n == 1:
        v = unbox_at(args[0], top)
        if not inner and _is_box(v):
            inner = True
        vals_t = (v,)
    else:
        vals = []
        for i in range(n):
            v = unbox_at(args[i], top)
            if not inner and _is_box(v):
                inner = True
            vals.append(v)
        vals_t = tuple(vals)
    if inner:
        ans = _bind(prim, vals_t, params)
        if type(ans) is Batched and not (_TRANSFORMS_HOLD_BATCHED
                                         and not isinstance((<Batched>ans).val, Box)):
            # a transform started inside vmap records the stacked lanes of a
            # plain array (its rules then run batched); over boxes of other
            # transforms it cannot: vmap reruns the function once per lane
            raise_batch_read(ans, f"{prim} under a transform started inside vmap")
    else:
        if prim.fwd_saved is not None and type(top) is Tape:
            fused = prim.fwd_saved(*vals_t, **params) if params else prim.fwd_saved(*vals_t)
            if fused is not None:       # value and residuals from one pass
                return (<Tape>top)._process(prim, args, vals_t, (<tuple>fused)[0],
                                            params, (<tuple>fused)[1])
        ans = prim.impl(*vals_t, **params) if params else prim.impl(*vals_t)
    if not prim.complex_ok:
        check_complex_support(prim, vals_t, ans)
    if type(top) is Tape:
        return (<Tape>top)._process(prim, args, vals_t, ans, params)
    return top.process(prim, args, vals_t, ans, params)
