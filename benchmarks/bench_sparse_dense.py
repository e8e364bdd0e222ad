"""Sparse vs dense Jacobians and Hessians as n grows (pytest-benchmark).

S1  Jacobian of a tridiagonal residual, vectorised with slicing::

        r_i = x_{i-1} - 2 x_i + x_{i+1} + sin(x_i),   x_0 = x_{n+1} = 0

    ``ta.sparse_jacobian`` (3 colours: one 3-direction forward sweep), timed
    after the first call and, apart, the first call itself (record, pattern,
    colouring, recovery: the *build*); dense ``ta.jacfwd`` (n directions) and
    ``ta.jacrev`` (n reverse sweeps); ``jax.jit(jax.jacfwd(r))`` (x64, compile
    excluded, reported apart); ``torch.func.jacfwd(r)`` (eager, one
    thread); CasADi SX ``Function(x, jacobian(r, x))`` (sparse; the
    symbolic build reported apart).
S2  Hessian of the arrow function ``f = sum(sin(x[:-1] * x[-1]))`` (a
    diagonal plus a dense last row and column): ``ta.sparse_hessian``
    (2 colours, forward over reverse), ``ta.hessian``,
    ``jax.jit(jax.hessian(f))``, ``torch.func.hessian(f)`` (eager, one
    thread) and CasADi SX ``hessian(f, x)``.

Every result is checked against the closed form (to 1e-12, relative to the
largest entry), and the sparse ones against tapead's dense ones wherever
those run: a benchmark that computes the wrong thing is worthless.

Run them as quick tests (the default ``--benchmark-disable``: each case runs
once and its result is checked)::

    python -m pytest benchmarks/bench_sparse_dense.py

the timings::

    python -m pytest benchmarks/bench_sparse_dense.py --benchmark-enable

or the sweep over n (10 ... 100 000; a method stops where one call is
predicted to take more than ``--budget`` seconds, 2 by default, its build or
compile more than ``--setup-budget``, 10, or a dense matrix more than 1 GB),
which prints a table, writes a JSON of the results and the log-log figure
``docs/img/sparse_vs_dense.png``::

    PYTHONPATH=. python benchmarks/bench_sparse_dense.py
    PYTHONPATH=. python benchmarks/bench_sparse_dense.py --plot-only results.json

Times are the minimum over repeats (at least 3, more while under ~0.3 s).
The peers (jax, torch, casadi) are optional: skipped when not importable.  No test
asserts a wall-clock time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
import scipy.sparse as sp

import tapead as ta
import tapead.numpy as tnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import cpu_name  # noqa: E402  (benchmarks/common.py)

SIZES = [10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000]
TEST_SIZES = [100, 1000]
BUDGET_S = 2.0                  # a method stops where a call would take longer,
SETUP_BUDGET_S = 10.0           # or its build / compile
DENSE_BYTES_LIMIT = 1.0e9       # ... or a dense n x n float64 matrix be larger
TOL = 1e-12
PNG = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                   "docs", "img", "sparse_vs_dense.png")


# ---- the functions, for any numpy-like namespace --------------------------------

def make_residual(xp) -> Callable:
    """The tridiagonal residual in namespace ``xp`` (tapead.numpy, jax.numpy)."""
    zero = np.zeros(1)

    def residual(x):
        left = xp.concatenate([zero, x[:-1]])
        right = xp.concatenate([x[1:], zero])
        return left - 2.0 * x + right + xp.sin(x)
    return residual


def make_arrow(xp) -> Callable:
    """``sum(sin(x[:-1] * x[-1]))``: an arrow-shaped Hessian."""
    def arrow(x):
        return xp.sum(xp.sin(x[:-1] * x[-1]))
    return arrow


residual = make_residual(tnp)
arrow = make_arrow(tnp)


def point(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, n)


# ---- closed forms and the check ---------------------------------------------------

def exact_jacobian(x: np.ndarray) -> sp.csr_array:
    n = x.size
    return sp.diags_array([np.ones(n - 1), np.cos(x) - 2.0, np.ones(n - 1)],
                          offsets=[-1, 0, 1], format="csr")


def exact_hessian(x: np.ndarray) -> sp.csr_array:
    u, t = x[:-1], x[-1]
    m = u.size
    s, c = np.sin(u * t), np.cos(u * t)
    corner = c - u * t * s                              # d2f / du_i dt
    i = np.arange(m)
    rows = np.concatenate([i, i, np.full(m, m), [m]])
    cols = np.concatenate([i, np.full(m, m), i, [m]])
    vals = np.concatenate([-s * t**2, corner, corner, [-np.sum(u**2 * s)]])
    return sp.csr_array((vals, (rows, cols)), shape=(m + 1, m + 1))


def as_numpy(a):
    """A dense ndarray or a scipy sparse array from any method's result."""
    if sp.issparse(a):
        return a
    if hasattr(a, "sparse") and hasattr(a, "nnz"):      # casadi.DM
        return sp.csr_array(a.sparse())
    return np.asarray(a)


