"""``autograd.numpy`` for tapead: every name of numpy, differentiable.

The names tapead differentiates are ``tapead.numpy``'s; the rest are
numpy's own (constants, dtypes, predicates, array creation, ...), which
dispatch to tapead on traced values through numpy's protocols or, with
no derivative rule, raise a ``NonDifferentiableError`` naming the
function.  ``random`` is plain ``numpy.random``; ``linalg`` and ``fft`` are
differentiable.

>>> import tapead.autograd.numpy as np
>>> from tapead.autograd import grad
>>> float(grad(lambda x: np.sum(np.tanh(np.linspace(0.0, 1.0, 3) * x)))(0.0))
1.5
"""
import numpy as _np
from numpy import *  # noqa: F401,F403

globals().update({_n: getattr(_np, _n) for _n in dir(_np)
                  if not _n.startswith("_") and _n not in globals()
                  and _n not in ("linalg", "fft", "random")})

from tapead.numpy import *  # noqa: F401,F403,E402
from tapead.numpy import abs, true_divide  # noqa: F401,E402,A004
from tapead.autograd.tracer import Box, notrace_primitive, primitive  # noqa: F401,E402
from tapead.autograd.numpy import fft, linalg, numpy_boxes, numpy_vjps, random  # noqa: F401,E402

__version__ = _np.__version__
numpy_version = _np.__version__


@notrace_primitive
def metadata(A):
    """``(shape, ndim, dtype, iscomplex)`` of ``A`` (autograd.numpy's helper)."""
    return _np.shape(A), _np.ndim(A), _np.result_type(A), _np.iscomplexobj(A)
