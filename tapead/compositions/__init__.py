"""numpy functions written with the primitives (they define none of their
own): their derivatives of every order come from the primitives' rules.

``misc`` (remainder, sinc, diff, interp, convolve...), ``predicates``
(isclose, isnan, searchsorted...: plain values, guarded), ``stats``
(median, quantiles, nan-reductions), ``calculus`` (gradient, trapezoid...),
``norms`` (``np.linalg.norm``) and ``numpy_extra`` (the rest of numpy's names:
rot90, select, partition, ufunc methods...). ``tapead.numpy`` re-exports them
and its protocol dispatches numpy's calls here.
"""
from __future__ import annotations

from tapead.compositions import calculus, misc, norms, numpy_extra, predicates, stats

__all__ = ["MODULES", "FUNCTIONS", "UFUNCS", "METHODS"]

#: the modules of compositions
MODULES = [misc, predicates, stats, calculus, norms, numpy_extra]

FUNCTIONS: dict = {}
UFUNCS: dict = {}
METHODS: dict = {}
for _module in MODULES:
    FUNCTIONS.update(getattr(_module, "NUMPY_FUNCTIONS", {}))
    UFUNCS.update(getattr(_module, "UFUNCS", {}))
    METHODS.update(getattr(_module, "TRACER_METHODS", {}))