def max_error(a, b) -> float:
    """``max |a - b| / max(1, max |b|)`` for dense or sparse a, b."""
    a, b = as_numpy(a), as_numpy(b)
    if sp.issparse(a) and sp.issparse(b):
        d = abs(sp.csr_array(a) - sp.csr_array(b))
        err = float(d.max()) if d.nnz else 0.0
        scale = float(abs(sp.csr_array(b)).max()) if b.nnz else 0.0
    else:
        a = a.toarray() if sp.issparse(a) else a
        b = b.toarray() if sp.issparse(b) else b
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = float(np.max(np.abs(b))) if b.size else 0.0
    return err / max(1.0, scale)


def check(result, reference, what: str = "result") -> float:
    """Assert that ``result`` equals ``reference`` to TOL; return the error."""
    a, b = as_numpy(result), as_numpy(reference)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shape {a.shape}, expected {b.shape}")
    err = max_error(a, b)
    if not err <= TOL:
        raise AssertionError(f"{what}: max error {err:.3g} > {TOL:g}")
    return err


# ---- the methods: each make_* returns (call, setup seconds) ----------------------

def make_tapead_sparse_jacobian(x) -> Tuple[Callable, float]:
    jac = ta.sparse_jacobian(residual)
    start = time.perf_counter()
    jac(x)
    return jac, time.perf_counter() - start


def make_tapead_sparse_hessian(x) -> Tuple[Callable, float]:
    hess = ta.sparse_hessian(arrow)
    start = time.perf_counter()
    hess(x)
    return hess, time.perf_counter() - start


def sparse_jacobian_first_call(x):
    """A fresh ``ta.sparse_jacobian`` called once: pattern, colouring, values."""
    return ta.sparse_jacobian(residual)(x)


def sparse_hessian_first_call(x):
    return ta.sparse_hessian(arrow)(x)


def _plain(fn) -> Callable:
    def make(x):
        return fn, 0.0
    return make


tapead_jacfwd = ta.jacfwd(residual)
tapead_jacrev = ta.jacrev(residual)
tapead_hessian = ta.hessian(arrow)


def _jax_jit(transform: str, make_f: Callable) -> Callable:
    def make(x):
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        fn = jax.jit(getattr(jax, transform)(make_f(jnp)))
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        compile_s = time.perf_counter() - start

        def run(x):
            return jax.block_until_ready(fn(x))
        return run, compile_s
    return make


def torch_residual(torch):
    def residual(x):
        zero = torch.zeros(1, dtype=x.dtype)
        return torch.cat([zero, x[:-1]]) - 2.0 * x + torch.cat([x[1:], zero]) + torch.sin(x)
    return residual


def torch_arrow(torch):
    return lambda x: torch.sum(torch.sin(x[:-1] * x[-1]))


def _torch_func(transform: str, make_f: Callable) -> Callable:
    """``torch.func.<transform>(f)``, eager on one thread, numpy in and out."""
    def make(x):
        import torch
        import torch.func
        torch.set_num_threads(1)
        fn = getattr(torch.func, transform)(make_f(torch))

        def run(x):
            return fn(torch.from_numpy(x)).numpy()
        return run, 0.0
    return make


def casadi_residual(ca, X):
    return ca.vertcat(0, X[:-1]) - 2 * X + ca.vertcat(X[1:], 0) + ca.sin(X)


def casadi_arrow(ca, X):
    return ca.sum1(ca.sin(X[:-1] * X[-1]))


def make_casadi_jacobian(x) -> Tuple[Callable, float]:
    """CasADi SX: symbols, ``jacobian``, ``Function`` (returns a sparse DM)."""
    import casadi as ca
    start = time.perf_counter()
    X = ca.SX.sym("x", x.size)
    fn = ca.Function("jac_r_x", [X], [ca.jacobian(casadi_residual(ca, X), X)])
    return fn, time.perf_counter() - start


def make_casadi_hessian(x) -> Tuple[Callable, float]:
    import casadi as ca
    start = time.perf_counter()
    X = ca.SX.sym("x", x.size)
    H, _ = ca.hessian(casadi_arrow(ca, X), X)
    fn = ca.Function("hess_f_x", [X], [H])
    return fn, time.perf_counter() - start


