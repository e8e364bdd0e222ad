# Loops over a recorded scalar body, in C (included by _core.pyx).
#
# The graph API's loops (tapead.scaly.loops_lower) evaluate their body's
# recorded tape once per step.  When the body's tape holds only scalar nodes
# (inputs and scalar opcodes: no arrays, no Python-ruled nodes, no guards),
# scalar_scan (and scalar_while, with a condition tape) runs every step here,
# without Python and without the GIL:
# write the carries and the step's inputs into the input nodes, re-evaluate
# the scalar nodes in id order (the values-only replay kernel), read the
# outputs.


cdef int _check_scalar_body(Tape tp, const Py_ssize_t[::1] ins) except -1:
    cdef Py_ssize_t i
    for i in range(tp.n):
        if tp.op[i] != OP_INPUT and tp.op[i] < FIRST_BINARY:
            raise ValueError(f"scalar_scan: node {i} of the body's tape is not a scalar node; "
                             "loop over it with Tape.evaluate instead")
    for i in range(ins.shape[0]):
        if not 0 <= ins[i] < tp.n or tp.op[ins[i]] != OP_INPUT:
            raise ValueError(f"scalar_scan: node {ins[i]} is not a scalar input of the tape")
    return 0


cdef inline void _replay_values(const int32_t *op, const int32_t *a, const int32_t *b,
                                double *val, const double *p1, Py_ssize_t n) noexcept nogil:
    """Re-evaluate the scalar nodes of an all-scalar tape (values only)."""
    cdef Py_ssize_t i
    cdef int o
    cdef double y
    for i in range(n):
        o = op[i]
        if o >= FIRST_BINARY:
            y = val[b[i]] if o < FIRST_CONST else p1[i]
            val[i] = scalar_value(o, val[a[i]], y)


cdef inline bint _compare(int how, double x, double y) noexcept nogil:
    if how == 0:
        return x < y
    if how == 1:
        return x <= y
    if how == 2:
        return x > y
    if how == 3:
        return x >= y
    if how == 4:
        return x == y
    return x != y


#: comparison codes of scalar_while
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def scalar_while(Tape body, body_ins, body_outs, body_consts, Tape cond, cond_ins,
                 cond_outs, cond_consts, str comparison, double[::1] carry,
                 const double[::1] params, double[:, ::1] traj, Py_ssize_t max_iter):
    """Run a while loop whose body and condition are all-scalar tapes, in C.

    Parameters
    ----------
    body, cond : Tape
        Scalar inputs and scalar nodes only (else ValueError).  Both take the
        nc carries, then the np parameters (``body_ins``/``cond_ins``: their
        input node ids).
    body_outs, body_consts : sequences of length nc
        The next carries' node ids (-1: the constant ``body_consts[j]``).
    cond_outs, cond_consts : sequences of length 2
        The two sides of the condition; the loop continues while
        ``lhs <comparison> rhs`` (``comparison`` one of ``COMPARISONS``).
    carry : float64 array (nc,)
        The initial carries, overwritten with the final ones.
    params : float64 array (np,)
    traj : float64 array (max_iter, nc) or (0, nc)
        Row k receives the carries entering step k (nothing when empty).
    max_iter : int

    Returns
    -------
    int
        The number of steps executed.
    """
    cdef const Py_ssize_t[::1] bin_ = np.ascontiguousarray(body_ins, dtype=np.intp)
    cdef const Py_ssize_t[::1] bout = np.ascontiguousarray(body_outs, dtype=np.intp)
    cdef const double[::1] bconst = np.ascontiguousarray(body_consts, dtype=np.float64)
    cdef const Py_ssize_t[::1] cin = np.ascontiguousarray(cond_ins, dtype=np.intp)
    cdef const Py_ssize_t[::1] cout = np.ascontiguousarray(cond_outs, dtype=np.intp)
    cdef const double[::1] cconst = np.ascontiguousarray(cond_consts, dtype=np.float64)
    cdef Py_ssize_t nc = carry.shape[0], npar = params.shape[0], j, count = 0
    cdef bint keep = traj.shape[0] > 0
    cdef int how
    cdef double lhs, rhs
    if comparison not in COMPARISONS:
        raise ValueError(f"scalar_while: comparison {comparison!r} is not one of "
                         f"{', '.join(COMPARISONS)}")
    how = COMPARISONS.index(comparison)
    if bin_.shape[0] != nc + npar or cin.shape[0] != nc + npar or bout.shape[0] != nc or \
            bconst.shape[0] != nc or cout.shape[0] != 2 or cconst.shape[0] != 2:
        raise ValueError("scalar_while: the body and the condition take nc + np inputs; the "
                         "body has nc outputs and the condition 2")
    if max_iter < 0 or (keep and (traj.shape[0] < max_iter or traj.shape[1] != nc)):
        raise ValueError("scalar_while: traj needs max_iter rows of nc carries")
    for j in range(nc):
        if bout[j] >= body.n:
            raise ValueError(f"scalar_while: output node {bout[j]} is not on the body's tape")
    for j in range(2):
        if cout[j] >= cond.n:
            raise ValueError(f"scalar_while: node {cout[j]} is not on the condition's tape")
    _check_scalar_body(body, bin_)
    _check_scalar_body(cond, cin)
    cdef double[::1] nxt = np.empty(nc, dtype=np.float64)
    body.partials_stale = True
    cond.partials_stale = True
    with nogil:
        while count < max_iter:
            for j in range(nc):
                cond.val[cin[j]] = carry[j]
            for j in range(npar):
                cond.val[cin[nc + j]] = params[j]
            _replay_values(cond.op, cond.a, cond.b, cond.val, cond.p1, cond.n)
            lhs = cond.val[cout[0]] if cout[0] >= 0 else cconst[0]
            rhs = cond.val[cout[1]] if cout[1] >= 0 else cconst[1]
            if not _compare(how, lhs, rhs):
                break
            for j in range(nc):
                if keep:
                    traj[count, j] = carry[j]
                body.val[bin_[j]] = carry[j]
            for j in range(npar):
                body.val[bin_[nc + j]] = params[j]
            _replay_values(body.op, body.a, body.b, body.val, body.p1, body.n)
            for j in range(nc):
                nxt[j] = body.val[bout[j]] if bout[j] >= 0 else bconst[j]
            for j in range(nc):
                carry[j] = nxt[j]
            count += 1
    return count


