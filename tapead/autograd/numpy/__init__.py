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
import builtins as _builtins

import numpy as _np
from numpy import *  # noqa: F401,F403

globals().update({_n: getattr(_np, _n) for _n in dir(_np)
                  if not _n.startswith("_") and _n not in globals()
                  and _n not in ("linalg", "fft", "random")})

from tapead.numpy import *  # noqa: F401,F403,E402
from tapead.numpy import abs, true_divide  # noqa: F401,E402,A004
from tapead import _core  # noqa: E402
from tapead.autograd.tracer import Box, notrace_primitive, primitive  # noqa: F401,E402
for _n in ("fft", "linalg", "random"):      # numpy's or tapead.numpy's: this package has its own
    globals().pop(_n, None)
from tapead.autograd.numpy import fft, linalg, numpy_boxes, numpy_vjps, random  # noqa: F401,E402

__version__ = _np.__version__
numpy_version = _np.__version__


@notrace_primitive
def metadata(A):
    """``(shape, ndim, dtype, iscomplex)`` of ``A`` (autograd.numpy's helper)."""
    return _np.shape(A), _np.ndim(A), _np.result_type(A), _np.iscomplexobj(A)


def make_diagonal(D, offset=0, axis1=0, axis2=1):
    """Arrays with ``D``'s last axis on the diagonal of two new last axes
    (autograd.numpy's helper; ``offset=0, axis1=-1, axis2=-2`` only)."""
    if not (offset == 0 and axis1 == -1 and axis2 == -2):
        raise NotImplementedError("make_diagonal supports offset=0, axis1=-1, axis2=-2 only")
    n = _np.shape(_core.concrete(D))[-1]
    return expand_dims(D, -1) * _np.eye(n)


_where = where


def where(condition, *args, **kwargs):
    """``numpy.where``, also with ``condition=``, ``x=``, ``y=`` given by keyword;
    on plain Python values (no arrays) the result is a Python value, as
    autograd's ``where`` returns."""
    if not args and not kwargs:
        return _np.where(_core.concrete(condition))     # indices: no derivative
    if len(args) + len(kwargs) != 2:
        raise ValueError("either both or neither of x and y should be given")
    x = args[0] if args else kwargs["x"]
    y = args[1] if len(args) > 1 else kwargs["y"]
    res = _where(condition, x, y)
    if not _builtins.any(_has_array(v) for v in (condition, x, y)) and hasattr(res, "tolist"):
        return res.tolist()
    return res


def _has_array(x):
    if isinstance(x, (Box, _np.ndarray, _np.generic)):
        return True
    return isinstance(x, (list, tuple)) and _builtins.any(_has_array(v) for v in x)
