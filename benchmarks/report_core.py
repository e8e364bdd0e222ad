"""Print the core benchmark table (B1, B2, B3) with ratios against the targets.

Usage::

    PYTHONPATH=. python benchmarks/report_core.py [--quick]

Every case is timed with ``timeit``: ``repeat`` runs of ``number`` calls
(``number`` chosen so that a run lasts about 0.2 s), reported as the
minimum and the median per call.  ``--quick`` drops the cases that take
seconds per call (tapead forward mode and JAX eager at n = 1000, torch at
n = 10 000).  Peers that are not importable are left out.  The workloads
are the ones in ``bench_core.py``.
"""
from __future__ import annotations

import argparse
import datetime
from importlib.metadata import version
import os
import platform
import sys
from typing import Dict, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402

from tapead._core import Tape  # noqa: E402

from common import Timing, measure  # noqa: E402,F401  (shared with the other reports)


def peer(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def fmt(seconds: Optional[float]) -> str:
    if seconds is None:
        return "--"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def cell(t: Optional[Timing]) -> str:
    return "--" if t is None else f"{fmt(t[0])} ({fmt(t[1])})"


def run_b1(quick: bool) -> Tuple[Dict[str, Dict[int, Timing]], Dict[int, float]]:
    autograd, torch, jax = peer("autograd"), peer("torch"), peer("jax")
    rows: Dict[str, Dict[int, Timing]] = {}
    compile_s: Dict[int, float] = {}
    for n in bc.B1_SIZES:
        x = bc.b1_input(n)
        cases = {
            "python floats, math.sin": bc.loop_math,
            "python floats, np.sin": bc.loop_np,
            "tapead value+grad, tnp.sin": bc.tapead_vg_tnp,
            "tapead value+grad, np.sin": bc.tapead_vg_np,
        }
        if n <= (100 if quick else 1000):
            cases["tapead forward (n jvp)"] = bc.tapead_forward
        if autograd is not None and n <= 1000:        # O(n^2): 5 min a call at 1e4
            cases["autograd"] = bc.make_autograd_b1()
        if torch is not None and n <= (1000 if quick else 10_000):
            torch.set_num_threads(1)
            cases["torch eager"] = bc.make_torch_b1()
        if jax is not None:
            jax.config.update("jax_enable_x64", True)
            if n <= (100 if quick else 1000):
                cases["jax eager value_and_grad"] = bc.make_jax_eager_b1()
            if n <= 1000:                             # 1e4: compile takes minutes
                fn, compile_s[n] = bc.make_jax_jit_b1(x)
                cases["jax.jit(value_and_grad)"] = fn
                fn, _ = bc.make_jax_jit_b1_array(x)
                cases["jax.jit(value_and_grad), array in"] = fn
        for name, fn in cases.items():
            result = fn(x)
            if name.startswith("python"):
                assert abs(result - bc.exact_value_and_grad(x)[0]) < 1e-9
            else:
                bc.check(result, x)
            rows.setdefault(name, {})[n] = measure(fn, x)
            print(f"  B1 n={n:<6} {name:<28} {cell(rows[name][n])}", file=sys.stderr)
    return rows, compile_s


def run_b2() -> Tuple[Dict[str, Dict[int, Timing]], Dict[int, float]]:
    autograd, torch, jax = peer("autograd"), peer("torch"), peer("jax")
    rows: Dict[str, Dict[int, Timing]] = {}
    compile_s: Dict[int, float] = {}
    for n in bc.B2_SIZES:
        x = bc.b2_input(n)
        cases = {
            "numpy evaluation only": bc.vec_numpy,
            "tapead value+grad, tnp": bc.tapead_vec_vg_tnp,
            "tapead value+grad, np protocol": bc.tapead_vec_vg_np,
        }
        if autograd is not None:
            cases["autograd"] = bc.make_autograd_b2()
        if torch is not None:
            cases["torch (1 thread)"] = bc.make_torch_b2()
        if jax is not None:
            jax.config.update("jax_enable_x64", True)
            fn, compile_s[n] = bc.make_jax_jit_b2(x)
            cases["jax.jit(value_and_grad)"] = fn
        for name, fn in cases.items():
            result = fn(x)
            if name.startswith("numpy"):
                assert abs(result - bc.exact_value_and_grad(x)[0]) < 1e-6
            else:
                bc.check(result, x)
            rows.setdefault(name, {})[n] = measure(fn, x)
            print(f"  B2 n={n:<8} {name:<30} {cell(rows[name][n])}", file=sys.stderr)
    return rows, compile_s


def run_b3() -> Dict[int, dict]:
    out = {}
    for n_nodes in bc.B3_SIZES:
        tape, top, wrt = bc.record_chain(n_nodes)
        t = measure(bc.sweep, tape, top, wrt, total=3.0)
        assert tape.last_sweep_steps == tape.n_nodes
        out[n_nodes] = {"time": t, "n": tape.n_nodes,
                        "nodes_per_s": tape.n_nodes / t[0],
                        "nodes_per_s_median": tape.n_nodes / t[1],
                        "bytes_per_node": tape.memory()["total"] / tape.n_nodes}
        print(f"  B3 {n_nodes:.0e} nodes {cell(t)}", file=sys.stderr)
        del tape
    return out


def table(title: str, rows: Dict[str, Dict[int, Timing]], sizes, label) -> str:
    lines = [f"### {title}", "",
             "| case | " + " | ".join(label(n) for n in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for name, by_n in rows.items():
        lines.append(f"| {name} | " + " | ".join(cell(by_n.get(n)) for n in sizes) + " |")
    return "\n".join(lines)


def ratio(rows, a: str, b: str, n: int) -> Optional[float]:
    if n in rows.get(a, {}) and n in rows.get(b, {}):
        return rows[a][n][0] / rows[b][n][0]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="skip the cases that take seconds per call")
    parser.add_argument("--parts", default="b1,b2,b3",
                        help="comma-separated benchmarks to run (b1, b2, b3)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    b1, b1_compile = run_b1(args.quick) if "b1" in parts else ({}, {})
    b2, b2_compile = run_b2() if "b2" in parts else ({}, {})
    b3 = run_b3() if "b3" in parts else {}

    print(f"Measured {datetime.date.today().isoformat()} on {platform.machine()}, "
          f"{os.cpu_count()} cores, no GPU; Python {platform.python_version()}, "
          f"numpy {np.__version__}"
          + "".join(f", {m} {version(m)}"
                    for m in ("autograd", "torch", "jax") if peer(m) is not None) + ".")
    print("Times per call: min (median) of timeit repeats.\n")
    if b1:
        print(table("B1: scalar loop over a list of floats", b1, bc.B1_SIZES,
                    lambda n: f"n={n}"))
    if b1_compile:
        print("\njax.jit compile (excluded above): " + ", ".join(
            f"n={n}: {fmt(s)}" for n, s in b1_compile.items()))
    print()
    if b2:
        print(table("B2: vectorised", b2, bc.B2_SIZES, lambda n: f"n={n:.0e}"))
    if b2_compile:
        print("\njax.jit compile (excluded above): " + ", ".join(
            f"n={n:.0e}: {fmt(s)}" for n, s in b2_compile.items()))
    print("\n### B3: reverse sweep of a recorded scalar chain\n")
    print("| nodes | sweep time | M nodes/s (min) | M nodes/s (median) | bytes/node (memory()) |")
    print("|---:|---:|---:|---:|---:|")
    for n_nodes, r in b3.items():
        print(f"| {r['n']:.2e} | {cell(r['time'])} | {r['nodes_per_s'] / 1e6:.0f} | "
              f"{r['nodes_per_s_median'] / 1e6:.0f} | {r['bytes_per_node']:.1f} |")
    print(f"\n`Tape.bytes_per_scalar_node` = {Tape.bytes_per_scalar_node}")

    tv, tn = "tapead value+grad, tnp.sin", "tapead value+grad, np.sin"
    best_b3 = max((r["nodes_per_s"] for r in b3.values()), default=None)
    worst_bytes = max((r["bytes_per_node"] for r in b3.values()), default=None)
    targets = [
        ("B1 n=1000 tapead(tnp) / math loop", ratio(b1, tv, "python floats, math.sin", 1000),
         "<= 3", lambda r: r <= 3),
        ("B1 n=1000 tapead(np) / np loop", ratio(b1, tn, "python floats, np.sin", 1000),
         "<= 3", lambda r: r <= 3),
        ("B1 n=1000 autograd / tapead(tnp)", ratio(b1, "autograd", tv, 1000),
         ">= 100", lambda r: r >= 100),
        ("B1 n=1000 torch eager / tapead(tnp)", ratio(b1, "torch eager", tv, 1000),
         ">= 50", lambda r: r >= 50),
        ("B1 n=1000 jax.jit steady / tapead(tnp)",
         ratio(b1, "jax.jit(value_and_grad)", tv, 1000), ">= 4", lambda r: r >= 4),
        ("B1 n=1000 jax.jit steady, array in / tapead(tnp)",
         ratio(b1, "jax.jit(value_and_grad), array in", tv, 1000), ">= 4", lambda r: r >= 4),
        ("B2 n=1e6 tapead(tnp) grad / numpy eval",
         ratio(b2, "tapead value+grad, tnp", "numpy evaluation only", 10**6),
         "<= 1.5", lambda r: r <= 1.5),
        ("B2 n=1e6 tapead(np) grad / numpy eval",
         ratio(b2, "tapead value+grad, np protocol", "numpy evaluation only", 10**6),
         "<= 1.5", lambda r: r <= 1.5),
        ("B2 n=1e6 torch (1 thread) / tapead(tnp)",
         ratio(b2, "torch (1 thread)", "tapead value+grad, tnp", 10**6),
         ">= 1 (stretch)", lambda r: r >= 1),
        ("B2 n=1e6 jax.jit / tapead(tnp)",
         ratio(b2, "jax.jit(value_and_grad)", "tapead value+grad, tnp", 10**6), "(report)",
         None),
        ("B3 reverse sweep, M nodes/s", best_b3 and best_b3 / 1e6, ">= 200",
         lambda r: r >= 200),
        ("B3 bytes/node", worst_bytes, "<= 40", lambda r: r <= 40),
    ]
    print("\n### Targets (ratios of minimum times)\n")
    print("| metric | measured | target | status |")
    print("|---|---:|---:|---|")
    for name, value, target, ok in targets:
        if value is None:
            print(f"| {name} | -- | {target} | not measured |")
            continue
        status = "" if ok is None else ("met" if ok(value) else "**missed**")
        print(f"| {name} | {value:.3g} | {target} | {status} |")


if __name__ == "__main__":
    main()
