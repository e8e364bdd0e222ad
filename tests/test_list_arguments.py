"""numpy functions called on Python lists of tracers (``np.sum([x, y])``).

numpy dispatches to tapead on arrays and tracers, not on what a list holds:
it converts the list to an object array of tracers first.  Functions whose
numpy code then only calls ufuncs and methods on the elements (``np.sum``,
``np.linalg.norm`` of vectors, ...) work, with the values and derivatives of
the stacked array; those that end by converting a tracer to a numpy float
(``np.mean``, ``np.var``, ``np.std``, ``np.average``, ``np.median``, the nan
ones) are refused, and the message names the function, ``np.stack`` and the
tapead.numpy function that takes the list.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._prims.conversion_hint import LIST_EQUIVALENTS

X = np.array([1.0, -3.0, 2.0])


def _as_list(v):
    return [v[0], v[1] ** 2, v[2] * v[0]]


def _close(a, b):
    # the list's elements are combined one by one, the array's by numpy's
    # pairwise loops: the same numbers up to rounding
    np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)


def _same_as_stacked(reduce, x=X):
    """reduce(list) and reduce(np.stack(list)): values, gradients, Hessians."""
    f = lambda v: reduce(_as_list(v))                         # noqa: E731
    g = lambda v: reduce(np.stack(_as_list(v)))               # noqa: E731
    (vf, gf), (vg, gg) = ta.value_and_grad(f)(x), ta.value_and_grad(g)(x)
    _close(vf, vg)
    _close(gf, gg)
    _close(ta.hessian(f)(x), ta.hessian(g)(x))
    _close(ta.jvp(f, (x,), (np.ones(3),))[1], ta.jvp(g, (x,), (np.ones(3),))[1])
    ta.check_grads(f, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("ord", [None, 1, 2, 3, 0.5, -1, np.inf, -np.inf])
def test_vector_norm_of_a_list(ord):
    _same_as_stacked(lambda v: np.linalg.norm(v, ord))


@pytest.mark.parametrize("ord", [None, "fro", 1, np.inf])
def test_matrix_norm_of_nested_lists(ord):
    f = lambda v: np.linalg.norm([[v[0], v[1]], [v[2], v[0] * v[1]]], ord)   # noqa: E731
    g = lambda v: np.linalg.norm(np.stack([np.stack([v[0], v[1]]),           # noqa: E731
                                           np.stack([v[2], v[0] * v[1]])]), ord)
    (vf, gf), (vg, gg) = ta.value_and_grad(f)(X), ta.value_and_grad(g)(X)
    _close(vf, vg)
    _close(gf, gg)


def test_norm_of_a_list_with_axis_and_keepdims():
    for kw in ({"axis": 0}, {"keepdims": True}):
        f = lambda v: np.sum(np.linalg.norm(_as_list(v), **kw))           # noqa: E731
        g = lambda v: np.sum(np.linalg.norm(np.stack(_as_list(v)), **kw))  # noqa: E731
        _close(ta.grad(f)(X), ta.grad(g)(X))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "ptp", "nansum"])
def test_reductions_of_a_list(name):
    _same_as_stacked(getattr(np, name))


@pytest.mark.parametrize("name", LIST_EQUIVALENTS)
def test_the_named_tapead_functions_take_the_list(name):
    _same_as_stacked(getattr(tnp, name))


@pytest.mark.parametrize("name, tapead_fn", [
    ("mean", "tapead.numpy.mean"), ("var", "tapead.numpy.var"), ("std", "tapead.numpy.std"),
    ("average", None), ("median", None), ("nanmean", None), ("nanvar", None),
    ("nanstd", None), ("nanmedian", None)])
def test_converting_functions_refuse_naming_the_fix(name, tapead_fn):
    f = getattr(np, name)
    for call in (lambda v: f(_as_list(v)),                      # a list
                 lambda v: f(np.array(_as_list(v))),            # an object array of tracers
                 lambda v: f([v, v])):                          # a list of arrays
        with pytest.raises(TypeError, match=rf"np\.{name} of a Python list .*np\.stack") as e:
            ta.grad(call)(X)
        if tapead_fn:
            assert tapead_fn in str(e.value)
        else:
            assert "or call tapead.numpy" not in str(e.value)
    with pytest.raises(TypeError, match=r"np\.linalg\.norm of a Python list"):
        ta.grad(lambda v: np.linalg.norm([v, v]))(X)


def test_converting_a_tracer_itself_keeps_the_generic_message():
    with pytest.raises(TypeError) as e:
        ta.grad(lambda v: np.mean(np.asarray(v, dtype=float)))(X)
    assert "Python list" not in str(e.value)
