"""Run HIPS autograd's examples with autograd and with tapead.autograd.

    python benchmarks/autograd_examples.py /path/to/autograd-source [--reps 1] [--only a,b]

The examples are read from the source tree given (a checkout of
github.com/HIPS/autograd), never copied into this repository.  Each is
copied into a temporary directory twice: once as it is and once with every
``autograd`` name changed to ``tapead.autograd`` (the whole migration).  In
both copies, identically:

* iteration counts are reduced (``num_iters=N`` and ``range(N)`` literals of
  100 or more become ``--iters``; ``num_epochs`` becomes 1; scipy
  ``minimize`` calls get ``options={"maxiter": --iters}``);
* matplotlib is replaced by a stub that draws nothing (so plotting costs
  nothing in the timings; ``imread`` still reads images);
* MNIST, which the examples download, is replaced by generated images and
  labels of the same shapes (fewer of them);
* numpy's global random stream and ``RandomState()`` without a seed are
  seeded with 0, so that both runs draw the same numbers.

Then each example runs as a script with autograd and with tapead,
interleaved (autograd, tapead, autograd, tapead, ... ``--reps`` times), and
the numbers each prints are compared: the table gives the largest relative
difference of the printed numbers and the wall times (best of the reps).
"""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

NAME = re.compile(r"(?<![\w.])autograd(?=[\s.,;)]|$)", re.M)
FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

MPL_STUB = '''"""matplotlib stand-in: every call does nothing (benchmarks/autograd_examples.py)."""
import numpy as _np


class _Nothing:
    def __getattr__(self, name):
        return _Nothing()

    def __call__(self, *args, **kwargs):
        return _Nothing()

    def __iter__(self):
        return iter([_Nothing(), _Nothing()])

    def __getitem__(self, key):
        return _Nothing()

    def __setitem__(self, key, value):
        pass


def imread(path, *args, **kwargs):
    from PIL import Image
    a = _np.asarray(Image.open(path), dtype=float)
    return a / 255.0


def __getattr__(name):
    return _Nothing()
'''

MNIST_STUB = '''"""Generated stand-in for the MNIST download (benchmarks/autograd_examples.py)."""
import numpy as np


def mnist():
    rs = np.random.RandomState(0)
    train_images = rs.randint(0, 256, size=(1000, 28, 28)).astype(np.uint8)
    train_labels = rs.randint(0, 10, size=1000).astype(np.uint8)
    test_images = rs.randint(0, 256, size=(200, 28, 28)).astype(np.uint8)
    test_labels = rs.randint(0, 10, size=200).astype(np.uint8)
    return train_images, train_labels, test_images, test_labels
'''


SEED = '''"""Seeds numpy's global stream and unseeded RandomState() (deterministic runs)."""
import numpy as _np

_np.random.seed(0)
_Base = _np.random.RandomState


class RandomState(_Base):
    def __init__(self, seed=0):
        super().__init__(0 if seed is None else seed)


_np.random.RandomState = RandomState
'''


def reduce_iterations(src: str, iters: int) -> str:
    cap = lambda m: str(min(int(m.group(2)), iters))  # noqa: E731
    src = re.sub(r"(num_iters\s*=\s*)(\d+)", lambda m: m.group(1) + cap(m), src)
    src = re.sub(r"(range\()(\d{3,})(\))", lambda m: m.group(1) + cap(m) + m.group(3), src)
    src = re.sub(r"(num_epochs\s*=\s*)(\d+)", lambda m: m.group(1) + "1", src)
    src = re.sub(r"(simulation_timesteps\s*=\s*)(\d+)", lambda m: m.group(1) + "10", src)
    src = re.sub(r'("maxiter":\s*)(\d+)', lambda m: m.group(1) + cap(m), src)
    src = re.sub(r'method="CG"(?![^)]*options)', f'method="CG", options={{"maxiter": {iters}}}',
                 src)
    return src