#: method -> (maker, power of n in the time of a call, power of n in the
#: setup time, is dense, module needed), the powers for the budget rule of
#: ``sweep``; ``setup`` is the first call (tapead sparse: timed apart, power
#: None), the compile (JAX) or the symbolic build (CasADi: superlinear for
#: the Hessian).
JACOBIAN_METHODS: Dict[str, tuple] = {
    "tapead sparse": (make_tapead_sparse_jacobian, 1, None, False, None),
    "tapead jacfwd": (_plain(tapead_jacfwd), 2, None, True, None),
    "tapead jacrev": (_plain(tapead_jacrev), 2, None, True, None),
    "JAX jit jacfwd": (_jax_jit("jacfwd", make_residual), 2, 1, True, "jax"),
    "torch jacfwd": (_torch_func("jacfwd", torch_residual), 2, None, True, "torch"),
    "CasADi SX": (make_casadi_jacobian, 1, 1, False, "casadi"),
}
HESSIAN_METHODS: Dict[str, tuple] = {
    "tapead sparse": (make_tapead_sparse_hessian, 1, None, False, None),
    "tapead hessian": (_plain(tapead_hessian), 2, None, True, None),
    "JAX jit hessian": (_jax_jit("hessian", make_arrow), 2, 1, True, "jax"),
    "torch hessian": (_torch_func("hessian", torch_arrow), 2, None, True, "torch"),
    "CasADi SX": (make_casadi_hessian, 1, 2, False, "casadi"),
}
PROBLEMS = {"jacobian": (JACOBIAN_METHODS, exact_jacobian, tapead_jacfwd),
            "hessian": (HESSIAN_METHODS, exact_hessian, tapead_hessian)}
FIRST_CALL = {"jacobian": sparse_jacobian_first_call,
              "hessian": sparse_hessian_first_call}


def importable(module: Optional[str]) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# ---- pytest-benchmark --------------------------------------------------------------

def _bench(benchmark, problem: str, name: str, n: int):
    methods, exact, _ = PROBLEMS[problem]
    maker, _, _, _, module = methods[name]
    if module is not None:
        pytest.importorskip(module)
    benchmark.group = f"{problem} n={n}"
    x = point(n)
    fn, setup_s = maker(x)
    benchmark.extra_info["setup_s"] = setup_s
    check(benchmark(fn, x), exact(x), f"{problem} {name} n={n}")


@pytest.mark.parametrize("n", TEST_SIZES + [10_000])
@pytest.mark.parametrize("name", ["tapead sparse", "CasADi SX"])
def test_jacobian_sparse(benchmark, name, n):
    _bench(benchmark, "jacobian", name, n)


@pytest.mark.parametrize("n", TEST_SIZES)
@pytest.mark.parametrize("name", ["tapead jacfwd", "tapead jacrev", "JAX jit jacfwd",
                                  "torch jacfwd"])
def test_jacobian_dense(benchmark, name, n):
    _bench(benchmark, "jacobian", name, n)


@pytest.mark.parametrize("n", TEST_SIZES + [10_000])
@pytest.mark.parametrize("name", ["tapead sparse", "CasADi SX"])
def test_hessian_sparse(benchmark, name, n):
    _bench(benchmark, "hessian", name, n)


@pytest.mark.parametrize("n", TEST_SIZES)
@pytest.mark.parametrize("name", ["tapead hessian", "JAX jit hessian", "torch hessian"])
def test_hessian_dense(benchmark, name, n):
    _bench(benchmark, "hessian", name, n)


@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("n", [1000, 10_000])
def test_first_call(benchmark, problem, n):
    benchmark.group = f"{problem} n={n} first call"
    x = point(n)
    check(benchmark(FIRST_CALL[problem], x), PROBLEMS[problem][1](x), problem)


@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("n", [2, 3, 10, 57])
def test_sparse_equals_dense(problem, n):
    methods, exact, dense = PROBLEMS[problem]
    x = point(n, seed=n)
    S = methods["tapead sparse"][0](x)[0](x)
    D = dense(x)
    assert sp.issparse(S) and S.shape == D.shape == (n, n)
    check(S, D, f"{problem} sparse vs dense")
    check(D, exact(x).toarray(), f"{problem} dense vs closed form")


def test_check_catches_a_wrong_result():
    x = point(20)
    J = exact_jacobian(x).tolil()
    J[3, 4] += 1e-9
    with pytest.raises(AssertionError, match="max error"):
        check(J.tocsr(), exact_jacobian(x))
    with pytest.raises(AssertionError, match="shape"):
        check(np.zeros((20, 19)), exact_jacobian(x))


