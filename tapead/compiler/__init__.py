"""Lowering of recorded programs for faster replays.

* :mod:`tapead.compiler.fusion` -- chains of elementwise array nodes run as one
  blocked pass each, through numpy's own float64 loops (``_core.FusedGroup``).
"""
from tapead.compiler.fusion import FusionPlan, plan  # noqa: F401

__all__ = ["FusionPlan", "plan"]
