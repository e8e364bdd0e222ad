# A scalar tape run as the body of a loop, every step in C
# (included by _core.pyx after _core_replay.pxi and _revolve_kernel.pxi).
#
# One implementation serves every loop over a recorded scalar body:
#
# * ``ScalarBody`` + ``_body_step``: one step of the body (write the carries
#   and the step's inputs into its input nodes, re-evaluate the scalar nodes
#   in id order; values only, or values and local partials);
# * ``_revolve_sweep``: a reverse sweep from at most ``s`` stored carries,
#   Griewank & Walther's revolve schedule run in C, its primal steps by
#   ``_body_step`` and each reversed step handed to a ``turn`` callback.
#
# ``ScalarLoop`` (``ta.scan`` over float carries, ``tapead.scalar_scan``)
# reverses a step with the body's own partials; ``scalar_scan``,
# ``scalar_while`` and ``scalar_scan_checkpointed`` (the graph API's loops,
# ``_core_scan.pxi``) run the same steps, the last one reversing a step by
# running the recorded backward body.


cdef struct ScalarBody:
    # the tape's node arrays (an all-scalar tape: inputs and scalar opcodes)
    const int32_t *op
    const int32_t *a
    const int32_t *b
    double *val
    const double *consts        # the tape's p1: the constants of the constant ops
    Py_ssize_t n
    # nc carry inputs: node ids
    Py_ssize_t nc
    const Py_ssize_t *cin
    # nx per-step inputs: node ids and the column of the step's input row each reads
    Py_ssize_t nx
    const Py_ssize_t *xin
    const Py_ssize_t *xcol
    # nout outputs: node ids, -1 for an output that is the constant outc[j]
    Py_ssize_t nout
    const Py_ssize_t *outs
    const double *outc
    # a compiled step (tapead.compiler.bodies), or NULL: values only, from the
    # carries and the step's row to the output nodes' val slots; and the
    # compiled steps from a row on, from carries to carries (revolve's advances)
    void *native_step
    void *native_adv


cdef class _BodyArrays:
    """The id arrays a ``ScalarBody`` points into (kept alive while it runs).

    A step input whose column is negative, ``-1 - j``, is a parameter: it
    reads ``params[j]`` of :meth:`write_params`, once, not a column of each
    step's row.
    """
    cdef object cin, xin, xcol, outs, outc, pin, pcol
    cdef ScalarBody body

    def __cinit__(self, Tape tp, carry_in, x_in, x_cols, out_ids, out_consts, str who,
                  bint packs=False, bint guards=False):
        cdef Py_ssize_t i
        cdef int o
        for i in range(tp.n):
            o = tp.op[i]
            if packs and o == OP_OBJ and _unread_pack(tp, i):
                continue            # a small vector of the body's scalars: no step reads it
            if guards and o == OP_GUARD:
                continue            # a condition's own comparison: a step computes its sides
            if o != OP_INPUT and o < FIRST_BINARY:
                raise ValueError(f"{who}: node {i} of the body's tape is not a scalar node "
                                 f"(opcode {tp.op[i]}); loop over it with Tape.evaluate instead")
        x_in, x_cols = list(x_in), list(x_cols)
        if len(x_cols) != len(x_in) or len(out_consts) != len(out_ids):
            raise ValueError(f"{who}: one column per step input and one constant per output")
        per_step = [j for j in range(len(x_in)) if x_cols[j] >= 0]
        params = [j for j in range(len(x_in)) if x_cols[j] < 0]
        self.cin = _padded(carry_in, np.intp)
        self.xin = _padded([x_in[j] for j in per_step], np.intp)
        self.xcol = _padded([x_cols[j] for j in per_step], np.intp)
        self.pin = np.array([x_in[j] for j in params], dtype=np.intp)
        self.pcol = np.array([-1 - x_cols[j] for j in params], dtype=np.intp)
        self.outs = _padded(out_ids, np.intp)
        self.outc = _padded(out_consts, np.float64)
        nc, nx, nout = len(carry_in), len(per_step), len(out_ids)
        for i in list(carry_in) + x_in:
            if not 0 <= i < tp.n or tp.op[i] != OP_INPUT:
                raise ValueError(f"{who}: node {i} is not a scalar input of the tape")
        for i in self.outs[:nout]:
            if i >= tp.n:
                raise ValueError(f"{who}: output node {i} is not on the tape")
        self.body.op, self.body.a, self.body.b = tp.op, tp.a, tp.b
        self.body.val, self.body.consts, self.body.n = tp.val, tp.p1, tp.n
        self.body.nc, self.body.nx, self.body.nout = nc, nx, nout
        self.body.cin = <const Py_ssize_t *> _data(self.cin)
        self.body.xin = <const Py_ssize_t *> _data(self.xin)
        self.body.xcol = <const Py_ssize_t *> _data(self.xcol)
        self.body.outs = <const Py_ssize_t *> _data(self.outs)
        self.body.outc = <const double *> _data(self.outc)
        self.body.native_step = NULL
        self.body.native_adv = NULL

    cdef int write_params(self, const double[::1] params) except -1:
        """Write the parameters into their input nodes (before the steps run)."""
        cdef Py_ssize_t j
        for j in range(self.pin.shape[0]):
            if not 0 <= self.pcol[j] < params.shape[0]:
                raise ValueError(f"parameter {self.pcol[j]} is not in params")
            self.body.val[self.pin[j]] = params[self.pcol[j]]
        return 0