# ---- the sweep ------------------------------------------------------------------

def best_time(fn, x, min_repeats: int = 3, max_repeats: int = 200,
              budget_s: float = 0.3) -> float:
    """The minimum over repeats of one call, after a warm-up call."""
    fn(x)
    best, spent, k = float("inf"), 0.0, 0
    while k < min_repeats or (spent < budget_s and k < max_repeats):
        start = time.perf_counter()
        fn(x)
        dt = time.perf_counter() - start
        best, spent, k = min(best, dt), spent + dt, k + 1
    return best


def best_first_call(fn, x, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - start)
    return best


def too_slow(history: List[Tuple[int, float]], n: int, power: int,
             budget_s: float) -> Optional[float]:
    """The predicted seconds of a call at n if over budget, else None."""
    if not history:
        return None
    n0, t0 = history[-1]
    predicted = t0 * (n / n0) ** power
    return predicted if predicted > budget_s else None


def sweep(sizes=SIZES, budget_s: float = BUDGET_S,
          setup_budget_s: float = SETUP_BUDGET_S, log=print) -> dict:
    """Time every method at every n; returns the JSON-able results.

    A method is skipped at n when its time per call at the previous n, scaled
    by ``(n / n_prev) ** power`` (1 for sparse, 2 for dense), is predicted
    above ``budget_s`` -- or its setup (JAX compile, CasADi build), scaled
    the same way by its own power, above ``setup_budget_s``.  tapead's first call is timed
    apart (best of 5 fresh objects), so it does not enter the rule.
    """
    results: dict = {"machine": machine(), "sizes": list(sizes), "tol": TOL,
                     "budget_s": budget_s, "setup_budget_s": setup_budget_s}
    for problem, (methods, exact, dense) in PROBLEMS.items():
        rows: Dict[str, dict] = {}
        history: Dict[str, List[Tuple[int, float]]] = {name: [] for name in methods}
        setup_history: Dict[str, List[Tuple[int, float]]] = {name: [] for name in methods}
        for n in sizes:
            x = point(n)
            ref = exact(x)
            row: dict = {}
            dense_result = sparse_result = None
            for name, (maker, power, setup_power, is_dense, module) in methods.items():
                if not importable(module):
                    row[name] = {"skipped": f"{module} not importable"}
                    continue
                if is_dense and n * n * 8 > DENSE_BYTES_LIMIT:
                    row[name] = {"skipped": f"dense {n}x{n} > {DENSE_BYTES_LIMIT:.0e} B"}
                    continue
                predicted = too_slow(history[name], n, power, budget_s)
                if predicted is not None:
                    row[name] = {"skipped": f"predicted {predicted:.1f} s > {budget_s} s"}
                    continue
                predicted = too_slow(setup_history[name], n, setup_power or 0,
                                     setup_budget_s)
                if predicted is not None:
                    row[name] = {"skipped": f"setup predicted {predicted:.1f} s > "
                                            f"{setup_budget_s} s"}
                    continue
                fn, setup_s = maker(x)
                out = fn(x)
                err = check(out, ref, f"{problem} {name} n={n}")
                if fn is dense:
                    dense_result = out
                seconds = best_time(fn, x)
                history[name].append((n, seconds))
                if setup_power is not None:
                    setup_history[name].append((n, setup_s))
                row[name] = {"s": seconds, "setup_s": setup_s, "error": err}
                if name == "tapead sparse":
                    rec = fn.recovery(x)
                    row[name]["ncolors"] = int(rec.ncolors)
                    row[name]["nnz"] = int(out.nnz)
                    sparse_result = out
            first = best_first_call(FIRST_CALL[problem], x)
            row["tapead sparse (first call)"] = {"s": first}
            if dense_result is not None:          # sparse vs tapead's own dense
                row["tapead sparse"]["error_vs_dense"] = check(
                    sparse_result, dense_result, f"{problem} sparse vs dense n={n}")
            rows[str(n)] = row
            log(f"{problem:8} n={n:>6}  " + "  ".join(
                f"{k}: {v['s'] * 1e3:.3g} ms" for k, v in row.items() if "s" in v))
        results[problem] = rows
    return results


def machine() -> dict:
    cpu = cpu_name()
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for module in ("jax", "torch", "casadi"):
        if importable(module):
            versions[module] = sys.modules[module].__version__
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": "none used",
            "versions": versions}


def method_names(results: dict, problem: str) -> List[str]:
    names: List[str] = []
    for row in results[problem].values():
        for name in row:
            if name not in names:
                names.append(name)
    return names


