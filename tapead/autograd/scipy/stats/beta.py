"""``scipy.stats.beta`` as autograd offers it, differentiable (``tapead.scipy.stats.beta``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "cdf", "logpdf", "logcdf", "sf", "logsf"]
globals().update(functions("beta", __all__))
