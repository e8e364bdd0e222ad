"""Tests for binomial (revolve) and uniform checkpointing.

Schedules are checked by an independent replay on state indices (not the
package's own executor), their forward-step counts against the closed form
``t(L, s)``, the closed form against the classic dynamic-programming
recurrence, and the executor against an un-checkpointed reverse sweep.
"""
import doctest
import functools
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapead.checkpointing
from tapead import _revolve
from tapead.checkpointing import (
    Action,
    CheckpointedChain,
    optimal_forward_steps,
    reverse_with_checkpoints,
    revolve_schedule,
    schedule_stats,
    uniform_schedule,
)

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "checkpointing.md"

# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------


def closed_form(L, s):
    """t(L, s) = r*L - C(s+r, s+1), r the least with C(s+r, s) >= L."""
    r = 0
    while math.comb(s + r, s) < L:
        r += 1
    return r * L - math.comb(s + r, s + 1)


@functools.lru_cache(maxsize=None)
def recurrence(L, s):
    """Fewest advances, by the split recurrence of Griewank (1992).

    Store x_0, advance m steps and reverse the last L-m steps with s-1 free
    slots (x_m in one of them), then the first m steps with all s slots.
    """
    if L <= 1:
        return 0
    if s == 1:
        return L * (L - 1) // 2
    return min(m + recurrence(L - m, s - 1) + recurrence(m, s)
               for m in range(1, L))


def replay(actions, L, s=None):
    """Replay a schedule on state indices; return (advances, peak slots).

    Asserts that every action follows from the ones before it: advances
    start at the current state, a snapshot is of the current state and
    never overwrites a live one, a restore reads a live slot holding the
    stated state, turns reverse L-1, L-2, ..., 0 in order from their input
    state, and 'terminate' comes last.
    """
    current, expected_turn, advances, peak = 0, L - 1, 0, 0
    slots, slots_of = {}, {}  # slot -> state index, and back
    for position, action in enumerate(actions):
        assert isinstance(action, Action)
        kind = action.kind
        if kind == "advance":
            assert action.start == current < action.stop <= L - 1, action
            advances += action.stop - action.start
            current = action.stop
        elif kind == "takeshot":
            assert action.start == action.stop == current, action
            assert action.slot not in slots, f"overwrites live slot: {action}"
            if s is not None:
                assert 0 <= action.slot < s, action
            slots[action.slot] = current
            slots_of.setdefault(current, []).append(action.slot)
            peak = max(peak, len(slots))
        elif kind == "restore":
            assert slots.get(action.slot) == action.start, action
            current = action.start
        elif kind in ("firsturn", "youturn"):
            assert (kind == "firsturn") == (expected_turn == L - 1), action
            assert action.start == expected_turn == current, action
            assert action.stop == action.start + 1
            for slot in slots_of.pop(current, ()):
                del slots[slot]
            expected_turn -= 1
        else:
            assert kind == "terminate", action
            assert position == len(actions) - 1
            assert expected_turn == -1, "not every step was reversed"
            return advances, peak
    raise AssertionError("schedule does not end with terminate")


# ---------------------------------------------------------------------------
# The closed form
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("L, s, expected", [
    (10, 1, 45), (1000, 10, 3636), (0, 1, 0), (1, 1, 0), (2, 1, 1),
    (5, 5, 4), (5, 100, 4),
])
def test_closed_form_examples(L, s, expected):
    assert optimal_forward_steps(L, s) == expected
    assert closed_form(L, s) == expected


@pytest.mark.parametrize("s", range(1, 7))
def test_closed_form_is_the_recurrence_optimum(s):
    for L in range(0, 60):
        assert optimal_forward_steps(L, s) == recurrence(L, s), (L, s)


def test_closed_form_handles_large_arguments():
    assert optimal_forward_steps(10**9, 1) == 10**9 * (10**9 - 1) // 2
    assert optimal_forward_steps(10**6, 10**6) == 10**6 - 1
    assert optimal_forward_steps(10**7, 30) == closed_form(10**7, 30)


# ---------------------------------------------------------------------------
# The revolve schedule
# ---------------------------------------------------------------------------

LARGE_CASES = [(1000, 10), (10_000, 10), (10_000, 20), (10_000, 50),
               (10_000, 2), (10_000, 10_000), (10_000, 20_000), (3000, 1),
               (4096, 12), (9999, 7)]


@pytest.mark.parametrize("L, s", LARGE_CASES)
def test_revolve_counts_large(L, s):
    advances, peak = replay(revolve_schedule(L, s), L, s)
    assert advances == closed_form(L, s)
    assert peak <= s


def test_revolve_counts_grid():
    for L in list(range(0, 70)) + [100, 127, 128, 129, 500, 1001]:
        for s in list(range(1, 13)) + [L, L + 1]:
            if s < 1:
                continue
            advances, peak = replay(revolve_schedule(L, s), L, s)
            assert advances == closed_form(L, s), (L, s)
            assert peak <= s, (L, s)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(0, 3000), s=st.integers(1, 64))
