# The K-direction forward sweep over a recorded tape and its replay at new
# inputs (included by _core.pyx after _tape.pxi).


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
    direction.
    """
    cdef Py_ssize_t nn = tp.n, i, k, j, pid
    cdef double *buf = <double *>calloc((nn + 1) * K, sizeof(double))
    cdef double *T
    cdef double *row
    cdef double *ra
    cdef double *rb
    cdef double d0, d1
    cdef unsigned char *has = NULL
    cdef Record rec
    cdef int o
    if buf == NULL:
        raise MemoryError("cannot allocate the tangent table")
    T = buf + K                      # row -1 is a zero scratch row
    has = <unsigned char *>calloc(nn + 1, 1)
    otan = {}
    try:
        has += 1
        for nid, t in seeds.items():
            nid = int(nid)
            if tp._is_scalar(nid):
                arr = np.ascontiguousarray(t, dtype=np.float64).reshape(K)
                for k in range(K):
                    T[nid * K + k] = arr[k]
            else:
                otan[nid] = np.asarray(t)
            has[nid] = 1
        for i in range(nn):
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
            elif o == OP_OBJ:
                rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
                if rec.prim is None:
                    continue
                tans = []
                any_t = False
                for pid in rec.parents:
                    if pid >= 0 and has[pid]:
                        any_t = True
                        if tp._is_scalar(pid):
                            tans.append(np.array(<double[:K]>(T + pid * K)))
                        else:
                            tans.append(otan[pid])
                    else:
                        tans.append(None)
                if not any_t:
                    continue
                args = tuple(tp.value(pid) if pid >= 0 else c
                             for pid, c in zip(rec.parents, rec.consts))
                t = rec.prim.jvp_many(tans, rec.ans, args, rec.params, K)
                if t is None:
                    continue
                has[i] = 1
                if isinstance(rec.ans, float):
                    arr = np.ascontiguousarray(t, dtype=np.float64).reshape(K)
                    for k in range(K):
                        T[i * K + k] = arr[k]
                else:
                    otan[i] = t
        result = []
        for i in outputs:
            if not has[i]:
                result.append(None)
            elif tp._is_scalar(i):
                result.append(np.array(<double[:K]>(T + i * K)))
            else:
                result.append(otan[i])
        return result
    finally:
        free(buf)
        if has != NULL:
            free(has - 1)


cdef object tape_replay(Tape tp, new_inputs):
    """Re-evaluate every node at new input values, without Python tracing.

    Raises ``GuardFlippedError`` when a recorded comparison comes out
    differently (the recorded program would not be the one that runs).
    """
    cdef Py_ssize_t i, nn = tp.n
    cdef int o
    cdef double v, d0, d1, y
    cdef Record rec
    new_inputs = list(new_inputs)
    if len(new_inputs) != len(tp.inputs):
        raise TapeReplayError(
            f"the tape has {len(tp.inputs)} inputs but {len(new_inputs)} "
            "values were given; pass one value per recorded input")
    for nid, value in zip(tp.inputs, new_inputs):
        if tp.op[nid] == OP_INPUT:
            if not (is_fast_number(value) or np.ndim(value) == 0):
                raise TapeReplayError(
                    f"input node {nid} was recorded as a scalar but got "
                    f"a value of shape {np.shape(value)}; re-record the function")
            tp.val[nid] = float(value)
        else:
            rec = tp.recs[<Py_ssize_t>tp.p0[nid]]
            value = np.asarray(value)
            if np.shape(value) != np.shape(rec.ans):
                raise TapeReplayError(
                    f"input node {nid} was recorded with shape {np.shape(rec.ans)} "
                    f"but got shape {value.shape}; re-record the function")
            rec.ans = value.astype(np.result_type(rec.ans), copy=False)
    for i in range(nn):
        o = tp.op[i]
        if o >= FIRST_BINARY:
            y = tp.val[tp.b[i]] if o < FIRST_CONST else tp.p1[i]
            scalar_eval(o, tp.val[tp.a[i]], y, &v, &d0, &d1)
            tp.val[i] = v
            tp.p0[i] = d0
            tp.p1[i] = d1
        elif o == OP_OBJ:
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
            if rec.prim is None:
                continue
            args = tuple(tp.value(pid) if pid >= 0 else c
                         for pid, c in zip(rec.parents, rec.consts))
            ans = rec.prim.impl(*args, **rec.params)
            if isinstance(ans, np.ndarray) and ans.ndim == 0 and ans.dtype == np.float64:
                ans = float(ans)
            if isinstance(rec.ans, float) != isinstance(ans, float) or \
                    np.shape(ans) != np.shape(rec.ans):
                raise TapeReplayError(
                    f"node {i} ({rec.prim}) changed shape on replay; re-record")
            rec.ans = ans
            rec.saved = rec.prim.save(args, ans)
            if isinstance(ans, float):
                tp.val[i] = ans
        elif o == OP_GUARD and rec_is_fn_guard(tp.recs[<Py_ssize_t>tp.p0[i]]):
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
            _, ia, fn, result, what = rec.info
            now = fn(tp.value(ia))
            if not np.array_equal(now, result):
                raise GuardFlippedError(
                    f"{what} recorded at node {i} was {result!r} and is {now!r} at the "
                    "new inputs; values computed from it would be stale. Re-record the "
                    "function at these inputs (ta.record) or use ta.grad, which traces "
                    "eagerly.")
        elif o == OP_GUARD:
            rec = <Record>tp.recs[<Py_ssize_t>tp.p0[i]]
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