cdef bint _unread_pack(Tape tp, Py_ssize_t i):
    """Whether object node ``i`` is a small vector packed from scalar nodes
    (``_core_small``) that no scalar node reads (they read its elements):
    a loop body may hold it, and a step skips it."""
    cdef Py_ssize_t j
    if not _packs_scalars(tp, <Record>tp.recs[<Py_ssize_t>tp.p0[i]]):
        return False
    for j in range(i + 1, tp.n):
        if tp.op[j] >= FIRST_BINARY and (tp.a[j] == i or (tp.op[j] < FIRST_CONST and
                                                           tp.b[j] == i)):
            return False
    return True


cdef object _padded(values, dtype):
    """``values`` as a contiguous 1-d array of ``dtype`` with at least one element
    (so that its data pointer is valid; the count is kept apart)."""
    arr = np.array(values, dtype=dtype).reshape(-1)
    return arr if arr.size else np.zeros(1, dtype=dtype)


cdef void *_data(object arr):
    """The data pointer of a non-empty C-contiguous array (which the caller
    keeps alive while the pointer is used)."""
    if not arr.flags.c_contiguous or arr.size == 0:
        raise ValueError("internal error: a loop buffer is empty or not contiguous")
    cdef char[::1] raw = arr.reshape(-1).view(np.int8)
    return <void *> &raw[0]


# the functions tapead.compiler.bodies generates for a body (see ScalarLoop.set_native)
ctypedef void (*_native_step_fn)(const double *carry, const double *xrow,
                                 double *val) noexcept nogil
ctypedef void (*_native_adv_fn)(Py_ssize_t T, double *carry, const double *X) noexcept nogil
ctypedef void (*_native_fwd_fn)(Py_ssize_t T, double *carry, const double *X, double *Y,
                                double *traj, double *aux) noexcept nogil
ctypedef void (*_native_rev_fn)(Py_ssize_t T, const double *traj, const double *X,
                                const double *GY, double *gc, double *GX,
                                const double *aux) noexcept nogil
ctypedef void (*_native_adj_fn)(const double *carry, const double *xrow, const double *gy,
                                double *gc, double *gx) noexcept nogil
ctypedef void (*_native_scan_fn)(Py_ssize_t ns, const Py_ssize_t *steps, double *carry,
                                 const double *X, double *Y, double *traj) noexcept nogil


