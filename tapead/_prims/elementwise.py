"""Elementwise primitives: one line of derivative per function.

Scalar (0-d float64) values take the C kernel in ``_core`` (same partials,
checked against these rules in the tests); arrays and nested values take
the rules below.  ``d(x, ans)`` is the local derivative, written with
tapead operations so it can be differentiated again.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps

from tapead import _core
from tapead._core import Box, concrete, is_complex, lanes_of
from tapead import patterns
from tapead._prims import batching
from tapead._prims.base import (BROADCAST, VMAP_ELEMENTWISE, Primitive, ShapeOnly,
                                defelementwise, defzero)
from tapead._prims.structural import unbroadcast
from tapead._prims.elementwise_family import (BY_NAME, UFUNCS, _binary, _mask_of, _times,
                                              _times_fresh, _unary)
from tapead.errors import NonDifferentiableError


# ---------------------------------------------------------------------------
# unary: name, numpy function, saves (None = x, () = only the output), d(x, ans)
# ---------------------------------------------------------------------------

def _sigmoid_np(x):
    return sps.expit(x)




# sin and cos given the other: each one's derivative is the other, which the
# tape already holds when a derivative rule asks for it (the VJP of sin needs
# cos(x) and has sin(x) = ans).  Under an outer transform, ``cos(x)`` is
# recorded as ``cos_given_sin(x, s)`` with ``s = sin(x)``: the same value, but
# its own derivative, -s, reuses s instead of computing sin(x) again (one
# transcendental pass fewer in a Hessian).  Derivatives flow through x only;
# s is a hint, so nothing is counted twice.
def _partner(name, npfunc, sign):
    prim = Primitive(name, lambda x, s: npfunc(x), saves=(1,), elementwise=True)
    prim.defvjp(lambda g, ans, x, s: g * (sign * s), lambda g, ans, x, s: None)
    prim.defjvp(lambda t, ans, x, s: t * (sign * s), lambda t, ans, x, s: None)
    prim.nondiff_args = frozenset([1])
    defelementwise(prim, args=(0,))          # s is a hint: no dependence through it
    prim.fused_as = (npfunc, (0,))           # a fused replay computes npfunc(x)
    return prim


cos_given_sin_p = _partner("cos_given_sin", np.cos, -1.0)
sin_given_cos_p = _partner("sin_given_cos", np.sin, 1.0)


def _cos_given_sin(x, s):
    if isinstance(x, Box):       # scalars keep the C kernel's sin/cos node
        return _core.bind(cos_given_sin_p, x, s) if np.ndim(x) else cos(x)
    return np.cos(x)


def _sin_given_cos(x, c):
    if isinstance(x, Box):
        return _core.bind(sin_given_cos_p, x, c) if np.ndim(x) else sin(x)
    return np.sin(x)


# sin and cos of a float64 array on a tape: both values from one C pass
# (``_core.sin_with_cos``, numpy's bits), the partner kept as a trailing
# residual, so the reverse pass multiplies by it instead of computing the other
# function again.  Without the residual (float32, complex, boxes, a numpy
# whose sine differs from libm's) the rules fall back to the hint partners.
# With the partner saved the rule never reads x, so the tape keeps only x's
# shape: the node costs two arrays (value and partner), as sin's value and x did.
def _sin_fwd(x):
    both = _core.sin_with_cos(x)
    return None if both is None else (both[0], (ShapeOnly(x), both[1]))


def _cos_fwd(x):
    both = _core.sin_with_cos(x)
    return None if both is None else (both[1], (ShapeOnly(x), both[0]))


def _times_saved(g, p, sign):
    """sign * g * p for a saved residual p: a new array (p is never written into,
    nor handed out, so a second pullback sees it unchanged)."""
    if type(g) is np.ndarray or type(g) is float:
        out = np.multiply(g, p)
        return out if sign > 0 else np.negative(out, out=out)
    return g * p if sign > 0 else -(g * p)


def _sin_vjp(g, ans, x, c=None):
    if c is None:
        return _times_fresh(_cos_given_sin(x, ans), g)
    return _times_saved(g, c, 1.0)


def _cos_vjp(g, ans, x, s=None):
    if s is None:
        return _times_fresh(-_sin_given_cos(x, ans), g)
    return _times_saved(g, s, -1.0)


LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))

negative = _unary("neg", np.negative, lambda x, a: -1.0, saves=(), ufunc=np.negative)
positive = _unary("pos", np.positive, lambda x, a: 1.0, saves=(), ufunc=np.positive)
absolute = _unary("abs", np.abs, lambda x, a: batching.elementwise_values(np.sign, x),
                  ufunc=np.absolute)
sign = _unary("sign", np.sign, lambda x, a: 0.0 * a, saves=(), ufunc=np.sign)
sign.prim.defsparsity(patterns.ZERO)         # piecewise constant: no dependence
relu = _unary("relu", lambda x: np.maximum(x, 0),
               lambda x, a: _mask_of(lambda v: v > 0, x, x))
sin = _unary("sin", np.sin, lambda x, a: _cos_given_sin(x, a), ufunc=np.sin)
cos = _unary("cos", np.cos, lambda x, a: -_sin_given_cos(x, a), ufunc=np.cos)
tan = _unary("tan", np.tan, lambda x, a: 1.0 + a * a, saves=(), ufunc=np.tan)
exp = _unary("exp", np.exp, lambda x, a: a, saves=(), ufunc=np.exp)
log = _unary("log", np.log, lambda x, a: 1.0 / x, ufunc=np.log)
log1p = _unary("log1p", np.log1p, lambda x, a: 1.0 / (1.0 + x), ufunc=np.log1p)
expm1 = _unary("expm1", np.expm1, lambda x, a: a + 1.0, saves=(), ufunc=np.expm1)
sqrt = _unary("sqrt", np.sqrt, lambda x, a: 0.5 / a, saves=(), ufunc=np.sqrt)
tanh = _unary("tanh", np.tanh, lambda x, a: 1.0 - a * a, saves=(), ufunc=np.tanh)
arctan = _unary("arctan", np.arctan, lambda x, a: 1.0 / (1.0 + x * x), ufunc=np.arctan)
arcsin = _unary("arcsin", np.arcsin, lambda x, a: 1.0 / sqrt(1.0 - x * x), ufunc=np.arcsin)
arccos = _unary("arccos", np.arccos, lambda x, a: -1.0 / sqrt(1.0 - x * x), ufunc=np.arccos)
sinh = _unary("sinh", np.sinh, lambda x, a: cosh(x), ufunc=np.sinh)
cosh = _unary("cosh", np.cosh, lambda x, a: sinh(x), ufunc=np.cosh)
sigmoid = _unary("sigmoid", _sigmoid_np, lambda x, a: a * (1.0 - a), saves=())
square = _unary("square", np.square, lambda x, a: 2.0 * x, ufunc=np.square)
reciprocal = _unary("reciprocal", np.reciprocal, lambda x, a: -(a * a), saves=(),
                    ufunc=np.reciprocal)
exp2 = _unary("exp2", np.exp2, lambda x, a: a * LN2, saves=(), ufunc=np.exp2)
log2 = _unary("log2", np.log2, lambda x, a: 1.0 / (x * LN2), ufunc=np.log2)
log10 = _unary("log10", np.log10, lambda x, a: 1.0 / (x * LN10), ufunc=np.log10)
arcsinh = _unary("arcsinh", np.arcsinh, lambda x, a: 1.0 / sqrt(x * x + 1.0), ufunc=np.arcsinh)
# for complex z, 1 / sqrt(z^2 - 1) has the wrong sign where Re z < 0: the
# principal branch's derivative is 1 / (sqrt(z - 1) sqrt(z + 1))
arccosh = _unary("arccosh", np.arccosh, lambda x, a: 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0))
                 if is_complex(x) else 1.0 / sqrt(x * x - 1.0), ufunc=np.arccosh)
arctanh = _unary("arctanh", np.arctanh, lambda x, a: 1.0 / (1.0 - x * x), ufunc=np.arctanh)
cbrt = _unary("cbrt", np.cbrt, lambda x, a: 1.0 / (3.0 * a * a), saves=(), ufunc=np.cbrt)
UFUNCS[sps.expit] = sigmoid


# derivatives of the form 1 / q: the rules divide by q (one pass) instead of
# forming 1 / q and multiplying (two passes and a temporary); exp's rule
# already multiplies by its own output, tanh's sweep shortcut uses its output
def _divided(f, q):
    f.prim.defvjp(lambda g, ans, x: g / q(x, ans))
    f.prim.defjvp(lambda t, ans, x: t / q(x, ans))


_divided(log, lambda x, a: x)
_divided(log1p, lambda x, a: 1.0 + x)
_divided(log2, lambda x, a: x * LN2)
_divided(log10, lambda x, a: x * LN10)
tanh.prim.fast_vjp = _core.FAST_VJP["tanh"]
sin.prim.fwd_saved, sin.prim.vjps = _sin_fwd, [_sin_vjp]
cos.prim.fwd_saved, cos.prim.vjps = _cos_fwd, [_cos_vjp]
# the sweep's shortcut of _sin_vjp / _cos_vjp with the partner saved: the product is
# formed where it is added (into x's adjoint through x[a:b] in one pass), same numbers
sin.prim.fast_vjp = cos.prim.fast_vjp = _core.FAST_VJP["partner"]

#: holomorphic functions: the same rules hold for complex values (JAX's convention:
#: the cotangent of z is multiplied by f'(z), not its conjugate)
_HOLOMORPHIC = ("neg", "pos", "sin", "cos", "tan", "exp", "log", "log1p", "expm1", "sqrt",
                "tanh", "sinh", "cosh", "square", "reciprocal", "exp2", "log2", "log10",
                "arcsinh", "arccosh", "arctanh")
for _name in _HOLOMORPHIC:
    BY_NAME[_name].prim.complex_ok = True
cos_given_sin_p.complex_ok = sin_given_cos_p.complex_ok = True


# abs of a complex z is not holomorphic: d|z| = Re(conj(z) dz) / |z|, so the
# cotangent of z is g conj(z) / |z| (0 at z = 0, as JAX)
def _abs_slope(x, ans):
    if not is_complex(x):
        return batching.elementwise_values(np.sign, x)
    zero = batching.elementwise_values(lambda v: np.asarray(v) == 0, batching.value_of(ans))
    if batching.reduce_values(np.any, zero):
        return where(zero, 0.0, conjugate(x) / where(zero, 1.0, ans))
    return conjugate(x) / ans


absolute.prim.defvjp(lambda g, ans, x: g * _abs_slope(x, ans))
absolute.prim.defjvp(lambda t, ans, x: real(t * _abs_slope(x, ans)) if is_complex(x)
                     else t * _abs_slope(x, ans))
absolute.prim.complex_ok = True


# ---------------------------------------------------------------------------
# binary: name, numpy function, (d/dx, d/dy) as functions of (x, y, ans)
# ---------------------------------------------------------------------------

def _power_impl(x, y):
    """``np.power``, with ``x**3`` and ``x**4`` of a float array by multiplication
    (numpy calls pow for them, ten times slower; the products are within 2 ulp).
    numpy itself computes ``x**2``, ``x**-1`` and ``x**0.5`` as ``x*x``, ``1/x``
    and ``sqrt(x)``, so those stay numpy's, bit for bit."""
    if type(x) is np.ndarray and (type(y) is int or type(y) is float) and \
            x.dtype.kind == "f":
        if y == 3:
            return x * x * x
        if y == 4:
            t = x * x
            return t * t
    return np.power(x, y)


