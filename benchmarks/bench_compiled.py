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

For each: tapead eager, ``ta.jit`` with the fused replay, ``ta.jit(fuse=False)``,
``jax.jit`` (when installed) and the ratio ``ta.jit / jax.jit``.

Run the table with ``PYTHONPATH=. python benchmarks/bench_compiled.py`` (add
``--quick`` for fewer rows); ``pytest benchmarks/bench_compiled.py
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
@pytest.mark.parametrize("impl", ["eager", "ta.jit", "ta.jit unfused"])
def test_compiled(benchmark, name, impl):
    f, _, args = cases(quick=True)[name]
    benchmark.group = f"compiled: {name}"
    fn = f if impl == "eager" else ta.jit(f, fuse=(impl == "ta.jit"))
    fn(*args)
    got = benchmark(fn, *args)
    want = f(*args)
    for a, b in zip(ta.tree_flatten(got)[0], ta.tree_flatten(want)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def main(quick=False) -> None:                          # pragma: no cover
    print("| case | eager | ta.jit | ta.jit unfused | jax.jit | ta.jit / jax.jit | "
          "first call ta.jit | first call jax.jit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (f, builder, args) in cases(quick).items():
        fused, unfused = ta.jit(f), ta.jit(f, fuse=False)
        jx = _jax_fn(builder)
        first_ta = _first_call(fused, args)
        first_jax = _first_call(jx, args) if jx is not None else None
        unfused(*args)
        row = [(f, args), (fused, args), (unfused, args)]
        if jx is not None:
            row.append((lambda *a: _block(jx(*a)), args))
        times = [t[1] for t in measure_together(row, total=2.0)]
        cell = (lambda t: f"{t * 1e6:.0f} us" if t is not None else "--")
        jt = times[3] if jx is not None else None
        ratio = f"{times[1] / jt:.2f}" if jt else "--"
        print(f"| {name} | {cell(times[0])} | {cell(times[1])} | {cell(times[2])} | "
              f"{cell(jt)} | {ratio} | {cell(first_ta)} | {cell(first_jax)} |")


if __name__ == "__main__":                              # pragma: no cover
    main(quick="--quick" in sys.argv)
