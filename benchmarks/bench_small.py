"""Benchmarks of x[i] on arrays and of small arrays (pytest-benchmark), peers optional.

S1  B1's loop ``sum(sin(x[i]) * x[i+1])`` with a float64 *array* in (n = 1000,
    10 000): the plain loop on the array, tapead's value and gradient (element
    nodes), ``ta.jit(ta.value_and_grad(f))`` replayed, the same loop on a list
    of Python floats (math.sin, and tapead with tnp.sin as in bench_core's
    B1); peers: autograd, torch eager (one thread), ``jax.jit`` (compile
    excluded).
S2  RK4 on a damped pendulum (a 2-element state), 1000 steps, gradient of the
    final θ² with respect to the initial state: plain numpy, tapead (small
    vectors per element), central differences (2n + 1 runs), ``jax.jit`` and
    torch eager; and RK4 on states of 2..64 elements (a chain of pendulums,
    tapead versus central differences).

Run the timings::

    python -m pytest benchmarks/bench_small.py --benchmark-enable

As plain tests (``--benchmark-disable``, the default) every case runs once and
its result is checked against a reference; the slowest cases are skipped.
``python benchmarks/bench_small.py`` prints the ratios against the targets
(S1 ≤ 3x the plain loop, S2 ≤ 4x plain numpy and faster than central
differences at every size).  No test asserts a wall-clock time.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tapead as ta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import (  # noqa: E402  (B1's loops, closed form, autograd case, helpers)
    _bench, _slow, exact_value_and_grad as exact, loop_math, loop_np, loop_tnp,
    make_autograd_b1)

S1_SIZES = [1000, 10_000]
S2_SIZES = [2, 4, 8, 16, 32, 64]
STEPS = 1000
H = 0.01


# ---- S1: x[i] in a loop, an array in ----------------------------------------------

def s1_input(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, n)


tapead_vg = ta.value_and_grad(loop_np)
tapead_jit_vg = ta.jit(ta.value_and_grad(loop_np))
tapead_vg_list = ta.value_and_grad(loop_tnp)      # a list in: bench_core's B1
tapead_jit_vg_list = ta.jit(tapead_vg_list)


def check_s1(result, x):
    v, g = result
    v_ref, g_ref = exact(np.asarray(x, dtype=np.float64))
    assert float(v) == pytest.approx(v_ref, rel=1e-12)
    if hasattr(g, "detach"):
        g = g.detach().numpy()
    np.testing.assert_allclose(np.asarray(g, dtype=np.float64), g_ref, rtol=1e-12,
                               atol=1e-14)


make_autograd_s1 = make_autograd_b1      # the same loop; autograd takes arrays and lists


def make_torch_s1():
    import torch

    def vg(x):
        t = torch.from_numpy(x).requires_grad_()
        s = torch.zeros((), dtype=torch.float64)
        for i in range(len(x) - 1):
            s = s + torch.sin(t[i]) * t[i + 1]
        s.backward()
        return s.detach(), t.grad
    return vg


def make_jax_jit_s1(x):
    import jax
    import jax.numpy as jnp

    def f(x):
        s = 0.0
        for i in range(x.shape[0] - 1):
            s = s + jnp.sin(x[i]) * x[i + 1]
        return s
    fn = jax.jit(jax.value_and_grad(f))
    jax.block_until_ready(fn(x))
    return lambda x: jax.block_until_ready(fn(x))


# ---- S2: RK4 on a small state -------------------------------------------------------

def pendulum(y, m=np):
    th, om = y[0], y[1]
    return m.array([om, -0.1 * om - m.sin(th)])


def chain(y, m=np):
    """n/2 damped pendulums coupled to their neighbours: a state of n elements."""
    th, om = y[0::2], y[1::2]
    coupling = m.concatenate([th[1:], th[:1]]) - th
    return m.stack([om, -0.1 * om - m.sin(th) + 0.05 * coupling], axis=1).reshape(-1)


def rk4(y0, f=pendulum, steps=STEPS, h=H, m=np):
    y = y0
    for _ in range(steps):
        k1 = f(y, m)
        k2 = f(y + h / 2 * k1, m)
        k3 = f(y + h / 2 * k2, m)
        k4 = f(y + h * k3, m)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y[0] ** 2


def rk4_chain(y0, steps=STEPS):
    return rk4(y0, chain, steps)


tapead_rk4 = ta.value_and_grad(rk4)
tapead_rk4_chain = ta.value_and_grad(rk4_chain)


def central_differences(f, y0, eps=1e-6):
    """Value and gradient by central differences: 2n + 1 runs of ``f``."""
    g = np.empty_like(y0)
    for k in range(y0.size):
        e = np.zeros_like(y0)
        e[k] = eps
        g[k] = (f(y0 + e) - f(y0 - e)) / (2 * eps)
    return f(y0), g


def s2_state(n: int) -> np.ndarray:
    return np.linspace(0.3, 1.0, n) * np.where(np.arange(n) % 2, -0.5, 1.0)


def make_jax_jit_rk4():
    import jax
    import jax.numpy as jnp
    fn = jax.jit(jax.value_and_grad(lambda y: rk4(y, m=jnp)))
    jax.block_until_ready(fn(s2_state(2)))
    return lambda y: jax.block_until_ready(fn(y))


def make_jax_fori_rk4():
    """``jax.jit(value_and_grad)`` of the RK4 written with ``lax.fori_loop`` (XLA
    compiles one step, not 1000 unrolled ones); returns (fn, compile seconds)."""
    import time

    import jax
    import jax.numpy as jnp

    def run(y0):
        def step(_, y):
            k1 = pendulum(y, jnp)
            k2 = pendulum(y + H / 2 * k1, jnp)
            k3 = pendulum(y + H / 2 * k2, jnp)
            k4 = pendulum(y + H * k3, jnp)
            return y + H / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return jax.lax.fori_loop(0, STEPS, step, y0)[0] ** 2
    fn = jax.jit(jax.value_and_grad(run))
    t = time.perf_counter()
    jax.block_until_ready(fn(s2_state(2)))
    return (lambda y: jax.block_until_ready(fn(y))), time.perf_counter() - t


#: the RK4's tape recorded on the first call, replayed in C after
tapead_jit_rk4 = ta.jit(ta.value_and_grad(rk4))


def make_torch_rk4():
    import torch

    def f(y):
        return torch.stack([y[1], -0.1 * y[1] - torch.sin(y[0])])

    def vg(y0):
        y = torch.from_numpy(y0).requires_grad_()
        v = rk4(y, lambda y, m: f(y))
        v.backward()
        return v.detach(), y.grad
    return vg


# ---- pytest-benchmark ---------------------------------------------------------------

@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_plain_loop_on_the_array(benchmark, n):
    benchmark.group = f"S1 array n={n}"
    x = s1_input(n)
    assert _bench(benchmark, loop_np, x) == pytest.approx(exact(x)[0], rel=1e-12)


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_tapead(benchmark, n):
    benchmark.group = f"S1 array n={n}"
    x = s1_input(n)
    check_s1(_bench(benchmark, tapead_vg, x), x)


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_tapead_jit(benchmark, n):
    benchmark.group = f"S1 array n={n}"
    x = s1_input(n)
    check_s1(tapead_jit_vg(s1_input(n, 1)), s1_input(n, 1))      # recorded elsewhere
    check_s1(_bench(benchmark, tapead_jit_vg, x), x)


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_math_loop_on_a_list(benchmark, n):
    benchmark.group = f"S1 list n={n}"
    x = s1_input(n).tolist()
    assert _bench(benchmark, loop_math, x) == pytest.approx(exact(np.array(x))[0])


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_tapead_on_a_list(benchmark, n):
    benchmark.group = f"S1 list n={n}"
    x = s1_input(n).tolist()
    check_s1(_bench(benchmark, tapead_vg_list, x), x)


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_tapead_jit_on_a_list(benchmark, n):
    benchmark.group = f"S1 list n={n}"
    x = s1_input(n).tolist()
    check_s1(tapead_jit_vg_list(s1_input(n, 1).tolist()), s1_input(n, 1))  # recorded
    v, g = _bench(benchmark, tapead_jit_vg_list, x)
    assert type(g) is list and all(type(a) is float for a in g)
    check_s1((v, np.array(g)), x)


@pytest.mark.parametrize("n", [1000])
def test_s1_autograd(benchmark, n):
    pytest.importorskip("autograd")
    benchmark.group = f"S1 array n={n}"
    _slow(benchmark, "autograd's loop over an array")
    x = s1_input(n)
    check_s1(_bench(benchmark, make_autograd_s1(), x, rounds=3), x)


@pytest.mark.parametrize("n", S1_SIZES)
def test_s1_torch(benchmark, n, torch_1thread):
    benchmark.group = f"S1 array n={n}"
    _slow(benchmark, "torch eager, one op per element")
    x = s1_input(n)
    check_s1(_bench(benchmark, make_torch_s1(), x, rounds=3), x)


@pytest.mark.parametrize("n", [1000])
def test_s1_jax_jit(benchmark, n, jax_x64):
    benchmark.group = f"S1 array n={n}"
    _slow(benchmark, "XLA compiles the unrolled loop")
    x = s1_input(n)
    check_s1(_bench(benchmark, make_jax_jit_s1(x), x), x)


def test_s2_numpy(benchmark):
    benchmark.group = "S2 RK4 n=2"
    y0 = s2_state(2)
    assert np.isfinite(_bench(benchmark, rk4, y0))


def test_s2_tapead(benchmark):
    benchmark.group = "S2 RK4 n=2"
    y0 = s2_state(2)
    v, g = _bench(benchmark, tapead_rk4, y0)
    v_fd, g_fd = central_differences(rk4, y0)
    assert v == rk4(y0)
    np.testing.assert_allclose(g, g_fd, rtol=1e-6)


def test_s2_central_differences(benchmark):
    benchmark.group = "S2 RK4 n=2"
    _slow(benchmark, "five RK4 runs")
    y0 = s2_state(2)
    _bench(benchmark, central_differences, rk4, y0, rounds=5)


def test_s2_jax_jit(benchmark, jax_x64):
    benchmark.group = "S2 RK4 n=2"
    _slow(benchmark, "XLA compiles 1000 unrolled steps")
    y0 = s2_state(2)
    v, g = _bench(benchmark, make_jax_jit_rk4(), y0)
    np.testing.assert_allclose(g, tapead_rk4(y0)[1], rtol=1e-10)


def test_s2_torch(benchmark, torch_1thread):
    benchmark.group = "S2 RK4 n=2"
    _slow(benchmark, "torch eager RK4")
    y0 = s2_state(2)
    v, g = _bench(benchmark, make_torch_rk4(), y0, rounds=3)
    np.testing.assert_allclose(g.numpy(), tapead_rk4(y0)[1], rtol=1e-10)


def test_s2_tapead_jit_replay(benchmark):
    benchmark.group = "S2 RK4 n=2"
    y0 = s2_state(2)
    tapead_jit_rk4(y0)
    v, g = _bench(benchmark, tapead_jit_rk4, y0)
    v_ref, g_ref = tapead_rk4(y0)
    assert v == v_ref
    np.testing.assert_array_equal(g, g_ref)


def test_s2_jax_fori_loop(benchmark, jax_x64):
    benchmark.group = "S2 RK4 n=2"
    y0 = s2_state(2)
    fn, _ = make_jax_fori_rk4()
    v, g = _bench(benchmark, fn, y0)
    np.testing.assert_allclose(g, tapead_rk4(y0)[1], rtol=1e-10)


@pytest.mark.parametrize("n", S2_SIZES)
def test_s2_chain_tapead(benchmark, n):
    benchmark.group = f"S2 RK4 chain n={n}"
    if n > 4:
        _slow(benchmark, "RK4 chains")
    y0 = s2_state(n)
    v, g = _bench(benchmark, tapead_rk4_chain, y0, rounds=3)
    np.testing.assert_allclose(g, central_differences(rk4_chain, y0)[1], rtol=1e-5,
                               atol=1e-9)


@pytest.mark.parametrize("n", S2_SIZES)
def test_s2_chain_central_differences(benchmark, n):
    benchmark.group = f"S2 RK4 chain n={n}"
    _slow(benchmark, "2n + 1 RK4 runs")
    _bench(benchmark, central_differences, rk4_chain, s2_state(n), rounds=3)


# ---- the summary ----------------------------------------------------------------

def main() -> None:                                     # pragma: no cover
    from common import measure, measure_together

    def med(fn, *args, total=1.5):
        return measure(fn, *args, total=total)[1]

    def together(*cases, total=3.0):     # medians, the repeats interleaved
        return [t[1] for t in measure_together(cases, total=total)]

    print("S1: sum(sin(x[i]) * x[i+1]), value and gradient (median seconds; the rows "
          "compared in a ratio are timed interleaved)")
    for n in S1_SIZES:
        x = s1_input(n)
        xl = x.tolist()
        tapead_jit_vg(x)
        tapead_jit_vg_list(xl)
        plain, tp, jit, plain_l, tp_l, jit_l = together(
            (loop_np, (x,)), (tapead_vg, (x,)), (tapead_jit_vg, (x,)),
            (loop_math, (xl,)), (tapead_vg_list, (xl,)), (tapead_jit_vg_list, (xl,)),
            total=3.0 if n <= 1000 else 6.0)
        print(f"  n={n:6d} array: plain {plain:.2e}  tapead {tp:.2e} ({tp / plain:.2f}x, "
              f"target <= 3)  jit {jit:.2e} ({jit / plain:.2f}x; {jit / plain_l:.2f}x the "
              "math loop, target <= 0.3)")
        print(f"  n={n:6d} list:  math  {plain_l:.2e}  tapead {tp_l:.2e} "
              f"({tp_l / plain_l:.2f}x, target <= 3)  jit {jit_l:.2e} "
              f"({jit_l / plain_l:.2f}x, target <= 0.3)")
        peers = []
        if n <= 1000:      # jax.jit of the unrolled loop at n = 10 000 compiles for minutes
            try:
                import jax
                jax.config.update("jax_enable_x64", True)
                peers.append(("jax.jit steady", med(make_jax_jit_s1(x), x)))
            except ImportError:
                pass
            try:
                import torch
                torch.set_num_threads(1)
                peers.append(("torch eager", med(make_torch_s1(), x)))
            except ImportError:
                pass
        for name, t in peers:
            print(f"  n={n:6d} array: {name} {t:.2e}: tapead {t / tp:.2f}x faster, "
                  f"ta.jit {t / jit:.1f}x faster (target >= 30x vs jax.jit)")
    print(f"S2: RK4, {STEPS} steps, gradient of the final theta^2")
    y0 = s2_state(2)
    tapead_jit_rk4(y0)
    plain, tp, rep = together((rk4, (y0,)), (tapead_rk4, (y0,)), (tapead_jit_rk4, (y0,)),
                              total=6.0)
    fd = med(central_differences, rk4, y0, total=3)
    print(f"  pendulum n=2: numpy {plain:.2e}  tapead {tp:.2e} ({tp / plain:.2f}x, "
          f"target <= 4)  central differences {fd:.2e} ({fd / plain:.2f}x)  "
          f"ta.jit replay {rep:.2e} ({rep / plain:.2f}x)")
    try:
        import torch
        torch.set_num_threads(1)
        tt = med(make_torch_rk4(), y0, total=3)
        print(f"  torch eager {tt:.2e}: tapead {tt / tp:.2f}x faster (target >= 5x)")
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jf, compile_s = make_jax_fori_rk4()
        tj = med(jf, y0, total=2)
        print(f"  jax.jit(fori_loop) {tj:.2e} steady (compile {compile_s:.2f} s): ta.jit "
              f"replay {rep / tj:.2f}x it (target <= 3x), tapead {tp / tj:.1f}x it")
    except ImportError:
        pass
    for n in S2_SIZES:
        y0 = s2_state(n)
        plain = med(rk4_chain, y0, total=1)
        tp = med(tapead_rk4_chain, y0, total=2)
        fd = med(central_differences, rk4_chain, y0, total=2)
        print(f"  chain n={n:3d}: numpy {plain:.2e}  tapead {tp:.2e} ({tp / plain:.2f}x)  "
              f"central differences {fd:.2e} ({fd / plain:.2f}x): tapead "
              f"{'faster' if tp < fd else 'SLOWER'}")


if __name__ == "__main__":                             # pragma: no cover
    main()
