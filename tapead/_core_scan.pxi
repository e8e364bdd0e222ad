# The graph API's loops over a recorded scalar body, in C (included by
# _core.pyx after _core_loop.pxi, whose ScalarBody, _body_step and
# _revolve_sweep they run).
#
# The graph API's loops (tapead.scaly.loops_lower) evaluate their body's
# recorded tape once per step.  When the body's tape holds only scalar nodes
# (inputs and scalar opcodes: no arrays, no Python-ruled nodes, no guards),
# scalar_scan (and scalar_while, with a condition tape) runs every step here,
# without Python and without the GIL; scalar_scan_checkpointed reverses a
# scan from at most s stored carries (revolve), running the primal body for
# the recomputed steps and the backward body for the reversed ones.


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


cdef tuple _while_bodies(Tape body, body_ins, body_outs, body_consts, Tape cond, cond_ins,
                         cond_outs, cond_consts, str comparison, Py_ssize_t nc,
                         Py_ssize_t npar, str who, bint cond_guards=False):
    """(body, condition, comparison code) of a while loop, its arguments checked."""
    if comparison not in COMPARISONS:
        raise ValueError(f"{who}: comparison {comparison!r} is not one of "
                         f"{', '.join(COMPARISONS)}")
    if len(body_ins) != nc + npar or len(cond_ins) != nc + npar or \
            len(body_outs) != nc or len(body_consts) != nc or len(cond_outs) != 2 or \
            len(cond_consts) != 2:
        raise ValueError(f"{who}: the body and the condition take nc + np inputs; the "
                         "body has nc outputs and the condition 2")
    cols = range(npar)
    bb = _BodyArrays(body, list(body_ins)[:nc], list(body_ins)[nc:], cols, body_outs,
                     body_consts, who)
    cb = _BodyArrays(cond, list(cond_ins)[:nc], list(cond_ins)[nc:], cols, cond_outs,
                     cond_consts, who, guards=cond_guards)
    body.partials_stale = True
    cond.partials_stale = True
    return bb, cb, COMPARISONS.index(comparison)


cdef void _set_native_steps(_BodyArrays first, _BodyArrays second, Py_ssize_t a,
                            Py_ssize_t b):
    """Point two bodies at compiled step functions (0: the interpreter)."""
    first.body.native_step = <void *> a if a else NULL
    second.body.native_step = <void *> b if b else NULL


