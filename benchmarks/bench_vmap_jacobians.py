"""Batched Jacobians: one RK4 step of a 4-species Lotka-Volterra system at
2000 states, ``ta.vmap(ta.jacfwd(step))``: input (2000, 4), output (2000, 4, 4).

The system is the competitive Lotka-Volterra model with four species
(``dx_i/dt = r_i x_i (1 - sum_j a_ij x_j)``, the chaotic parameters of Vano et
al. 2006), one classical fourth-order Runge-Kutta step of ``DT = 0.05``,
written with ``tapead.numpy`` ops on a (4,) state.

Run the timings (pytest-benchmark; JAX and torch only when importable)::

    python -m pytest benchmarks/bench_vmap_jacobians.py --benchmark-enable

or print the table (ratios to the hand-vectorised finite differences)::

    PYTHONPATH=. python benchmarks/bench_vmap_jacobians.py

Rows:

* ``ta.vmap(ta.jacfwd(step))``: the rewrite of vmap of jacfwd as jacfwd of a
  vmap (``tapead/vmap_transforms.py``): forward passes over all the lanes at
  once, the 4 tangent directions in groups (see below),
* a Python loop of ``ta.jacfwd(step)`` over the 2000 states,
* central finite differences vectorised by hand in numpy (8 batched steps;
  about 1e-11 from the exact Jacobian, checked to 1e-10),
* the tangents of the RK4 stages written out by hand in numpy (exact; the
  reference of the checks),
* ``jax.jit(jax.vmap(jax.jacfwd(step)))`` steady state, and its compile time
  apart (when jax is importable),
* ``torch.func.vmap(torch.func.jacfwd(step))``, eager, one thread (when torch
  is importable).

Where the time went (cProfile, before the changes that came with this
file): vmap's rule for ``A @ x`` with a shared (4, 4) ``A`` let numpy loop
over the 2000 lanes one 4x4 product each (``np.matmul((4, 4), (n, 4, 1))``,
240 us against 30 us for one GEMM over 8000 lanes); it is now one GEMM over
the lanes (``x @ A.T``): 4.0 -> 2.2 ms for the tapead row.  The rest is
the per-operation Python of the batch trace and the dual numbers (about
18 us per operation for the primal and one direction, against 8 us for the
primal alone), then numpy's own work.

One pass for the 4 directions (a forward sweep of a recorded tape carrying
(4, 2000, 4) tangents, or one dual-number run over the lanes repeated 4
times) was measured no faster than one run per direction at 2000 states,
and slower at 4000 and more: the pass's arrays are 4x bigger (256 KiB
here), and numpy's elementwise work on them ran up to twice as slow per
element (fresh pages from glibc's allocator, which ``settle_malloc`` takes
out, and the cache).  Below that size one pass wins (200 states: 0.94 ->
0.36 ms).  So vmap(jacfwd) runs the directions in groups within
``_LANE_BUDGET`` lane elements (``tapead/vmap_transforms.py``): all 4 at once
up to about 500 states, one at a time for 2000.

One run (2 cores shared with several jobs, load about 5; the figures move
with the load), after ``settle_malloc``: tapead 1.99 ms, its loop 732 ms
(370x slower), central FD in numpy 1.09 ms, hand tangents 1.09 ms,
jax.jit 0.27 ms steady (compile 536 ms), torch.func 10.7 ms.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

N_STATES = 2000
DT = 0.05
R = np.array([1.0, 0.72, 1.53, 1.27])
A = np.array([[1.0, 1.09, 1.52, 0.0],
              [0.0, 1.0, 0.44, 1.36],
              [2.33, 0.0, 1.0, 0.47],
              [1.21, 0.51, 0.35, 1.0]])
FD_STEP = 1e-5


def rhs(x):
    """The Lotka-Volterra vector field at one state x (4,)."""
    return R * x * (1.0 - A @ x)


def step(x):
    """One RK4 step of DT from the state x (4,)."""
    k1 = rhs(x)
    k2 = rhs(x + (0.5 * DT) * k1)
    k3 = rhs(x + (0.5 * DT) * k2)
    k4 = rhs(x + DT * k3)
    return x + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _problem():
    return np.random.default_rng(0).uniform(0.1, 0.6, size=(N_STATES, 4))


# ---- by hand, in numpy, for the whole batch ------------------------------------

def _rhs_batch(X):
    return R * X * (1.0 - X @ A.T)


def step_batch(X):
    """``step`` for a batch of states X (n, 4)."""
    k1 = _rhs_batch(X)
    k2 = _rhs_batch(X + (0.5 * DT) * k1)
    k3 = _rhs_batch(X + (0.5 * DT) * k2)
    k4 = _rhs_batch(X + DT * k3)
    return X + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def central_differences(X, h=FD_STEP):
    """(n, 4, 4) Jacobians by central differences, all states at once."""
    cols = []
    for j in range(X.shape[1]):
        e = np.zeros(X.shape[1])
        e[j] = h
        cols.append((step_batch(X + e) - step_batch(X - e)) / (2.0 * h))
    return np.stack(cols, axis=-1)


def _rhs_jac(X):
    """d rhs / dx at every state: diag(r (1 - A x)) - diag(r x) A, (n, 4, 4)."""
    d = R * (1.0 - X @ A.T)
    return d[:, :, None] * np.eye(4) - (R * X)[:, :, None] * A


def by_hand(X):
    """(n, 4, 4) exact Jacobians: the RK4 stages' tangents written out."""
    eye = np.eye(4)
    k1 = _rhs_batch(X)
    J1 = _rhs_jac(X)
    X2 = X + (0.5 * DT) * k1
    k2, J2 = _rhs_batch(X2), _rhs_jac(X2) @ (eye + (0.5 * DT) * J1)
    X3 = X + (0.5 * DT) * k2
    k3, J3 = _rhs_batch(X3), _rhs_jac(X3) @ (eye + (0.5 * DT) * J2)
    J4 = _rhs_jac(X + DT * k3) @ (eye + DT * J3)
    return eye + (DT / 6.0) * (J1 + 2.0 * J2 + 2.0 * J3 + J4)


