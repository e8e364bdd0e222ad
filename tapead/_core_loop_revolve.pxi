# Revolve over a loop body (included by _core_loop.pxi, after ScalarBody and
# _body_step): the schedule of a (steps, slots) pair worked out once and kept,
# the sweep that runs it, advancing the body, and the turns that reverse a
# step (interpreted, and compiled).


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


cdef struct _AdjointTurn:
    # ScalarLoop's reversed step: the body's partials, swept in C
    const ScalarBody *bd
    const double *xs            # (T, nx) input rows
    double *p0
    double *p1                  # the step's partials (n each)
    double *adj                 # n + 1 adjoints; adj[0] is the sink of absent operands
    double *gc                  # (nc) adjoint of the carry, updated
    double *gx                  # (T, nx) adjoints of the inputs
    const double *gy            # (T, ny) adjoints of the outputs
    Py_ssize_t ny


cdef void _sweep_step(const ScalarBody *bd, const double *p0, const double *p1,
                      double *buf, double *gc, const double *gy_row, Py_ssize_t ny,
                      double *gx_row) noexcept nogil:
    """The reverse sweep of one step: from the adjoints of its outputs (``gc``:
    the next carries; ``gy_row``: the ``ny`` outputs after them) to those of
    its carries (into ``gc``) and inputs (into ``gx_row``)."""
    cdef Py_ssize_t i, j, nc = bd.nc
    cdef int32_t ia, ib
    cdef double g
    cdef double *adj = buf + 1
    memset(buf, 0, (bd.n + 1) * sizeof(double))
    for j in range(nc):
        adj[bd.outs[j]] += gc[j]
    for j in range(ny):
        adj[bd.outs[nc + j]] += gy_row[j]
    for i in range(bd.n - 1, -1, -1):
        g = adj[i]
        if g != 0.0 and bd.op[i] >= FIRST_BINARY:   # missing operands skipped (sweep_scalar)
            ia = bd.a[i]
            ib = bd.b[i]
            if ia >= 0:
                adj[ia] += g * p0[i]
            if ib >= 0:
                adj[ib] += g * p1[i]
    for j in range(nc):
        gc[j] = adj[bd.cin[j]]
    for j in range(bd.nx):
        gx_row[j] = adj[bd.xin[j]]


cdef void _adjoint_turn(void *ctx, Py_ssize_t t, const double *state) noexcept nogil:
    cdef _AdjointTurn *c = <_AdjointTurn *> ctx
    cdef const ScalarBody *bd = c.bd
    _body_step(bd, state, c.xs + bd.nx * t, c.p0, c.p1)
    _sweep_step(bd, c.p0, c.p1, c.adj, c.gc, c.gy + c.ny * t, c.ny, c.gx + bd.nx * t)


cdef struct _NativeTurn:
    # ScalarLoop's reversed step, compiled: recompute the step, sweep it back
    _native_adj_fn adj
    Py_ssize_t nx, ny
    const double *xs
    const double *gy
    double *gc
    double *gx


cdef void _native_turn(void *ctx, Py_ssize_t t, const double *state) noexcept nogil:
    cdef _NativeTurn *c = <_NativeTurn *> ctx
    c.adj(state, c.xs + c.nx * t, c.gy + c.ny * t, c.gc, c.gx + c.nx * t)
