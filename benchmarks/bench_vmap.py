"""Per-example gradients of tanh MLPs, float64: a 10-32-10 MLP at batch 256,
and the terrain example's 2-64-64-1 MLP at batch 64 (squared error per example).

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

then, on the 10-32-10 problem, ``vmap`` of a function with a data-dependent
Python branch (half the lanes each way: the batch splits in two) next to the
same function without the branch, and the peak traced memory (tracemalloc)
of ``vmap`` with and without ``chunk_size``:

* on the MLP, chunking does NOT lower the peak (about 2760 KiB with
  ``chunk_size=16`` against 1710 KiB without): the output, the per-example
  gradients (256 x 682 floats, 1364 KiB), is most of the peak and cannot be
  chunked away, and the chunked run holds the chunks' outputs and their
  concatenation at the same time (twice the output, 2730 KiB), more than
  chunking saves of the rest (about 470 KiB: the tape and temporaries of
  the whole batch);
* where per-lane intermediates dominate, chunking bounds the peak: the
  gradient of a pairwise energy ``sum(exp(-(x_i - x_j)^2))`` of 100 points
  per lane, 256 lanes, makes (lane, 100, 100) temporaries (20 MB each for
  the batch) and the output is only (256, 100); ``chunk_size=16`` holds one
  chunk's temporaries at a time (ratio printed; the test
  ``tests/test_vmap.py::test_chunk_size_bounds_the_memory_of_per_lane_temporaries``
  asserts it on a smaller case).

Targets: <= 1.5x the hand-vectorised numpy, >= 20x faster than tapead's
own loop.  Best of 3 runs, measured under load (2 cores shared with several
jobs, load average about 3), after ``settle_malloc`` (the allocator state of
a long-running process: without it every row measured first ran up to 1.6x
slower), with the C forms of the vmap rules (``_core_batch.pxi``: shape
operations, axis reductions, matmul against a shared matrix, elementwise
padding, the lanes' outer products of a weight cotangent): 10-32-10 at 0.26
ms against 0.20 ms by hand (1.28x; 2.0x before the C forms), 80x faster
than the loop; 2-64-64-1 at 0.37 ms against 0.32 ms (1.15x; 1.9x before),
11x faster than the loop; jax.jit within 0.9-1.4x of tapead's time and
torch.func 2.3-4.8x; the branch taken by half the lanes each way 0.66 ms
against 0.26 ms without it; chunk_size=16: 1.6x MORE peak memory on the
MLP, 15.7x less on the pairwise energy.
"""
from __future__ import annotations

import os
import sys
import time
import tracemalloc

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

#: problem -> (layer widths, batch); the first is the original one
PROBLEMS = {"10-32-10, batch 256": ((10, 32, 10), 256),
            "2-64-64-1, batch 64": ((2, 64, 64, 1), 64)}
SIZES, BATCH = PROBLEMS["10-32-10, batch 256"]


def _layers(p):
    return len(p) // 2


def loss(p, x, y):
    """Squared error of one example through the MLP (tanh hidden layers)."""
    h, L = x, _layers(p)
    for i in range(L):
        h = tnp.dot(h, p[f"W{i}"]) + p[f"b{i}"]
        if i < L - 1:
            h = tnp.tanh(h)
    return tnp.sum((h - y) ** 2)


def branchy(p, x, y):
    """The loss, with a Python branch on the example (its sign picks the loss)."""
    if x[0] > 0:
        return loss(p, x, y)
    return 2.0 * loss(p, x, y)


def by_hand(p, X, Y):
    """The per-example gradients written out for the whole batch."""
    L = _layers(p)
    Hs = [X]                                               # the layers' inputs
    for i in range(L - 1):
        Hs.append(np.tanh(Hs[-1] @ p[f"W{i}"] + p[f"b{i}"]))
    G = 2.0 * (Hs[-1] @ p[f"W{L - 1}"] + p[f"b{L - 1}"] - Y)   # (B, out)
    grads = {}
    for i in range(L - 1, -1, -1):
        grads[f"W{i}"] = Hs[i][:, :, None] * G[:, None, :]
        grads[f"b{i}"] = G
        if i:
            G = (G @ p[f"W{i}"].T) * (1.0 - Hs[i] * Hs[i])
    return grads