def _pow_dx(x, y, ans):
    # y * x**(y-1), with 0 where y == 0 (x**0 == 1 has no slope)
    if (type(x) is float or type(x) is int) and not isinstance(y, Box):
        x = np.float64(x)        # 0.0 ** -1.0: inf (numpy), not ZeroDivisionError
    if type(y) is int or type(y) is float:
        # small constant exponents by multiplication (the scalar kernel's
        # _powc_partial computes the same expressions)
        if y == 2:
            return 2.0 * x
        if type(x) is np.ndarray and x.dtype.kind == "f" and (y == 3 or y == 4):
            d = x * x                # the same products, in one new array
            if y == 4:
                np.multiply(d, x, out=d)
            return np.multiply(d, float(y), out=d)
        if y == 3 or y == 4:
            # a dual of float64 arrays (forward over reverse): value and tangent
            # of the products below in one pass, the same roundings
            d = _core.pow_partial_dual(x, y) if type(x) is _core.Dual else None
            if d is not None:
                return d
        if y == 3:
            return 3.0 * (x * x)
        if y == 4:
            return 4.0 * (x * x * x)
        if y == -1:
            return -1.0 / (x * x)
        if y == 0.5:
            return 0.5 / sqrt(x)
    if not batching.any_value(lambda v: np.asarray(v) == 0, y):   # batched under vmap
        return y * x ** (y - 1.0)
    return where(batching.value_of(y) == 0, 0.0, y * x ** (y - 1.0))


