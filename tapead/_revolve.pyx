"""Checkpointing schedules for reversing a chain of L steps, computed in C.

A schedule is an ``(n, 3)`` int64 array of ``(action, arg1, arg2)`` rows:

==========  ======================  =========================================
action      arg1, arg2              meaning
==========  ======================  =========================================
ADVANCE     start, stop             run forward steps start .. stop-1 (no tape)
TAKESHOT    state, slot             store the current state (index ``state``)
RESTORE     state, slot             make the state held in ``slot`` current
FIRSTURN    step, step + 1          run step ``step = L-1`` forward, then its
                                    reverse (the first reverse step)
YOUTURN     step, step + 1          reverse step ``step`` from the current
                                    state (re-running the step with a tape)
TERMINATE   0, 0                    the reverse sweep is complete
==========  ======================  =========================================

Slots are used as a stack: a TAKESHOT always writes the slot just above the
highest live one, and a slot dies once the step whose input it holds has
been reversed.  The initial state counts as a snapshot (slot 0).

The schedules are built by ``noexcept nogil`` kernels that append rows to a
growable C buffer; the ``def`` entry points validate their arguments, call a
kernel, and copy the buffer into a numpy array.  ``tapead.checkpointing``
turns the rows into named actions.
"""
import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

# Action codes; exported to Python as module constants below.
cdef enum:
    _ADVANCE = 0
    _TAKESHOT = 1
    _RESTORE = 2
    _FIRSTURN = 3
    _YOUTURN = 4
    _TERMINATE = 5

ADVANCE = _ADVANCE
TAKESHOT = _TAKESHOT
RESTORE = _RESTORE
FIRSTURN = _FIRSTURN
YOUTURN = _YOUTURN
TERMINATE = _TERMINATE
ACTION_NAMES = ("advance", "takeshot", "restore", "firsturn", "youturn",
                "terminate")

# Largest chain length accepted.  The binomial arithmetic in the revolve
# kernel is bounded by about 2 * L**2, which must fit in an int64.
MAX_STEPS = 1_000_000_000

# Kernel return codes (the GIL is re-acquired before raising).
cdef enum:
    _OK = 0
    _NO_MEMORY = -1
    _BROKEN = -2


cdef struct ActionBuffer:
    int64_t* rows       # n_rows * 3 int64s: action, arg1, arg2
    Py_ssize_t n_rows   # rows written
    Py_ssize_t capacity # rows allocated


cdef int _push(ActionBuffer* buf, int64_t action, int64_t arg1,
               int64_t arg2) noexcept nogil:
    """Append one row, doubling the buffer when full."""
    cdef Py_ssize_t new_capacity
    cdef int64_t* grown
    if buf.n_rows == buf.capacity:
        new_capacity = 2 * buf.capacity if buf.capacity > 0 else 64
        grown = <int64_t*> realloc(buf.rows, new_capacity * 3 * sizeof(int64_t))
        if grown == NULL:
            return _NO_MEMORY
        buf.rows = grown
        buf.capacity = new_capacity
    cdef int64_t* row = buf.rows + 3 * buf.n_rows
    row[0] = action
    row[1] = arg1
    row[2] = arg2
    buf.n_rows += 1
    return _OK


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


cdef int _fill_revolve(ActionBuffer* buf, int64_t steps, int64_t snaps) noexcept nogil:
    """Append the binomial (revolve) schedule for ``steps`` and ``snaps``.

    An iterative version of the revolve state machine: each loop iteration
    decides one action from (check, capo, fine), where ``capo`` is the index
    of the current state, ``fine`` the end of the part not yet reversed and
    ``check`` the top of the snapshot stack ``held`` (state indices).
    """
    cdef int64_t* held = <int64_t*> malloc((snaps if snaps > 0 else 1) * sizeof(int64_t))
    if held == NULL:
        return _NO_MEMORY
    cdef int64_t check = -1
    cdef int64_t capo = 0
    cdef int64_t fine = steps
    cdef int64_t oldcapo
    cdef bint turned = False
    cdef int status = _OK
    while status == _OK:
        if fine == capo:
            if check == -1:
                status = _push(buf, _TERMINATE, 0, 0)
                break
            capo = held[check]
            status = _push(buf, _RESTORE, capo, check)
        elif fine - capo == 1:
            fine -= 1
            if check >= 0 and held[check] == capo:
                check -= 1      # state capo is never needed again
            status = _push(buf, _YOUTURN if turned else _FIRSTURN, capo, capo + 1)
            turned = True
        elif check == -1 or held[check] != capo:
            check += 1
            if check >= snaps:
                status = _BROKEN
                break
            held[check] = capo
            status = _push(buf, _TAKESHOT, capo, check)
        else:
            oldcapo = capo
            capo = _revolve_advance_to(capo, fine, snaps - check)
            status = _push(buf, _ADVANCE, oldcapo, capo)
    free(held)
    return status