def prepare(source: pathlib.Path, dest: pathlib.Path, to_tapead: bool, iters: int) -> None:
    shutil.copytree(source / "examples", dest / "examples")
    stub = dest / "stubs" / "matplotlib"
    stub.mkdir(parents=True)
    for mod in ("__init__", "pyplot", "image", "cm"):
        (stub / f"{mod}.py").write_text(MPL_STUB)
    (dest / "stubs" / "sitecustomize.py").write_text(SEED)
    for p in list((dest / "examples").rglob("*.py")):
        src = reduce_iterations(p.read_text(), iters)
        if to_tapead:
            src = NAME.sub("tapead.autograd", src)
        p.write_text(src)
    (dest / "examples" / "data_mnist.py").write_text(MNIST_STUB)


def run_one(dest: pathlib.Path, script: pathlib.Path, timeout: float):
    env = {"PYTHONPATH": str(dest / "stubs"), "PATH": "/usr/bin:/bin",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, script.name], cwd=script.parent, env=env,
                           capture_output=True, text=True, timeout=timeout)
        ok, out, err = p.returncode == 0, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        ok, out, err = False, e.stdout or "", "timeout"
        out = out.decode() if isinstance(out, bytes) else out
    return ok, out, err, time.perf_counter() - t0


def compare(a: str, b: str):
    """(number of printed numbers, largest relative difference) or a reason."""
    na, nb = FLOAT.findall(a), FLOAT.findall(b)
    note = "" if len(na) == len(nb) else f" ({len(na)} vs {len(nb)} numbers: prefix)"
    worst = 0.0
    for x, y in zip(na, nb):
        x, y = float(x), float(y)
        d = abs(x - y) / max(abs(x), abs(y), 1e-300) if x != y else 0.0
        worst = max(worst, d)
    return min(len(na), len(nb)), f"{worst:.1e}{note}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=pathlib.Path)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    root = pathlib.Path(tempfile.mkdtemp(prefix="autograd_examples_"))
    dirs = {}
    for which, to_tapead in (("autograd", False), ("tapead", True)):
        dirs[which] = root / which
        prepare(args.source, dirs[which], to_tapead, args.iters)
    scripts = sorted(p.relative_to(dirs["autograd"] / "examples")
                     for p in (dirs["autograd"] / "examples").rglob("*.py")
                     if p.name not in ("__init__.py", "data.py", "data_mnist.py"))
    if args.only:
        keep = set(args.only.split(","))
        scripts = [s for s in scripts if s.stem in keep]
    print(f"| example | numbers printed | max rel. diff | autograd s | tapead s | ratio | note |")
    print("|---|---|---|---|---|---|---|")
    for rel in scripts:
        best = {"autograd": None, "tapead": None}
        outs = {}
        for _ in range(args.reps):
            for which in ("autograd", "tapead"):
                ok, out, err, t = run_one(dirs[which], dirs[which] / "examples" / rel,
                                          args.timeout)
                outs[which] = (ok, out, err)
                if ok and (best[which] is None or t < best[which]):
                    best[which] = t
        (ok_a, out_a, err_a), (ok_t, out_t, err_t) = outs["autograd"], outs["tapead"]
        note, n, diff = "", "", ""
        if not ok_a:
            note = "autograd fails: " + (err_a.strip().splitlines() or ["?"])[-1][:90]
        elif not ok_t:
            note = "tapead fails: " + (err_t.strip().splitlines() or ["?"])[-1][:120]
        else:
            n, d = compare(out_a, out_t)
            diff = d
        ta, tt = best["autograd"], best["tapead"]
        ratio = f"{tt / ta:.2f}" if ta and tt else ""
        fmt = lambda t: f"{t:.2f}" if t else ""  # noqa: E731
        print(f"| {rel} | {n} | {diff} | {fmt(ta)} | {fmt(tt)} | {ratio} | {note} |",
              flush=True)
    print(f"\n(copies in {root})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
