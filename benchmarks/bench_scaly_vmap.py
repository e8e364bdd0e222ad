"""Sparse Hessians of mapped calls: sc.vmap vs ta.sparse_hessian vs CasADi map.

The workload is the arrow of the graph API's "Star coloring for Hessians":
``N`` stages ``sin(x_k p)`` of one state ``x_k`` each and one shared
parameter ``p``, summed: ``cost(w) = sum_k sin(w_k w_N)``.  Its Hessian has
a diagonal and one dense row and column; star coloring needs two
directions for any ``N``.

V1  build: ``sc.sparse_hessian(total, "cost", "w")`` of a fresh Function
    (its stage derivative Functions included, nothing cached), CasADi's
    ``hessian`` of ``stage.map(N)`` turned into a Function;
V2  evaluation of the built Hessian at a point: scaly, ``ta.sparse_hessian``
    of the same function written with tapead.numpy (after its first call,
    which records and colors), CasADi.

Run the timings::

    python -m pytest benchmarks/bench_scaly_vmap.py --benchmark-enable

As quick tests (each case runs once and is checked against the others)::

    python -m pytest benchmarks/bench_scaly_vmap.py

The table (N = 10^3, 10^4, 10^5; CasADi up to ``--casadi-max``, 10^4 by
default, since its build at 10^5 takes about half a minute)::

    PYTHONPATH=. python benchmarks/bench_scaly_vmap.py [--quick] [--casadi-max N]

CasADi is optional: its columns are empty when it is not importable.  No
test asserts a wall-clock time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from typing import Any, Optional

import numpy as np
import pytest
import scipy.sparse as sp

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)

SIZES = (1_000, 10_000, 100_000)


def casadi_or_none():
    try:
        import casadi
    except ImportError:
        return None
    return casadi


def arrow(n: int) -> sc.Function:
    """A fresh stage and a fresh mapped total (no stage Function cached)."""
    @sc.function(sc.G(sc.L("x", 1), sc.L("p", 1)), sc.L("c", ...))
    def stage(inputs):
        x, p = inputs
        return (x * p).sin().sum()

    @sc.function(sc.L("w", n + 1), sc.L("cost", ...))
    def total(w):
        return sc.vmap(stage, n, [w[:n], w[n:]]).sum()
    return total


def arrow_tnp(w):
    return tnp.sum(tnp.sin(w[:-1] * w[-1]))


def point(n: int) -> np.ndarray:
    return np.linspace(-1.0, 2.0, n + 1)


def build_scaly(n: int) -> sc.Function:
    return sc.sparse_hessian(arrow(n), "cost", "w")


def build_casadi(n: int) -> Any:
    ca = casadi_or_none()
    x, p = ca.MX.sym("x"), ca.MX.sym("p")
    stage = ca.Function("stage", [x, p], [ca.sin(x * p)])
    w = ca.MX.sym("w", n + 1)
    cost = ca.sum2(stage.map(n)(w[:n].T, w[n]))
    H, _ = ca.hessian(cost, w)
    return ca.Function("H", [w], [H])


def casadi_values(fn, w: np.ndarray, rows, cols) -> np.ndarray:
    H = sp.csc_array(fn(w).sparse())
    return np.asarray(H[rows, cols]).ravel()


def _ready(n: int):
    """(scaly Hessian, ta.sparse_hessian, point), each called once."""
    key = ("ready", n)
    if key not in _CACHE:
        hess, tah, w = build_scaly(n), ta.sparse_hessian(arrow_tnp), point(n)
        hess(w), tah(w)
        _CACHE[key] = (hess, tah, w)
    return _CACHE[key]


_CACHE: dict = {}


def check(hess: sc.Function, tah, w: np.ndarray) -> None:
    P = hess.output_sparsities[0]
    ours = hess(w)
    theirs = np.asarray(sp.csr_array(tah(w))[P.row, P.col]).ravel()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", SIZES[:2])
def test_scaly_build(benchmark, n):
    hess = benchmark(build_scaly, n)
    assert hess.output_sparsities[0].nnz == 3 * n + 1


@pytest.mark.parametrize("n", SIZES[:2])
def test_scaly_eval(benchmark, n):
    hess, tah, w = _ready(n)
    benchmark(hess, w)
    check(hess, tah, w)


@pytest.mark.parametrize("n", SIZES[:2])
def test_tapead_sparse_hessian_eval(benchmark, n):
    _, tah, w = _ready(n)
    benchmark(tah, w)


@pytest.mark.parametrize("n", SIZES[:2])
def test_casadi_build_and_eval(benchmark, n):
    if casadi_or_none() is None:
        pytest.skip("casadi is not installed")
    fn = build_casadi(n)
    hess, _, w = _ready(n)
    benchmark(fn, w)
    P = hess.output_sparsities[0]
    np.testing.assert_allclose(casadi_values(fn, w, P.row, P.col), hess(w), rtol=1e-12,
                               atol=1e-12)


# ---- the report ----------------------------------------------------------------

def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "--"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def best_build(build, n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        build(n)
        times.append(time.perf_counter() - t0)
    return min(times)


def report(total: float = 1.0, casadi_max: int = 10_000) -> str:
    ca = casadi_or_none()
    build_scaly(20)(point(20))                        # import and first-use costs
    lines = [f"Python {platform.python_version()}, numpy {np.__version__}, casadi "
             f"{ca.__version__ if ca else 'not installed'}; {platform.machine()}, "
             f"{os.cpu_count()} cores; {datetime.date.today().isoformat()}; "
             "minimum over repeats, measured under load", "",
             "| N | scaly build | scaly eval | ta.sparse_hessian eval (first call) | "
             "scaly / ta | casadi build | casadi eval |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in SIZES:
        repeat = 3 if n <= 10_000 else 2
        b = best_build(build_scaly, n, repeat)
        hess, w = build_scaly(n), point(n)
        hess(w)
        e = common.measure(hess, w, total=total)[0]
        tah = ta.sparse_hessian(arrow_tnp)
        t0 = time.perf_counter()
        tah(w)
        first = time.perf_counter() - t0
        check(hess, tah, w)
        et = common.measure(tah, w, total=total)[0]
        row = [str(n), fmt_time(b), fmt_time(e), f"{fmt_time(et)} ({fmt_time(first)})",
               f"{e / et:.2f}"]
        if ca is not None and n <= casadi_max:
            cb = best_build(build_casadi, n, 1)
            fn = build_casadi(n)
            P = hess.output_sparsities[0]
            np.testing.assert_allclose(casadi_values(fn, w, P.row, P.col), hess(w),
                                       rtol=1e-12, atol=1e-12)
            row += [fmt_time(cb), fmt_time(common.measure(fn, w, total=total)[0])]
        else:
            row += ["--", "--"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats (about 0.2 s a case instead of 1 s)")
    parser.add_argument("--casadi-max", type=int, default=10_000,
                        help="largest N for CasADi (its build at N = 10^5 takes ~30 s)")
    args = parser.parse_args(argv)
    print(report(total=0.2 if args.quick else 1.0, casadi_max=args.casadi_max))


if __name__ == "__main__":
    sys.exit(main())
