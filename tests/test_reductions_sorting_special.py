"""Targeted tests of reductions, sorting and scipy.special beyond the op-spec table.

The smooth points are covered by ``opspecs_reductions.py`` (finite
differences, both modes, order 2, float32/64, JAX).  Here: the conventions
at ties, kinks and zeros (docs/nonsmooth.md), integer outputs, numpy and
scipy dispatch, tracer methods, stability, replay, and error messages.
"""
import numpy as np
import pytest
import scipy.special as sps

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.special as tsp
from tapead._prims import reductions

F32 = np.float32


def grads_both_modes(f, x):
    """The gradient of scalar f at array x by reverse mode and by jacfwd."""
    return ta.grad(f)(x), ta.jacfwd(f)(x)


def assert_both(f, x, expected, dtype=np.float64):
    for g in grads_both_modes(f, np.asarray(x, dtype)):
        assert np.result_type(g) == dtype
        np.testing.assert_array_equal(g, np.asarray(expected, dtype))


# ---------------------------------------------------------------------------
# docs/nonsmooth.md: every answer, forward and reverse, float64 and float32
# ---------------------------------------------------------------------------

SCALAR_LIES = [
    ("maximum(x, 0) at 0", lambda x: tnp.maximum(x, 0.0), 0.0, 0.5),
    ("relu at 0", tnp.relu, 0.0, 0.0),
    ("abs at 0", tnp.abs, 0.0, 0.0),
    ("sqrt(x**2) at 0", lambda x: tnp.sqrt(x ** 2), 0.0, np.nan),
    ("where(x != 1, x, 1.0) at 1", lambda x: tnp.where(x != 1, x, 1.0), 1.0, 0.0),
]


@pytest.mark.parametrize("as_type", [float, np.array, F32], ids=["float", "array", "f32"])
def test_integer_output_argmax(as_type):
    """grad of an integer output is refused (as in JAX); its tangent is zero."""
    f = lambda x: tnp.argmax(tnp.stack([x, 0.5]))  # noqa: E731
    x = as_type(0.2)
    with pytest.raises(TypeError, match="real floating-point scalar"):
        ta.grad(f)(x)
    t = ta.jvp(f, (x,), (np.ones_like(x) if not isinstance(x, float) else 1.0,))[1]
    np.testing.assert_array_equal(np.asarray(t, np.float64), 0.0)


@pytest.mark.parametrize("what, f, x, expected", SCALAR_LIES, ids=[r[0] for r in SCALAR_LIES])
@pytest.mark.parametrize("as_type", [float, np.array, F32], ids=["float", "array", "f32"])
def test_nonsmooth_table(what, f, x, expected, as_type):
    x = as_type(x)
    with np.errstate(all="ignore"):
        g = ta.grad(f)(x)
        t = ta.jvp(f, (x,), (np.ones_like(x) if not isinstance(x, float) else 1.0,))[1]
    np.testing.assert_array_equal(np.asarray(g, np.float64), expected)
    np.testing.assert_array_equal(np.asarray(t, np.float64), expected)


def test_nan_at_sqrt_zero_for_norm_and_std():
    with np.errstate(all="ignore"):
        assert np.isnan(ta.grad(np.linalg.norm)(np.zeros(3))).all()
        assert np.isnan(ta.grad(np.std)(np.ones(3))).all()
    # away from zero they are finite
    np.testing.assert_allclose(ta.grad(np.linalg.norm)(np.array([3.0, 4.0])), [0.6, 0.8])


# ---------------------------------------------------------------------------
# max/min ties: split evenly (like JAX), same in both modes and every dtype
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, F32])
def test_max_min_split_ties_evenly(dtype):
    assert_both(np.max, [1.0, 3.0, 3.0], [0, 0.5, 0.5], dtype)
    assert_both(tnp.amax, [3.0, 3.0, 3.0, 3.0], [0.25] * 4, dtype)
    assert_both(lambda x: x.min(), [2.0, -1.0, -1.0], [0, 0.5, 0.5], dtype)
    x = np.array([[2.0, 2.0, 0.0], [1.0, 4.0, 4.0]], dtype)
    assert_both(lambda x: tnp.sum(tnp.max(x, axis=1)), x, [[0.5, 0.5, 0], [0, 0.5, 0.5]],
                dtype)
    assert_both(lambda x: tnp.sum(tnp.min(x, axis=0, keepdims=True)), x,
                [[0, 1, 1], [1, 0, 0]], dtype)


