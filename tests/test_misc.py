"""Tests of tapead/compositions/misc.py (and tapead/_prims/piecewise.py) beyond the op-spec rows (tests/opspecs_misc.py):
zero-derivative functions and their replay, constants from shapes, predicates,
searchsorted's guard, sinc at its removable singularity, interp against finite
differences and JAX, median at even and odd lengths, the NaN reductions, and
the functions deliberately left without a rule.
"""
import math

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import GuardFlippedError, NonDifferentiableError

X = np.array([-2.7, -1.2, -0.4, 0.3, 1.5, 2.6])


def _fd(f, x, h=1e-6):
    """Central-difference gradient of a scalar function of an array."""
    x = np.array(x, np.float64)
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# ---------------------------------------------------------------------------
# piecewise-constant functions: value numpy's, derivative exactly zero
# ---------------------------------------------------------------------------

ZERO_DERIVATIVE = [
    ("np.floor", np.floor), ("np.ceil", np.ceil), ("np.rint", np.rint),
    ("np.trunc", np.trunc), ("np.fix", np.fix), ("np.round", np.round),
    ("np.around", np.around), ("np.round(decimals=1)", lambda x: np.round(x, 1)),
    ("tnp.floor", tnp.floor), ("tnp.round(decimals=-1)", lambda x: tnp.round(x, -1)),
    ("x.round()", lambda x: x.round()),
]


@pytest.mark.parametrize("name, f", ZERO_DERIVATIVE, ids=[n for n, _ in ZERO_DERIVATIVE])
def test_zero_derivative_functions(name, f):
    ref = f(X) if not name.startswith("x.") else X.round()
    for x in (X, X.astype(np.float32)):
        value, g = ta.value_and_grad(lambda x: tnp.sum(f(x) * 1.0))(x)
        assert np.sum(ref) == pytest.approx(float(value), rel=1e-6)
        assert np.array_equal(g, np.zeros_like(x)) and g.dtype == x.dtype
    _, t = ta.jvp(f, (X,), (np.ones_like(X),))
    assert not np.any(t)
    assert not np.any(ta.jacfwd(f)(X)) and not np.any(ta.jacrev(f)(X))
    # scalars (the Python-float box) too
    assert ta.grad(lambda s: f(s) * s)(2.5) == f(np.float64(2.5)) if not \
        name.startswith("x.") else True


def test_plain_inputs_get_numpy_results():
    for f in (tnp.floor, tnp.ceil, tnp.rint, tnp.trunc, tnp.fix, tnp.round, tnp.sinc,
              tnp.deg2rad, tnp.rad2deg):
        assert np.array_equal(f(X), getattr(np, f.__name__)(X))
    assert np.array_equal(tnp.remainder(X, 0.7), np.remainder(X, 0.7))
    assert np.array_equal(tnp.median(X), np.median(X))
    assert np.array_equal(tnp.interp(X, [0.0, 1.0], [1.0, 3.0]),
                          np.interp(X, [0.0, 1.0], [1.0, 3.0]))


def test_replay_recomputes_floor():
    rec = ta.record(lambda x: x * np.floor(x), 1.5)
    assert rec.value_and_grad(2.5) == (5.0, 2.0)      # floor(2.5) = 2, recomputed
    rec = ta.record(lambda x: tnp.sum(x * np.floor(x) + np.round(x)), np.array([0.5, 1.5]))
    value, g = rec.value_and_grad(np.array([3.2, -1.7]))
    assert value == pytest.approx(3.2 * 3 + 1.7 * 2 + 3.0 - 2.0)
    assert np.array_equal(g, [3.0, -2.0])


def test_heaviside():
    x = np.array([-1.0, 0.0, 2.0])
    assert np.array_equal(tnp.heaviside(x, 0.5), np.heaviside(x, 0.5))
    assert ta.grad(lambda h: tnp.sum(np.heaviside(x, h)))(0.5) == 1.0     # only x == 0
    assert np.array_equal(ta.grad(lambda x: tnp.sum(np.heaviside(x, 0.5)))(x), np.zeros(3))
    assert np.array_equal(ta.jacfwd(lambda h: np.heaviside(x, h))(0.5), [0.0, 1.0, 0.0])