def _problem(name="10-32-10, batch 256"):
    sizes, batch = PROBLEMS[name]
    rng = np.random.default_rng(0)
    p = ta.nn.init_mlp(sizes, rng)
    X = rng.normal(size=(batch, sizes[0]))
    Y = rng.normal(size=(batch, sizes[-1]))
    return p, X, Y


def _jax_fn():
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(p, x, y):
        h, L = x, _layers(p)
        for i in range(L):
            h = h @ p[f"W{i}"] + p[f"b{i}"]
            h = jnp.tanh(h) if i < L - 1 else h
        return jnp.sum((h - y) ** 2)
    jf = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
    return lambda p, X, Y: jax.block_until_ready(jf(p, X, Y))


def torch_per_example_grads(torch):
    """``torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))`` on
    numpy in and out (float64)."""
    from torch.func import grad, vmap

    def tloss(p, x, y):
        h, L = x, _layers(p)
        for i in range(L):
            h = h @ p[f"W{i}"] + p[f"b{i}"]
            h = torch.tanh(h) if i < L - 1 else h
        return torch.sum((h - y) ** 2)
    f = vmap(grad(tloss), in_dims=(None, 0, 0))

    def run(p, X, Y):
        out = f({k: torch.from_numpy(v) for k, v in p.items()},
                torch.from_numpy(X), torch.from_numpy(Y))
        return {k: v.numpy() for k, v in out.items()}
    return run


