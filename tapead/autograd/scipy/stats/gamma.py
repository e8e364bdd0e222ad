"""``scipy.stats.gamma`` as autograd offers it, differentiable (``tapead.scipy.stats.gamma``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "cdf", "logpdf", "logcdf", "sf", "logsf"]
globals().update(functions("gamma", __all__))
