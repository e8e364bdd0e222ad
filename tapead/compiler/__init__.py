"""Lowering of recorded programs for faster replays.

* :mod:`tapead.compiler.fusion` -- chains of elementwise array nodes run as one
  blocked pass each, through numpy's own float64 loops (``_core.FusedGroup``).
* :mod:`tapead.compiler.codegen` -- the C source of a group's loop.
* :mod:`tapead.compiler.native` -- those groups as C loops (full sums and
  sincos inside), built by the system C compiler and cached on disk.
* :mod:`tapead.compiler.compiled` -- one recording's plans and kernels, compiled
  in the background after the first replays (what ``ta.jit`` keeps).
"""
from tapead.compiler.fusion import FusionPlan, plan  # noqa: F401

__all__ = ["FusionPlan", "plan"]
