# Small float64 vectors at scalar-node cost (included by _core.pyx after
# _core_elements.pxi).
#
# A traced 1-d float64 array of at most SMALL_MAX elements computes element
# by element in C: an elementwise operation pushes one scalar node per
# element (the one kernel ``scalar_eval``) and packs them into one ``stack``
# record, whose value is a fresh float64 array.  Nothing else changes: the
# result is an ordinary array tracer (vectorised primitives, replay, the
# K-direction sweep, sparsity and jit see a ``stack`` of scalars), but no
# Python rule runs, and the reverse sweep hands the stack's cotangent back
# to the scalar nodes in one C loop (``FAST_PACK``).
#
# The element nodes of an array are found once per array node: a stack of
# scalars already has them (its parents); any other array node (an input, a
# vectorised result) gets one element node per element on first use, cached
# on the tape (``Tape.elem_ids``).  ``x[k]`` of a stack of scalars is its k-th
# scalar again (no new node).  The threshold is measured: see "Elements of
# arrays and small vectors" in docs/architecture.md.

cdef enum:
    SMALL_MAX = 32          # arrays of at most this many elements compute per element

cdef object _STACK_PRIM = None        # the stack primitive (installed by tapead._prims)
cdef dict _PACK_PARAMS = {"axis": 0, "real": ()}   # shared, never mutated

#: the largest traced float64 vector computed element by element
SMALL_ARRAY_MAX = SMALL_MAX


# -- which opcodes may run per element: the values must be numpy's, bit for bit --
#
# The generic path computes an elementwise primitive with numpy (``prim.impl``),
# which may use its own SIMD routines (on AVX-512 machines exp, log, tanh, ...
# differ from the C library in the last bit for some inputs).  Per element
# the C kernel runs instead, so an opcode takes the small-vector path only
# when the two agree: IEEE operations (+ - * / sqrt, negation, |x|) always do;
# any other opcode is compared with numpy on a few thousand points, on arrays
# of every small length, the first time it is needed (``small_op_ok``).
# Opcodes whose numpy and C conventions differ (maximum/minimum/sign/relu on
# NaN) always take the generic path.

cdef signed char _SMALL_OK[128]        # 0 not checked yet, 1 agrees, -1 differs
cdef dict _SMALL_POWC_OK = {}          # x ** c: constant c -> agrees


cdef bint _kernel_agrees(int op, object impl, double c, int which) except -1:
    """Whether ``impl`` (numpy) and the C kernel give the same bits on sample
    arrays of length 1..SMALL_MAX.  which: 0 unary, 1 binary, 2 constant
    second operand ``c``."""
    cdef Py_ssize_t n, r, k
    cdef double v, d0, d1, y
    rng = np.random.default_rng(20261201)
    for n in range(1, SMALL_MAX + 1):
        for r in range(48):
            scale = (0.05, 1.0, 3.0, 20.0)[r % 4]
            xs = rng.uniform(-scale, scale, n)
            ys = rng.uniform(-scale, scale, n)
            with np.errstate(all="ignore"):
                if which == 0:
                    ref = impl(xs)
                elif which == 1:
                    ref = impl(xs, ys)
                else:
                    ref = impl(xs, c)
            if type(ref) is not np.ndarray or (<object>ref).dtype is not _FLOAT64 or \
                    (<object>ref).shape != (n,):
                return False
            for k in range(n):
                y = ys[k] if which == 1 else c
                scalar_eval(op, xs[k], y, &v, &d0, &d1)
                if not (v == ref[k] or (v != v and ref[k] != ref[k])):
                    return False
                if scalar_value(op, xs[k], y) != v and v == v:
                    return False
    return True


