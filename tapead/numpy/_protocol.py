"""The numpy protocol of traced values: ``__array_ufunc__``,
``__array_function__``, array methods and attributes, ``x[idx] = v``.

Importing this module installs them into the core (``_core.install_generic``)
together with the generic path of the scalar opcodes. The dispatch tables are
the primitives' (``tapead._prims``) and the compositions'
(``tapead.compositions``).
"""
from __future__ import annotations

import functools

import numpy as np

from tapead import _core, _prims, compositions
from tapead._core import concrete
from tapead._prims import (batching, construct, elementwise_family, indexing, integers, linalg,
                           piecewise, shape, structural)
from tapead._prims import elementwise as ew
from tapead._prims.conversion_hint import array_message
from tapead.compositions import misc, numpy_extra, predicates
from tapead.errors import NonDifferentiableError

#: numpy ufunc -> tapead implementation
UFUNCS = {**_prims.UFUNCS, **compositions.UFUNCS}
#: numpy function -> tapead implementation (NEP 18)
FUNCTIONS = {**_prims.FUNCTIONS, **compositions.FUNCTIONS}
#: array methods of traced values: name -> function(x, *args, **kw)
METHODS = {**_prims.METHODS, **compositions.METHODS}
#: ufuncs whose results carry no derivative (booleans): computed on the values
VALUE_UFUNCS = _prims.VALUE_UFUNCS



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
        batched = batching.value_ufunc(ufunc, inputs, kwargs)
        if batched is not None:
            return batched
        if _core.any_recorded(*inputs):     # a replay checks the result is unchanged
            return predicates.decided(ufunc, inputs, kwargs, f"np.{ufunc.__name__} of a value")
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


_core.install_generic(elementwise_family.BINARY, elementwise_family.UNARY, {
    "matmul": linalg.matmul,
    "matmul_prim": linalg.matmul_p,
    "remainder": misc.remainder,
    "floor_divide": piecewise.floor_divide,
    "getitem": shape.getitem,
    "stack_prim": structural.stack_p,
    "add_scatters": indexing.add_scatters,
    "setitem": _setitem,
    "getattr": _getattr,
    "pack_objects": construct.pack_objects,
    "__array_ufunc__": _array_ufunc,
    "__array_function__": _array_function,
    "array_message": array_message,
    "batch_compare": batching.batch_compare,
    "integer_value": integers.integer_value,
    "array_value": integers.array_value,
})
