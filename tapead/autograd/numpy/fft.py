"""``autograd.numpy.fft``: ``numpy.fft``'s names, differentiable
(``tapead.numpy.fft``)."""
import numpy.fft as _nfft
from numpy.fft import *  # noqa: F401,F403

globals().update({_n: getattr(_nfft, _n) for _n in dir(_nfft)
                  if not _n.startswith("_") and _n not in globals()})

from tapead.numpy.fft import *  # noqa: F401,F403,E402
