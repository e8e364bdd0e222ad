"""Primitives and their rules (layer 1), and the numpy protocol tables.

Importing this package registers the Python fallbacks with ``_core``: the
generic path of the scalar opcodes, the array methods of tracers and the
``__array_ufunc__`` / ``__array_function__`` dispatch.
"""
from __future__ import annotations

import functools

import numpy as np

from tapead import _core
from tapead._core import Box, bind, concrete
from tapead._prims import elementwise as ew
from tapead._prims import (bessel, calculus, construct, contract, fft, indexing, linalg,
                           linalg_decomp, misc, numpy_extra, reductions, shape, sorting,
                           special, special_gamma, stats)
from tapead._prims.base import Primitive, ShapeOnly
from tapead._prims.conversion_hint import array_message
from tapead.errors import NonDifferentiableError

__all__ = ["Primitive", "ShapeOnly", "FUNCTIONS", "UFUNCS"]


#: the primitive families; each module exports NUMPY_FUNCTIONS (numpy function ->
#: tapead implementation, for NEP 18 dispatch) and optionally TRACER_METHODS
FAMILIES = [ew, reductions, shape, indexing, linalg, linalg_decomp, sorting, special, contract,
            misc, stats, calculus, fft, numpy_extra, special_gamma, bessel]

UFUNCS = dict(ew.UFUNCS)
UFUNCS[np.matmul] = linalg.matmul
UFUNCS.update(numpy_extra.UFUNCS)

FUNCTIONS = {np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
             np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis]}
METHODS = {"T": None, "value": None}
for _family in FAMILIES:
    FUNCTIONS.update(getattr(_family, "NUMPY_FUNCTIONS", {}))
    METHODS.update(getattr(_family, "TRACER_METHODS", {}))


#: ufuncs whose results carry no derivative (booleans): computed on the values
VALUE_UFUNCS = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal,
                np.not_equal, np.isfinite, np.isnan, np.isinf, np.signbit)


def _no_rule(what):
    return NonDifferentiableError(
        f"tapead has no derivative rule for {what} on traced values, so it would "
        "silently drop the derivative. Write the computation with functions tapead "
        "supports (docs/coverage.md lists every numpy and scipy function with its "
        "status), or give it a rule with ta.custom_vjp / ta.custom_jvp.")


#: ufunc methods of the differentiable binary ufuncs (np.maximum.reduce, ...)
_UFUNC_METHODS = {"reduce": numpy_extra.ufunc_reduce, "accumulate": numpy_extra.ufunc_accumulate,
                  "outer": numpy_extra.ufunc_outer}


def _array_ufunc(ufunc, method, inputs, kwargs):
    if method == "__call__":
        func = UFUNCS.get(ufunc)
        out = kwargs.pop("out", None)
        if func is not None and not kwargs and out is None:
            return func(*inputs)
        if func is not None and out is not None:
            raise TypeError(f"np.{ufunc.__name__}(..., out=...) cannot write a traced "
                            "value into an array; assign the result instead")
    elif method in _UFUNC_METHODS and ufunc.nin == 2 and UFUNCS.get(ufunc) is not None:
        return _UFUNC_METHODS[method](ufunc, UFUNCS[ufunc], *inputs, **kwargs)
    if ufunc in VALUE_UFUNCS:
        return ufunc(*[concrete(x) for x in inputs], **kwargs)
    raise _no_rule(f"{_ufunc_name(ufunc)} (method {method!r})")


def _ufunc_name(ufunc):
    """How users spell a ufunc: np.sin, or scipy.special.iv for scipy's."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    try:
        import scipy.special as sps
    except ImportError:                   # pragma: no cover
        return name
    if getattr(sps, name, None) is ufunc:
        return f"scipy.special.{name}"
    return name


def _array_function(func, types, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is None:
        module = getattr(func, "__module__", "numpy") or "numpy"
        raise _no_rule(f"{module.replace('numpy', 'np', 1)}.{func.__name__}")
    return impl(*args, **kwargs)


def _setitem(x, idx, value):
    """``x[idx] = value`` on a box: record the functional update
    ``index_update(x, value, idx)`` and make ``x`` stand for it."""
    new = indexing.index_update(x, value, idx, "set")
    try:
        _core.rebind_tracer(x, new)
    except (TypeError, ValueError):
        raise TypeError(
            "x[idx] = v: v is traced by a transform nested inside the one that traces "
            "x (e.g. x was created outside the function being differentiated), so x "
            "cannot hold it in place. Build a new array instead: "
            "x2 = tapead.numpy.at(x)[idx].set(v)") from None


def _getattr(x, name):
    if name[:2] == "__" and name not in METHODS:      # numpy probing __array_interface__...
        raise AttributeError(f"traced value has no attribute {name!r}")
    if name == "T":
        return shape.transpose(x)
    if name == "value":
        if type(x) is _core.Tracer and x.tape.active:
            x.tape.values_read += 1          # as x.primal: a replay could not update it
        return _core.primal_of(x)
    if name == "real":
        return ew.real(x)
    if name == "imag":
        return ew.imag(x)
    f = METHODS.get(name)
    if f is None:
        # numpy's object loops call methods named like the ufunc (np.sin on an
        # object array of tracers calls x.sin() on each element)
        f = UFUNCS.get(getattr(np, name, None))
        if f is None:
            raise AttributeError(f"traced value has no attribute {name!r}")
    return functools.partial(f, x)


_core.install_generic(ew.BINARY, ew.UNARY, {
    "matmul": linalg.matmul,
    "matmul_prim": linalg.matmul_p,
    "remainder": misc.remainder,
    "getitem": shape.getitem,
    "stack_prim": shape.stack_p,
    "add_scatters": indexing.add_scatters,
    "setitem": _setitem,
    "getattr": _getattr,
    "pack_objects": construct.pack_objects,
    "__array_ufunc__": _array_ufunc,
    "__array_function__": _array_function,
    "array_message": array_message,
})