def scalar_while(Tape body, body_ins, body_outs, body_consts, Tape cond, cond_ins,
                 cond_outs, cond_consts, str comparison, double[::1] carry,
                 const double[::1] params, double[:, ::1] traj, Py_ssize_t max_iter,
                 Py_ssize_t body_native=0, Py_ssize_t cond_native=0,
                 bint cond_guards=False):
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
    body_native, cond_native : int
        Addresses of the compiled ``step`` functions of the body and of the
        condition (``tapead.compiler.bodies``, generated from these tapes with
        the parameters as the step's row), or 0 for the interpreter.
    cond_guards : bool
        The condition's tape may hold guards (its comparison, recorded when
        it ran on tracers): a step skips them.

    Returns
    -------
    int
        The number of steps executed.
    """
    cdef Py_ssize_t nc = carry.shape[0], npar = params.shape[0], j, count = 0
    cdef bint keep = traj.shape[0] > 0
    cdef _BodyArrays bb, cb
    cdef int how
    bb, cb, how = _while_bodies(body, body_ins, body_outs, body_consts, cond, cond_ins,
                                cond_outs, cond_consts, comparison, nc, npar,
                                "scalar_while", cond_guards)
    _set_native_steps(bb, cb, body_native, cond_native)
    if max_iter < 0 or (keep and (traj.shape[0] < max_iter or traj.shape[1] != nc)):
        raise ValueError("scalar_while: traj needs max_iter rows of nc carries")
    cdef const ScalarBody *bd = &bb.body
    cdef const ScalarBody *cd = &cb.body
    par_arr = np.zeros(max(npar, 1), dtype=np.float64)
    par_arr[:npar] = params
    cdef double[::1] par = par_arr
    cur_arr = np.zeros(max(nc, 1), dtype=np.float64)
    cur_arr[:nc] = carry
    cdef double[::1] cur = cur_arr
    with nogil:
        while count < max_iter:
            _body_step(cd, &cur[0], &par[0], NULL, NULL)
            if not _compare(how, _body_out(cd, 0), _body_out(cd, 1)):
                break
            if keep:
                for j in range(nc):
                    traj[count, j] = cur[j]
            _body_step(bd, &cur[0], &par[0], NULL, NULL)
            for j in range(nc):
                cur[j] = _body_out(bd, j)
            count += 1
        for j in range(nc):
            carry[j] = cur[j]
    return count


def scalar_while_online(Tape body, body_ins, body_outs, body_consts, Tape cond, cond_ins,
                        cond_outs, cond_consts, str comparison, double[::1] carry,
                        const double[::1] params, Py_ssize_t max_iter, Py_ssize_t s,
                        Py_ssize_t body_native=0, Py_ssize_t cond_native=0):
    """Run a while loop as :func:`scalar_while` does, keeping at most ``s``
    carries (the initial one included) placed by the online rule of
    ``tapead.online.OnlineChain`` (for a checkpointed reverse sweep).
    ``body_native``, ``cond_native``: as for :func:`scalar_while`.

    Returns
    -------
    count : int
        The number of steps executed (``carry`` holds the final carries).
    steps : int64 array (k,)
        The indices of the stored carries below ``count``, ascending, 0 first
        (``_revolve.online_segments(count, s)``).
    stored : float64 array (k, nc)
        The carries entering those steps.
    """
    cdef Py_ssize_t nc = carry.shape[0], npar = params.shape[0], j, slot, used = 0
    cdef Py_ssize_t count = 0
    cdef _BodyArrays bb, cb
    cdef int how
    if s < 1:
        raise ValueError("scalar_while_online: s counts the stored carries, >= 1")
    if max_iter < 0:
        raise ValueError("scalar_while_online: max_iter must be >= 0")
    bb, cb, how = _while_bodies(body, body_ins, body_outs, body_consts, cond, cond_ins,
                                cond_outs, cond_consts, comparison, nc, npar,
                                "scalar_while_online")
    _set_native_steps(bb, cb, body_native, cond_native)
    cdef const ScalarBody *bd = &bb.body
    cdef const ScalarBody *cd = &cb.body
    par_arr = np.zeros(max(npar, 1), dtype=np.float64)
    par_arr[:npar] = params
    cdef double[::1] par = par_arr
    cur_arr = np.zeros(max(nc, 1), dtype=np.float64)
    cur_arr[:nc] = carry
    cdef double[::1] cur = cur_arr
    first = np.array(cur_arr)
    # slot k (k < s - 1) holds the state at index slot_step[k]; the rule's own
    # bookkeeping (sorted indices and levels) is apart
    slot_step_arr = np.full(max(s - 1, 1), -1, dtype=np.int64)
    slot_arr = np.zeros((max(s - 1, 1), max(nc, 1)), dtype=np.float64)
    rule_arr = np.zeros((2, max(s, 1)), dtype=np.int64)
    cdef int64_t[::1] slot_step = slot_step_arr
    cdef double[:, ::1] slots = slot_arr
    cdef int64_t[:, ::1] rule = rule_arr
    cdef int64_t held = 0, dropped
    with nogil:
        while count < max_iter:
            _body_step(cd, &cur[0], &par[0], NULL, NULL)
            if not _compare(how, _body_out(cd, 0), _body_out(cd, 1)):
                break
            _body_step(bd, &cur[0], &par[0], NULL, NULL)
            for j in range(nc):
                cur[j] = _body_out(bd, j)
            count += 1
            dropped = _online_place(s, &held, &rule[0, 0], &rule[1, 0], count)
            if dropped == -2:
                continue
            if dropped == -1:
                slot = used
                used += 1
            else:
                slot = 0
                while slot_step[slot] != dropped:
                    slot += 1
            slot_step[slot] = count
            for j in range(nc):
                slots[slot, j] = cur[j]
        for j in range(nc):
            carry[j] = cur[j]
    keep = [k for k in np.argsort(slot_step_arr[:used], kind="stable")
            if slot_step_arr[k] < count]
    steps = np.concatenate([[0], slot_step_arr[keep]]).astype(np.int64)
    stored = np.concatenate([first[None, :nc], slot_arr[keep, :nc]], axis=0)
    return count, steps, stored


def scalar_scan(Tape tp, in_ids, out_ids, out_consts, double[::1] carry,
                const double[:, ::1] xs, double[:, ::1] ys, double[:, ::1] traj,
                const Py_ssize_t[::1] steps, Py_ssize_t native=0):
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
    native : int
        The address of the body's compiled ``scan`` function
        (``tapead.compiler.bodies``, generated from this tape, these inputs and
        outputs: the interpreter's bits), or 0 for the interpreter.  The caller
        keeps its library loaded.

    The interpreter leaves the tape with the last step's values
    (``partials_stale``).
    """
    cdef Py_ssize_t nc = carry.shape[0], nx = xs.shape[1], ny = ys.shape[1]
    cdef Py_ssize_t L = xs.shape[0], j, s, k, ns = steps.shape[0]
    cdef bint keep = traj.shape[0] > 0
    if len(in_ids) != nc + nx or len(out_ids) != nc + ny or len(out_consts) != nc + ny:
        raise ValueError("scalar_scan: in_ids must list nc + nx inputs and out_ids and "
                         "out_consts nc + ny outputs")
    if ys.shape[0] != L or (keep and (traj.shape[0] != L or traj.shape[1] != nc)):
        raise ValueError("scalar_scan: ys and traj need one row per step")
    for s in range(ns):
        if not 0 <= steps[s] < L:
            raise ValueError(f"scalar_scan: step {steps[s]} is outside [0, {L})")
    cdef _BodyArrays arrays
    cdef const ScalarBody *bd = NULL
    if native == 0:         # (a compiled body was checked when it was generated)
        arrays = _BodyArrays(tp, list(in_ids)[:nc], list(in_ids)[nc:], range(nx), out_ids,
                             out_consts, "scalar_scan")
        bd = &arrays.body
    cur_arr = np.zeros(max(nc, 1), dtype=np.float64)
    cur_arr[:nc] = carry
    cdef double[::1] cur = cur_arr
    cdef const double *xp = &xs[0, 0] if nx and L else NULL
    cdef double *yp = &ys[0, 0] if ny and L else NULL
    cdef double *tj = &traj[0, 0] if keep and nc and L else NULL
    tp.partials_stale = True
    if native != 0:
        if ns:
            with nogil:
                (<_native_scan_fn> <void *> native)(ns, &steps[0], &cur[0], xp, yp, tj)
        for j in range(nc):
            carry[j] = cur[j]
        return
    with nogil:
        for s in range(ns):
            k = steps[s]
            if keep:
                for j in range(nc):
                    traj[k, j] = cur[j]
            _body_step(bd, &cur[0], &xs[k, 0] if nx else &cur[0], NULL, NULL)
            for j in range(ny):
                ys[k, j] = _body_out(bd, nc + j)
            for j in range(nc):
                cur[j] = _body_out(bd, j)
        for j in range(nc):
            carry[j] = cur[j]