cdef void _body_step(const ScalarBody *bd, const double *carry, const double *xrow,
                     double *p0, double *p1) noexcept nogil:
    """One step of the body from ``carry`` (nc) and the step's input row
    ``xrow``: values into the tape's ``val``; with ``p0`` not NULL, the local
    partials of node i into ``p0[i]``/``p1[i]`` (the tape's own are untouched)."""
    cdef Py_ssize_t i, j
    cdef int o
    cdef double v, d0, d1, y
    cdef double *val = bd.val
    if p0 == NULL and bd.native_step != NULL:
        (<_native_step_fn> bd.native_step)(carry, xrow, val)
        return
    for j in range(bd.nc):
        val[bd.cin[j]] = carry[j]
    for j in range(bd.nx):
        val[bd.xin[j]] = xrow[bd.xcol[j]]
    if p0 == NULL:
        for i in range(bd.n):
            o = bd.op[i]
            if o >= FIRST_BINARY:
                y = val[bd.b[i]] if o < FIRST_CONST else bd.consts[i]
                val[i] = scalar_value(o, val[bd.a[i]], y)
        return
    for i in range(bd.n):
        o = bd.op[i]
        if o < FIRST_BINARY:        # an input, or a small vector no step reads
            p0[i] = 0.0
            p1[i] = 0.0
            continue
        y = val[bd.b[i]] if o < FIRST_CONST else bd.consts[i]
        scalar_eval(o, val[bd.a[i]], y, &v, &d0, &d1)
        val[i] = v
        p0[i] = d0
        p1[i] = d1


cdef inline double _body_out(const ScalarBody *bd, Py_ssize_t j) noexcept nogil:
    """Output j of the last step."""
    return bd.val[bd.outs[j]] if bd.outs[j] >= 0 else bd.outc[j]


ctypedef void (*_turn_fn)(void *ctx, Py_ssize_t i, const double *state) noexcept nogil


include "_core_loop_revolve.pxi"