# ---------------------------------------------------------------------------
# constants from shapes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_constants_from_shapes(dtype):
    x0 = np.ones((2, 3), dtype)
    seen = {}

    def f(x):
        for name in ("zeros_like", "ones_like", "empty_like"):
            seen[name] = getattr(np, name)(x)
        seen["full_like"] = np.full_like(x, 7.0)
        seen["shape"] = np.zeros_like(x, shape=(4,))
        return tnp.sum(x)

    ta.grad(f)(x0)
    for name in ("zeros_like", "ones_like", "empty_like", "full_like"):
        assert type(seen[name]) is np.ndarray, name
        assert seen[name].shape == (2, 3) and seen[name].dtype == dtype, name
    assert np.all(seen["zeros_like"] == 0) and np.all(seen["ones_like"] == 1)
    assert np.all(seen["full_like"] == 7) and seen["shape"].shape == (4,)
    # a traced fill value is broadcast, differentiably
    # (np.full_like(plain, traced) does not reach tapead: numpy dispatches full_like
    # on its first argument only)
    g = ta.grad(lambda c: tnp.sum(tnp.full_like(x0, c) * np.arange(6.0).reshape(2, 3)))(2.0)
    assert g == 15.0


# ---------------------------------------------------------------------------
# predicates and searchsorted: plain numpy values of the concrete values
# ---------------------------------------------------------------------------

def test_predicates_return_plain_booleans():
    y = np.array([1.0, np.inf, np.nan])
    seen = {}

    def f(x):
        seen["isclose"] = np.isclose(x, [1.0, 2.0, 3.0 + 1e-9])
        seen["allclose"] = np.allclose(x, x + 1e-12)
        seen["array_equal"] = np.array_equal(x, [1.0, 2.0, 3.0])
        seen["array_equiv"] = np.array_equiv(x, x)
        seen["isfinite"] = np.isfinite(x * y)
        seen["isnan"] = np.isnan(x * y)
        seen["isinf"] = tnp.isinf(x * y)
        seen["signbit"] = np.signbit(-x)
        return tnp.sum(x)

    ta.grad(f)(np.array([1.0, 2.0, 3.0]))
    assert np.array_equal(seen["isclose"], [True, True, True])
    assert seen["allclose"] is True and seen["array_equal"] is True
    assert seen["array_equiv"] is True
    assert np.array_equal(seen["isfinite"], [True, False, False])
    assert np.array_equal(seen["isnan"], [False, False, True])
    assert np.array_equal(seen["isinf"], [False, True, False])
    assert np.array_equal(seen["signbit"], [True, True, True])
    for v in seen.values():
        assert type(v) in (bool, np.ndarray, np.bool_)


EDGES = np.array([0.0, 1.0, 2.0, 3.0])


def test_searchsorted_plain_ints_and_guard_on_replay():
    def f(x):
        k = np.searchsorted(EDGES, x)
        assert k.dtype.kind == "i"
        return tnp.sum(x * k)

    assert np.array_equal(ta.grad(f)(np.array([0.5, 2.5])), [1.0, 3.0])
    rec = ta.record(f, np.array([0.5, 2.5]))
    assert np.array_equal(rec.value_and_grad(np.array([0.7, 2.2]))[1], [1.0, 3.0])
    with pytest.raises(GuardFlippedError, match="searchsorted"):
        rec.value_and_grad(np.array([1.5, 2.2]))          # 1.5 is in another bucket
    # a traced sorted array, and the method form
    assert ta.grad(lambda e: tnp.sum(e) * float(e.searchsorted(1.5)))(EDGES)[0] == 2.0


# ---------------------------------------------------------------------------
# sinc at its removable singularity
# ---------------------------------------------------------------------------

