"""Print the training-loop and checkpointed-loop tables (markdown).

Usage::

    PYTHONPATH=. python benchmarks/report_training.py [--epochs 60] [--repeat 5]

T1 (terrain MLP): every trainer of ``bench_training.TRAINERS`` that can be
imported runs one warm-up epoch (JAX compiles its step there; the compile
time is reported apart), then the full run of ``--epochs`` epochs (one run,
timed whole, its parameters compared with tapead's), then ``--repeat`` short
runs of two epochs whose best gives the per-step time at a quiet moment
(the machine may be shared; the short runs of the trainers take turns).
Ratios use the best per-step times.

R2 (rollout): the gradient of the 10 000-step scalar rollout and the
2 000-step 1 000-float64 rollout, stored (``checkpoints=None``) and with
revolve (s = 10, 20, 50): best of three wall times, tracemalloc's peak
during one more call, the bytes of the outer tape (``tape.memory()``;
scalar nodes live in C memory that tracemalloc does not see), the number of
step-body calls, and the largest relative gradient difference from the
stored tape.  It takes a few minutes in all.

Measured 2026-12-01 under load (2 shared cores, load average 2-3 at start,
other jobs running), ``--epochs 60 --repeat 3 --skip-rollouts``: tapead 101 us
a step (best), numpy by hand 92 us, 1.10x (whole runs 100 us against 102 us);
two more runs at load 2.5-4.8 gave 0.65x and 1.32x, so with three short
repeats the ratio is only as good as the quietest moment.  Interleaved runs
(minimum of 12 one-epoch runs each, three times) gave 1.05-1.06x, against
1.17-1.20x before that day's changes; the same day before them this report
gave 108 us against 94 us, 1.15x.  jax.jit of the step: 1.2-1.4x tapead.
"""
from __future__ import annotations

import argparse
import datetime
from importlib.metadata import PackageNotFoundError, version
import math
import os
import platform
import sys
import time
import tracemalloc
from typing import Dict, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import cpu_name  # noqa: E402  (benchmarks/common.py)
import bench_training as bt  # noqa: E402

import tapead  # noqa: E402

SHORT_EPOCHS = 2


def _version(name: str) -> Optional[str]:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _importable(name: Optional[str]) -> bool:
    if name is None:
        return True
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def machine() -> str:
    cpu = cpu_name()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores, no GPU; Python {platform.python_version()}, "
            f"load average at start {load:.2f}")


def versions() -> str:
    parts = [f"tapead {tapead.__version__}", f"numpy {np.__version__}"]
    for name in ("autograd", "jax", "torch"):
        v = _version(name)
        if v is not None:
            parts.append(f"{name} {v}")
    return ", ".join(parts)


# ---- T1 ------------------------------------------------------------------------

def run_terrain(epochs: int, repeat: int) -> Dict[str, dict]:
    X, y, _, _ = bt.terrain_data()
    rows: Dict[str, dict] = {}
    for name, (module, trainer) in bt.TRAINERS.items():
        if not _importable(module):
            continue
        row: dict = {}
        if name == "jax.jit step":
            row["compile_s"] = bt.jax_compile_seconds()
        trainer(X, y, epochs=1)                                   # warm-up
        start = time.perf_counter()
        result = trainer(X, y, epochs=epochs)
        row["total_s"] = time.perf_counter() - start
        row["run_step_us"] = 1e6 * row["total_s"] / bt.n_steps(len(X), epochs)
        row["result"] = result
        row["rmse"] = bt.terrain_test_rmse(result)
        row["best"] = math.inf
        rows[name] = row
        print(f"  {name}: {row['total_s']:.2f} s", file=sys.stderr)
    # the short runs interleaved (each trainer once per round), so that a slow
    # spell of a shared machine falls on all of them, not on one trainer's
    for _ in range(repeat):
        for name, (module, trainer) in bt.TRAINERS.items():
            if name in rows:
                start = time.perf_counter()
                trainer(X, y, epochs=SHORT_EPOCHS)
                rows[name]["best"] = min(rows[name]["best"], time.perf_counter() - start)
    for row in rows.values():
        row["best_step_us"] = 1e6 * row.pop("best") / bt.n_steps(len(X), SHORT_EPOCHS)
    return rows


