"""The recoveries of sparse derivatives from compressed products, under their
former import path: they live in :mod:`tapead.coloring.recovery` (and are
re-exported by :mod:`tapead.coloring`).

>>> from tapead.recovery import jacobian_recovery
>>> jacobian_recovery.__module__
'tapead.coloring.recovery'
"""
from tapead.coloring.recovery import (  # noqa: F401
    AcyclicRecovery, JacobianRecovery, StarRecovery, acyclic_recovery, jacobian_recovery,
    star_recovery)

__all__ = ["jacobian_recovery", "star_recovery", "acyclic_recovery", "JacobianRecovery",
           "StarRecovery", "AcyclicRecovery"]
