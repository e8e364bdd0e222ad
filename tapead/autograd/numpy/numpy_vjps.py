"""The helpers of autograd's ``numpy_vjps`` that user rules call:
``unbroadcast`` and ``unbroadcast_f`` sum a cotangent back to the shape of a
broadcast argument.

>>> import numpy as np
>>> from tapead.autograd.numpy.numpy_vjps import unbroadcast_f
>>> unbroadcast_f(np.ones((1, 3)), lambda g: 2.0 * g)(np.ones((4, 3)))
array([[8., 8., 8.]])
"""
import numpy as _np

from tapead import numpy as tnp
from tapead.autograd.tracer import getval

__all__ = ["unbroadcast", "unbroadcast_f"]


def _metadata(x):
    v = getval(x)
    return _np.shape(v), _np.ndim(v), _np.result_type(v), _np.iscomplexobj(v)


def unbroadcast(x, target_meta, broadcast_idx=0):
    """``x`` summed over the axes broadcasting added to an argument described by
    ``target_meta = (shape, ndim, dtype, iscomplex)``; the real part for a real
    argument."""
    target_shape, target_ndim, _dtype, target_iscomplex = target_meta
    while tnp.ndim(x) > target_ndim:
        x = tnp.sum(x, axis=broadcast_idx)
    for axis, size in enumerate(target_shape):
        if size == 1:
            x = tnp.sum(x, axis=axis, keepdims=True)
    if _np.iscomplexobj(getval(x)) and not target_iscomplex:
        x = tnp.real(x)
    return x


def unbroadcast_f(target, f):
    """``g -> unbroadcast(f(g))`` to the shape of ``target``."""
    target_meta = _metadata(target)
    return lambda g: unbroadcast(f(g), target_meta)
