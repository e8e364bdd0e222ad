"""Benchmarks of training loops and checkpointed loops (pytest-benchmark).

T1  Seed 004's terrain MLP (2 -> 64 -> 64 -> 1, tanh, float64, batch 64,
    SGD lr = 0.1, 6 000 training points): ``tapead.examples.terrain.train``
    against the same training with backpropagation written out in numpy
    (``terrain.train_numpy_by_hand``), autograd (``value_and_grad`` of the
    loss in ``autograd.numpy``), JAX (``jax.jit`` of a whole SGD step,
    called from a Python loop, x64) and PyTorch eager float64 (manual SGD
    under ``torch.no_grad``, one thread and the default thread count).
    Every trainer starts from tapead's initial weights and draws the same
    batch order from the same generator, so all of them follow the same
    trajectory (the parameters agree to rounding).
R2  Revolve in a loop: the gradient with respect to ``(x0, p)`` of a
    10 000-step rollout ``x_{i+1} = x_i + h sin(p x_i)`` (carry ``(x, p)``)
    by ``ta.scan(step, carry, xs=None, length=L, checkpoints=s)`` for
    s = 10, 20, 50 and ``checkpoints=None`` (every step on the tape); and
    the same with a state of 1 000 float64 and L = 2 000, where memory
    matters.  Every checkpointed gradient is checked against the stored one.

Run the timings::

    python -m pytest benchmarks/bench_training.py --benchmark-enable

Run them as quick tests (the default ``--benchmark-disable``: each case
runs once on a tiny budget -- 10 SGD steps, short rollouts -- and its
result is checked)::

    python -m pytest benchmarks/bench_training.py

One SGD step of T1 (``value_and_grad`` of the loss, batch 64, and the
update), measured 2026-12-01 under load (2 shared cores, load average about 3,
other jobs running; minimum over 12 interleaved one-epoch runs, three times):
98-101 us against 92-96 us for the backpropagation written out in numpy,
1.05-1.06x (the same day before the changes below: 111-114 us, 1.17-1.20x).
About 4 us of the gain is the update, ``ta.optim.sgd_inplace`` (one C pass per
array instead of ``params[k] -= lr * g[k]``, which the numpy trainer keeps);
the rest is recording (no list or attribute lookups for the shapes add and
tanh keep, no float checks for array nodes) and the sweep (a bias's cotangent
summed over the batch in one C pass).  Parameters and test RMSE are those of
before bit for bit.  ``benchmarks/report_training.py`` prints the full tables (60 epochs) with
ratios against the targets.  The peers are optional (skipped when not
importable).  No test asserts a wall-clock time or a memory figure.
"""
from __future__ import annotations

import functools
import math
import time
import tracemalloc
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.nn import init_mlp

SIZES = (2, 64, 64, 1)
BATCH = 64
LR = 0.1
N_TRAIN = 6000
EPOCHS = 60                 # the report's full run
EPOCHS_BENCH = 3            # per round under --benchmark-enable
N_TRAIN_QUICK = 10 * BATCH  # the quick test: 10 SGD steps of one epoch

Params = Dict[str, np.ndarray]
Result = Tuple[Params, Tuple[float, float], np.ndarray]   # params, (mu, sd), loss curve


# ---- terrain data and the shared start -----------------------------------------

@functools.lru_cache(maxsize=None)
def terrain_data():
    """``(X_train, y_train, X_test, y_test)`` of seed 004 (needs matplotlib)."""
    from tapead.examples import terrain
    X, y, Xt, yt, _ = terrain.load_terrain()
    return X, y, Xt, yt


def _start(y, seed: int):
    """tapead's start: the generator (already past the init draws), the
    initial weights, the target scale and the standardised targets."""
    rng = np.random.default_rng(seed)
    params = init_mlp(SIZES, rng)
    mu, sd = float(y.mean()), float(y.std())
    return rng, params, (mu, sd), (y - mu) / sd


def _batches(rng, n: int):
    """One epoch's batch index arrays, drawn exactly as ``terrain.train`` does."""
    perm = rng.permutation(n)
    return [perm[s:s + BATCH] for s in range(0, n, BATCH)]


