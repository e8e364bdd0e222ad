"""autograd's ``extend``: define new primitives and their derivative rules.

``primitive(f)`` makes ``f`` one node of the tape whose rules are given by
``defvjp`` (reverse mode: one maker per argument,
``maker(ans, *args, **kwargs) -> (lambda g: cotangent)``, ``None`` for an
argument without derivative) and ``defjvp`` (forward mode:
``jvp(g, ans, *args, **kwargs) -> tangent``).  The rules are written with
``tapead.autograd.numpy``, so they are differentiable themselves: second
derivatives through a primitive work as in autograd.

>>> import numpy as np
>>> from tapead.autograd import grad, deriv
>>> from tapead.autograd.extend import primitive, defvjp, defjvp
>>> @primitive
... def logsumexp(x):
...     m = np.max(x)
...     return m + np.log(np.sum(np.exp(x - m)))
>>> defvjp(logsumexp, lambda ans, x: lambda g: g * np.exp(x - ans))
>>> defjvp(logsumexp, lambda g, ans, x: np.sum(g * np.exp(x - ans)))
>>> grad(logsumexp)(np.array([0.0, np.log(3.0)]))
array([0.25, 0.75])
>>> float(deriv(lambda t: logsumexp(np.array([0.0, 1.0]) * t))(0.0))
0.5
"""
from tapead.autograd.core import (  # noqa: F401
    VSpace, def_linear, defjvp, defjvp_argnum, defjvp_argnums, defvjp, defvjp_argnum,
    defvjp_argnums, vspace)
from tapead.autograd.tracer import (  # noqa: F401
    Box, getval, isbox, notrace_primitive, primitive, register_notrace)

__all__ = ["Box", "VSpace", "def_linear", "defjvp", "defjvp_argnum", "defjvp_argnums",
           "defvjp", "defvjp_argnum", "defvjp_argnums", "getval", "isbox",
           "notrace_primitive", "primitive", "register_notrace", "vspace"]