@cython.final
cdef class ScalarLoop:
    """The body of a loop as a scalar tape: forward and reverse over T steps.

    Parameters
    ----------
    body : Tape
        Only input nodes, scalar opcodes and small vectors packed from them
        that no scalar node reads (a body on small arrays computes element
        by element, ``_core_small``); no other array, custom or guard node
        (``ValueError`` otherwise).
    carry_in, x_in : sequence of int
        Input node ids of the carry and of one step's ``x`` elements.
    carry_out, y_out : sequence of int
        Node ids of the next carry and of the step's outputs ``y`` (scalar
        nodes or inputs).
    """
    cdef Tape tape
    cdef _BodyArrays arrays
    cdef Py_ssize_t m, k, q
    cdef object p0s, p1s                  # (T, n) partials of the last forward run
    cdef readonly Py_ssize_t steps
    # compiled forward and reverse loops (set_native), and what they keep
    cdef _native_fwd_fn nat_fwd
    cdef _native_rev_fn nat_rev
    cdef _native_adj_fn nat_adj
    cdef readonly object native          # the loaded library (kept alive), or None
    cdef object traj, kept_xs, aux        # the carries entering each step, the rows,
    cdef Py_ssize_t aux_width             # the values and partials of its libm calls
    cdef bint kept_native                 # the last forward kept traj, not partials

    def __cinit__(self, Tape body, carry_in, x_in, carry_out, y_out):
        if len(carry_out) != len(carry_in):
            raise ValueError("ScalarLoop: carry_in and carry_out differ in length")
        for i in list(carry_out) + list(y_out):
            if not 0 <= i < body.n:
                raise ValueError(f"ScalarLoop: output id {i} is not on the tape")
            if body.op[i] != OP_INPUT and body.op[i] < FIRST_BINARY:
                raise ValueError(f"ScalarLoop: output {i} is not a scalar node")
        outs = list(carry_out) + list(y_out)
        self.arrays = _BodyArrays(body, carry_in, x_in, range(len(x_in)), outs,
                                  [0.0] * len(outs), "ScalarLoop", packs=True)
        self.tape = body
        self.m, self.k, self.q = len(carry_in), len(x_in), len(y_out)
        self.steps = -1
        self.native = None

    def body_spec(self):
        """The body as arrays, for the compiler: ``(op, a, b, consts, carry_in,
        x_in, outs, out_consts)`` -- the tape's opcodes and operands (int32),
        each constant op's constant (float64; 0 for the other nodes), the
        carry and per-step input node ids in order, and the output node ids
        (carries, then ys; -1 where an output is the constant ``out_consts[j]``)."""
        cdef Tape tp = self.tape
        cdef Py_ssize_t i, n = tp.n
        op, a, b = tp.export_nodes()
        consts = np.array([tp.p1[i] if FIRST_CONST <= tp.op[i] < FIRST_UNARY else 0.0
                           for i in range(n)], dtype=np.float64)
        bd = self.arrays
        nout = self.m + self.q
        return (op, a, b, consts, [int(bd.cin[j]) for j in range(self.m)],
                [int(bd.xin[j]) for j in range(self.k)],
                [int(bd.outs[j]) for j in range(nout)],
                [float(bd.outc[j]) for j in range(nout)])

    def set_native(self, library, Py_ssize_t step, Py_ssize_t fwd, Py_ssize_t rev,
                   Py_ssize_t adj, Py_ssize_t adv, Py_ssize_t aux_width=0):
        """Run the steps through compiled functions (addresses from
        ``tapead.compiler.bodies``, which generates them from
        :meth:`body_spec` so that they give the interpreter's bits), keeping
        ``library`` alive; ``set_native(None, 0, 0, 0, 0, 0)`` returns to the
        interpreter.  A forward run with ``keep`` then keeps each step's
        carries and ``aux_width`` values (of its libm calls) instead of its
        partials, and the reverse recomputes the rest of the step."""
        if library is not None and not (step and fwd and rev and adj and adv):
            raise ValueError("ScalarLoop.set_native: five function addresses, or none")
        if aux_width < 0:
            raise ValueError("ScalarLoop.set_native: aux_width must be >= 0")
        self.aux_width = aux_width
        self.steps = -1                 # what a forward run kept is for the old code
        self.kept_native = False
        self.traj = self.kept_xs = self.aux = self.p0s = self.p1s = None
        self.arrays.body.native_step = <void *> step if library is not None else NULL
        self.arrays.body.native_adv = <void *> adv if library is not None else NULL
        self.nat_fwd = <_native_fwd_fn> <void *> fwd if library is not None else NULL
        self.nat_rev = <_native_rev_fn> <void *> rev if library is not None else NULL
        self.nat_adj = <_native_adj_fn> <void *> adj if library is not None else NULL
        self.native = library

    def forward(self, carry0, xs, bint keep=True):
        """Run ``T = len(xs)`` steps; returns ``(final carry (m,), ys (T, q))``.

        ``carry0``: float64 (m,); ``xs``: float64 (T, k).  With ``keep`` the
        partials of every step are kept for :meth:`reverse`; without, only
        values are computed (for :meth:`reverse_checkpointed`).
        """
        cdef Py_ssize_t n = self.tape.n, m = self.m, k = self.k, q = self.q, t, j
        c0 = np.asarray(carry0, dtype=np.float64).reshape(-1)
        x_arr = _rows_of(xs, k)
        if c0.shape[0] != m:
            raise ValueError("ScalarLoop.forward: carry0 or xs has the wrong size")
        cdef Py_ssize_t T = x_arr.shape[0]
        carry = np.zeros(max(m, 1), dtype=np.float64)
        carry[:m] = c0
        ys = np.empty((T, q), dtype=np.float64)
        cdef double dummy[1]
        cdef double *c = <double *> _data(carry)
        cdef const double *X = <const double *> _ptr(x_arr, dummy)
        cdef double *Y = <double *> _ptr(ys, dummy)
        cdef double *P0
        cdef double *P1
        cdef double *TR
        cdef double *AX
        cdef const ScalarBody *bd = &self.arrays.body
        if self.nat_fwd != NULL:
            self.p0s = self.p1s = None
            self.traj = np.empty((T if keep else 0, max(m, 1)), dtype=np.float64)
            self.aux = np.empty((T if keep else 0, max(self.aux_width, 1)), dtype=np.float64)
            TR = <double *> _ptr(self.traj, dummy) if keep else NULL
            AX = <double *> _ptr(self.aux, dummy) if keep else NULL
            with nogil:
                self.nat_fwd(T, c, X, Y, TR, AX)
            self.kept_xs = x_arr if keep else None
            self.kept_native = True
            self.steps = T if keep else -1
            return carry[:m], ys
        self.traj = self.kept_xs = self.aux = None
        self.kept_native = False
        self.p0s = np.empty((T if keep else 0, n), dtype=np.float64)
        self.p1s = np.empty((T if keep else 0, n), dtype=np.float64)
        P0 = <double *> _ptr(self.p0s, dummy)
        P1 = <double *> _ptr(self.p1s, dummy)
        with nogil:
            for t in range(T):
                _body_step(bd, c, X + k * t, P0 + n * t if keep else NULL,
                           P1 + n * t if keep else NULL)
                for j in range(m):
                    c[j] = _body_out(bd, j)
                for j in range(q):
                    Y[q * t + j] = _body_out(bd, m + j)
        self.steps = T if keep else -1
        return carry[:m], ys

    def reverse_checkpointed(self, carry0, xs, g_carry, g_ys, Py_ssize_t s):
        """Cotangents as :meth:`reverse` gives them, from at most ``s`` stored
        carries (the initial one included) instead of every step's partials:
        the revolve schedule runs in C, recomputing steps from the stored
        carries.  Returns ``(carry0 (m,), xs (T, k), advance_steps)``;
        ``advance_steps`` is revolve's ``t(T, s)``.
        """
        cdef Py_ssize_t m = self.m, k = self.k, q = self.q, n = self.tape.n
        x_arr = _rows_of(xs, k)
        cdef Py_ssize_t T = x_arr.shape[0]
        gy_arr = _rows_of(g_ys, q, T)
        if s < 1:
            raise ValueError("ScalarLoop.reverse_checkpointed: s must be >= 1")
        cdef Py_ssize_t snaps = min(s, T) if T > 0 else 1
        gcarry = np.zeros(max(m, 1), dtype=np.float64)
        gcarry[:m] = np.asarray(g_carry, dtype=np.float64).reshape(-1)
        gxs = np.zeros((T, k), dtype=np.float64)
        slots = np.empty(snaps * max(m, 1), dtype=np.float64)
        cur_arr = np.zeros(max(m, 1), dtype=np.float64)
        cur_arr[:m] = np.asarray(carry0, dtype=np.float64).reshape(-1)
        part = np.empty((2, n + 1), dtype=np.float64)
        adj = np.empty(n + 1, dtype=np.float64)
        cdef double dummy[1]
        cdef _AdjointTurn ctx
        ctx.bd = &self.arrays.body
        ctx.xs = <const double *> _ptr(x_arr, dummy)
        ctx.gy, ctx.ny = <const double *> _ptr(gy_arr, dummy), q
        ctx.p0 = <double *> _data(part)
        ctx.p1 = ctx.p0 + n + 1
        ctx.adj = <double *> _data(adj)
        ctx.gc, ctx.gx = <double *> _data(gcarry), <double *> _ptr(gxs, dummy)
        cdef double *cur = <double *> _data(cur_arr)
        cdef double *sl = <double *> _data(slots)
        cdef int64_t advances = 0
        cdef int status
        cdef _NativeTurn nctx
        nctx.adj, nctx.nx, nctx.ny = self.nat_adj, k, q
        nctx.xs, nctx.gy, nctx.gc, nctx.gx = ctx.xs, ctx.gy, ctx.gc, ctx.gx
        sched = _revolve_schedule(T, snaps) if self.nat_adj != NULL else None
        cdef const int32_t *sp = NULL
        cdef Py_ssize_t ns = 0
        cdef const int32_t[:, ::1] sv
        if sched is not None and sched.shape[0]:
            sv = sched
            sp, ns = &sv[0, 0], sched.shape[0]
        with nogil:
            if self.nat_adj != NULL:    # the advances run the native step (_body_step)
                status = _revolve_sweep(T, snaps, ctx.bd, ctx.xs, k, NULL, cur, sl,
                                        _native_turn, &nctx, &advances, sp, ns)
            else:
                status = _revolve_sweep(T, snaps, ctx.bd, ctx.xs, k, NULL, cur, sl,
                                        _adjoint_turn, &ctx, &advances)
        if status == _NO_MEMORY:
            raise MemoryError("out of memory while reversing the loop")
        if status != _OK:
            raise RuntimeError("internal error: the revolve kernel ran out of slots")
        return gcarry[:m], gxs, advances

    def reverse(self, g_carry, g_ys):
        """Cotangents of the last forward run: ``(carry0 (m,), xs (T, k))``
        from those of the final carry (m,) and of ys (T, q)."""
        if self.steps < 0:
            raise RuntimeError("ScalarLoop.reverse: call forward first")
        cdef Py_ssize_t T = self.steps, n = self.tape.n, t
        cdef Py_ssize_t m = self.m, k = self.k, q = self.q
        gc_in = np.asarray(g_carry, dtype=np.float64).reshape(-1)
        if gc_in.shape[0] != m:
            raise ValueError("ScalarLoop.reverse: g_carry has the wrong size")
        gy_arr = _rows_of(g_ys, q, T)
        gcarry = np.zeros(max(m, 1), dtype=np.float64)
        gcarry[:m] = gc_in
        gxs = np.zeros((T, k), dtype=np.float64)
        adj = np.empty(n + 1, dtype=np.float64)
        cdef double dummy[1]
        cdef double *gc = <double *> _data(gcarry)
        cdef double *av = <double *> _data(adj)
        cdef double *GX = <double *> _ptr(gxs, dummy)
        cdef const double *GY = <const double *> _ptr(gy_arr, dummy)
        cdef const double *P0
        cdef const double *P1
        cdef const double *TR
        cdef const double *KX
        cdef const double *AK
        cdef const ScalarBody *bd = &self.arrays.body
        if self.kept_native:
            if self.nat_rev == NULL:
                raise RuntimeError("ScalarLoop.reverse: the compiled forward run was kept "
                                   "but the compiled reverse is gone; run forward again")
            TR = <const double *> _ptr(self.traj, dummy)
            KX = <const double *> _ptr(self.kept_xs, dummy)
            AK = <const double *> _ptr(self.aux, dummy)
            with nogil:
                self.nat_rev(T, TR, KX, GY, gc, GX, AK)
            return gcarry[:m], gxs
        P0 = <const double *> _ptr(self.p0s, dummy)
        P1 = <const double *> _ptr(self.p1s, dummy)
        with nogil:
            for t in range(T - 1, -1, -1):
                _sweep_step(bd, P0 + n * t, P1 + n * t, av, gc, GY + q * t, q, GX + k * t)
        return gcarry[:m], gxs


cdef object _rows_of(values, Py_ssize_t width, Py_ssize_t rows=-1):
    """``values`` as a C-contiguous float64 array of ``rows`` (default: its
    length) rows of ``width``."""
    if rows < 0:
        rows = len(values)
    return np.ascontiguousarray(np.reshape(values, (rows, width)), dtype=np.float64)


cdef void *_ptr(object arr, double *dummy):
    """The data of a C-contiguous array, or ``dummy`` when it is empty (never
    read then: the loops over its elements do not run)."""
    return _data(arr) if arr.size else <void *> dummy
