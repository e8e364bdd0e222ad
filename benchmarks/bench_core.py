"""Benchmarks of tapead's core (pytest-benchmark), with peers when installed.

B1  f(x) = sum_{i<n-1} sin(x_i) * x_{i+1}, a Python loop over a list of
    Python floats: plain floats (math.sin, np.sin), tapead reverse mode
    (tnp.sin, plain np.sin through the numpy protocol), tapead forward mode
    (n jvp passes) and the peers autograd, torch eager, JAX eager and
    ``jax.jit(jax.value_and_grad)`` (compile excluded, reported as extra info).
B2  the same function vectorised on a float64 array: numpy evaluation alone,
    tapead value and gradient, autograd, torch (1 thread), jax.jit.
B3  raw reverse-sweep throughput of a recorded scalar tape (nodes per second)
    and its bytes per node.

B2 at n = 1e6, measured under load (2 shared cores, other jobs running;
pytest-benchmark minimum): numpy evaluation 6.58 ms, tapead value and
gradient 11.2 ms (1.70x; 2.38x = 15.8 ms before the memory pool, the fused
slice cotangents and sin's product cotangent), torch 1 thread 11.3 ms,
jax.jit 19.6 ms, autograd 31.8 ms.  The forward pass alone is about 8.2 ms of
that (sin and cos in one sincos pass, 7.4 ms, the product and the sum); the
reverse pass is two passes over memory: the cotangent of ``x[1:]`` written
into a fresh gradient buffer, then ``g * cos`` added into its ``[:-1]`` view.

Run the timings::

    python -m pytest benchmarks/bench_core.py --benchmark-enable

Run them as quick tests (the default ``--benchmark-disable``: each case runs
once and its result is checked; the slowest cases are skipped)::

    python -m pytest benchmarks/bench_core.py

The peers (autograd, torch, jax) are optional: their cases are skipped when
they are not importable.  ``benchmarks/report_core.py`` prints the summary
table with ratios against the targets.  No test asserts a wall-clock time.
"""
from __future__ import annotations

import math
import time
from typing import Callable, List, Tuple

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._core import Tape

B1_SIZES = [10, 100, 1000, 10_000]
B2_SIZES = [10**3, 10**5, 10**6]
B3_SIZES = [10**6, 10**7]


# ---- inputs and reference gradients -------------------------------------------

def b1_input(n: int, seed: int = 0) -> List[float]:
    """n Python floats in [-1, 1]."""
    return [float(v) for v in np.random.default_rng(seed).uniform(-1.0, 1.0, n)]


def b2_input(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, n)


