"""``autograd.scipy.integrate.odeint``: tapead.scipy.integrate.odeint
(scipy's signature, adjoint sensitivities), loaded when first called."""
from __future__ import annotations

import importlib

__all__ = ["odeint"]


def odeint(func, y0, t, args=(), **kwargs):
    """``scipy.integrate.odeint(func, y0, t, args)``, differentiable in ``y0``,
    ``t`` and ``args``: tapead's tapead.scipy.integrate.odeint."""
    try:
        tapead_integrate = importlib.import_module("tapead.scipy.integrate")
        impl = tapead_integrate.odeint
    except (ImportError, AttributeError):
        raise ImportError(
            "tapead.autograd.scipy.integrate.odeint needs tapead.scipy.integrate.odeint, "
            "which this installation of tapead does not have; upgrade tapead, or integrate "
            "with a differentiable loop (tapead.fori_loop / tapead.scan) instead") from None
    return impl(func, y0, t, args, **kwargs)