def test_sinc_at_zero():
    assert ta.grad(np.sinc)(0.0) == 0.0
    assert ta.grad(ta.grad(np.sinc))(0.0) == pytest.approx(-math.pi ** 2 / 3, rel=1e-14)
    x = np.array([0.0, 0.3, -1.2])
    g = ta.grad(lambda x: tnp.sum(np.sinc(x)))(x)
    assert g[0] == 0.0 and np.all(np.isfinite(g))
    assert np.allclose(g[1:], _fd(lambda x: np.sum(np.sinc(x)), x[1:]), atol=1e-8)
    h = ta.hessian(lambda x: tnp.sum(np.sinc(x)))(x)
    assert h[0, 0] == pytest.approx(-math.pi ** 2 / 3, rel=1e-14)
    assert np.array_equal(np.sinc(x), tnp.sinc(x))
    ta.check_grads(np.sinc, (np.array([0.0, 0.0, 0.5]),), order=2)
    # third and fourth derivative at 0 from the series: 0 and pi^4 / 5
    d3 = ta.grad(ta.grad(ta.grad(np.sinc)))(0.0)
    d4 = ta.grad(ta.grad(ta.grad(ta.grad(np.sinc))))(0.0)
    assert d3 == 0.0 and d4 == pytest.approx(math.pi ** 4 / 5, rel=1e-14)
    # where x == 0 is decided on the recorded value and guarded
    rec = ta.record(lambda x: tnp.sum(np.sinc(x)), np.array([0.5, 1.0]))
    with pytest.raises(GuardFlippedError, match="sinc"):
        rec.value_and_grad(np.array([0.0, 1.0]))
    # near 0 the series keeps derivatives accurate (no cancellation)
    ta.check_grads(np.sinc, (np.array([1e-7, -3e-4, 2e-3, 0.004]),), order=2)
    near = np.array([1e-7, -3e-4, 2e-3, 0.0])
    np.testing.assert_allclose(ta.jvp(np.sinc, (near,), (np.ones(4),))[0], np.sinc(near),
                               rtol=1e-15)


# ---------------------------------------------------------------------------
# interp: finite differences, JAX, knots, guard, errors
# ---------------------------------------------------------------------------

XP = np.array([-1.0, 0.0, 0.5, 2.0])
FP = np.array([1.0, -0.5, 2.0, 0.3])
XS = np.array([-1.7, -0.6, 0.2, 0.9, 1.8, 2.4])


def test_interp_against_finite_differences():
    gx, gf = ta.grad(lambda x, fp: tnp.sum(np.interp(x, XP, fp) ** 2), argnums=(0, 1))(XS, FP)
    assert np.allclose(gx, _fd(lambda x: np.sum(np.interp(x, XP, FP) ** 2), XS), atol=1e-7)
    assert np.allclose(gf, _fd(lambda f: np.sum(np.interp(XS, XP, f) ** 2), FP), atol=1e-7)
    # (numpy dispatches interp on x, xp, fp only: a traced left/right needs tnp.interp)
    g = ta.grad(lambda lr: tnp.sum(tnp.interp(XS, XP, FP, left=lr, right=2 * lr)))(0.3)
    assert g == 1.0 + 2.0                       # one point left, one right
    ta.check_grads(lambda x, fp: np.interp(x, XP, fp), (XS, FP), order=2)
    for a, b in zip(ta.jacfwd(lambda x, fp: np.interp(x, XP, fp), (0, 1))(XS, FP),
                    ta.jacrev(lambda x, fp: np.interp(x, XP, fp), (0, 1))(XS, FP)):
        np.testing.assert_allclose(a, b, rtol=1e-15)


def test_interp_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    xs = np.concatenate([XS, XP])               # knots: the segment to the right (as JAX)
    f = lambda m: lambda x, fp: m.sum(m.sin(m.interp(x, XP, fp)))  # noqa: E731
    want = jax.grad(f(jnp), argnums=(0, 1))(xs, FP)
    got = ta.grad(f(tnp), argnums=(0, 1))(xs, FP)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.interp(xs, XP, FP), np.interp(xs, XP, FP), rtol=1e-15)


def test_interp_guard_and_errors():
    rec = ta.record(lambda x: tnp.sum(np.interp(x, XP, FP)), np.array([0.2, 0.9]))
    rec.value_and_grad(np.array([0.3, 1.0]))                  # same segments
    with pytest.raises(GuardFlippedError, match="interp"):
        rec.value_and_grad(np.array([0.7, 1.0]))              # 0.7 crossed the knot at 0.5
    with pytest.raises(NonDifferentiableError, match="xp"):
        ta.grad(lambda xp: tnp.sum(np.interp(0.3, xp, FP)))(XP)


# ---------------------------------------------------------------------------
# median, averages and the NaN reductions
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("x, want", [
    (np.array([3.0, 1.0, 2.0]), [0.0, 0.0, 1.0]),              # odd: the middle element
    (np.array([3.0, 1.0, 2.0, 5.0]), [0.5, 0.0, 0.5, 0.0]),    # even: half to each middle
])
def test_median_even_and_odd(x, want):
    assert tnp.median(x) == np.median(x)
    assert np.array_equal(ta.grad(np.median)(x), want)


