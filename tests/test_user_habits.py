"""What numpy and JAX users write in their first hour: arrays built from traced
scalars, their own containers as pytrees, ``has_aux``, custom rules with
non-differentiable arguments, and the errors a likely mistake gets."""
from __future__ import annotations

import collections
import dataclasses
import functools

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead._core import Box, OPCODES


def fd_grad(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def fd_jac(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


# ---------------------------------------------------------------------------
# np.array / np.asarray / tnp.array of traced scalars
# ---------------------------------------------------------------------------

BUILDERS = {
    "np.array": np.array,
    "np.asarray": np.asarray,
    "tnp.array": tnp.array,
    "tnp.asarray": tnp.asarray,
}


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
def test_vector_from_traced_scalars(build):
    def f(x):
        v = build([x[0] * x[1], np.sin(x[1]), 2.0])
        return np.sum(v ** 2) + v @ np.array([1.0, -1.0, 0.5])

    x = np.array([0.3, 0.8])
    np.testing.assert_allclose(ta.grad(f)(x), fd_grad(f, x), rtol=1e-8, atol=1e-9)
    ta.check_grads(f, (x,), order=2)


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
def test_matrix_from_nested_lists(build):
    def f(x):
        return build([[x[0], 2.0 * x[1]], [x[0] * x[1], 1.0]]) @ np.array([1.0, 2.0])

    x = np.array([0.5, -1.5])
    want = fd_jac(f, x)
    np.testing.assert_allclose(ta.jacfwd(f)(x), want, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(ta.jacrev(f)(x), want, rtol=1e-8, atol=1e-9)
    out, t = ta.jvp(f, (x,), (np.array([1.0, 0.0]),))
    np.testing.assert_allclose(out, f(x))
    np.testing.assert_allclose(t, want[:, 0], rtol=1e-8, atol=1e-9)


def test_returned_object_array_is_packed():
    """A function returning np.array([...]) of tracers is differentiated, not
    taken for a constant (which would be a silent zero Jacobian)."""
    f = lambda x: np.array([x * x, 3.0 * x])  # noqa: E731
    np.testing.assert_allclose(ta.jacfwd(f)(2.0), [4.0, 3.0])
    np.testing.assert_allclose(ta.jacrev(f)(2.0), [4.0, 3.0])
    out, pullback = ta.vjp(f, 2.0)
    assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_allclose(pullback(np.array([1.0, 1.0]))[0], 7.0)
    assert float(ta.hessian(lambda x: np.array([x ** 3, x])[0])(2.0)) == pytest.approx(12.0)


def _object_prims(rec):
    return [str(rec.tape.record(i).prim) for i in range(rec.n_nodes)
            if _is_object(rec.tape, i)]


@pytest.mark.parametrize("build", [np.array, tnp.array], ids=["np.array", "tnp.array"])
def test_one_stack_node(build):
    """n traced scalars in an array cost no object node per element: tnp.array packs
    them with one stack node; numpy's object loops on np.array's result run the
    scalar operators (C scalar nodes) until a tapead operation packs them."""
    for n in (3, 30):
        rec = ta.record(lambda xs: np.sum(build([x * 2.0 for x in xs]) ** 2), [1.0] * n)
        prims = _object_prims(rec)
        # a traced vector of at most SMALL_ARRAY_MAX elements computes ** 2 per
        # element and packs the squares with one more stack
        packs = 1 if build is tnp.array and n <= _core.SMALL_ARRAY_MAX else 0
        assert sum("stack" in p for p in prims) == (1 if build is tnp.array else 0) + packs
        assert len(prims) <= 4, prims       # stack, its reshape, the power, the sum
        rec = ta.record(lambda xs: np.sum(np.tanh(build([x * 2.0 for x in xs]))), [1.0] * n)
        assert len(_object_prims(rec)) <= 4


def test_stack_of_scalars_is_one_node():
    rec = ta.record(lambda x: np.sum(np.stack([x[0], x[1], x[0]])), np.array([1.0, 2.0]))
    names = _object_prims(rec)
    assert sum("stack" in n for n in names) == 1
    assert not any("concatenate" in n or "reshape" in n for n in names)


def _is_object(tape, i):
    try:
        tape.record(i)
        return True
    except Exception:
        return False


def test_elementwise_numpy_on_object_arrays():
    """numpy's object loops call methods named like the ufunc (x.sin())."""
    f = lambda x: np.sum(np.exp(np.sin(np.array([x, 2.0 * x]))))  # noqa: E731
    x = 0.4
    want = np.cos(x) * np.exp(np.sin(x)) + 2 * np.cos(2 * x) * np.exp(np.sin(2 * x))
    assert float(ta.grad(f)(x)) == pytest.approx(want, rel=1e-13)


def test_tnp_array_float32_and_dtype():
    x = np.float32(1.5)
    g = ta.grad(lambda x: tnp.array([x, x * x]).sum())(x)
    assert g.dtype == np.float32 and float(g) == pytest.approx(4.0)
    v = ta.jacfwd(lambda x: tnp.array([x, 1], dtype=np.float32))(np.float64(2.0))
    assert v.dtype == np.float32


def test_tnp_array_errors():
    with pytest.raises(ValueError, match="ragged"):
        ta.grad(lambda x: tnp.array([[x, x], [x]]).sum())(1.0)
    with pytest.raises(ValueError, match="different shapes"):
        ta.grad(lambda x: tnp.array([x, np.ones(2)]).sum())(1.0)


def test_array_of_traced_arrays_names_the_fix():
    with pytest.raises(TypeError, match=r"np\.stack"):
        ta.grad(lambda v: np.asarray(v).sum())(np.ones(3))
    with pytest.raises(TypeError, match="tapead.numpy.array"):
        ta.grad(lambda v: np.array([v, v]).sum())(np.ones(3))
    # stacking traced arrays works with np.stack and tnp.array
    g = ta.grad(lambda v: (np.stack([v, 2.0 * v]) ** 2).sum())(np.ones(3))
    np.testing.assert_allclose(g, [10.0, 10.0, 10.0])
    g = ta.grad(lambda v: (tnp.array([v, 2.0 * v]) ** 2).sum())(np.ones(3))
    np.testing.assert_allclose(g, [10.0, 10.0, 10.0])


def test_assigning_into_a_float_array_is_refused():
    def bad(x):
        a = np.zeros(2)
        a[0] = x
        return a.sum()

    # numpy turns the tracer's TypeError into "setting an array element with a
    # sequence"; the cause says what happened and what to do
    with pytest.raises((TypeError, ValueError)) as info:
        ta.grad(bad)(1.0)
    chain = [info.value, info.value.__cause__, info.value.__context__]
    assert any(e is not None and "tapead.numpy.at" in str(e) for e in chain)


# ---------------------------------------------------------------------------
# pytrees: namedtuples, dataclasses, registered classes
# ---------------------------------------------------------------------------

Params = collections.namedtuple("Params", "w b")


@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: float
    nested: tuple


class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second


ta.tree_util.register_pytree_node(Pair, lambda p: ((p.first, p.second), "tag"),
                                  lambda aux, ch: Pair(*ch))


def loss_nt(p, x):
    return np.sum((p.w * x + p.b) ** 2)


def test_namedtuple_everywhere():
    p, x = Params(np.array([1.0, -2.0]), 0.5), np.array([0.3, 0.7])
    g = ta.grad(loss_nt)(p, x)
    assert type(g) is Params
    np.testing.assert_allclose(g.w, fd_grad(lambda w: loss_nt(Params(w, 0.5), x), p.w))
    assert float(g.b) == pytest.approx(float(fd_grad(lambda b: loss_nt(Params(p.w, b), x),
                                                     0.5)))
    jf = ta.jacfwd(loss_nt)(p, x)
    jr = ta.jacrev(loss_nt)(p, x)
    np.testing.assert_allclose(jf.w, g.w)
    np.testing.assert_allclose(jr.w, g.w)
    out, t = ta.jvp(loss_nt, (p, x), (Params(np.array([1.0, 0.0]), 0.0), np.zeros(2)))
    assert t == pytest.approx(g.w[0])
    h = ta.hessian(lambda p: loss_nt(p, x))(p)
    assert type(h) is Params and type(h.w) is Params


def test_dataclasses():
    layer = Layer(np.array([1.0, 2.0]), 0.5)
    f = lambda L: np.sum(np.tanh(L.w * 3.0 + L.b))  # noqa: E731
    g = ta.grad(f)(layer)
    assert type(g) is Layer
    np.testing.assert_allclose(g.w, 3.0 / np.cosh(layer.w * 3.0 + 0.5) ** 2, rtol=1e-10)
    fr = Frozen(2.0, (1.0, np.array([3.0])))
    g2 = ta.grad(lambda s: s.a * s.nested[0] * s.nested[1][0])(fr)
    assert type(g2) is Frozen
    assert float(g2.a) == 3.0 and float(g2.nested[0]) == 6.0
    np.testing.assert_allclose(g2.nested[1], [2.0])


def test_registered_class():
    g = ta.grad(lambda p: p.first ** 2 * p.second)(Pair(3.0, 2.0))
    assert type(g) is Pair and (float(g.first), float(g.second)) == (12.0, 9.0)
    leaves, td = ta.tree_util.tree_flatten({"a": Pair(1.0, [2.0, 3.0])})
    assert leaves == [1.0, 2.0, 3.0]
    back = ta.tree_util.tree_unflatten(td, [4.0, 5.0, 6.0])
    assert back["a"].first == 4.0 and back["a"].second == [5.0, 6.0]
    assert ta.tree_util.tree_leaves(Params(1, (2, 3))) == [1, 2, 3]
    doubled = ta.tree_util.tree_map(lambda v: 2 * v, Params(1.0, Pair(2.0, 3.0)))
    assert doubled.w == 2.0 and doubled.b.second == 6.0


def test_register_errors_and_unknown_container():
    with pytest.raises(TypeError, match="not a class"):
        ta.tree_util.register_pytree_node(Pair(1, 2), lambda p: p, lambda a, c: c)
    with pytest.raises(ValueError, match="already a pytree node"):
        ta.tree_util.register_pytree_node(tuple, lambda p: p, lambda a, c: c)

    class Unknown:
        x = 1.0

    with pytest.raises(TypeError, match="register_pytree_node"):
        ta.grad(lambda u: 1.0)(Unknown())


# ---------------------------------------------------------------------------
# has_aux and nothing traced escaping
# ---------------------------------------------------------------------------

def f_aux(x):
    y = np.sin(x) * x
    return np.sum(y), {"y": y, "mean": np.mean(y), "tag": "step", "n": 3,
                       "pair": (x[0], Params(x[1], 2.0))}


def _walk(tree):
    """Every leaf of a result, through tuples, lists, dicts and containers."""
    stack = [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, dict):
            stack.extend(t.values())
        elif isinstance(t, (tuple, list)):
            stack.extend(t)
        elif dataclasses.is_dataclass(t) and not isinstance(t, type):
            stack.extend(getattr(t, f.name) for f in dataclasses.fields(t))
        else:
            yield t


def assert_no_tracer(tree):
    for leaf in _walk(tree):
        assert not isinstance(leaf, Box), f"a tracer escaped: {leaf!r}"


def test_has_aux_concrete_values():
    x = np.array([0.3, 1.2])
    (v, aux), g = ta.value_and_grad(f_aux, has_aux=True)(x)
    assert type(aux["y"]) is np.ndarray and aux["tag"] == "step" and aux["n"] == 3
    assert float(aux["mean"]) + 1.0 == pytest.approx(np.mean(np.sin(x) * x) + 1.0)
    assert type(aux["pair"][1]) is Params and float(aux["pair"][1].w) == 1.2
    np.testing.assert_allclose(g, np.sin(x) + x * np.cos(x))
    g2, aux2 = ta.grad(f_aux, has_aux=True)(x)
    np.testing.assert_allclose(g2, g)
    np.testing.assert_allclose(aux2["y"], aux["y"])


TRANSFORMS = {
    "grad": lambda x: ta.grad(lambda x: f_aux(x)[0])(x),
    "grad_aux": lambda x: ta.grad(f_aux, has_aux=True)(x),
    "value_and_grad_aux": lambda x: ta.value_and_grad(f_aux, has_aux=True)(x),
    "jvp": lambda x: ta.jvp(lambda x: f_aux(x)[1]["y"], (x,), (np.ones(2),)),
    "jvp_aux": lambda x: ta.jvp(f_aux, (x,), (np.ones(2),), has_aux=True),
    "vjp_aux": lambda x: (lambda out, pb, aux: (out, pb(1.0), aux))(
        *ta.vjp(f_aux, x, has_aux=True)),
    "vjp_tree": lambda x: (lambda out, pb: (out, pb(out)))(
        *ta.vjp(lambda x: f_aux(x)[1]["pair"], x)),
    "jacfwd_aux": lambda x: ta.jacfwd(lambda x: (np.sin(x), {"c": np.cos(x)}),
                                      has_aux=True)(x),
    "jacrev_aux": lambda x: ta.jacrev(lambda x: (np.sin(x), [x * 2.0]), has_aux=True)(x),
    "hessian": lambda x: ta.hessian(lambda x: f_aux(x)[0])(x),
    "hvp": lambda x: ta.hvp(lambda x: f_aux(x)[0], (x,), (np.ones(2),)),
    "check_grads": lambda x: ta.check_grads(lambda x: f_aux(x)[0], (x,), order=2),
    "record": lambda x: ta.record(lambda x: f_aux(x)[0], x).value_and_grad(x),
    "custom_vjp": lambda x: ta.grad(lambda x: _cube(x).sum())(x),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_no_tracer_escapes(name):
    assert_no_tracer(TRANSFORMS[name](np.array([0.3, 1.2])))


def test_has_aux_values_and_jacobians():
    x = np.array([0.3, 1.2])
    jac, aux = ta.jacfwd(lambda x: (np.sin(x), {"c": np.cos(x)}), has_aux=True)(x)
    np.testing.assert_allclose(jac, np.diag(np.cos(x)))
    np.testing.assert_allclose(aux["c"], np.cos(x))
    jac, aux = ta.jacrev(lambda x: (np.sin(x), [x * 2.0]), has_aux=True)(x)
    np.testing.assert_allclose(jac, np.diag(np.cos(x)))
    out, t, aux = ta.jvp(f_aux, (x,), (np.ones(2),), has_aux=True)
    assert type(aux["y"]) is np.ndarray


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacfwd"])
def test_has_aux_needs_a_pair(transform):
    f = lambda x: (x, x, x)  # noqa: E731
    with pytest.raises(TypeError, match=r"must return a pair \(output, auxiliary data\)"):
        if transform == "grad":
            ta.grad(f, has_aux=True)(1.0)
        elif transform == "vjp":
            ta.vjp(f, 1.0, has_aux=True)
        elif transform == "jvp":
            ta.jvp(f, (1.0,), (1.0,), has_aux=True)
        else:
            ta.jacfwd(f, has_aux=True)(1.0)


# ---------------------------------------------------------------------------
# errors that say what to do
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("f, match", [
    (lambda x: None, r"returned None.*missing `return`"),
    (lambda x: (x * x, 1.0), r"tuple of 2 values.*has_aux=True"),
    (lambda x: [x, x], r"list of 2 values.*ta\.jacrev"),
    (lambda x: x > 0.0, r"dtype bool.*real floating-point scalar"),
    (lambda x: 3, r"dtype int64.*real floating-point scalar"),
    (lambda x: np.argmax(np.array([x, 0.5])), r"an integer"),
    (lambda x: "loss", r"real floating-point scalar"),
])
def test_grad_output_errors(f, match):
    with pytest.raises(TypeError, match=match):
        ta.grad(f)(1.0)


def test_constant_float_output_has_zero_gradient():
    assert float(ta.grad(lambda x: 3.0)(1.0)) == 0.0


@pytest.mark.parametrize("conv", [float, int])
def test_conversion_advice_works(conv):
    with pytest.raises(TypeError, match=rf"use {conv.__name__}\(x\.primal\)"):
        ta.grad(lambda x: conv(x) * x)(2.0)
    # the advice, followed, works (the value is a constant)
    assert float(ta.grad(lambda x: conv(x.primal) * x)(2.0)) == 2.0
    # nested: each level's .primal goes one transform out
    h = ta.grad(ta.grad(lambda x: conv(x.primal.primal) * x * x))(3.0)
    assert float(h) == 2.0 * conv(3.0)


# ---------------------------------------------------------------------------
# custom rules with non-differentiable arguments
# ---------------------------------------------------------------------------

@functools.partial(ta.custom_vjp, nondiff_argnums=(0,))
def _apply(fn, x):
    return fn(x)


def _apply_fwd(fn, x):
    return fn(x), x


def _apply_bwd(fn, x, g):
    # d fn(x) / dx by a central difference of the (plain) function: a stand-in
    # for a hand-written rule that needs the static argument
    return (g * ta.grad(fn)(x),)


_apply.defvjp(_apply_fwd, _apply_bwd)


@ta.custom_vjp
def _cube(x):
    return x ** 3


_cube.defvjp(lambda x: (x ** 3, x), lambda x, g: (3.0 * x ** 2 * g,))


def test_custom_vjp_nondiff_argnums():
    f = lambda x: _apply(np.sin, x) * x  # noqa: E731
    assert float(ta.grad(f)(0.7)) == pytest.approx(np.cos(0.7) * 0.7 + np.sin(0.7), rel=1e-13)
    # forward mode differentiates the function itself
    t = ta.jvp(f, (0.7,), (1.0,))[1]
    assert float(t) == pytest.approx(np.cos(0.7) * 0.7 + np.sin(0.7), rel=1e-13)
    # plain call
    assert _apply(np.cos, 0.0) == 1.0


@functools.partial(ta.custom_jvp, nondiff_argnums=(1,))
def _power(x, k):
    return x ** k


@_power.defjvp
def _power_jvp(k, primals, tangents):
    (x,), (t,) = primals, tangents
    return _power(x, k), k * x ** (k - 1) * t


def test_custom_jvp_nondiff_argnums():
    for k in (2, 3):
        assert float(ta.grad(lambda x: _power(x, k))(1.5)) == pytest.approx(k * 1.5 ** (k - 1))
        assert float(ta.jvp(lambda x: _power(x, k), (1.5,), (2.0,))[1]) == \
            pytest.approx(2.0 * k * 1.5 ** (k - 1))
    assert float(ta.hessian(lambda x: _power(x, 3))(2.0)) == pytest.approx(12.0)


def test_nondiff_argnums_errors():
    with pytest.raises(TypeError, match="nondiff_argnums.*holds a traced value"):
        ta.grad(lambda x: _power(x, x))(2.0)
    with pytest.raises(ValueError, match="non-negative ints"):
        ta.custom_vjp(lambda x: x, nondiff_argnums=(-1,))
    with pytest.raises(TypeError, match="positional arguments"):
        ta.grad(lambda x: _power(x))(1.0)


# ---------------------------------------------------------------------------
# numpy's signatures, scipy's names
# ---------------------------------------------------------------------------

def test_swapaxes_takes_numpys_keywords():
    w = np.arange(6.0).reshape(3, 2)
    for call in (lambda x: np.swapaxes(x, axis1=0, axis2=1),
                 lambda x: np.swapaxes(x, 0, -1), lambda x: x.swapaxes(1, 0)):
        g = ta.grad(lambda x: np.sum(call(x) * w))(np.ones((2, 3)))
        np.testing.assert_array_equal(g, w.T)


def test_linspace_of_zero_samples():
    assert float(ta.grad(lambda x: np.linspace(x, 2 * x, 0).sum())(1.0)) == 0.0
    out, t = ta.jvp(lambda x: np.linspace(x, 2 * x, 0), (1.0,), (1.0,))
    assert out.shape == t.shape == (0,)


def test_scipy_ufunc_without_rule_is_named_as_scipy_names_it():
    sps = pytest.importorskip("scipy.special")
    with pytest.raises(ta.NonDifferentiableError, match=r"scipy\.special\.struve"):
        ta.grad(lambda x: sps.struve(1.0, x))(1.0)
    with pytest.raises(ta.NonDifferentiableError, match=r"np\.frexp"):
        ta.grad(lambda x: np.frexp(x)[0])(1.0)


# ---------------------------------------------------------------------------
# reading a traced number is not replayable
# ---------------------------------------------------------------------------

def test_record_refuses_a_function_that_reads_traced_numbers():
    """A branch on x.primal is not a guard: a replay would silently keep the
    recorded branch, so ta.record refuses (a comparison on x itself is fine)."""
    with pytest.raises(ta.TapeReplayError, match=r"x\.primal"):
        ta.record(lambda x: x * x if x.primal > 0 else -x, 1.0)
    with pytest.raises(ta.TapeReplayError, match=r"x\.value"):
        ta.record(lambda x: x * float(x.value), 1.0)
    rec = ta.record(lambda x: x * x if x > 0 else -x, 1.0)
    assert rec(3.0) == 9.0
    with pytest.raises(ta.GuardFlippedError):
        rec(-3.0)


def test_scan_body_reading_traced_numbers_runs_eagerly():
    """A scan body whose branch reads c.primal is not recorded once and replayed
    (its branch flips during the loop): the gradient is the eager loop's."""
    def step(c, u):
        k = 2.0 if c.primal > 1.5 else 1.0
        return c * k + u, c

    def eager(c0):
        c = c0
        for u in np.ones(4):
            c, _ = step(c, u)
        return c

    for c0 in (1.0, 0.2, 3.0):
        got = ta.grad(lambda c0: ta.scan(step, c0, np.ones(4))[0])(c0)
        assert float(got) == float(ta.grad(eager)(c0))