def _pow_dy(x, y, ans):
    # x**y log x, with 0 where x**y == 0
    if type(x) is float or type(x) is int:
        if x < 0 and is_complex(ans):                          # x**y = e^{y log x}, log x complex
            return ans * complex(np.log(complex(x)))
        if x == 0:                                            # a weak Python float
            return 0.0 * ans
        return ans * (math.log(x) if x > 0 else math.nan)     # log(x < 0): nan, as numpy
    if is_complex(ans) and not is_complex(x):
        x = x + 0j                   # a real base of a complex power: its complex log
    zero = batching.elementwise_values(lambda v: np.asarray(v) == 0, batching.value_of(ans))
    if not batching.reduce_values(np.any, zero):                  # batched under vmap
        return ans * log(x)
    return where(zero, 0.0, ans * log(where(zero, 1.0, x)))


def _max_dx(x, y, ans):
    return _mask_of(lambda xc, yc: (xc > yc) + 0.5 * (xc == yc), ans, x, y)


def _min_dx(x, y, ans):
    return _mask_of(lambda xc, yc: (xc < yc) + 0.5 * (xc == yc), ans, x, y)


add = _binary("add", np.add, lambda x, y, a: 1.0, lambda x, y, a: 1.0, saves=(), ufunc=np.add)
subtract = _binary("sub", np.subtract, lambda x, y, a: 1.0, lambda x, y, a: -1.0, saves=(),
                   ufunc=np.subtract)