cdef bint small_op_ok(int op, double c) except -1:
    """Whether opcode ``op`` (constant ``c`` for constant ops) may run per
    element on small vectors: its values are numpy's, bit for bit."""
    cdef int base
    if op == OP_ADD or op == OP_SUB or op == OP_MUL or op == OP_DIV or \
            op == OP_ADDC or op == OP_SUBC or op == OP_RSUBC or op == OP_MULC or \
            op == OP_DIVC or op == OP_RDIVC or op == OP_NEG or op == OP_POS or \
            op == OP_ABS or op == OP_SQRT:
        return True
    if op == OP_MAXIMUM or op == OP_MINIMUM or op == OP_SIGN or op == OP_RELU or \
            op == OP_RPOWC or op < 0 or op >= 128:
        return False
    if op == OP_POWC:
        ok = _SMALL_POWC_OK.get(c)
        if ok is None:
            prim = _BINARY_PRIMS.get(OP_POW)
            ok = prim is not None and _kernel_agrees(op, prim.impl, c, 2)
            if len(_SMALL_POWC_OK) < 64:
                _SMALL_POWC_OK[c] = ok
        return ok
    if _SMALL_OK[op] == 0:
        if op >= FIRST_UNARY:
            prim = _UNARY_PRIMS.get(op)
        else:
            prim = _BINARY_PRIMS.get(op)
        _SMALL_OK[op] = 1 if prim is not None and _kernel_agrees(
            op, prim.impl, 0.0, 0 if op >= FIRST_UNARY else 1) else -1
    return _SMALL_OK[op] == 1


def small_opcode_agrees(int op, double c=0.0):
    """Whether scalar opcode ``op`` runs per element on small float64 vectors
    (its C kernel gives numpy's values bit for bit; ``c``: the constant of a
    constant op).  For tests and docs/performance.md."""
    return small_op_ok(op, c)


cdef inline Record _stack_of_scalars(Tape tp, Py_ssize_t i):
    """The record of node ``i`` when it is a stack of scalars (a 1-d float64
    array whose elements are its parents), else None."""
    cdef Record rec
    if tp.op[i] != OP_OBJ:
        return None
    rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
    if rec.prim is None or rec.prim is not _STACK_PRIM:
        return None
    if not cnp.PyArray_CheckExact(rec.ans) or cnp.PyArray_NDIM(<cnp.ndarray>rec.ans) != 1 \
            or cnp.PyArray_TYPE(<cnp.ndarray>rec.ans) != cnp.NPY_DOUBLE:
        return None
    return rec


cdef inline bint _small_vector(object v):
    """Whether ``v`` is a native 1-d float64 ndarray of 1 to SMALL_MAX elements."""
    return cnp.PyArray_CheckExact(v) and cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 and \
        cnp.PyArray_DIM(<cnp.ndarray>v, 0) <= SMALL_MAX and \
        cnp.PyArray_DIM(<cnp.ndarray>v, 0) >= 1 and \
        cnp.PyArray_TYPE(<cnp.ndarray>v) == cnp.NPY_DOUBLE and \
        cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>v)


cdef tuple element_ids(Tape tp, Tracer x):
    """The node ids of the elements of small-vector tracer ``x`` (one scalar
    node each; -1 where a stack has a constant piece)."""
    cdef Record rec = _stack_of_scalars(tp, x.idx)
    cdef Py_ssize_t k, n
    cdef cnp.ndarray arr
    if rec is not None and len(rec.parents) == cnp.PyArray_DIM(<cnp.ndarray>rec.ans, 0):
        return rec.parents
    if tp.elem_ids is None:
        tp.elem_ids = {}
    ids = tp.elem_ids.get(x.idx)
    if ids is not None:
        return <tuple>ids
    arr = <cnp.ndarray>x.oval
    n = cnp.PyArray_DIM(arr, 0)
    out = []
    for k in range(n):
        out.append(tp.push(OP_ELEM, x.idx, k, read_flat(arr, k), 1.0, 0.0))
    ids = tuple(out)
    tp.elem_ids[x.idx] = ids
    return <tuple>ids


