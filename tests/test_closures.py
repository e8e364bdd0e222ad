"""Closures in checkpointed loops: a body that closes over traced values gives
what the same loop gives with those values passed through the carry (values,
gradients, forward tangents, second derivatives), and the checkpointing still
bounds the stored carries.

The programs are random (hypothesis): a body is a short list of operations
mixing the carry ``c``, the step input ``x`` and the closed-over parameters
``a`` and ``b``.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead as ta
import tapead.checkpointing
import tapead.closures
import tapead.control
import tapead.loops
import tapead.online
import tapead.numpy as tnp

#: one operation of a body: (c, x, a, b) -> new c (shape-preserving, smooth)
OPS = [
    lambda c, x, a, b: c * a + x,
    lambda c, x, a, b: np.sin(c + a) * b,
    lambda c, x, a, b: np.tanh(c) * a + b * x,
    lambda c, x, a, b: c + 0.1 * a * b * np.cos(c * x),
    lambda c, x, a, b: c / (1.5 + a * a) + b,
    lambda c, x, a, b: c * np.sum(a * b) * 0.3 + x * 0.1,
]


def _program(ops):
    def step(c, x, a, b):
        for k in ops:
            c = OPS[k](c, x, a, b)
        return 0.5 * c
    return step


@st.composite
def programs(draw):
    ops = draw(st.lists(st.integers(0, len(OPS) - 1), min_size=1, max_size=4))
    length = draw(st.integers(1, 9))
    s = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2 ** 16))
    return _program(ops), length, s, np.random.default_rng(seed)


def _close(x, y, tol=1e-13):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape
    assert np.max(np.abs(x - y), initial=0.0) <= tol * max(1.0, np.max(np.abs(y), initial=0.0))


def _scan_pair(step, length, s):
    def closed(c0, a, b, xs):
        carry, ys = ta.scan(lambda c, x: (step(c, x, a, b), np.sum(c * c)), c0, xs,
                            checkpoints=s)
        return np.sum(carry ** 2) + np.sum(ys)

    def carried(c0, a, b, xs):
        (carry, _, _), ys = ta.scan(
            lambda c, x: ((step(c[0], x, c[1], c[2]), c[1], c[2]), np.sum(c[0] * c[0])),
            (c0, a, b), xs, checkpoints=s)
        return np.sum(carry ** 2) + np.sum(ys)
    return closed, carried


@settings(max_examples=30, deadline=None)
@given(programs())
def test_scan_closure_equals_carry(problem):
    step, length, s, rng = problem
    c0, a, b = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    xs = rng.uniform(-1, 1, (length, 3))
    closed, carried = _scan_pair(step, length, s)
    args, nums = (c0, a, b, xs), (0, 1, 2, 3)
    _close(closed(*args), carried(*args))
    for g1, g2 in zip(ta.grad(closed, nums)(*args), ta.grad(carried, nums)(*args)):
        _close(g1, g2)
    t = tuple(rng.uniform(-1, 1, np.shape(x)) for x in args)
    _close(ta.jvp(closed, args, t)[1], ta.jvp(carried, args, t)[1])
    # second order: the Hessian-vector product in the closed-over parameter
    hv1 = ta.hvp(lambda a: closed(c0, a, b, xs), (a,), (t[1],))
    hv2 = ta.hvp(lambda a: carried(c0, a, b, xs), (a,), (t[1],))
    _close(hv1, hv2, 1e-12)


@settings(max_examples=30, deadline=None)
@given(programs())
def test_while_loop_closure_equals_carry(problem):
    step, length, s, rng = problem
    c0, a, b = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
    limit = float(length)

    def closed(c0, a, b):
        # cond_fun closes over a traced value too (read by its value)
        return np.sum(ta.while_loop(lambda v: v[1] < limit + 0.0 * np.sum(a),
                                    lambda v: (step(v[0], 0.3, a, b), v[1] + 1.0),
                                    (c0, 0.0), checkpoints=s)[0] ** 2)

    def carried(c0, a, b):
        return np.sum(ta.while_loop(lambda v: v[1] < limit,
                                    lambda v: (step(v[0], 0.3, v[2], v[3]), v[1] + 1.0,
                                               v[2], v[3]),
                                    (c0, 0.0, a, b), checkpoints=s)[0] ** 2)
    args = (c0, a, b)
    _close(closed(*args), carried(*args))
    for g1, g2 in zip(ta.grad(closed, (0, 1, 2))(*args), ta.grad(carried, (0, 1, 2))(*args)):
        _close(g1, g2)
    t = tuple(rng.uniform(-1, 1, 2) for _ in args)
    _close(ta.jvp(closed, args, t)[1], ta.jvp(carried, args, t)[1])


@settings(max_examples=30, deadline=None)
@given(programs())
def test_checkpoint_and_fori_closure_equal_arguments(problem):
    step, length, s, rng = problem
    c0, a, b = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)

    def closed(c0, a, b):
        block = ta.checkpoint(lambda c: step(c, 0.2, a, b))
        c = ta.fori_loop(0, length, lambda i, c: step(c, 0.1 * i, a, b), block(c0),
                         checkpoints=s)
        return np.sum(c ** 2)

    def explicit(c0, a, b):
        block = ta.checkpoint(lambda c, a, b: step(c, 0.2, a, b))
        c, _, _ = ta.fori_loop(0, length, lambda i, v: (step(v[0], 0.1 * i, v[1], v[2]),
                                                        v[1], v[2]),
                               (block(c0, a, b), a, b), checkpoints=s)
        return np.sum(c ** 2)
    args = (c0, a, b)
    _close(closed(*args), explicit(*args))
    for g1, g2 in zip(ta.grad(closed, (0, 1, 2))(*args), ta.grad(explicit, (0, 1, 2))(*args)):
        _close(g1, g2)
    t = tuple(rng.uniform(-1, 1, 3) for _ in args)
    _close(ta.jvp(closed, args, t)[1], ta.jvp(explicit, args, t)[1])


def test_nested_closures_and_closures_over_objects():
    rng = np.random.default_rng(1)
    xs = rng.uniform(-1, 1, (6, 2))
    a0, c0 = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)

    class Model:                         # traced parameters as attributes
        def __init__(self, w):
            self.w = w

        def __call__(self, c, x):
            return np.tanh(c * self.w + x)

    def inner_fn(a):
        def g(c):                        # a function held in the body's closure
            return np.sin(c * a)
        return g

    def closed(a, c0):
        g = inner_fn(a)
        model = Model(a * 2.0)
        return np.sum(ta.scan(lambda c, x: (g(model(c, x)), None), c0, xs,
                              checkpoints=2)[0])

    def carried(a, c0):
        (c, _), _ = ta.scan(lambda v, x: ((np.sin(np.tanh(v[0] * (v[1] * 2.0) + x) * v[1]),
                                           v[1]), None), (c0, a), xs, checkpoints=2)
        return np.sum(c)
    for g1, g2 in zip(ta.grad(closed, (0, 1))(a0, c0), ta.grad(carried, (0, 1))(a0, c0)):
        _close(g1, g2)
    ta.check_grads(closed, (a0, c0), order=2)


def test_closures_over_values_of_an_outer_transform():
    xs = np.linspace(0.1, 0.9, 5)

    def loop(p, q):                      # closes over p (inner) and q (outer)
        return ta.scan(lambda c, x: (np.sin(c * p) + q * x, None), 0.3, xs,
                       checkpoints=2)[0]

    def loop_carried(p, q):
        return ta.scan(lambda c, x: ((np.sin(c[0] * c[1]) + c[2] * x, c[1], c[2]), None),
                       (0.3, p, q), xs, checkpoints=2)[0][0]

    for fn in (loop, loop_carried):
        pass
    g_closed = ta.grad(lambda q: ta.grad(lambda p: loop(p, q))(0.8))(1.3)
    g_carried = ta.grad(lambda q: ta.grad(lambda p: loop_carried(p, q))(0.8))(1.3)
    assert g_closed == pytest.approx(g_carried, rel=1e-13)
    h1 = ta.hessian(lambda v: loop(v[0], v[1]))(np.array([0.8, 1.3]))
    h2 = ta.hessian(lambda v: loop_carried(v[0], v[1]))(np.array([0.8, 1.3]))
    _close(h1, h2)
    ta.check_grads(lambda p, q: loop(p, q), (0.8, 1.3), order=2)


def test_checkpointing_still_bounds_the_stored_carries(monkeypatch):
    """With a closure the stored snapshots stay within the budget, whatever the
    length, and the loop is one node of the caller's tape."""
    seen = []

    class Counting(tapead.checkpointing.CheckpointedChain):
        def reverse(self, *args, **kw):
            out = super().reverse(*args, **kw)
            seen.append((self.L, self.stats["max_snapshots"]))
            return out
    monkeypatch.setattr(tapead.loops, "CheckpointedChain", Counting)
    a = np.array([0.4, -0.3, 0.2])

    def f(a, n, s):
        xs = np.linspace(-1, 1, n * 3).reshape(n, 3)
        return np.sum(ta.scan(lambda c, x: (np.sin(c * a) + x, None), np.ones(3), xs,
                              checkpoints=s)[0])
    nodes = set()
    for n in (5, 40, 200):
        seen.clear()
        ta.grad(f)(a, n, 3)
        assert len(seen) == 1 and seen[0][0] == n and seen[0][1] <= 3
        nodes.add(ta.record(lambda a: f(a, n, 3), a).tape.n_nodes)
    assert len(nodes) == 1                 # one loop node, not n steps

    online = []

    class CountingOnline(tapead.online.OnlineChain):
        def reverse(self, *args, **kw):
            out = super().reverse(*args, **kw)
            online.append(self.stats["max_snapshots"])
            return out
    monkeypatch.setattr(tapead.control, "OnlineChain", CountingOnline)
    for n in (5, 60, 300):
        online.clear()
        ta.grad(lambda a: np.sum(ta.while_loop(
            lambda v: v[1] < n, lambda v: (np.cos(v[0] * a), v[1] + 1),
            (np.ones(3), 0), checkpoints=3)[0]))(a)
        assert online and online[0] <= 3


def test_the_closure_search():
    import functools
    p = None

    def use(a):
        return a

    def probe(x):
        def f(c, d=x):                          # a default argument
            return c * d
        g = functools.partial(lambda c, y: c * y, y=x * 2.0)   # a partial's keyword
        closure = tapead.closures.find(f, g)
        assert len(closure.values) == 2
        assert closure.call(f, [10.0, 20.0], 1.0) == 10.0
        assert closure.call(g, [10.0, 20.0], 1.0) == 20.0
        assert f.__defaults__[0] is x and g.keywords["y"] is not None   # originals back
        return x * 1.0
    ta.grad(probe)(3.0)
    assert not tapead.closures.find(use) and p is None
