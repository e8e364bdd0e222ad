# The steps of the reverse sweep over a tape whose adjoints are not all floats
# (included by _core.pyx after _core_tape.pxi; Tape.backward calls them).

from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport PyObject


cdef Py_ssize_t sweep_mixed(Tape tp, Py_ssize_t top, double *adj, unsigned char *hobj,
                            list oadj) except -1:
    """The reverse sweep from node ``top`` down when some adjoints are
    objects (``hobj[i]``: node i's adjoint is in ``oadj[i]``, plus the
    float ``adj[i]``); returns the number of nodes swept."""
    cdef Py_ssize_t i = top + 1, steps = 0
    cdef double g
    cdef int o
    cdef int32_t ia, ib
    cdef Py_ssize_t epid
    cdef double *edata
    cdef const int32_t *op
    cdef const int32_t *pa
    cdef const int32_t *pb
    cdef const double *q0
    cdef const double *q1
    cdef _ElemTarget tgt = _ElemTarget()
    tgt.pid = -1
    while i > 0:
        i -= 1
        o = tp.op[i]
        if o != OP_OBJ and o != OP_ELEM and not hobj[i]:
            # a run of scalar nodes with float adjoints: sweep_scalar's loop,
            # the tape's arrays read once per run (a rule called between runs
            # may have grown the tape).  Element nodes of the array whose
            # adjoint is in hand (``tgt``, set by the last element node the
            # general step took) are taken inline: x[i] code interleaves them
            # with its scalar nodes
            op, pa, pb, q0, q1 = tp.op, tp.a, tp.b, tp.p0, tp.p1
            epid = tgt.pid if (tgt.pid >= 0 and <PyObject *>PyList_GET_ITEM(oadj, tgt.pid)
                               == <PyObject *>tgt.obj) else -2
            edata = tgt.data
            while True:
                g = adj[i]
                if g != 0.0:
                    steps += 1
                    if o == OP_ELEM:
                        edata[pb[i]] += g
                    else:           # missing operands skipped, as in sweep_scalar
                        ia = pa[i]
                        ib = pb[i]
                        if ia >= 0:
                            adj[ia] += g * q0[i]
                        if ib >= 0:
                            adj[ib] += g * q1[i]
                if i == 0:
                    break
                o = op[i - 1]
                if o == OP_OBJ or hobj[i - 1] or (o == OP_ELEM and pa[i - 1] != epid):
                    break
                i -= 1
            adj[-1] = 0.0
            continue
        if o == OP_OBJ:
            if hobj[i] == 4 and adj[i] == 0.0 and \
                    product_into_parent(tp, i, <_Product>oadj[i], hobj, oadj):
                oadj[i] = None
                steps += 1
                continue
            if hobj[i]:
                gobj = _settle(oadj[i])
                if adj[i] != 0.0:
                    gobj = gobj + adj[i]
            elif adj[i] != 0.0:
                gobj = adj[i]
            else:
                continue
            steps += reverse_record(tp, i, gobj, adj, hobj, oadj)
        elif o == OP_ELEM:
            if not hobj[i] and tgt.pid == tp.a[i] and \
                    <PyObject *>PyList_GET_ITEM(oadj, tgt.pid) == <PyObject *>tgt.obj:
                g = adj[i]          # the common case inline: into the array adjoint in hand
                if g != 0.0:
                    tgt.data[tp.b[i]] += g
                    steps += 1
            else:
                steps += elem_reverse(tp, i, adj, hobj, oadj, tgt)
        elif hobj[i]:
            gobj = _settle(oadj[i])
            if adj[i] != 0.0:
                gobj = gobj + adj[i]
            steps += 1
            if tp.a[i] >= 0:
                _accumulate(tp.a[i], gobj * tp.p0[i], adj, hobj, oadj)
            if tp.b[i] >= 0 and o < FIRST_CONST:
                _accumulate(tp.b[i], gobj * tp.p1[i], adj, hobj, oadj)
    return steps


cdef int reverse_record(Tape tp, Py_ssize_t i, object gobj, double *adj,
                        unsigned char *hobj, list oadj) except -1:
    """Object node ``i`` with cotangent ``gobj``: its primitive's VJP rule
    (or the C shortcut ``fast_vjp``) for each traced parent, accumulated
    into the parents' adjoints; returns 1 if a rule ran, else 0."""
    cdef Record rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
    cdef Py_ssize_t k, pid
    if rec.prim is None:
        return 0
    prim = rec.prim
    fast = (<PrimitiveBase>prim).fast_vjp
    if fast == FAST_PACK and pack_reverse(rec, gobj, adj):
        return 1
    for k in range(len(rec.parents)):
        pid = rec.parents[k]
        if pid < 0:
            continue
        c = fast_vjp(fast, k, gobj, rec) if fast else _NOFAST
        if c is _NOFAST:
            c = prim_vjp(<PrimitiveBase>prim, k, gobj, rec.ans, rec.saved, rec.params)
        if c is not None:
            if is_complex_value(c):
                check_cotangent_kind(<PrimitiveBase>prim, c, not tp._is_complex_node(pid))
            _accumulate(pid, c, adj, hobj, oadj)
    return 1


cdef list read_adjoints(Tape tp, wrt, double *adj, unsigned char *hobj, list oadj):
    """The adjoint of each ``wrt`` node after a mixed sweep: object plus
    float part, a float for scalar nodes, None where nothing reached."""
    cdef Py_ssize_t i
    result = []
    for i in wrt:
        if hobj[i]:
            r = _settle(oadj[i])
            if adj[i] != 0.0:
                r = r + adj[i]
            result.append(r)
        elif adj[i] != 0.0 or tp._is_scalar(i):
            result.append(adj[i])
        else:
            result.append(None)
    return result
