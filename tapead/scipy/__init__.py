"""scipy's names, differentiable: ``import tapead.scipy.special as tsp``,
``import tapead.scipy.linalg as tsl``, ``import tapead.scipy.stats as tst``,
``from tapead.scipy.integrate import odeint``."""
from tapead.scipy import integrate, linalg, special, stats  # noqa: F401

__all__ = ["integrate", "linalg", "special", "stats"]
