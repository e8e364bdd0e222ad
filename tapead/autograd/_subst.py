"""Argument substitution: the helpers ``autograd.util`` and ``wrap_util`` share."""
from __future__ import annotations

__all__ = ["subval", "subvals", "func"]


def subvals(x, ivs):
    """``x`` (a sequence) as a tuple with ``x[i] = v`` for each ``(i, v)`` in ``ivs``."""
    x_ = list(x)
    for i, v in ivs:
        x_[i] = v
    return tuple(x_)


def subval(x, i, v):
    """``x`` as a tuple with ``x[i] = v``."""
    x_ = list(x)
    x_[i] = v
    return tuple(x_)


def func(f):
    """``f`` itself (autograd used it to name unbound methods)."""
    return f