# linear rules without the multiplication by one
add.prim.defvjp(lambda g, ans, x, y: unbroadcast(x, g), lambda g, ans, x, y: unbroadcast(y, g))
add.prim.defjvp(lambda t, ans, x, y: t, lambda t, ans, x, y: t)
subtract.prim.defvjp(lambda g, ans, x, y: unbroadcast(x, g),
                     lambda g, ans, x, y: unbroadcast(y, -g))
subtract.prim.defjvp(lambda t, ans, x, y: t, lambda t, ans, x, y: -t)
add.prim.fast_vjp = _core.FAST_VJP["pass"]          # the sweep's C shortcut, same result
subtract.prim.fast_vjp = _core.FAST_VJP["sub"]
multiply = _binary("mul", np.multiply, lambda x, y, a: y, lambda x, y, a: x, ufunc=np.multiply)
divide = _binary("div", np.true_divide, lambda x, y, a: 1.0 / y, lambda x, y, a: -a / y,
                 saves=(1,), ufunc=np.true_divide)
power = _binary("pow", _power_impl, _pow_dx, _pow_dy, ufunc=np.power)
maximum = _binary("maximum", np.maximum, _max_dx, lambda x, y, a: 1.0 - _max_dx(x, y, a),
                  ufunc=np.maximum)
