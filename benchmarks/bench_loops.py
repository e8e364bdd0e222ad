"""Benchmarks of differentiated loops (pytest-benchmark).

L1  A double-integrator rollout over T = 10**2, 10**3, 10**4 steps: carry
    (position, velocity), one control u_t per step, cost
    (p_T - 1)**2 + v_T**2 + 1e-3 * sum(u_t**2).  The gradient with respect
    to the controls by
    * ``plain``: the rollout on Python floats with its hand-written adjoint
      (the floor: no autodiff at all),
    * ``scan``: ``ta.grad`` of ``ta.scan`` (every step recorded),
    * ``scan-ck``: ``ta.scan(checkpoints=10)`` (revolve),
    * ``jax``: ``jax.jit(jax.grad(...lax.scan...))`` after compilation, when
      JAX is installed,
    * ``torch``: the rollout as a Python loop on 0-d float64 tensors, then
      ``backward()`` (PyTorch eager, ``torch.set_num_threads(1)``), when
      torch is installed.
L2  A fixed-point iteration x <- cos(a x) run by ``ta.while_loop`` until
    converged (about 60 steps, trip count unknown in advance), its gradient
    with respect to ``a``: every step stored vs ``checkpoints=4`` (online).

Run the timings::

    python -m pytest benchmarks/bench_loops.py --benchmark-enable

Run them as quick tests (each case once, results checked)::

    python -m pytest benchmarks/bench_loops.py

Print the table::

    python benchmarks/bench_loops.py

No test asserts a wall-clock time.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

try:                                   # run as a script or as a module
    from benchmarks.common import cpu_name, measure
except ImportError:                    # pragma: no cover
    from common import cpu_name, measure

DT = 0.01
LENGTHS = [100, 1000, 10_000]


def plain_gradient(us):
    """The rollout and its adjoint on Python floats."""
    p = v = 0.0
    for u in us.tolist():
        v = v + DT * u
        p = p + DT * v
    ap, av = 2.0 * (p - 1.0), 2.0 * v
    out = [0.0] * len(us)
    for i in range(len(us) - 1, -1, -1):
        av = av + DT * ap
        out[i] = DT * av + 2e-3 * us[i]
    return np.array(out)


def step(c, u):
    p, v = c
    v2 = v + DT * u
    return (p + DT * v2, v2), u * u


def loss(us, checkpoints=None):
    (p, v), costs = ta.scan(step, (0.0, 0.0), us, checkpoints=checkpoints)
    return (p - 1.0) ** 2 + v ** 2 + 1e-3 * tnp.sum(costs)


def scan_gradient(us):
    return ta.grad(loss)(us)


def scan_ck_gradient(us):
    return ta.grad(lambda u: loss(u, 10))(us)


def jax_gradient_fn(jax):
    import jax.numpy as jnp

    def jstep(c, u):
        p, v = c
        v2 = v + DT * u
        return (p + DT * v2, v2), u * u

    def jloss(us):
        (p, v), costs = jax.lax.scan(jstep, (0.0, 0.0), us)
        return (p - 1.0) ** 2 + v ** 2 + 1e-3 * jnp.sum(costs)
    g = jax.jit(jax.grad(jloss))
    return lambda us: np.asarray(g(us).block_until_ready())


def torch_gradient_fn(torch):
    """The rollout on 0-d float64 torch tensors, a Python loop (torch has no scan)."""
    def gradient(us):
        u = torch.from_numpy(us).requires_grad_()
        p = v = torch.zeros((), dtype=torch.float64)
        cost = torch.zeros((), dtype=torch.float64)
        for ut in u.unbind():
            v = v + DT * ut
            p = p + DT * v
            cost = cost + ut * ut
        ((p - 1.0) ** 2 + v ** 2 + 1e-3 * cost).backward()
        return u.grad.numpy()
    return gradient


ROLLOUT = {"plain": plain_gradient, "scan": scan_gradient, "scan-ck": scan_ck_gradient}


@pytest.mark.parametrize("T", LENGTHS)
@pytest.mark.parametrize("method", sorted(ROLLOUT))
def test_rollout_gradient(benchmark, method, T):
    us = np.sin(np.linspace(0.0, 6.0, T))
    g = benchmark(ROLLOUT[method], us)
    np.testing.assert_allclose(g, plain_gradient(us), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("T", LENGTHS)
def test_rollout_gradient_jax(benchmark, jax_x64, T):
    us = np.sin(np.linspace(0.0, 6.0, T))
    fn = jax_gradient_fn(jax_x64)
    fn(us)                             # compile outside the timing
    g = benchmark(fn, us)
    np.testing.assert_allclose(g, plain_gradient(us), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("T", LENGTHS)
def test_rollout_gradient_torch(benchmark, torch_1thread, T):
    us = np.sin(np.linspace(0.0, 6.0, T))
    g = benchmark(torch_gradient_fn(torch_1thread), us)
    np.testing.assert_allclose(g, plain_gradient(us), rtol=1e-12, atol=1e-15)


def fixed_point_iteration(a, checkpoints=None):
    def body(c):
        x, prev, a = c
        return tnp.cos(a * x), x, a
    x, _, _ = ta.while_loop(lambda c: abs(c[0] - c[1]) > 1e-13, body, (0.5, 10.0, a),
                            checkpoints=checkpoints)
    return x


WHILE = {"stored": None, "online-4": 4}


@pytest.mark.parametrize("case", sorted(WHILE))
def test_while_loop_gradient(benchmark, case):
    ck = WHILE[case]
    g = benchmark(ta.grad(lambda a: fixed_point_iteration(a, ck)), 0.9)
    assert g == ta.grad(fixed_point_iteration)(0.9)


def main() -> None:
    print(f"CPU: {cpu_name()}; min of repeated runs, seconds per gradient")
    rows = dict(ROLLOUT)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        fn = jax_gradient_fn(jax)
        rows["jax.jit(grad(scan))"] = fn
    except ImportError:
        pass
    try:
        import torch
        torch.set_num_threads(1)
        rows["torch eager, 1 thread"] = torch_gradient_fn(torch)
    except ImportError:
        pass
    print(f"{'method':22}" + "".join(f"{'T=' + str(T):>12}" for T in LENGTHS))
    base = {}
    for name, fn in rows.items():
        cells = []
        for T in LENGTHS:
            us = np.sin(np.linspace(0.0, 6.0, T))
            fn(us)
            best, _ = measure(fn, us)
            if name == "plain":
                base[T] = best
            cells.append(f"{best * 1e3:8.2f} ms ({best / base[T]:.2g}x)"
                         if name != "plain" else f"{best * 1e3:8.2f} ms")
        print(f"{name:22}" + "".join(f"{c:>22}" for c in cells))
    for case, ck in WHILE.items():
        best, _ = measure(ta.grad(lambda a: fixed_point_iteration(a, ck)), 0.9)
        print(f"while_loop {case:11} {best * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