def test_revolve_counts_property(L, s):
    advances, peak = replay(revolve_schedule(L, s), L, s)
    assert advances == optimal_forward_steps(L, s)
    assert peak <= min(s, max(L - 1, 0))


def test_revolve_small_schedule_by_hand():
    # s=1: only x_0 is stored; each reverse step restarts from it.
    assert revolve_schedule(3, 1) == [
        Action("takeshot", 0, 0, 0), Action("advance", 0, 2, None),
        Action("firsturn", 2, 3, None), Action("restore", 0, 0, 0),
        Action("advance", 0, 1, None), Action("youturn", 1, 2, None),
        Action("restore", 0, 0, 0), Action("youturn", 0, 1, None),
        Action("terminate", 0, 0, None),
    ]


def test_raw_actions_are_int64_triples():
    rows = _revolve.revolve_actions(100, 5)
    assert rows.dtype == np.int64 and rows.ndim == 2 and rows.shape[1] == 3
    assert rows[-1, 0] == _revolve.TERMINATE
    advance = rows[rows[:, 0] == _revolve.ADVANCE]
    assert (advance[:, 2] - advance[:, 1]).sum() == closed_form(100, 5)


@pytest.mark.parametrize("L, s", [(0, 1), (1, 1), (10, 1), (1000, 10),
                                  (10_000, 50), (300, 1000)])
def test_streaming_cursor_matches_array(L, s):
    streamed = np.array(list(_revolve.RevolveCursor(L, s)), dtype=np.int64)
    np.testing.assert_array_equal(streamed, _revolve.revolve_actions(L, s))


def test_schedule_stats_matches_replay():
    stats = schedule_stats(revolve_schedule(1000, 10), 1000)
    assert stats["advance_steps"] == 3636
    assert stats["forward_steps"] == 3637
    assert stats["backward_steps"] == 1000
    assert stats["max_snapshots"] == 10


# ---------------------------------------------------------------------------
# The uniform schedule
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("L, s", [(0, 1), (1, 1), (2, 1), (10, 1), (10, 3),
                                  (100, 10), (1000, 10), (10_000, 100),
                                  (10_000, 10), (37, 37), (37, 100)])
