# The K-direction forward sweep over a recorded tape and its replay at new
# inputs (included by _core.pyx after _core_tape.pxi).

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS
from cpython.ref cimport PyObject

cdef extern from *:
    """
    static inline Py_ssize_t tapead_refcount(PyObject *o) { return Py_REFCNT(o); }
    """
    Py_ssize_t _refcount "tapead_refcount"(PyObject *o) nogil


cdef object tape_forward_sweep(Tape tp, seeds, outputs, Py_ssize_t K):
    """Push K tangent directions through the tape at once.

    Parameters
    ----------
    seeds : dict
        node id -> tangent with a leading axis of length K.
    outputs : sequence of int
        Node ids whose tangents are returned.
    K : int
        Number of directions.

    Returns
    -------
    list
        Tangent of each output, shape ``(K,) + shape``, or ``None``
        where no direction reaches it.

    Scalar nodes run in C: row ``i`` of the tangent table is
    ``p0 * row a + p1 * row b``, so each local partial is computed once
    for all K directions.  Object nodes call their primitive's batched
    JVP (``prim.jvp_batched``) or, lacking one, its JVP once per
    direction.  Only nodes some output depends on are visited (a first
    pass marks them, from the outputs down), so a gradient's tape does not
    push tangents through the function's own value; arguments listed in a
    primitive's ``nondiff_args`` (hints) get no tangent.
    """
    cdef Py_ssize_t nn = tp.n, i, k, pid
    cdef double *buf = <double *>calloc((nn + 1) * K, sizeof(double))
    cdef double *T
    cdef double *row
    cdef double *ra
    cdef double *rb
    cdef double d0, d1
    cdef unsigned char *has = NULL
    cdef unsigned char *need = NULL
    cdef int o
    if buf == NULL:
        raise MemoryError("cannot allocate the tangent table")
    T = buf + K                      # row -1 is a zero scratch row
    has = <unsigned char *>calloc(nn + 1, 1)
    need = <unsigned char *>calloc(nn + 1, 1)
    if has == NULL or need == NULL:
        free(buf)
        free(has)
        free(need)
        raise MemoryError("cannot allocate the tangent table")
    otan = {}
    try:
        has += 1
        need += 1
        _mark_needed(tp, outputs, need)
        _seed_tangents(tp, seeds, T, K, has, otan)
        for i in range(nn):
            if not need[i]:
                continue
            o = tp.op[i]
            if o >= FIRST_BINARY:
                if not (has[tp.a[i]] or has[tp.b[i]] and o < FIRST_CONST):
                    continue
                has[i] = 1
                row = T + i * K
                ra = T + tp.a[i] * K
                d0 = tp.p0[i]
                if o < FIRST_CONST:
                    rb = T + tp.b[i] * K
                    d1 = tp.p1[i]
                    for k in range(K):
                        row[k] = d0 * ra[k] + d1 * rb[k]
                else:
                    for k in range(K):
                        row[k] = d0 * ra[k]
            elif o == OP_ELEM:
                pid = tp.a[i]
                if not has[pid]:
                    continue
                col = np.ascontiguousarray(
                    np.reshape(otan[pid], (K, -1))[:, tp.b[i]], dtype=np.float64)
                has[i] = 1
                for k in range(K):
                    T[i * K + k] = col[k]
            elif o == OP_OBJ:
                _push_record(tp, i, T, K, has, otan)
        return _read_tangents(tp, outputs, T, K, has, otan)
    finally:
        free(buf)
        free(has - 1)
        free(need - 1)


cdef int _mark_needed(Tape tp, outputs, unsigned char *need) except -1:
    """``need[i] = 1`` for every node some output depends on (one pass from
    the outputs down; a primitive's ``nondiff_args`` are not followed)."""
    cdef Py_ssize_t i, k, pid
    cdef int o
    cdef Record rec
    for i in outputs:
        need[<Py_ssize_t>i] = 1
    for i in range(tp.n - 1, -1, -1):
        if not need[i]:
            continue
        o = tp.op[i]
        if o >= FIRST_BINARY:
            need[tp.a[i]] = 1
            if o < FIRST_CONST:
                need[tp.b[i]] = 1
        elif o == OP_ELEM:
            need[tp.a[i]] = 1
        elif o == OP_OBJ:
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
            if rec.prim is None:
                continue
            skip = getattr(rec.prim, "nondiff_args", ())
            for k, pid in enumerate(rec.parents):
                if pid >= 0 and k not in skip:
                    need[pid] = 1
    return 0


