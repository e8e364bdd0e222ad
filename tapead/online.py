"""Checkpointing loops whose length is known only when they end.

A ``while`` loop cannot use revolve directly: revolve places its snapshots
knowing the number of steps in advance.  :class:`OnlineChain` runs the loop
forward keeping at most ``s`` states (the initial one included), placed by
the dynamic checkpointing rule of Wang, Moin & Iaccarino (SIAM J. Sci.
Comput. 31(4), 2009; computed in C by :class:`tapead._revolve.OnlineCheckpoints`).
When the loop has ended, the stored states cut ``[0, n)`` into segments,
short near the end; the reverse sweep reverses them last to first with
revolve, the segment starting at the ``j``-th stored state using the
``s - j`` slots that the earlier stored states leave free.

:func:`checkpoint_cost` tells before running how many forward steps and
snapshots a schedule needs.  For ``s = 10`` the online schedule runs at most
1.2x the forward steps of the offline optimum at ``n = 10**3 .. 10**5``
(``tests/test_control.py`` checks a 1.25x bound).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from tapead import _revolve
from tapead.checkpointing import _as_count, optimal_forward_steps

__all__ = ["OnlineChain", "checkpoint_cost", "online_forward_steps"]


def _segments(n: int, s: int) -> list[tuple[int, int, int]]:
    """``(start, length, slots)`` of each segment the reverse sweep reverses."""
    if n == 0:
        return []
    starts = [int(v) for v in _revolve.online_segments(n, s)] + [n]
    return [(starts[j], starts[j + 1] - starts[j], s - j) for j in range(len(starts) - 1)]


def online_forward_steps(n: int, s: int) -> int:
    """Calls of the step function that :class:`OnlineChain` makes for ``n`` steps.

    ``n`` for the first sweep plus, per segment of length ``L`` reversed
    with ``k`` slots, revolve's ``t(L, k)``.  Compare with an offline
    (known-length) chain's ``optimal_forward_steps(n, s) + 1``.

    >>> online_forward_steps(1000, 10), optimal_forward_steps(1000, 10) + 1
    (4116, 3637)
    """
    n = _as_count(n, "n", 0)
    s = _as_count(s, "s", 1)
    if n == 0:
        return 0
    return n + sum(optimal_forward_steps(L, k) for _, L, k in _segments(n, s))


def checkpoint_cost(n_steps: int, snapshots: int, carry_bytes: Optional[int] = None,
                    online: bool = False) -> dict:
    """What a checkpointed reverse sweep over ``n_steps`` steps will cost.

    Parameters
    ----------
    n_steps : int
        Number of loop steps ``n >= 0``.
    snapshots : int
        Snapshot budget ``s >= 1``, the initial state included.
    carry_bytes : int, optional
        Bytes of one stored state (e.g. the carry's ``nbytes``); adds
        ``"bytes"`` to the result.
    online : bool
        False: the known-length schedule (revolve; ``ta.scan``,
        ``ta.fori_loop``).  True: the schedule of a loop of unknown length
        (``ta.while_loop``), which must decide where to store without
        knowing ``n``.

    Returns
    -------
    dict
        ``forward_steps``: steps recomputed-or-run without a tape, in
        revolve's convention (exactly ``t(n, s) = r*n - C(s+r, s+1)``
        offline, ``r`` the least with ``C(s+r, s) >= n``);
        ``forward_step_calls``: calls of the step function, the one that
        computes the final state included (``forward_steps + 1``);
        ``backward_steps``: ``n`` (each step reversed once, with a tape);
        ``peak_snapshots``: most states held at once (``<= s``; exact for
        the known-length schedule, an upper bound for the online one);
        ``bytes``: ``peak_snapshots * carry_bytes`` when given.

    Examples
    --------
    >>> checkpoint_cost(1000, 10)["forward_steps"]
    3636
    >>> cost = checkpoint_cost(1000, 10, carry_bytes=16, online=True)
    >>> cost["forward_step_calls"], cost["peak_snapshots"], cost["bytes"]
    (4116, 10, 160)
    """
    n = _as_count(n_steps, "n_steps", 0)
    s = _as_count(snapshots, "snapshots", 1)
    if online:
        calls = online_forward_steps(n, s)
        peak = max([1, min(n, s - 1)] + [j + min(k, L) for j, (_, L, k)
                                         in enumerate(_segments(n, s))])
    else:
        calls = optimal_forward_steps(n, s) + 1 if n else 0
        peak = min(s, max(n, 1))
    out = {"forward_steps": max(calls - 1, 0), "forward_step_calls": calls,
           "backward_steps": n, "peak_snapshots": peak}
    if carry_bytes is not None:
        out["bytes"] = peak * _as_count(carry_bytes, "carry_bytes", 0)
    return out


class OnlineChain:
    """Run a loop of unknown length forward, then reverse it in ``s`` snapshots.

    Parameters
    ----------
    forward_step : callable
        ``forward_step(state, i) -> state_{i+1}``; must not mutate ``state``.
    state0 : object
        ``x_0``.
    s : int
        Snapshot budget, the initial state included, ``s >= 1``.

    Attributes
    ----------
    n : int
        Steps run by :meth:`forward`.
    stats : dict
        ``forward_steps`` (calls of ``forward_step``, equal to
        :func:`online_forward_steps` ``(n, s)``), ``backward_steps`` and
        ``max_snapshots`` (peak states held, the initial one included).

    Examples
    --------
    >>> chain = OnlineChain(lambda x, i: x * 1.5, 1.0, s=3)
    >>> chain.forward(lambda x: x < 100.0)
    129.746337890625
    >>> chain.n
    12
    >>> chain.reverse(lambda x, i, adj: 1.5 * adj, 1.0) == 1.5 ** 12
    True
    >>> chain.stats["forward_steps"] == online_forward_steps(12, 3)
    True
    """

    def __init__(self, forward_step: Callable[[Any, int], Any], state0: Any, s: int):
        self.s = _as_count(s, "s", 1)
        self._forward_step = forward_step
        self._stored = {0: state0}
        self._final = state0
        self.n = 0
        self._phase = "new"
        self.stats = {"forward_steps": 0, "backward_steps": 0, "max_snapshots": 1}

    def forward(self, cond: Callable[[Any], bool], max_steps: Optional[int] = None) -> Any:
        """Step while ``cond(state)`` is true; return the final state.

        ``max_steps`` (optional) stops the loop after that many steps.
        """
        if self._phase != "new":
            raise RuntimeError("forward() already ran; make a new OnlineChain")
        self._phase = "forward"
        placer = _revolve.OnlineCheckpoints(self.s)
        stored, step = self._stored, self._forward_step
        state, i, peak = self._stored[0], 0, 1
        while (max_steps is None or i < max_steps) and cond(state):
            state = step(state, i)
            i += 1
            dropped = placer.place(i)
            if dropped != -2:
                if dropped >= 0:
                    del stored[dropped]
                stored[i] = state
                if len(stored) - 1 > peak:     # not counting the working state
                    peak = len(stored) - 1
        self.n, self._final = i, state
        self.stats["forward_steps"] = i
        self.stats["max_snapshots"] = peak
        if i:
            self._stored.pop(i, None)     # the final state is the working state
        return state

    @property
    def final_state(self) -> Any:
        return self._final

    @classmethod
    def from_stored(cls, forward_step: Callable[[Any, int], Any], stored: dict, final: Any,
                    n: int, s: int) -> "OnlineChain":
        """A chain as :meth:`forward` leaves it after ``n`` steps, from the
        states a run elsewhere stored under the same online rule (a loop
        stepped in C): ``stored`` maps step index to state, ``0`` included,
        exactly ``tapead._revolve.online_segments(n, s)``; ``final`` is the
        state after step ``n``.
        """
        chain = cls(forward_step, stored[0], s)
        if sorted(stored) != [int(k) for k in _revolve.online_segments(n, chain.s)]:
            raise ValueError(f"from_stored: the stored steps {sorted(stored)} are not those "
                             f"the online rule keeps for n={n}, s={chain.s}")
        chain._stored, chain._final, chain.n, chain._phase = dict(stored), final, n, "forward"
        chain.stats.update(forward_steps=n, max_snapshots=max(1, len(stored) - 1))
        return chain

    def stored_states(self) -> dict:
        """Step index -> state of the states :meth:`forward` stored (``0``
        included, the final state not), for a reverse sweep run elsewhere."""
        if self._phase != "forward":
            raise RuntimeError("call forward() once before stored_states()")
        return dict(self._stored)

    def replay(self, forward_step: Optional[Callable[[Any, int], Any]] = None) -> "OnlineChain":
        """A chain as :meth:`forward` left this one (its stored states shared,
        its own ``stats``), ready for its own :meth:`reverse`; ``forward_step``
        (optional) replaces the step function for the recomputations.  This
        chain can still be reversed too.
        """
        if self._phase != "forward":
            raise RuntimeError("call forward() once before replay()")
        twin = OnlineChain(forward_step or self._forward_step, self._stored[0], self.s)
        twin._stored = dict(self._stored)
        twin._final, twin.n, twin._phase = self._final, self.n, "forward"
        twin.stats = dict(self.stats)
        return twin

    def reverse(self, backward_step: Callable[[Any, int, Any], Any], adjoint_final: Any) -> Any:
        """Reverse all ``n`` steps; return the adjoint of ``state0``.

        ``backward_step(state_i, i, adjoint_{i+1}) -> adjoint_i`` as in
        :class:`tapead.checkpointing.CheckpointedChain`.
        """
        if self._phase != "forward":
            raise RuntimeError("call forward() once before reverse()")
        self._phase = "reverse"
        adj = adjoint_final
        segments = _segments(self.n, self.s)
        for j in range(len(segments) - 1, -1, -1):
            start, L, slots = segments[j]
            x0 = self._stored.pop(start) if start else self._stored[0]
            adj = self._reverse_segment(x0, start, L, min(slots, L), j, backward_step, adj)
        self._stored.clear()
        return adj

    def _reverse_segment(self, x0, start, L, slots, held_before, backward_step, adj):
        """Reverse steps ``start .. start+L-1`` from ``x0`` under revolve.

        The segment's end state is known already (stored, or the final
        state), so the first turn only reverses: no step recomputes it.
        """
        step, stats = self._forward_step, self.stats
        slot_states: dict[int, tuple[int, Any]] = {}
        state, index = x0, 0
        for code, a, b in _revolve.RevolveCursor(L, slots):
            if code == _revolve.ADVANCE:
                for i in range(a, b):
                    state = step(state, start + i)
                stats["forward_steps"] += b - a
                index = b
            elif code == _revolve.TAKESHOT:
                slot_states[b] = (index, state)
                live = held_before + len(slot_states)
                if live > stats["max_snapshots"]:
                    stats["max_snapshots"] = live
            elif code == _revolve.RESTORE:
                index, state = slot_states[b]
                for k in [k for k in slot_states if k > b]:
                    del slot_states[k]
            elif code == _revolve.FIRSTURN or code == _revolve.YOUTURN:
                adj = backward_step(state, start + a, adj)
                stats["backward_steps"] += 1
            elif code == _revolve.TERMINATE:
                break
        return adj
