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

    def forward(self, carry0, xs):
        """Run ``T = len(xs)`` steps; returns ``(final carry (m,), ys (T, q))``.

        ``carry0``: float64 (m,); ``xs``: float64 (T, k).  The partials of
        every step are kept for :meth:`reverse`.
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
        self.p0s = np.empty((T, n), dtype=np.float64)
        self.p1s = np.empty((T, n), dtype=np.float64)
        cdef double[::1] c = carry
        cdef double[:, ::1] yv = ys
        cdef double[:, ::1] P0 = self.p0s
        cdef double[:, ::1] P1 = self.p1s
        cdef Tape tp = self.body
        cdef int o
        cdef double v, d0, d1, y
        with nogil:
            for t in range(T):
                for j in range(m):
                    tp.val[cin[j]] = c[j]
                for j in range(k):
                    tp.val[xin[j]] = xv[t, j]
                for i in range(n):
                    o = tp.op[i]
                    if o == OP_INPUT:
                        P0[t, i] = 0.0
                        P1[t, i] = 0.0
                        continue
                    y = tp.val[tp.b[i]] if o < FIRST_CONST else tp.p1[i]
                    scalar_eval(o, tp.val[tp.a[i]], y, &v, &d0, &d1)
                    tp.val[i] = v
                    P0[t, i] = d0
                    P1[t, i] = d1
                for j in range(m):
                    c[j] = tp.val[cout[j]]
                for j in range(q):
                    yv[t, j] = tp.val[yout[j]]
        self.steps = T
        return carry, ys

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
