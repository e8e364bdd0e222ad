"""The compiled form of one recording: its fusion plan and native kernels.

``ta.jit`` keeps one :class:`Compilation` per recorded signature.  At
recording time it installs the portable plan (fused groups running numpy's
own loops); after the first replays (``COMPILE_AFTER``) it compiles native
kernels in a background thread -- or at once when asked (``jf.compile``) --
and then installs the native plan, which also takes full sums into the
groups.  The two plans give the same bits, so a replay may run either.
"""
from __future__ import annotations

import threading
import time
from typing import Optional, Sequence

from tapead.compiler import fusion, native
from tapead.errors import TapeadError

__all__ = ["Compilation", "COMPILE_AFTER", "NativeCompileError"]

COMPILE_AFTER = 2          # replays of a signature before its kernels are compiled


def _native_on() -> bool:
    return native.enabled()


class NativeCompileError(TapeadError):
    """``ta.jit(..., strict=True)``: a part of a recording has no native kernel."""


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
        self.plan = fusion.plan(tape, self.outputs)
        self.plan.install(tape)
        self.library: Optional[native.NativeLibrary] = None
        self.seconds = 0.0            # spent planning and compiling native kernels
        self.error: Optional[BaseException] = None
        self.replays = 0
        self._thread: Optional[threading.Thread] = None
        self._done = threading.Event()
        if not self.want_native:
            self._done.set()

    # -- when to compile ---------------------------------------------------------
    def replayed(self) -> None:
        """Count a replay; start the background compilation after ``COMPILE_AFTER``."""
        self.replays += 1
        if self.replays == COMPILE_AFTER and self.want_native and self._thread is None:
            self._thread = threading.Thread(target=self._compile_quietly, daemon=True,
                                            name="tapead-compile")
            self._thread.start()

    def compile(self) -> "Compilation":
        """Compile now (or wait for the background compilation) and install."""
        if self.want_native and self._thread is None and not self._done.is_set():
            self._compile_quietly()
        self._done.wait()
        if self.error is not None and self.strict:
            raise self.error
        return self

    def _compile_quietly(self):
        try:
            self._compile()
        except BaseException:          # kept in self.error; the portable plan stays
            pass

    def _compile(self):
        t0 = time.perf_counter()
        try:
            lowerable = {u for u, ok in native.probe().items() if ok}
            if not lowerable:
                raise NativeCompileError(
                    "jit: native kernels are unavailable here (no C compiler found: set "
                    "$CC, or TAPEAD_NATIVE=0 is set); the replay keeps numpy's loops")
            with self.lock:            # planning reads the records a replay rewrites
                plan = fusion.plan(self.tape, self.outputs, reductions=lowerable)
            lib = native.compile_plan(plan)
            left = [g for g in plan.groups if not g.is_native]
            if any(g.needs_native for g in left):   # cannot happen: sums need lowerable ops
                raise NativeCompileError("jit: a fused group with a sum has no kernel")
            if left and self.strict:
                names = "; ".join(", ".join(getattr(u, "__name__", "sum") for u, _, _ in g.ops)
                                  for g in left)
                raise NativeCompileError(
                    f"jit(strict=True): no native kernel for the fused operations {names} "
                    "(their C gives other bits than numpy here, or they have no lowering)")
            with self.lock:
                plan.install(self.tape)
                self.plan, self.library = plan, lib
        except BaseException as e:
            self.error = e
            raise
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    # -- introspection ---------------------------------------------------------------
    @property
    def is_native(self) -> bool:
        """Whether the installed plan runs native kernels."""
        return self.library is not None

    def source(self) -> str:
        """The C source of the native kernels for this recording."""
        lowerable = {u for u, ok in native.probe().items() if ok}
        with self.lock:
            plan = fusion.plan(self.tape, self.outputs, reductions=lowerable)
        return native.lower_plan(plan)

    def describe(self) -> str:
        lines = [f"{len(self.plan.groups)} fused groups ({self.plan.n_fused_nodes} nodes), "
                 f"{len(self.plan.dead)} unused nodes skipped; "
                 + (f"native kernels: {self.library!r}" if self.is_native else
                    "numpy loops" + (f" (native: {self.error})" if self.error else ""))]
        lines.append(self.plan.describe(self.tape))
        return "\n".join(x for x in lines if x)