cdef int _seed_tangents(Tape tp, seeds, double *T, Py_ssize_t K, unsigned char *has,
                        dict otan) except -1:
    """The seeds into the tangent table: rows of ``T`` for scalar nodes,
    arrays in ``otan`` for the others."""
    cdef Py_ssize_t k, nid
    for key, t in seeds.items():
        nid = int(key)
        if tp._is_scalar(nid):
            arr = np.ascontiguousarray(t, dtype=np.float64).reshape(K)
            for k in range(K):
                T[nid * K + k] = arr[k]
        else:
            otan[nid] = np.asarray(t)
        has[nid] = 1
    return 0


cdef int _push_record(Tape tp, Py_ssize_t i, double *T, Py_ssize_t K, unsigned char *has,
                      dict otan) except -1:
    """Object node ``i``: its primitive's K-direction JVP (``jvp_many``) of the
    parents' tangents, into row ``i`` (a float output) or ``otan[i]``."""
    cdef Record rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
    cdef Py_ssize_t k, pid
    if rec.prim is None:
        return 0
    tans = []
    any_t = False
    skip = getattr(rec.prim, "nondiff_args", ())
    for k, pid in enumerate(rec.parents):
        if pid >= 0 and has[pid] and k not in skip:
            any_t = True
            if tp._is_scalar(pid):
                tans.append(np.array(<double[:K]>(T + pid * K)))
            else:
                tans.append(otan[pid])
        else:
            tans.append(None)
    if not any_t:
        return 0
    args = tuple(tp.value(pid) if pid >= 0 else c
                 for pid, c in zip(rec.parents, rec.consts))
    t = rec.prim.jvp_many(tans, rec.ans, args, rec.params, K)
    if t is None:
        return 0
    check_cotangent_kind(<PrimitiveBase>rec.prim, t, not is_complex_value(rec.ans))
    has[i] = 1
    if isinstance(rec.ans, float):
        arr = np.ascontiguousarray(t, dtype=np.float64).reshape(K)
        for k in range(K):
            T[i * K + k] = arr[k]
    else:
        otan[i] = t
    return 0


cdef list _read_tangents(Tape tp, outputs, double *T, Py_ssize_t K, unsigned char *has,
                         dict otan):
    """The tangent of each output, ``(K,) + shape``, or None where none reached."""
    result = []
    for i in outputs:
        if not has[i]:
            result.append(None)
        elif tp._is_scalar(i):
            result.append(np.array(<double[:K]>(T + <Py_ssize_t>i * K)))
        else:
            result.append(otan[i])
    return result


cdef enum:
    NOGIL_RUN = 32          # scalar runs at least this long replay without the GIL


cdef inline double scalar_value(int op, double x, double y) noexcept nogil:
    """The value of scalar opcode ``op`` at (x, y), without its partials.

    sin and cos call libm's sin and cos (``scalar_eval`` calls ``sincos`` for
    the partial as well); every other op is ``scalar_eval`` with its partials
    dropped, which the compiler removes after inlining.
    """
    cdef double v, d0, d1
    if op == OP_SIN:
        return c_sin(x)
    if op == OP_COS:
        return c_cos(x)
    # one IEEE operation each, as in scalar_eval: inline, no call
    if op == OP_MUL or op == OP_MULC:
        return x * y
    if op == OP_ADD or op == OP_ADDC:
        return x + y
    if op == OP_SUB or op == OP_SUBC:
        return x - y
    if op == OP_RSUBC:
        return y - x
    if op == OP_NEG:
        return -x
    scalar_eval(op, x, y, &v, &d0, &d1)
    return v


