"""Differentiable ODE solves on scipy's integrators: ``odeint`` and ``solve_ivp``.

``tapead.integrate.odeint(func, y0, t, *args)`` follows
``scipy.integrate.odeint`` (also importable as ``tapead.scipy.integrate.odeint``)
and ``tapead.integrate.solve_ivp`` follows ``scipy.integrate.solve_ivp``.  The
solve is one tape node (``rules.odeint_p``): reverse mode by forward
sensitivities for small solves and by the adjoint method otherwise, forward
mode by forward sensitivities, every integration done by scipy.  The modules, bottom to top: ``kernels`` (the right-hand side's
derivatives from a recorded tape), ``problems`` (the user's, adjoint and
tangent systems on flat vectors), ``solvers`` (scipy driven for each),
``rules`` (the primitive and its rules), ``api`` (the two front ends).
"""
from tapead.integrate.api import odeint, solve_ivp

__all__ = ["odeint", "solve_ivp"]
