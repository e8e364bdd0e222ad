"""vmap's batch trace on eager programs: Python branches whose lanes disagree
split the batch, reading one lane's value reruns the function lane by lane,
and either way ``vmap(f)`` equals the loop of ``f`` over the lanes; the
counters, the per-lane warning and ``TAPEAD_STRICT_VMAP``."""
import warnings

import numpy as np
import pytest

import tapead as ta
from tapead.program import Program
import tapead.numpy as tnp
from tapead import _core
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead.errors import BatchConcreteRead, BatchSplit, VmapFallbackError

RNG = np.random.default_rng(5)


def _loop(f, *xs):
    return np.stack([np.asarray(f(*[x[i] for x in xs])) for i in range(len(xs[0]))])


def branchy(x):
    if x[0] > 0:
        if x[1] > 0:
            return tnp.sin(x) * x[1]
        return tnp.cos(x)
    return x * 3.0


def doubling(x):
    while x < 10.0:                     # a per-lane trip count
        x = x * 2.0
    return x


def test_if_else_splits_and_equals_the_loop():
    X = RNG.normal(size=(9, 2))
    ta.vmap_stats(reset=True)
    np.testing.assert_array_equal(ta.vmap(branchy)(X), _loop(branchy, X))
    assert ta.vmap_stats()["splits"] >= 2               # the nested branch splits again
    assert ta.vmap_stats()["per_lane_runs"] == 0


def test_while_loop_with_per_lane_trip_counts():
    x = np.array([1.0, 3.0, 0.5, 11.0, 6.0, 0.01])
    np.testing.assert_array_equal(ta.vmap(doubling)(x), _loop(doubling, x))


def test_lanes_that_agree_do_not_split():
    X = np.abs(RNG.normal(size=(5, 2))) + 0.1            # every lane takes sin
    ta.vmap_stats(reset=True)
    np.testing.assert_allclose(ta.vmap(branchy)(X), _loop(branchy, X), rtol=1e-15)
    assert ta.vmap_stats(reset=True) == {"splits": 0, "per_lane_calls": 0, "per_lane_runs": 0}


def test_split_outputs_come_back_in_lane_order_with_out_axes():
    X = RNG.normal(size=(7, 2))
    f = lambda x: (branchy(x), tnp.sum(x))              # noqa: E731
    out, s = ta.vmap(f, out_axes=(1, 0))(X)
    np.testing.assert_array_equal(out, _loop(branchy, X).T)
    np.testing.assert_array_equal(s, X.sum(axis=1))


def test_split_composes_with_grad_and_chunks():
    X = RNG.normal(size=(8, 2))

    def batched(X):
        return tnp.sum(ta.vmap(branchy)(X) ** 2)

    def looped(X):
        return tnp.sum(tnp.stack([branchy(X[i]) for i in range(8)]) ** 2)
    np.testing.assert_allclose(ta.grad(batched)(X), ta.grad(looped)(X), rtol=1e-14)
    np.testing.assert_array_equal(ta.vmap(branchy, chunk_size=3)(X), _loop(branchy, X))


def test_split_groups_join_shared_values_dtypes_and_contiguous_halves():
    """Groups are written into the whole outputs as they finish: a value one
    group shares across its lanes, a dtype a later group promotes, groups of
    consecutive lanes and interleaved ones all give the loop's arrays."""
    def f(x):
        if x[0] > 0:
            return x * 2.0, np.float32(1.5), np.ones(3, dtype=np.float32)
        return x - 1.0, 7.0, np.arange(3.0)
    for X in (np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5], [-2.0, 1.0]]),   # halves
              RNG.normal(size=(9, 2))):                                      # interleaved
        a, b, c = ta.vmap(f)(X)
        ra, rb, rc = (np.stack(col) for col in zip(*(f(x) for x in X)))
        np.testing.assert_array_equal(a, ra)
        np.testing.assert_array_equal(b, rb)
        np.testing.assert_array_equal(c, rc)
        assert (a.dtype, b.dtype, c.dtype) == (ra.dtype, rb.dtype, rc.dtype)
        assert a.flags.owndata and a.flags.writeable
        chunked = ta.vmap(f, chunk_size=2)(X)
        for got, want in zip(chunked, (ra, rb, rc)):
            np.testing.assert_array_equal(got, want)


def test_split_groups_with_different_lane_shapes_are_refused():
    def f(x):
        return x[:1] if x[0] > 0 else x
    with pytest.raises(ValueError, match="same shape"):
        ta.vmap(f)(np.array([[1.0, 2.0], [-1.0, 2.0]]))