def n_steps(n: int, epochs: int) -> int:
    return epochs * math.ceil(n / BATCH)


# ---- the trainers: (X, y, epochs, lr, seed) -> (params, scale, curve) ------------

def train_tapead(X, y, epochs: int = EPOCHS, lr: float = LR, seed: int = 0) -> Result:
    from tapead.examples import terrain
    return terrain.train(X, y, epochs=epochs, lr=lr, seed=seed, progress=False)


def train_tapead_numpy_update(X, y, epochs: int = EPOCHS, lr: float = LR,
                              seed: int = 0) -> Result:
    """tapead's gradients with the numpy trainer's update (the gradients alone compared)."""
    from tapead.examples import terrain
    return terrain.train(X, y, epochs=epochs, lr=lr, seed=seed, progress=False,
                         inplace_update=False)


def train_numpy(X, y, epochs: int = EPOCHS, lr: float = LR, seed: int = 0) -> Result:
    from tapead.examples import terrain
    return terrain.train_numpy_by_hand(X, y, epochs=epochs, lr=lr, seed=seed)


def train_autograd(X, y, epochs: int = EPOCHS, lr: float = LR, seed: int = 0) -> Result:
    """``autograd.value_and_grad`` of the loss in ``autograd.numpy``, over a dict."""
    import autograd
    import autograd.numpy as anp

    def loss(p, x, t):
        h = anp.tanh(anp.dot(x, p["W0"]) + p["b0"])
        h = anp.tanh(anp.dot(h, p["W1"]) + p["b1"])
        d = anp.dot(h, p["W2"]) + p["b2"] - t
        return anp.mean(d * d)
    vg = autograd.value_and_grad(loss)
    rng, params, scale, t = _start(y, seed)
    curve = []
    for _ in range(epochs):
        total = 0.0
        for b in _batches(rng, len(X)):
            value, g = vg(params, X[b], t[b])
            for k in params:
                params[k] = params[k] - lr * g[k]
            total += float(value) * len(b)
        curve.append(total / len(X))
    return params, scale, np.array(curve)