cdef Tracer pack_nodes(Tape tp, tuple ids, object value):
    """One ``stack`` record of scalar nodes ``ids`` whose value is ``value``."""
    cdef Record rec = Record()
    cdef Py_ssize_t i
    rec.prim = _STACK_PRIM
    rec.parents = ids
    rec.consts = (None,) * len(ids)
    rec.params = _PACK_PARAMS
    rec.saved = ()
    rec.ans = value
    i = tp.push_record(OP_OBJ, rec, np.nan)
    return new_tracer(tp, i, 0.0, value)


# operand kinds of an elementwise operation on small vectors
cdef enum:
    K_NODES = 0         # element k is node ids[k]
    K_NODE = 1          # every element is node ``nid`` (a scalar tracer)
    K_CONST = 2         # every element is the constant c
    K_CONSTS = 3        # element k is the constant data[k] (a float64 array)
    K_OBJECTS = 4       # an object array of scalar tracers and numbers


cdef struct Operand:
    int kind
    Py_ssize_t nid
    double c


cdef bint _operand(object v, Tape tp, Py_ssize_t n, Operand *out) except -1:
    """Classify ``v`` as an operand of an n-element small-vector operation on
    ``tp``; False when it cannot take part (the generic path takes over)."""
    cdef Tracer t
    cdef Py_ssize_t k
    if type(v) is Tracer:
        t = <Tracer>v
        if t.tape is not tp:
            return False
        if t.oval is None:
            out.kind = K_NODE
            out.nid = t.idx
            return True
        if not _small_vector(t.oval) or cnp.PyArray_DIM(<cnp.ndarray>t.oval, 0) != n:
            return False
        out.kind = K_NODES
        return True
    if is_fast_number(v):
        out.kind = K_CONST
        out.c = <double>v
        return True
    if cnp.PyArray_CheckExact(v) and cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 and \
            cnp.PyArray_DIM(<cnp.ndarray>v, 0) == n:
        if cnp.PyArray_TYPE(<cnp.ndarray>v) == cnp.NPY_DOUBLE and \
                cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>v):
            out.kind = K_CONSTS
            return True
        if (<object>v).dtype == _OBJECT_DTYPE:
            for k in range(n):
                e = (<object>v)[k]
                if type(e) is Tracer:
                    if (<Tracer>e).tape is not tp or (<Tracer>e).oval is not None:
                        return False
                elif not is_fast_number(e):
                    return False
            out.kind = K_OBJECTS
            return True
    return False


cdef inline bint _element(object v, Operand *o, tuple ids, Tape tp, Py_ssize_t k,
                          Py_ssize_t *nid, double *value):
    """Element k of an operand: True with its node id (a traced element) or
    False with its constant value."""
    if o.kind == K_NODE:
        nid[0] = o.nid
        value[0] = tp.val[o.nid]
        return True
    if o.kind == K_NODES:
        nid[0] = <Py_ssize_t>ids[k]
        if nid[0] < 0:
            value[0] = read_flat(<cnp.ndarray>(<Tracer>v).oval, k)
            return False
        value[0] = tp.val[nid[0]]
        return True
    if o.kind == K_CONST:
        value[0] = o.c
        return False
    if o.kind == K_CONSTS:
        value[0] = read_flat(<cnp.ndarray>v, k)
        return False
    e = (<object>v)[k]
    if type(e) is Tracer:
        nid[0] = (<Tracer>e).idx
        value[0] = (<Tracer>e).dval
        return True
    value[0] = <double>e
    return False


cdef inline int _const_opcode(int op, bint const_second):
    """The opcode of ``op`` with its second (or first) operand a constant, or -1."""
    if op == OP_ADD: return OP_ADDC
    if op == OP_MUL: return OP_MULC
    if op == OP_SUB: return OP_SUBC if const_second else OP_RSUBC
    if op == OP_DIV: return OP_DIVC if const_second else OP_RDIVC
    if op == OP_POW: return OP_POWC if const_second else OP_RPOWC
    return -1


