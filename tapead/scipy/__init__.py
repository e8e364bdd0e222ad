"""scipy's names, differentiable: ``import tapead.scipy.special as tsp``."""
from tapead.scipy import special  # noqa: F401

__all__ = ["special"]
