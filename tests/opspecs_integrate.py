"""Op-spec rows of tapead/integrate (the ``odeint`` primitive).

The table's checks compare with numpy and JAX to 1e-12 and forward with
reverse mode to 1e-12, which an integrator meets only where it is exact: the
rows integrate a system whose solution is a polynomial in ``t`` of degree
three (``y1' = a + b t``, ``y2' = c y1``), which the Dormand-Prince pair of
``RK45`` (and JAX's ``odeint``) integrates exactly, as it does the adjoint and
tangent systems (polynomials too).  The state still feeds the right-hand
side (``c y1``), so the rows exercise the VJP and JVP in ``y``, the
parameters, the output times, float32, vmap and the higher orders.  The
integrator's accuracy on problems it does not solve exactly is checked in
tests/test_integrate.py (closed forms, finite differences, JAX).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.integrate

import tapead.numpy as tnp
from tapead.scipy.integrate import odeint

from opspecs import REAL
from opspecs import _array_op as A

TOL = dict(rtol=1e-10, atol=1e-10)
TIMES = np.array([0.0, 0.4, 1.0])


@dataclass(frozen=True)
class Increasing:
    """Output times: ``lo`` then gaps uniform on (0.2, 0.5)."""
    lo: float

    def sample(self, rng, shape):
        return self.lo + np.concatenate([[0.0], np.cumsum(rng.uniform(0.2, 0.5,
                                                                      shape[0] - 1))])


def _scipy_odeint(func, y0, t, *args, rtol, atol):
    """scipy's solve_ivp (RK45) with odeint's calling convention."""
    y0 = np.asarray(y0)
    t = np.asarray(t, dtype=np.float64)
    sol = scipy.integrate.solve_ivp(lambda s, y: func(y, s, *args), (t[0], t[-1]), y0,
                                    method="RK45", t_eval=t, rtol=rtol, atol=atol)
    return sol.y.T.astype(y0.dtype)


def _solver(m):
    """The odeint of the namespace a row body is written against."""
    mod = getattr(m, "_module", m)
    if mod is tnp:
        return lambda *a, **kw: odeint(*a, method="RK45", **kw)
    if mod is np:
        return _scipy_odeint
    from jax.experimental.ode import odeint as jax_odeint  # local: JAX only in its tests
    return jax_odeint


def _cubic(m, y, t, a, b, c):
    return m.stack([a + b * t, c * y[0]])


def _params(m, y0, a, b, c):
    return _solver(m)(lambda y, t, a, b, c: _cubic(m, y, t, a, b, c), y0, TIMES, a, b, c,
                      **TOL)


def _times(m, y0, t, c):
    return _solver(m)(lambda y, s, c: _cubic(m, y, s, 0.3, -0.8, c), y0, t, c, **TOL)


ARRAY_OPS = [
    A("odeint_params", _params, ("array", ((2,), (), (), ()))),
    A("odeint_times", _times, ("array", ((2,), (3,), ())),
      domain=(REAL, Increasing(-0.5), REAL)),
]