def test_median_of_a_slice_with_nan_is_nan():
    x = np.array([[3.0, np.nan, 1.0], [2.0, 0.5, 4.0]])
    y, g = ta.value_and_grad(lambda x: np.median(x, axis=1)[1])(x)
    assert y == 2.0 and np.array_equal(g, [[0, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(ta.jvp(lambda x: np.median(x, axis=1), (x,),
                                         (np.ones_like(x),))[0], np.median(x, axis=1))


def test_median_axes_and_keepdims():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for kw in ({}, {"axis": 1}, {"axis": (0, 2)}, {"axis": -1, "keepdims": True},
               {"axis": (0, 2), "keepdims": True}, {"keepdims": True}):
        y = ta.jvp(lambda x: np.median(x, **kw), (x,), (np.zeros_like(x),))[0]
        np.testing.assert_allclose(y, np.median(x, **kw), rtol=1e-15, err_msg=str(kw))
        ta.check_grads(lambda x: np.median(x, **kw), (x,), order=1)


def test_average_returned_and_linspace_extras():
    x = np.arange(6.0).reshape(2, 3)
    w = np.array([1.0, 2.0, 3.0])
    avg, scl = np.average(ta.Tape().input(x), axis=1, weights=w, returned=True)
    ref_avg, ref_scl = np.average(x, axis=1, weights=w, returned=True)
    np.testing.assert_allclose(avg.primal, ref_avg)
    np.testing.assert_allclose(np.asarray(getattr(scl, "primal", scl)), ref_scl)
    g = ta.grad(lambda w: tnp.sum(np.average(x, axis=1, weights=w, returned=True)[1]))(w)
    assert np.array_equal(g, [2.0, 2.0, 2.0])
    y, step = np.linspace(ta.Tape().input(0.0), 1.0, 5, retstep=True)
    assert step.primal == 0.25
    assert np.array_equal(tnp.linspace(0.0, 1.0, 5), np.linspace(0.0, 1.0, 5))
    g = ta.grad(lambda a: tnp.sum(np.linspace(a, 2.0, 1)))(1.0)       # num=1: just start
    assert g == 1.0
    j = ta.jacfwd(lambda a: np.linspace(a, np.array([1.0, 2.0]), 3, axis=1))(0.5)
    np.testing.assert_allclose(j, [[1.0, 0.5, 0.0], [1.0, 0.5, 0.0]])


def test_nan_reductions_ignore_nans_and_guard_them():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, 5.0]])
    for f, ref_grad in ((np.nansum, [[1, 0, 1], [0, 1, 1]]),
                        (np.nanmean, [[0.25, 0, 0.25], [0, 0.25, 0.25]]),
                        (np.nanmax, [[0, 0, 0], [0, 0, 1]]),
                        (np.nanmin, [[1, 0, 0], [0, 0, 0]])):
        assert ta.value_and_grad(f)(x)[0] == f(x)
        assert np.array_equal(ta.grad(f)(x), ref_grad), f.__name__
    rec = ta.record(np.nansum, x)
    with pytest.raises(GuardFlippedError, match="NaN"):
        rec.value_and_grad(np.ones((2, 3)))
    with pytest.raises(ValueError, match="all-NaN"):
        ta.grad(lambda x: tnp.sum(np.nanmax(x, axis=0)))(np.array([[np.nan, 1.0]] * 2))


# ---------------------------------------------------------------------------
# grids and convolution: odd shapes and errors
# ---------------------------------------------------------------------------

def test_meshgrid_sparse_and_convolve_errors():
    a, b = np.arange(3.0), np.arange(2.0) + 5
    gx, gy = np.meshgrid(ta.Tape().input(a), b, sparse=True)
    rx, ry = np.meshgrid(a, b, sparse=True)
    assert np.array_equal(gx.primal, rx) and np.array_equal(gy, ry)
    with pytest.raises(ValueError, match="1-d"):
        ta.grad(lambda x: tnp.sum(np.convolve(x, np.ones(2))))(np.ones((2, 2)))
    with pytest.raises(ValueError, match="mode"):
        ta.grad(lambda x: tnp.sum(np.convolve(x, np.ones(2), mode="nope")))(np.ones(3))
    with pytest.raises(ValueError, match="3-vectors"):
        ta.grad(lambda x: tnp.sum(np.cross(x, np.ones(2))))(np.ones(2))
    with pytest.raises(np.exceptions.AxisError, match="cross"):
        ta.grad(lambda x: tnp.sum(np.cross(x, np.ones(3), axisa=1)))(np.ones(3))


