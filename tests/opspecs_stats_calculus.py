"""Op-spec rows of quantile/percentile (tapead/_prims/stats.py) and of
np.gradient / np.trapezoid (tapead/_prims/calculus.py).

The order statistics draw values at least 0.3 apart (``Distinct``), so the
sort under the interpolation never meets a tie.  ``jax.numpy.gradient`` has
no ``edge_order``: for edge_order=2 the JAX side of the rows is numpy's
formula written out with slices (``_gradient_edge2``), an independent check.
"""
from __future__ import annotations

import numpy as np

from opspecs import REAL, Interval
from opspecs import _array_op as A
from opspecs_misc import Distinct

V7 = ("vector", ((7,),))
M34 = ("matrix", ((3, 4),))
T = ("3d", ((2, 3, 4),))
COORDS = np.array([0.0, 0.4, 1.1, 1.5, 2.6])        # non-uniform sample points
Q = np.array([0.0, 12.5, 50.0, 81.0, 100.0])


def _q(x, q):
    """q in x's dtype: numpy computes an array q's weights in q's dtype, so a
    float64 q would turn float32 samples into a float64 result."""
    return np.asarray(q, dtype=x.dtype)


def _jax(m):
    return getattr(m, "_module", m).__name__.startswith("jax")


def _gradient_edge2(m, f, h):
    """np.gradient(f, h, edge_order=2) along the last axis, by slices."""
    inner = (f[..., 2:] - f[..., :-2]) / (2.0 * h)
    first = (-1.5 * f[..., :1] + 2.0 * f[..., 1:2] - 0.5 * f[..., 2:3]) / h
    last = (0.5 * f[..., -3:-2] - 2.0 * f[..., -2:-1] + 1.5 * f[..., -1:]) / h
    return m.concatenate([first, inner, last], axis=-1)


def _gradient2(m, f, h):
    return _gradient_edge2(m, f, h) if _jax(m) else m.gradient(f, h, axis=-1, edge_order=2)


ARRAY_OPS = [
    # quantile / percentile, method="linear"
    A("percentile_scalar_q", lambda m, x: m.percentile(x, 30.0), V7, M34,
      domain=(Distinct(),)),
    A("percentile_q_array_axis", lambda m, x: m.percentile(x, _q(x, Q), axis=1), M34,
      domain=(Distinct(),)),
    A("percentile_axis0_keepdims", lambda m, x: m.percentile(x, 62.5, axis=0, keepdims=True),
      M34, domain=(Distinct(),)),
    A("percentile_axes_tuple", lambda m, x: m.percentile(x, _q(x, [25.0, 90.0]), axis=(0, 2)), T,
      domain=(Distinct(),)),
    A("quantile", lambda m, x: m.quantile(x, 0.37), V7, M34, domain=(Distinct(),)),
    A("quantile_q_array_axis",
      lambda m, x: m.quantile(x, _q(x, Q / 100.0), axis=-1, keepdims=True), M34,
      domain=(Distinct(),)),
    A("percentile_traced_q", lambda m, x, q: m.percentile(x, q, axis=-1),
      ("scalar_q", ((7,), ())), ("array_q", ((3, 4), (3,))),
      domain=(Distinct(), Interval(5.0, 95.0))),
    A("quantile_traced_q", lambda m, x, q: m.quantile(x, q), ("scalar_q", ((3, 4), ())),
      domain=(Distinct(), Interval(0.05, 0.95))),
    # np.gradient: uniform spacing, coordinates, axes, both edge orders
    A("gradient", lambda m, f: m.gradient(f), V7),
    A("gradient_spacing_axis", lambda m, f: m.gradient(f, 0.5, axis=1), M34),
    A("gradient_all_axes", lambda m, f: m.stack(m.gradient(f, 0.5, 2.0)), M34),
    A("gradient_coordinates", lambda m, f: m.gradient(f, COORDS, axis=0),
      ("array", ((5, 3),))),
    A("gradient_edge_order2", lambda m, f: _gradient2(m, f, 0.25), V7, M34),
    # np.trapezoid: dx, x as a 1-d array, x shaped like y, traced x
    A("trapezoid", lambda m, y: m.trapezoid(y), V7, M34),
    A("trapezoid_dx_axis0", lambda m, y: m.trapezoid(y, dx=0.3, axis=0), M34),
    A("trapezoid_x", lambda m, y, x: m.trapezoid(y, x=x), ("shared_x", ((3, 4), (4,))),
      ("full_x", ((3, 4), (3, 4))), domain=(REAL, REAL)),
    A("trapezoid_coords", lambda m, y: m.trapezoid(y, x=_q(y, COORDS), axis=0),
      ("array", ((5, 2),))),
]
