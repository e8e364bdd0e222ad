"""Native code for fused groups: C generated from a fusion plan, compiled once.

A :class:`~tapead.compiler.fusion.FusionPlan` says which elementwise nodes
of a recorded program run together.  By default each group runs numpy's own
float64 inner loops over blocks of its operands; this module turns a plan
into one C function per group -- a single loop whose intermediates are C
locals, so a chain such as ``g * x * cos(x)`` next to ``sin(x)`` is one pass
over memory with the sine and cosine of one argument computed together
(gcc's ``sincos``) -- compiles the functions with the system C compiler into
a shared library, and points the groups at them.

Why C through the system compiler (and not numba/llvmlite): a plan's kernels
are a few lines each and compile in one ``cc`` call of about 0.1 s (numba
needs about 0.5 s to import and 0.1-0.3 s per function); the library is a
file keyed by its source, so a second process loads it without compiling;
and C's ``sin``, ``exp``, ... are the libm functions numpy itself calls, which
is what keeps the values numpy's bits.  Without a compiler the groups keep
numpy's loops: same values, a little slower.

Bits.  A kernel computes each operation as numpy does: IEEE ``+ - * /``
(no fused multiply-add: ``-ffp-contract=off``, no ``-ffast-math``) and the
libm function numpy calls for the rest.  Which operations qualify is not
assumed: once per machine a probe library evaluates every entry of
:data:`LOWERINGS` on arguments spanning small, huge, subnormal and special
values and compares the bits with numpy's ufunc (a numpy built with its own
vectorised ``exp`` fails the probe for ``exp``); a group with an operation that
failed, or that has no entry, keeps numpy's loops.

The cache directory is ``$TAPEAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/tapead``,
else ``~/.cache/tapead``; ``TAPEAD_NATIVE=0`` turns native kernels off.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from tapead.compiler.codegen import LOWERINGS, PRELUDE, SPLIT, kernel

__all__ = ["available", "compiler", "lower_plan", "compile_plan", "NativeLibrary",
           "LOWERINGS", "SPLIT", "probe", "cache_dir"]

FLAGS = ["-O2", "-ftree-vectorize", "-fno-fast-math", "-ffp-contract=off",
         "-fno-math-errno", "-fPIC", "-shared", "-pthread"]


_lock = threading.RLock()
_state: dict = {}


def cache_dir() -> str:
    """Where compiled kernels are kept (created on first use)."""
    d = os.environ.get("TAPEAD_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        d = os.path.join(base, "tapead")
    return d


def compiler() -> Optional[str]:
    """The C compiler kernels are built with (``$CC``, else ``cc``/``gcc``), or None."""
    cc = os.environ.get("CC")
    if cc and shutil.which(cc):
        return shutil.which(cc)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _compiler_id(cc: str) -> str:
    key = ("cc_id", cc)
    with _lock:
        if key not in _state:
            try:
                out = subprocess.run([cc, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            _state[key] = out.splitlines()[0] if out else "unknown"
        return _state[key]


def threads() -> int:
    """Threads a kernel of at least ``SPLIT`` elements runs on: 2 where the
    machine has two cores or more, else 1; ``TAPEAD_THREADS=1`` keeps one.
    The split is at the top of numpy's pairwise summation, so the bits do not
    depend on it."""
    try:
        asked = int(os.environ.get("TAPEAD_THREADS", "0"))
    except ValueError:
        asked = 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(1, min(2, asked or cores))


def enabled() -> bool:
    """Whether native kernels are on (``TAPEAD_NATIVE=0`` turns them off)."""
    return os.environ.get("TAPEAD_NATIVE", "1") not in ("0", "")


def available() -> bool:
    """Whether kernels can be compiled here: on, a C compiler, and the probe run."""
    return enabled() and compiler() is not None and bool(probe())


class NativeLibrary:
    """A loaded library of group kernels: keeps it alive while groups use it."""

    def __init__(self, path: str, names: Sequence[str], compile_seconds: float,
                 cached: bool):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.addresses = [ctypes.cast(getattr(self.lib, n), ctypes.c_void_p).value
                          for n in names]
        ctypes.c_int.in_dll(self.lib, "tapead_threads").value = threads()
        self.compile_seconds = compile_seconds
        self.cached = cached

    def __repr__(self):
        how = "from the disk cache" if self.cached else f"compiled in {self.compile_seconds:.3f} s"
        return f"<NativeLibrary {os.path.basename(self.path)}: {len(self.addresses)} kernels, {how}>"


def _build(source: str, tag: str, flags: Sequence[str] = FLAGS) -> tuple:
    """(path of the shared library for ``source``, seconds spent compiling, was cached).

    The file name is the hash of the source, the compiler and its flags, so a
    second process (or a second plan with the same kernels) loads it."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set $CC or install gcc)")
    key = hashlib.sha256("\0".join([source, _compiler_id(cc), " ".join(flags),
                                    sys.platform]).encode()).hexdigest()[:32]
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{tag}-{key}.so")
    if os.path.exists(path):
        return path, 0.0, True
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        src = os.path.join(tmp, "k.c")
        with open(src, "w") as fh:
            fh.write(source)
        out = os.path.join(tmp, "k.so")
        proc = subprocess.run([cc, *flags, "-o", out, src, "-lm"], capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"the C compiler failed on a generated kernel:\n{proc.stderr}")
        os.replace(out, path)           # atomic: a concurrent process sees all or nothing
    return path, time.perf_counter() - t0, False