# ---------------------------------------------------------------------------
# deliberately left without a rule
# ---------------------------------------------------------------------------

NO_RULE = [
    ("linalg.tensorinv", lambda x: np.linalg.tensorinv(x, ind=1)),
    ("fft.hfft", lambda x: np.fft.hfft(x[0])),
    ("unique", lambda x: np.unique(x)),
    ("histogram", lambda x: np.histogram(x)[0]),
]


@pytest.mark.parametrize("name, f", NO_RULE, ids=[n for n, _ in NO_RULE])
def test_functions_without_rules_still_raise(name, f):
    # the message names the function with its numpy module (np.linalg.tensorinv)
    with pytest.raises(NonDifferentiableError, match=rf"np\.{name}.*custom_vjp"):
        ta.grad(lambda x: tnp.sum(f(x)))(np.eye(3) + 0.1)


def test_lists_as_constant_operands():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ta.grad(lambda x: tnp.sum(np.cross(x, [0.0, 0.0, 1.0])))(x),
                               [-1.0, 1.0, 0.0])      # sum of (x1, -x0, 0)
    np.testing.assert_allclose(ta.grad(lambda x: tnp.sum(np.convolve(x, [1.0, 2.0])))(x),
                               [3.0, 3.0, 3.0])
    assert ta.grad(lambda x: np.interp(x, [0.0, 1.0], [0.0, 2.0]))(0.3) == 2.0
    g = ta.grad(lambda w: np.average([1.0, 2.0, 3.0], weights=w))(x)
    np.testing.assert_allclose(g, _fd(lambda w: np.average([1.0, 2.0, 3.0], weights=w), x),
                               atol=1e-8)
    assert ta.grad(lambda p: tnp.sum(tnp.diff([1.0, 2.0, 4.0], prepend=p)))(0.5) == -1.0


def test_percent_operator_and_stop_gradient_in_jacfwd():
    x = np.array([1.0, 2.5])
    np.testing.assert_array_equal(ta.grad(lambda v: tnp.sum(v % 0.7))(x), [1.0, 1.0])
    np.testing.assert_array_equal(ta.grad(lambda v: tnp.sum(3.0 % v))(x),
                                  -np.floor(3.0 / x))
    np.testing.assert_array_equal(ta.jacfwd(lambda v: v * ta.stop_gradient(v))(x), np.diag(x))


def test_record_of_an_inner_transform_follows_the_new_values():
    # the inner gradient's rules read values (the sign of x): the recording
    # computes them again at the new inputs instead of keeping the old ones
    c = np.array([0.3, 0.7])
    inner = ta.grad(lambda x: tnp.sum(tnp.abs(x) * x))
    f = lambda x: tnp.sum(inner(x) * c)                     # noqa: E731
    rec = ta.record(f, np.array([1.0, 2.0]))
    for x in (np.array([-1.0, 2.0]), np.array([3.0, -0.5])):
        assert rec(x) == f(x)
        v, g = rec.value_and_grad(x)
        np.testing.assert_array_equal(g, ta.grad(f)(x))
    rec = ta.record(lambda x: tnp.sum(tnp.abs(x) * x * c), np.array([1.0, 2.0]))
    assert rec(np.array([-1.0, 2.0])) == pytest.approx(-0.3 + 2.8)


def test_record_counts_only_its_own_threads_transforms():
    import threading
    import time
    stop = []

    def spin():
        while not stop:
            ta.grad(lambda y: y * y)(1.0)

    def slow(x):
        time.sleep(0.005)
        return tnp.sum(tnp.sin(x))

    th = threading.Thread(target=spin)
    th.start()
    try:
        for _ in range(5):
            rec = ta.record(slow, np.ones(3))
            assert rec(np.full(3, 0.5)) == pytest.approx(3 * np.sin(0.5))
    finally:
        stop.append(True)
        th.join()
