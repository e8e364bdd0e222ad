"""``scipy.stats.t`` as autograd offers it, differentiable (``tapead.scipy.stats.t``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "cdf", "logpdf", "logcdf"]
globals().update(functions("t", __all__))