minimum = _binary("minimum", np.minimum, _min_dx, lambda x, y, a: 1.0 - _min_dx(x, y, a),
                  ufunc=np.minimum)


multiply.prim.defvjp(lambda g, ans, x, y: unbroadcast(x, _times(g, y)),
                     lambda g, ans, x, y: unbroadcast(y, _times(g, x)))
multiply.prim.fused_jvp = _core.FUSED_JVP["mul"]   # forward mode: tx*y + ty*x in one C pass
_core.set_vmap_fast(multiply.prim, "multiply")  # vmap: lanes' outer products in C
power.prim.fused_jvp = _core.FUSED_JVP["pow"]      # x**3, x**4: tx * (k x**(k-1)) in one pass
multiply.prim.defsparsity(patterns.PRODUCT)  # a constant factor's zeros cut the dependence

for _f in (add, subtract, multiply, divide, power):
    _f.prim.complex_ok = True

arctan2 = _binary("arctan2", np.arctan2, lambda x, y, a: y / (x * x + y * y),
                  lambda x, y, a: -x / (x * x + y * y), ufunc=np.arctan2)
hypot = _binary("hypot", np.hypot, lambda x, y, a: x / a, lambda x, y, a: y / a,
                ufunc=np.hypot)


# ---------------------------------------------------------------------------
# where(cond, x, y): cond is a constant; x and y are differentiable
# ---------------------------------------------------------------------------

where_p = Primitive("where", np.where, saves=(0,), elementwise=True)
# the branch not taken gets 0, not 0 * g: an inf or nan there (d/dx x**(y-1) at
# x = 0 under pow's y == 0 convention) must not leak through as 0 * inf = nan
# (a traced condition -- a mask recorded for ta.jit's replays -- has no derivative)
where_p.defvjp(lambda g, ans, c, x, y: None,
               lambda g, ans, c, x, y: unbroadcast(x, where(c, g, 0.0)),
               lambda g, ans, c, x, y: unbroadcast(y, where(c, 0.0, g)))
where_p.defjvp(lambda t, ans, c, x, y: None,
               lambda t, ans, c, x, y: where(c, t, 0.0),
               lambda t, ans, c, x, y: where(c, 0.0, t))
where_p.defbatched(BROADCAST)
where_p.defvmap(VMAP_ELEMENTWISE)
where_p.defsparsity(patterns.WHERE)          # x's element where c holds, y's elsewhere


where_p.complex_ok = True


def where(cond, x, y):
    """``np.where(cond, x, y)`` with derivatives through ``x`` and ``y``."""
    cond = batching.value_of(cond)           # batched under vmap: the lanes' conditions
    if isinstance(x, Box) or isinstance(y, Box) or isinstance(cond, Box):
        return _core.bind(where_p, cond, x, y)
    return np.where(cond, x, y)


BY_NAME["where"] = where


# logaddexp: log(e^x + e^y), stable; its partials are e^(x - ans) and e^(y - ans)
logaddexp = _binary("logaddexp", np.logaddexp, lambda x, y, a: exp(x - a),
                    lambda x, y, a: exp(y - a), ufunc=np.logaddexp)
logaddexp_p = logaddexp.prim


def _isnan_values(x):
    """Where the value of ``x`` is NaN (no derivative; batched under vmap)."""
    return batching.elementwise_values(np.isnan, batching.value_of(x))


def fmax(x, y):
    """``np.fmax``: ``maximum`` that ignores NaNs (same tie convention: 0.5 each)."""
    if not (isinstance(x, Box) or isinstance(y, Box)):
        return np.fmax(x, y)
    xn, yn = _isnan_values(x), _isnan_values(y)
    if not (batching.reduce_values(np.any, xn) or batching.reduce_values(np.any, yn)):
        return maximum(x, y)
    return where(yn, x, where(xn, y, maximum(x, y)))


