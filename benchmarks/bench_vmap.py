"""Per-example gradients of a 10-32-10 tanh MLP, batch 256, float64.

Run the timings (pytest-benchmark; JAX only when importable)::

    python -m pytest benchmarks/bench_vmap.py --benchmark-enable

or print the table::

    PYTHONPATH=. python benchmarks/bench_vmap.py

* ``ta.vmap(ta.grad(loss), in_axes=(None, 0, 0))``: grad's tape records the
  stacked lanes once and sweeps them once,
* a Python loop of ``ta.grad(loss)``,
* hand-vectorised numpy (the backward pass written out for the batch),
* ``jax.jit(jax.vmap(jax.grad(loss)))`` (when jax is importable),
* ``torch.func.vmap(torch.func.grad(loss))``, eager, one thread
  (``torch.set_num_threads(1)``; when torch is importable),

then ``vmap`` of a function with a data-dependent Python branch (half the
lanes each way: the batch splits in two) next to the same function without
the branch, and the peak traced memory (tracemalloc) of ``vmap`` with and
without ``chunk_size``.

Targets: <= 1.5x the hand-vectorised numpy, >= 20x faster than tapead's
own loop.  Measured under load (2 cores shared by several jobs): about 2.5x
numpy and 50x faster than the loop; the figures move with the load.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

SIZES = (10, 32, 10)
BATCH = 256


def loss(p, x, y):
    h = tnp.tanh(tnp.dot(x, p["W0"]) + p["b0"])
    out = tnp.dot(h, p["W1"]) + p["b1"]
    return tnp.sum((out - y) ** 2)


def branchy(p, x, y):
    """The loss, with a Python branch on the example (its sign picks the loss)."""
    if x[0] > 0:
        return loss(p, x, y)
    return 2.0 * loss(p, x, y)


def by_hand(p, X, Y):
    """The per-example gradients written out for the whole batch."""
    H = np.tanh(X @ p["W0"] + p["b0"])
    G = 2.0 * (H @ p["W1"] + p["b1"] - Y)                  # (B, 10)
    GH = (G @ p["W1"].T) * (1.0 - H * H)                   # (B, 32)
    return {"W0": X[:, :, None] * GH[:, None, :], "b0": GH,
            "W1": H[:, :, None] * G[:, None, :], "b1": G}


def _problem():
    rng = np.random.default_rng(0)
    p = ta.nn.init_mlp(SIZES, rng)
    X = rng.normal(size=(BATCH, SIZES[0]))
    Y = rng.normal(size=(BATCH, SIZES[-1]))
    return p, X, Y


def _jax_fn():
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(p, x, y):
        h = jnp.tanh(x @ p["W0"] + p["b0"])
        return jnp.sum((h @ p["W1"] + p["b1"] - y) ** 2)
    jf = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
    return lambda p, X, Y: jax.block_until_ready(jf(p, X, Y))


def torch_per_example_grads(torch):
    """``torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))`` on
    numpy in and out (float64)."""
    from torch.func import grad, vmap

    def tloss(p, x, y):
        h = torch.tanh(x @ p["W0"] + p["b0"])
        return torch.sum((h @ p["W1"] + p["b1"] - y) ** 2)
    f = vmap(grad(tloss), in_dims=(None, 0, 0))

    def run(p, X, Y):
        out = f({k: torch.from_numpy(v) for k, v in p.items()},
                torch.from_numpy(X), torch.from_numpy(Y))
        return {k: v.numpy() for k, v in out.items()}
    return run


def _check(got, p, X, Y):
    ref = by_hand(p, X, Y)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-12, atol=1e-14)


# ---- pytest-benchmark -----------------------------------------------------------

METHODS = {
    "ta.vmap(ta.grad)": lambda: ta.vmap(ta.grad(loss), in_axes=(None, 0, 0)),
    "loop of ta.grad": lambda: (lambda g: lambda p, X, Y: [g(p, X[i], Y[i])
                                                          for i in range(len(X))])(
        ta.grad(loss)),
    "numpy by hand": lambda: by_hand,
}


@pytest.mark.parametrize("name", list(METHODS))
def test_per_example_gradients(benchmark, name):
    p, X, Y = _problem()
    fn = METHODS[name]()
    out = benchmark(fn, p, X, Y)
    if name != "loop of ta.grad":
        _check(out, p, X, Y)


def test_per_example_gradients_jax(benchmark, jax_x64):
    p, X, Y = _problem()
    fn = _jax_fn()
    fn(p, X, Y)
    _check(benchmark(fn, p, X, Y), p, X, Y)


def test_per_example_gradients_torch(benchmark, torch_1thread):
    p, X, Y = _problem()
    fn = torch_per_example_grads(torch_1thread)
    fn(p, X, Y)
    _check(benchmark(fn, p, X, Y), p, X, Y)


@pytest.mark.parametrize("branch", [False, True], ids=["no_branch", "half_each_way"])
def test_vmap_with_a_data_dependent_branch(benchmark, branch):
    p, X, Y = _problem()
    X[: BATCH // 2, 0] = np.abs(X[: BATCH // 2, 0])
    X[BATCH // 2:, 0] = -np.abs(X[BATCH // 2:, 0])
    fn = ta.vmap(ta.grad(branchy if branch else loss), in_axes=(None, 0, 0))
    out = benchmark(fn, p, X, Y)
    ref = by_hand(p, X, Y)
    scale = np.where(X[:, 0] > 0, 1.0, 2.0) if branch else np.ones(BATCH)
    np.testing.assert_allclose(out["b1"], ref["b1"] * scale[:, None], rtol=1e-12)


# ---- the printed table ------------------------------------------------------------

def _best(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    p, X, Y = _problem()
    rows = []
    for name, make in METHODS.items():
        fn = make()
        fn(p, X, Y)
        rows.append((name, _best(lambda: fn(p, X, Y), repeat=3 if "loop" in name else 20)))
    try:
        jf = _jax_fn()
        jf(p, X, Y)
        rows.append(("jax.jit(jax.vmap(jax.grad))", _best(lambda: jf(p, X, Y), repeat=20)))
    except ImportError:
        pass
    try:
        import torch
        torch.set_num_threads(1)
        tf = torch_per_example_grads(torch)
        _check(tf(p, X, Y), p, X, Y)
        rows.append(("torch.func.vmap(grad), 1 thread", _best(lambda: tf(p, X, Y), repeat=20)))
    except ImportError:
        pass
    numpy_t = dict(rows)["numpy by hand"]
    for name, t in rows:
        print(f"{name:30s} {t * 1e3:9.3f} ms  {t / numpy_t:6.2f}x numpy")
    Xs = X.copy()
    Xs[: BATCH // 2, 0] = np.abs(Xs[: BATCH // 2, 0])
    Xs[BATCH // 2:, 0] = -np.abs(Xs[BATCH // 2:, 0])
    for name, f in (("no branch", loss), ("branch, half each way", branchy)):
        fn = ta.vmap(ta.grad(f), in_axes=(None, 0, 0))
        fn(p, Xs, Y)
        print(f"vmap(grad), {name:22s} {_best(lambda: fn(p, Xs, Y), repeat=20) * 1e3:9.3f} ms")
    for chunk in (None, 16):
        f = ta.vmap(ta.grad(loss), in_axes=(None, 0, 0), chunk_size=chunk)
        tracemalloc.start()
        f(p, X, Y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"peak traced memory, chunk_size={chunk}: {peak / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