cdef inline Tape _small_tape(object v, Py_ssize_t *n):
    """The tape of ``v`` when it is an active small-vector tracer, else None."""
    cdef Tracer t
    if type(v) is Tracer and _ELEMENT_PATHS:
        t = <Tracer>v
        if t.oval is not None and t.tape.active and _small_vector(t.oval):
            n[0] = cnp.PyArray_DIM(<cnp.ndarray>t.oval, 0)
            return t.tape
    return None


cdef object small_binary(int op, object x, object y):
    """``op(x, y)`` element by element when one side is a small-vector tracer
    and the other a tracer, number or array of the same tape and length;
    None when it does not apply (nothing is recorded then)."""
    cdef Py_ssize_t n = 0, k, m
    cdef Operand ox, oy
    cdef double v, d0, d1
    cdef Py_ssize_t ia[SMALL_MAX]
    cdef Py_ssize_t ib[SMALL_MAX]
    cdef double vx[SMALL_MAX]
    cdef double vy[SMALL_MAX]
    cdef bint tx[SMALL_MAX]
    cdef bint ty[SMALL_MAX]
    cdef int cop_x = _const_opcode(op, True), cop_y = _const_opcode(op, False)
    cdef tuple idx = None, idy = None
    cdef Tape tp = _small_tape(x, &n)
    if tp is None:
        tp = _small_tape(y, &n)
        if tp is None:
            return None
    if not _operand(x, tp, n, &ox) or not _operand(y, tp, n, &oy):
        return None
    if ox.kind == K_NODES:
        idx = element_ids(tp, <Tracer>x)
    if oy.kind == K_NODES:
        idy = element_ids(tp, <Tracer>y)
    for k in range(n):                  # check every element before recording any
        tx[k] = _element(x, &ox, idx, tp, k, &ia[k], &vx[k])
        ty[k] = _element(y, &oy, idy, tp, k, &ib[k], &vy[k])
        if not (tx[k] and ty[k]) and (not (tx[k] or ty[k]) or
                                      (tx[k] and cop_x < 0) or (ty[k] and cop_y < 0)):
            return None
        if tx[k] and ty[k] and not small_op_ok(op, 0.0):
            return None
        if tx[k] and not ty[k] and not small_op_ok(cop_x, vy[k]):
            return None
        if ty[k] and not tx[k] and not small_op_ok(cop_y, vx[k]):
            return None
    out = np.empty(n, dtype=np.float64)
    cdef double *data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    ids = []
    for k in range(n):
        if tx[k] and ty[k]:
            scalar_eval(op, vx[k], vy[k], &v, &d0, &d1)
            m = tp.push(op, ia[k], ib[k], v, d0, d1)
        elif tx[k]:
            scalar_eval(cop_x, vx[k], vy[k], &v, &d0, &d1)
            m = tp.push(cop_x, ia[k], -1, v, d0, d1)
        else:
            scalar_eval(cop_y, vy[k], vx[k], &v, &d0, &d1)
            m = tp.push(cop_y, ib[k], -1, v, d0, d1)
        data[k] = v
        ids.append(m)
    return pack_nodes(tp, tuple(ids), out)


cdef object small_unary(int op, object x):
    """``op(x)`` element by element for a small-vector tracer, else None."""
    cdef Py_ssize_t n = 0, k, m, nid
    cdef double v, d0, d1
    cdef Tape tp = _small_tape(x, &n)
    if tp is None or not small_op_ok(op, 0.0):
        return None
    ids = element_ids(tp, <Tracer>x)
    for k in range(n):
        if <Py_ssize_t>ids[k] < 0:
            return None
    out = np.empty(n, dtype=np.float64)
    cdef double *data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    new = []
    for k in range(n):
        nid = <Py_ssize_t>ids[k]
        scalar_eval(op, tp.val[nid], 0.0, &v, &d0, &d1)
        m = tp.push(op, nid, -1, v, d0, 0.0)
        data[k] = v
        new.append(m)
    return pack_nodes(tp, tuple(new), out)