# ---------------------------------------------------------------------------
# the probe: which lowerings give numpy's bits on this machine
# ---------------------------------------------------------------------------

def _probe_values() -> np.ndarray:
    rng = np.random.default_rng(20261207)
    specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.0, 1e-310, -1e-310, 5e-324,
                         np.pi, -np.pi / 2, 1e22, -1e22, 700.0, 710.0, -745.0, 1e300, 1e-300,
                         np.inf, -np.inf, np.nan])
    return np.concatenate([
        specials, rng.uniform(-1.0, 1.0, 1500), rng.uniform(-40.0, 40.0, 1500),
        rng.standard_normal(500) * 1e6, rng.standard_normal(300) * 1e200,
        np.exp(rng.uniform(-700, 700, 500)), rng.uniform(0.0, 4.0, 500)])


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and
                np.array_equal(a[~nan].view(np.int64), b[~nan].view(np.int64)))


def probe() -> Dict[np.ufunc, bool]:
    """For every entry of :data:`LOWERINGS`: whether its C gives numpy's bits here.

    Built and run once per process (the library is cached on disk); empty
    when no compiler is found."""
    with _lock:
        if "probe" in _state:
            return _state["probe"]
        _state["probe"] = {}
        if not enabled() or compiler() is None:
            return _state["probe"]
        ufuncs = list(LOWERINGS)
        lines = [PRELUDE,
                 "void tapead_probe(int k, const double *x, const double *y, double *out,"
                 " npy_intp n) {",
                 "  for (npy_intp i = 0; i < n; i++) {", "    double a = x[i], b = y[i];",
                 "    switch (k) {"]
        for k, u in enumerate(ufuncs):
            lines.append(f"      case {k}: out[i] = {LOWERINGS[u][1].format('a', 'b')}; break;")
        lines += ["    }", "  }", "}",
                  "/* sine and cosine of one argument: the compiler makes them one sincos */",
                  "void tapead_probe_sincos(const double *x, double *s, double *c, npy_intp n) {",
                  "  for (npy_intp i = 0; i < n; i++) { s[i] = sin(x[i]); c[i] = cos(x[i]); }",
                  "}"]
        try:
            path, _, _ = _build("\n".join(lines) + "\n", "probe")
            lib = ctypes.CDLL(path)
        except (OSError, RuntimeError, subprocess.SubprocessError):
            return _state["probe"]
        fn = lib.tapead_probe
        fn.restype = None
        dp = ctypes.POINTER(ctypes.c_double)
        fn.argtypes = [ctypes.c_int, dp, dp, dp, ctypes.c_ssize_t]
        x = _probe_values()
        rng = np.random.default_rng(7)
        y_all = [np.ascontiguousarray(np.roll(x, 1)),
                 np.ascontiguousarray(rng.permutation(x)),
                 np.full_like(x, 2.0), np.full_like(x, 0.5), np.full_like(x, -1.0),
                 np.full_like(x, 3.0), np.full_like(x, 4.0), np.full_like(x, 2.5)]
        x = np.ascontiguousarray(x)
        result = {}
        with np.errstate(all="ignore"):
            for k, u in enumerate(ufuncs):
                nin = LOWERINGS[u][0]
                ok = True
                for y in (y_all if nin == 2 else y_all[:1]):
                    out = np.empty_like(x)
                    fn(k, x.ctypes.data_as(dp), y.ctypes.data_as(dp), out.ctypes.data_as(dp),
                       x.size)
                    want = u(x, y) if nin == 2 else u(x)
                    if not _same_bits(out, want):
                        ok = False
                        break
                result[u] = ok
        s, c = np.empty_like(x), np.empty_like(x)
        both = lib.tapead_probe_sincos
        both.restype = None
        both.argtypes = [dp, dp, dp, ctypes.c_ssize_t]
        both(x.ctypes.data_as(dp), s.ctypes.data_as(dp), c.ctypes.data_as(dp), x.size)
        with np.errstate(all="ignore"):
            _state["sincos"] = _same_bits(s, np.sin(x)) and _same_bits(c, np.cos(x))
        _state["probe"] = result
        return result