def test_max_ties_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = np.array([[1.0, 5.0, 5.0, 2.0], [7.0, 7.0, 7.0, 0.0]])
    for axis in (None, 0, 1):
        ours = ta.grad(lambda x: tnp.sum(tnp.max(x, axis=axis) ** 2))(x)
        theirs = jax.grad(lambda x: jax.numpy.sum(jax.numpy.max(x, axis=axis) ** 2))(x)
        np.testing.assert_allclose(ours, theirs, rtol=1e-15)


def test_sort_ties_stable_and_argmax_first():
    x = np.array([2.0, 1.0, 2.0])
    assert_both(lambda x: np.sort(x)[2], x, [0, 0, 1])
    assert_both(lambda x: np.sort(x)[1], x, [1, 0, 0])
    # used as an index, argmax picks the first maximiser: all of the tie
    assert_both(lambda x: x[np.argmax(x)], x, [1, 0, 0])


# ---------------------------------------------------------------------------
# prod and cumprod with exact zeros
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, F32])
def test_prod_one_zero_is_product_of_the_others(dtype):
    assert_both(np.prod, [2.0, 0.0, 3.0], [0, 6, 0], dtype)
    x = np.array([[2.0, 0.0, 3.0], [1.0, 2.0, 4.0]], dtype)
    assert_both(lambda x: tnp.sum(tnp.prod(x, axis=1)), x, [[0, 6, 0], [8, 4, 2]], dtype)
    assert_both(lambda x: tnp.sum(x.prod(axis=0)), x, [[1, 2, 4], [2, 0, 3]], dtype)


def _prod_hessian(x):
    """H[i, j] = prod over k not in {i, j} of x[k], zero diagonal."""
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                h[i, j] = np.prod([x[k] for k in range(n) if k not in (i, j)])
    return h


@pytest.mark.parametrize("x", [[0.0, 2.0, 3.0, 5.0], [0.0, 0.0, 3.0, 5.0],
                               [0.0, 0.0, 0.0, 5.0], [1.5, 2.0, 3.0, 5.0]],
                         ids=["one_zero", "two_zeros", "three_zeros", "no_zero"])
def test_prod_second_order_exact_at_zeros(x):
    x = np.array(x)
    expected = _prod_hessian(x)
    np.testing.assert_allclose(ta.hessian(np.prod)(x), expected, atol=1e-15)
    np.testing.assert_allclose(ta.jacfwd(ta.grad(np.prod))(x), expected, atol=1e-15)
    np.testing.assert_allclose(ta.hvp(np.prod, (x,), (np.ones(4),)), expected.sum(1),
                               atol=1e-15)


