"""``scipy.stats.poisson`` as autograd offers it, differentiable (``tapead.scipy.stats.poisson``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pmf", "logpmf", "cdf"]
globals().update(functions("poisson", __all__))