cdef void replay_scalar_run(const int32_t *op, const int32_t *a, const int32_t *b,
                            double *val, double *p0, double *p1, Py_ssize_t start,
                            Py_ssize_t stop, bint partials) noexcept nogil:
    """Re-evaluate the scalar nodes start..stop-1 (values, and partials if asked).

    Constant ops keep their constant in p1; a values-only run leaves p0/p1 alone.
    """
    cdef Py_ssize_t i
    cdef int o
    cdef double y
    if partials:
        for i in range(start, stop):
            o = op[i]
            y = val[b[i]] if o < FIRST_CONST else p1[i]
            if fixed_partials(o):       # the recorded partials hold: the value only
                val[i] = scalar_value(o, val[a[i]], y)
            else:                       # written in place: no copy through the stack
                scalar_eval(o, val[a[i]], y, &val[i], &p0[i], &p1[i])
    else:
        for i in range(start, stop):
            o = op[i]
            y = val[b[i]] if o < FIRST_CONST else p1[i]
            val[i] = scalar_value(o, val[a[i]], y)


cdef inline bint _same_shape(object x, object y):
    if type(x) is np.ndarray and type(y) is np.ndarray:
        return (<object>x).shape == (<object>y).shape
    return np.shape(x) == np.shape(y)


cdef enum:
    # how a replay computes each node (``Tape.replay_kinds``)
    RK_PYTHON = 0           # Python: an object node's primitive, a guard
    RK_SCALAR = 1           # a scalar op (C kernel)
    RK_ELEM = 2             # an element of an array node
    RK_PACK = 3             # a 1-d float64 stack of scalar nodes (a small vector) ...
    RK_LAZY = 4             # ... that no node reads: written when its value is asked for
    RK_LAZY_STALE = 5       # such a pack a replay passed over (not written since)
    RK_FUSED_SKIP = 6       # a node of a fused group (Tape.set_fusion) other than its last
    RK_FUSED_RUN = 7        # the last node of a fused group: the group runs here


cdef const unsigned char *_replay_kinds(Tape tp) except NULL:
    """Each node's replay kind, worked out once per recording (a tape only
    grows, so a plan of the right length is current), and the positions of
    the nodes that are not scalar ops (``Tape.replay_special``): the replay
    walks those, and the scalar runs between them are one C loop each.

    A small vector packed from scalar nodes that no later node reads (the
    scalar code after it took its elements, which are its parents) is
    ``RK_LAZY``: a replay leaves its array stale (``Tape.lazy_stale``) and
    ``Tape.value``, ``Tape.record``, the sweeps and the forward sweep write it
    from its scalars before anything reads it.
    """
    cdef Py_ssize_t i, k, nn = tp.n
    cdef int o
    cdef unsigned char *kd
    cdef Record rec
    if tp.replay_kinds is not None and len(tp.replay_kinds) == nn + 1:
        return <const unsigned char *>(<char *>tp.replay_kinds)
    settle_all_lazy(tp)             # nodes were added since the last plan
    plan = bytearray(nn + 1)        # one spare byte: a 0-node tape has a valid pointer
    read = bytearray(nn + 1)        # read[i]: some node reads node i's value
    kd = plan
    tp.n_lazy = 0
    for i in range(nn):
        o = tp.op[i]
        if o >= FIRST_BINARY:
            kd[i] = RK_SCALAR
        elif o == OP_ELEM:
            kd[i] = RK_ELEM
            read[tp.a[i]] = 1
        elif o == OP_OBJ or o == OP_GUARD:
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
            for k in _record_reads(rec):
                if 0 <= k < nn:
                    read[k] = 1
            if o == OP_OBJ and _packs_scalars(tp, rec):
                kd[i] = RK_PACK
    for i in range(nn):
        if kd[i] == RK_PACK and not read[i]:
            kd[i] = RK_LAZY
            tp.n_lazy += 1
    special = np.flatnonzero(np.frombuffer(plan, dtype=np.uint8)[:nn] != RK_SCALAR)
    tp.replay_special = special.astype(np.int32)
    tp.replay_kinds = plan
    return <const unsigned char *>(<char *>tp.replay_kinds)


