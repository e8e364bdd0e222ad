"""Checkpointed reverse sweeps over long chains of steps.

A chain ``x_{i+1} = f(x_i, i)`` for ``i = 0 .. L-1`` is reversed step by
step, last step first.  Storing every state costs ``L`` states of memory;
checkpointing stores at most ``s`` of them and recomputes the others from
the nearest stored state.  The binomial schedule of Griewank & Walther
(revolve, ACM TOMS 26(1), 2000, Algorithm 799) does this with the fewest
recomputed forward steps possible for ``s`` snapshots:

    t(L, s) = r*L - C(s + r, s + 1),  r = min{r : C(s + r, s) >= L}.

The schedules themselves are computed in C by :mod:`tapead._revolve`; this
module names their actions and runs them on opaque Python states.

Counting conventions
--------------------
* ``s`` counts every stored state, the initial state included (as pyrevolve
  and checkpoint_schedules count them).  The current working state is not a
  snapshot.
* ``t(L, s)`` (:func:`optimal_forward_steps`) counts the forward steps run by
  ``advance`` actions.  It excludes the step inside each ``firsturn`` or
  ``youturn``: reversing step ``i`` always needs step ``i`` once more (with
  a tape), whatever the schedule.  So ``L=10, s=1`` gives ``9+8+...+1 = 45``.
* An executor calls ``forward_step`` ``t(L, s) + 1`` times: the extra call
  computes ``x_L``, which the caller needs to seed the adjoint.
"""
from __future__ import annotations

import itertools
import math
import operator
from collections import namedtuple
from typing import Any, Callable, Iterator, Sequence

from tapead import _revolve

__all__ = [
    "Action",
    "CheckpointedChain",
    "optimal_forward_steps",
    "reverse_with_checkpoints",
    "revolve_schedule",
    "schedule_stats",
    "uniform_schedule",
]

Action = namedtuple("Action", ["kind", "start", "stop", "slot"])
Action.__doc__ = """One step of a checkpointing schedule.

Fields
------
kind : str
    ``"advance"``: run forward steps ``start .. stop-1`` from the current
    state (index ``start``); the current state becomes ``stop``.
    ``"takeshot"``: store the current state (index ``start == stop``) in
    snapshot slot ``slot``.
    ``"restore"``: make the state in slot ``slot`` (index ``start == stop``)
    current.
    ``"firsturn"``: the current state is ``start == L-1``; run the last step
    to get ``x_L``, then reverse it.  Always the first reversal.
    ``"youturn"``: reverse step ``start`` (``stop = start + 1``) from the
    current state, which is ``x_start``.
    ``"terminate"``: the sweep is complete (``start = stop = 0``).
start, stop : int
    State indices (see ``kind``).
slot : int or None
    Snapshot slot for ``takeshot`` and ``restore``, otherwise None.
"""

_SLOT_KINDS = frozenset((_revolve.TAKESHOT, _revolve.RESTORE))


def _as_count(value: Any, name: str, lowest: int) -> int:
    """Return ``value`` as an int, or raise ValueError saying what to pass."""
    if isinstance(value, bool):
        value = None  # True is not a step count
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(
            f"{name} must be an integer, got {value!r}; pass an int such as "
            f"{name}=10") from None
    if number < lowest:
        hint = ("the initial state is one of the snapshots" if name == "s"
                else "it counts steps")
        raise ValueError(f"{name} must be >= {lowest}, got {number}; {hint}")
    return number


def optimal_forward_steps(L: int, s: int) -> int:
    """Fewest forward steps needed to reverse ``L`` steps with ``s`` snapshots.

    Parameters
    ----------
    L : int
        Number of steps in the chain, ``L >= 0``.
    s : int
        Number of snapshots, the initial state included, ``s >= 1``.

    Returns
    -------
    int
        ``t(L, s) = r*L - C(s+r, s+1)`` where ``r`` is the smallest integer
        with ``C(s+r, s) >= L``.  Counts the ``advance`` steps only.

    Examples
    --------
    >>> optimal_forward_steps(10, 1)
    45
    >>> optimal_forward_steps(1000, 10)
    3636
    """
    L = _as_count(L, "L", 0)
    s = _as_count(s, "s", 1)
    if L == 0:
        return 0
    # r grows like L**(1/s) for large L and like 1 once s >= L - 1, so a
    # doubling search then a bisection keeps this cheap for any (L, s).
    high = 1
    while math.comb(s + high, s) < L:
        high *= 2
    low = 0  # C(s + low, s) < L or low == 0
    while high - low > 1:
        mid = (low + high) // 2
        if math.comb(s + mid, s) >= L:
            high = mid
        else:
            low = mid
    r = 0 if L <= 1 else high
    return r * L - math.comb(s + r, s + 1)


