"""``autograd.numpy.random``: plain ``numpy.random`` (random numbers carry no
derivative), so seeds give numpy's streams."""
import numpy.random as _npr
from numpy.random import *  # noqa: F401,F403

globals().update({_n: getattr(_npr, _n) for _n in dir(_npr)
                  if not _n.startswith("_") and _n not in globals()})
