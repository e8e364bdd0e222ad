"""Op-spec rows of tapead/_prims/misc.py: the smooth compositions and the
zero-derivative (piecewise-constant) primitives.

Domains keep every point smooth: the rounding functions are drawn off
integers and half-integers, ``remainder``/``fmod`` keep ``x / y`` away from
integers, ``median``'s continuous draws have no ties, NaN rows put NaNs at
fixed positions through ``where``.

``interp`` has no row: numpy's interp returns float64 whatever the input
dtype, and every row runs in float32 too; tests/test_misc.py checks it
against finite differences (order 2) and JAX.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opspecs import POS, REAL, AwayFromZero, Lattice
from opspecs import _array_op as A

U23 = (("array", ((2, 3),)),)
SCALAR_AND_ARRAY = (("scalar", ((),)), ("array", ((2, 3),)))
B2 = (("scalar", ((), ())), ("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))))
NANS = np.array([[False, True, False], [False, False, True]])


@dataclass(frozen=True)
class Distinct:
    """Shuffled values at least 0.3 apart (no near ties for order statistics)."""

    def sample(self, rng, shape):
        n = int(np.prod(shape))
        v = rng.permutation(n) * 0.5 + rng.uniform(0.0, 0.2, n) - 0.25 * n
        return v.reshape(shape) if shape else float(v[0])


OFF_GRID = Lattice(0.1, 0.4)          # off integers and half-integers
SMALL_QUOTIENT = (AwayFromZero(0.2, 1.3), AwayFromZero(1.5, 2.0))   # |x/y| in (0.1, 0.87)
WRAPPED_QUOTIENT = (AwayFromZero(2.3, 2.9), AwayFromZero(1.0, 1.1))  # |x/y| in (2.09, 2.9)

ARRAY_OPS = [
    # piecewise constant: derivative exactly zero
    A("floor", lambda m, x: m.floor(x) * x, *SCALAR_AND_ARRAY, domain=(OFF_GRID,)),
    A("ceil", lambda m, x: m.ceil(x) * x, *SCALAR_AND_ARRAY, domain=(OFF_GRID,)),
    A("rint", lambda m, x: m.rint(x) + x, *U23, domain=(OFF_GRID,)),
    A("trunc", lambda m, x: m.trunc(x) * x, *U23, domain=(OFF_GRID,)),
    # (jax.numpy dropped fix; it is trunc there)
    A("fix", lambda m, x: getattr(m, "fix", m.trunc)(x) * x, *U23, domain=(OFF_GRID,)),
    A("round", lambda m, x: m.round(x) * x, *U23, domain=(OFF_GRID,)),
    A("heaviside", lambda m, x, h: m.heaviside(x, h) + h, ("array", ((2, 3), (2, 3))),
      ("bcast_h0", ((2, 3), ())), domain=(AwayFromZero(0.2, 2.0), REAL)),
    A("astype_int", lambda m, x: x.astype(np.int8) * x, *U23, domain=(OFF_GRID,)),
    # dtype conversion between floats: the identity, derivatives kept
    A("astype_same", lambda m, x: (m.sin(x) * x).astype(x.dtype), *U23),
    # elementwise compositions
    A("remainder", lambda m, x, y: m.remainder(x, y), *B2, domain=SMALL_QUOTIENT),
    A("remainder_wrapped", lambda m, x, y: m.mod(x, y), *B2, domain=WRAPPED_QUOTIENT),
    A("fmod", lambda m, x, y: m.fmod(x, y), *B2, domain=SMALL_QUOTIENT),
    A("fmod_wrapped", lambda m, x, y: m.fmod(x, y), *B2, domain=WRAPPED_QUOTIENT),
    A("copysign", lambda m, x, y: m.copysign(x, y), *B2,
      domain=(AwayFromZero(0.2, 2.0), AwayFromZero(0.2, 2.0))),
    A("deg2rad", lambda m, x: m.deg2rad(x), *SCALAR_AND_ARRAY),
    A("rad2deg", lambda m, x: m.rad2deg(x), *SCALAR_AND_ARRAY),
    A("radians_degrees", lambda m, x: m.degrees(m.radians(x) * x), *U23),
    A("sinc", lambda m, x: m.sinc(x), *SCALAR_AND_ARRAY, domain=(AwayFromZero(0.1, 2.5),)),
    # differences, averages, ranges, products
    A("diff", lambda m, x: m.diff(x), ("vector", ((5,),)), ("matrix", ((3, 4),))),
    A("diff_n2_axis0", lambda m, x: m.diff(x, n=2, axis=0), ("array", ((4, 3),))),
    A("diff_prepend_append", lambda m, x, y, z: m.diff(x, prepend=y, append=z),
      ("array", ((2, 3), (2, 1), ()))),
    A("average_weights", lambda m, x, w: m.average(x, weights=w),
      ("array", ((2, 3), (2, 3))), domain=(REAL, POS)),
    A("average_weights_axis", lambda m, x, w: m.average(x, axis=1, weights=w),
      ("array", ((2, 3), (3,))), domain=(REAL, POS)),
    A("average_axis0", lambda m, x: m.average(x, axis=0), *U23),
    A("linspace", lambda m, a, b: m.linspace(a, b, 5), ("scalar", ((), ())),
      ("array", ((3,), (3,))), ("bcast", ((), (2,)))),
    A("linspace_open", lambda m, a, b: m.linspace(a, b, 4, endpoint=False),
      ("scalar", ((), ())), ("array", ((2,), (2,)))),
    A("cross", lambda m, a, b: m.cross(a, b), ("vector", ((3,), (3,))),
      ("batch", ((2, 3), (2, 3))), ("bcast", ((3,), (2, 3)))),
    A("polyval", lambda m, p, x: m.polyval(p, x), ("scalar_x", ((4,), ())),
      ("array_x", ((3,), (2, 3)))),
    # order statistics and NaN-ignoring reductions
    A("median", lambda m, x: m.median(x), ("odd", ((5,),)), ("even", ((6,),)),
      ("matrix", ((3, 4),)), domain=(Distinct(),)),
    A("median_axis", lambda m, x: m.concatenate([m.median(x, axis=0), m.median(x, axis=1)]),
      ("array", ((3, 4),)), domain=(Distinct(),)),
    A("median_keepdims", lambda m, x: m.median(x, axis=1, keepdims=True), ("array", ((3, 4),)),
      domain=(Distinct(),)),
    A("nansum", lambda m, x: m.nansum(m.where(NANS, m.nan, x), axis=1), *U23),
    A("nanmean", lambda m, x: m.nanmean(m.where(NANS, m.nan, x), axis=0), *U23),
    A("nanmax", lambda m, x: m.nanmax(m.where(NANS, m.nan, x), axis=1), *U23,
      domain=(Distinct(),)),
    A("nanmin", lambda m, x: m.nanmin(m.where(NANS, m.nan, x)), *U23,
      domain=(Distinct(),)),
    A("nanmean_no_nan", lambda m, x: m.nanmean(x), *U23),
    # grids and convolution
    A("meshgrid_xy", lambda m, x, y: m.stack(m.meshgrid(x, y)), ("array", ((3,), (2,)))),
    A("meshgrid_ij", lambda m, x, y: m.stack(m.meshgrid(x, y, indexing="ij")),
      ("array", ((3,), (2,)))),
    A("convolve", lambda m, a, v: m.convolve(a, v), ("long_short", ((5,), (3,))),
      ("short_long", ((2,), (4,)))),
    A("convolve_same", lambda m, a, v: m.convolve(a, v, mode="same"),
      ("long_short", ((5,), (3,))), ("short_long", ((2,), (5,)))),
    A("convolve_valid", lambda m, a, v: m.convolve(a, v, mode="valid"),
      ("long_short", ((5,), (2,))), ("short_long", ((3,), (4,)))),
    # constants from shapes: full_like with a traced fill value
    A("full_like", lambda m, a, x: m.full_like(a, x) * a, ("array", ((2, 3), ()))),
]
