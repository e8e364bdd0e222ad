"""The binomial (revolve) checkpointing schedule, computed in C.

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

One ``noexcept nogil`` step function decides each action from a small
state struct (the revolve state machine, no recursion).
``revolve_actions`` loops it into a growable C buffer and copies that into
a numpy array; ``RevolveCursor`` yields the rows one by one in O(s)
memory.  Both validate their arguments before entering C.
``tapead.checkpointing`` turns the rows into named actions.
"""
import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

include "_revolve_kernel.pxi"

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


cdef int _fill_revolve(ActionBuffer* buf, int64_t steps, int64_t snaps) noexcept nogil:
    """Append the binomial (revolve) schedule for ``steps`` and ``snaps``."""
    cdef RevolveState state
    cdef int64_t row[3]
    cdef int status = _revolve_init(&state, steps, snaps)
    while status == _OK and not state.done:
        status = _revolve_next(&state, row)
        if status == _OK:
            status = _push(buf, row[0], row[1], row[2])
    free(state.held)
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


cdef class RevolveCursor:
    """The revolve schedule one action at a time, in O(s) memory.

    Iterating yields the same ``(action, arg1, arg2)`` rows as
    :func:`revolve_actions`, without materialising the whole schedule
    (which has O(L) rows); executors use it so that their memory is the
    snapshots alone.

    Parameters
    ----------
    L : int
        Number of steps, ``L >= 0``.
    s : int
        Number of snapshot slots, the initial state included, ``s >= 1``.
    """
    cdef RevolveState state

    def __cinit__(self, L, s):
        self.state.held = NULL
        cdef int64_t steps = _checked_count(L, "L", 0)
        cdef int64_t snaps = _checked_count(s, "s", 1)
        if snaps > steps and steps > 0:
            snaps = steps
        if _revolve_init(&self.state, steps, snaps) != _OK:
            raise MemoryError("out of memory while starting the schedule")

    def __dealloc__(self):
        free(self.state.held)

    def __iter__(self):
        return self

    def __next__(self):
        cdef int64_t row[3]
        if self.state.done:
            raise StopIteration
        if _revolve_next(&self.state, row) != _OK:
            raise RuntimeError(
                "internal error: the revolve kernel ran out of snapshot "
                "slots; please report this with L and s")
        return (row[0], row[1], row[2])


# ---------------------------------------------------------------------------
# Online checkpointing: loops whose length is unknown until they end
# ---------------------------------------------------------------------------
#
# The placement rule is the dynamic checkpointing of Wang, Moin & Iaccarino
# ("Minimal repetition dynamic checkpointing algorithm for unsteady adjoint
# calculation", SIAM J. Sci. Comput. 31(4), 2009).  Every stored state has a
# level; the initial state is kept for good.  When state i is produced:
#
# * a free slot takes it at level 0;
# * else, if some stored state is *dispensable* (a later stored state has a
#   higher level), the latest dispensable one is evicted and state i takes
#   its slot at level 0;
# * else the latest stored state is evicted and state i takes its level + 1.
#
# The stored states then split [0, n) into segments that are short near the
# end; the reverse sweep reverses them last to first with revolve, segment j
# (starting at the j-th stored state) getting the s - j slots not held by
# the earlier ones.


cdef class OnlineCheckpoints:
    """Where to keep snapshots of a loop of unknown length (in C).

    Parameters
    ----------
    s : int
        Snapshot budget, the initial state included, ``s >= 1``.

    Call :meth:`place` with each new state index ``1, 2, ...`` in order;
    :meth:`stored` gives the stored state indices at any time.
    """
    cdef int64_t snaps
    cdef int64_t count          # stored states besides the initial one
    cdef int64_t* steps         # their indices, ascending
    cdef int64_t* levels        # and their levels

    def __cinit__(self, s):
        self.steps = NULL
        self.levels = NULL
        self.snaps = _checked_count(s, "s", 1)
        self.count = 0
        self.steps = <int64_t*> malloc(self.snaps * sizeof(int64_t))
        self.levels = <int64_t*> malloc(self.snaps * sizeof(int64_t))
        if self.steps == NULL or self.levels == NULL:
            raise MemoryError("out of memory while starting the schedule")

    def __dealloc__(self):
        free(self.steps)
        free(self.levels)

    cpdef int64_t place(self, int64_t i):
        """Decide about state ``i`` (the states come in order).

        Returns
        -------
        int
            ``-1``: state ``i`` is stored in a free slot; ``-2``: it is not
            stored (``s == 1``: only the initial state is kept); otherwise
            the index of the stored state to drop, whose slot ``i`` takes.
        """
        return _online_place(self.snaps, &self.count, self.steps, self.levels, i)

    def stored(self):
        """Indices of the stored states, ascending, the initial state 0 first."""
        return [0] + [self.steps[k] for k in range(self.count)]


def online_segments(n, s):
    """The stored states after an ``n``-step loop under the online rule.

    Parameters
    ----------
    n : int
        Number of steps the loop ran, ``n >= 0``.
    s : int
        Snapshot budget, the initial state included, ``s >= 1``.

    Returns
    -------
    numpy.ndarray of int64
        Indices of the stored states below ``n``, ascending (``0`` first):
        the starts of the segments the reverse sweep reverses.
    """
    cdef int64_t steps_n = _checked_count(n, "n", 0)
    cdef int64_t snaps = _checked_count(s, "s", 1)
    cdef int64_t count = 0, i, k, m = 0
    cdef int64_t* steps = <int64_t*> malloc(snaps * sizeof(int64_t))
    cdef int64_t* levels = <int64_t*> malloc(snaps * sizeof(int64_t))
    cdef int64_t[::1] view
    if steps == NULL or levels == NULL:
        free(steps)
        free(levels)
        raise MemoryError("out of memory while computing the schedule")
    try:
        with nogil:
            for i in range(1, steps_n + 1):
                _online_place(snaps, &count, steps, levels, i)
        out = np.empty(count + 1, dtype=np.int64)
        view = out
        view[0] = 0
        m = 1
        for k in range(count):
            if steps[k] < steps_n:
                view[m] = steps[k]
                m += 1
        return out[:m].copy()
    finally:
        free(steps)
        free(levels)