cdef int _fill_uniform(ActionBuffer* buf, int64_t steps, int64_t stride) noexcept nogil:
    """Append the uniform schedule: a snapshot every ``stride`` states.

    The first sweep stores states 0, stride, 2*stride, ... (below
    ``steps - 1``).  The reverse sweep handles the segments last to first:
    it restores the segment start, advances through the segment once while
    storing each interior state, then reverses the segment's steps.
    """
    cdef int64_t n_bounds = 0
    cdef int64_t start = 0, stop, seg, i
    cdef int status = _OK
    if steps == 0:
        return _push(buf, _TERMINATE, 0, 0)
    while start < steps - 1 and status == _OK:
        status = _push(buf, _TAKESHOT, start, n_bounds)
        n_bounds += 1
        stop = start + stride if start + stride < steps - 1 else steps - 1
        if status == _OK:
            status = _push(buf, _ADVANCE, start, stop)
        start = stop
    if status == _OK:
        status = _push(buf, _FIRSTURN, steps - 1, steps)
    seg = n_bounds - 1
    while seg >= 0 and status == _OK:
        start = seg * stride
        stop = start + stride if start + stride < steps - 1 else steps - 1
        status = _push(buf, _RESTORE, start, seg)
        i = start
        while i < stop - 1 and status == _OK:
            if i > start:
                status = _push(buf, _TAKESHOT, i, seg + i - start)
            if status == _OK:
                status = _push(buf, _ADVANCE, i, i + 1)
            i += 1
        if status == _OK:
            status = _push(buf, _YOUTURN, stop - 1, stop)
        i = stop - 2
        while i >= start and status == _OK:
            status = _push(buf, _RESTORE, i, seg + i - start)
            if status == _OK:
                status = _push(buf, _YOUTURN, i, i + 1)
            i -= 1
        seg -= 1
    if status == _OK:
        status = _push(buf, _TERMINATE, 0, 0)
    return status


cdef int64_t _checked_count(object value, str name, int64_t lowest) except? -1:
    """Return ``value`` as an int64 after checking type and range."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(
            f"{name} must be an integer, got {value!r} of type "
            f"{type(value).__name__}; pass an int such as {name}=10")
    cdef object as_int = value.__index__()
    if as_int < lowest:
        if name == "L":
            hint = "pass the number of steps in the chain, L >= 0"
        else:
            hint = (f"pass {name} >= {lowest}: the initial state is one of "
                    "the snapshots")
        raise ValueError(f"{name} must be >= {lowest}, got {as_int}; {hint}")
    if as_int > MAX_STEPS:
        raise ValueError(
            f"{name}={as_int} is larger than the supported {MAX_STEPS}; "
            "split the chain into sub-chains and checkpoint each")
    return as_int


cdef object _to_array(ActionBuffer* buf, int status):
    """Copy the buffer into a new ``(n, 3)`` int64 array, then free it."""
    cdef int64_t[:, ::1] out_view
    try:
        if status == _NO_MEMORY:
            raise MemoryError("out of memory while building the schedule")
        if status == _BROKEN:
            raise RuntimeError(
                "internal error: the revolve kernel ran out of snapshot "
                "slots; please report this with L and s")
        out = np.empty((buf.n_rows, 3), dtype=np.int64)
        out_view = out
        if buf.n_rows > 0:
            memcpy(&out_view[0, 0], buf.rows, buf.n_rows * 3 * sizeof(int64_t))
        return out
    finally:
        free(buf.rows)
        buf.rows = NULL


def revolve_actions(L, s):
    """Binomial checkpointing schedule of Griewank & Walther (revolve).

    Parameters
    ----------
    L : int
        Number of steps in the chain, ``L >= 0``.
    s : int
        Number of snapshot slots, ``s >= 1``, the initial state included.
        Values above ``L`` behave like ``L``.

    Returns
    -------
    numpy.ndarray of shape (n_actions, 3), dtype int64
        Rows ``(action, arg1, arg2)`` as described in the module docstring.
        The ADVANCE rows run exactly ``t(L, s) = r*L - C(s+r, s+1)``
        forward steps, with ``r`` the smallest integer such that
        ``C(s+r, s) >= L``.
    """
    cdef int64_t steps = _checked_count(L, "L", 0)
    cdef int64_t snaps = _checked_count(s, "s", 1)
    cdef ActionBuffer buf
    cdef int status
    if snaps > steps and steps > 0:
        snaps = steps
    buf.rows = NULL
    buf.n_rows = 0
    buf.capacity = 0
    with nogil:
        status = _fill_revolve(&buf, steps, snaps)
    return _to_array(&buf, status)


def uniform_actions(L, stride):
    """Uniform checkpointing schedule: a snapshot every ``stride`` states.

    Parameters
    ----------
    L : int
        Number of steps in the chain, ``L >= 0``.
    stride : int
        Distance between stored states, ``stride >= 1``.

    Returns
    -------
    numpy.ndarray of shape (n_actions, 3), dtype int64
        Rows ``(action, arg1, arg2)`` as described in the module docstring.
        It holds at most ``ceil((L-1)/stride) + stride - 2`` snapshots at
        once and runs ``2*(L-1) - ceil((L-1)/stride)`` ADVANCE steps.
    """
    cdef int64_t steps = _checked_count(L, "L", 0)
    cdef int64_t step_stride = _checked_count(stride, "stride", 1)
    cdef ActionBuffer buf
    cdef int status
    buf.rows = NULL
    buf.n_rows = 0
    buf.capacity = 0
    with nogil:
        status = _fill_uniform(&buf, steps, step_stride)
    return _to_array(&buf, status)