@functools.lru_cache(maxsize=None)
def jax_sgd_step(lr: float):
    """``jax.jit`` of one whole SGD step ``(params, x, t) -> (params, loss)``."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def loss(p, x, t):
        h = jnp.tanh(x @ p["W0"] + p["b0"])
        h = jnp.tanh(h @ p["W1"] + p["b1"])
        d = h @ p["W2"] + p["b2"] - t
        return jnp.mean(d * d)

    def step(p, x, t):
        value, g = jax.value_and_grad(loss)(p, x, t)
        return jax.tree_util.tree_map(lambda w, gw: w - lr * gw, p, g), value
    return jax.jit(step)


def train_jax(X, y, epochs: int = EPOCHS, lr: float = LR, seed: int = 0) -> Result:
    """The jitted step in a Python loop (compiled on the first call per batch
    shape; the jitted function is cached, so later runs do not compile)."""
    import jax
    step = jax_sgd_step(lr)
    rng, params, scale, t = _start(y, seed)
    p = {k: jax.numpy.asarray(v) for k, v in params.items()}
    curve = []
    for _ in range(epochs):
        total = 0.0
        for b in _batches(rng, len(X)):
            p, value = step(p, X[b], t[b])
            total += float(value) * len(b)
        curve.append(total / len(X))
    return {k: np.asarray(v) for k, v in p.items()}, scale, np.array(curve)


def jax_compile_seconds(lr: float = LR) -> float:
    """Seconds to compile the SGD step for both batch shapes (64 and 48 rows);
    zero when they are already compiled."""
    import jax
    step = jax_sgd_step(lr)
    p = {k: jax.numpy.asarray(v) for k, v in init_mlp(SIZES, np.random.default_rng(0)).items()}
    start = time.perf_counter()
    for rows in (BATCH, N_TRAIN % BATCH or BATCH):
        jax.block_until_ready(step(p, np.zeros((rows, SIZES[0])), np.zeros((rows, 1))))
    return time.perf_counter() - start


def train_torch(X, y, epochs: int = EPOCHS, lr: float = LR, seed: int = 0,
                threads: Optional[int] = None) -> Result:
    """PyTorch eager float64: ``loss.backward()`` then SGD under ``no_grad``.
    ``threads`` sets ``torch.set_num_threads`` for the run (None: default)."""
    import torch
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        rng, params, scale, t = _start(y, seed)
        p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
             for k, v in params.items()}
        curve = []
        for _ in range(epochs):
            total = 0.0
            for b in _batches(rng, len(X)):
                x, tt = torch.from_numpy(X[b]), torch.from_numpy(t[b])
                h = torch.tanh(x @ p["W0"] + p["b0"])
                h = torch.tanh(h @ p["W1"] + p["b1"])
                d = h @ p["W2"] + p["b2"] - tt
                value = torch.mean(d * d)
                value.backward()
                with torch.no_grad():
                    for w in p.values():
                        w -= lr * w.grad
                        w.grad = None
                total += float(value.detach()) * len(b)
            curve.append(total / len(X))
        return {k: v.detach().numpy().copy() for k, v in p.items()}, scale, np.array(curve)
    finally:
        torch.set_num_threads(before)


def default_torch_threads() -> int:
    import torch
    return torch.get_num_threads()


#: name -> (peer module to import or None, trainer)
TRAINERS: Dict[str, Tuple[Optional[str], Callable[..., Result]]] = {
    "tapead": (None, train_tapead),
    "tapead, numpy's update": (None, train_tapead_numpy_update),
    "numpy by hand": (None, train_numpy),
    "autograd": ("autograd", train_autograd),
    "jax.jit step": ("jax", train_jax),
    "torch eager, 1 thread": ("torch", functools.partial(train_torch, threads=1)),
    "torch eager, default threads": ("torch", functools.partial(train_torch, threads=None)),
}


def terrain_test_rmse(result: Result) -> float:
    """Test RMSE in metres of a trained model (numpy forward pass)."""
    from tapead.examples import terrain
    params, scale, _ = result
    _, _, Xt, yt = terrain_data()
    return terrain.rmse(terrain.predict(params, scale, Xt), yt)


def max_param_diff(a: Params, b: Params) -> float:
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


# ---- R2: the rollout -------------------------------------------------------------

H = 1e-3
P0 = 1.3
ROLLOUTS = {                      # name -> (L for the report, L for the quick test)
    "scalar": (10_000, 500),
    "array": (2_000, 100),
}
CHECKPOINTS = [None, 10, 20, 50]


def rollout_x0(problem: str):
    """x0: a Python float, or 1 000 float64 (not symmetric about 0, so no
    component's gradient cancels another's)."""
    return 0.5 if problem == "scalar" else np.linspace(0.1, 3.0, 1000)


def make_rollout(problem: str, length: int, checkpoints: Optional[int],
                 counter: Optional[list] = None) -> Callable:
    """``f(x0, p)``: the scalar x_L (or sum of x_L) after ``length`` steps.
    ``counter`` (a one-element list) counts calls of the step body."""
    def step(carry, _):
        if counter is not None:
            counter[0] += 1
        x, p = carry
        return (x + H * tnp.sin(p * x), p), None

    def f(x0, p):
        (x, _), _ = ta.scan(step, (x0, p), xs=None, length=length, checkpoints=checkpoints)
        return x if problem == "scalar" else tnp.sum(x)
    return f


def rollout_value_and_grad(problem: str, length: int, checkpoints: Optional[int],
                           counter: Optional[list] = None) -> Callable:
    return ta.value_and_grad(make_rollout(problem, length, checkpoints, counter),
                             argnums=(0, 1))


def rollout_reference(problem: str, length: int):
    """Value and gradients by the same recurrence with the chain rule written
    out in numpy (forward and tangent-free adjoint sweep over stored states)."""
    x = np.asarray(rollout_x0(problem), dtype=np.float64)
    xs = [x]
    for _ in range(length):
        x = x + H * np.sin(P0 * x)
        xs.append(x)
    gx, gp = np.ones_like(x), 0.0
    for x in reversed(xs[:-1]):
        c = H * np.cos(P0 * x)
        gp += float(np.sum(gx * c * x))
        gx = gx * (1.0 + c * P0)
    value = float(xs[-1]) if problem == "scalar" else float(np.sum(xs[-1]))
    return value, (float(gx) if problem == "scalar" else gx), gp


def peak_traced_bytes(fn: Callable, *args) -> int:
    """tracemalloc's peak during ``fn(*args)`` (numpy arrays and Python
    objects; tapead's scalar tape lives in C ``malloc`` memory and is not
    traced -- see ``tape_bytes``)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def tape_bytes(problem: str, length: int, checkpoints: Optional[int]) -> int:
    """``tape.memory()["total"]`` of the outer tape a gradient call records."""
    rec = ta.record(make_rollout(problem, length, checkpoints), rollout_x0(problem), P0)
    return rec.tape.memory()["total"]


