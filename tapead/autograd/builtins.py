"""autograd's ``builtins``: ``isinstance``, ``type``, ``tuple``, ``list``, ``dict``.

autograd boxes a container it differentiates with respect to, so it needs
its own ``tuple``/``list``/``dict`` constructors and an ``isinstance`` that
sees through boxes.  tapead differentiates pytrees directly: a tuple of
traced values *is* a tuple.  These names keep autograd programs running:
the constructors build the plain container, ``isinstance`` and ``type``
look at the value inside a traced array (``isinstance(x, np.ndarray)`` is
true for a traced array, as in autograd).

>>> import numpy as np
>>> from tapead.autograd import grad, isinstance, tuple
>>> def f(x):
...     assert isinstance(x, np.ndarray)
...     pair = tuple((x, 2.0 * x))
...     return np.sum(pair[0] * pair[1])
>>> grad(f)(np.array([1.0, 3.0]))
array([ 4., 12.])
"""
from __future__ import annotations

import builtins as _b

from tapead.autograd.tracer import notrace_primitive

__all__ = ["isinstance", "type", "tuple", "list", "dict"]

isinstance_ = _b.isinstance
type_ = _b.type
tuple_, list_, dict_ = _b.tuple, _b.list, _b.dict

isinstance = notrace_primitive(_b.isinstance)  # noqa: A001
type = notrace_primitive(_b.type)  # noqa: A001


class _TupleMeta(type_(tuple_)):
    def __instancecheck__(cls, instance):
        return isinstance_(instance, tuple_)


class tuple(tuple_, metaclass=_TupleMeta):  # noqa: A001
    """``tuple(xs)``: the plain tuple (traced items stay traced)."""
    def __new__(cls, xs=()):
        return tuple_(xs)


class _ListMeta(type_):
    def __instancecheck__(cls, instance):
        return isinstance_(instance, list_)


class list(list_, metaclass=_ListMeta):  # noqa: A001
    """``list(xs)``: the plain list."""
    def __new__(cls, xs=()):
        return list_(xs)


class _DictMeta(type_):
    def __instancecheck__(cls, instance):
        return isinstance_(instance, dict_)


class dict(dict_, metaclass=_DictMeta):  # noqa: A001
    """``dict(...)``: the plain dict."""
    def __new__(cls, *args, **kwargs):
        return dict_(*args, **kwargs)
