# The revolve state machine in C (included by _revolve.pyx, which builds
# schedules from it, and by _core.pyx, whose scalar loops run them).
# Needs int64_t, malloc and free cimported by the including module.

# Action codes; exported to Python as module constants below.
cdef enum:
    _ADVANCE = 0
    _TAKESHOT = 1
    _RESTORE = 2
    _FIRSTURN = 3
    _YOUTURN = 4
    _TERMINATE = 5

# Kernel return codes (the GIL is re-acquired before raising).
cdef enum:
    _OK = 0
    _NO_MEMORY = -1
    _BROKEN = -2


cdef int64_t _revolve_advance_to(int64_t capo, int64_t fine, int64_t free_slots) noexcept nogil:
    """Where to take the next snapshot in the sub-chain [capo, fine).

    ``free_slots`` counts the snapshot slots available to the sub-chain,
    the one already holding state ``capo`` included.  This is the splitting
    rule of Griewank & Walther's Algorithm 799: with ``reps`` the smallest
    repetition number such that ``C(free_slots + reps, reps) >= fine - capo``
    it places the snapshot so that both parts are reversed optimally.
    """
    cdef int64_t length = fine - capo
    cdef int64_t ds = free_slots
    cdef int64_t reps = 0
    cdef int64_t span = 1          # C(ds + reps, reps)
    cdef int64_t bino1, bino2, bino3, bino4, bino5
    cdef int64_t target
    while span < length:
        reps += 1
        span = span * (reps + ds) // reps
    bino1 = span * reps // (ds + reps)              # C(ds + reps - 1, ds)
    bino2 = bino1 * ds // (ds + reps - 1) if ds > 1 else 1
    if ds == 1:
        bino3 = 0
    elif ds > 2:
        bino3 = bino2 * (ds - 1) // (ds + reps - 2)
    else:
        bino3 = 1
    bino4 = bino2 * (reps - 1) // ds
    if ds < 3:
        bino5 = 0
    elif ds > 3:
        bino5 = bino3 * (ds - 2) // reps
    else:
        bino5 = 1
    if length <= bino1 + bino3:
        target = capo + bino4
    elif length >= span - bino5:
        target = capo + bino1
    else:
        target = fine - bino2 - bino3
    if target <= capo:
        target = capo + 1
    return target


cdef struct RevolveState:
    int64_t snaps       # snapshot slots, the initial state included
    int64_t check       # top of the snapshot stack, -1 when empty
    int64_t capo        # index of the current state
    int64_t fine        # steps capo .. fine-1 are not yet reversed
    int64_t* held       # held[k] = index of the state in slot k <= check
    bint turned         # a firsturn has been issued
    bint done           # terminate has been issued


cdef int _revolve_init(RevolveState* state, int64_t steps, int64_t snaps) noexcept nogil:
    """Set up ``state`` for a chain of ``steps`` steps; allocates ``held``."""
    state.held = <int64_t*> malloc((snaps if snaps > 0 else 1) * sizeof(int64_t))
    if state.held == NULL:
        return _NO_MEMORY
    state.snaps = snaps
    state.check = -1
    state.capo = 0
    state.fine = steps
    state.turned = False
    state.done = False
    return _OK


cdef int _revolve_next(RevolveState* state, int64_t* row) noexcept nogil:
    """Decide the next revolve action and write it to ``row[0:3]``.

    One call is one call of Griewank & Walther's ``revolve()`` state
    machine: the action follows from (check, capo, fine) alone, so a whole
    schedule is a plain loop and no recursion is needed.
    """
    cdef int64_t oldcapo
    if state.fine == state.capo:
        if state.check == -1:
            state.done = True
            row[0], row[1], row[2] = _TERMINATE, 0, 0
        else:
            state.capo = state.held[state.check]
            row[0], row[1], row[2] = _RESTORE, state.capo, state.check
    elif state.fine - state.capo == 1:
        state.fine -= 1
        if state.check >= 0 and state.held[state.check] == state.capo:
            state.check -= 1    # state capo is never needed again
        row[0] = _YOUTURN if state.turned else _FIRSTURN
        row[1], row[2] = state.capo, state.capo + 1
        state.turned = True
    elif state.check == -1 or state.held[state.check] != state.capo:
        if state.check + 1 >= state.snaps:
            return _BROKEN
        state.check += 1
        state.held[state.check] = state.capo
        row[0], row[1], row[2] = _TAKESHOT, state.capo, state.check
    else:
        oldcapo = state.capo
        state.capo = _revolve_advance_to(state.capo, state.fine,
                                         state.snaps - state.check)
        row[0], row[1], row[2] = _ADVANCE, oldcapo, state.capo
    return _OK


# The online rule (Wang, Moin & Iaccarino 2009) for a loop of unknown length:
# which stored state a new state replaces (_revolve.OnlineCheckpoints, and the
# graph API's while loops in _core).

cdef int64_t _online_place(int64_t snaps, int64_t* count, int64_t* steps,
                           int64_t* levels, int64_t i) noexcept nogil:
    """The placement rule above on sorted arrays (see _revolve.OnlineCheckpoints.place)."""
    cdef int64_t k, j, top = -1, victim = -1, dropped, level = 0
    if snaps <= 1:
        return -2
    if count[0] < snaps - 1:
        steps[count[0]] = i
        levels[count[0]] = 0
        count[0] += 1
        return -1
    for k in range(count[0] - 1, -1, -1):      # latest first
        if levels[k] < top:
            victim = k
            break
        if levels[k] > top:
            top = levels[k]
    if victim < 0:                             # none dispensable: replace the latest
        victim = count[0] - 1
        level = levels[victim] + 1
    dropped = steps[victim]
    for j in range(victim, count[0] - 1):      # close the gap, append i at the end
        steps[j] = steps[j + 1]
        levels[j] = levels[j + 1]
    steps[count[0] - 1] = i
    levels[count[0] - 1] = level
    return dropped
