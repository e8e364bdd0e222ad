# A scalar tape run as the body of a loop, every step in C
# (included by _core.pyx after _tape_replay.pxi).
#
# ``ta.scan`` over float carries and 1-d float xs records its body once on a
# small tape of scalar nodes; ``ScalarLoop`` then runs that tape T times
# (values and local partials, kept per step) and reverses all T steps in one
# C loop, instead of recording T copies of the body from Python.


@cython.final
cdef class ScalarLoop:
    """The body of a loop as a scalar tape: forward and reverse over T steps.

    Parameters
    ----------
    body : Tape
        Only input nodes and scalar opcodes (no array, custom or guard
        node); ``ValueError`` otherwise.
    carry_in, x_in : sequence of int
        Input node ids of the carry and of one step's ``x`` elements.
    carry_out, y_out : sequence of int
        Node ids of the next carry and of the step's outputs ``y``.
    """
    cdef Tape body
    cdef object cin, xin, cout, yout      # int32 arrays of node ids
    cdef object p0s, p1s                  # (T, n) partials of the last forward run
    cdef readonly Py_ssize_t steps

    def __cinit__(self, Tape body, carry_in, x_in, carry_out, y_out):
        cdef Py_ssize_t i
        for i in range(body.n):
            if body.op[i] != OP_INPUT and body.op[i] < FIRST_BINARY:
                raise ValueError("ScalarLoop: the body tape has a non-scalar node "
                                 f"{i} (opcode {body.op[i]})")
        self.body = body
        self.cin = np.asarray(carry_in, dtype=np.int32)
        self.xin = np.asarray(x_in, dtype=np.int32)
        self.cout = np.asarray(carry_out, dtype=np.int32)
        self.yout = np.asarray(y_out, dtype=np.int32)
        for ids, what in ((self.cin, "carry_in"), (self.xin, "x_in")):
            for i in ids:
                if not 0 <= i < body.n or body.op[i] != OP_INPUT:
                    raise ValueError(f"ScalarLoop: {what} id {i} is not an input node")
        for ids in (self.cout, self.yout):
            for i in ids:
                if not 0 <= i < body.n:
                    raise ValueError(f"ScalarLoop: output id {i} is not on the tape")
        if len(self.cout) != len(self.cin):
            raise ValueError("ScalarLoop: carry_in and carry_out differ in length")
        self.steps = -1

    def forward(self, carry0, xs, bint keep=True):
        """Run ``T = len(xs)`` steps; returns ``(final carry (m,), ys (T, q))``.

        ``carry0``: float64 (m,); ``xs``: float64 (T, k).  With ``keep`` the
        partials of every step are kept for :meth:`reverse`; without, only
        values are computed (for :meth:`reverse_checkpointed`).
        """
        cdef const double[::1] c0 = np.ascontiguousarray(carry0, dtype=np.float64)
        cdef const double[:, ::1] xv = np.ascontiguousarray(xs, dtype=np.float64)
        cdef const int32_t[::1] cin = self.cin, xin = self.xin
        cdef const int32_t[::1] cout = self.cout, yout = self.yout
        cdef Py_ssize_t T = xv.shape[0], n = self.body.n, m = cin.shape[0]
        cdef Py_ssize_t k = xin.shape[0], q = yout.shape[0], t, i, j
        if c0.shape[0] != m or (T and xv.shape[1] != k):
            raise ValueError("ScalarLoop.forward: carry0 or xs has the wrong size")
        carry = np.array(c0, dtype=np.float64)
        ys = np.empty((T, q), dtype=np.float64)
        self.p0s = np.empty((T if keep else 1, n), dtype=np.float64)
        self.p1s = np.empty((T if keep else 1, n), dtype=np.float64)
        cdef Py_ssize_t row = 0
        cdef double[::1] c = carry
        cdef double[:, ::1] yv = ys
        cdef double[:, ::1] P0 = self.p0s
        cdef double[:, ::1] P1 = self.p1s
        cdef Tape tp = self.body
        with nogil:
            for t in range(T):
                row = t if keep else 0
                _loop_step(tp.op, tp.a, tp.b, tp.val, tp.p1, &c[0] if m else NULL,
                           &xv[t, 0] if k else NULL,
                           &cin[0], &xin[0], m, k, n, &P0[row, 0], &P1[row, 0])
                for j in range(m):
                    c[j] = tp.val[cout[j]]
                for j in range(q):
                    yv[t, j] = tp.val[yout[j]]
        self.steps = T if keep else -1
        return carry, ys

    def reverse_checkpointed(self, carry0, xs, g_carry, g_ys, Py_ssize_t s):
        """Cotangents as :meth:`reverse` gives them, from at most ``s`` stored
        carries (the initial one included) instead of every step's partials:
        the revolve schedule runs in C, recomputing steps from the stored
        carries.  Returns ``(carry0 (m,), xs (T, k), advance_steps)``;
        ``advance_steps`` is revolve's ``t(T, s)``.
        """
        cdef const double[::1] c0 = np.ascontiguousarray(carry0, dtype=np.float64)
        cdef const double[:, ::1] xv = np.ascontiguousarray(xs, dtype=np.float64)
        cdef const int32_t[::1] cin = self.cin, xin = self.xin
        cdef const int32_t[::1] cout = self.cout, yout = self.yout
        cdef Py_ssize_t T = xv.shape[0], n = self.body.n, m = cin.shape[0]
        cdef Py_ssize_t k = xin.shape[0], q = yout.shape[0], i, j, t
        cdef const double[:, ::1] gy = np.ascontiguousarray(
            np.reshape(g_ys, (T, q)), dtype=np.float64)
        if s < 1:
            raise ValueError("ScalarLoop.reverse_checkpointed: s must be >= 1")
        cdef Py_ssize_t snaps = min(s, T) if T > 0 else 1
        gcarry = np.array(g_carry, dtype=np.float64)
        gxs = np.zeros((T, k), dtype=np.float64)
        slots = np.empty((snaps, max(m, 1)), dtype=np.float64)
        cur_arr = np.array(c0, dtype=np.float64)
        part = np.empty((2, n), dtype=np.float64)
        cdef double[::1] gc = gcarry
        cdef double[:, ::1] gx = gxs
        cdef double[:, ::1] sl = slots
        cdef double[::1] cur = cur_arr
        cdef double[:, ::1] pp = part
        cdef Tape tp = self.body
        cdef RevolveState st
        cdef int64_t row[3]
        cdef int status = _OK
        cdef int64_t advances = 0
        cdef double g
        cdef double *buf = <double *>calloc(n + 1, sizeof(double))
        cdef double *adj = buf + 1
        if buf == NULL or _revolve_init(&st, T, snaps) != _OK:
            free(buf)
            raise MemoryError("out of memory while reversing the loop")
        try:
            with nogil:
                while True:
                    status = _revolve_next(&st, row)
                    if status != _OK or row[0] == _TERMINATE:
                        break
                    if row[0] == _ADVANCE:
                        for t in range(row[1], row[2]):
                            _loop_step(tp.op, tp.a, tp.b, tp.val, tp.p1, &cur[0] if m else NULL,
                                       &xv[t, 0] if k else NULL, &cin[0], &xin[0],
                                       m, k, n, &pp[0, 0], &pp[1, 0])
                            for j in range(m):
                                cur[j] = tp.val[cout[j]]
                        advances += row[2] - row[1]
                    elif row[0] == _TAKESHOT:
                        for j in range(m):
                            sl[row[2], j] = cur[j]
                    elif row[0] == _RESTORE:
                        for j in range(m):
                            cur[j] = sl[row[2], j]
                    else:                   # FIRSTURN / YOUTURN: reverse step row[1]
                        t = row[1]
                        _loop_step(tp.op, tp.a, tp.b, tp.val, tp.p1, &cur[0] if m else NULL,
                                   &xv[t, 0] if k else NULL,
                                   &cin[0], &xin[0], m, k, n, &pp[0, 0], &pp[1, 0])
                        memset(buf, 0, (n + 1) * sizeof(double))
                        for j in range(m):
                            adj[cout[j]] += gc[j]
                        for j in range(q):
                            adj[yout[j]] += gy[t, j]
                        for i in range(n - 1, -1, -1):
                            g = adj[i]
                            if g != 0.0 and tp.op[i] != OP_INPUT:
                                adj[tp.a[i]] += g * pp[0, i]
                                adj[tp.b[i]] += g * pp[1, i]
                        for j in range(m):
                            gc[j] = adj[cin[j]]
                        for j in range(k):
                            gx[t, j] = adj[xin[j]]
        finally:
            free(buf)
            free(st.held)
        if status != _OK:
            raise RuntimeError("internal error: the revolve kernel ran out of slots")
        return gcarry, gxs, advances

    def reverse(self, g_carry, g_ys):
        """Cotangents of the last forward run: ``(carry0 (m,), xs (T, k))``
        from those of the final carry (m,) and of ys (T, q)."""
        if self.steps < 0:
            raise RuntimeError("ScalarLoop.reverse: call forward first")
        cdef Py_ssize_t T = self.steps, n = self.body.n, t, i, j
        cdef const int32_t[::1] cin = self.cin, xin = self.xin
        cdef const int32_t[::1] cout = self.cout, yout = self.yout
        cdef Py_ssize_t m = cin.shape[0], k = xin.shape[0], q = yout.shape[0]
        cdef const double[::1] gc0 = np.ascontiguousarray(g_carry, dtype=np.float64)
        cdef const double[:, ::1] gy = np.ascontiguousarray(
            np.reshape(g_ys, (T, q)), dtype=np.float64)
        if gc0.shape[0] != m:
            raise ValueError("ScalarLoop.reverse: g_carry has the wrong size")
        gcarry = np.array(gc0, dtype=np.float64)
        gxs = np.zeros((T, k), dtype=np.float64)
        cdef double[::1] gc = gcarry
        cdef double[:, ::1] gx = gxs
        cdef const double[:, ::1] P0 = self.p0s
        cdef const double[:, ::1] P1 = self.p1s
        cdef Tape tp = self.body
        cdef double g
        cdef double *buf = <double *>calloc(n + 1, sizeof(double))
        if buf == NULL:
            raise MemoryError("cannot allocate the adjoint buffer")
        cdef double *adj = buf + 1
        try:
            with nogil:
                for t in range(T - 1, -1, -1):
                    memset(buf, 0, (n + 1) * sizeof(double))
                    for j in range(m):
                        adj[cout[j]] += gc[j]
                    for j in range(q):
                        adj[yout[j]] += gy[t, j]
                    for i in range(n - 1, -1, -1):
                        g = adj[i]
                        if g != 0.0 and tp.op[i] != OP_INPUT:
                            adj[tp.a[i]] += g * P0[t, i]
                            adj[tp.b[i]] += g * P1[t, i]
                    for j in range(m):
                        gc[j] = adj[cin[j]]
                    for j in range(k):
                        gx[t, j] = adj[xin[j]]
        finally:
            free(buf)
        return gcarry, gxs


cdef void _loop_step(const int32_t *op, const int32_t *a, const int32_t *b, double *val,
                     const double *consts, const double *carry, const double *x,
                     const int32_t *cin, const int32_t *xin, Py_ssize_t m, Py_ssize_t k,
                     Py_ssize_t n, double *p0, double *p1) noexcept nogil:
    """One step of the body tape from ``carry`` and ``x``: values into
    ``val``, local partials into ``p0``/``p1`` (n each); ``consts`` is the
    tape's p1 (the constants of the constant ops)."""
    cdef Py_ssize_t i, j
    cdef int o
    cdef double v, d0, d1, y
    for j in range(m):
        val[cin[j]] = carry[j]
    for j in range(k):
        val[xin[j]] = x[j]
    for i in range(n):
        o = op[i]
        if o == OP_INPUT:
            p0[i] = 0.0
            p1[i] = 0.0
            continue
        y = val[b[i]] if o < FIRST_CONST else consts[i]
        scalar_eval(o, val[a[i]], y, &v, &d0, &d1)
        val[i] = v
        p0[i] = d0
        p1[i] = d1