def fmin(x, y):
    """``np.fmin``: ``minimum`` that ignores NaNs (same tie convention: 0.5 each)."""
    if not (isinstance(x, Box) or isinstance(y, Box)):
        return np.fmin(x, y)
    xn, yn = _isnan_values(x), _isnan_values(y)
    if not (batching.reduce_values(np.any, xn) or batching.reduce_values(np.any, yn)):
        return minimum(x, y)
    return where(yn, x, where(xn, y, minimum(x, y)))


def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kw):
    """``np.clip`` as ``minimum(maximum(x, a_min), a_max)`` (as JAX: a point on a
    bound gets half the derivative, like maximum/minimum ties)."""
    if min is not np._NoValue:         # numpy 2's names for the bounds
        a_min = min
    if max is not np._NoValue:
        a_max = max
    a_min = None if a_min is np._NoValue else a_min
    a_max = None if a_max is np._NoValue else a_max
    if not any(isinstance(v, Box) for v in (a, a_min, a_max)):
        return np.clip(a, a_min, a_max, out=out, **kw)
    if kw or out is not None:
        raise TypeError(f"clip: {sorted(kw) + (['out'] if out is not None else [])} are "
                        "not supported on traced values")
    out = a
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


UFUNCS[np.logaddexp] = logaddexp
UFUNCS[np.fmax] = fmax
UFUNCS[np.fmin] = fmin

#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.where: where, np.clip: clip}
#: public names re-exported by tapead.numpy
__all__ = ["where", "sigmoid", "relu", "stop_gradient", "logaddexp", "fmax", "fmin", "clip"]
TRACER_METHODS = {"clip": clip}


# ---------------------------------------------------------------------------
# complex parts.  Cotangents follow JAX's convention: a real-valued function's
# cotangent of z = x + iy is df/dx - i df/dy, so real() sends g back as g,
# imag() as -i g, conj() as conj(g).  On real inputs real and conj are the
# identity and imag and angle are constants (no derivative).
# ---------------------------------------------------------------------------

real_p = Primitive("real", np.real, saves=(), linear=True, elementwise=True)
real_p.defvjp(lambda g, ans, x: astype(g, x.dtype))       # g + 0i, in z's dtype
real_p.defjvp(lambda t, ans, x: real(t))
real_p.complex_ok = True
defelementwise(real_p)
imag_p = Primitive("imag", np.imag, saves=(), linear=True, elementwise=True)
imag_p.defvjp(lambda g, ans, x: g * -1j)
imag_p.defjvp(lambda t, ans, x: imag(t))
imag_p.complex_ok = True
defelementwise(imag_p)
conj_p = Primitive("conjugate", np.conjugate, saves=(), linear=True, elementwise=True)
conj_p.defvjp(lambda g, ans, x: conjugate(g))
conj_p.defjvp(lambda t, ans, x: conjugate(t))
conj_p.complex_ok = True
defelementwise(conj_p)


def real(val):
    """``np.real``: the real part, differentiable (the identity on real values)."""
    if isinstance(val, Box):
        return _core.bind(real_p, val) if is_complex(val) else val
    return np.real(val)


def imag(val):
    """``np.imag``: the imaginary part, differentiable (a constant 0 on real values)."""
    if isinstance(val, Box):
        if is_complex(val):
            return _core.bind(imag_p, val)
        return np.zeros_like(concrete(val))
    return np.imag(val)


def conjugate(x):
    """``np.conjugate``: the complex conjugate, differentiable."""
    if isinstance(x, Box):
        return _core.bind(conj_p, x) if is_complex(x) else x
    return np.conjugate(x)


def angle(z, deg=False):
    """``np.angle``: the argument of ``z``, ``arctan2(imag(z), real(z))`` (as JAX).

    On real values it is a constant (0 or pi) with derivative 0.
    """
    if isinstance(z, Box) and is_complex(z):
        out = arctan2(imag(z), real(z))
        return out * (180.0 / np.pi) if deg else out
    return np.angle(concrete(z), deg=deg)


