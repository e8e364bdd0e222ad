# Revolve over a loop body (included by _core_loop.pxi, after ScalarBody and
# _body_step): the schedule of a (steps, slots) pair worked out once and kept,
# and the sweep that runs it, advancing the body and turning each step back.


cdef dict _SCHEDULES = {}          # (T, snaps) -> int32 (rows, 3): revolve's actions
cdef enum:
    _SCHEDULE_MAX_T = 262144        # longer chains work out their schedule as they go
    _SCHEDULES_KEPT = 16


cdef object _revolve_schedule(Py_ssize_t T, Py_ssize_t snaps):
    """The actions of revolve for ``T`` steps and ``snaps`` slots, one row
    (action, a, b) each, worked out once per (T, snaps) and kept (a replayed
    or repeated checkpointed loop runs the same schedule every time); None
    for chains longer than ``_SCHEDULE_MAX_T`` or when memory runs out."""
    key = (T, snaps)
    sched = _SCHEDULES.get(key)
    if sched is not None or T > _SCHEDULE_MAX_T or T < 1:
        return sched
    cdef RevolveState st
    cdef int64_t row[3]
    cdef Py_ssize_t n = 0, cap = 4 * T + 16
    cdef int32_t *buf = <int32_t *> malloc(cap * 3 * sizeof(int32_t))
    cdef int32_t *grown
    cdef int status
    if buf == NULL:
        return None
    status = _revolve_init(&st, T, snaps)
    while status == _OK:
        status = _revolve_next(&st, row)
        if status != _OK or row[0] == _TERMINATE:
            break
        if n == cap:
            cap *= 2
            grown = <int32_t *> realloc(buf, cap * 3 * sizeof(int32_t))
            if grown == NULL:
                status = _NO_MEMORY
                break
            buf = grown
        buf[3 * n] = <int32_t> row[0]
        buf[3 * n + 1] = <int32_t> row[1]
        buf[3 * n + 2] = <int32_t> row[2]
        n += 1
    free(st.held)
    if status != _OK:
        free(buf)
        return None
    sched = np.empty((n, 3), dtype=np.int32)
    cdef int32_t[:, ::1] sv = sched
    if n:
        memcpy(&sv[0, 0], buf, n * 3 * sizeof(int32_t))
    free(buf)
    if len(_SCHEDULES) >= _SCHEDULES_KEPT:
        _SCHEDULES.pop(next(iter(_SCHEDULES)))
    _SCHEDULES[key] = sched
    return sched


cdef int _revolve_sweep(Py_ssize_t T, Py_ssize_t snaps, const ScalarBody *fwd,
                        const double *xs, Py_ssize_t row_len, const Py_ssize_t *steps,
                        double *cur, double *slots, _turn_fn turn, void *ctx,
                        int64_t *advances, const int32_t *sched=NULL,
                        Py_ssize_t nsched=0) noexcept nogil:
    """Reverse the T steps of a loop from at most ``snaps`` stored carries.

    Step i (0 <= i < T, in execution order) reads the input row
    ``xs + row_len * steps[i]`` (``steps`` NULL: row i).  ``cur`` holds the
    initial carries (``fwd.nc``) and is overwritten; ``slots`` has room for
    ``snaps * fwd.nc`` doubles.  The steps are reversed last first, each by
    ``turn(ctx, i, carries entering step i)``; ``advances`` receives the
    primal steps run (revolve's ``t(T, snaps)``).  ``sched``: the schedule's
    ``nsched`` rows worked out before (``_revolve_schedule``), else revolve
    decides as it goes.  Returns ``_OK`` or a kernel error code.
    """
    cdef RevolveState st
    cdef int64_t row[3]
    cdef int64_t t
    cdef Py_ssize_t j, nc = fwd.nc, r = 0
    cdef int status = _OK
    advances[0] = 0
    st.held = NULL
    if sched == NULL:
        status = _revolve_init(&st, T, snaps)
        if status != _OK:
            free(st.held)
            return status
    while True:
        if sched != NULL:
            if r == nsched:
                break
            row[0], row[1], row[2] = sched[3 * r], sched[3 * r + 1], sched[3 * r + 2]
            r += 1
        else:
            status = _revolve_next(&st, row)
            if status != _OK or row[0] == _TERMINATE:
                break
        if row[0] == _ADVANCE and fwd.native_adv != NULL and steps == NULL:
            (<_native_adv_fn> fwd.native_adv)(row[2] - row[1], cur, xs + row_len * row[1])
            advances[0] += row[2] - row[1]
        elif row[0] == _ADVANCE:
            for t in range(row[1], row[2]):
                _body_step(fwd, cur, xs + row_len * (steps[t] if steps != NULL else t),
                           NULL, NULL)
                for j in range(nc):
                    cur[j] = _body_out(fwd, j)
            advances[0] += row[2] - row[1]
        elif row[0] == _TAKESHOT:
            for j in range(nc):
                slots[row[2] * nc + j] = cur[j]
        elif row[0] == _RESTORE:
            for j in range(nc):
                cur[j] = slots[row[2] * nc + j]
        else:                                   # FIRSTURN / YOUTURN: reverse step row[1]
            turn(ctx, row[1], cur)
    free(st.held)
    return status
