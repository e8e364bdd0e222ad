"""The functions of one distribution: tapead's where it has them, else
scipy's on plain values with a clear error on traced ones."""
from __future__ import annotations

import scipy.stats

from tapead import _core
from tapead.errors import MissingRuleError
from tapead.scipy import stats as _tstats

__all__ = ["functions"]


def _not_differentiable(dist, name):
    scipy_fn = getattr(getattr(scipy.stats, dist), name)

    def fn(*args, **kwargs):
        if any(isinstance(a, _core.Box) for a in list(args) + list(kwargs.values())):
            raise MissingRuleError(
                f"scipy.stats.{dist}.{name} has no derivative in tapead yet; differentiate "
                f"a function tapead has (tapead.scipy.stats.{dist} offers "
                f"{sorted(vars(getattr(_tstats, dist))) if hasattr(_tstats, dist) else []})")
        return scipy_fn(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"scipy.stats.{dist}.{name} on plain values (no derivative yet)."
    return fn


def functions(dist, names):
    """``{name: function}`` for the distribution ``dist``."""
    ns = getattr(_tstats, dist, None)
    return {n: getattr(ns, n) if ns is not None and hasattr(ns, n)
            else _not_differentiable(dist, n) for n in names}