cdef object _record_reads(Record rec):
    """The node ids whose values object node or guard ``rec`` reads on replay."""
    info = rec.info
    if rec.prim is None and type(info) is tuple:
        if len(<tuple>info) == 5 and (<tuple>info)[0] == "fn":
            return ((<tuple>info)[1],)
        if len(<tuple>info) == 6:
            return ((<tuple>info)[1], (<tuple>info)[2])
    return rec.parents if rec.parents is not None else ()


cdef bint _packs_scalars(Tape tp, Record rec):
    """Whether object node ``rec`` is a small vector packed from scalar nodes:
    a ``stack`` along axis 0 of nodes whose values live in ``tp.val``."""
    cdef object old = rec.ans
    cdef tuple parents = rec.parents
    cdef Py_ssize_t k, pid, n = len(parents)
    cdef int o
    if rec.prim is not _STACK_PRIM or n == 0:
        return False
    if not (cnp.PyArray_CheckExact(old) and cnp.PyArray_NDIM(<cnp.ndarray>old) == 1
            and cnp.PyArray_TYPE(<cnp.ndarray>old) == cnp.NPY_DOUBLE
            and cnp.PyArray_DIM(<cnp.ndarray>old, 0) == n):
        return False
    if rec.params.get("real", ()) or rec.params.get("axis", 0) != 0:
        return False
    for k in range(n):
        pid = <Py_ssize_t>parents[k]
        if pid < 0:
            return False
        o = tp.op[pid]
        if not (o >= FIRST_BINARY or o == OP_ELEM or o == OP_INPUT):
            return False
    return True


cdef int _write_pack(Tape tp, Record rec) except -1:
    """A pack's array from its scalars' values: written in place when the
    record holds the only reference (nobody can see the old value change),
    else a new array."""
    cdef tuple parents = rec.parents
    cdef Py_ssize_t q, m = len(parents)
    cdef cnp.npy_intp dim
    cdef double *data
    if _refcount(<PyObject *>rec.ans) == 1 and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>rec.ans) \
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>rec.ans) \
            and cnp.PyArray_CHKFLAGS(<cnp.ndarray>rec.ans, cnp.NPY_ARRAY_OWNDATA):
        data = <double *>cnp.PyArray_DATA(<cnp.ndarray>rec.ans)
    else:
        dim = m
        out = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_DOUBLE, 0)
        data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
        rec.ans = out
    for q in range(m):
        data[q] = tp.val[<Py_ssize_t>parents[q]]
    return 0


cdef int settle_lazy(Tape tp, Py_ssize_t i) except -1:
    """Write node ``i``'s array if it is a small vector a replay left stale
    (once: later reads get the same array until the next replay)."""
    cdef unsigned char *kd
    if tp.lazy_stale and 0 <= i < len(tp.replay_kinds) - 1:
        kd = <unsigned char *>(<char *>tp.replay_kinds)
        if kd[i] == RK_LAZY_STALE:
            _write_pack(tp, <Record>tp.recs[<Py_ssize_t>tp.p0[i]])
            kd[i] = RK_LAZY
    return 0


cdef int settle_all_lazy(Tape tp) except -1:
    """Write every small vector a replay left stale (before a pass that reads
    object nodes' values directly)."""
    cdef Py_ssize_t i
    cdef unsigned char *kd
    if not tp.lazy_stale:
        return 0
    kd = <unsigned char *>(<char *>tp.replay_kinds)
    for i in range(len(tp.replay_kinds) - 1):
        if kd[i] == RK_LAZY_STALE:
            _write_pack(tp, <Record>tp.recs[<Py_ssize_t>tp.p0[i]])
            kd[i] = RK_LAZY
    tp.lazy_stale = False
    return 0


cdef struct _ElemSource:
    Py_ssize_t node         # the array node last read by an element node, -1 for none
    char *base              # its value's data, C-contiguous or not
    bint contiguous
    Py_ssize_t size