cpdef object pack_scalars(object seq):
    """``np.stack(seq)`` as one stack record when ``seq`` (a list, tuple or 1-d
    object array) holds only scalar tracers of one active tape and numbers,
    at least one tracer; None otherwise (the caller builds it generically)."""
    cdef Py_ssize_t k, n
    cdef Tape tp = None
    cdef Tracer t
    cdef bint consts = False
    if type(seq) is list or type(seq) is tuple:
        items = seq
    elif cnp.PyArray_CheckExact(seq) and (<object>seq).dtype == _OBJECT_DTYPE and \
            cnp.PyArray_NDIM(<cnp.ndarray>seq) == 1:
        items = (<object>seq).tolist()
    else:
        return None
    n = len(items)
    if n == 0 or _STACK_PRIM is None or not _ELEMENT_PATHS:
        return None
    for k in range(n):
        e = items[k]
        if type(e) is Tracer:
            t = <Tracer>e
            if t.oval is not None or not t.tape.active:
                return None
            if tp is None:
                tp = t.tape
            elif t.tape is not tp:
                return None
        elif is_fast_number(e):
            consts = True
        else:
            return None
    if tp is None:
        return None
    out = np.empty(n, dtype=np.float64)
    cdef double *data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    ids = []
    cl = [None] * n if consts else None
    for k in range(n):
        e = items[k]
        if type(e) is Tracer:
            data[k] = (<Tracer>e).dval
            ids.append((<Tracer>e).idx)
        else:
            data[k] = <double>e
            ids.append(-1)
            cl[k] = np.asarray(<double>e)
    r = pack_nodes(tp, tuple(ids), out)
    if consts:
        (<Record>tp.recs[<Py_ssize_t>tp.p0[(<Tracer>r).idx]]).consts = tuple(cl)
    return r


cdef object small_slice(Tracer x, object idx):
    """``x[a:b:c]`` of a small-vector tracer: a stack of the selected
    elements' nodes (no new scalar node), or None."""
    cdef Py_ssize_t n = 0, k
    cdef Tape tp = _small_tape(x, &n)
    if tp is None:
        return None
    ids = element_ids(tp, x)
    sel = (<tuple>ids)[idx]
    if len(sel) == 0:
        return None
    for k in range(len(sel)):
        if <Py_ssize_t>sel[k] < 0:
            return None
    return pack_nodes(tp, sel, np.array((<object>x.oval)[idx], dtype=np.float64))


cpdef object concat_small(tuple xs):
    """``np.concatenate(xs)`` of small-vector tracers of one tape (and float64
    1-d constants none of): one stack of their elements' nodes when the result
    has at most SMALL_MAX elements, else None."""
    cdef Py_ssize_t n = 0, total = 0
    cdef Tape tp = None, t
    cdef list ids = [], pieces = []
    for x in xs:
        if _empty_vector(x):          # x[1:] of one element: nothing to join
            continue
        t = _small_tape(x, &n)
        if t is None or (tp is not None and t is not tp):
            return None
        tp = t
        total += n
        pieces.append(x)
    if tp is None or total > SMALL_MAX:
        return None
    for x in pieces:
        e = element_ids(tp, <Tracer>x)
        for k in e:
            if <Py_ssize_t>k < 0:
                return None
        ids.extend(e)
    value = np.concatenate([(<Tracer>x).oval for x in pieces])
    return pack_nodes(tp, tuple(ids), value)


cdef inline bint _empty_vector(object x):
    """Whether ``x`` is a 1-d float64 array of no elements, plain or traced (a
    piece a concatenation of small vectors can drop: it has no derivative)."""
    cdef object v = x
    if type(x) is Tracer:
        v = (<Tracer>x).oval
    return cnp.PyArray_CheckExact(v) and cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 and \
        cnp.PyArray_DIM(<cnp.ndarray>v, 0) == 0 and \
        cnp.PyArray_TYPE(<cnp.ndarray>v) == cnp.NPY_DOUBLE


