"""``autograd.scipy`` for tapead: ``special``, ``stats``, ``linalg``, ``signal``,
``integrate``, ``misc``."""
from tapead.autograd.scipy import integrate, linalg, misc, signal, special, stats  # noqa: F401

__all__ = ["integrate", "linalg", "misc", "signal", "special", "stats"]
