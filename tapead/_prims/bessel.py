"""scipy.special Bessel functions with derivatives in the argument (exported by
``tapead.scipy.special``).

The derivatives come from the recurrences

* ``J_v' = (J_{v-1} - J_{v+1}) / 2``, the same for ``Y_v``,
* ``I_v' = (I_{v-1} + I_{v+1}) / 2``, ``K_v' = -(K_{v-1} + K_{v+1}) / 2``,
* ``ive(v, z) = iv(v, z) e^{-|z|}``: ``ive' = (ive_{v-1} + ive_{v+1}) / 2 - sign(z) ive``,

written with the same functions, so every order is available.  The order
``v`` is a constant: a traced order is refused (its derivative is not a
Bessel function).  The fixed-order ones (``i0``, ``i1``, ``j0``, ...) are
unary ufuncs whose derivatives call the general ones.
"""
from __future__ import annotations

import scipy.special as sps

from tapead._prims import elementwise as ew
from tapead._prims.elementwise import sign
from tapead._prims.special_gamma import ufunc_primitive

iv = ufunc_primitive("iv", sps.iv, [None, lambda ans, v, z: 0.5 * (iv(v - 1, z) + iv(v + 1, z))],
                     ("v", "z"))
ive = ufunc_primitive(
    "ive", sps.ive,
    [None, lambda ans, v, z: 0.5 * (ive(v - 1, z) + ive(v + 1, z)) - sign(z) * ans], ("v", "z"))
jv = ufunc_primitive("jv", sps.jv, [None, lambda ans, v, z: 0.5 * (jv(v - 1, z) - jv(v + 1, z))],
                     ("v", "z"))
yv = ufunc_primitive("yv", sps.yv, [None, lambda ans, v, z: 0.5 * (yv(v - 1, z) - yv(v + 1, z))],
                     ("v", "z"))
# yn: integer order n (no derivative in n); y_{n-1} - y_{n+1} with scipy's yn(-m) = (-1)^m y_m
yn = ufunc_primitive("yn", sps.yn, [None, lambda ans, n, x: 0.5 * (yn(n - 1, x) - yn(n + 1, x))],
                     ("n", "x"))
kv = ufunc_primitive("kv", sps.kv,
                     [None, lambda ans, v, z: -0.5 * (kv(v - 1, z) + kv(v + 1, z))], ("v", "z"))

U = ew._unary
i0 = U("i0", sps.i0, lambda x, a: i1(x), ufunc=sps.i0)
i1 = U("i1", sps.i1, lambda x, a: 0.5 * (i0(x) + iv(2.0, x)), ufunc=sps.i1)
i0e = U("i0e", sps.i0e, lambda x, a: i1e(x) - sign(x) * a, ufunc=sps.i0e)
i1e = U("i1e", sps.i1e, lambda x, a: 0.5 * (i0e(x) + ive(2.0, x)) - sign(x) * a, ufunc=sps.i1e)
j0 = U("j0", sps.j0, lambda x, a: -j1(x), ufunc=sps.j0)
j1 = U("j1", sps.j1, lambda x, a: 0.5 * (j0(x) - jv(2.0, x)), ufunc=sps.j1)
y0 = U("y0", sps.y0, lambda x, a: -y1(x), ufunc=sps.y0)
y1 = U("y1", sps.y1, lambda x, a: 0.5 * (y0(x) - yv(2.0, x)), ufunc=sps.y1)
del U

FUNCTIONS = {"iv": iv, "ive": ive, "jv": jv, "yv": yv, "yn": yn, "kv": kv, "i0": i0, "i1": i1,
             "i0e": i0e, "i1e": i1e, "j0": j0, "j1": j1, "y0": y0, "y1": y1}
#: numpy functions (NEP 18): none (these are ufuncs)
NUMPY_FUNCTIONS: dict = {}
