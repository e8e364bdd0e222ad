"""vmap over functions that decide something from values (a domain check, a NaN
mask, a zero in a product, a tie, an argsort used as an index): the lanes' values
are read together, lanes that agree run as one batch, lanes that disagree split
it (``splits``), and nothing reruns the function lane by lane
(``per_lane_runs == 0``).  Values and derivatives equal the loop over the lanes.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.stats as tst
from tapead._prims import batching


def _loop(f, *xs):
    return np.stack([np.asarray(f(*[x[i] for x in xs])) for i in range(len(xs[0]))])


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
    ok = np.isfinite(b)
    np.testing.assert_allclose(a[ok], b[ok], rtol=1e-13, atol=1e-300)


def _batched(f, *xs, splits=None):
    """vmap(f)(*xs), checked against the loop, with no per-lane rerun."""
    batching.reset_stats()
    out = ta.vmap(f)(*xs)
    assert batching.STATS["per_lane_runs"] == 0
    assert batching.STATS["per_lane_calls"] == 0
    if splits is not None:
        assert (batching.STATS["splits"] > 0) == splits
    _same(out, _loop(f, *xs))
    return out


def _grad_inside(f, *xs):
    """vmap(grad(f)) equals the loop of grad(f), with no per-lane rerun."""
    g = ta.grad(lambda x: tnp.sum(f(x)))
    batching.reset_stats()
    out = ta.vmap(g)(*xs)
    assert batching.STATS["per_lane_runs"] == 0
    _same(out, _loop(g, *xs))


# ---------------------------------------------------------------------------
# domain checks of the distributions
# ---------------------------------------------------------------------------

def test_lanes_out_of_a_distributions_domain_split_the_batch():
    x = np.array([[0.5, 1.5], [-0.5, 2.0], [1.0, 3.0]])        # lane 1 has x < 0
    a = 2.5
    for f in (lambda x: tst.gamma.logpdf(x, a), lambda x: tst.gamma.cdf(x, a),
              lambda x: tst.gamma.sf(x, a), lambda x: tst.chi2.logpdf(x, 3.0)):
        _batched(f, x, splits=True)
        _batched(f, np.abs(x), splits=False)
    u = np.array([[0.2, 0.7], [0.4, 1.2], [0.1, 0.3]])          # lane 1 has y > 1
    for f in (lambda u: tst.beta.logpdf(u, 2.0, 3.0), lambda u: tst.beta.cdf(u, 2.0, 3.0)):
        _batched(f, u, splits=True)


def test_the_gradient_of_a_batched_distribution_equals_the_loop():
    x = np.array([[0.5, 1.5], [0.7, 2.0], [1.0, 3.0]])
    a = np.array([1.5, 2.5, 3.5])
    gb = ta.grad(lambda x, a: tnp.sum(ta.vmap(tst.gamma.logpdf)(x, a)), argnums=(0, 1))(x, a)
    gl = ta.grad(lambda x, a: tnp.sum(tnp.stack([tst.gamma.logpdf(x[i], a[i])
                                                 for i in range(3)])), argnums=(0, 1))(x, a)
    for b, r in zip(gb, gl):
        _same(b, r)


def test_poisson_counts_are_batched_constants():
    k = np.array([[0.0, 2.0], [1.0, 2.5], [3.0, -1.0]])         # 2.5 and -1: pmf 0
    mu = np.array([1.5, 2.0, 0.5])
    _batched(tst.poisson.logpmf, k, mu)
    _batched(tst.poisson.cdf, k, mu)
    _grad_inside(lambda m: tst.poisson.logpmf(np.array([0.0, 2.0, 3.0]), m), mu)


def test_weights_that_sum_to_zero_in_one_lane_raise_as_in_the_loop():
    x = np.ones((3, 2))
    w = np.array([[1.0, 2.0], [1.0, -1.0], [0.5, 0.5]])
    with pytest.raises(ZeroDivisionError):
        ta.vmap(lambda x, w: tnp.average(x, weights=w))(x, w)
    _batched(lambda x, w: tnp.average(x, weights=w), x, np.abs(w) + 0.5)


# ---------------------------------------------------------------------------
# NaN masks, zeros, ties, the series of sinc
# ---------------------------------------------------------------------------

def test_nan_masks_of_some_lanes():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 2.0, 5.0], [np.nan, np.nan, 0.5]])
    for f in (tnp.nansum, tnp.nanmean, tnp.nanmax, tnp.nanmin, tnp.median,
              lambda v: tnp.percentile(v, 30.0), lambda v: tnp.nan_to_num(v, nan=2.0),
              lambda v: tnp.fmax(v, 1.5), lambda v: tnp.fmin(v, 1.5)):
        _batched(f, x)
    _grad_inside(tnp.nansum, x)
    _grad_inside(lambda v: tnp.nan_to_num(v, nan=2.0) * v, x)


def test_a_zero_in_one_lane_of_a_product():
    x = np.array([[1.0, 2.0, 3.0], [1.5, 0.0, 2.0], [0.0, 0.0, 2.0]])
    _batched(tnp.prod, x)
    _grad_inside(tnp.prod, x)
    _grad_inside(lambda v: tnp.cumprod(v), x)


def test_ties_of_max_in_one_lane():
    x = np.array([[1.0, 3.0, 2.0], [3.0, 3.0, 1.0], [0.5, 0.25, 0.5]])
    _grad_inside(tnp.max, x)
    _grad_inside(lambda v: tnp.min(v), x)


def test_sinc_at_zero_in_one_lane():
    x = np.array([[0.5, 1.5], [0.0, 2.0], [1e-4, 0.25]])
    _batched(tnp.sinc, x)
    _grad_inside(tnp.sinc, x)


# ---------------------------------------------------------------------------
# indices from values
# ---------------------------------------------------------------------------

def test_an_argsort_used_as_an_index_is_a_batched_gather():
    x = np.array([[3.0, 1.0, 2.0], [0.5, 2.5, 1.5], [4.0, 5.0, 0.1]])
    _batched(lambda v: v[tnp.argsort(v)], x)
    _batched(lambda v: v[tnp.argmax(v)] - v[tnp.argmin(v)], x)
    table = np.array([10.0, 20.0, 30.0])
    gb = ta.grad(lambda x: tnp.sum(ta.vmap(lambda v: v[tnp.argsort(v)])(x) * table))(x)
    np.testing.assert_array_equal(gb, np.stack([table[np.argsort(np.argsort(r))] for r in x]))
    _batched(lambda v: tnp.partition(v, 1), x)
    _grad_inside(tnp.sort, x)


def test_each_lane_its_own_quantile():
    x = np.array([[3.0, 1.0, 2.0, 7.0], [0.5, 2.5, 1.5, -1.0], [4.0, 5.0, 0.1, 2.0]])
    q = np.array([0.25, 1.0, 0.5])                            # lane 1 at the top
    _batched(tnp.quantile, x, q)
    _batched(lambda q: tnp.quantile(x[0], q), q)              # x shared by every lane
    _batched(lambda x, q: tnp.percentile(x, 100 * q, keepdims=True), x, q)
    qs = np.array([[0.1, 0.9], [0.0, 0.5], [0.75, 0.3]])
    _batched(lambda x, q: tnp.quantile(x, q), x, qs)
    gb = ta.grad(lambda x, q: tnp.sum(ta.vmap(tnp.quantile)(x, q)), argnums=(0, 1))(x, q)
    gl = ta.grad(lambda x, q: tnp.sum(tnp.stack([tnp.quantile(x[i], q[i]) for i in range(3)])),
                 argnums=(0, 1))(x, q)
    for b, r in zip(gb, gl):
        _same(b, r)
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        ta.vmap(tnp.quantile)(x, np.array([0.5, 1.5, 0.5]))


def test_a_permutation_from_values_inside_a_gradient_taken_inside_vmap():
    x = np.array([[3.0, 1.0, 2.0, 0.5], [0.5, 2.5, 1.5, 4.0], [4.0, 5.0, 0.1, 2.0]])
    w = np.array([1.0, -2.0, 0.5, 3.0])

    def f(v):
        return tnp.sum(tnp.partition(v, 1) * w) + tnp.sum(tnp.sort(v) ** 3 * w)
    _grad_inside(f, x)
    h = ta.hessian(f)
    batching.reset_stats()
    out = ta.vmap(h)(x)
    assert batching.STATS["per_lane_runs"] == 0
    _same(out, _loop(h, x))


def test_an_index_from_values_inside_a_gradient_taken_inside_vmap():
    x = np.array([[3.0, 1.0, 2.0, 0.5], [0.5, 2.5, 1.5, 4.0], [4.0, 5.0, 0.1, 2.0]])
    w = np.array([1.0, -2.0, 0.5, 3.0])

    def f(v):
        s = v[tnp.argsort(v)]
        return tnp.sum(s ** 3 * w) + v[tnp.argmax(v)] ** 2 - v[tnp.argmin(v)]
    _grad_inside(f, x)
    _grad_inside(lambda v: tnp.quantile(v, 0.3) * tnp.sum(v), x)
    q = np.array([0.2, 0.5, 1.0])
    g = ta.grad(lambda v, q: tnp.quantile(v, q) ** 2, argnums=(0, 1))
    batching.reset_stats()
    gv, gq = ta.vmap(g)(x, q)
    assert batching.STATS["per_lane_runs"] == 0
    _same(gv, np.stack([g(x[i], q[i])[0] for i in range(3)]))
    _same(gq, np.stack([g(x[i], q[i])[1] for i in range(3)]))
    for h in (ta.hessian(f), ta.jacrev(ta.grad(f)), ta.jacfwd(ta.grad(f))):
        out = ta.vmap(h)(x)
        _same(out, _loop(h, x))


def test_lstsq_solves_every_lanes_system_as_numpy_does():
    rng = np.random.default_rng(7)
    a = rng.normal(size=(3, 4, 2))
    a[1, :, 1] = a[1, :, 0]                                     # lane 1: rank 1
    b = rng.normal(size=(3, 4))

    def f(a, b):                      # (the residuals' shape depends on the rank)
        x, _, rank, s = tnp.linalg.lstsq(a, b, rcond=None)
        return x, rank, s
    batching.reset_stats()
    x, rank, s = ta.vmap(f)(a, b)
    assert batching.STATS["per_lane_runs"] == 0 and batching.STATS["splits"] == 1
    for i in range(3):
        ref = np.linalg.lstsq(a[i], b[i], rcond=None)
        _same(x[i], ref[0])
        assert rank[i] == ref[2]
        _same(s[i], ref[3])
    res = ta.vmap(lambda a, b: tnp.linalg.lstsq(a, b, rcond=None)[1])(a[[0, 2]], b[[0, 2]])
    _same(res, np.stack([np.linalg.lstsq(a[i], b[i], rcond=None)[1] for i in (0, 2)]))
    full = rng.normal(size=(3, 4, 2))
    _batched(lambda a, b: tnp.linalg.lstsq(a, b, rcond=None)[0], full, rng.normal(size=(3, 4, 2)))
    _grad_inside(lambda b: tnp.linalg.lstsq(full[0], b, rcond=None)[0] ** 2, b)
    g = ta.grad(lambda a, b: tnp.sum(tnp.linalg.lstsq(a, b, rcond=None)[0] ** 2), argnums=(0, 1))
    gv = ta.vmap(g)(full, b)
    for k in range(2):
        _same(gv[k], np.stack([g(full[i], b[i])[k] for i in range(3)]))


def test_nested_vmaps_over_decisions_from_values_equal_the_loops():
    x = np.array([[[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], [[0.5, 0.5, 0.25], [4.0, 1.0, 2.0]]])
    y = np.array([[2.0, 1.0, 0.5], [0.0, 3.0, 3.0]])
    g = ta.grad(lambda u, v: tnp.max(u * v) + tnp.prod(u + v) + tnp.sum(u[tnp.argsort(v)]),
                argnums=(0, 1))
    inner = ta.vmap(g, in_axes=(0, None))                       # y shared by the inner lanes
    outer = ta.vmap(inner, in_axes=(0, 0))
    out = outer(x, y)
    for k in range(2):
        ref = np.stack([np.stack([g(x[i, j], y[i])[k] for j in range(2)]) for i in range(2)])
        _same(out[k], ref)
    med = ta.vmap(ta.vmap(lambda u, v: tnp.nanmean(tnp.where(u > 2.0, np.nan, u) * v)),
                  in_axes=(0, None))(x, y)
    ref = np.array([[np.nanmean(np.where(x[i, j] > 2.0, np.nan, x[i, j]) * y[j])
                     for j in range(2)] for i in range(2)])
    _same(med, ref)
