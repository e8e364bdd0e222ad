"""``autograd.numpy.linalg``: ``numpy.linalg``'s names, the differentiable ones
tapead's (``tapead.numpy.linalg``)."""
import numpy.linalg as _nla
from numpy.linalg import *  # noqa: F401,F403

globals().update({_n: getattr(_nla, _n) for _n in dir(_nla)
                  if not _n.startswith("_") and _n not in globals()})

from tapead.numpy.linalg import *  # noqa: F401,F403,E402
