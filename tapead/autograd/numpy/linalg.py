"""``autograd.numpy.linalg``: ``numpy.linalg``'s names, the differentiable ones
tapead's (``tapead.numpy.linalg``)."""
import numpy.linalg as _nla
from numpy.linalg import *  # noqa: F401,F403

globals().update({_n: getattr(_nla, _n) for _n in dir(_nla)
                  if not _n.startswith("_") and _n not in globals()})

from tapead.numpy.linalg import *  # noqa: F401,F403,E402

from tapead import numpy as _tnp  # noqa: E402


def T(x):
    """``x`` with its last two axes swapped (autograd.numpy.linalg's helper)."""
    return _tnp.swapaxes(x, -1, -2)


def _dot(a, b):
    """Batched matrix product ``...ij,...jk->...ik`` (autograd.numpy.linalg's helper)."""
    return _tnp.einsum("...ij,...jk->...ik", a, b)