def _flags() -> List[str]:
    """The kernels' compiler flags: without the compiler's sincos when the
    probe found that its bits differ from sin's and cos's."""
    probe()
    return FLAGS if _state.get("sincos", True) else FLAGS + ["-fno-builtin-sin",
                                                              "-fno-builtin-cos"]


# ---------------------------------------------------------------------------
# lowering a plan
# ---------------------------------------------------------------------------

def lowerable(group) -> bool:
    """Whether every operation of ``group`` has a lowering that passed the probe
    (a sum, ufunc None, always has one)."""
    table = probe()
    return bool(table) and all(u is None or (table.get(u, False) and
                                             LOWERINGS[u][0] == len(ins))
                               for u, ins, _ in group.ops)


def _kernels(plan):
    """(distinct kernel sources, kernel index of each group or None).  Groups
    with the same operations on the same slots -- the steps of a loop -- share
    one kernel, so a recording of a thousand steps compiles a handful."""
    sources, index, which = [], {}, []
    for g in plan.groups:
        if not lowerable(g):
            which.append(None)
            continue
        text = kernel("@KERNEL@", g)
        if text not in index:
            index[text] = len(sources)
            sources.append(text)
        which.append(index[text])
    return sources, which


def lower_plan(plan) -> str:
    """The C source of the kernels of ``plan``'s lowerable groups (kernel k is
    ``tapead_kernel_k``; which groups run which kernel, and the groups that keep
    numpy's loops, are listed in comments)."""
    sources, which = _kernels(plan)
    parts = [PRELUDE]
    for k, text in enumerate(sources):
        users = [str(i) for i, w in enumerate(which) if w == k]
        shown = ", ".join(users[:8]) + (f", ... ({len(users)} groups)" if len(users) > 8 else "")
        parts.append(f"/* groups {shown} */\n" + text.replace("@KERNEL@", f"tapead_kernel_{k}"))
    for i, g in enumerate(plan.groups):
        if which[i] is None:
            names = ", ".join(getattr(u, "__name__", "sum") for u, _, _ in g.ops)
            parts.append(f"/* group {i} keeps numpy's loops: {names} */")
    return "\n\n".join(parts) + "\n"


def compile_plan(plan) -> Optional[NativeLibrary]:
    """Compile ``plan``'s lowerable groups and point them at their kernels.

    Returns the loaded library (None when no group is lowerable or native
    code is unavailable).  Thread-safe; a library already on disk is loaded
    without compiling."""
    if not available():
        return None
    sources, which = _kernels(plan)
    if not sources:
        return None
    source = lower_plan(plan)
    with _lock:
        path, seconds, cached = _build(source, "plan", _flags())
    lib = NativeLibrary(path, [f"tapead_kernel_{k}" for k in range(len(sources))], seconds,
                        cached)
    for g, w in zip(plan.groups, which):
        if w is not None:
            g.set_native(lib.addresses[w], lib)
    return lib


def describe_probe() -> str:
    """One line per lowering: whether it gives numpy's bits here."""
    table = probe()
    if not table:
        return "native kernels unavailable (no C compiler, or TAPEAD_NATIVE=0)"
    return "\n".join(f"{getattr(u, '__name__', u):>12}: {'numpy bits' if ok else 'differs'}"
                     for u, ok in table.items())