UFUNCS[np.conjugate] = conjugate
BY_NAME.update(real=real, imag=imag, conjugate=conjugate, angle=angle)
NUMPY_FUNCTIONS.update({np.real: real, np.imag: imag, np.angle: angle})
TRACER_METHODS.update(conj=conjugate, conjugate=conjugate)
__all__ += ["real", "imag", "conjugate", "conj", "angle"]
conj = conjugate


# stop_gradient: the identity with no derivative (a constant to every transform,
# recomputed on replay)
stop_gradient_p = Primitive("stop_gradient", lambda x: np.array(x, copy=True)
                            if isinstance(x, np.ndarray) else x, saves=())
stop_gradient_p.defvjp(lambda g, ans, x: None)
stop_gradient_p.defjvp(lambda t, ans, x: None)
stop_gradient_p.complex_ok = True
defzero(stop_gradient_p)
stop_gradient_p.defvmap(lambda args, bdims: (stop_gradient(args[0]), bdims[0]))


def stop_gradient(x):
    """The value of ``x`` as a constant: no derivative flows through it.

    Parameters
    ----------
    x : array_like or traced value
        Any shape.

    Returns
    -------
    array or traced value
        ``x``'s value, same shape and dtype, with a zero derivative in every
        transform.

    Examples
    --------
    >>> import tapead as ta
    >>> float(ta.grad(lambda x: x * ta.stop_gradient(x))(3.0))    # d/dx (x * c) = c
    3.0
    """
    if isinstance(x, Box):
        return _core.bind(stop_gradient_p, x)
    return x


# astype: a dtype conversion.  Between float dtypes it is the identity (the
# cotangent goes back in the input's dtype); to an integer or bool dtype the
# result is piecewise constant: no derivative, recomputed on replay.
def _astype_impl(x, dtype):
    return np.asarray(x).astype(dtype)


astype_p = Primitive("astype", _astype_impl, saves=(), elementwise=True)


def _astype_vjp(g, ans, x, dtype):
    if not np.issubdtype(dtype, np.inexact):
        return None
    if is_complex(g) and not is_complex(x):      # undo the promotion to complex
        g = real(g)
    return astype(g, np.result_type(lanes_of(x)))


def _astype_jvp(t, ans, x, dtype):
    if not np.issubdtype(dtype, np.inexact):
        return None
    return astype(t, dtype)


astype_p.defvjp(_astype_vjp)
astype_p.defjvp(_astype_jvp)
astype_p.complex_ok = True
astype_p.defbatched(BROADCAST)
astype_p.defvmap(VMAP_ELEMENTWISE)
astype_p.defsparsity(patterns.astype_rule)   # none to integer/bool dtypes


def astype(x, dtype, copy=True, *, device=None):
    """``x.astype(dtype)`` with derivatives (none to integer or bool dtypes)."""
    dtype = np.dtype(dtype)
    if isinstance(x, Box):
        if np.result_type(_core.lanes_of(x)) == dtype and not copy:
            return x
        if is_complex(x) and dtype.kind != "c":
            raise NonDifferentiableError(
                f"astype: casting a complex value to {dtype} would drop its imaginary "
                "part (and that part's derivative); take np.real(x) (or np.abs(x)) "
                "explicitly, then convert")
        return _core.bind(astype_p, x, dtype=dtype)
    if device is not None and device != "cpu":
        raise ValueError(f"astype: device={device!r}; numpy arrays live on 'cpu'")
    return np.asarray(x).astype(dtype, copy=copy)


def _astype_method(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    if order not in ("K", "C", "A") or casting != "unsafe":
        raise TypeError("astype on a traced value takes dtype (and copy); order= and "
                        "casting= are not supported")
    return astype(x, dtype, copy=copy)


TRACER_METHODS["astype"] = _astype_method
if hasattr(np, "astype"):                  # numpy 2's function form
    NUMPY_FUNCTIONS[np.astype] = astype
__all__.append("astype")
