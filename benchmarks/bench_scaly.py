"""Scaly Functions vs CasADi (pytest-benchmark, plus a report table).

Every workload is built twice from one Python description, once with
``tapead.scaly`` expressions and once with CasADi symbols, and both sides
are called the way a user calls them: ``f(x)`` on a numpy value (tapead
returns numpy values, CasADi a ``DM``).  Gradients are ``sc.gradient`` and
``casadi.gradient`` turned into Functions.

S1  per-call overhead: f(x) = sin(x * x) on a scalar, and its gradient
    (CasADi SX).
S2  a ~10 000-node scalar graph: an unrolled recurrence over the four
    elements of x, each step mixing mul, add, sin, sub, cos, div, exp and
    constants (CasADi SX); the time per node of each side's own graph.
S3  scalar code over a vector: f(x) = sum_{i<n-1} sin(x_i) x_{i+1}, written
    with ``x[i]``, n = 1000 (CasADi SX).
S4  an array graph: a two-layer tanh MLP on a length-1000 input plus an
    elementwise term, f(x) = w3 @ tanh(W2 @ tanh(W1 @ x + b1) + b2)
    + 1e-3 sum(sin(x) x) (CasADi MX; SX also reported).

Run the timings::

    python -m pytest benchmarks/bench_scaly.py --benchmark-enable

As quick tests (each case runs once and is checked against the other side)::

    python -m pytest benchmarks/bench_scaly.py

The table with per-call times, ns per node and ratios::

    PYTHONPATH=. python benchmarks/bench_scaly.py [--quick]

CasADi is optional: its cases are skipped (and its columns empty) when it is
not importable.  No test asserts a wall-clock time.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
from importlib.metadata import version
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

import tapead.scaly as sc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (benchmarks/common.py)
from common import Timing  # noqa: E402

DAG_STEPS = 900            # 11 nodes a step: ~10 000 nodes
INDEXED_N = 1000
MLP_N, MLP_H = 1000, 64


def casadi_or_none():
    try:
        import casadi
    except ImportError:
        return None
    return casadi


# ---- one description, two libraries -------------------------------------------

class ScalyMath:
    """The elementwise functions of the workloads on ``sc.Expr``."""
    sin = staticmethod(lambda e: e.sin())
    cos = staticmethod(lambda e: e.cos())
    exp = staticmethod(lambda e: e.exp())
    tanh = staticmethod(lambda e: e.tanh())
    total = staticmethod(lambda e: e.sum())
    row = staticmethod(lambda v: v)


class CasadiMath:
    """The same on CasADi symbols (column vectors)."""

    def __init__(self, ca):
        self.sin, self.cos, self.exp, self.tanh = ca.sin, ca.cos, ca.exp, ca.tanh
        self.total = ca.sum1
        self.row = lambda v: v.reshape(1, -1)


def tiny(x, m):
    return m.sin(x * x)


def recurrence(x: List[Any], m, steps: int = DAG_STEPS):
    """An unrolled recurrence over the scalars x[0..3]: 11 nodes a step.

    The state stays bounded (sin, cos, a positive denominator, exp of a
    bounded value) and every step reads an input again, so the gradient
    neither overflows nor underflows.
    """
    rng = np.random.default_rng(0)
    s0, s1, s2, s3 = x
    for k in range(steps):
        c1, c2 = (float(v) for v in rng.uniform(0.5, 1.5, 2))
        t1 = s0 * x[k % 4]
        t2 = m.sin(t1 + s2)
        t3 = m.cos(s3 - t2)
        t4 = t2 / (2.0 + t3)
        t5 = m.exp(t4 * c1)
        s0, s1, s2, s3 = t3, t4, t5 - c2, t2 * t5
    return s0 + s1 + s2 + s3


def indexed_sum(x: List[Any], m):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + m.sin(x[i]) * x[i + 1]
    return s


def mlp_weights(n: int = MLP_N, h: int = MLP_H):
    rng = np.random.default_rng(1)
    return (rng.normal(size=(h, n)) / math.sqrt(n), 0.1 * rng.normal(size=h),
            rng.normal(size=(h, h)) / math.sqrt(h), 0.1 * rng.normal(size=h),
            rng.normal(size=h) / math.sqrt(h))


def mlp(x, m, weights):
    W1, b1, W2, b2, w3 = weights
    h1 = m.tanh(W1 @ x + b1)
    h2 = m.tanh(W2 @ h1 + b2)
    return m.row(w3) @ h2 + 1e-3 * m.total(m.sin(x) * x)


# ---- the workloads: name -> (scaly Function, its gradient, input) ---------------

WORKLOADS = ("tiny", "dag", "indexed", "mlp")


def make_scaly(name: str) -> Tuple[sc.Function, sc.Function, Any]:
    m = ScalyMath
    if name == "tiny":
        f = sc.function(sc.L("x", ()), sc.L("y", ...))(lambda x: tiny(x, m))
        x = np.float64(0.3)
    elif name == "dag":
        f = sc.function(sc.L("x", 4), sc.L("y", ...))(
            lambda x: recurrence([x[i] for i in range(4)], m))
        x = np.array([0.1, 0.2, 0.3, 0.4])
    elif name == "indexed":
        f = sc.function(sc.L("x", INDEXED_N), sc.L("y", ...))(
            lambda x: indexed_sum([x[i] for i in range(INDEXED_N)], m))
        x = np.random.default_rng(0).uniform(-1.0, 1.0, INDEXED_N)
    elif name == "mlp":
        weights = mlp_weights()
        f = sc.function(sc.L("x", MLP_N), sc.L("y", ...))(lambda x: mlp(x, m, weights))
        x = np.random.default_rng(0).normal(size=MLP_N)
    else:
        raise KeyError(name)
    return f, sc.gradient(f, "y", "x"), x


def make_casadi(name: str, kind: str = "SX"):
    """(f, gradient Function) in CasADi with ``kind`` symbols ("SX" or "MX")."""
    ca = casadi_or_none()
    if ca is None:
        return None
    m = CasadiMath(ca)
    sym = getattr(ca, kind).sym
    if name == "tiny":
        X = sym("x")
        Y = tiny(X, m)
    elif name == "dag":
        X = sym("x", 4)
        Y = recurrence([X[i] for i in range(4)], m)
    elif name == "indexed":
        X = sym("x", INDEXED_N)
        Y = indexed_sum([X[i] for i in range(INDEXED_N)], m)
    elif name == "mlp":
        X = sym("x", MLP_N)
        Y = mlp(X, m, mlp_weights())
    else:
        raise KeyError(name)
    return ca.Function("f", [X], [Y]), ca.Function("g", [X], [ca.gradient(Y, X)])


def casadi_kind(name: str) -> str:
    return "MX" if name == "mlp" else "SX"


def tape_nodes(fn: sc.Function) -> int:
    """Nodes of the tape a (called) Function replays."""
    return fn._programs[True].n_nodes


def check_same(ours, theirs) -> None:
    np.testing.assert_allclose(np.ravel(ours), np.ravel(np.array(theirs)), rtol=1e-9,
                               atol=1e-12)


# ---- pytest-benchmark --------------------------------------------------------------

_CACHE: Dict[Tuple[str, str], Any] = {}


def _scaly(name):
    if ("scaly", name) not in _CACHE:
        f, g, x = make_scaly(name)
        f(x), g(x)                                    # lower both once
        _CACHE[("scaly", name)] = (f, g, x)
    return _CACHE[("scaly", name)]


def _casadi(name):
    if ("casadi", name) not in _CACHE:
        _CACHE[("casadi", name)] = make_casadi(name, casadi_kind(name))
    return _CACHE[("casadi", name)]


@pytest.mark.parametrize("which", ["f", "grad"])
@pytest.mark.parametrize("name", WORKLOADS)
def test_scaly(benchmark, name, which):
    f, g, x = _scaly(name)
    fn = f if which == "f" else g
    out = benchmark(fn, x)
    assert isinstance(out, (np.float64, np.ndarray))
    if casadi_or_none() is not None:
        cf, cg = _casadi(name)
        check_same(out, (cf if which == "f" else cg)(x))


@pytest.mark.parametrize("which", ["f", "grad"])
@pytest.mark.parametrize("name", WORKLOADS)
def test_casadi(benchmark, name, which):
    if casadi_or_none() is None:
        pytest.skip("casadi is not installed")
    cf, cg = _casadi(name)
    _, _, x = _scaly(name)
    benchmark((cf if which == "f" else cg), x)


# ---- the report ----------------------------------------------------------------

def measure(fn: Callable, *args, budget: float = 0.02, total: float = 1.5) -> Timing:
    """Min and median seconds per call over 5 to 200 short repeats."""
    return common.measure(fn, *args, budget=budget, total=total, min_repeat=5,
                          max_repeat=200)


def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "--"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


def report(total: float = 1.5) -> str:
    ca = casadi_or_none()
    lines = [f"Python {platform.python_version()}, numpy {np.__version__}, "
             f"casadi {version('casadi') if ca else 'not installed'}; "
             f"{platform.machine()}, {os.cpu_count()} cores; "
             f"{datetime.date.today().isoformat()}", ""]
    lines += ["| workload | fn | tapead min (median) | tape nodes | ns/node | "
              "casadi min (median) | casadi nodes | ns/node | tapead/casadi |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in WORKLOADS:
        f, g, x = _scaly(name)
        theirs = make_casadi(name, casadi_kind(name)) if ca else None
        for which, ours, cfn in (("f", f, theirs and theirs[0]),
                                 ("grad", g, theirs and theirs[1])):
            t_ours = measure(ours, x, total=total)
            n_ours = tape_nodes(ours)
            row = [name, which, f"{fmt_time(t_ours[0])} ({fmt_time(t_ours[1])})",
                   str(n_ours), f"{t_ours[0] * 1e9 / n_ours:.2f}"]
            if cfn is not None:
                check_same(ours(x), cfn(x))
                t_theirs = measure(cfn, x, total=total)
                n_theirs = cfn.n_instructions()
                row += [f"{fmt_time(t_theirs[0])} ({fmt_time(t_theirs[1])}) "
                        f"{casadi_kind(name)}", str(n_theirs),
                        f"{t_theirs[0] * 1e9 / n_theirs:.2f}",
                        f"{t_ours[0] / t_theirs[0]:.2f}"]
            else:
                row += ["--"] * 4
            lines.append("| " + " | ".join(row) + " |")
    if ca is not None:
        lines += ["", "CasADi SX on the array workload (every element a node):", ""]
        cf, cg = make_casadi("mlp", "SX")
        _, _, x = _scaly("mlp")
        for which, cfn in (("f", cf), ("grad", cg)):
            t = measure(cfn, x, total=total)
            lines.append(f"* mlp {which}: {fmt_time(t[0])} ({fmt_time(t[1])}), "
                         f"{cfn.n_instructions()} instructions")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats (about 0.3 s a case instead of 1.5 s)")
    args = parser.parse_args(argv)
    print(report(total=0.3 if args.quick else 1.5))


if __name__ == "__main__":
    sys.exit(main())
