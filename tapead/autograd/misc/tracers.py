"""``const_graph``: run a function's Python once, replay its operations after.

``const_graph(fun, *args, **kwargs)`` binds ``args``/``kwargs`` and returns a
function of ``fun``'s remaining positional arguments: ``tapead.jit`` of the
bound function.  Its first call at a signature (shapes and dtypes) records
``fun`` on a tape; later calls replay the tape at the new inputs without
running ``fun``'s Python.  A branch whose comparison comes out differently at
the new inputs records again, so a replay never follows the wrong branch.
Called with traced values (inside a gradient), it runs ``fun`` as it is.

>>> from tapead.autograd.misc import const_graph
>>> calls = []
>>> def f(x, y):
...     calls.append(1)
...     return x * y + y
>>> g = const_graph(f, 2.0)
>>> float(g(3.0)), float(g(5.0)), len(calls)
(9.0, 15.0, 1)
"""
from __future__ import annotations

import functools

from tapead import _core
from tapead.jit import jit

__all__ = ["const_graph"]


def const_graph(fun, *args, **kwargs):
    """See the module docstring."""
    bound = functools.partial(fun, *args, **kwargs)
    jitted = jit(bound)

    @functools.wraps(fun)
    def _fun(*more):
        if any(isinstance(a, _core.Box) for a in more):
            return bound(*more)
        return jitted(*more)
    return _fun