# -- sums of small vectors, in numpy's order ---------------------------------------
#
# ``np.sum`` of a float64 vector of fewer than 8 elements is one running sum
# from 0.0 (numpy's pairwise sum below its block of 8; from 8 elements on its
# order, and the sign of a zero sum, differ from a plain tree, so those sums
# stay one vectorised node).  The per-element sum replays that order with
# scalar add nodes, so its value is numpy's bit for bit; it is used only after
# a comparison with np.sum on sample vectors of every such length agrees
# (``_SUM_OK``).

cdef enum:
    SUM_MAX = 7             # sums of at most this many elements go per element

cdef signed char _SUM_OK = 0


cdef double _numpy_order_sum(const double *b, Py_ssize_t m) noexcept:
    cdef double r[8]
    cdef double res
    cdef Py_ssize_t i, j
    if m < 8:
        res = 0.0
        for i in range(m):
            res += b[i]
        return res
    for j in range(8):
        r[j] = b[j]
    i = 8
    while i < m - (m % 8):
        for j in range(8):
            r[j] += b[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < m:
        res += b[i]
        i += 1
    return res


cdef bint _sum_agrees() except -1:
    cdef Py_ssize_t n, r
    rng = np.random.default_rng(20261202)
    for n in range(1, SUM_MAX + 1):
        for r in range(200):
            xs = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.integers(-8, 9, n)
            if r == 0:
                xs[:] = -0.0
            v = _numpy_order_sum(<double *>cnp.PyArray_DATA(<cnp.ndarray>xs), n)
            ref = np.sum(xs)
            if v != ref or np.signbit(v) != np.signbit(ref):
                return False
    return True


cdef inline Py_ssize_t _add_node(Tape tp, Py_ssize_t i, Py_ssize_t j) except -1:
    cdef double v, d0, d1
    scalar_eval(OP_ADD, tp.val[i], tp.val[j], &v, &d0, &d1)
    return tp.push(OP_ADD, i, j, v, d0, d1)


cpdef object small_sum(object x):
    """``np.sum(x)`` of a small-vector tracer as scalar add nodes in numpy's
    order (the same value, bit for bit), or None."""
    global _SUM_OK
    cdef Py_ssize_t n = 0, k, i, j, res
    cdef Py_ssize_t r[8]
    cdef double v, d0, d1
    cdef Tape tp = _small_tape(x, &n)
    if tp is None or n > SUM_MAX:
        return None
    if _SUM_OK == 0:
        _SUM_OK = 1 if _sum_agrees() else -1
    if _SUM_OK < 0:
        return None
    ids = element_ids(tp, <Tracer>x)
    for k in range(n):
        if <Py_ssize_t>ids[k] < 0:
            return None
    if n < 8:
        scalar_eval(OP_ADDC, tp.val[<Py_ssize_t>ids[0]], 0.0, &v, &d0, &d1)
        res = tp.push(OP_ADDC, <Py_ssize_t>ids[0], -1, v, d0, d1)     # 0.0 + x[0]
        for i in range(1, n):
            res = _add_node(tp, res, <Py_ssize_t>ids[i])
    else:
        for j in range(8):
            r[j] = <Py_ssize_t>ids[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] = _add_node(tp, r[j], <Py_ssize_t>ids[i + j])
            i += 8
        res = _add_node(tp, _add_node(tp, _add_node(tp, r[0], r[1]),
                                      _add_node(tp, r[2], r[3])),
                        _add_node(tp, _add_node(tp, r[4], r[5]),
                                  _add_node(tp, r[6], r[7])))
        while i < n:
            res = _add_node(tp, res, <Py_ssize_t>ids[i])
            i += 1
    return new_tracer(tp, res, tp.val[res], None)
