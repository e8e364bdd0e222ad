"""The elementwise family's factories and tables: ``_unary`` and ``_binary``
make a primitive and its user-facing function from a numpy function and its
local derivatives, and register them in ``UNARY``/``BINARY`` (by opcode),
``BY_NAME`` and ``UFUNCS``; the helpers the rules share (a cotangent that is
a broadcast 1, masks from values).  ``elementwise`` and the special-function
families build on it.
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, lanes_of
from tapead._core import apply_binary as binary, apply_unary as unary
from tapead._prims import batching
from tapead._prims.base import Primitive, defelementwise
from tapead._prims.structural import unbroadcast

OP = _core.OPCODES

UNARY: dict = {}       # opcode -> Primitive
BINARY: dict = {}      # opcode -> Primitive
BY_NAME: dict = {}     # name -> user-facing function
UFUNCS: dict = {}      # numpy ufunc -> user-facing function


#: unary rules whose d(x, ans) always builds a new array (never x or ans itself)
_FRESH = _core.FRESH_UNARY       # from the opcode table (tools/opcodes.txt)


def _is_ones_like(g, v) -> bool:
    """Whether g is a broadcast constant 1 (the cotangent of a sum) of v's
    shape and dtype, so that g * v is v."""
    if type(g) is not np.ndarray or not g.ndim or any(g.strides) or not g.size:
        return False                     # the common case, decided by type and strides
    if not (type(v) is np.ndarray or isinstance(v, Box)):
        return False
    return (g.shape == np.shape(v) and g.dtype == np.result_type(lanes_of(v))
            and g.flat[0] == 1)


def _times_fresh(d, g):
    """g * d, written into d when d is a new array of the result's shape."""
    if (type(d) is np.ndarray or isinstance(d, Box)) and _is_ones_like(g, d):
        return d                     # g is a broadcast 1: no pass (no node on an outer tape)
    if type(d) is np.ndarray:
        if type(g) is np.ndarray:
            if g.shape == d.shape and g.dtype == d.dtype:
                return np.multiply(d, g, out=d)
        elif type(g) is float and d.dtype.kind == "f":
            return np.multiply(d, g, out=d)
    return g * d


def _unary(name, npfunc, d, saves=None, ufunc=None):
    opcode = OP.get(name, -1)
    prim = Primitive(name, npfunc, saves=saves, opcode=opcode, elementwise=True)
    if name in _FRESH:        # the VJP may multiply the cotangent into d in place
        prim.defvjp(lambda g, ans, x: _times_fresh(d(x, ans), g))
    else:
        prim.defvjp(lambda g, ans, x: g * d(x, ans))
    prim.defjvp(lambda t, ans, x: t * d(x, ans))
    defelementwise(prim)
    prim.partial = d          # d(x, ans), the local derivative (tapead.scaly derives from it)
    if opcode >= 0:
        UNARY[opcode] = prim

        def func(x):
            if isinstance(x, Box):
                return unary(opcode, x)
            return npfunc(x)
    else:
        def func(x):
            if isinstance(x, Box):
                return _core.bind(prim, x)
            return npfunc(x)
    func.__name__ = name
    func.__qualname__ = name
    func.__doc__ = f"Elementwise ``{name}``, differentiable (mirrors numpy)."
    func.prim = prim
    BY_NAME[name] = func
    if ufunc is not None:
        UFUNCS[ufunc] = func
    return func


def _mask_of(fn, like, *xs):
    """``_mask`` of ``fn`` of the values of ``xs`` (batched under vmap)."""
    dt = np.result_type(lanes_of(like))
    dt = dt if np.issubdtype(dt, np.floating) else np.float64
    return batching.elementwise_values(lambda *v: np.asarray(fn(*v), dtype=dt), *xs)


def _mask(cond, like):
    """A constant 0/1 mask from a condition on concrete values, in like's dtype."""
    dt = np.result_type(lanes_of(like))
    return np.asarray(cond, dtype=dt if np.issubdtype(dt, np.floating) else np.float64)


# ---------------------------------------------------------------------------
# binary: name, numpy function, (d/dx, d/dy) as functions of (x, y, ans)
# ---------------------------------------------------------------------------

def _binary(name, npfunc, dx, dy, saves=None, ufunc=None):
    opcode = OP[name]
    prim = Primitive(name, npfunc, saves=saves, opcode=opcode, elementwise=True)
    prim.defvjp(lambda g, ans, x, y: unbroadcast(x, _times(g, dx(x, y, ans))),
                lambda g, ans, x, y: unbroadcast(y, _times(g, dy(x, y, ans))))
    prim.defjvp(lambda t, ans, x, y: t * dx(x, y, ans),
                lambda t, ans, x, y: t * dy(x, y, ans))
    defelementwise(prim)
    prim.partials = (dx, dy)  # d/dx, d/dy(x, y, ans) (tapead.scaly derives from them)
    BINARY[opcode] = prim

    def func(x, y):
        if isinstance(x, Box) or isinstance(y, Box):
            return binary(opcode, x, y)
        return npfunc(x, y)
    func.__name__ = name
    func.__qualname__ = name
    func.__doc__ = f"Elementwise ``{name}``, differentiable (mirrors numpy)."
    func.prim = prim
    BY_NAME[name] = func
    if ufunc is not None:
        UFUNCS[ufunc] = func
    return func


def _times(g, v):
    """g * v; when g is a broadcast constant 1 (the cotangent of a sum), v itself.

    Returning v aliases a recorded value; the sweep never writes into arrays it
    did not allocate, so the alias is safe."""
    if _is_ones_like(g, v):
        return v
    return g * v