def _action_from_row(row: Sequence[int]) -> Action:
    """Name one ``(action, arg1, arg2)`` row made by :mod:`tapead._revolve`."""
    code, arg1, arg2 = row
    if code in _SLOT_KINDS:
        return Action(_revolve.ACTION_NAMES[code], arg1, arg1, arg2)
    return Action(_revolve.ACTION_NAMES[code], arg1, arg2, None)


def _row_from_action(action: Sequence[Any]) -> tuple[int, int, int]:
    """The ``(action, arg1, arg2)`` row of an :class:`Action`."""
    kind, start, stop, slot = action
    try:
        code = _revolve.ACTION_NAMES.index(kind)
    except ValueError:
        raise ValueError(
            f"unknown action kind {kind!r}; use one of "
            f"{', '.join(_revolve.ACTION_NAMES)}") from None
    if code in _SLOT_KINDS:
        return code, start, -1 if slot is None else slot
    return code, start, stop


def revolve_schedule(L: int, s: int) -> list[Action]:
    """Optimal binomial checkpointing schedule (revolve).

    Parameters
    ----------
    L : int
        Number of steps, ``L >= 0``.
    s : int
        Number of snapshot slots, the initial state included, ``s >= 1``.

    Returns
    -------
    list of Action
        Its ``advance`` actions run :func:`optimal_forward_steps` ``(L, s)``
        steps and it never holds more than ``s`` snapshots.

    Examples
    --------
    >>> [a.kind for a in revolve_schedule(2, 1)]
    ['takeshot', 'advance', 'firsturn', 'restore', 'youturn', 'terminate']
    """
    L = _as_count(L, "L", 0)
    s = _as_count(s, "s", 1)
    return [_action_from_row(row)
            for row in _revolve.revolve_actions(L, s).tolist()]


def _uniform_rows(L: int, stride: int) -> Iterator[tuple[int, int, int]]:
    """Rows of the uniform schedule, generated lazily (see uniform_schedule)."""
    ADVANCE, TAKESHOT, RESTORE = (_revolve.ADVANCE, _revolve.TAKESHOT,
                                  _revolve.RESTORE)
    if L == 0:
        yield _revolve.TERMINATE, 0, 0
        return
    starts = range(0, L - 1, stride)  # segment starts, below state L-1
    for seg, start in enumerate(starts):
        yield TAKESHOT, start, seg
        yield ADVANCE, start, min(start + stride, L - 1)
    yield _revolve.FIRSTURN, L - 1, L
    for seg in range(len(starts) - 1, -1, -1):
        start = starts[seg]
        stop = min(start + stride, L - 1)
        # Recompute the segment once, storing its interior states in the
        # slots above seg (those of later segments are dead by now).
        yield RESTORE, start, seg
        for i in range(start, stop - 1):
            if i > start:
                yield TAKESHOT, i, seg + i - start
            yield ADVANCE, i, i + 1
        yield _revolve.YOUTURN, stop - 1, stop
        for i in range(stop - 2, start - 1, -1):
            yield RESTORE, i, seg + i - start
            yield _revolve.YOUTURN, i, i + 1
    yield _revolve.TERMINATE, 0, 0