def test_uniform_schedule_valid_and_counted(L, s):
    actions = uniform_schedule(L, s)
    advances, peak = replay(actions, L)
    stride = max(1, -(-L // s))
    n_bounds = -(-(L - 1) // stride) if L > 1 else 0
    assert advances == (2 * (L - 1) - n_bounds if L > 0 else 0)
    assert peak <= max(n_bounds + stride - 2, n_bounds)
    # Never fewer advances than the optimum with the same peak memory.
    if peak > 0:
        assert advances >= optimal_forward_steps(L, peak)


def test_uniform_with_stride_one_stores_every_state():
    advances, peak = replay(uniform_schedule(50, 1, stride=1), 50)
    assert (advances, peak) == (49, 49)


# ---------------------------------------------------------------------------
# The executor on a scalar ODE chain x_{i+1} = x_i + h*sin(x_i)
# ---------------------------------------------------------------------------

H = 0.01


def ode_step(x, i):
    return x + H * np.sin(x)


def ode_backward(x, i, adjoint):
    return adjoint * (1.0 + H * np.cos(x))


def full_reverse(x0, L, adjoint_final):
    """Store the whole trajectory, then sweep back."""
    trajectory = [x0]
    for i in range(L):
        trajectory.append(ode_step(trajectory[-1], i))
    adjoint = adjoint_final
    for i in range(L - 1, -1, -1):
        adjoint = ode_backward(trajectory[i], i, adjoint)
    return trajectory[-1], adjoint


@pytest.mark.parametrize("schedule", ["revolve", "uniform"])
@pytest.mark.parametrize("L, s", [(0, 1), (1, 1), (2, 1), (10, 1), (50, 3),
                                  (1000, 10), (300, 300), (777, 5)])
def test_executor_matches_full_reverse(schedule, L, s):
    x0 = np.array([0.3, 1.1, -2.0, 3.0])
    seed = np.array([1.0, -0.5, 2.0, 0.25])
    x_ref, adj_ref = full_reverse(x0, L, seed)
    calls = {"forward": 0, "backward": 0}

    def forward(x, i):
        calls["forward"] += 1
        return ode_step(x, i)

    def backward(x, i, adjoint):
        calls["backward"] += 1
        return ode_backward(x, i, adjoint)

    x_L, adj0, stats = reverse_with_checkpoints(
        forward, backward, x0, L, s, seed, schedule=schedule)
    np.testing.assert_array_equal(x_L, x_ref)
    np.testing.assert_allclose(adj0, adj_ref, rtol=1e-15, atol=0)
    assert stats["forward_steps"] == calls["forward"]
    assert stats["backward_steps"] == calls["backward"] == L
    assert stats["forward_steps"] == stats["advance_steps"] + (L > 0)
    if schedule == "revolve":
        assert stats["advance_steps"] == optimal_forward_steps(L, s)
        assert stats["max_snapshots"] <= s


def test_two_phase_api_seeds_from_final_state():
    # Gradient of 0.5 * x_L**2: the seed depends on x_L.
    x0, L, s = 0.7, 2000, 8
    chain = CheckpointedChain(ode_step, x0, L, s)
    x_L = chain.forward()
    adj0 = chain.reverse(ode_backward, x_L)
    x_ref, adj_ref = full_reverse(x0, L, x_L)
    assert x_L == x_ref
    assert abs(adj0 - adj_ref) <= 1e-15 * abs(adj_ref)
    assert chain.stats["max_snapshots"] <= s
    # The callable seed of the one-call API gives the same answer.
    _, adj_callable, _ = reverse_with_checkpoints(
        ode_step, ode_backward, x0, L, s, lambda x: x)
    assert adj_callable == adj0


def test_executor_phases_in_order():
    chain = CheckpointedChain(ode_step, 0.1, 5, 2)
    with pytest.raises(RuntimeError, match="forward"):
        chain.reverse(ode_backward, 1.0)
    chain.forward()
    with pytest.raises(RuntimeError, match="new CheckpointedChain"):
        chain.forward()


def test_executor_rejects_inconsistent_schedules():
    good = revolve_schedule(6, 2)
    broken_restore = [a._replace(slot=1) if a.kind == "restore" else a
                      for a in good]
    with pytest.raises(ValueError, match="slot 1 does not hold"):
        schedule_stats(broken_restore, 6)
    no_turn = [a for a in good if a.start != 3 or a.kind != "youturn"]
    with pytest.raises(ValueError, match="invalid schedule"):
        schedule_stats(no_turn, 6)
    with pytest.raises(ValueError, match="without 'terminate'"):
        schedule_stats(good[:-1], 6)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ((10, 0), "s must be >= 1"),
    ((-1, 3), "L must be >= 0"),
    ((10.0, 3), "L must be an integer"),
    ((10, 2.5), "s must be an integer"),
    (("10", 3), "L must be an integer"),
    ((True, 3), "L must be an integer"),
    ((10, None), "s must be an integer"),
]


@pytest.mark.parametrize("function", [revolve_schedule, uniform_schedule,
                                      optimal_forward_steps])
@pytest.mark.parametrize("args, message", BAD_ARGUMENTS)
def test_bad_arguments_say_what_to_pass(function, args, message):
    with pytest.raises(ValueError, match=message) as info:
        function(*args)
    text = str(info.value)
    assert "pass" in text or "snapshots" in text or "counts" in text


@pytest.mark.parametrize("function", [_revolve.revolve_actions,
                                      _revolve.RevolveCursor])
def test_cython_entry_points_check_arguments(function):
    with pytest.raises(ValueError, match="must be >= 0"):
        function(-1, 3)
    with pytest.raises(ValueError, match="must be an integer"):
        function(3.0, 3)
    with pytest.raises(ValueError, match="must be >= 1"):
        function(3, 0)
    with pytest.raises(ValueError, match="split the chain"):
        function(_revolve.MAX_STEPS + 1, 3)


def test_numpy_integers_are_accepted():
    assert revolve_schedule(np.int64(10), np.int32(1)) == revolve_schedule(10, 1)


def test_unknown_schedule_name():
    with pytest.raises(ValueError, match="pass 'revolve', 'uniform'"):
        CheckpointedChain(ode_step, 0.0, 5, 2, schedule="binomial")


# ---------------------------------------------------------------------------
# Cross-check with checkpoint_schedules, when installed
# ---------------------------------------------------------------------------


def test_closed_form_agrees_with_checkpoint_schedules():
    cs = pytest.importorskip("checkpoint_schedules")
    # checkpoint_schedules counts every forward step, the L taped ones too.
    for L, s in [(10, 1), (100, 5), (200, 3), (7, 100)]:
        assert (cs.optimal_steps_binomial(L, s)
                == optimal_forward_steps(L, s) + L), (L, s)


@pytest.mark.parametrize("L, s", [(10, 1), (100, 5), (250, 3), (64, 64)])
def test_counts_agree_with_checkpoint_schedules(L, s):
    cs = pytest.importorskip("checkpoint_schedules")
    steps = 0
    for action in cs.Revolve(L, s):
        if isinstance(action, cs.Forward):
            steps += len(action)
        if isinstance(action, cs.EndReverse):
            break
    assert steps == optimal_forward_steps(L, s) + L


# ---------------------------------------------------------------------------
# Documentation examples
# ---------------------------------------------------------------------------


def test_module_docstring_examples():
    result = doctest.testmod(tapead.checkpointing)
    assert result.failed == 0 and result.attempted > 0


def test_docs_examples():
    result = doctest.testfile(str(DOCS), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
