"""``scipy.stats.multivariate_normal`` as autograd offers it, differentiable (``tapead.scipy.stats.multivariate_normal``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "logpdf", "entropy"]
globals().update(functions("multivariate_normal", __all__))