def exact_value_and_grad(x) -> Tuple[float, np.ndarray]:
    """Closed form: d/dx_i = cos(x_i) x_{i+1} [i < n-1] + sin(x_{i-1}) [i > 0]."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    g[:-1] += np.cos(x[:-1]) * x[1:]
    g[1:] += np.sin(x[:-1])
    return float(np.sum(np.sin(x[:-1]) * x[1:])), g


def check(result, x, rtol: float = 1e-10) -> None:
    """Assert that ``(value, grad)`` matches the closed form."""
    value, grad = result
    v_ref, g_ref = exact_value_and_grad(x)
    np.testing.assert_allclose(float(value), v_ref, rtol=rtol, atol=1e-12)
    if isinstance(grad, (list, tuple)):
        grad = [float(g) for g in grad]
    elif hasattr(grad, "detach"):                       # a torch tensor
        grad = grad.detach().numpy()
    np.testing.assert_allclose(np.asarray(grad, dtype=np.float64), g_ref,
                               rtol=rtol, atol=1e-12)


# ---- B1: scalar loops ------------------------------------------------------------

def loop_math(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + math.sin(x[i]) * x[i + 1]
    return s


def loop_np(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + np.sin(x[i]) * x[i + 1]
    return s


def loop_tnp(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + tnp.sin(x[i]) * x[i + 1]
    return s


tapead_vg_tnp = ta.value_and_grad(loop_tnp)
tapead_vg_np = ta.value_and_grad(loop_np)


def tapead_forward(x):
    """Value and gradient by n forward passes (one ``ta.jvp`` per input)."""
    n = len(x)
    grad = []
    value = None
    zeros = [0.0] * n
    for i in range(n):
        e = list(zeros)
        e[i] = 1.0
        value, t = ta.jvp(loop_tnp, (x,), (e,))
        grad.append(t)
    return value, grad


def make_autograd_b1():
    import autograd
    import autograd.numpy as anp

    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + anp.sin(x[i]) * x[i + 1]
        return s
    return autograd.value_and_grad(f)


def make_torch_b1():
    import torch

    def vg(x):
        xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in x]
        s = torch.zeros((), dtype=torch.float64)
        for i in range(len(xs) - 1):
            s = s + torch.sin(xs[i]) * xs[i + 1]
        s.backward()
        return s.detach(), [t.grad for t in xs]
    return vg


def _jax_f(jnp):
    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + jnp.sin(x[i]) * x[i + 1]
        return s
    return f


def make_jax_eager_b1():
    import jax
    import jax.numpy as jnp
    return jax.value_and_grad(_jax_f(jnp))


def make_jax_jit_b1(x) -> Tuple[Callable, float]:
    """``jax.jit(jax.value_and_grad(f))`` compiled for x; returns (fn, compile s)."""
    import jax
    import jax.numpy as jnp
    fn = jax.jit(jax.value_and_grad(_jax_f(jnp)))
    start = time.perf_counter()
    jax.block_until_ready(fn(x))
    return _blocking(jax, fn), time.perf_counter() - start


def make_jax_jit_b1_array(x) -> Tuple[Callable, float]:
    """As ``make_jax_jit_b1`` but called with one float64 array (no per-call
    conversion of n Python floats); returns (fn, compile s)."""
    import jax
    import jax.numpy as jnp
    fn = jax.jit(jax.value_and_grad(_jax_f(jnp)))
    xa = np.asarray(x)
    start = time.perf_counter()
    jax.block_until_ready(fn(xa))
    compile_s = time.perf_counter() - start
    run = _blocking(jax, fn)
    return (lambda x: run(np.asarray(x))), compile_s


def _blocking(jax, fn):
    def run(x):
        return jax.block_until_ready(fn(x))
    return run


# ---- B2: vectorised --------------------------------------------------------------

def vec_numpy(x):
    return np.sum(np.sin(x[:-1]) * x[1:])


def vec_tnp(x):
    return tnp.sum(tnp.sin(x[:-1]) * x[1:])


tapead_vec_vg_tnp = ta.value_and_grad(vec_tnp)
tapead_vec_vg_np = ta.value_and_grad(vec_numpy)


def make_autograd_b2():
    import autograd
    import autograd.numpy as anp
    return autograd.value_and_grad(lambda x: anp.sum(anp.sin(x[:-1]) * x[1:]))


def make_torch_b2():
    import torch
    torch.set_num_threads(1)

    def vg(x):
        t = torch.from_numpy(x).requires_grad_()
        s = torch.sum(torch.sin(t[:-1]) * t[1:])
        s.backward()
        return s.detach(), t.grad
    return vg


def make_jax_jit_b2(x) -> Tuple[Callable, float]:
    import jax
    import jax.numpy as jnp
    fn = jax.jit(jax.value_and_grad(lambda x: jnp.sum(jnp.sin(x[:-1]) * x[1:])))
    start = time.perf_counter()
    jax.block_until_ready(fn(x))
    return _blocking(jax, fn), time.perf_counter() - start


# ---- B3: the reverse sweep alone -------------------------------------------------

def record_chain(n_nodes: int):
    """A chain of binary scalar nodes ``y = y * a + b`` (a = 1, so no adjoint
    underflows and the sweep visits every node); returns (tape, out, wrt)."""
    tape = Tape(n_nodes + 16)
    a, b = tape.input_many([1.0, 1e-7])
    y = a
    for _ in range((n_nodes - 2) // 2):
        y = y * a + b
    return tape, y.idx, [a.idx, b.idx]


def sweep(tape, out: int, wrt):
    return tape.backward([out], [1.0], wrt)


# ---- pytest-benchmark --------------------------------------------------------------

def _slow(benchmark, reason: str) -> None:
    """Skip a slow case when the benchmarks are disabled (plain test run)."""
    if benchmark.disabled:
        pytest.skip(f"{reason}; runs with --benchmark-enable")


def _bench(benchmark, fn, *args, rounds: int | None = None):
    if rounds is not None and not benchmark.disabled:
        return benchmark.pedantic(fn, args=args, rounds=rounds, iterations=1,
                                  warmup_rounds=1)
    return benchmark(fn, *args)


@pytest.mark.parametrize("n", B1_SIZES)
def test_b1_math_loop(benchmark, n):
    benchmark.group = f"B1 n={n}"
    x = b1_input(n)
    assert _bench(benchmark, loop_math, x) == pytest.approx(exact_value_and_grad(x)[0])


@pytest.mark.parametrize("n", B1_SIZES)
def test_b1_np_loop(benchmark, n):
    benchmark.group = f"B1 n={n}"
    x = b1_input(n)
    assert _bench(benchmark, loop_np, x) == pytest.approx(exact_value_and_grad(x)[0])


@pytest.mark.parametrize("n", B1_SIZES)
def test_b1_tapead_tnp(benchmark, n):
    benchmark.group = f"B1 n={n}"
    x = b1_input(n)
    check(_bench(benchmark, tapead_vg_tnp, x), x)


@pytest.mark.parametrize("n", B1_SIZES)
def test_b1_tapead_np_protocol(benchmark, n):
    benchmark.group = f"B1 n={n}"
    x = b1_input(n)
    check(_bench(benchmark, tapead_vg_np, x), x)


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_b1_tapead_forward(benchmark, n):
    benchmark.group = f"B1 n={n}"
    if n >= 1000:
        _slow(benchmark, "n jvp passes of an n-element loop")
    x = b1_input(n)
    check(_bench(benchmark, tapead_forward, x, rounds=3 if n >= 1000 else None), x)


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_b1_autograd(benchmark, n):
    # n = 10000 is left out: autograd's list indexing is O(n) a step (~5 min a call).
    pytest.importorskip("autograd")
    benchmark.group = f"B1 n={n}"
    if n >= 1000:
        _slow(benchmark, "autograd at n=1000 (seconds a call)")
    x = b1_input(n)
    check(_bench(benchmark, make_autograd_b1(), x, rounds=5 if n >= 1000 else None), x)


@pytest.mark.parametrize("n", B1_SIZES)
def test_b1_torch_eager(benchmark, n, torch_1thread):
    benchmark.group = f"B1 n={n}"
    if n >= 10_000:
        _slow(benchmark, "torch eager at n=10000")
    x = b1_input(n)
    check(_bench(benchmark, make_torch_b1(), x, rounds=5 if n >= 1000 else None), x)


@pytest.mark.parametrize("n", [10, 100])
def test_b1_jax_eager(benchmark, n, jax_x64):
    # n >= 1000 is skipped: eager JAX dispatches every scalar op (~1 s per call).
    benchmark.group = f"B1 n={n}"
    if n >= 100:
        _slow(benchmark, "JAX eager")
    x = b1_input(n)
    check(_bench(benchmark, make_jax_eager_b1(), x, rounds=5), x)


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_b1_jax_jit(benchmark, n, jax_x64):
    # n = 10000 is skipped: XLA compiles the unrolled loop for minutes.
    benchmark.group = f"B1 n={n}"
    if n >= 1000:
        _slow(benchmark, "jax.jit compile of the unrolled loop")
    x = b1_input(n)
    fn, compile_s = make_jax_jit_b1(x)
    benchmark.extra_info["compile_s"] = compile_s
    check(_bench(benchmark, fn, x), x)


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_b1_jax_jit_array(benchmark, n, jax_x64):
    benchmark.group = f"B1 n={n}"
    if n >= 1000:
        _slow(benchmark, "jax.jit compile of the unrolled loop")
    x = b1_input(n)
    fn, compile_s = make_jax_jit_b1_array(x)
    benchmark.extra_info["compile_s"] = compile_s
    check(_bench(benchmark, fn, x), x)


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_numpy(benchmark, n):
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    assert _bench(benchmark, vec_numpy, x) == pytest.approx(exact_value_and_grad(x)[0])


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_tapead_tnp(benchmark, n):
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    check(_bench(benchmark, tapead_vec_vg_tnp, x), x)


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_tapead_np_protocol(benchmark, n):
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    check(_bench(benchmark, tapead_vec_vg_np, x), x)


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_autograd(benchmark, n):
    pytest.importorskip("autograd")
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    check(_bench(benchmark, make_autograd_b2(), x), x)


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_torch(benchmark, n, torch_1thread):
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    check(_bench(benchmark, make_torch_b2(), x), x)


@pytest.mark.parametrize("n", B2_SIZES)
def test_b2_jax_jit(benchmark, n, jax_x64):
    benchmark.group = f"B2 n={n:.0e}"
    x = b2_input(n)
    fn, compile_s = make_jax_jit_b2(x)
    benchmark.extra_info["compile_s"] = compile_s
    check(_bench(benchmark, fn, x), x)


@pytest.mark.parametrize("n_nodes", B3_SIZES)
def test_b3_reverse_sweep(benchmark, n_nodes):
    benchmark.group = "B3 reverse sweep"
    if n_nodes > 10**6:
        _slow(benchmark, "recording 1e7 nodes")
    tape, out, wrt = record_chain(n_nodes)
    ga, gb = _bench(benchmark, sweep, tape, out, wrt)
    k = (n_nodes - 2) // 2
    assert gb == pytest.approx(k)                       # d y / d b
    assert tape.last_sweep_steps == tape.n_nodes        # no node skipped
    benchmark.extra_info["n_nodes"] = tape.n_nodes
    benchmark.extra_info["bytes_per_node"] = tape.memory()["total"] / tape.n_nodes
    if not benchmark.disabled and benchmark.stats is not None:
        benchmark.extra_info["nodes_per_s"] = tape.n_nodes / benchmark.stats.stats.min


def test_b3_bytes_per_node():
    tape, _, _ = record_chain(1000)
    assert Tape.bytes_per_scalar_node > 0
    mem = tape.memory()
    assert mem["total"] == pytest.approx(Tape.bytes_per_scalar_node * tape.n_nodes, abs=64)