cdef struct _BackwardTurn:
    # scalar_scan_checkpointed's reversed step: the backward body run on the
    # carries entering the step and the adjoint of the carries leaving it
    const ScalarBody *bd
    const double *xs            # (L, row_len) input rows
    Py_ssize_t row_len
    const Py_ssize_t *steps
    double *buf                 # (nb + nc): the adjoint, then the step's carries
    Py_ssize_t nb, nc
    double *ys                  # (L, ny)
    Py_ssize_t ny


cdef void _backward_turn(void *ctx, Py_ssize_t i, const double *state) noexcept nogil:
    cdef _BackwardTurn *c = <_BackwardTurn *> ctx
    cdef Py_ssize_t j, k = c.steps[i]
    for j in range(c.nc):
        c.buf[c.nb + j] = state[j]
    _body_step(c.bd, c.buf, c.xs + c.row_len * k, NULL, NULL)
    for j in range(c.ny):
        c.ys[c.ny * k + j] = _body_out(c.bd, c.nb + j)
    for j in range(c.nb):
        c.buf[j] = _body_out(c.bd, j)


def scalar_scan_checkpointed(Tape fwd, fwd_carry_in, fwd_x_in, fwd_x_cols, fwd_outs,
                             fwd_consts, Tape back, back_carry_in, back_x_in, back_x_cols,
                             back_outs, back_consts, const double[:, ::1] xs,
                             const double[::1] params, const double[::1] carry0,
                             double[::1] adjoint, double[:, ::1] ys,
                             const Py_ssize_t[::1] steps, Py_ssize_t s,
                             Py_ssize_t fwd_native=0, Py_ssize_t back_native=0):
    """Reverse mode through a scan from at most ``s`` stored carries, in C.

    The primal steps are recomputed by the all-scalar tape ``fwd`` under the
    revolve schedule (Griewank & Walther), and each executed step is
    reversed, last first, by the all-scalar tape ``back`` (the step's
    backward body: the adjoint of the carries leaving the step and the
    carries entering it in, the adjoint of the carries entering it and the
    step's outputs out).

    Parameters
    ----------
    fwd : Tape
        The primal body: nc carry inputs ``fwd_carry_in``, per-step inputs
        ``fwd_x_in`` reading columns ``fwd_x_cols`` of a row of ``xs``;
        outputs ``fwd_outs`` (node ids, -1 for the constant ``fwd_consts[j]``),
        the first nc the next carries (the others are not read).  A
        negative column ``-1 - j`` reads ``params[j]`` (a parameter passed
        whole to every step), in both bodies.
    back : Tape
        The backward body: carry inputs ``back_carry_in``, the nb adjoints
        then the nc carries entering the step; per-step inputs ``back_x_in``
        reading columns ``back_x_cols``; outputs ``back_outs`` /
        ``back_consts``: the nb adjoints of the carries entering the step,
        then the ny outputs of the step.
    xs : float64 array (L, ncol)
        Step k's input row is row k.
    params : float64 array (np,)
        The parameters (written once, before the steps run).
    carry0 : float64 array (nc,)
        The carries entering the first executed step.
    adjoint : float64 array (nb,)
        The adjoint of the final carries, overwritten with that of ``carry0``.
    ys : float64 array (L, ny)
        Row k receives step k's outputs (rows of steps not run are untouched).
    steps : intp array (T,)
        The executed steps in execution order (each in [0, L)).
    s : int
        Stored carries at most, the initial one included (>= 1).
    fwd_native, back_native : int
        Addresses of the compiled ``step`` functions of the two bodies
        (``tapead.compiler.bodies``, generated from these tapes, inputs and
        columns; they read the parameters from the tapes' value slots), or 0
        for the interpreter.

    Returns
    -------
    int
        The primal steps recomputed, revolve's ``t(T, min(s, T))``
        (``tapead.checkpointing.optimal_forward_steps``).
    """
    cdef Py_ssize_t nc = carry0.shape[0], nb = adjoint.shape[0], ny = ys.shape[1]
    cdef Py_ssize_t L = xs.shape[0], T = steps.shape[0], i, j
    if s < 1:
        raise ValueError("scalar_scan_checkpointed: s counts the stored carries, >= 1")
    if len(fwd_carry_in) != nc or len(fwd_outs) < nc or len(back_carry_in) != nb + nc or \
            len(back_outs) != nb + ny:
        raise ValueError("scalar_scan_checkpointed: the primal body takes nc carries and "
                         "returns them first; the backward body takes nb + nc carries and "
                         "returns nb + ny outputs")
    if ys.shape[0] != L:
        raise ValueError("scalar_scan_checkpointed: ys needs one row per step")
    for i in range(T):
        if not 0 <= steps[i] < L:
            raise ValueError(f"scalar_scan_checkpointed: step {steps[i]} is outside [0, {L})")
    for cols in (fwd_x_cols, back_x_cols):
        for j in cols:
            if not -params.shape[0] <= j < xs.shape[1]:
                raise ValueError(f"scalar_scan_checkpointed: column {j} is not in xs")
    cdef _BodyArrays fa = _BodyArrays(fwd, fwd_carry_in, fwd_x_in, fwd_x_cols, fwd_outs,
                                      fwd_consts, "scalar_scan_checkpointed")
    cdef _BodyArrays ba = _BodyArrays(back, back_carry_in, back_x_in, back_x_cols, back_outs,
                                      back_consts, "scalar_scan_checkpointed")
    fa.write_params(params)
    ba.write_params(params)
    _set_native_steps(fa, ba, fwd_native, back_native)
    cdef Py_ssize_t snaps = min(s, T) if T > 0 else 1
    cur_arr = np.zeros(max(nc, 1), dtype=np.float64)
    cur_arr[:nc] = carry0
    slot_arr = np.empty(snaps * max(nc, 1), dtype=np.float64)
    buf_arr = np.zeros(max(nb + nc, 1), dtype=np.float64)
    buf_arr[:nb] = adjoint
    row_arr = np.zeros(1, dtype=np.float64)           # the rows of an empty xs
    cdef double[::1] cur = cur_arr, sl = slot_arr, buf = buf_arr, row0 = row_arr
    cdef _BackwardTurn ctx
    ctx.bd, ctx.row_len = &ba.body, xs.shape[1]
    ctx.xs = &xs[0, 0] if L and xs.shape[1] else &row0[0]
    ctx.steps = &steps[0] if T else NULL
    ctx.buf, ctx.nb, ctx.nc = &buf[0], nb, nc
    ctx.ys, ctx.ny = &ys[0, 0] if L and ny else NULL, ny
    cdef int64_t advances = 0
    cdef int status
    fwd.partials_stale = True
    back.partials_stale = True
    with nogil:
        status = _revolve_sweep(T, snaps, &fa.body, ctx.xs, ctx.row_len, ctx.steps,
                                &cur[0], &sl[0], _backward_turn, &ctx, &advances)
    if status == _NO_MEMORY:
        raise MemoryError("out of memory while reversing the loop")
    if status != _OK:
        raise RuntimeError("internal error: the revolve kernel ran out of slots")
    for j in range(nb):
        adjoint[j] = buf[j]
    return advances