# ---- the peers -----------------------------------------------------------------

def _jax_step(jnp):
    r, a = jnp.asarray(R), jnp.asarray(A)

    def jrhs(x):
        return r * x * (1.0 - a @ x)

    def jstep(x):
        k1 = jrhs(x)
        k2 = jrhs(x + (0.5 * DT) * k1)
        k3 = jrhs(x + (0.5 * DT) * k2)
        k4 = jrhs(x + DT * k3)
        return x + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return jstep


def jax_batched_jacobians(X):
    """``jax.jit(jax.vmap(jax.jacfwd(step)))`` compiled for X's shape: the
    callable (numpy out) and the seconds the compilation took."""
    import jax
    jax.config.update("jax_enable_x64", True)
    t = time.perf_counter()
    compiled = jax.jit(jax.vmap(jax.jacfwd(_jax_step(jax.numpy)))).lower(X).compile()
    compile_s = time.perf_counter() - t
    return (lambda X: np.asarray(jax.block_until_ready(compiled(X)))), compile_s


def torch_batched_jacobians(torch):
    """``torch.func.vmap(torch.func.jacfwd(step))`` on numpy in and out."""
    from torch.func import jacfwd, vmap
    r, a = torch.from_numpy(R), torch.from_numpy(A)

    def trhs(x):
        return r * x * (1.0 - a @ x)

    def tstep(x):
        k1 = trhs(x)
        k2 = trhs(x + (0.5 * DT) * k1)
        k3 = trhs(x + (0.5 * DT) * k2)
        k4 = trhs(x + DT * k3)
        return x + (DT / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    f = vmap(jacfwd(tstep))
    return lambda X: f(torch.from_numpy(X)).numpy()


def _check(got, X, rtol=1e-10, what=""):
    ref = by_hand(X)
    assert got.shape == ref.shape, (what, got.shape)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol, err_msg=what)


