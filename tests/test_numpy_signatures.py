"""Every numpy function that dispatches to tapead accepts numpy's parameter
names: the tapead implementation (``tapead.numpy._protocol.FUNCTIONS``) takes numpy's
positional parameters in numpy's order under numpy's names, and each of
numpy's keyword parameters by name (or through ``**kwargs``), so code written
against numpy's documentation runs unchanged on traced values.  Exceptions
are listed with the reason.
"""
import inspect

import numpy as np
import pytest

import tapead as ta
from tapead.numpy._protocol import FUNCTIONS

P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)

#: numpy function -> why its tapead implementation may differ
EXCEPTIONS = {
    np.matmul: "a ufunc: traced calls arrive through __array_ufunc__ (which refuses out= "
               "and passes no other keyword); the FUNCTIONS entry serves np.matmul's "
               "array-function path only",
}


def _name(f):
    return f"{getattr(f, '__module__', 'numpy')}.{f.__name__}"


def _mismatches(np_func, impl):
    ns = inspect.signature(np_func).parameters
    ts = inspect.signature(impl).parameters
    varkw = any(p.kind == P.VAR_KEYWORD for p in ts.values())
    varpos = any(p.kind == P.VAR_POSITIONAL for p in ts.values())
    tpos = [p for p in ts.values() if p.kind in POSITIONAL]
    out, i = [], 0
    for p in ns.values():
        if p.kind in POSITIONAL:
            if i < len(tpos):
                if p.kind == P.POSITIONAL_OR_KEYWORD and tpos[i].name != p.name:
                    out.append(f"positional {i} is {tpos[i].name!r}, numpy's is {p.name!r}")
            elif not varpos:
                out.append(f"numpy's positional parameter {p.name!r} is missing")
            i += 1
        elif p.kind == P.KEYWORD_ONLY and p.name not in ts and not varkw:
            out.append(f"numpy's keyword {p.name!r} is missing")
        elif p.kind == P.VAR_POSITIONAL and not varpos:
            out.append("numpy's *args is missing")
    return out


CASES = sorted(FUNCTIONS.items(), key=lambda kv: _name(kv[0]))


@pytest.mark.parametrize("np_func, impl", CASES, ids=[_name(f) for f, _ in CASES])
def test_numpy_parameter_names(np_func, impl):
    if np_func in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[np_func])
    bad = _mismatches(np_func, impl)
    assert not bad, f"{_name(np_func)}: " + "; ".join(bad)


def test_exceptions_are_registered_functions():
    assert set(EXCEPTIONS) <= set(FUNCTIONS)


def test_the_checker_sees_a_renamed_parameter():
    def swapaxes(x, a, b):          # the old spelling
        return x
    assert _mismatches(np.swapaxes, swapaxes)
    assert not _mismatches(np.swapaxes, FUNCTIONS[np.swapaxes])


@pytest.mark.parametrize("call", [
    lambda x: np.sum(a=x, axis=0),
    lambda x: np.mean(a=x, axis=0),
    lambda x: np.var(a=x, axis=0) + np.std(a=x, axis=0),
    lambda x: np.max(a=x, axis=0, keepdims=False) + np.min(a=x, axis=0),
    lambda x: np.prod(a=x, axis=0),
    lambda x: np.cumsum(a=x)[:2] + np.cumprod(a=x)[:2],
    lambda x: np.clip(a=x, a_min=-0.5, a_max=0.5)[0],
    lambda x: np.clip(x, min=-0.5, max=0.5)[0],
    lambda x: np.real(val=x)[0] + np.imag(val=x)[0],
    lambda x: np.transpose(a=x)[:, 0],
    lambda x: np.broadcast_to(array=x[0], shape=(2, 2))[0],
    lambda x: np.stack(arrays=[x[0], x[1]])[0],
    lambda x: np.concatenate([x[0], x[1]], axis=0, out=None)[:2],
    lambda x: np.sort(a=x, axis=0)[0],
    lambda x: np.reshape(x, (4,), order="C")[:2],
    lambda x: np.dot(x, x, out=None)[0],
])
def test_numpy_keywords_on_traced_values(call):
    x = np.array([[0.3, -1.2], [0.7, 0.4]])
    J = ta.jacfwd(call)(x)
    assert J.shape == np.shape(call(x)) + x.shape
    assert np.all(np.isfinite(J))


def test_unsupported_numpy_arguments_are_refused():
    with pytest.raises(TypeError, match="initial"):
        ta.grad(lambda x: np.sum(x, initial=1.0))(np.ones(2))
    with pytest.raises(TypeError, match="where"):
        ta.grad(lambda x: np.max(x, where=np.array([True, False]), initial=0.0))(np.ones(2))
    with pytest.raises(TypeError, match="order='F'"):
        ta.grad(lambda x: np.sum(np.reshape(x, (4,), order="F")))(np.ones((2, 2)))
    with pytest.raises(TypeError, match="out="):
        ta.grad(lambda x: np.sum(np.stack([x, x], out=np.zeros((2, 2)))))(np.ones(2))
    with pytest.raises(TypeError, match="dtype="):
        ta.grad(lambda x: np.sum(np.concatenate([x, x], dtype=np.float32)))(np.ones(2))
    with pytest.raises(TypeError, match="out="):
        ta.grad(lambda x: np.sum(np.dot(x, x, out=np.zeros(()))))(np.ones(2))
