"""``const_graph``: autograd's cache of a function's graph.

autograd records the operations of ``fun`` once and replays them on later
calls.  Here ``const_graph(fun, *args, **kwargs)`` is ``fun`` with those
arguments bound, run in full at every call: the same values, without the
replay (``tapead``'s ``ta.record`` keeps and replays tapes with guards).
"""
from __future__ import annotations

import functools

__all__ = ["const_graph"]


def const_graph(fun, *args, **kwargs):
    """``fun`` with ``args`` and ``kwargs`` bound, called with the remaining
    positional arguments."""
    bound = functools.partial(fun, *args, **kwargs)

    @functools.wraps(fun)
    def _fun(*more):
        return bound(*more)
    return _fun
