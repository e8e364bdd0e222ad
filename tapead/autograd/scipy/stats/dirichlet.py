"""``scipy.stats.dirichlet`` as autograd offers it, differentiable (``tapead.scipy.stats.dirichlet``)."""
from tapead.autograd.scipy.stats._dist import functions

__all__ = ["pdf", "logpdf"]
globals().update(functions("dirichlet", __all__))

from tapead.autograd.tracer import notrace_primitive  # noqa: E402
import scipy.stats as _ss  # noqa: E402

#: random draws (no derivative)
rvs = notrace_primitive(_ss.dirichlet.rvs)
__all__ += ["rvs"]
