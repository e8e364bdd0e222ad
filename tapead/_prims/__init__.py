"""Primitives and their rules, by family (the numpy protocol that dispatches
to them is ``tapead.numpy._protocol``).

Each family module exports ``NUMPY_FUNCTIONS`` (numpy function -> tapead
implementation, for NEP 18 dispatch), optionally ``UFUNCS`` (numpy or scipy
ufunc -> implementation) and ``TRACER_METHODS`` (array methods); this package
gathers them into one table each, built once every family is imported.
"""
from __future__ import annotations

import numpy as np

from tapead._prims import elementwise as ew
from tapead._prims import (bessel, construct, contract, fft, indexing, linalg,  # noqa: F401
                           linalg_decomp, linalg_lstsq, linalg_svd, piecewise, reductions, shape,
                           sorting, special, special_gamma, structural)
from tapead._prims.base import Primitive, ShapeOnly

__all__ = ["Primitive", "ShapeOnly", "FAMILIES", "FUNCTIONS", "UFUNCS", "METHODS",
           "VALUE_UFUNCS"]


#: the primitive families
FAMILIES = [ew, reductions, shape, indexing, linalg, linalg_decomp, linalg_lstsq, linalg_svd,
            sorting, special, contract, piecewise, fft, special_gamma, bessel]

UFUNCS = dict(ew.UFUNCS)
UFUNCS[np.matmul] = linalg.matmul
FUNCTIONS = {np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
             np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis]}
METHODS = {"T": None, "value": None}
for _family in FAMILIES:
    UFUNCS.update(getattr(_family, "UFUNCS", {}))
    FUNCTIONS.update(getattr(_family, "NUMPY_FUNCTIONS", {}))
    METHODS.update(getattr(_family, "TRACER_METHODS", {}))


#: ufuncs whose results carry no derivative (booleans): computed on the values
VALUE_UFUNCS = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal,
                np.not_equal, np.isfinite, np.isnan, np.isinf, np.signbit)