cdef int _replay_elem(Tape tp, Py_ssize_t k, _ElemSource *src) except -1:
    """Element node ``k`` read from its array's new value; ``src`` keeps the
    last array's data pointer (every node is written once per replay, before
    the nodes after it read it, so the pointer stays good)."""
    cdef Py_ssize_t pid = tp.a[k]
    if pid != src.node:
        v = tp.value(pid)
        if not (cnp.PyArray_CheckExact(v) and
                cnp.PyArray_TYPE(<cnp.ndarray>v) == cnp.NPY_DOUBLE and
                cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>v)):
            replay_element(tp, k)        # raises its error
        src.node = pid
        src.base = cnp.PyArray_BYTES(<cnp.ndarray>v)
        src.contiguous = cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>v)
        src.size = cnp.PyArray_SIZE(<cnp.ndarray>v)
    if tp.b[k] >= src.size:
        replay_element(tp, k)            # raises its error
    elif src.contiguous:
        tp.val[k] = (<double *>src.base)[tp.b[k]]
    else:
        tp.val[k] = read_flat(<cnp.ndarray>tp.value(pid), tp.b[k])
    return 0


ctypedef void (*_native_run_fn)(double *val) noexcept nogil


cdef inline void _replay_scalars(Tape tp, Py_ssize_t i, Py_ssize_t j, bint partials) noexcept:
    """Scalar nodes i..j-1 (without the GIL when the run is long); a values-only
    replay runs the compiled stretch of the run (``Tape.set_native_runs``)."""
    cdef Py_ssize_t st, sp, pos
    cdef _native_run_fn fn
    if not partials and tp.native_runs is not None and j - i >= NOGIL_RUN:
        entry = tp.native_runs.get(i)
        if entry is not None and (<tuple>(<tuple>entry)[len(<tuple>entry) - 1])[1] <= j:
            pos = i
            for part in <tuple>entry:
                st, sp = (<tuple>part)[0], (<tuple>part)[1]
                fn = <_native_run_fn> <void *> <Py_ssize_t> (<tuple>part)[2]
                with nogil:
                    replay_scalar_run(tp.op, tp.a, tp.b, tp.val, tp.p0, tp.p1, pos, st, False)
                    fn(tp.val)
                pos = sp
            with nogil:
                replay_scalar_run(tp.op, tp.a, tp.b, tp.val, tp.p0, tp.p1, pos, j, False)
            return
    if j - i >= NOGIL_RUN:
        with nogil:
            replay_scalar_run(tp.op, tp.a, tp.b, tp.val, tp.p0, tp.p1, i, j, partials)
    elif j > i:
        replay_scalar_run(tp.op, tp.a, tp.b, tp.val, tp.p0, tp.p1, i, j, partials)