def print_terrain(rows: Dict[str, dict], epochs: int) -> None:
    ref = rows["tapead"]
    print(f"### T1: terrain MLP 2-64-64-1, tanh, float64, batch 64, SGD lr 0.1, "
          f"{epochs} epochs ({bt.n_steps(bt.N_TRAIN, epochs)} steps)\n")
    print("| trainer | seconds, whole run | us/step, whole run | us/step, best | "
          "time / tapead | test RMSE [m] | RMSE - tapead's [m] | max abs weight diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        ratio = r["best_step_us"] / ref["best_step_us"]
        print(f"| {name} | {r['total_s']:.2f} | {r['run_step_us']:.0f} | "
              f"{r['best_step_us']:.0f} | {ratio:.2f} | {r['rmse']:.4f} | "
              f"{r['rmse'] - ref['rmse']:.1e} | "
              f"{bt.max_param_diff(r['result'][0], ref['result'][0]):.1e} |")
    if "jax.jit step" in rows:
        print(f"\nJAX compile of the step (two batch shapes), not in the times above: "
              f"{rows['jax.jit step']['compile_s']:.2f} s.")
    print("\n| ratio (best us/step) | measured | target |")
    print("|---|---:|---|")
    t = ref["best_step_us"]

    def line(label, name, target, invert=False):
        if name in rows:
            v = rows[name]["best_step_us"]
            print(f"| {label} | {(t / v if invert else v / t):.2f} | {target} |")
    line("tapead / numpy by hand", "numpy by hand", "<= 1.1", invert=True)
    if "tapead, numpy's update" in rows and "numpy by hand" in rows:
        v = rows["tapead, numpy's update"]["best_step_us"] / rows["numpy by hand"]["best_step_us"]
        print(f"| tapead with numpy's update / numpy by hand (the gradients alone) | "
              f"{v:.2f} | <= 1.1 |")
    line("jax.jit step / tapead", "jax.jit step", "> 1 (tapead faster)")
    line("torch eager 1 thread / tapead", "torch eager, 1 thread", ">= 3.3 (tapead <= 0.3x)")
    line("torch eager default threads / tapead", "torch eager, default threads",
         ">= 3.3 (tapead <= 0.3x)")
    line("autograd / tapead", "autograd", "--")
    print("\nSeed 004's lab, 60 epochs: its own engine 1.8 s, JAX (jit) 2.6 s, "
          "test RMSE 90.4 m.\n")


# ---- R2 ------------------------------------------------------------------------

def run_rollouts():
    rows = []
    for problem, (length, _) in bt.ROLLOUTS.items():
        x0 = bt.rollout_x0(problem)
        full = None
        for s in bt.CHECKPOINTS:
            counter = [0]
            vg = bt.rollout_value_and_grad(problem, length, s, counter)
            value, grads = vg(x0, bt.P0)
            calls = counter[0]
            if s is None:
                full = grads
            best = math.inf
            for _ in range(3):
                start = time.perf_counter()
                vg(x0, bt.P0)
                best = min(best, time.perf_counter() - start)
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                vg(x0, bt.P0)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            diff = max(float(np.max(np.abs(np.asarray(g) - np.asarray(f))
                                    / np.maximum(np.abs(np.asarray(f)), 1e-300)))
                       for g, f in zip(grads, full))
            rows.append(dict(problem=problem, length=length, s=s, seconds=best, peak=peak,
                             tape=bt.tape_bytes(problem, length, s), calls=calls,
                             diff=diff))
            print(f"  rollout {problem} s={s}: {best:.3f} s", file=sys.stderr)
    return rows


def print_rollouts(rows) -> None:
    print("### R2: gradient of a rollout x_{i+1} = x_i + h sin(p x_i) "
          "w.r.t. (x0, p), `ta.scan(..., checkpoints=s)`\n")
    print("| state | L | checkpoints | seconds (best of 3) | tracemalloc peak | "
          "outer tape bytes | step-body calls | max rel. grad diff vs stored |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        state = "scalar" if r["problem"] == "scalar" else "1 000 float64"
        s = "None (every step)" if r["s"] is None else f"s = {r['s']}"
        print(f"| {state} | {r['length']:,} | {s} | {r['seconds']:.3f} | "
              f"{r['peak'] / 1e3:,.0f} kB | {r['tape'] / 1e3:,.1f} kB | {r['calls']:,} | "
              f"{r['diff']:.1e} |")
    print("\ntracemalloc sees numpy arrays and Python objects; the scalar nodes of the "
          "stored tape (values and partials in C arrays) are counted only in the "
          "outer-tape column.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=bt.EPOCHS)
    ap.add_argument("--repeat", type=int, default=5,
                    help="short two-epoch runs per trainer for the best per-step time")
    ap.add_argument("--skip-terrain", action="store_true")
    ap.add_argument("--skip-rollouts", action="store_true")
    args = ap.parse_args(argv)
    print(f"Measured {datetime.date.today().isoformat()} on {machine()}.  ")
    print(f"{versions()}.\n")
    if not args.skip_terrain:
        print_terrain(run_terrain(args.epochs, args.repeat), args.epochs)
    if not args.skip_rollouts:
        print_rollouts(run_rollouts())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
