"""Constant integer powers: the gradient of ``sum(x**4)`` at n = 1e5.

``x**3`` and ``x**4`` of float arrays are computed by multiplication
(forward and in the derivative rule) instead of numpy's ``pow``; the line
printed compares with ``np.power`` for the same forward and backward work
(what the rule did before) and with the hand-written ``(x*x)*(x*x)``.  Run as
a report with ``PYTHONPATH=. python benchmarks/bench_powers.py`` (quote the
figures with the machine's load); as tests it checks the values only.
"""
from __future__ import annotations

import sys

import numpy as np

import tapead as ta
try:                                   # run as a script or as a module
    from benchmarks.common import measure
except ImportError:                    # pragma: no cover
    from common import measure

N = 100_000


def _inputs():
    return np.random.default_rng(0).uniform(-2.0, 2.0, N)


def grad_pow4(x):
    return ta.grad(lambda v: (v ** 4).sum())(x)


def grad_mul4(x):
    return ta.grad(lambda v: ((v * v) * (v * v)).sum())(x)


def numpy_pow_work(x):
    """The work of the former rule: np.power forward, 4 * np.power(x, 3) back."""
    return np.power(x, 4.0).sum(), 4.0 * np.power(x, 3.0)


def test_values():
    x = _inputs()
    np.testing.assert_allclose(grad_pow4(x), 4.0 * x ** 3, rtol=1e-15, atol=0)
    np.testing.assert_allclose(grad_mul4(x), 4.0 * x ** 3, rtol=1e-15, atol=0)


def main(out=sys.stdout):
    x = _inputs()
    rows = [("grad sum(x**4), tapead", grad_pow4), ("grad sum((x*x)*(x*x)), tapead", grad_mul4),
            ("np.power forward + backward (the former rule's work)", numpy_pow_work)]
    print(f"n = {N}; min / median of repeats (ms); the machine may be loaded", file=out)
    for name, fn in rows:
        lo, med = measure(fn, x)
        print(f"  {name:55s} {lo * 1e3:7.2f} / {med * 1e3:7.2f}", file=out)


if __name__ == "__main__":
    main()
