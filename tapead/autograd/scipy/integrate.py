"""``autograd.scipy.integrate.odeint``: :func:`tapead.scipy.integrate.odeint`
(scipy's signature, adjoint sensitivities) with autograd's ``args=()``."""
from __future__ import annotations

from tapead.scipy.integrate import odeint as _odeint

__all__ = ["odeint"]


def odeint(func, y0, t, args=(), **kwargs):
    """``scipy.integrate.odeint(func, y0, t, args)``, differentiable in ``y0``,
    ``t`` and ``args`` (see :func:`tapead.scipy.integrate.odeint`)."""
    if not isinstance(args, tuple):
        args = (args,)
    return _odeint(func, y0, t, *args, **kwargs)
