"""Per-operation recording overhead on small arrays (numpy-coverage issue).

For a unary (exp), a binary (multiply), a reduction (sum) and an indexing
op (x[1:]) on shapes (3,) and (64, 64): raw numpy, tapead recording the op on
a live tape, autograd and torch (when installed).  Run as a report with
``PYTHONPATH=. python benchmarks/bench_overhead.py``; as tests (pytest, with
``--benchmark-disable``) it checks the values only.

Measured 2026-12-01 under load (2 shared cores, load average 2.5-3.5, other
jobs running; single runs, so +-0.3 us is noise), tapead minus numpy at
(64, 64), 200 ops a tape / 16 ops a tape: exp 1.2 / 0.8 us, multiply 0.9 /
0.3 us, sum 0.4 / 0.9 us, getitem 1.1 / 1.0 us (before the recording changes
of that day: exp 1.05 / 0.79, multiply 1.93 / 1.03, sum 0.59 / 0.75, getitem
1.08 / 1.16, interleaved with them).  At (3,): 0.2-0.5 us, and sum is faster
than np.sum's Python wrapper.  tapead keeps every output on the tape, so on a
200-op tape each output is fresh memory beyond the caches (6.4 MB of
(64, 64) outputs) while numpy's loop reuses one warm buffer; the 16-ops-a-tape
column reuses memory as a training step does.  getitem of a (64, 64) array
goes through the Python indexing layer (``tapead._prims.indexing``), about
1 us.
"""
from __future__ import annotations

import sys
import timeit

import numpy as np
import pytest

import tapead.numpy as tnp
from tapead._core import Tape

SHAPES = [(3,), (64, 64)]

OPS = {
    "exp": (np.exp, tnp.exp),
    "multiply": (lambda a, b: a * b, lambda a, b: a * b),
    "sum": (np.sum, tnp.sum),
    "getitem": (lambda a: a[1:], lambda a: a[1:]),
}


def _setup(shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape)
    tape = Tape(1 << 16)
    ta_ = tape.input(a)
    tb_ = tape.input(b)
    return a, b, ta_, tb_


def _call(op, x, y):
    f = OPS[op][1]
    return f(x, y) if op == "multiply" else f(x)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_tapead_op_overhead(benchmark, op, shape):
    a, b, ta_, tb_ = _setup(shape)
    out = benchmark(_call, op, ta_, tb_)
    ref = OPS[op][0](a, b) if op == "multiply" else OPS[op][0](a)
    np.testing.assert_array_equal(np.asarray(out.primal), ref)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_numpy_op(benchmark, op, shape):
    a, b, _, _ = _setup(shape)
    f = OPS[op][0]
    benchmark(f, a, b) if op == "multiply" else benchmark(f, a)


def _peer_timings(shape, number):
    rows = {}
    try:
        import autograd.numpy as anp
        from autograd.core import VJPNode
        from autograd.tracer import new_box, trace_stack
        a, b, _, _ = _setup(shape)
        with trace_stack.new_trace() as t:
            A, B = new_box(a, t, VJPNode.new_root()), new_box(b, t, VJPNode.new_root())
            fns = {"exp": lambda: anp.exp(A), "multiply": lambda: A * B,
                   "sum": lambda: anp.sum(A), "getitem": lambda: A[1:]}
            rows["autograd"] = {k: min(timeit.repeat(f, number=number, repeat=5)) / number
                                for k, f in fns.items()}
    except ImportError:
        pass
    try:
        import torch
        a, b, _, _ = _setup(shape)
        A = torch.tensor(a, requires_grad=True)
        B = torch.tensor(b, requires_grad=True)
        fns = {"exp": lambda: torch.exp(A), "multiply": lambda: A * B,
               "sum": lambda: torch.sum(A), "getitem": lambda: A[1:]}
        rows["torch"] = {k: min(timeit.repeat(f, number=number, repeat=5)) / number
                         for k, f in fns.items()}
    except ImportError:
        pass
    return rows


def _time_recording(op, shape, number, repeat=7, per_tape=None):
    """Best time per op, recording ``number`` ops on a fresh tape each repeat
    (a tape keeps every output alive, so one endless tape would measure the
    allocator, not the recording).  With ``per_tape``, a fresh tape every
    ``per_tape`` ops: the outputs' memory is reused as in a training step
    (a few ops a tape), where 200 outputs of (64, 64) -- 6.4 MB -- write to
    memory beyond the caches."""
    best = float("inf")
    per_tape = per_tape or number
    rounds = max(1, number // per_tape)
    for _ in range(repeat):
        t = 0.0
        for _ in range(rounds):
            _, _, ta_, tb_ = _setup(shape)
            t += timeit.timeit(lambda: _call(op, ta_, tb_), number=per_tape)
        best = min(best, t / (rounds * per_tape))
    return best


def _time_numpy_keeping(op, shape, number, repeat=7, per_tape=None):
    """numpy's time per op when it keeps its outputs alive as a tape must
    (``per_tape`` outputs held in a list, a new list each round, the freeing
    outside the timing, as ``_time_recording`` does for tapead's tapes)."""
    npf = OPS[op][0]
    best = float("inf")
    per_tape = per_tape or number
    rounds = max(1, number // per_tape)
    a, b, _, _ = _setup(shape)
    call = (lambda: npf(a, b)) if op == "multiply" else (lambda: npf(a))
    for _ in range(repeat):
        t = 0.0
        for _ in range(rounds):
            kept = []
            keep = kept.append
            t += timeit.timeit(lambda: keep(call()), number=per_tape)
            del kept
        best = min(best, t / (rounds * per_tape))
    return best


def report(number: int = 200) -> None:
    """Two baselines: numpy dropping each output (its buffer is reused, warm in
    the cache), and numpy keeping its outputs as a tape does -- which costs
    fresh memory, so the recording's own overhead is the difference from the
    second (the last two columns)."""
    print("| shape | op | numpy | tapead | tapead - numpy | tapead - numpy, "
          "16 ops a tape | autograd | torch | numpy keeping its outputs | "
          "tapead - numpy keeping, 200 / 16 ops a tape |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        a, b, ta_, tb_ = _setup(shape)
        peers = _peer_timings(shape, number)
        for op, (npf, _) in OPS.items():
            t_np = min(timeit.repeat(
                (lambda: npf(a, b)) if op == "multiply" else (lambda: npf(a)),
                number=number, repeat=7)) / number
            t_ta = _time_recording(op, shape, number)
            t_short = _time_recording(op, shape, number, per_tape=16)
            t_keep = _time_numpy_keeping(op, shape, number)
            t_keep16 = _time_numpy_keeping(op, shape, number, per_tape=16)
            ag = peers.get("autograd", {}).get(op)
            th = peers.get("torch", {}).get(op)
            fmt = (lambda t: f"{t * 1e6:.2f} us" if t is not None else "--")
            print(f"| {shape} | {op} | {fmt(t_np)} | {fmt(t_ta)} | "
                  f"{(t_ta - t_np) * 1e6:.2f} us | {(t_short - t_np) * 1e6:.2f} us | "
                  f"{fmt(ag)} | {fmt(th)} | {fmt(t_keep)} / {fmt(t_keep16)} | "
                  f"{(t_ta - t_keep) * 1e6:.2f} / {(t_short - t_keep16) * 1e6:.2f} us |")


if __name__ == "__main__":
    report(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
