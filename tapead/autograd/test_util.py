"""autograd's ``test_util``: ``check_grads`` and its helpers.

``check_grads(f, argnum=0, modes=["fwd", "rev"], order=2)`` returns a
checker that takes ``f``'s arguments: forward mode is compared with a
central difference along a random direction, reverse mode through the
inner product ``<u, J v>``, and ``order=2`` checks the JVP and the VJP as
functions again (in both their arguments).  A disagreement raises
``AssertionError`` naming the function and the mode.  Random directions
come from ``numpy.random``'s global stream, as in autograd.

>>> import numpy as np
>>> from tapead.autograd.test_util import check_grads
>>> check_grads(lambda x: np.sum(np.sin(x) * x))(np.array([0.5, 1.0]))
"""
from __future__ import annotations

from tapead.autograd.core import make_jvp, make_vjp, vspace
from tapead.autograd.wrap_util import get_name, unary_to_nary

__all__ = ["check_grads", "check_equivalent", "check_jvp", "check_vjp", "combo_check",
           "scalar_close", "make_numerical_jvp"]

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6


def scalar_close(a, b):
    """``a`` and ``b`` agree to ``TOL`` absolutely or ``RTOL`` relatively."""
    diff = abs(a - b)
    return diff < TOL or diff / abs(a + b) < RTOL


def make_numerical_jvp(f, x):
    """``v -> (f(x + v eps/2) - f(x - v eps/2)) / eps``."""
    y = f(x)
    x_vs, y_vs = vspace(x), vspace(y)

    def jvp(v):
        plus = f(x_vs.add(x, x_vs.scalar_mul(v, EPS / 2)))
        minus = f(x_vs.add(x, x_vs.scalar_mul(v, -EPS / 2)))
        return y_vs.scalar_mul(y_vs.add(plus, y_vs.scalar_mul(minus, -1.0)), 1.0 / EPS)
    return jvp


def check_vjp(f, x):
    """Reverse mode of ``f`` at ``x`` against differences: ``<u, J v>`` both ways."""
    vjp, y = make_vjp(f, x)
    numeric_jvp = make_numerical_jvp(f, x)
    x_vs, y_vs = vspace(x), vspace(y)
    x_v, y_v = x_vs.randn(), y_vs.randn()
    vjp_y = x_vs.covector(vjp(y_vs.covector(y_v)))
    got_vs = vspace(vjp_y)
    assert got_vs == x_vs, (f"Derivative (VJP) check of {get_name(f)} failed: the cotangent's "
                            f"vector space {got_vs} is not the argument's {x_vs}")
    exact = x_vs.inner_prod(x_v, vjp_y)
    numeric = y_vs.inner_prod(y_v, numeric_jvp(x_v))
    assert scalar_close(numeric, exact), (
        f"Derivative (VJP) check of {get_name(f)} failed with arg {x}:\n"
        f"analytic: {exact}\nnumeric:  {numeric}")


def check_jvp(f, x):
    """Forward mode of ``f`` at ``x`` against a central difference."""
    x_v = vspace(x).randn()
    exact = make_jvp(f, x)(x_v)[1]
    numeric = make_numerical_jvp(f, x)(x_v)
    try:
        check_equivalent(exact, numeric)
    except AssertionError as e:
        raise AssertionError(f"Derivative (JVP) check of {get_name(f)} failed with arg "
                             f"{x}:\n{e}") from None


def check_equivalent(x, y):
    """``x`` and ``y`` lie in one vector space and agree along a random direction."""
    x_vs, y_vs = vspace(x), vspace(y)
    assert x_vs == y_vs, f"VSpace mismatch:\nx: {x_vs}\ny: {y_vs}"
    v = x_vs.randn()
    assert scalar_close(x_vs.inner_prod(x, v), x_vs.inner_prod(y, v)), \
        f"Value mismatch:\nx: {x}\ny: {y}"


@unary_to_nary
def check_grads(f, x, modes=None, order=2):
    """Check ``f``'s derivatives in argument ``argnum`` at the point given to the
    returned checker (see the module docstring)."""
    modes = ["fwd", "rev"] if modes is None else list(modes)
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad:
        raise ValueError(f"check_grads: unknown modes {bad}; use 'fwd' and/or 'rev'")
    if "fwd" in modes:
        check_jvp(f, x)
        if order > 1:
            def jvp_f(x, v):
                return make_jvp(f, x)(v)[1]
            jvp_f.__name__ = f"jvp_{get_name(f)}"
            check_grads(jvp_f, (0, 1), modes, order=order - 1)(x, vspace(x).randn())
    if "rev" in modes:
        check_vjp(f, x)
        if order > 1:
            def vjp_f(x, v):
                return make_vjp(f, x)[0](v)
            vjp_f.__name__ = f"vjp_{get_name(f)}"
            check_grads(vjp_f, (0, 1), modes, order=order - 1)(x, vspace(f(x)).randn())


def combo_check(fun, *args, **kwargs):
    """A checker that runs ``check_grads(fun, *args, **kwargs)`` at every
    combination of the argument values and keyword values it is given
    (``checker([x1, x2], [y1], axis=[0, 1])``)."""
    import itertools

    def _combo_check(*arg_lists, **kwarg_lists):
        kv = [[(k, v) for v in vs] for k, vs in kwarg_lists.items()]
        for point in itertools.product(*arg_lists):
            for kws in itertools.product(*kv):
                check_grads(fun, *args, **kwargs)(*point, **dict(kws))
    return _combo_check