cdef object replay_nodes(Tape tp, bint partials):
    """Re-evaluate every node from the values of the input nodes.

    Runs of scalar nodes are one C loop (without the GIL when long); object
    nodes call their primitive (``partials``: and save its residuals); guards
    are checked.  ``partials=False`` leaves the tape's partials and residuals
    stale (``Tape.partials_stale``), so sweeps refuse it until a full replay.
    """
    cdef Py_ssize_t i, q, k, np_, pid, nn = tp.n, prev = 0, ns
    cdef int o
    cdef unsigned char kk
    cdef Record rec
    cdef tuple parents, consts
    cdef list argl
    cdef PrimitiveBase prim
    cdef dict params
    cdef tuple args
    cdef const unsigned char *kind = _replay_kinds(tp)
    cdef const int32_t *special = <const int32_t *>cnp.PyArray_DATA(
        <cnp.ndarray>tp.replay_special)
    cdef _ElemSource src
    src.node = -1
    ns = cnp.PyArray_DIM(<cnp.ndarray>tp.replay_special, 0)
    tp.partials_stale = True        # until the loop ends (a guard may stop it midway)
    tp.lazy_stale = tp.n_lazy > 0
    for q in range(ns + 1):
        i = special[q] if q < ns else nn
        _replay_scalars(tp, prev, i, partials)
        prev = i + 1
        if q == ns:
            break
        kk = kind[i]
        if kk == RK_ELEM:
            _replay_elem(tp, i, &src)
            continue
        if kk == RK_PACK:
            _write_pack(tp, <Record>tp.recs[<Py_ssize_t>tp.p0[i]])
            continue
        if kk == RK_LAZY or kk == RK_LAZY_STALE:    # written when its value is asked for
            (<unsigned char *>kind)[i] = RK_LAZY_STALE
            continue
        if (kk == RK_FUSED_SKIP or kk == RK_FUSED_RUN) and not partials:
            if kk == RK_FUSED_RUN:      # values only: the whole group, in one pass
                (<FusedGroup>tp.fusion[i]).run(tp)
            continue
        o = tp.op[i]
        if o == OP_OBJ:
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
            if rec.prim is _STACK_PRIM and _replay_pack(tp, rec):
                continue            # a small vector packed from its scalars, in C
            if rec.prim is not None:
                prim = <PrimitiveBase>rec.prim
                parents, consts = rec.parents, rec.consts
                np_ = len(parents)
                if np_ == 1:
                    pid = <Py_ssize_t>parents[0]
                    args = (tp.value(pid) if pid >= 0 else consts[0],)
                elif np_ == 2:
                    pid = <Py_ssize_t>parents[0]
                    q0 = tp.value(pid) if pid >= 0 else consts[0]
                    pid = <Py_ssize_t>parents[1]
                    args = (q0, tp.value(pid) if pid >= 0 else consts[1])
                else:
                    argl = [None] * np_
                    for k in range(np_):
                        pid = <Py_ssize_t>parents[k]
                        argl[k] = tp.value(pid) if pid >= 0 else consts[k]
                    args = tuple(argl)
                params = rec.params
                fused = None
                if partials and prim.fwd_saved is not None:
                    fused = (prim.fwd_saved(*args, **params) if params
                             else prim.fwd_saved(*args))
                if fused is None:
                    ans = prim.impl(*args, **params) if params else prim.impl(*args)
                else:
                    ans = (<tuple>fused)[0]
                if type(ans) is np.ndarray and (<object>ans).ndim == 0 and \
                        (<object>ans).dtype is _FLOAT64:
                    ans = float(ans)
                if isinstance(rec.ans, float) != isinstance(ans, float) or \
                        not _same_shape(ans, rec.ans):
                    raise TapeReplayError(
                        f"node {i} ({rec.prim}) changed shape on replay; re-record")
                rec.ans = ans
                if fused is not None:
                    rec.saved = (<tuple>fused)[1]
                elif partials and not (rec.saved is not None and prim.save_fn is None
                                       and prim.saves is not None and not prim.saves):
                    # (a primitive that saves no value keeps its recorded
                    # ShapeOnly residuals: every shape on the tape is checked
                    # unchanged, and dtypes follow from the inputs' and consts')
                    rec.saved = prim_save(prim, args, ans)
                if isinstance(ans, float):
                    tp.val[i] = ans
        elif o == OP_GUARD:
            check_guard(tp, i)
    if partials:
        tp.partials_stale = False


cdef bint _replay_pack(Tape tp, Record rec) except -1:
    """A ``stack`` of scalar nodes into a 1-d float64 array (a small vector's
    pack), its value filled from the scalars' new values without numpy's
    ``stack``; False (nothing done) for any other stack."""
    cdef object old = rec.ans
    cdef tuple parents = rec.parents
    cdef Py_ssize_t k, pid, n = len(parents)
    cdef cnp.npy_intp dim = n
    cdef double *data
    cdef int o
    if not (cnp.PyArray_CheckExact(old) and cnp.PyArray_NDIM(<cnp.ndarray>old) == 1
            and cnp.PyArray_TYPE(<cnp.ndarray>old) == cnp.NPY_DOUBLE
            and cnp.PyArray_DIM(<cnp.ndarray>old, 0) == n and n > 0):
        return False
    if rec.params.get("real", ()):
        return False
    for k in range(n):
        pid = <Py_ssize_t>parents[k]
        if pid < 0:
            return False
        o = tp.op[pid]
        if not (o >= FIRST_BINARY or o == OP_ELEM or type(tp.value(pid)) is float):
            return False
    out = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_DOUBLE, 0)
    data = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    for k in range(n):
        pid = <Py_ssize_t>parents[k]
        o = tp.op[pid]
        data[k] = tp.val[pid] if (o >= FIRST_BINARY or o == OP_ELEM) else <double>tp.value(pid)
    rec.ans = out
    return True


