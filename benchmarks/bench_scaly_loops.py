"""Loops: Scaly against CasADi and JAX, and what checkpointed loops hold
(pytest-benchmark, plus a report table).

R1  The double-integrator rollout of the control-flow page
    (``docs/scaly_control.md``): state x_k in R^2, x_{k+1} = x_k + 0.1 (v_k, u_k),
    cost sum_k |x_k|^2 over the T states entering the steps, its gradient
    with respect to the T controls, at T = 10**2, 10**3, 10**4:

    * ``sc.scan``: ``@sc.function`` + ``sc.scan`` + ``sc.gradient`` (and
      with ``checkpoints=10``); build = the Function, the gradient Function
      and the first call; eval = a further call;
    * CasADi SX: the unrolled expression, ``casadi.Function``,
      ``casadi.gradient`` made a Function, the first call (build), a call (eval);
    * ``jax.jit(jax.grad(...lax.scan...))``: compile + first call (build),
      a call (eval), when JAX is installed;
    * ``ta.grad`` of ``ta.scan``, with and without ``checkpoints=10`` (no
      build step: eval is the whole gradient);
    * PyTorch eager: the rollout as a Python loop on float64 tensors, then
      ``backward()``, ``torch.set_num_threads(1)`` (no build step), when
      torch is installed.

R1b ``sc.scan(checkpoints=10)`` against the bound its design promises: at
    most 1.5 x (primal steps recomputed / T) x the uncheckpointed gradient's
    time; the steps recomputed (revolve's t(T, 10), counted by the C sweep)
    against ``optimal_forward_steps``; the peak bytes ``tracemalloc`` traces
    during a gradient, checkpointed and storing every step.

R2  Memory of a 10**6-step ``ta.scan`` gradient with ``checkpoints=20``:
    bytes traced by ``tracemalloc`` at the peak beyond the two n-vectors the
    gradient needs in any case (the gradient, a contiguous copy of the
    controls), against ``ta.checkpoint_cost(n, 20, carry_bytes=...)``; the
    forward steps run, against the schedule's prediction.

R3  ``ta.while_loop``'s reverse gradient of a 10**4-step fixed-point
    iteration x <- cos(a x): ``checkpoints=10`` (online schedule) against
    storing every step: the ratio of times and of memory (growth of the peak
    resident size, which sees the tape's C arrays too; ``tracemalloc``
    sees only the Python heap).

R3b The same fixed-point iteration as ``sc.while_loop`` (``checkpoints=10``
    against storing every step): the steps run, counted by the C sweep,
    against ``online_forward_steps``, and the gradient's times.

Run the timings::

    python -m pytest benchmarks/bench_scaly_loops.py --benchmark-enable

As quick tests (each case once, every gradient checked)::

    python -m pytest benchmarks/bench_scaly_loops.py

The markdown table (minimum of repeated runs)::

    PYTHONPATH=. python benchmarks/bench_scaly_loops.py [--quick]

CasADi (``pip install casadi``), JAX and torch are optional peers: their rows are
skipped when they are not importable.  No test asserts a wall-clock time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import tracemalloc
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

import tapead as ta
import tapead.scaly as sc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)

LENGTHS = [100, 1000, 10_000]
X0 = np.array([1.0, 0.0])
H = 0.1


def controls(T: int) -> np.ndarray:
    return np.sin(np.linspace(0.0, 6.0, T))


def reference_gradient(u: np.ndarray) -> np.ndarray:
    """d/du of sum_k |x_k|^2 by the hand-written adjoint (numpy)."""
    T = len(u)
    x = np.zeros((T + 1, 2))
    x[0] = X0
    for k in range(T):
        x[k + 1] = x[k] + H * np.array([x[k, 1], u[k]])
    lam, g = np.zeros(2), np.zeros(T)          # lam = d cost / d x_{k+1}
    for k in range(T - 1, -1, -1):
        g[k] = H * lam[1]
        lam = 2.0 * x[k] + np.array([lam[0], H * lam[0] + lam[1]])
    return g


# ---------------------------------------------------------------------------
# R1: the rollout, built by each library
# ---------------------------------------------------------------------------

def build_scaly(T: int, checkpoints: Optional[int] = None) -> Callable:
    """The page's rollout and its gradient Function (new Functions each time)."""
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def model(x, u):
        return x + H * sc.stack([x[1], u]), sc.sumsqr(x)

    @sc.function(sc.arg("x0", 2), sc.arg("controls", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, controls):
        final, (costs,) = sc.scan(model, x0, (controls,), length=T,
                                  checkpoints=checkpoints)
        return final, costs.sum()

    grad = sc.gradient(rollout, "cost", "controls")
    return lambda u: grad(X0, u)


def casadi_or_none():
    try:
        import casadi
    except ImportError:
        return None
    return casadi


def build_casadi(T: int) -> Callable:
    ca = casadi_or_none()
    x0, U = ca.SX.sym("x0", 2), ca.SX.sym("U", T)
    x, cost = x0, 0
    for k in range(T):
        cost = cost + ca.sumsqr(x)
        x = x + H * ca.vertcat(x[1], U[k])
    ca.Function("rollout", [x0, U], [x, cost])
    grad = ca.Function("rollout_grad_cost_U", [x0, U], [ca.gradient(cost, U)])
    return lambda u: np.asarray(grad(X0, u)).ravel()


def build_jax(T: int) -> Callable:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def model(x, u):
        return x + H * jnp.stack([x[1], u]), jnp.sum(x * x)

    def cost(u):
        return jax.lax.scan(model, jnp.asarray(X0), u)[1].sum()
    grad = jax.jit(jax.grad(cost))
    return lambda u: np.asarray(grad(u).block_until_ready())


def _ta_step(c, u):
    p, v = c
    return (p + H * v, v + H * u), p * p + v * v


def build_ta(T: int, checkpoints: Optional[int] = None) -> Callable:
    def cost(u):
        return ta.scan(_ta_step, (float(X0[0]), float(X0[1])), u,
                       checkpoints=checkpoints)[1].sum()
    return ta.grad(cost)


def build_torch(T: int) -> Callable:
    """The rollout as a Python loop of torch ops (torch has no scan)."""
    import torch
    torch.set_num_threads(1)

    def grad(u):
        ut = torch.from_numpy(u).requires_grad_()
        x = torch.from_numpy(X0.copy())
        cost = torch.zeros((), dtype=torch.float64)
        for uk in ut.unbind():
            cost = cost + torch.sum(x * x)
            x = x + H * torch.stack([x[1], uk])
        cost.backward()
        return ut.grad.numpy()
    return grad


def _jax_available() -> bool:
    return _importable("jax")


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


#: name -> (builder, whether its build step is separate from the gradient)
METHODS: Dict[str, Tuple[Callable, bool]] = {
    "sc.scan + sc.gradient": (build_scaly, True),
    "sc.scan(checkpoints=10)": (lambda T: build_scaly(T, 10), True),
    "CasADi SX": (build_casadi, True),
    "jax.jit(grad(lax.scan))": (build_jax, True),
    "ta.grad(ta.scan)": (build_ta, False),
    "ta.scan(checkpoints=10)": (lambda T: build_ta(T, 10), False),
    "torch eager, 1 thread": (build_torch, False),
}


def available(name: str) -> bool:
    if name.startswith("CasADi"):
        return casadi_or_none() is not None
    if name.startswith("jax"):
        return _jax_available()
    if name.startswith("torch"):
        return _importable("torch")
    return True


def settle(fn: Callable, *args) -> None:
    """Steady state: call ``fn`` until its loop bodies are compiled (a graph-API
    loop compiles its body in the background at its second run) and wait for
    the compiler, so that a timing sees the code every later call runs."""
    import threading
    from tapead.compiler import eager
    for _ in range(eager.EAGER_AFTER + 1):
        fn(*args)
    for t in threading.enumerate():
        if t.name in ("tapead-compile-loop", "tapead-find-native"):
            t.join(60)


def build_and_first_call(name: str, T: int) -> Tuple[Callable, float, np.ndarray]:
    """(gradient function, seconds to build it and call it once, first result)."""
    u = controls(T)
    start = time.perf_counter()
    fn = METHODS[name][0](T)
    g = fn(u)
    return fn, time.perf_counter() - start, g


@pytest.mark.parametrize("T", LENGTHS)
@pytest.mark.parametrize("name", list(METHODS))
def test_rollout_gradient(benchmark, name, T):
    if not available(name):
        pytest.skip(f"{name.split()[0]} is not installed")
    fn, _, first = build_and_first_call(name, T)
    u = controls(T)
    g = benchmark(fn, u)
    want = reference_gradient(u)
    scale = np.abs(want).max()
    np.testing.assert_allclose(first, want, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(g, want, rtol=0, atol=1e-12 * scale)


# ---------------------------------------------------------------------------
# R1b: the checkpointed Scaly scan against its bound
# ---------------------------------------------------------------------------

def scaly_sweep(T: int, s: int = 10) -> dict:
    """What the C sweep of ``sc.scan(checkpoints=s)``'s gradient recorded
    (``forward_steps``, ``predicted_forward_steps``, ...) and the peak traced
    bytes of one gradient, checkpointed (``peak``) and storing every step
    (``peak_stored``)."""
    from tapead.scaly.graphs import topo_order

    def peak(fn, u):
        fn(u)
        tracemalloc.start()
        try:
            fn(u)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def model(x, u):
        return x + H * sc.stack([x[1], u]), sc.sumsqr(x)

    @sc.function(sc.arg("x0", 2), sc.arg("controls", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, controls):
        final, (costs,) = sc.scan(model, x0, (controls,), length=T, checkpoints=s)
        return final, costs.sum()

    grad = sc.gradient(rollout, "cost", "controls")
    u = controls(T)
    out = {"peak": peak(lambda v: grad(X0, v), u), "peak_stored": peak(build_scaly(T), u)}
    spec = next(n.attrs["spec"] for n in topo_order(grad.outputs)
                if n.op == "scan" and n.attrs["spec"].recompute is not None)
    out.update(spec._derived["sweep"])
    return out


@pytest.mark.parametrize("T", LENGTHS)
def test_checkpointed_scaly_scan_recomputes_revolves_steps(T):
    from tapead.checkpointing import optimal_forward_steps
    sweep = scaly_sweep(T)
    assert sweep["forward_steps"] == optimal_forward_steps(T, 10)
    assert sweep["peak"] + T * X0.nbytes < sweep["peak_stored"]


# ---------------------------------------------------------------------------
# R2: the memory of a long checkpointed scan
# ---------------------------------------------------------------------------

def _carry_step(c, u):
    """The rollout with the cost in the carry: no per-step outputs to store."""
    p, v, J = c
    return (p + H * v, v + H * u, J + p * p + v * v), None


def scan_memory(n: int, s: Optional[int] = 20) -> Dict[str, float]:
    """Peak traced bytes beyond two n-vectors, forward steps run and their
    prediction, for the gradient of an n-step ``ta.scan``."""
    import tapead.scalar_scan as scalar_scan
    stats: List[dict] = []
    original = scalar_scan._scan_scalar_cts

    def spy(*args, **kw):
        out = original(*args, **kw)
        stats.append(dict(kw["cache"].get("stats", {})))
        return out

    u = controls(n)
    grad = ta.grad(lambda c: ta.scan(_carry_step, (1.0, 0.0, 0.0), c,
                                     checkpoints=s)[0][2])
    scalar_scan._scan_scalar_cts = spy
    try:
        tracemalloc.start()
        start = time.perf_counter()
        g = grad(u)
        seconds = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        scalar_scan._scan_scalar_cts = original
    assert g.shape == (n,)
    out = {"n": n, "seconds": seconds, "peak": peak, "beyond": peak - 2 * u.nbytes}
    if s is not None:
        cost = ta.checkpoint_cost(n, s, carry_bytes=3 * 8)
        out.update(predicted=cost["bytes"], predicted_steps=cost["forward_steps"],
                   steps=stats[-1]["advance_steps"])
    return out


def test_checkpointed_scan_memory_does_not_grow_with_the_steps():
    small, large = scan_memory(10_000), scan_memory(100_000)
    assert large["steps"] == large["predicted_steps"]
    assert small["steps"] == small["predicted_steps"]
    # bytes beyond the gradient's own vectors: a constant, not O(n)
    assert large["beyond"] < 64 * 1024
    assert abs(large["beyond"] - small["beyond"]) < 16 * 1024
    assert scan_memory(100_000, None)["beyond"] > 100_000 * 3 * 8


# ---------------------------------------------------------------------------
# R3: a long while loop, stored or checkpointed online
# ---------------------------------------------------------------------------

FIXED_POINT_STEPS = 10_000


def fixed_point(a, checkpoints=None, steps=FIXED_POINT_STEPS):
    import tapead.numpy as tnp

    def body(c):
        x, k, a = c
        return tnp.cos(a * x), k + 1.0, a
    x, _, _ = ta.while_loop(lambda c: c[1] < steps, body, (0.5, 0.0, a),
                            checkpoints=checkpoints)
    return x


def test_while_loop_checkpointed_gradient_is_the_stored_one():
    stored = ta.grad(lambda a: fixed_point(a, None, 2000))(0.9)
    assert ta.grad(lambda a: fixed_point(a, 10, 2000))(0.9) == stored


def scaly_fixed_point(checkpoints: Optional[int], steps: int = FIXED_POINT_STEPS):
    """The gradient Function of the fixed-point iteration as ``sc.while_loop``
    (its condition one comparison of floats, so it runs in C)."""
    BOOL = sc.TensorType((), sc.dtypes.bool_)

    @sc.function(sc.arg("x", ()), sc.arg("k", ()), sc.arg("a", ()), outputs=sc.arg("go", BOOL))
    def going(x, k, a):
        return k < float(steps)

    @sc.function(sc.arg("x", ()), sc.arg("k", ()), sc.arg("a", ()))
    def iterate(x, k, a):
        return (a * x).cos(), k + 1.0

    @sc.function(sc.arg("a", ()), outputs=sc.arg("x", ()))
    def run(a):
        (x, _), _ = sc.while_loop(going, iterate, (sc.const(0.5), sc.const(0.0)),
                                  max_iter=steps + 5, params=(a,), checkpoints=checkpoints)
        return x
    return sc.gradient(run, "x", "a")


def _online_sweep(grad) -> dict:
    from tapead.scaly.graphs import topo_order
    return next(n.attrs["spec"] for n in topo_order(grad.outputs)
                if n.op == "scan" and n.attrs["spec"].recompute is not None)._derived["sweep"]


def test_scaly_while_loop_checkpointed_runs_the_online_schedule():
    from tapead.online import online_forward_steps
    grad, stored = scaly_fixed_point(10, 2000), scaly_fixed_point(None, 2000)
    assert grad(np.array(0.9)) == stored(np.array(0.9))
    assert _online_sweep(grad)["forward_steps"] == online_forward_steps(2000, 10)


def _status_kib(key: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_growth(fn: Callable, *args) -> Optional[int]:
    """KiB by which the resident size peaks above its level before ``fn(*args)``
    (freed heap returned to the system first, the peak mark reset: Linux);
    None where ``/proc/self/clear_refs`` is not available."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    base = _status_kib("VmRSS")
    fn(*args)
    return _status_kib("VmHWM") - base


def test_while_loop_checkpoints_hold_less_than_every_step():
    _, kib_ck, _ = while_loop_costs(10, runs=1)
    _, kib_all, _ = while_loop_costs(None, runs=1)
    if kib_all is None:
        pytest.skip("the peak resident size cannot be reset here (/proc/self/clear_refs)")
    assert kib_ck < kib_all / 2


def while_loop_costs(ck: Optional[int], runs: int = 3) -> Tuple[float, Optional[int], int]:
    """(min seconds, min peak-RSS growth in KiB, traced peak bytes) of the
    10**4-step gradient."""
    grad = ta.grad(lambda a: fixed_point(a, ck))
    ta.grad(lambda a: fixed_point(a, ck, 50))(0.9)           # warm up
    seconds, kib = [], []
    for _ in range(runs):
        start = time.perf_counter()
        grad(0.9)
        seconds.append(time.perf_counter() - start)
        kib.append(peak_rss_growth(grad, 0.9))
    tracemalloc.start()
    grad(0.9)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return min(seconds), (None if None in kib else min(kib)), peak


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    builds = 1 if args.quick else 3
    print(f"{datetime.date.today()}, {common.cpu_name()}; minimum of repeated runs on a "
          "machine shared with other jobs")
    print()
    print("| gradient of the rollout | " + " | ".join(
        f"T = {T:,}: build | eval" for T in LENGTHS).replace(",", " ") + " |")
    print("|---|" + "---|---|" * len(LENGTHS))
    for name, (_, has_build) in METHODS.items():
        if not available(name):
            continue
        cells = []
        for T in LENGTHS:
            u, want = controls(T), reference_gradient(controls(T))
            best_build, fn = float("inf"), None
            for _ in range(builds):
                fn, seconds, g = build_and_first_call(name, T)
                best_build = min(best_build, seconds)
                assert np.abs(g - want).max() <= 1e-12 * np.abs(want).max(), name
            settle(fn, u)
            best, _ = common.measure(fn, u, total=0.3 if args.quick else 1.5)
            cells += [_ms(best_build) if has_build else "-", _ms(best)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("| `sc.scan(checkpoints=10)` | T = 100 | T = 1 000 | T = 10 000 |")
    print("|---|---|---|---|")
    rows: Dict[str, List[str]] = {k: [] for k in (
        "primal steps recomputed (predicted)", "eval, checkpointed", "eval, every step stored",
        "bound 1.5 x (recomputed / T) x stored", "peak traced bytes (stored)",
        "snapshot bytes predicted")}
    for T in LENGTHS:
        sweep, u = scaly_sweep(T), controls(T)
        ck, st = build_scaly(T, 10), build_scaly(T)
        settle(ck, u)
        settle(st, u)
        t_ck = common.measure(ck, u, total=0.3 if args.quick else 1.5)[0]
        t_st = common.measure(st, u, total=0.3 if args.quick else 1.5)[0]
        rows["primal steps recomputed (predicted)"].append(
            f"{sweep['forward_steps']:,} ({sweep['predicted_forward_steps']:,})")
        rows["eval, checkpointed"].append(_ms(t_ck))
        rows["eval, every step stored"].append(_ms(t_st))
        rows["bound 1.5 x (recomputed / T) x stored"].append(
            _ms(1.5 * sweep["forward_steps"] / T * t_st))
        rows["peak traced bytes (stored)"].append(
            f"{sweep['peak']:,} ({sweep['peak_stored']:,})")
        rows["snapshot bytes predicted"].append(
            f"{ta.checkpoint_cost(T, 10, carry_bytes=sweep['carry_bytes'])['bytes']:,}")
    for label, cells in rows.items():
        print(f"| {label} | " + " | ".join(c.replace(",", " ") for c in cells) + " |")
    print()
    n = 10 ** 6
    runs = [scan_memory(n) for _ in range(1 if args.quick else 3)]
    mem = min(runs, key=lambda r: r["beyond"])
    stored = scan_memory(n, None)
    print(f"`ta.scan` gradient, n = {n:,} steps, `checkpoints=20`: peak traced bytes beyond "
          f"the two n-vectors {mem['beyond']:,} (predicted snapshots: {mem['predicted']:,} "
          f"bytes; storing every step: {stored['beyond']:,}); forward steps "
          f"{mem['steps']:,}, predicted {mem['predicted_steps']:,}; "
          f"{_ms(min(r['seconds'] for r in runs))} (stored: {_ms(stored['seconds'])})")
    print()
    runs = 1 if args.quick else 3
    t_ck, kib_ck, py_ck = while_loop_costs(10, runs)
    t_all, kib_all, py_all = while_loop_costs(None, runs)
    ratio = "n/a" if kib_all is None else f"{kib_ck / max(kib_all, 1):.2g}x"
    from tapead.online import online_forward_steps
    a = np.array(0.9)
    ck, st = scaly_fixed_point(10), scaly_fixed_point(None)
    settle(ck, a)
    settle(st, a)
    t_sck = common.measure(ck, a, total=0.3 if args.quick else 1.5)[0]
    t_sst = common.measure(st, a, total=0.3 if args.quick else 1.5)[0]
    sweep = _online_sweep(ck)
    print(f"`sc.while_loop` gradient, the same iteration: every step stored {_ms(t_sst)}; "
          f"`checkpoints=10` {_ms(t_sck)}, steps run {sweep['forward_steps']:,} "
          f"(online schedule: {online_forward_steps(FIXED_POINT_STEPS, 10):,}), bound "
          f"1.5 x (steps run / n) x stored = "
          f"{_ms(1.5 * sweep['forward_steps'] / FIXED_POINT_STEPS * t_sst)}")
    print()
    print(f"`ta.while_loop` gradient, {FIXED_POINT_STEPS:,}-step fixed-point iteration: "
          f"every step stored {_ms(t_all)}, peak RSS growth {kib_all} KiB (traced "
          f"{py_all:,} B); `checkpoints=10` {_ms(t_ck)}, {kib_ck} KiB (traced "
          f"{py_ck:,} B); time ratio {t_ck / t_all:.2g}x, memory ratio {ratio}")


if __name__ == "__main__":
    main()
