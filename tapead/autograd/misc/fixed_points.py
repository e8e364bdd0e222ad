"""``fixed_point(f, a, x0, distance, tol)``: autograd's fixed-point solver.

Iterates ``x <- f(a)(x)`` from ``x0`` until ``distance(x, x_prev) <= tol``.
The derivative in ``a`` comes from the implicit function theorem: the
cotangent ``w = g + w ∂f/∂x`` is itself found by fixed-point iteration (same
``distance`` and ``tol``), then pulled back through ``f(a)(x*)`` to ``a``.
``f``, ``x0``, ``distance`` and ``tol`` carry no derivative.

>>> import numpy as np
>>> from tapead.autograd import grad
>>> from tapead.autograd.misc.fixed_points import fixed_point
>>> newton_sqrt = lambda a: lambda x: 0.5 * (x + a / x)
>>> dist = lambda x, y: np.abs(x - y)
>>> root = lambda a: fixed_point(newton_sqrt, a, 1.0, dist, 1e-12)
>>> round(float(root(2.0)), 12), round(float(grad(root)(2.0)), 12)
(1.414213562373, 0.353553390593)
"""
from __future__ import annotations

from tapead.autograd.core import defvjp, make_vjp, primitive, vspace

__all__ = ["fixed_point"]


@primitive
def fixed_point(f, a, x0, distance, tol):
    """The fixed point of ``f(a)`` reached from ``x0`` (see the module docstring)."""
    step = f(a)
    x, x_prev = step(x0), x0
    while distance(x, x_prev) > tol:
        x, x_prev = step(x), x
    return x


def _fixed_point_vjp(ans, f, a, x0, distance, tol):
    vjp_a, _ = make_vjp(lambda a_: f(a_)(ans), a)

    def vjp(g):
        def adjoint(params):
            a_, x_star, g_ = params
            vjp_x, _ = make_vjp(lambda x: f(a_)(x), x_star)
            vs = vspace(x_star)
            return lambda w: vs.add(vjp_x(w), g_)
        w = fixed_point(adjoint, (a, ans, g), vspace(x0).zeros(), distance, tol)
        return vjp_a(w)
    return vjp


defvjp(fixed_point, None, _fixed_point_vjp, None, None, None)
