"""Benchmarks of checkpointed reverse sweeps (pytest-benchmark).

R1  The gradient of a 10 000-step rollout of x_{i+1} = x_i + h*sin(x_i)
    with respect to x_0, by a reverse sweep that stores the full trajectory
    and by :func:`tapead.checkpointing.reverse_with_checkpoints` with the
    revolve schedule (s = 10, 20, 50 snapshots) and the uniform schedule
    (s = 100 = sqrt(L) segment starts).  Two state types: a Python float
    (``scalar``) and a float64 array of 1000 entries (``vector``, 8 kB per
    state), where memory matters.

Run the timings::

    python -m pytest benchmarks/bench_revolve.py --benchmark-enable

Run them as quick tests (each case once, results checked)::

    python -m pytest benchmarks/bench_revolve.py

Print the table of wall time, peak traced memory (tracemalloc) and step
counts::

    python benchmarks/bench_revolve.py

No test asserts a wall-clock time or a memory figure.
"""
from __future__ import annotations

import math
import time
import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest

from tapead.checkpointing import optimal_forward_steps, reverse_with_checkpoints

L = 10_000
H = 1e-3
CASES = [("full", None), ("revolve", 10), ("revolve", 20), ("revolve", 50),
         ("uniform", 100)]


def scalar_problem() -> tuple[Callable, Callable, Any]:
    """Python-float chain: step, its reverse, x_0."""
    def step(x, i):
        return x + H * math.sin(x)

    def back(x, i, adjoint):
        return adjoint * (1.0 + H * math.cos(x))

    return step, back, 0.5


def vector_problem(n: int = 1000) -> tuple[Callable, Callable, Any]:
    """float64-array chain of n independent components: step, reverse, x_0."""
    def step(x, i):
        return x + H * np.sin(x)

    def back(x, i, adjoint):
        return adjoint * (1.0 + H * np.cos(x))

    return step, back, np.linspace(-3.0, 3.0, n)


PROBLEMS = {"scalar": scalar_problem, "vector": vector_problem}


def full_trajectory(step, back, x0, steps):
    """Store every state, then sweep back; returns (x_L, adjoint_0, stats)."""
    trajectory = [x0]
    for i in range(steps):
        trajectory.append(step(trajectory[-1], i))
    adjoint = 1.0
    for i in range(steps - 1, -1, -1):
        adjoint = back(trajectory[i], i, adjoint)
    stats = {"forward_steps": steps, "max_snapshots": steps + 1}
    return trajectory[-1], adjoint, stats


def run_case(problem: str, schedule: str, s: int | None, steps: int = L):
    step, back, x0 = PROBLEMS[problem]()
    if schedule == "full":
        return full_trajectory(step, back, x0, steps)
    return reverse_with_checkpoints(step, back, x0, steps, s, 1.0,
                                    schedule=schedule)


def measure(problem: str, schedule: str, s: int | None) -> dict[str, Any]:
    """Best wall time of three runs, and peak traced memory of a fourth."""
    seconds = math.inf
    for _ in range(3):
        start = time.perf_counter()
        run_case(problem, schedule, s)
        seconds = min(seconds, time.perf_counter() - start)
    tracemalloc.start()
    try:
        _, _, stats = run_case(problem, schedule, s)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"seconds": seconds, "peak_bytes": peak, **stats}


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("schedule, s", CASES,
                         ids=[f"{name}-{s}" for name, s in CASES])
def test_rollout_gradient(benchmark, problem, schedule, s):
    x_L, adjoint_0, stats = benchmark(run_case, problem, schedule, s)
    x_ref, adjoint_ref, _ = run_case(problem, "full", None)
    np.testing.assert_allclose(adjoint_0, adjoint_ref, rtol=1e-13)
    np.testing.assert_array_equal(x_L, x_ref)
    if schedule == "revolve":
        assert stats["advance_steps"] == optimal_forward_steps(L, s)
        assert stats["max_snapshots"] <= s
    benchmark.extra_info.update(
        {k: stats[k] for k in ("forward_steps", "max_snapshots")})


def main() -> None:
    print(f"L = {L} steps; time = best of 3; peak = tracemalloc peak "
          "during one gradient")
    print(f"{'state':7} {'schedule':12} {'time [ms]':>10} {'peak [kB]':>10} "
          f"{'fwd steps':>10} {'snapshots':>10}")
    for problem in sorted(PROBLEMS):
        for schedule, s in CASES:
            row = measure(problem, schedule, s)
            label = schedule if s is None else f"{schedule} s={s}"
            print(f"{problem:7} {label:12} {1e3 * row['seconds']:10.1f} "
                  f"{row['peak_bytes'] / 1024:10.0f} "
                  f"{row['forward_steps']:10d} {row['max_snapshots']:10d}")


if __name__ == "__main__":
    main()