cdef replay_element(Tape tp, Py_ssize_t i):
    """Element node ``i`` reads its element again from its array's new value."""
    arr = tp.value(tp.a[i])
    if not (cnp.PyArray_CheckExact(arr) and cnp.PyArray_TYPE(<cnp.ndarray>arr) == cnp.NPY_DOUBLE
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>arr)
            and cnp.PyArray_SIZE(<cnp.ndarray>arr) > tp.b[i]):
        raise TapeReplayError(
            f"node {i} (element {tp.b[i]} of node {tp.a[i]}) cannot be read from the "
            f"new value of node {tp.a[i]} (a {type(arr).__name__} of shape "
            f"{np.shape(arr)}); re-record the function")
    tp.val[i] = read_flat(<cnp.ndarray>arr, tp.b[i])


cdef inline bint rec_is_fn_guard(object rec):
    info = (<Record>rec).info
    return type(info) is tuple and len(info) == 5 and info[0] == "fn"


cdef check_guard(Tape tp, Py_ssize_t i):
    """Raise ``GuardFlippedError`` if guard node ``i`` comes out differently."""
    cdef Record rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
    if rec_is_fn_guard(rec):
        _, ia, fn, result, what = rec.info
        now = fn(tp.value(ia))
        if not np.array_equal(now, result):
            raise GuardFlippedError(
                f"{what} recorded at node {i} was {result!r} and is {now!r} at the "
                "new inputs; values computed from it would be stale. Re-record the "
                "function at these inputs (ta.record) or use ta.grad, which traces "
                "eagerly.")
        return
    code, ia, ib, ca, cb, result = rec.info
    xa = tp.value(ia) if ia >= 0 else ca
    xb = tp.value(ib) if ib >= 0 else cb
    now = _CMP[code](xa, xb)
    same = (np.array_equal(now, result) if isinstance(result, np.ndarray)
            else bool(now) == result)
    if not same:
        names = ("<", "<=", ">", ">=", "==", "!=")
        raise GuardFlippedError(
            f"a comparison recorded at node {i} ({ca!r} {names[code]} {cb!r} "
            f"was {result!r}) comes out differently at the new inputs "
            f"({xa!r} {names[code]} {xb!r}); the recorded program is not "
            "the one Python would run here. Re-record the function at "
            "these inputs (ta.record) or use ta.grad, which traces eagerly.")


cdef object tape_replay(Tape tp, new_inputs, bint partials):
    """Re-evaluate every node at new input values, without Python tracing.

    Raises ``GuardFlippedError`` when a recorded comparison comes out
    differently (the recorded program would not be the one that runs).
    """
    cdef Record rec
    if type(new_inputs) is not list:
        new_inputs = list(new_inputs)
    if len(new_inputs) != len(tp.inputs):
        raise TapeReplayError(
            f"the tape has {len(tp.inputs)} inputs but {len(new_inputs)} "
            "values were given; pass one value per recorded input")
    tp.partials_stale = True        # inputs are written before all are checked
    cdef list inputs = tp.inputs
    cdef Py_ssize_t j, nid
    for j in range(len(inputs)):
        nid = <Py_ssize_t>inputs[j]
        value = (<list>new_inputs)[j]
        if tp.op[nid] == OP_INPUT:
            if type(value) is float or type(value) is _NP_F64:   # the common case
                tp.val[nid] = <double>value
                continue
            if not (is_fast_number(value) or np.ndim(value) == 0):
                raise TapeReplayError(
                    f"input node {nid} was recorded as a scalar but got "
                    f"a value of shape {np.shape(value)}; re-record the function")
            tp.val[nid] = float(value)
        else:
            rec = tp.recs[<Py_ssize_t>tp.p0[nid]]
            if type(value) is np.ndarray and type(rec.ans) is np.ndarray and \
                    (<object>value).dtype is (<object>rec.ans).dtype and \
                    (<object>value).shape == (<object>rec.ans).shape:
                rec.ans = value         # the common case: an array of the recorded kind
                continue
            value = np.asarray(value)
            if np.shape(value) != np.shape(rec.ans):
                raise TapeReplayError(
                    f"input node {nid} was recorded with shape {np.shape(rec.ans)} "
                    f"but got shape {value.shape}; re-record the function")
            rec.ans = value.astype(np.result_type(rec.ans), copy=False)
    replay_nodes(tp, partials)


