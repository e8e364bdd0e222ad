"""scipy.integrate's solvers, differentiable: ``odeint`` and ``solve_ivp``
(see :mod:`tapead.integrate`).

>>> import numpy as np, tapead as ta
>>> from tapead.scipy.integrate import odeint
>>> t = np.linspace(0.0, 1.0, 3)
>>> ys = odeint(lambda y, t: -y, np.array([1.0, 2.0]), t)
>>> ys.shape
(3, 2)
"""
from tapead.integrate import odeint, solve_ivp  # noqa: F401

__all__ = ["odeint", "solve_ivp"]