def test_prod_third_order_at_all_zeros():
    # d3 prod / dx0 dx1 dxk at x = 0: 1 for k = 2, else 0 (three nested reverse sweeps)
    def d01(x):
        return ta.grad(lambda x: ta.grad(np.prod)(x)[0])(x)[1]
    np.testing.assert_array_equal(ta.grad(d01)(np.zeros(3)), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(ta.grad(d01)(np.zeros(4)), [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(ta.grad(d01)(np.array([0.0, 0.0, 0.0, 2.0])),
                                  [0.0, 0.0, 2.0, 0.0])


def test_cumprod_with_zero_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x = np.array([[2.0, 0.0, 3.0, 0.5], [1.5, -2.0, 0.0, 0.0]])
    w = np.array([1.0, -2.0, 0.5, 3.0])

    def ours(x):
        return tnp.sum(tnp.cumprod(x, axis=1) * w)

    def theirs(x):
        return jnp.sum(jnp.cumprod(x, axis=1) * w)
    np.testing.assert_allclose(ta.grad(ours)(x), jax.grad(theirs)(x), rtol=1e-14)
    np.testing.assert_allclose(ta.hessian(ours)(x), jax.hessian(theirs)(x), atol=1e-14)
    np.testing.assert_allclose(ta.jacfwd(ours)(x), jax.grad(theirs)(x), rtol=1e-14)


# ---------------------------------------------------------------------------
# index-valued functions: plain integers, no derivative
# ---------------------------------------------------------------------------

def test_index_functions_return_plain_integers():
    seen = {}

    def f(x):
        seen["argmax"] = np.argmax(x)
        seen["argmin"] = x.argmin(axis=0)
        seen["argsort"] = np.argsort(x, axis=1)
        seen["argsort_m"] = x.argsort()
        return tnp.sum(x)
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    np.testing.assert_array_equal(ta.grad(f)(x), np.ones_like(x))
    for name, v in seen.items():
        assert isinstance(v, (np.ndarray, np.integer)), name
        assert np.issubdtype(np.result_type(v), np.integer), name
    assert seen["argmax"] == 4
    np.testing.assert_array_equal(seen["argsort"], [[1, 2, 0], [0, 2, 1]])
    # a function returning only an index has derivative 0
    assert ta.grad(lambda x: tnp.argmin(x) * 1.0)(x).tolist() == np.zeros_like(x).tolist()


# ---------------------------------------------------------------------------
# numpy dispatch and tracer methods
# ---------------------------------------------------------------------------

X = np.array([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7]])
DISPATCH = [
    ("np.prod", lambda x: np.prod(x), lambda x: tnp.prod(x)),
    ("x.prod", lambda x: x.prod(axis=1).sum(), lambda x: tnp.sum(tnp.prod(x, axis=1))),
    ("np.var", lambda x: np.var(x, ddof=1), lambda x: tnp.var(x, ddof=1)),
    ("x.var", lambda x: x.var(1).sum(), lambda x: tnp.sum(tnp.var(x, axis=1))),
    ("np.std", lambda x: np.std(x), lambda x: tnp.sqrt(tnp.var(x))),
    ("x.std", lambda x: x.std(ddof=1), lambda x: tnp.sqrt(tnp.var(x, ddof=1))),
    ("np.max", lambda x: np.max(x), lambda x: x[1, 2] * 0.0 + x[0, 2]),
    ("x.max", lambda x: x.max(axis=0).sum(), lambda x: x[1, 0] + x[1, 1] + x[0, 2]),
    ("np.amin", lambda x: np.amin(x), lambda x: x[0, 1]),
    ("x.min", lambda x: x.min(1, keepdims=True).sum(), lambda x: x[0, 1] + x[1, 2]),
    ("np.ptp", lambda x: np.ptp(x), lambda x: x[0, 2] - x[0, 1]),
    ("np.cumsum", lambda x: np.cumsum(x)[-2], lambda x: tnp.sum(x) - x[1, 2]),
    ("x.cumsum", lambda x: x.cumsum(axis=1)[:, 1].sum(), lambda x: tnp.sum(x[:, :2])),
    ("np.cumprod", lambda x: np.cumprod(x, axis=1)[0, 2], lambda x: x[0, 0] * x[0, 1] * x[0, 2]),
    ("x.cumprod", lambda x: x.cumprod()[2], lambda x: x[0, 0] * x[0, 1] * x[0, 2]),
    ("np.linalg.norm", lambda x: np.linalg.norm(x), lambda x: tnp.sqrt(tnp.sum(x * x))),
    ("np.linalg.norm axis", lambda x: np.linalg.norm(x, axis=0).sum(),
     lambda x: tnp.sum(tnp.sqrt(x[0] * x[0] + x[1] * x[1]))),
    ("np.sort", lambda x: np.sort(x)[:, 0].sum(), lambda x: x[0, 1] + x[1, 2]),
    ("np.sort axis=None", lambda x: np.sort(x, axis=None)[-1], lambda x: x[0, 2]),
    ("scipy.special.erf", lambda x: sps.erf(x).sum(), lambda x: tnp.sum(tsp.erf(x))),
    ("scipy.special.expit", lambda x: sps.expit(x).sum(), lambda x: tnp.sum(tnp.sigmoid(x))),
    ("scipy.special.gammaln", lambda x: sps.gammaln(x + 3.0).sum(),
     lambda x: tnp.sum(tsp.gammaln(x + 3.0))),
    ("scipy.special.psi", lambda x: sps.psi(x + 3.0).sum(),
     lambda x: tnp.sum(tsp.digamma(x + 3.0))),
    ("scipy.special.xlogy", lambda x: sps.xlogy(x, 2.0 + x).sum(),
     lambda x: tnp.sum(x * tnp.log(2.0 + x))),
    ("scipy.special.logit", lambda x: sps.logit(0.5 + 0.1 * x).sum(),
     lambda x: tnp.sum(tnp.log((0.5 + 0.1 * x) / (0.5 - 0.1 * x)))),
]


@pytest.mark.parametrize("what, f, ref", DISPATCH, ids=[d[0] for d in DISPATCH])
def test_numpy_and_scipy_dispatch(what, f, ref):
    np.testing.assert_allclose(f(X), ref(X), rtol=1e-14)          # plain values
    np.testing.assert_allclose(ta.grad(f)(X), ta.grad(ref)(X), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ta.hessian(f)(X), ta.hessian(ref)(X), rtol=1e-12, atol=1e-13)
    g32 = ta.grad(f)(X.astype(F32))
    assert g32.dtype == F32
    np.testing.assert_allclose(g32, ta.grad(ref)(X), rtol=2e-5, atol=1e-6)


def test_expit_is_sigmoid_and_names_mirror_scipy():
    assert tsp.expit is tnp.sigmoid
    assert tsp.psi is tsp.digamma
    for name in tsp.__all__:
        assert hasattr(sps, name), name
    from tapead.numpy._protocol import UFUNCS
    for uf in (sps.erf, sps.erfc, sps.logit, sps.gammaln, sps.digamma, sps.expit, sps.xlogy):
        assert uf in UFUNCS


def test_special_derivative_chain_to_third_order():
    x = 1.7
    d3 = ta.grad(ta.grad(ta.grad(sps.gammaln)))(x)       # gammaln''' = polygamma(2, .)
    np.testing.assert_allclose(d3, sps.polygamma(2, x), rtol=1e-13)
    np.testing.assert_allclose(ta.grad(lambda x: tsp.polygamma(3, x))(x),
                               sps.polygamma(4, x), rtol=1e-13)
    assert np.result_type(ta.grad(lambda x: tsp.polygamma(1, x))(F32(1.5))) == F32


# ---------------------------------------------------------------------------
# logsumexp: stable, weights, signs, -inf
# ---------------------------------------------------------------------------

def test_logsumexp_is_stable_and_its_gradient_is_softmax():
    x = np.array([1000.0, 1000.0 + np.log(3.0), -1000.0])
    v, g = ta.value_and_grad(tsp.logsumexp)(x)
    np.testing.assert_allclose(v, 1000.0 + np.log(4.0), rtol=1e-15)
    np.testing.assert_allclose(g, [0.25, 0.75, 0.0], atol=1e-15)
    p = g
    np.testing.assert_allclose(ta.hessian(tsp.logsumexp)(x), np.diag(p) - np.outer(p, p),
                               atol=1e-15)
    g32 = ta.grad(tsp.logsumexp)(x.astype(F32))
    assert g32.dtype == F32 and np.all(np.isfinite(g32))


def test_logsumexp_weights_signs_and_minus_inf():
    x = np.array([0.0, np.log(2.0), -np.inf])
    g = ta.grad(tsp.logsumexp)(x)
    np.testing.assert_allclose(g, [1 / 3, 2 / 3, 0.0], rtol=1e-15)
    b = np.array([1.0, -2.0, 5.0])
    a = np.array([0.5, 0.2, -1.0])
    f = lambda a, b: tsp.logsumexp(a, b=b, return_sign=True)[0]          # noqa: E731
    out, sign = tsp.logsumexp(a, b=b, return_sign=True)
    ref_out, ref_sign = sps.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(out, ref_out)
    assert sign == ref_sign
    ga, gb = ta.grad(f, argnums=(0, 1))(a, b)
    s = np.sum(b * np.exp(a))
    np.testing.assert_allclose(ga, b * np.exp(a) / s, rtol=1e-14)
    np.testing.assert_allclose(gb, np.exp(a) / s, rtol=1e-14)
    ta.check_grads(lambda a, b: tsp.logsumexp(a, axis=0, b=b), (a, np.abs(b)), order=2)


# ---------------------------------------------------------------------------
# replay of a recorded tape recomputes permutations and maximisers
# ---------------------------------------------------------------------------

def test_replay_sorts_and_maximises_the_new_values():
    w = np.array([1.0, 2.0, 3.0])
    rec = ta.record(lambda x: tnp.sum(tnp.sort(x) * w) + tnp.max(x), np.array([3.0, 1.0, 2.0]))
    v, g = rec.value_and_grad(np.array([1.0, 2.0, 3.0]))
    assert v == 17.0
    np.testing.assert_array_equal(g, [1.0, 2.0, 4.0])


# ---------------------------------------------------------------------------
# errors say what was wrong and what to do
# ---------------------------------------------------------------------------

def _raises(exc, match, f, x=X):
    with pytest.raises(exc, match=match):
        ta.grad(f)(x)


def test_error_messages():
    _raises(TypeError, "out=.*assign the result", lambda x: np.max(x, out=np.zeros(())))
    _raises(TypeError, "in place.*np.sort", lambda x: x.sort())
    _raises(TypeError, "initial.*not supported", lambda x: np.prod(x, initial=2.0))
    _raises(TypeError, "dtype.*cast the input", lambda x: np.sum(x, dtype=np.float32))
    _raises(ValueError, "ddof=6.*smaller ddof", lambda x: np.var(x, ddof=6))
    _raises(ValueError, "invalid norm order 3.*'nuc'", lambda x: np.linalg.norm(x, 3))
    _raises(ValueError, "matrix norm", lambda x: np.linalg.norm(x[0], "fro"))
    _raises(ValueError, "axis must be an int or a pair",
            lambda x: np.linalg.norm(tnp.reshape(x, (1, 2, 3)), 1))
    _raises(ValueError, "non-negative integer", lambda x: tsp.polygamma(-1, x).sum())
    _raises(TypeError, "order=", lambda x: np.sort(x, order="a"))
    _raises(ValueError, "empty array", lambda x: np.max(x[:0]))


def test_norm_is_registered_for_linalg():
    from tapead.compositions import norms
    from tapead.numpy._protocol import FUNCTIONS
    assert FUNCTIONS[np.linalg.norm] is norms.norm


# ---------------------------------------------------------------------------
# the traced path computes the same values as numpy/scipy (the op-spec table
# checks values on plain inputs, where the functions are numpy's own)
# ---------------------------------------------------------------------------

def _family_rows():
    import opspecs  # noqa: F401  (loads the table before its family files)
    from opspecs_reductions import ARRAY_OPS
    return ARRAY_OPS


@pytest.mark.parametrize("spec", _family_rows(), ids=lambda s: s.name)
def test_traced_values_match_numpy(spec):
    rng = np.random.default_rng(5)
    for _, shapes in spec.kinds:
        for dtype, rtol in ((np.float64, 1e-13), (F32, 1e-5)):
            args = spec.sample(rng, shapes, dtype)
            ref = spec.np_fn(*args)
            out, _ = ta.jvp(spec.fn, args, tuple(np.zeros_like(a) for a in args))
            assert np.shape(out) == np.shape(ref) and np.result_type(out) == dtype
            np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol)
            v, _ = ta.value_and_grad(lambda *a: tnp.sum(spec.fn(*a)))(*args)
            np.testing.assert_allclose(v, np.sum(ref), rtol=rtol, atol=rtol)