cdef inline bint _exact_scalar(object v):
    return isinstance(v, float) or (type(v) is np.ndarray and (<object>v).ndim == 0
                                    and (<object>v).dtype is _FLOAT64)


cdef object tape_evaluate(Tape tp, new_inputs, outputs, spread):
    """Values of the nodes ``outputs`` after a values-only replay at
    ``new_inputs``; ``None`` (the tape untouched) when an input is not exactly
    of its recorded kind.  ``spread[j] > 0``: value j is a float64 array whose
    elements fill that many consecutive scalar inputs."""
    cdef Py_ssize_t j, e, m, k = 0, nid, n = len(tp.inputs), nv = len(new_inputs)
    cdef list inputs = tp.inputs
    cdef Py_buffer view
    cdef const double *data
    if spread is not None and len(spread) != nv:
        raise ValueError(f"Tape.evaluate: {len(spread)} spread counts for {nv} values")
    for j in range(nv):                      # check every input before writing any
        v = new_inputs[j]
        m = 0 if spread is None else spread[j]
        if m > 0:
            if type(v) is not np.ndarray or (<object>v).dtype is not _FLOAT64 or \
                    (<object>v).size != m or k + m > n:
                return None
            for e in range(k, k + m):
                if tp.op[<Py_ssize_t>inputs[e]] != OP_INPUT:
                    return None
            k += m
            continue
        if k >= n:
            return None
        nid = <Py_ssize_t>inputs[k]
        if tp.op[nid] == OP_INPUT:
            if not _exact_scalar(v):
                return None
        else:
            ans = (<Record>tp.recs[<Py_ssize_t>tp.p0[nid]]).ans
            if type(v) is not np.ndarray or type(ans) is not np.ndarray or \
                    (<object>v).shape != (<object>ans).shape or \
                    not ((<object>v).dtype is (<object>ans).dtype or
                         (<object>v).dtype == (<object>ans).dtype):
                return None
        k += 1
    if k != n:
        return None
    k = 0
    for j in range(nv):
        v = new_inputs[j]
        m = 0 if spread is None else spread[j]
        if m > 0:
            try:
                PyObject_GetBuffer(v, &view, PyBUF_C_CONTIGUOUS)
            except (BufferError, ValueError):  # a strided view: copy it once
                v = np.ascontiguousarray(v)
                PyObject_GetBuffer(v, &view, PyBUF_C_CONTIGUOUS)
            data = <const double *>view.buf
            for e in range(m):
                tp.val[<Py_ssize_t>inputs[k + e]] = data[e]
            PyBuffer_Release(&view)
            k += m
            continue
        nid = <Py_ssize_t>inputs[k]
        if tp.op[nid] == OP_INPUT:
            tp.val[nid] = <double>v if isinstance(v, float) else <double>float(v)
        else:
            (<Record>tp.recs[<Py_ssize_t>tp.p0[nid]]).ans = v
        k += 1
    replay_nodes(tp, False)
    return [tp.value(<Py_ssize_t>i) if i >= 0 else None for i in outputs]
