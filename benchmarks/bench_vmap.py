"""Per-example gradients of a 10-32-10 tanh MLP, batch 256, float64.

Prints the time of one batch of per-example gradients, four ways::

    PYTHONPATH=. python benchmarks/bench_vmap.py

* ``ta.vmap(ta.grad(loss), in_axes=(None, 0, 0))``,
* a Python loop of ``ta.grad(loss)``,
* hand-vectorised numpy (the backward pass written out for the batch),
* ``jax.jit(jax.vmap(jax.grad(loss)))`` (when jax is importable),
* ``torch.func.vmap(torch.func.grad(loss))``, eager, one thread
  (``torch.set_num_threads(1)``; when torch is importable).

and the peak traced memory (tracemalloc) of ``vmap`` with and without
``chunk_size``.  ``ta.vmap`` calls the function once per example, so it
costs what the loop costs; the figures depend on the machine's load.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np

import tapead as ta
import tapead.numpy as tnp

SIZES = (10, 32, 10)
BATCH = 256


def loss(p, x, y):
    h = tnp.tanh(tnp.dot(x, p["W0"]) + p["b0"])
    out = tnp.dot(h, p["W1"]) + p["b1"]
    return tnp.sum((out - y) ** 2)


def by_hand(p, X, Y):
    """The per-example gradients written out for the whole batch."""
    H = np.tanh(X @ p["W0"] + p["b0"])
    G = 2.0 * (H @ p["W1"] + p["b1"] - Y)                  # (B, 10)
    GH = (G @ p["W1"].T) * (1.0 - H * H)                   # (B, 32)
    return {"W0": X[:, :, None] * GH[:, None, :], "b0": GH,
            "W1": H[:, :, None] * G[:, None, :], "b1": G}


def _best(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


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


def main():
    rng = np.random.default_rng(0)
    p = ta.nn.init_mlp(SIZES, rng)
    X = rng.normal(size=(BATCH, SIZES[0]))
    Y = rng.normal(size=(BATCH, SIZES[-1]))
    g = ta.grad(loss)
    vm = ta.vmap(g, in_axes=(None, 0, 0))
    ref = by_hand(p, X, Y)
    got = vm(p, X, Y)
    for k in ref:
        assert np.allclose(got[k], ref[k], rtol=1e-12, atol=1e-14), k
    rows = [("ta.vmap(ta.grad)", _best(lambda: vm(p, X, Y))),
            ("loop of ta.grad", _best(lambda: [g(p, X[i], Y[i]) for i in range(BATCH)])),
            ("numpy by hand", _best(lambda: by_hand(p, X, Y), repeat=20))]
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy

        def jloss(p, x, y):
            h = jnp.tanh(x @ p["W0"] + p["b0"])
            return jnp.sum((h @ p["W1"] + p["b1"] - y) ** 2)
        jf = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
        jax.block_until_ready(jf(p, X, Y))
        rows.append(("jax.jit(jax.vmap(jax.grad))",
                     _best(lambda: jax.block_until_ready(jf(p, X, Y)), repeat=20)))
    except ImportError:
        pass
    try:
        import torch
        torch.set_num_threads(1)
        tf = torch_per_example_grads(torch)
        got = tf(p, X, Y)
        for k in ref:
            assert np.allclose(got[k], ref[k], rtol=1e-12, atol=1e-14), k
        rows.append(("torch.func.vmap(grad), 1 thread",
                     _best(lambda: tf(p, X, Y), repeat=20)))
    except ImportError:
        pass
    for name, t in rows:
        print(f"{name:30s} {t * 1e3:9.3f} ms")
    for chunk in (None, 16):
        f = ta.vmap(g, in_axes=(None, 0, 0), chunk_size=chunk)
        tracemalloc.start()
        f(p, X, Y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"peak traced memory, chunk_size={chunk}: {peak / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
