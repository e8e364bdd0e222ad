"""Piecewise-constant primitives: ``floor``, ``ceil``, ``rint``, ``trunc``,
``fix``, ``round`` and ``heaviside``.

Their derivative is zero (in ``heaviside``'s ``x``): the VJP and JVP rules
return ``None``, so no cotangent or tangent flows, while a recorded tape
still recomputes them on replay.
"""
from __future__ import annotations

import numpy as np

from tapead._core import Box, bind
from tapead import patterns
from tapead._prims import batching
from tapead._prims.base import Primitive, defzero
from tapead._prims.elementwise import unbroadcast, where
from tapead._prims.structural import broadcast_to, reshape


def _box(*xs) -> bool:
    return any(isinstance(x, Box) for x in xs)


# ---------------------------------------------------------------------------
# piecewise-constant functions: derivative zero, recomputed on replay
# ---------------------------------------------------------------------------

def _zero_derivative(name, npfunc):
    """A one-argument primitive with derivative zero (VJP/JVP return None)."""
    prim = Primitive(name, npfunc, saves=())
    prim.defvjp(lambda g, ans, x, **p: None)
    prim.defjvp(lambda t, ans, x, **p: None)
    defzero(prim)                            # no tangent, empty pattern
    prim.defvmap(batching.elementwise_rule(prim))

    def func(x, **params):
        if isinstance(x, Box):
            return bind(prim, x, **params)
        return npfunc(x, **params)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = (f"``np.{name}``; on traced values its derivative is zero (it is "
                    "piecewise constant) and a recorded tape recomputes it on replay.")
    func.prim = prim
    return func


floor = _zero_derivative("floor", np.floor)
ceil = _zero_derivative("ceil", np.ceil)
rint = _zero_derivative("rint", np.rint)
trunc = _zero_derivative("trunc", np.trunc)
_fix = _zero_derivative("fix", np.fix)
_round = _zero_derivative("round", np.round)
_copysign_one = _zero_derivative("copysign_one", lambda y: np.copysign(1.0, y))


def _zero_derivative2(name, npfunc, doc):
    """A two-argument elementwise primitive with derivative zero in both."""
    prim = Primitive(name, npfunc, saves=())
    prim.defvjp(lambda g, ans, x, y: None, lambda g, ans, x, y: None)
    prim.defjvp(lambda t, ans, x, y: None, lambda t, ans, x, y: None)
    defzero(prim)
    prim.defvmap(batching.elementwise_rule(prim))

    def func(x, y):
        if _box(x, y):
            return bind(prim, x, y)
        return npfunc(x, y)
    func.__name__ = func.__qualname__ = name
    func.__doc__ = doc
    func.prim = prim
    return func


floor_divide = _zero_derivative2(
    "floor_divide", np.floor_divide,
    "``np.floor_divide`` / ``x // y``: numpy's values; on traced values its derivative "
    "is zero (piecewise constant; integers have none) and a tape recomputes it on replay.")
#: ``np.remainder`` and ``np.fmod`` of integers (exact integers, no derivative); the
#: float forms are compositions with derivative 1 in ``x`` (tapead.compositions.misc)
integer_remainder = _zero_derivative2(
    "integer_remainder", np.remainder,
    "``np.remainder`` of integer values: an integer result, no derivative.")
integer_fmod = _zero_derivative2(
    "integer_fmod", np.fmod, "``np.fmod`` of integer values: an integer result, no derivative.")


def fix(x, out=None):
    """``np.fix`` (round towards zero); derivative zero."""
    if out is not None:
        if _box(x):
            raise TypeError("np.fix(..., out=...) cannot write a traced value into an "
                            "array; assign the result instead")
        return np.fix(x, out=out)
    return _fix(x)


def round(a, decimals=0, out=None):  # noqa: A001
    """``np.round`` / ``np.around`` (half to even); derivative zero."""
    if not _box(a):
        return np.round(a, decimals=decimals, out=out)
    if out is not None:
        raise TypeError("np.round(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    return _round(a, decimals=int(decimals))


around = round


# heaviside(x, h0): zero derivative in x; h0 where x == 0 (as JAX's where-based rule)
def _at_zero(x):
    """Where ``x``'s value is 0 (a constant; batched under vmap)."""
    return batching.elementwise_values(lambda v: np.asarray(v) == 0, batching.value_of(x))


heaviside_p = Primitive("heaviside", np.heaviside, saves=(0,))
heaviside_p.defvjp(lambda g, ans, x, h0: None,
                   lambda g, ans, x, h0: unbroadcast(h0, where(_at_zero(x), g, 0.0 * g)))
heaviside_p.defjvp(lambda t, ans, x, h0: None,
                   lambda t, ans, x, h0: broadcast_to(where(_at_zero(x), t, 0.0 * t),
                                                      np.shape(ans)))


def _heaviside_batched(tans, ans, vals, params, K):
    t = tans[1]
    if t is None:
        return None
    shape = (K,) + np.shape(ans)
    t = reshape(t, (K,) + (1,) * (len(shape) - 1 - np.ndim(vals[1])) + np.shape(vals[1]))
    return broadcast_to(where(_at_zero(vals[0]), t, 0.0 * t), shape)


heaviside_p.defbatched(_heaviside_batched)
# no dependence on x; elementwise in h0 (only where x == 0, which moves with x)
heaviside_p.defvmap(batching.elementwise_rule(heaviside_p))
heaviside_p.defsparsity(patterns.elementwise_in(1))


def heaviside(x, h0):
    """``np.heaviside``: zero derivative in ``x``; the derivative in ``h0`` is 1
    where ``x == 0``."""
    if _box(x, h0):
        return bind(heaviside_p, x, h0)
    return np.heaviside(x, h0)


#: numpy ufuncs this module implements for tracers
UFUNCS = {np.floor: floor, np.ceil: ceil, np.rint: rint, np.trunc: trunc,
          np.heaviside: heaviside, np.floor_divide: floor_divide}
#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.round: round, np.around: around, np.fix: fix}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {"round": round}
__all__ = ["floor", "ceil", "rint", "trunc", "fix", "round", "around", "heaviside",
           "floor_divide"]