def autograd_loop(autograd):
    """HIPS autograd's per-example gradients: ``autograd.grad`` of the loss in a
    Python loop over the examples (autograd has no vmap)."""
    anp = autograd.numpy

    def aloss(p, x, y):
        h, L = x, _layers(p)
        for i in range(L):
            h = anp.dot(h, p[f"W{i}"]) + p[f"b{i}"]
            if i < L - 1:
                h = anp.tanh(h)
        return anp.sum((h - y) ** 2)
    g = autograd.grad(aloss)

    def run(p, X, Y):
        outs = [g(p, X[i], Y[i]) for i in range(len(X))]
        return {k: np.stack([o[k] for o in outs]) for k in p}
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
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_per_example_gradients(benchmark, problem, name):
    p, X, Y = _problem(problem)
    fn = METHODS[name]()
    out = benchmark(fn, p, X, Y)
    if name != "loop of ta.grad":
        _check(out, p, X, Y)
    else:
        ref = by_hand(p, X, Y)
        for i in (0, len(X) - 1):
            for k in ref:
                np.testing.assert_allclose(out[i][k], ref[k][i], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_per_example_gradients_jax(benchmark, jax_x64, problem):
    p, X, Y = _problem(problem)
    fn = _jax_fn()
    fn(p, X, Y)
    _check(benchmark(fn, p, X, Y), p, X, Y)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_per_example_gradients_torch(benchmark, torch_1thread, problem):
    p, X, Y = _problem(problem)
    fn = torch_per_example_grads(torch_1thread)
    fn(p, X, Y)
    _check(benchmark(fn, p, X, Y), p, X, Y)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_per_example_gradients_autograd(benchmark, problem):
    autograd = pytest.importorskip("autograd")
    p, X, Y = _problem(problem)
    fn = autograd_loop(autograd)
    if benchmark.disabled:
        _check(fn(p, X, Y), p, X, Y)
        return
    _check(benchmark.pedantic(fn, args=(p, X, Y), rounds=3, iterations=1), p, X, Y)


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


def _own_rows(problem):
    """tapead's and numpy's rows (measured before any peer is imported)."""
    p, X, Y = _problem(problem)
    rows = []
    for name, make in METHODS.items():
        fn = make()
        fn(p, X, Y)
        rows.append((name, _best(lambda: fn(p, X, Y), repeat=3 if "loop" in name else 20)))
    return rows


def _peer_rows(problem):
    p, X, Y = _problem(problem)
    rows = []
    try:
        jf = _jax_fn()
        jf(p, X, Y)
        rows.append(("jax.jit(jax.vmap(jax.grad))", _best(lambda: jf(p, X, Y), repeat=20)))
    except ImportError:
        pass
    try:
        import autograd
        af = autograd_loop(autograd)
        _check(af(p, X, Y), p, X, Y)
        rows.append(("autograd, loop of grad", _best(lambda: af(p, X, Y), repeat=3)))
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
    return rows


def _print_table(problem, rows):
    numpy_t = dict(rows)["numpy by hand"]
    ta_t = dict(rows)["ta.vmap(ta.grad)"]
    print(f"per-example gradients, MLP {problem} (measured under load)")
    for name, t in rows:
        print(f"  {name:30s} {t * 1e3:9.3f} ms  {t / numpy_t:6.2f}x numpy  "
              f"{t / ta_t:7.2f}x tapead")


def pair_energy(x):
    """``sum_ij exp(-(x_i - x_j)^2)`` of one lane's points x (m,): (m, m)
    temporaries for an (m,) gradient."""
    d = x[:, None] - x[None, :]
    return tnp.sum(tnp.exp(-d * d))


def _peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def _chunk_rows(name, make, args, chunk):
    full, a = _peak(lambda: make(None)(*args))
    part, b = _peak(lambda: make(chunk)(*args))
    for x, y in zip(ta.tree_util.tree_leaves(a), ta.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(y, x, rtol=1e-15, atol=0)
    print(f"  {name}: peak {full / 1024:.0f} KiB without chunk_size, "
          f"{part / 1024:.0f} KiB with chunk_size={chunk}: {full / part:.2f}x")


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import settle_malloc
    settle_malloc()                  # the same allocator state for every row
    # tapead's and numpy's timings first: importing torch leaves glibc's malloc
    # keeping freed big blocks (no fresh pages for numpy's next temporaries),
    # which made the numpy-heavy rows measured after it up to 1.6x faster
    own = {problem: _own_rows(problem) for problem in PROBLEMS}
    p, X, Y = _problem()
    Xs = X.copy()
    Xs[: BATCH // 2, 0] = np.abs(Xs[: BATCH // 2, 0])
    Xs[BATCH // 2:, 0] = -np.abs(Xs[BATCH // 2:, 0])
    branch_rows = []
    for name, f in (("no branch", loss), ("branch, half each way", branchy)):
        fn = ta.vmap(ta.grad(f), in_axes=(None, 0, 0))
        fn(p, Xs, Y)
        branch_rows.append((name, _best(lambda: fn(p, Xs, Y), repeat=20)))
    for problem in PROBLEMS:
        _print_table(problem, own[problem] + _peer_rows(problem))
    for name, t in branch_rows:
        print(f"vmap(grad) 10-32-10, {name:22s} {t * 1e3:9.3f} ms")
    print("peak traced memory (tracemalloc), unchunked / chunked:")
    _chunk_rows("MLP 10-32-10 per-example gradients, the output dominates",
                lambda c: ta.vmap(ta.grad(loss), in_axes=(None, 0, 0), chunk_size=c),
                (p, X, Y), 16)
    P = np.random.default_rng(1).normal(size=(256, 100))
    _chunk_rows("gradient of a pairwise energy, 256 lanes x 100 points, temporaries dominate",
                lambda c: ta.vmap(ta.grad(pair_energy), chunk_size=c), (P,), 16)


if __name__ == "__main__":
    main()
