"""``scipy.stats.chi2`` as autograd offers it, differentiable (``tapead.scipy.stats.chi2``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "cdf", "logpdf", "logcdf", "sf", "logsf"]
globals().update(functions("chi2", __all__))