# ---- pytest-benchmark --------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _reference(n: int, epochs: int) -> Result:
    X, y, _, _ = terrain_data()
    return train_numpy(X[:n], y[:n], epochs=epochs)


@pytest.mark.parametrize("name", list(TRAINERS))
def test_terrain_training(benchmark, name):
    pytest.importorskip("matplotlib")
    module, trainer = TRAINERS[name]
    if module is not None:
        pytest.importorskip(module)
    benchmark.group = "T1 terrain MLP training"
    X, y, _, _ = terrain_data()
    if benchmark.disabled:
        n, epochs = N_TRAIN_QUICK, 1
        result = benchmark(trainer, X[:n], y[:n], epochs=epochs)
    else:
        n, epochs = N_TRAIN, EPOCHS_BENCH
        if name == "jax.jit step":
            benchmark.extra_info["compile_s"] = jax_compile_seconds()
        result = benchmark.pedantic(trainer, args=(X, y), kwargs={"epochs": epochs},
                                    rounds=3, iterations=1, warmup_rounds=1)
        benchmark.extra_info["per_step_us"] = (
            1e6 * benchmark.stats.stats.min / n_steps(n, epochs))
    ref = _reference(n, epochs)
    # the same start, batch order and gradients: the same trajectory, to rounding
    assert max_param_diff(result[0], ref[0]) < 1e-9
    np.testing.assert_allclose(result[2], ref[2], rtol=1e-9)
    benchmark.extra_info["test_rmse_m"] = terrain_test_rmse(result)


@pytest.mark.parametrize("checkpoints", CHECKPOINTS,
                         ids=[f"s={s}" for s in CHECKPOINTS])
@pytest.mark.parametrize("problem", list(ROLLOUTS))
def test_rollout_gradient(benchmark, problem, checkpoints):
    length = ROLLOUTS[problem][1 if benchmark.disabled else 0]
    benchmark.group = f"R2 rollout, {problem} state, L={length}"
    vg = rollout_value_and_grad(problem, length, checkpoints)
    x0 = rollout_x0(problem)
    if benchmark.disabled:
        value, (gx, gp) = benchmark(vg, x0, P0)
    else:
        value, (gx, gp) = benchmark.pedantic(vg, args=(x0, P0), rounds=3, iterations=1,
                                             warmup_rounds=1)
        benchmark.extra_info["peak_traced_bytes"] = peak_traced_bytes(vg, x0, P0)
        benchmark.extra_info["tape_bytes"] = tape_bytes(problem, length, checkpoints)
    v_ref, gx_ref, gp_ref = rollout_reference(problem, length)
    assert float(value) == pytest.approx(v_ref, rel=1e-12)
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-9, atol=1e-300)
    assert float(gp) == pytest.approx(gp_ref, rel=1e-9)
    if checkpoints is not None:                       # against the stored tape
        _, (gx_full, gp_full) = rollout_value_and_grad(problem, length, None)(x0, P0)
        np.testing.assert_allclose(gx, gx_full, rtol=1e-12, atol=1e-300)
        assert float(gp) == pytest.approx(float(gp_full), rel=1e-12)
