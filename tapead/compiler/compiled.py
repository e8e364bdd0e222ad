"""The compiled form of one recording: its fusion plan and native kernels.

``ta.jit`` keeps one :class:`Compilation` per recorded signature.  After the
first replays (``COMPILE_AFTER``) a background thread -- or ``jf.compile``, at
once -- plans the tape's fused groups and compiles them into native kernels
(which also take full sums into the groups), then installs the plan; without
native kernels the groups run numpy's own loops.  Until then replays run
node by node.  All of these give the same bits, so a replay may run any.
"""
from __future__ import annotations

import threading
import time
from typing import Optional, Sequence

import numpy as np

from tapead import _core
from tapead.compiler import bodies, fusion, native, runs
from tapead.errors import NativeCompileError

__all__ = ["Compilation", "COMPILE_AFTER", "NativeCompileError"]

COMPILE_AFTER = 2          # replays of a signature before its kernels are compiled


def _native_on() -> bool:
    return native.enabled()


class Compilation:
    """Fusion plans and native kernels of one recorded tape.

    Parameters
    ----------
    tape : Tape
        The recorded tape (its values-only replays follow the plans).
    outputs : sequence of int
        The nodes a replay's caller reads.
    lock : threading.Lock
        The recording's lock: replays hold it, so plans are swapped under it.
    native : bool
        Compile native kernels (when a compiler is found).
    strict : bool
        Raise :class:`NativeCompileError` when a fused group cannot be
        compiled (naming its operations) instead of keeping numpy's loops.
    """

    def __init__(self, tape, outputs: Sequence[int], lock, native: bool = True,
                 strict: bool = False):
        self.tape, self.outputs, self.lock = tape, list(outputs), lock
        self.strict = strict
        self.want_native = native and _native_on()
        self.plan: Optional[fusion.FusionPlan] = None      # until prepared
        self.library: Optional[native.NativeLibrary] = None
        self.loops: list = []         # the scalar loops on the tape (their bodies compiled)
        self.loop_library: Optional[native.NativeLibrary] = None
        self.run_library: Optional[native.NativeLibrary] = None   # rerolled scalar runs
        self.seconds = 0.0            # spent planning and compiling
        self.error: Optional[BaseException] = None
        self.replays = 0
        self._thread: Optional[threading.Thread] = None
        self._done = threading.Event()

    # -- when to plan and compile ------------------------------------------------
    def replayed(self) -> None:
        """Count a replay; after ``COMPILE_AFTER`` of them, plan (and compile) in
        a background thread.  A signature called once or twice costs no
        planning or compiling."""
        self.replays += 1
        if self.replays == COMPILE_AFTER and self._thread is None and not self._done.is_set():
            self._thread = threading.Thread(target=self._prepare_quietly, daemon=True,
                                            name="tapead-compile")
            self._thread.start()

    def compile(self) -> "Compilation":
        """Plan and compile now (or wait for the background thread) and install."""
        if self._thread is None and not self._done.is_set():
            self._prepare_quietly()
        self._done.wait()
        if self.error is not None and self.strict:
            raise self.error
        return self

    def _prepare_quietly(self):
        try:
            self._prepare()
        except BaseException as e:     # kept in self.error; replays stay unfused
            self.error = e

    def _plan(self, reductions=()):
        with self.lock:                # planning reads the records a replay rewrites
            return fusion.plan(self.tape, self.outputs, reductions=reductions)

    def _prepare(self):
        t0 = time.perf_counter()
        try:
            lowerable = {u for u, ok in native.probe().items() if ok} if self.want_native \
                else set()
            plan = self._plan(lowerable)
            lib = native.compile_plan(plan) if lowerable else None
            if lib is None or any(g.needs_native and not g.is_native for g in plan.groups):
                if any(g.needs_native for g in plan.groups):
                    plan, lib = self._plan(), None         # numpy's loops: no sums inside
            with self.lock:
                plan.install(self.tape)
                self.plan, self.library = plan, lib
            if self.want_native and lowerable:
                self.loops = self._loops()
                self.loop_library = bodies.compile_loops(self.loops, self.lock)
                self.run_library = runs.compile_runs(self.tape, self.lock)
            if self.want_native:
                self.error = self._missing(plan, lowerable)
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    def _loops(self) -> list:
        """The ``_core.ScalarLoop`` bodies the tape's nodes run (a scan over
        float carries, forward and reversed), each once."""
        with self.lock:
            op = self.tape.export_nodes()[0]
            found, seen = [], set()
            for i in np.flatnonzero(op == 1):          # OP_OBJ: nodes with a record
                rec = self.tape.record(int(i))
                loop = rec.params.get("loop") if rec.params else None
                if type(loop) is _core.ScalarLoop and id(loop) not in seen:
                    seen.add(id(loop))
                    found.append(loop)
        return found

    def _missing(self, plan, lowerable) -> Optional[NativeCompileError]:
        """What kept parts of the plan on numpy's loops, as an error (or None)."""
        if not lowerable:
            return NativeCompileError(
                "jit: native kernels are unavailable here (no C compiler found: set $CC, "
                "or TAPEAD_NATIVE=0 is set); the replay keeps numpy's loops")
        left = [g for g in plan.groups if not g.is_native]
        loops = [lp for lp in self.loops if lp.native is None]
        if loops and not left:
            return NativeCompileError(
                f"jit: {len(loops)} loop bodies have no native code (an operation without a "
                "lowering); they run on the interpreter")
        if not left:
            return None
        names = "; ".join(", ".join(getattr(u, "__name__", "sum") for u, _, _ in g.ops)
                          for g in left[:5])
        return NativeCompileError(
            f"jit: no native kernel for the fused operations {names} (their C gives other "
            "bits than numpy here, or they have no lowering); they keep numpy's loops")

    # -- introspection ---------------------------------------------------------------
    @property
    def is_native(self) -> bool:
        """Whether the installed plan runs native kernels (all its groups, or
        some of them when others have no lowering), native loop bodies or
        compiled scalar runs."""
        return (self.library is not None or self.loop_library is not None or
                self.run_library is not None)

    @property
    def compile_seconds(self) -> float:
        """Seconds the C compiler ran for this recording (0 for libraries loaded
        from the disk cache)."""
        return sum(lib.compile_seconds for lib in (self.library, self.loop_library,
                                                   self.run_library) if lib is not None)

    def source(self) -> str:
        """The C source of the native kernels for this recording: the fused
        groups', then the loop bodies'."""
        lowerable = {u for u, ok in native.probe().items() if ok}
        with self.lock:
            plan = fusion.plan(self.tape, self.outputs, reductions=lowerable)
        text = native.lower_plan(plan)
        blocks = runs.plan_runs(self.tape)
        if blocks:
            text += "\n/* repeated scalar runs */" + runs.lower_runs(blocks)[len(bodies.PRELUDE):]
        loops = self.loops or self._loops()
        for k, loop in enumerate(loops):
            if bodies.lowerable(loop):
                text += "\n/* loop body " + str(k) + " */" + \
                    bodies.lower_body(loop, f"tapead_body_{k}")[len(bodies.PRELUDE):]
        return text

    def describe(self) -> str:
        """What the replays run: the fused groups and whether they are native."""
        if self.plan is None:
            return (f"not planned yet ({self.replays} replays; planned and compiled after "
                    f"{COMPILE_AFTER}, or by compile())")
        if self.loops:
            compiled = sum(lp.native is not None for lp in self.loops)
            loops = f"; {len(self.loops)} scalar loops, {compiled} with native bodies"
        else:
            loops = ""
        if self.run_library is not None:
            loops += f"; scalar runs compiled: {self.run_library!r}"
        lines = [f"{len(self.plan.groups)} fused groups ({self.plan.n_fused_nodes} nodes), "
                 f"{len(self.plan.dead)} unused nodes skipped; "
                 + (f"native kernels: {self.library!r}" if self.library is not None else
                    "numpy loops" + (f" (native: {self.error})" if self.error else "")) + loops]
        lines.append(self.plan.describe(self.tape))
        return "\n".join(x for x in lines if x)
