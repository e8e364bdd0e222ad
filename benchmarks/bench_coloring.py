"""Benchmarks for tapead.coloring (pytest-benchmark), with CasADi if importable.

Run the timings::

    python -m pytest benchmarks/bench_coloring.py --benchmark-enable

or print a table of colors and best-of-5 times::

    PYTHONPATH=. python benchmarks/bench_coloring.py

Targets: a 10**6-column banded pattern colored in under 1 s; arrow N = 10**4
star coloring plus recovery build well under 160 ms.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

from tapead import coloring as tc


# ---- Patterns -----------------------------------------------------------------

def tridiagonal(n: int) -> sp.csr_array:
    return sp.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)],
                          offsets=[-1, 0, 1], format="csr").astype(bool)


def arrow(n_stages: int) -> sp.csr_array:
    """Diagonal plus a dense last row and column (a shared parameter)."""
    n = n_stages + 1
    i = np.arange(n_stages)
    rows = np.concatenate([np.arange(n), i, np.full(n_stages, n_stages)])
    cols = np.concatenate([np.arange(n), np.full(n_stages, n_stages), i])
    return sp.csr_array((np.ones(len(rows), bool), (rows, cols)), shape=(n, n))


def stencil5(k: int) -> sp.csr_array:
    """2-D 5-point Laplacian on a k x k grid."""
    t = tridiagonal(k)
    eye = sp.eye_array(k, dtype=bool, format="csr")
    return (sp.kron(eye, t) + sp.kron(t, eye)).astype(bool).tocsr()


def random_pattern(m: int, n: int, per_row: int, seed: int = 0) -> sp.csr_array:
    return sp.random_array((m, n), density=per_row / n, rng=np.random.default_rng(seed),
                           format="csr").astype(bool)


def random_symmetric(n: int, per_row: int, seed: int = 0) -> sp.csr_array:
    a = random_pattern(n, n, per_row, seed)
    return (a + a.T + sp.eye_array(n, dtype=bool)).astype(bool).tocsr()


def star_and_recovery(pattern):
    return tc.star_recovery(pattern, tc.star_coloring(pattern))


def acyclic_and_recovery(pattern):
    return tc.acyclic_recovery(pattern, tc.acyclic_coloring(pattern))


JACOBIANS = {
    "tridiagonal 1e4": lambda: tridiagonal(10**4),
    "tridiagonal 1e6": lambda: tridiagonal(10**6),
    "stencil5 100x100": lambda: stencil5(100),
    "stencil5 1000x1000": lambda: stencil5(1000),
    "random 1e5 x 1e5, 5/row": lambda: random_pattern(10**5, 10**5, 5),
}
HESSIANS = {
    "arrow N=50": lambda: arrow(50),
    "arrow N=1e3": lambda: arrow(10**3),
    "arrow N=1e4": lambda: arrow(10**4),
    "arrow N=1e5": lambda: arrow(10**5),
    "tridiagonal 1e6": lambda: tridiagonal(10**6),
    "stencil5 100x100": lambda: stencil5(100),
    "random sym 1e4, ~6/row": lambda: random_symmetric(10**4, 3),
}
_cache: dict = {}


def _pattern(table, name):
    key = (id(table), name)
    if key not in _cache:
        _cache[key] = table[name]()
    return _cache[key]


# ---- pytest-benchmark ------------------------------------------------------------

@pytest.mark.parametrize("name", list(JACOBIANS))
def test_column_coloring(benchmark, name):
    pattern = _pattern(JACOBIANS, name)
    colors = benchmark(tc.column_coloring, pattern)
    benchmark.extra_info["colors"] = max(colors) + 1
    assert tc.is_valid_column_coloring(pattern, colors) or pattern.shape[1] > 10**5


@pytest.mark.parametrize("name", list(HESSIANS))
def test_star_coloring_and_recovery(benchmark, name):
    pattern = _pattern(HESSIANS, name)
    rec = benchmark(star_and_recovery, pattern)
    benchmark.extra_info["colors"] = rec.ncolors


@pytest.mark.parametrize("name", list(HESSIANS))
def test_acyclic_coloring_and_recovery(benchmark, name):
    pattern = _pattern(HESSIANS, name)
    rec = benchmark(acyclic_and_recovery, pattern)
    benchmark.extra_info["colors"] = rec.ncolors


def test_banded_million_under_one_second():
    pattern = _pattern(JACOBIANS, "tridiagonal 1e6")
    seconds, colors = best_of(tc.column_coloring, pattern)
    assert max(colors) + 1 == 3 and seconds < 1.0


def test_arrow_1e4_star_under_160ms():
    pattern = _pattern(HESSIANS, "arrow N=1e4")
    seconds, rec = best_of(star_and_recovery, pattern)
    assert rec.ncolors == 2 and seconds < 0.160


@pytest.mark.parametrize("name", ["stencil5 100x100", "arrow N=1e3"])
def test_casadi_comparison(benchmark, name):
    casadi = pytest.importorskip("casadi")
    pattern = _pattern(HESSIANS, name)
    sparsity = casadi_sparsity(casadi, pattern)
    benchmark(sparsity.star_coloring)


# ---- Table ----------------------------------------------------------------------

def best_of(fn, *args, repeat=5):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def casadi_sparsity(casadi, pattern):
    coo = sp.coo_array(pattern)
    return casadi.Sparsity.triplet(pattern.shape[0], pattern.shape[1],
                                   coo.row.tolist(), coo.col.tolist())


def casadi_colors(pattern, star: bool):
    """``"colors / ms"`` of CasADi's uni_coloring / star_coloring, or None."""
    try:
        import casadi
    except ImportError:
        return None
    sparsity = casadi_sparsity(casadi, pattern)
    seconds, result = best_of(sparsity.star_coloring if star else sparsity.uni_coloring)
    return f"{result.size2()} / {seconds * 1e3:.2f}"


def main() -> None:
    rows = []
    for name in JACOBIANS:
        pattern = JACOBIANS[name]()
        seconds, colors = best_of(tc.column_coloring, pattern)
        rows.append(("column", name, max(colors) + 1, seconds,
                     casadi_colors(pattern, False) if pattern.shape[1] <= 10**5 else None))
    for name in HESSIANS:
        pattern = HESSIANS[name]()
        for kind, fn in (("star+recovery", star_and_recovery),
                         ("acyclic+recovery", acyclic_and_recovery)):
            seconds, rec = best_of(fn, pattern)
            ref = (casadi_colors(pattern, True)
                   if kind.startswith("star") and pattern.shape[0] <= 2 * 10**4 else None)
            rows.append((kind, name, rec.ncolors, seconds, ref))
    print(f"| {'algorithm':<17} | {'pattern':<24} | colors | time (ms) | CasADi colors / ms |")
    print(f"|{'-' * 19}|{'-' * 26}|-------:|----------:|-------------------:|")
    for kind, name, colors, seconds, ref in rows:
        ref = "" if ref is None else str(ref)
        print(f"| {kind:<17} | {name:<24} | {colors:>6} | {seconds * 1e3:>9.2f} | {ref:>18} |")


if __name__ == "__main__":
    sys.exit(main())