# ---- pytest-benchmark (the checks run without --benchmark-enable too) ----------

METHODS = {
    "ta.vmap(ta.jacfwd)": lambda: ta.vmap(ta.jacfwd(step)),
    "loop of ta.jacfwd": lambda: (lambda j: lambda X: np.stack([j(x) for x in X]))(
        ta.jacfwd(step)),
    "central FD, numpy": lambda: central_differences,
    "tangents by hand, numpy": lambda: by_hand,
}


@pytest.mark.parametrize("name", list(METHODS))
def test_batched_jacobians(benchmark, name):
    X = _problem()
    if name == "loop of ta.jacfwd":
        X = X[:200]                     # a loop: 200 states keep the run short
    out = benchmark(METHODS[name](), X)
    _check(out, X, rtol=1e-10 if "FD" in name else 1e-12, what=name)


def test_batched_jacobians_jax(benchmark, jax_x64):
    X = _problem()
    fn, _ = jax_batched_jacobians(X)
    _check(benchmark(fn, X), X, rtol=1e-12, what="jax")


def test_batched_jacobians_torch(benchmark, torch_1thread):
    X = _problem()
    fn = torch_batched_jacobians(torch_1thread)
    _check(benchmark(fn, X), X, rtol=1e-12, what="torch")


def test_the_rows_agree_with_each_other():
    """Every row against every other (tapead, its loop, the hand tangents:
    1e-12; finite differences: 1e-10 of them, above their own error of about 1e-11)."""
    X = _problem()
    rows = {name: make()(X if "loop" not in name else X[:50]) for name, make in METHODS.items()}
    exact = [k for k in rows if "FD" not in k]
    for a in exact:
        for b in exact:
            n = min(len(rows[a]), len(rows[b]))
            np.testing.assert_allclose(rows[a][:n], rows[b][:n], rtol=1e-12, atol=1e-14,
                                       err_msg=f"{a} vs {b}")
    err = np.max(np.abs(rows["central FD, numpy"] - rows["tangents by hand, numpy"]))
    assert err < 1e-10, err


# ---- the printed table ------------------------------------------------------------

def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import settle_malloc
    settle_malloc()                  # the same allocator state for every row
    X = _problem()
    rows = []
    for name, make in METHODS.items():
        fn = make()
        _check(fn(X), X, rtol=1e-10 if "FD" in name else 1e-12, what=name)
        rows.append((name, _best(lambda: fn(X), repeat=3 if "loop" in name else 20)))
    try:
        jf, compile_s = jax_batched_jacobians(X)
        _check(jf(X), X, rtol=1e-12, what="jax")
        rows.append(("jax.jit(jax.vmap(jax.jacfwd))", _best(lambda: jf(X), repeat=50)))
    except ImportError:
        compile_s = None
    try:
        import torch
        torch.set_num_threads(1)
        tf = torch_batched_jacobians(torch)
        _check(tf(X), X, rtol=1e-12, what="torch")
        rows.append(("torch.func.vmap(jacfwd), 1 thr", _best(lambda: tf(X), repeat=20)))
    except ImportError:
        pass
    fd_t = dict(rows)["central FD, numpy"]
    ta_t = dict(rows)["ta.vmap(ta.jacfwd)"]
    print(f"Jacobians of one RK4 step, {N_STATES} states x 4, float64 (measured under load)")
    for name, t in rows:
        print(f"{name:32s} {t * 1e3:9.3f} ms  {t / fd_t:7.2f}x FD  {t / ta_t:7.2f}x tapead")
    if compile_s is not None:
        print(f"{'jax compile (lower + compile)':32s} {compile_s * 1e3:9.3f} ms")


if __name__ == "__main__":
    main()