def _uniform_stride(L: int, s: int, stride: int | None) -> int:
    L = _as_count(L, "L", 0)
    s = _as_count(s, "s", 1)
    if stride is None:
        return max(1, -(-L // s))
    return _as_count(stride, "stride", 1)


def uniform_schedule(L: int, s: int, stride: int | None = None) -> list[Action]:
    """Uniform (sqrt(L)-style) checkpointing schedule, for comparison.

    The first sweep stores every ``stride``-th state.  The reverse sweep
    takes the segments last to first: it restores the segment start,
    recomputes the segment once while storing its interior states, then
    reverses the segment's steps from those.

    Parameters
    ----------
    L : int
        Number of steps, ``L >= 0``.
    s : int
        Number of segment-start snapshots, ``s >= 1``.
    stride : int, optional
        Distance between segment starts; ``ceil(L / s)`` by default.

    Returns
    -------
    list of Action
        It runs ``2*(L-1) - ceil((L-1)/stride)`` advance steps and holds up
        to ``ceil((L-1)/stride) + stride - 2`` snapshots at once, which for
        ``s = sqrt(L)`` is about ``2*sqrt(L)``: more memory than revolve
        with the same ``s``, fewer recomputations.
    """
    stride = _uniform_stride(L, s, stride)
    return [_action_from_row(row) for row in _uniform_rows(int(L), stride)]


def _schedule_rows(schedule: Any, L: int, s: int) -> Iterator[tuple[int, int, int]]:
    """Resolve the ``schedule`` argument of the executors to lazy rows.

    The named schedules are generated as they run, so an executor holds
    the snapshots and O(s) schedule data, never the O(L) rows at once.
    """
    if isinstance(schedule, str):
        if schedule == "revolve":
            return iter(_revolve.RevolveCursor(L, s))
        if schedule == "uniform":
            return _uniform_rows(L, _uniform_stride(L, s, None))
        raise ValueError(
            f"unknown schedule {schedule!r}; pass 'revolve', 'uniform' or a "
            "list of Action")
    return map(_row_from_action, schedule)


def schedule_stats(actions: Sequence[Action], L: int) -> dict[str, int]:
    """Replay a schedule on state indices, check it and count its work.

    Parameters
    ----------
    actions : sequence of Action
        A schedule such as :func:`revolve_schedule` returns.
    L : int
        Number of steps the schedule reverses.

    Returns
    -------
    dict
        ``advance_steps`` (steps run by advance actions), ``forward_steps``
        (``advance_steps`` plus the step that makes ``x_L``),
        ``backward_steps``, ``max_snapshots`` (peak number of live slots,
        the initial state included), ``takeshots`` and ``restores``.

    Raises
    ------
    ValueError
        If an action does not follow from the ones before it, e.g. an
        advance that does not start at the current state or a restore of
        an empty slot.
    """
    runner = CheckpointedChain(_index_step, 0, L, 1, schedule=actions)
    runner.forward()
    runner.reverse(_count_back, 0)
    return dict(runner.stats)


def _index_step(state: int, i: int) -> int:
    """Forward step of the index-only chain used by :func:`schedule_stats`."""
    return state + 1


def _count_back(state: int, i: int, adjoint: int) -> int:
    """Backward step of the index-only chain used by :func:`schedule_stats`."""
    return adjoint + 1


class CheckpointedChain:
    """Run a chain forward once, then reverse it under a checkpoint schedule.

    Parameters
    ----------
    forward_step : callable
        ``forward_step(state, i) -> state_{i+1}`` runs step ``i``.  States
        are opaque (arrays, tuples, pytrees); a step must not mutate its
        input, since stored snapshots are the same objects.
    state0 : object
        ``x_0``.
    L : int
        Number of steps.
    s : int
        Snapshot budget, the initial state included, ``s >= 1``.
    schedule : {"revolve", "uniform"} or sequence of Action, default "revolve"

    Attributes
    ----------
    stats : dict
        ``forward_steps`` (calls to ``forward_step``: ``t(L, s) + 1`` for
        revolve when ``L >= 1``), ``advance_steps`` (of those, the ones run
        by advance actions: ``t(L, s)``), ``backward_steps``,
        ``max_snapshots`` (peak live slots, the initial state included),
        ``takeshots`` and ``restores``.

    Examples
    --------
    >>> chain = CheckpointedChain(lambda x, i: 2.0 * x, 1.0, L=10, s=3)
    >>> chain.forward()
    1024.0
    >>> chain.reverse(lambda x, i, adj: 2.0 * adj, 1.0)
    1024.0
    >>> chain.stats["advance_steps"] == optimal_forward_steps(10, 3)
    True
    """

    def __init__(self, forward_step: Callable[[Any, int], Any], state0: Any,
                 L: int, s: int, schedule: Any = "revolve") -> None:
        self.L = _as_count(L, "L", 0)
        self.s = _as_count(s, "s", 1)
        self._forward_step = forward_step
        self._rows = _schedule_rows(schedule, self.L, self.s)
        self._position = -1       # index of the action being run
        self._state = state0      # current state ...
        self._index = 0           # ... and its index
        self._slots: dict[int, tuple[int, Any]] = {}  # slot -> (index, state)
        self._slots_of: dict[int, list[int]] = {}     # index -> its slots
        self._next_turn = self.L - 1  # the step the next turn must reverse
        self._phase = "new"
        self.stats = {"forward_steps": 0, "advance_steps": 0,
                      "backward_steps": 0, "max_snapshots": 0,
                      "takeshots": 0, "restores": 0}

    def forward(self) -> Any:
        """Run the first sweep, storing snapshots, and return ``x_L``.

        Returns
        -------
        object
            The final state ``x_L`` (``state0`` when ``L == 0``).
        """
        if self._phase != "new":
            raise RuntimeError("forward() already ran; make a new "
                               "CheckpointedChain to run the chain again")
        self._phase = "forward"
        return self._sweep(None, None)

    def reverse(self, backward_step: Callable[[Any, int, Any], Any],
                adjoint_final: Any) -> Any:
        """Run the reverse sweep and return the adjoint of ``state0``.

        Parameters
        ----------
        backward_step : callable
            ``backward_step(state_i, i, adjoint_{i+1}) -> adjoint_i``
            reverses step ``i`` given its input state (it may re-run step
            ``i`` with a tape).
        adjoint_final : object
            The adjoint of ``x_L`` (the seed).

        Returns
        -------
        object
            The adjoint of ``x_0``.
        """
        if self._phase != "forward":
            raise RuntimeError("call forward() once before reverse()")
        self._phase = "reverse"
        try:
            return self._sweep(backward_step, adjoint_final)
        finally:
            self._slots.clear()
            self._slots_of.clear()
            self._state = None

    def _fail(self, row: Sequence[int], why: str) -> None:
        action = _action_from_row(row)
        raise ValueError(
            f"invalid schedule at action {self._position} {tuple(action)}: "
            f"{why}; build schedules with revolve_schedule or "
            "uniform_schedule")

    def _sweep(self, backward_step: Callable | None, adjoint: Any) -> Any:
        """Run rows until the first turn (forward) or terminate (reverse).

        One flat loop with the hot state in locals: for cheap steps the
        bookkeeping per action is what limits the speed.
        """
        ADVANCE, TAKESHOT, RESTORE = (_revolve.ADVANCE, _revolve.TAKESHOT,
                                      _revolve.RESTORE)
        FIRSTURN, YOUTURN = _revolve.FIRSTURN, _revolve.YOUTURN
        forward_phase = backward_step is None
        step, L, stats = self._forward_step, self.L, self.stats
        slots, slots_of = self._slots, self._slots_of
        state, index = self._state, self._index
        try:
            for row in self._rows:
                self._position += 1
                code, a, b = row
                if code == ADVANCE:
                    if a != index or not a < b <= L:
                        self._fail(row, f"the current state is {index}")
                    for i in range(a, b):
                        state = step(state, i)
                    index = b
                    stats["advance_steps"] += b - a
                    stats["forward_steps"] += b - a
                elif code == TAKESHOT:
                    if a != index or b < 0:
                        self._fail(row, f"the current state is {index}")
                    if b in slots:  # the old content of the slot dies
                        slots_of[slots[b][0]].remove(b)
                    slots[b] = (a, state)
                    slots_of.setdefault(a, []).append(b)
                    stats["takeshots"] += 1
                    if len(slots) > stats["max_snapshots"]:
                        stats["max_snapshots"] = len(slots)
                elif code == RESTORE:
                    if slots.get(b, (None,))[0] != a:
                        self._fail(row, f"slot {b} does not hold state {a}")
                    index, state = slots[b]
                    stats["restores"] += 1
                elif code == FIRSTURN or code == YOUTURN:
                    if a != self._next_turn or index != a or (
                            (code == FIRSTURN) != (a == L - 1)):
                        self._fail(row, f"expected to reverse step "
                                   f"{self._next_turn} from state {index}")
                    if forward_phase:
                        # Hand x_L out; the turn itself runs in reverse().
                        self._rows = itertools.chain((row,), self._rows)
                        self._position -= 1
                        stats["forward_steps"] += 1
                        return step(state, L - 1)
                    adjoint = backward_step(state, a, adjoint)
                    stats["backward_steps"] += 1
                    self._next_turn -= 1
                    # State a is never needed again: release its snapshots.
                    for slot in slots_of.pop(a, ()):
                        del slots[slot]
                elif code == _revolve.TERMINATE:
                    if self._next_turn != -1:
                        self._fail(row, f"step {self._next_turn} was never "
                                   "reversed")
                    if forward_phase:  # L == 0
                        self._rows = itertools.chain((row,), self._rows)
                        self._position -= 1
                        return state
                    return adjoint
                else:
                    self._fail(row, "unknown action code")
            raise ValueError(
                "invalid schedule: it ends without 'terminate'; build "
                "schedules with revolve_schedule or uniform_schedule")
        finally:
            self._state, self._index = state, index


def reverse_with_checkpoints(forward_step: Callable[[Any, int], Any],
                             backward_step: Callable[[Any, int, Any], Any],
                             state0: Any, L: int, s: int, adjoint_final: Any,
                             schedule: Any = "revolve",
                             ) -> tuple[Any, Any, dict[str, int]]:
    """Reverse a chain of ``L`` steps holding at most ``s`` snapshots.

    Parameters
    ----------
    forward_step, backward_step, state0, L, s, schedule
        As for :class:`CheckpointedChain` and its ``reverse`` method.
    adjoint_final : object or callable
        The adjoint of ``x_L``, or a function of ``x_L`` that returns it.

    Returns
    -------
    final_state : object
        ``x_L``.
    adjoint_0 : object
        The adjoint of ``state0``.
    stats : dict
        As :attr:`CheckpointedChain.stats`.
    """
    chain = CheckpointedChain(forward_step, state0, L, s, schedule=schedule)
    final_state = chain.forward()
    seed = adjoint_final(final_state) if callable(adjoint_final) else adjoint_final
    adjoint_0 = chain.reverse(backward_step, seed)
    return final_state, adjoint_0, dict(chain.stats)
