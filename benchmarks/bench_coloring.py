"""Benchmarks for tapead.coloring (pytest-benchmark), with CasADi if importable.

Run the timings::

    python -m pytest benchmarks/bench_coloring.py --benchmark-enable

or print the tables (colors of tapead's order="auto" against CasADi 3.8 for
star, acyclic and column coloring on every case, then the arrow N = 10**4
sparse Hessian's build and evaluation against CasADi)::

    PYTHONPATH=. python benchmarks/bench_coloring.py

Targets: a 10**6-column banded pattern colored in under 1 s; arrow N = 10**4
star coloring plus recovery build well under 160 ms; colors <= CasADi's on
every case; arrow N = 10**4 ``ta.sparse_hessian(f)(x)`` evaluation <= 0.5 ms.
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


# ---- Tables ---------------------------------------------------------------------

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


#: every case of the issue: (name, builder, symmetric)
CASES = [
    ("tridiagonal 1e4", lambda: tridiagonal(10**4)),
    ("tridiagonal 1e6", lambda: tridiagonal(10**6)),
    ("arrow N=50", lambda: arrow(50)),
    ("arrow N=1e3", lambda: arrow(10**3)),
    ("arrow N=1e4", lambda: arrow(10**4)),
    ("arrow N=1e5", lambda: arrow(10**5)),
    ("stencil5 100x100", lambda: stencil5(100)),
    ("stencil5 1000x1000", lambda: stencil5(1000)),
    ("random sym 1e3, ~6/row", lambda: random_symmetric(10**3, 3)),
    ("random sym 1e4, ~6/row", lambda: random_symmetric(10**4, 3)),
    ("random sym 1e4, ~10/row", lambda: random_symmetric(10**4, 5)),
]
#: CasADi's colorings are quadratic on a dense row (arrow N=1e5: ~10-30 s each)
CASADI_MAX_DEGREE = 2 * 10**4


def _ncolors(colors) -> int:
    return max(colors) + 1 if len(colors) else 0


def color_rows():
    """One row per case: tapead (order="auto") vs CasADi colors and seconds."""
    try:
        import casadi
    except ImportError:
        casadi = None
    for name, build in CASES:
        pattern = build()
        row = {"case": name}
        for kind, fn in (("star", tc.star_coloring), ("acyclic", tc.acyclic_coloring),
                         ("column", tc.column_coloring)):
            seconds, colors = best_of(fn, pattern, "auto", repeat=2)
            row[kind] = (_ncolors(colors), seconds)
        max_degree = int(np.diff(sp.csr_array(pattern).indptr).max())
        if casadi is not None and max_degree <= CASADI_MAX_DEGREE:
            s = casadi_sparsity(casadi, pattern)
            for kind, fn in (("casadi star", s.star_coloring),
                             ("casadi star2", s.star_coloring2),
                             ("casadi column", s.uni_coloring)):
                seconds, result = best_of(fn, repeat=2)
                row[kind] = (result.size2(), seconds)
        yield row


def arrow_hessian_timings(n_stages: int = 10**4, repeat: int = 300) -> dict:
    """Build (first call) and evaluation (min over ``repeat`` calls) in seconds
    of the arrow Hessian of ``sum(sin(x[:-1] * x[-1]))``, tapead vs CasADi."""
    import tapead as ta
    import tapead.numpy as tnp
    x = np.random.default_rng(0).uniform(0.5, 1.5, n_stages + 1)
    out = {}
    start = time.perf_counter()
    hess = ta.sparse_hessian(lambda v: tnp.sum(tnp.sin(v[:-1] * v[-1])))
    H = hess(x)
    out["tapead build"] = time.perf_counter() - start
    out["tapead eval"], _ = best_of(hess, x, repeat=repeat)
    out["tapead colors"] = hess.recovery(x).ncolors
    try:
        import casadi
    except ImportError:
        return out
    start = time.perf_counter()
    v = casadi.SX.sym("x", n_stages + 1)
    Hs = casadi.hessian(casadi.sum1(casadi.sin(v[:-1] * v[-1])), v)[0]
    F = casadi.Function("H", [v], [Hs])
    Hc = F(x)
    out["casadi build"] = time.perf_counter() - start
    out["casadi eval"], _ = best_of(F, x, repeat=repeat)
    dense_ok = np.allclose(Hc.sparse().toarray()[-5:, -5:], H.toarray()[-5:, -5:])
    out["same values"] = bool(dense_ok)
    return out


def main() -> None:
    def cell(row, kind):
        if kind not in row:
            return "–"
        k, seconds = row[kind]
        return f"{k} ({seconds * 1e3:.0f} ms)"

    print("Colors, tapead order='auto' vs CasADi 3.8 (best of 2; CasADi star = "
          "star_coloring, GMP 2005 largest first; star2 = star_coloring2, GTMP 2007)")
    print()
    print("| case | star | acyclic | CasADi star / star2 | star ratio | column | "
          "CasADi column | column ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in color_rows():
        ref = [row[k][0] for k in ("casadi star", "casadi star2") if k in row]
        star_ratio = f"{row['star'][0] / min(ref):.2f}" if ref else "–"
        col_ratio = (f"{row['column'][0] / row['casadi column'][0]:.2f}"
                     if "casadi column" in row else "–")
        both = (f"{row['casadi star'][0]} / {row['casadi star2'][0]}"
                if "casadi star" in row else "–")
        print(f"| {row['case']} | {cell(row, 'star')} | {cell(row, 'acyclic')} | {both} | "
              f"{star_ratio} | {cell(row, 'column')} | {cell(row, 'casadi column')} | "
              f"{col_ratio} |", flush=True)
    print()
    t = arrow_hessian_timings()
    print("Arrow N=1e4 Hessian, sum(sin(x[:-1] * x[-1])) (build = first call; "
          "eval = min of 300 calls)")
    print()
    print("| | build (ms) | eval (ms) |")
    print("|---|---:|---:|")
    for who in ("tapead", "casadi"):
        if f"{who} build" in t:
            print(f"| {who} | {t[who + ' build'] * 1e3:.1f} | {t[who + ' eval'] * 1e3:.3f} |")
    if "same values" in t:
        print(f"\ntapead colors: {t['tapead colors']}; values agree with CasADi: "
              f"{t['same values']}")


if __name__ == "__main__":
    sys.exit(main())
