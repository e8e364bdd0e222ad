"""``ta.jit`` of derivative programs against ``jax.jit`` on array and loop code:
steady time and first call (record + plan, against trace + compile).

Rows (float64, one process, the cases of each row timed interleaved):

* ``B2 grad n``: value and gradient of ``sum(sin(x[:-1]) * x[1:])``;
* ``HVP n``: Hessian-vector product of ``sum(sin(x[:-1]) * x[1:]) + sum(x**4)``
  (forward over reverse);
* ``MLP step``: value and gradient of the terrain MLP 2-64-64-1 (tanh, batch 64);
* ``per-example``: ``vmap(grad)`` of a 10-32-10 MLP loss over a batch of 256;
* ``B1 list``: value and gradient of the ``x[i]`` loop
  ``sum(sin(x[i]) * x[i + 1])`` on a list of 1000 floats.

For each: tapead eager, ``ta.jit`` with native kernels (compiled after the
first call, as the background compilation would), ``ta.jit(native=False)``
(fused groups on numpy's loops), ``ta.jit(fuse=False)``, ``jax.jit`` (when
installed) and the ratio ``ta.jit / jax.jit``; the first call (record + plan,
against JAX's trace + compile) and the native compile time, which runs in the
background after the first replays (the kernels are compiled into a fresh
cache directory, so it is the compiler's time, not a cache hit).

Run the table with ``PYTHONPATH=. python benchmarks/bench_compiled.py`` (add
``--quick`` for fewer rows, ``--only scan,RK4`` for the rows whose names
contain those words); ``pytest benchmarks/bench_compiled.py
--benchmark-enable`` times the same cases with pytest-benchmark; without it the
tests check the values only.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

try:
    from common import measure_together
except ImportError:                                     # pragma: no cover
    from benchmarks.common import measure_together


def b2(m):
    return lambda x: m.sum(m.sin(x[:-1]) * x[1:])


def hvp_f(m):
    return lambda x: m.sum(m.sin(x[:-1]) * x[1:]) + m.sum(x ** 4)


def mlp_loss(m):
    def loss(p, X, Y):
        h = m.tanh(X @ p["W1"] + p["b1"])
        h = m.tanh(h @ p["W2"] + p["b2"])
        return m.mean((h @ p["W3"] + p["b3"] - Y) ** 2)
    return loss


def small_mlp_loss(m):
    def loss(p, x, y):
        h = m.tanh(x @ p["W1"] + p["b1"])
        return m.sum((h @ p["W2"] + p["b2"] - y) ** 2)
    return loss


def b1_list(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + tnp.sin(x[i]) * x[i + 1]
    return s


DT, H, STEPS = 0.01, 0.01, 1000


def rollout_loss(scan, m, checkpoints=None):
    """The double-integrator rollout's cost through ``scan`` (``ta.scan`` or
    ``lax.scan``), a function of the controls."""
    def step(c, u):
        p, v = c
        v2 = v + DT * u
        return (p + DT * v2, v2), u * u

    def loss(us):
        kw = {} if checkpoints is None else {"checkpoints": checkpoints}
        (p, v), costs = scan(step, (0.0, 0.0), us, **kw)
        return (p - 1.0) ** 2 + v ** 2 + 1e-3 * m.sum(costs)
    return loss


def chain_loss(fori_loop, m, n=20000):
    """x -> sin(sin(...sin(x))) with ``n`` links."""
    return lambda x: fori_loop(0, n, lambda i, y: m.sin(y), x)


def rk4_array(fori_loop, m):
    """RK4 of a damped pendulum (a 2-element array state), STEPS steps."""
    def f(y):
        return m.stack([y[1], -0.1 * y[1] - m.sin(y[0])])

    def step(_, y):
        k1 = f(y)
        k2 = f(y + H / 2 * k1)
        k3 = f(y + H / 2 * k2)
        k4 = f(y + H * k3)
        return y + H / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return lambda y0: fori_loop(0, STEPS, step, y0)[0] ** 2


def rk4_floats(th, om):
    """The same RK4 written on two Python floats, a Python loop."""
    def f(th, om):
        return om, -0.1 * om - tnp.sin(th)
    for _ in range(STEPS):
        a1, b1 = f(th, om)
        a2, b2_ = f(th + H / 2 * a1, om + H / 2 * b1)
        a3, b3 = f(th + H / 2 * a2, om + H / 2 * b2_)
        a4, b4 = f(th + H * a3, om + H * b3)
        th = th + H / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        om = om + H / 6 * (b1 + 2 * b2_ + 2 * b3 + b4)
    return th ** 2


def _params(sizes, seed):
    rng = np.random.default_rng(seed)
    p = {}
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        p[f"W{k}"] = rng.normal(size=(a, b)) / np.sqrt(a)
        p[f"b{k}"] = np.zeros(b)
    return p


def cases(quick=False):
    """name -> (tapead function, jax builder or None, args)."""
    rng = np.random.default_rng(0)
    out = {}
    for n in ((1000, 100000) if quick else (1000, 100000, 1000000)):
        x = rng.uniform(-1.0, 1.0, n)
        out[f"B2 grad n={n}"] = (ta.value_and_grad(b2(tnp)),
                                 lambda jax, jnp: jax.value_and_grad(b2(jnp)), (x,))
    for n in (1000, 100000):
        x, v = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
        out[f"HVP n={n}"] = (
            lambda x, v: ta.hvp(hvp_f(tnp), (x,), (v,)),
            lambda jax, jnp: (lambda x, v: jax.jvp(jax.grad(hvp_f(jnp)), (x,), (v,))[1]),
            (x, v))
    P = _params([2, 64, 64, 1], 1)
    X, Y = rng.uniform(-1, 1, (64, 2)), rng.normal(size=(64, 1))
    out["MLP step b=64"] = (ta.value_and_grad(mlp_loss(tnp)),
                            lambda jax, jnp: jax.value_and_grad(mlp_loss(jnp)), (P, X, Y))
    Q = _params([10, 32, 10], 2)
    Xs, Ys = rng.normal(size=(256, 10)), rng.normal(size=(256, 10))
    out["per-example b=256"] = (
        ta.vmap(ta.grad(small_mlp_loss(tnp)), in_axes=(None, 0, 0)),
        lambda jax, jnp: jax.vmap(jax.grad(small_mlp_loss(jnp)), in_axes=(None, 0, 0)),
        (Q, Xs, Ys))
    if not quick:
        xs = rng.uniform(-1.0, 1.0, 1000).tolist()
        out["B1 list n=1000"] = (ta.value_and_grad(b1_list), None, (xs,))
        us = np.sin(np.linspace(0.0, 6.0, 10000))
        out["scan rollout T=1e4"] = (
            ta.grad(rollout_loss(ta.scan, tnp)),
            lambda jax, jnp: jax.grad(rollout_loss(jax.lax.scan, jnp)), (us,))
        out["scan checkpoints=10 T=1e4"] = (
            ta.grad(rollout_loss(ta.scan, tnp, checkpoints=10)),
            lambda jax, jnp: jax.grad(rollout_loss(jax.lax.scan, jnp)), (us,))
        out["fori chain 20000"] = (
            ta.grad(chain_loss(ta.fori_loop, tnp)),
            lambda jax, jnp: jax.grad(chain_loss(jax.lax.fori_loop, jnp)), (0.7,))
        y0 = np.array([0.3, -0.5])
        out["RK4 array 1000 steps"] = (
            ta.value_and_grad(rk4_array(ta.fori_loop, tnp)),
            lambda jax, jnp: jax.value_and_grad(rk4_array(jax.lax.fori_loop, jnp)), (y0,))
        out["RK4 floats 1000 steps"] = (
            ta.value_and_grad(rk4_floats, argnums=(0, 1)),
            lambda jax, jnp: jax.value_and_grad(
                lambda a, b: rk4_array(jax.lax.fori_loop, jnp)(jnp.stack([a, b])),
                argnums=(0, 1)), (0.3, -0.5))
    return out


def _jax_fn(builder):
    if builder is None:
        return None
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax.jit(builder(jax, jnp))


def _block(out):
    for leaf in ta.tree_flatten(out)[0]:
        getattr(leaf, "block_until_ready", lambda: None)()
    return out


def _first_call(fn, args):
    t0 = time.perf_counter()
    _block(fn(*args))
    return time.perf_counter() - t0


@pytest.mark.parametrize("name", list(cases(quick=True)))
@pytest.mark.parametrize("impl", ["eager", "ta.jit", "ta.jit numpy loops", "ta.jit unfused"])
def test_compiled(benchmark, name, impl):
    f, _, args = cases(quick=True)[name]
    benchmark.group = f"compiled: {name}"
    fn = f if impl == "eager" else ta.jit(f, fuse=(impl != "ta.jit unfused"),
                                          native=(impl == "ta.jit"))
    fn(*args)
    if impl == "ta.jit":
        fn.compile(*args)
    got = benchmark(fn, *args)
    want = f(*args)
    for a, b in zip(ta.tree_flatten(got)[0], ta.tree_flatten(want)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def main(quick=False, only=None) -> None:               # pragma: no cover
    import os
    import tempfile
    os.environ["TAPEAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="tapead-bench-")
    print("| case | eager | ta.jit | ta.jit numpy loops | ta.jit unfused | jax.jit | "
          "ta.jit / jax.jit | first call ta.jit | native compile (background) | "
          "first call jax.jit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (f, builder, args) in cases(quick).items():
        if only and not any(o in name for o in only):
            continue
        fused, loops, unfused = ta.jit(f), ta.jit(f, native=False), ta.jit(f, fuse=False)
        jx = _jax_fn(builder)
        first_ta = _first_call(fused, args)
        first_jax = _first_call(jx, args) if jx is not None else None
        info = fused.compile(*args)
        compile_s = (info.compile_seconds if info is not None and info.is_native
                     else None)
        loops(*args), unfused(*args)
        row = [(f, args), (fused, args), (loops, args), (unfused, args)]
        if jx is not None:
            row.append((lambda *a: _block(jx(*a)), args))
        times = [t[1] for t in measure_together(row, total=2.0)]
        cell = (lambda t: f"{t * 1e6:.0f} us" if t is not None else "--")
        jt = times[4] if jx is not None else None
        ratio = f"{times[1] / jt:.2f}" if jt else "--"
        print(f"| {name} | {cell(times[0])} | {cell(times[1])} | {cell(times[2])} | "
              f"{cell(times[3])} | {cell(jt)} | {ratio} | {cell(first_ta)} | "
              f"{cell(compile_s)} | {cell(first_jax)} |")


if __name__ == "__main__":                              # pragma: no cover
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    main(quick="--quick" in sys.argv, only=only)
