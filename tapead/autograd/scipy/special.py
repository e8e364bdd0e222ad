"""``autograd.scipy.special``: scipy.special's names, the differentiable ones
tapead's (``tapead.scipy.special``); the others are scipy's own, which raise
a ``NonDifferentiableError`` naming the function on traced values."""
import scipy.special as _sps

globals().update({_n: getattr(_sps, _n) for _n in dir(_sps) if not _n.startswith("_")})

from tapead.scipy.special import *  # noqa: F401,F403,E402
from tapead.scipy.special import jv as jn  # noqa: F401,E402  (scipy: jn is jv of an integer order)