def print_table(results: dict) -> None:
    """Milliseconds per call, and two ratios to tapead sparse (steady state)."""
    for problem in PROBLEMS:
        names = method_names(results, problem)
        print(f"\n{problem} (ms per call; '-' = skipped)")
        print("| n | " + " | ".join(names) + " | tapead dense / sparse | CasADi / sparse |")
        print("|---:|" + "---:|" * (len(names) + 2))
        for n, row in results[problem].items():
            cells = [f"{row[k]['s'] * 1e3:.3g}" if "s" in row.get(k, {}) else "-"
                     for k in names]
            sparse_s = row.get("tapead sparse", {}).get("s")
            dense = [v["s"] for k, v in row.items() if "s" in v and k.startswith("tapead")
                     and not k.startswith("tapead sparse")]
            casadi = row.get("CasADi SX", {}).get("s")
            ratios = [f"{min(dense) / sparse_s:.3g}" if dense and sparse_s else "-",
                      f"{casadi / sparse_s:.3g}" if casadi and sparse_s else "-"]
            print(f"| {n} | " + " | ".join(cells + ratios) + " |")


STYLES = {"tapead sparse": ("C0", "-", "o"),
          "tapead sparse (first call)": ("C0", "--", "o"),
          "tapead jacfwd": ("C1", "-", "s"), "tapead hessian": ("C1", "-", "s"),
          "tapead jacrev": ("C2", "-", "^"),
          "JAX jit jacfwd": ("C3", "-", "D"), "JAX jit hessian": ("C3", "-", "D"),
          "torch jacfwd": ("C5", "-", "P"), "torch hessian": ("C5", "-", "P"),
          "CasADi SX": ("C4", "-", "v"), "CasADi SX (build)": ("C4", "--", "v")}
TITLES = {"jacobian": "Jacobian of a tridiagonal residual",
          "hessian": "Hessian of sum(sin(x[:-1] * x[-1])) (arrow)"}


def plot(results: dict, png: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, problem in zip(axes, PROBLEMS):
        rows = results[problem]
        series: Dict[str, Tuple[list, list]] = {}
        for n, row in rows.items():
            for name, v in row.items():
                if "s" in v:
                    series.setdefault(name, ([], []))
                    series[name][0].append(int(n))
                    series[name][1].append(v["s"])
                if name == "CasADi SX" and "setup_s" in v:
                    series.setdefault("CasADi SX (build)", ([], []))
                    series["CasADi SX (build)"][0].append(int(n))
                    series["CasADi SX (build)"][1].append(v["setup_s"])
        order = list(STYLES)
        for name in sorted(series, key=lambda k: order.index(k) if k in order else 99):
            ns, ts = series[name]
            color, ls, marker = STYLES.get(name, ("k", ":", "."))
            ax.loglog(ns, ts, color=color, ls=ls, marker=marker, ms=4, label=name)
        ax.axhline(results["budget_s"], color="0.6", lw=0.8, ls=":",
                   label=f"{results['budget_s']:g} s budget")
        ax.set_title(TITLES[problem], fontsize=10)
        ax.set_xlabel("n")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("seconds per call (min of repeats)")
    m = results["machine"]
    fig.suptitle(f"tapead sparse vs dense derivatives -- {m['cores']} cores, "
                 f"{m['cpu']}, no GPU; solid: a call after the first (JAX compile "
                 "excluded), dashed: one-off build", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated n (default: %(default)s)")
    ap.add_argument("--budget", type=float, default=BUDGET_S,
                    help="skip a method where a call is predicted to take longer (s)")
    ap.add_argument("--setup-budget", type=float, default=SETUP_BUDGET_S,
                    help="skip a method where its build/compile is predicted longer (s)")
    ap.add_argument("--json", default=os.path.join(tempfile.gettempdir(),
                                                   "tapead_sparse_vs_dense.json"))
    ap.add_argument("--png", default=os.path.normpath(PNG))
    ap.add_argument("--plot-only", metavar="JSON",
                    help="plot an earlier run's JSON instead of timing")
    args = ap.parse_args(argv)
    if args.plot_only:
        with open(args.plot_only) as fh:
            results = json.load(fh)
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
        results = sweep(sizes, args.budget, args.setup_budget)
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
        print(f"\nresults: {args.json}")
    print_table(results)
    try:
        plot(results, args.png)
    except ImportError:
        print(f"matplotlib is not importable here: plot with\n  python {sys.argv[0]} "
              f"--plot-only {args.json}")
        return 0
    print(f"figure: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