def scalar_scan(Tape tp, in_ids, out_ids, out_consts, double[::1] carry,
                const double[:, ::1] xs, double[:, ::1] ys, double[:, ::1] traj,
                const Py_ssize_t[::1] steps):
    """Run the steps of a scan whose body is the all-scalar tape ``tp``.

    Parameters
    ----------
    tp : Tape
        The body's tape: scalar inputs and scalar nodes only (else ValueError).
    in_ids : sequence of int, length nc + nx
        Input node ids: the nc carries, then the nx per-step inputs.
    out_ids : sequence of int, length nc + ny
        Output node ids: the nc next carries, then the ny per-step outputs; -1
        for an output that is the constant ``out_consts[j]``.
    out_consts : sequence of float, length nc + ny
    carry : float64 array (nc,)
        The initial carries, overwritten with the final ones.
    xs : float64 array (L, nx)
        Step k's inputs are row k.
    ys : float64 array (L, ny)
        Row k receives step k's outputs (rows of steps not run are untouched).
    traj : float64 array (L, nc) or (0, nc)
        Row k receives the carries entering step k (nothing when empty).
    steps : intp array
        The steps to run, in order (each in [0, L)).

    The tape is left with the last step's values (``partials_stale``).
    """
    cdef const Py_ssize_t[::1] ins = np.ascontiguousarray(in_ids, dtype=np.intp)
    cdef const Py_ssize_t[::1] outs = np.ascontiguousarray(out_ids, dtype=np.intp)
    cdef const double[::1] consts = np.ascontiguousarray(out_consts, dtype=np.float64)
    cdef Py_ssize_t nc = carry.shape[0], nx = xs.shape[1], ny = ys.shape[1]
    cdef Py_ssize_t L = xs.shape[0], n = tp.n, i, j, s, k, ns = steps.shape[0]
    cdef bint keep = traj.shape[0] > 0
    cdef double v
    if ins.shape[0] != nc + nx or outs.shape[0] != nc + ny or consts.shape[0] != nc + ny:
        raise ValueError("scalar_scan: in_ids must list nc + nx inputs and out_ids and "
                         "out_consts nc + ny outputs")
    if ys.shape[0] != L or (keep and (traj.shape[0] != L or traj.shape[1] != nc)):
        raise ValueError("scalar_scan: ys and traj need one row per step")
    for s in range(ns):
        if not 0 <= steps[s] < L:
            raise ValueError(f"scalar_scan: step {steps[s]} is outside [0, {L})")
    for j in range(outs.shape[0]):
        if outs[j] >= n:
            raise ValueError(f"scalar_scan: output node {outs[j]} is not on the tape")
    _check_scalar_body(tp, ins)
    cdef double[::1] nxt = np.empty(nc, dtype=np.float64)
    cdef int32_t *op = tp.op
    cdef int32_t *a = tp.a
    cdef int32_t *b = tp.b
    cdef double *val = tp.val
    cdef double *p1 = tp.p1
    tp.partials_stale = True
    with nogil:
        for s in range(ns):
            k = steps[s]
            for j in range(nc):
                if keep:
                    traj[k, j] = carry[j]
                val[ins[j]] = carry[j]
            for j in range(nx):
                val[ins[nc + j]] = xs[k, j]
            _replay_values(op, a, b, val, p1, n)
            for j in range(nc + ny):
                v = val[outs[j]] if outs[j] >= 0 else consts[j]
                if j < nc:
                    nxt[j] = v
                else:
                    ys[k, j - nc] = v
            for j in range(nc):
                carry[j] = nxt[j]
