"""Op-spec rows of indexing by integers computed from traced values (joined to
opspecs.SPECS): ``x[np.floor(p).astype(int)]`` and the bilinear interpolation of
a fluid simulation.

The positions ``p`` are drawn as ``k + u`` with ``u`` well inside (0, 1), so that
finite differences never cross an integer: the derivative with respect to ``p``
comes only from the interpolation weights (the integers carry none), the
derivative with respect to ``x`` from the elements gathered.
"""
from dataclasses import dataclass

import numpy as np

from opspecs import REAL, _array_op as A

FIELD = np.linspace(-1.0, 2.0, 20).reshape(4, 5) ** 2     # a plain numpy array


@dataclass(frozen=True)
class Cells:
    """k + u with k uniform in {0, ..., n - 1} and u uniform on (lo, hi)."""
    n: int
    lo: float = 0.15
    hi: float = 0.85

    def sample(self, rng, shape):
        return rng.integers(0, self.n, shape) + rng.uniform(self.lo, self.hi, shape)


def _i(m, p):
    return m.floor(p).astype(int)


def _bilinear(m, f, px, py):
    """Sample grid ``f`` at (px, py) as a semi-Lagrangian advection step does."""
    fx, fy = m.floor(px), m.floor(py)
    x0, y0 = fx.astype(int), fy.astype(int)
    wx, wy = px - fx, py - fy              # (px - x0 would promote float32 to float64)
    return (f[x0, y0] * (1 - wx) * (1 - wy) + f[x0 + 1, y0] * wx * (1 - wy)
            + f[x0, y0 + 1] * (1 - wx) * wy + f[x0 + 1, y0 + 1] * wx * wy)


ARRAY_OPS = [
    A("gather_traced_rows", lambda m, x, p: x[_i(m, p)] * p[:, None],
      ("array", ((4, 3), (5,))), domain=(REAL, Cells(4))),
    A("gather_traced_scalar", lambda m, x, p: x[_i(m, p)] * p,
      ("scalar", ((4, 3), ())), domain=(REAL, Cells(4))),
    A("gather_traced_pairs", lambda m, x, p, q: x[_i(m, p), _i(m, q)] * q,
      ("array", ((4, 3), (2, 3), (3,))), domain=(REAL, Cells(4), Cells(3))),
    A("gather_traced_cols", lambda m, x, q: x[:, _i(m, q)] * q,
      ("array", ((4, 3), (5,))), domain=(REAL, Cells(3))),
    A("gather_traced_round", lambda m, x, p: x[m.round(p).astype(np.int64), 1:] * p[:, None],
      ("array", ((4, 3), (3,))), domain=(REAL, Cells(4, 0.05, 0.45))),
    A("gather_traced_bilinear", lambda m, f, px, py: _bilinear(m, f, px, py),
      ("array", ((5, 6), (7,), (7,))), domain=(REAL, Cells(4), Cells(5))),
    A("gather_traced_plain_field", lambda m, p: FIELD.astype(p.dtype)[_i(m, p), 2] * p,
      ("array", ((6,),)), domain=(Cells(4),)),
    A("take_traced", lambda m, x, p: m.take(x, _i(m, p), axis=1) * p,
      ("array", ((4, 3), (3,))), domain=(REAL, Cells(3))),
]

#: JAX does not let a numpy array be indexed by its traced values
NO_JAX = {"gather_traced_plain_field"}