def test_split_per_example_gradients_equal_the_loop():
    p = {"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    X = RNG.normal(size=(10, 3))

    def loss(p, x):
        h = tnp.tanh(tnp.dot(x, p["w"]) + p["b"])
        return tnp.sum(h ** 2) if x[0] > 0 else 3.0 * tnp.sum(h)
    got = ta.vmap(ta.grad(loss), in_axes=(None, 0))(p, X)
    for i in range(len(X)):
        want = ta.grad(loss)(p, X[i])
        np.testing.assert_allclose(got["w"][i], want["w"], rtol=1e-15, atol=1e-15)
        np.testing.assert_allclose(got["b"][i], want["b"], rtol=1e-15, atol=1e-15)


def test_nested_vmap_with_a_branch():
    X = RNG.normal(size=(3, 4, 2))
    out = ta.vmap(ta.vmap(branchy))(X)
    np.testing.assert_array_equal(out, _loop(lambda x: _loop(branchy, x), X))


def test_reading_a_lane_value_reruns_lane_by_lane():
    X = RNG.normal(size=(4, 3))
    for f in (lambda x: x * float(x[0]),
              lambda x: x[int(x[0] > 0)],
              lambda x: x * _core.concrete(x)[1]):
        ta.vmap_stats(reset=True)
        np.testing.assert_array_equal(ta.vmap(f)(X), _loop(f, X))
        assert ta.vmap_stats()["per_lane_runs"] == 1


def test_user_except_exception_does_not_swallow_the_signals():
    def f(x):
        try:
            return x * 2.0 if x > 0 else -x
        except Exception:                    # must not catch vmap's signals
            raise AssertionError("caught vmap's signal")
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(ta.vmap(f)(x), [2.0, 2.0, 6.0])
    assert issubclass(BatchSplit, BaseException) and not issubclass(BatchSplit, Exception)
    assert not issubclass(BatchConcreteRead, Exception)


def test_batched_box_reports_one_lane():
    seen = {}

    def f(x):
        seen["shape"], seen["ndim"], seen["size"] = x.shape, x.ndim, x.size
        seen["len"], seen["dtype"] = len(x), x.dtype
        seen["is_box"] = isinstance(x, _core.Box)
        return x
    ta.vmap(f, in_axes=1)(np.zeros((2, 5, 3), np.float32))
    assert seen == {"shape": (2, 3), "ndim": 2, "size": 6, "len": 2,
                    "dtype": np.float32, "is_box": True}


def test_comparisons_are_batched_booleans():
    x = np.array([1.0, -1.0, 2.0])
    out = ta.vmap(lambda v: tnp.where(v > 0, v, 0.0) + (v == 2.0))(x)
    np.testing.assert_array_equal(out, [1.0, 0.0, 3.0])
    np.testing.assert_array_equal(ta.vmap(lambda v: np.isnan(v) | (v < 0))(x),
                                  [False, True, False])


def test_a_primitive_without_a_rule_warns_once_and_strict_refuses(monkeypatch):
    p = Primitive("vmap_test_identity", lambda x: x * 1.0, saves=())
    p.defvjp(lambda g, ans, x: g)
    f = lambda x: _core.bind(p, x) * 2.0                 # noqa: E731
    x = RNG.normal(size=(3, 2))
    batching.reset_stats()
    with pytest.warns(UserWarning, match="vmap_test_identity"):
        out = ta.vmap(f)(x)
    np.testing.assert_array_equal(out, x * 2.0)
    assert ta.vmap_stats()["per_lane_calls"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # once per primitive
        ta.vmap(f)(x)
    monkeypatch.setenv("TAPEAD_STRICT_VMAP", "1")
    with pytest.raises(VmapFallbackError, match="vmap_test_identity.*defvmap"):
        ta.vmap(f)(x)
    with pytest.raises(VmapFallbackError, match="once per lane"):
        ta.vmap(lambda v: v * float(v[0]))(x)


def test_grad_of_vmap_records_batched_nodes_on_the_outer_tape():
    """The rules bind tapead primitives on the tape's tracers: one node per
    operation for all lanes, not one per lane."""
    W = RNG.normal(size=(4, 3))
    X = RNG.normal(size=(50, 3))

    def loss(W, X):
        return tnp.sum(ta.vmap(lambda x: tnp.tanh(W @ x), in_axes=0)(X) ** 2)
    tape = Program.record(lambda W: loss(W, X), (W,), {}, 0, "test").tape
    assert tape.n_nodes < 20
    ref = ta.grad(lambda W: tnp.sum(tnp.tanh(X @ W.T) ** 2))(W)
    np.testing.assert_allclose(ta.grad(loss)(W, X), ref, rtol=1e-13)


def test_a_branch_on_a_differentiated_argument_splits_inside_grad_hessian_and_jvp():
    # the comparison is of a tape's (or a forward trace's) value over the
    # stacked lanes: it splits the batch like a plain one, no per-lane rerun
    def f(x):
        if x[0] > 0:
            return tnp.sum(tnp.sin(x) ** 2)
        s, k = 0.0, 0
        while s < 2.0 and k < 10:           # a trip count per lane
            s = s + tnp.sum(x * x) + 0.5
            k += 1
        return s * tnp.exp(x[1])
    xs = np.random.default_rng(1).normal(size=(9, 3))
    cases = {
        "grad": (ta.grad(f), lambda x: ta.grad(f)(x)),
        "hessian": (ta.hessian(f), lambda x: ta.hessian(f)(x)),
        "jvp": (lambda x: ta.jvp(f, (x,), (np.ones(3),))[1],
                lambda x: ta.jvp(f, (x,), (np.ones(3),))[1]),
        "untagged grad": (lambda x: ta.grad(f)(x), lambda x: ta.grad(f)(x)),
    }
    for name, (fn, one) in cases.items():
        ta.vmap_stats(reset=True)
        out = ta.vmap(fn)(xs)
        stats = ta.vmap_stats()
        assert stats["splits"] >= 1 and stats["per_lane_runs"] == 0, (name, stats)
        np.testing.assert_array_equal(out, np.stack([one(x) for x in xs]), err_msg=name)


def test_c_paths_of_lane_comparisons_truth_values_and_basic_indices():
    """x[0] > 0 and bool() on stacked lanes run in C: the same lanes, the same
    splits, a redefined getitem vmap rule still used."""
    from tapead._prims.indexing import getitem_p
    X = RNG.normal(size=(6, 4))
    trace = _core.BatchTrace(6, batching.process)
    try:
        b = trace.box(X, 0)
        for idx in (0, -1, slice(1, 3), (slice(None, None, -1),), (2,)):
            got = b[idx]
            assert type(got) is _core.Batched
            np.testing.assert_array_equal(batching.to_front(got.val, got.bdim),
                                          np.stack([X[i][idx] for i in range(6)]))
        for code, op in enumerate((np.less, np.less_equal, np.greater, np.greater_equal,
                                   np.equal, np.not_equal)):
            for c in (_core.compare_values(b[1], 0.0, code),
                      _core.compare_values(0.5, b[1], code)):
                assert type(c) is _core.Batched
            np.testing.assert_array_equal(
                _core.compare_values(b[1], 0.0, code).val, op(X[:, 1], 0.0))
            np.testing.assert_array_equal(
                _core.compare_values(0.5, b[1], code).val, op(0.5, X[:, 1]))
        strided = trace.box(np.array([True, False] * 6)[::2], 0)   # every lane True
        assert bool(strided) is True
        assert bool(trace.box(np.zeros(6, dtype=bool), 0)) is False
        with pytest.raises(BatchSplit) as e:
            bool(trace.box(np.array([True, True, False, True, np.nan > 0, True]), 0))
        np.testing.assert_array_equal(e.value.lanes, [True, True, False, True, False, True])
        calls = []
        rule = getitem_p.vmap_rule
        try:
            getitem_p.defvmap(lambda *a, **k: calls.append(1) or rule(*a, **k))
            b[0]
        finally:
            getitem_p.defvmap(rule)
        assert calls == [1]
    finally:
        trace.active = False


@pytest.mark.parametrize("out_axes", [0, 1, 2, -1])
def test_split_and_chunked_outputs_at_any_int_out_axes(out_axes):
    X = RNG.normal(size=(7, 3))

    def f(x):
        if x[0] > 0:
            return tnp.sin(x)[:, None] * np.ones(2)
        return tnp.cos(x)[:, None] * np.ones(2)
    want = np.moveaxis(np.stack([f(x) for x in X]), 0, out_axes)
    np.testing.assert_array_equal(ta.vmap(f, out_axes=out_axes)(X), want)
    np.testing.assert_array_equal(ta.vmap(f, out_axes=out_axes, chunk_size=3)(X), want)
