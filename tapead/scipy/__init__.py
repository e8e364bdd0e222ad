"""scipy's names, differentiable: ``import tapead.scipy.special as tsp``,
``import tapead.scipy.linalg as tsl``."""
from tapead.scipy import linalg, special  # noqa: F401

__all__ = ["linalg", "special"]
