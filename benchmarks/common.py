"""Helpers the benchmark scripts share: timing on a shared machine, the CPU name."""
from __future__ import annotations

import platform
import statistics
import timeit
from typing import Callable, Tuple

Timing = Tuple[float, float]          # (min, median) seconds per call


def measure(fn: Callable, *args, budget: float = 0.02, total: float = 1.5,
            min_repeat: int = 3, max_repeat: int = 50) -> Timing:
    """Min and median seconds per call of ``fn(*args)``, after one warm-up call.

    Many short repeats (about ``budget`` seconds each, up to ``total`` in
    all, ``min_repeat`` to ``max_repeat`` of them) so that the minimum finds
    a quiet moment on a shared machine.
    """
    timer = timeit.Timer(lambda: fn(*args))
    first = timer.timeit(1)
    number = max(1, int(budget / max(first, 1e-9)))
    repeat = max(min_repeat, min(max_repeat, int(total / max(first * number, 1e-9))))
    runs = [t / number for t in timer.repeat(repeat=repeat, number=number)]
    return min(runs), statistics.median(runs)


def measure_together(cases, budget: float = 0.02, total: float = 3.0,
                     min_repeat: int = 5, max_repeat: int = 60):
    """Min and median seconds per call of each ``(fn, args)`` in ``cases``,
    their repeats interleaved (one repeat of each in turn).

    On a shared machine whose speed drifts over seconds, timing one case
    after another puts the drift into their ratio; interleaved, each case
    sees the same moments, so the ratio of two medians holds while the times
    themselves move.  Repeats as in :func:`measure`.
    """
    timers = [timeit.Timer(lambda fn=fn, args=args: fn(*args)) for fn, args in cases]
    numbers, cost = [], 0.0
    for timer in timers:
        first = timer.timeit(1)
        number = max(1, int(budget / max(first, 1e-9)))
        numbers.append(number)
        cost += first * number
    repeat = max(min_repeat, min(max_repeat, int(total / max(cost, 1e-9))))
    runs = [[] for _ in cases]
    for _ in range(repeat):
        for k, timer in enumerate(timers):
            runs[k].append(timer.timeit(numbers[k]) / numbers[k])
    return [(min(r), statistics.median(r)) for r in runs]


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def settle_malloc(nbytes: int = 16 << 20) -> None:
    """Put glibc's malloc in the state a long-running numpy process reaches.

    Freeing one big block (16 MiB) raises glibc's dynamic mmap and trim
    thresholds, so freed blocks of a few hundred KiB are kept for reuse
    instead of going back to the OS; before that, every numpy temporary of
    that size costs fresh zeroed pages.  Without this, the same call's time
    depended on the process's history (e.g. 0.80 ms before, 0.50 ms after
    some earlier big array was freed, for a vmap(grad) with 650 KiB outputs).
    Call it once before measuring, so that every row sees the same state.
    """
    import numpy as np
    block = np.ones(nbytes // 8)
    del block
