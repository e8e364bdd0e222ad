"""Op-spec rows of tapead/_prims/numpy_extra.py and the numpy functions
completed with it: fabs, logaddexp2, float_power, rot90, rollaxis, append,
dsplit, select, partition, nan_to_num, cross on any axis, matrix_power,
multi_dot, the singular-value norms, the ufunc methods (reduce, accumulate,
outer), ``tnp.r_``/``tnp.c_`` and reductions of Python lists.

``partition`` rows read only what numpy and JAX agree on (the k-th element and
symmetric functions of each side); ``real_if_close`` is in tests/test_numpy_extra.py.
"""
from __future__ import annotations

import numpy as np

from opspecs import POS, REAL, AwayFromZero, Lattice
from opspecs import _array_op as A
from opspecs_misc import Distinct

U23 = (("array", ((2, 3),)),)
B2 = (("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))))
NANS = np.array([[False, True, False], [False, False, True]])
INFS = np.array([[True, False, False], [False, True, False]])
COND = np.array([[True, False, True], [False, False, True]])
EYE3 = 3.0 * np.eye(3)


def _uf(m, name):
    """The ufunc ``name`` of namespace ``m`` with its methods: numpy's own for
    tapead (its ufunc methods dispatch to tapead), ``jnp.frompyfunc`` of JAX's
    function where JAX's has no ufunc methods."""
    f = getattr(m, name)
    if hasattr(f, "reduce"):
        return f
    if m.__name__ == "tapead.numpy":
        return getattr(np, name)
    return m.frompyfunc(f, 2, 1)

def _L(m, *items):
    """A Python list for tapead and numpy (the case under test); JAX takes
    arrays only, so its reference gets the stacked list."""
    return m.stack(items) if m.__name__.startswith("jax") else list(items)


ARRAY_OPS = [
    A("fabs", lambda m, x: m.fabs(x), *U23, domain=(AwayFromZero(0.2, 2.0),)),
    A("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), *B2),
    A("float_power", lambda m, x, y: m.float_power(x, y).astype(x.dtype), *B2,
      domain=(POS, REAL)),
    A("rot90", lambda m, x: m.rot90(x) + 0.0, *U23),
    A("rot90_k2_k3_axes", lambda m, x: m.rot90(x, 2, axes=(1, 2)) * m.rot90(x, -2, axes=(2, 1))
      + m.sum(m.rot90(x, 3, axes=(0, 2)) * m.rot90(x, 7, axes=(0, 2))),
      ("array", ((2, 3, 2),))),
    A("rollaxis", lambda m, x: m.rollaxis(x, 2) * 1.0 + m.sum(m.rollaxis(x, 0, 3) ** 2),
      ("array", ((2, 3, 2),))),
    A("append_flat", lambda m, x, y: m.append(x, y * y), ("array", ((2, 3), (3,)))),
    A("append_axis", lambda m, x, y: m.append(x, y, axis=0), ("array", ((2, 3), (1, 3)))),
    A("dsplit", lambda m, x: m.dsplit(x, 2)[1] * m.dsplit(x, [1])[0],
      ("array", ((2, 3, 2),))),
    A("select", lambda m, x, y: m.select([COND, ~COND], [x, y * y], 0.5)
      + m.select([COND], [x * y], y), *B2),
    A("partition", lambda m, x: m.partition(x, 2)[..., 2] + m.sum(m.partition(x, 2)[..., :2]
                                                                   ** 2, axis=-1),
      ("vector", ((5,),)), ("matrix", ((2, 5),)), domain=(Distinct(),)),
    A("nan_to_num", lambda m, x: m.nan_to_num(m.where(NANS, np.nan, x), nan=0.5) * x
      + m.nan_to_num(m.where(INFS, np.inf, x * x), posinf=2.0), *U23),
    A("cross_axes", lambda m, a, b: m.cross(a, b, axisa=0, axisb=1, axisc=0),
      ("array", ((3, 2), (2, 3)))),
    A("cross_axis", lambda m, a, b: m.cross(a, b, axis=0), ("array", ((3, 2), (3, 2)))),
    A("matrix_power", lambda m, x: m.linalg.matrix_power(x, 3)
      + m.linalg.matrix_power(x + EYE3.astype(x.dtype), -2) + m.linalg.matrix_power(x, 0) * x,
      ("matrix", ((3, 3),)), ("batched", ((2, 3, 3),))),
    A("matrix_power_6", lambda m, x: m.linalg.matrix_power(x, 6), ("matrix", ((3, 3),)),
      domain=(REAL,)),
    A("multi_dot", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]),
      ("matrices", ((2, 3), (3, 4), (4, 1), (1, 2))),
      ("vector_ends", ((3,), (3, 4), (4, 2), (2,)))),
    A("norm_nuc", lambda m, x: m.linalg.norm(x, "nuc"), *U23),
    A("norm_2_m2", lambda m, x: m.linalg.norm(x, 2) * m.linalg.norm(x, -2), *U23),
    A("norm_2_axes", lambda m, x: m.linalg.norm(x, 2, axis=(2, 0), keepdims=True)
      + m.linalg.norm(x, "nuc", axis=(0, 2)), ("array", ((2, 3, 3),))),
    A("maximum_reduce", lambda m, x: _uf(m, "maximum").reduce(x, axis=1)
      + m.sum(_uf(m, "minimum").reduce(x)),
      ("matrix", ((2, 5),)), domain=(Distinct(),)),
    A("add_multiply_reduce", lambda m, x: _uf(m, "add").reduce(x, axis=None)
      + _uf(m, "multiply").reduce(x, axis=1, keepdims=True), *U23),
    A("subtract_reduce", lambda m, x: _uf(m, "subtract").reduce(x, axis=1)
      + m.sum(_uf(m, "divide").reduce(x, axis=0)), *U23, domain=(AwayFromZero(0.5, 2.0),)),
    A("logaddexp_reduce", lambda m, x: _uf(m, "logaddexp").reduce(x, axis=-1, keepdims=True)
      + _uf(m, "hypot").reduce(x, axis=0), *U23, domain=(AwayFromZero(0.3, 2.0),)),
    A("accumulate", lambda m, x: _uf(m, "add").accumulate(x, axis=1) * _uf(m, "multiply").accumulate(x)
      + _uf(m, "maximum").accumulate(x, axis=1) + _uf(m, "subtract").accumulate(x), *U23,
      domain=(Lattice(0.1, 0.9),)),
    A("ufunc_outer", lambda m, x, y: _uf(m, "multiply").outer(x, y) + _uf(m, "subtract").outer(x, y)
      + _uf(m, "arctan2").outer(x, y + 3.0), ("array", ((3,), (2,))), ("matrix", ((2, 2), (2,)))),
    A("r_", lambda m, x, y: m.r_[x, y[0], 1.5, y * y], ("array", ((3,), (2,)))),
    A("r_axis_c_", lambda m, x, y: m.r_["1", x, y] + m.sum(m.c_[x[0], y[0, :2] * x[1]]),
      ("array", ((2, 2), (2, 3)))),
    A("mean_std_var_of_lists", lambda m, x: m.mean(_L(m, x[0], x[1] * x[2])) * m.std(_L(m, x[0], x[2]))
      + m.var(_L(m, x[1], x[0] * x[2], x[2])) + m.linalg.norm(_L(m, x[0], x[1])), ("vector", ((3,),))),
]
del A
