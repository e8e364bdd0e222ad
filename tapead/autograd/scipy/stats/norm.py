"""``scipy.stats.norm`` as autograd offers it, differentiable (``tapead.scipy.stats.norm``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "cdf", "sf", "logpdf", "logcdf", "logsf", "ppf", "isf"]
globals().update(functions("norm", __all__))
