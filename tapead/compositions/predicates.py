"""numpy's predicates and searchsorted on traced values: ``isclose``,
``allclose``, ``array_equal``, ``array_equiv``, ``isfinite``, ``isnan``,
``isinf``, ``signbit``, ``iscomplex``, ``isreal``, ``iscomplexobj``,
``isrealobj``, ``searchsorted`` and ``digitize`` return plain numpy values
computed from the concrete values (no derivative).  Each traced argument is
guarded (like ``argmax``), so replaying a tape at inputs where the answer
differs raises ``GuardFlippedError`` instead of returning a stale value.
"""
from __future__ import annotations

import numpy as np

from tapead._core import Box, concrete, guard_value, is_complex

#: numpy ufuncs this module implements for tracers (filled below)
UFUNCS: dict = {}



def decided(npfunc, args, kw, what):
    """``npfunc`` of the concrete ``args``; each traced argument is guarded (the
    others held at their recorded values), so replay notices a changed result."""
    vals = [concrete(x) if isinstance(x, Box) else x for x in args]
    out = npfunc(*vals, **kw)
    for k, x in enumerate(args):
        if isinstance(x, Box):
            def fn(new, k=k):
                vs = list(vals)
                vs[k] = concrete(new)
                return npfunc(*vs, **kw)
            guard_value(x, fn, out, what)
    return out


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``np.isclose`` of the values: plain booleans."""
    return decided(np.isclose, (a, b), dict(rtol=rtol, atol=atol, equal_nan=equal_nan),
                    "an isclose")


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``np.allclose`` of the values: a plain bool."""
    return decided(np.allclose, (a, b), dict(rtol=rtol, atol=atol, equal_nan=equal_nan),
                    "an allclose")


def array_equal(a1, a2, equal_nan=False):
    """``np.array_equal`` of the values: a plain bool."""
    return decided(np.array_equal, (a1, a2), dict(equal_nan=equal_nan), "an array_equal")


def array_equiv(a1, a2):
    """``np.array_equiv`` of the values: a plain bool."""
    return decided(np.array_equiv, (a1, a2), {}, "an array_equiv")


def _value_predicate(name, ufunc):
    def func(x):
        if not isinstance(x, Box):
            return ufunc(x)
        return decided(ufunc, (x,), {}, f"an {name}" if name[0] in "ai" else f"a {name}")
    func.__name__ = func.__qualname__ = name
    func.__doc__ = f"``np.{name}`` of the value: plain booleans (guarded on replay)."
    UFUNCS[ufunc] = func
    return func


isfinite = _value_predicate("isfinite", np.isfinite)
isnan = _value_predicate("isnan", np.isnan)
isinf = _value_predicate("isinf", np.isinf)
signbit = _value_predicate("signbit", np.signbit)


def searchsorted(a, v, side="left", sorter=None):
    """``np.searchsorted`` of the values: plain integers (no derivative), guarded
    like ``argmax`` so a replay whose insertion points change raises."""
    return decided(np.searchsorted, (a, v), dict(side=side, sorter=sorter),
                    "a searchsorted")


def iscomplex(x):
    """``np.iscomplex`` of the value: plain booleans (a nonzero imaginary part),
    guarded on replay."""
    return decided(np.iscomplex, (x,), {}, "an iscomplex")


def isreal(x):
    """``np.isreal`` of the value: plain booleans, guarded on replay."""
    return decided(np.isreal, (x,), {}, "an isreal")


def iscomplexobj(x):
    """``np.iscomplexobj``: whether the dtype is complex (no value is read)."""
    return bool(is_complex(x))


def isrealobj(x):
    """``np.isrealobj``: whether the dtype is not complex (no value is read)."""
    return not is_complex(x)


def digitize(x, bins, right=False):
    """``np.digitize`` of the values: plain integers (no derivative), guarded
    like ``searchsorted``."""
    return decided(np.digitize, (x, bins), dict(right=right), "a digitize")


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {
    np.isclose: isclose, np.allclose: allclose, np.array_equal: array_equal,
    np.array_equiv: array_equiv, np.searchsorted: searchsorted, np.digitize: digitize,
    np.iscomplex: iscomplex, np.isreal: isreal, np.iscomplexobj: iscomplexobj,
    np.isrealobj: isrealobj,
}
#: methods of traced arrays : name -> function(x, *args, **kw)
TRACER_METHODS = {"searchsorted": searchsorted}
#: public names re-exported by tapead.numpy
__all__ = ["isclose", "allclose", "array_equal", "array_equiv", "isfinite", "isnan",
           "isinf", "signbit", "searchsorted", "digitize", "iscomplex", "isreal",
           "iscomplexobj", "isrealobj"]
