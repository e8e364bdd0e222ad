"""scan / fori_loop / checkpoint: checkpointed gradients equal stored ones."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._core import Scatter
import tapead.scalar_scan  # noqa: F401  (its primitive is counted by the growth test)
from tapead.checkpointing import optimal_forward_steps


def step(c, x):
    y, p = c
    y = y + 0.01 * tnp.sin(p * y) + 0.001 * x
    return (y, p), y * y


XS = np.linspace(0.0, 1.0, 40)


def loss(y0, p, ck, xs=XS):
    (y, _), ys = ta.scan(step, (y0, p), xs, checkpoints=ck)
    return y * 2.0 + tnp.sum(ys)


@pytest.mark.parametrize("ck", [1, 2, 5, 40, 100])
def test_checkpointed_scan_gradient_equals_stored(ck):
    ref = ta.grad(loss, argnums=(0, 1))(0.3, 1.7, None)
    got = ta.grad(loss, argnums=(0, 1))(0.3, 1.7, ck)
    assert got == ref                     # same operations, same order: bitwise
    gx_ref = ta.grad(lambda xs: loss(0.3, 1.7, None, xs))(XS)
    gx = ta.grad(lambda xs: loss(0.3, 1.7, ck, xs))(XS)
    np.testing.assert_array_equal(gx, gx_ref)


def test_checkpointed_scan_values_forward_mode_and_second_order():
    assert loss(0.3, 1.7, 3) == loss(0.3, 1.7, None)
    t_ref = ta.jvp(lambda a, b: loss(a, b, None), (0.3, 1.7), (1.0, -0.5))
    t_ck = ta.jvp(lambda a, b: loss(a, b, 3), (0.3, 1.7), (1.0, -0.5))
    assert t_ck[1] == pytest.approx(t_ref[1], rel=1e-14)
    H = ta.hessian(lambda q: loss(q[0], q[1], 3))(np.array([0.3, 1.7]))
    H_ref = ta.hessian(lambda q: loss(q[0], q[1], None))(np.array([0.3, 1.7]))
    np.testing.assert_allclose(H, H_ref, rtol=1e-13)
    ta.check_grads(lambda a, b: loss(a, b, 3), (0.3, 1.7), order=2)


@pytest.mark.parametrize("L, s", [(10, 1), (30, 3), (25, 25)])
def test_scan_reverse_uses_revolve_step_counts(L, s):
    calls = []

    def body(c, x):
        calls.append(1)
        # (the 1-element array keeps this body off the scalar C loop, tested below)
        return c * 1.01 + tnp.sin(c) * x + tnp.sum(np.zeros(1) * c), None
    xs = np.linspace(0, 1, L)
    ta.grad(lambda c: ta.scan(body, c, xs, checkpoints=s)[0])(0.4)
    # forward run L + revolve's recomputation t(L, s) + 1 + one recording of the
    # body, whose tape is replayed (in C) for each of the L reversals, + the
    # recording that found the body unfit for the scalar C loop
    assert len(calls) == L + optimal_forward_steps(L, s) + 1 + 1 + 1
    # fori_loop passes the step index as a Python int, which a recording would
    # freeze: each reversal runs the body again
    calls.clear()
    ta.grad(lambda c: ta.fori_loop(0, L, lambda i, v: body(v, 0.1 * i)[0], c,
                                   checkpoints=s))(0.4)
    assert len(calls) == L + optimal_forward_steps(L, s) + 1 + L


def test_checkpointed_scan_replay_falls_back_when_a_branch_flips():
    def body(c, x):
        c = c * 1.05 + x if c < 1.0 else c * 0.9 - tnp.sin(x)   # flips along the run
        return c, c * c
    xs = np.linspace(0.0, 0.3, 60)

    def f(c0, ck):
        c, ys = ta.scan(body, c0, xs, checkpoints=ck)
        return c + tnp.sum(ys)
    for ck in (1, 3, 7):
        assert ta.grad(f)(0.2, ck) == ta.grad(f)(0.2, None)
        np.testing.assert_array_equal(
            ta.grad(lambda x: ta.scan(body, 0.2, x, checkpoints=ck)[1].sum())(xs),
            ta.grad(lambda x: ta.scan(body, 0.2, x)[1].sum())(xs))


def test_array_carry_and_reverse_scan():
    W = np.array([[0.9, 0.1], [-0.2, 0.8]])

    def cell(h, x):
        h = tnp.tanh(W @ h + x)
        return h, tnp.sum(h)
    xs = np.random.default_rng(0).standard_normal((12, 2))

    def f(h0, ck, reverse=False):
        h, ys = ta.scan(cell, h0, xs, checkpoints=ck, reverse=reverse)
        return tnp.sum(h * h) + tnp.sum(ys)
    h0 = np.array([0.1, -0.3])
    for rev in (False, True):
        np.testing.assert_array_equal(ta.grad(lambda h: f(h, 3, rev))(h0),
                                      ta.grad(lambda h: f(h, None, rev))(h0))


def test_fori_loop_matches_python_loop():
    def body(i, v):
        return v * 1.01 + tnp.sin(v) * i * 1e-3
    g_plain = ta.grad(lambda v: ta.fori_loop(0, 100, body, v))(0.5)
    g_ck = ta.grad(lambda v: ta.fori_loop(0, 100, body, v, checkpoints=4))(0.5)
    assert g_ck == g_plain
    assert ta.fori_loop(0, 3, lambda i, v: v + i, 10) == 13


def test_checkpoint_recomputes_and_matches():
    calls = []

    def block(a, b):
        calls.append(1)
        return tnp.sin(a) * b, a + b
    blk = ta.checkpoint(block)

    def h(a, b):
        u, v = blk(a, b)
        return tnp.sum(u * v)
    A, B = np.array([0.1, 0.2]), np.array([1.0, 2.0])
    got = ta.grad(h, (0, 1))(A, B)
    ref = ta.grad(lambda a, b: tnp.sum(tnp.sin(a) * b * (a + b)), (0, 1))(A, B)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-15)
    assert len(calls) == 2            # the forward run and one recomputation
    ta.check_grads(h, (A, B), order=2)


def test_loop_errors():
    with pytest.raises(ValueError, match="positive number"):
        ta.grad(lambda c: ta.scan(step, (c, 1.0), XS, checkpoints=0)[0][0])(0.3)
    with pytest.raises(ValueError, match="same leading axis"):
        ta.scan(step, (0.3, 1.0), {"a": np.ones(3), "b": np.ones(4)})
    with pytest.raises(ValueError, match="give xs or length"):
        ta.scan(step, (0.3, 1.0))

    for ck in (None, 3):
        with pytest.raises(TypeError, match="carry structured as"):
            ta.grad(lambda c: ta.scan(lambda cc, x: (cc[0] + x, None), (c, 1.0), XS,
                                      checkpoints=ck)[0])(0.3)
        with pytest.raises(TypeError, match="must return a pair"):
            ta.grad(lambda c: ta.scan(lambda cc, x: cc + x, c, XS, checkpoints=ck))(0.3)

    # a closure is converted (tests/test_closures.py); a traced value reached
    # through an object inside a list is not found, and refused
    class Holder:
        def __init__(self, p):
            self.p = p

    def hidden(p):
        held = [Holder(p)]
        return ta.scan(lambda c, x: (c * held[0].p + x, None), p * 0.5, XS,
                       checkpoints=2)[0]
    with pytest.raises(ValueError, match="through the carry"):
        ta.grad(hidden)(1.1)
    # a loop whose carry does not depend on the traced value simply runs eagerly
    g = ta.grad(lambda p: ta.scan(lambda c, x: (c * p + x, None), 0.5, XS,
                                  checkpoints=2)[0])(1.1)
    assert np.isfinite(g)


# ---------------------------------------------------------------------------
# growth: a T-step scan's derivatives cost O(T) work, not O(T**2)
# ---------------------------------------------------------------------------

def _all_primitives():
    import sys
    from tapead._prims.base import Primitive
    seen = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("tapead") and mod is not None:
            for v in vars(mod).values():
                if isinstance(v, Primitive):
                    seen[id(v)] = v
    return list(seen.values())


def _size(x):
    if isinstance(x, np.ndarray):
        return x.size
    return np.size(x.g) if isinstance(x, Scatter) else 1


def _rule_work(monkeypatch, run):
    """Work done by every primitive's implementation and VJP rules while
    ``run()`` executes: one per argument passed (an n-long argument list
    costs n) plus the elements of each result (a dense cotangent per slice
    costs the whole array)."""
    total = [0]

    def counted(fn):
        def wrapper(*args, **params):
            out = fn(*args, **params)
            total[0] += len(args) + _size(out)
            return out
        return wrapper
    with pytest.MonkeyPatch.context() as mp:
        for p in _all_primitives():
            mp.setattr(p, "impl", counted(p.impl))
            mp.setattr(p, "vjps", [None if r is None else counted(r) for r in p.vjps])
            if p.vjp_any is not None:
                mp.setattr(p, "vjp_any", counted(p.vjp_any))
        run()
    return total[0]


def _rollout_loss(us):
    def step(c, u):
        p, v = c
        v2 = v + 0.01 * u
        return (p + 0.01 * v2, v2), u * u
    (p, v), costs = ta.scan(step, (0.0, 0.0), us)
    return (p - 1.0) ** 2 + v ** 2 + 1e-3 * tnp.sum(costs)


@pytest.mark.parametrize("mode", ["grad", "grad-recorded", "jvp", "hvp"])
def test_scan_derivative_work_grows_linearly(monkeypatch, mode):
    if mode == "grad-recorded":          # every step on the tape, not the C loop
        _eager(monkeypatch)
        mode = "grad"

    def work(T):
        us = np.linspace(0.0, 1.0, T)
        run = {"grad": lambda: ta.grad(_rollout_loss)(us),
               "jvp": lambda: ta.jvp(_rollout_loss, (us,), (np.ones(T),)),
               "hvp": lambda: ta.hvp(_rollout_loss, (us,), (np.ones(T),))}[mode]
        return _rule_work(monkeypatch, run)
    small, large = work(200), work(800)
    # 4x the steps: linear work grows 4x; the quadratic stack/concatenate
    # rules (an n-long argument list per piece) grew 16x
    assert large <= 4.5 * small, (small, large)


def test_scan_gradient_matches_hand_adjoint():
    us = np.linspace(-1.0, 1.0, 300)
    g = ta.grad(_rollout_loss)(us)
    # hand-written adjoint of the double integrator
    p = v = 0.0
    for u in us:
        v = v + 0.01 * u
        p = p + 0.01 * v
    ap, av = 2.0 * (p - 1.0), 2.0 * v
    ref = np.empty_like(us)
    for i in range(len(us) - 1, -1, -1):
        av = av + 0.01 * ap          # p2 = p + 0.01 * v2
        ref[i] = 0.01 * av + 2e-3 * us[i]
    np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------
# scalar scans run in C (tapead.scalar_scan)
# ---------------------------------------------------------------------------

def _fast_hits(monkeypatch):
    import tapead.loops as ss                   # where ta.scan calls tapead.scalar_scan
    hits, orig = [], ss.scan_scalar

    def spy(*args, **kw):
        out = orig(*args, **kw)
        hits.append(out is not None)
        return out
    monkeypatch.setattr(ss, "scan_scalar", spy)
    return hits


def _eager(monkeypatch):
    import tapead.loops as ss
    monkeypatch.setattr(ss, "scan_scalar", lambda *a, **k: None)


def _scalar_cases():
    def rollout(c, u):
        p, v = c
        v = v + 0.01 * u
        return (p + 0.01 * v, v), u * u

    def two_xs(c, x):
        a, b = x["a"], x["b"]
        return c * tnp.cos(a) + b, {"y": c * b, "z": tnp.exp(-c * c)}

    def no_y(c, x):
        return (c[0] * 0.99 + x, tnp.sin(c[1]) + x * c[0]), None
    xs1 = np.linspace(-1.0, 1.0, 37)
    return [(rollout, (0.1, -0.2), xs1), (two_xs, 0.3, {"a": xs1, "b": xs1[::-1] * 0.5}),
            (no_y, (0.4, 0.2), xs1)]


def _scalar_loss(body, init, xs, reverse):
    carry, ys = ta.scan(body, init, xs, reverse=reverse)
    out = sum(tnp.sum(c) * (k + 1) for k, c in enumerate(ta.tree_flatten(carry)[0]))
    if ys is not None:
        out = out + sum(tnp.sum(y * y) for y in ta.tree_flatten(ys)[0])
    return out


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("reverse", [False, True])
def test_scalar_scan_in_c_equals_the_recorded_loop(monkeypatch, case, reverse):
    body, init, xs = _scalar_cases()[case]
    f = lambda i, x: _scalar_loss(body, i, x, reverse)        # noqa: E731
    hits = _fast_hits(monkeypatch)
    val = f(init, xs)
    g = ta.grad(f, (0, 1))(init, xs)
    assert hits[-1] is True
    _eager(monkeypatch)
    assert val == f(init, xs)
    g_ref = ta.grad(f, (0, 1))(init, xs)
    for a, b in zip(ta.tree_flatten(g)[0], ta.tree_flatten(g_ref)[0]):
        np.testing.assert_array_equal(a, b)              # same operations: bitwise
    monkeypatch.undo()
    ta.check_grads(f, (init, xs), order=2, modes=("fwd", "rev"))


def test_scalar_scan_pullback_with_a_traced_cotangent(monkeypatch):
    body, init, xs = _scalar_cases()[0]

    def h(w):
        _, pull = ta.vjp(lambda u: ta.scan(body, init, u)[1], xs)
        return tnp.sum(pull(w * xs)[0] ** 2)
    hits = _fast_hits(monkeypatch)
    got = ta.grad(h)(0.7)
    assert True in hits
    _eager(monkeypatch)
    assert got == pytest.approx(ta.grad(h)(0.7), rel=1e-14)


def test_scalar_scan_falls_back_where_a_recording_would_be_wrong(monkeypatch):
    xs = np.linspace(0.0, 1.0, 20)
    hits = _fast_hits(monkeypatch)
    cases = {
        # a Python branch on a traced value (a guard)
        "branch": lambda p: ta.scan(lambda c, x: (c * 2.0 if c < 0.5 else c - x, None),
                                    p, xs)[0],
        # a closure over the value being differentiated
        "closure": lambda p: ta.scan(lambda c, x: (c * p + x, None), 0.1, xs)[0],
        # an integer carry, a 2-d xs, an array operation in the body
        "int": lambda p: ta.scan(lambda c, x: ((c[0] + x * c[0], c[1] + 1), None),
                                 (p, 0), xs)[0][0],
        "2d": lambda p: ta.scan(lambda c, x: (c + tnp.sum(x) * c, None), p,
                                np.ones((20, 2)))[0],
        "array-op": lambda p: ta.scan(lambda c, x: (tnp.sum(np.arange(40.0) * c) * x, None),
                                      p, xs)[0],
    }
    got = {}
    for name, f in cases.items():
        hits.clear()
        got[name] = ta.grad(f)(0.3)
        assert hits == [False], name
    _eager(monkeypatch)
    for name, f in cases.items():
        assert got[name] == ta.grad(f)(0.3), name


def test_scalar_scan_takes_small_vectors_element_by_element(monkeypatch):
    """Small arrays in the body compute one scalar node per element, so such a
    body runs in C too, with the step-by-step gradient."""
    xs = np.linspace(0.0, 1.0, 20)
    hits = _fast_hits(monkeypatch)
    f = lambda p: ta.scan(lambda c, x: (tnp.sum(tnp.stack([c, x]) * c), None), p, xs)[0]  # noqa: E731
    got = ta.grad(f)(0.3)
    assert hits == [True]
    _eager(monkeypatch)
    assert got == pytest.approx(ta.grad(f)(0.3), rel=1e-14)


def test_scalar_scan_closure_over_an_outer_transform(monkeypatch):
    xs = np.linspace(0.0, 1.0, 15)

    def inner(x0, p):
        return ta.scan(lambda c, x: (c * p + tnp.sin(x * c), c * c), x0, xs)[1].sum()
    # d/dp of d/dx0: p is traced by the outer grad only
    got = ta.grad(lambda p: ta.grad(inner)(0.3, p))(0.9)
    _eager(monkeypatch)
    assert got == pytest.approx(ta.grad(lambda p: ta.grad(inner)(0.3, p))(0.9), rel=1e-14)
    for ck in (2, 5):
        g = ta.grad(lambda p: ta.grad(lambda x0: ta.scan(
            lambda c, x: ((c[0] * c[1] + tnp.sin(x * c[0]), c[1]), None), (x0, p), xs,
            checkpoints=ck)[0][0])(0.3))(0.9)
        ref = ta.grad(lambda p: ta.grad(lambda x0: ta.scan(
            lambda c, x: ((c[0] * c[1] + tnp.sin(x * c[0]), c[1]), None), (x0, p),
            xs)[0][0])(0.3))(0.9)
        assert g == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("L, s", [(1, 1), (10, 1), (30, 3), (57, 4), (100, 100), (250, 7)])
def test_scalar_loop_checkpointed_reverse_is_revolve_in_c(L, s):
    from tapead import _core
    body = _core.Tape()
    c, u, x = body.input_many([0.3, -0.1, 0.5])
    c2 = c * 1.01 + tnp.sin(c * u) * x
    u2 = u - 0.1 * x * c
    y = c2 * u2
    body.active = False
    loop = _core.ScalarLoop(body, [c.idx, u.idx], [x.idx], [c2.idx, u2.idx], [y.idx])
    xs = np.linspace(0.0, 1.0, L)[:, None]
    carry0 = np.array([0.3, -0.1])
    rng = np.random.default_rng(L)
    g_c, g_y = rng.standard_normal(2), rng.standard_normal((L, 1))
    carry, ys = loop.forward(carry0, xs)
    ref = loop.reverse(g_c, g_y)
    carry_v, ys_v = loop.forward(carry0, xs, keep=False)
    np.testing.assert_array_equal(carry_v, carry)
    np.testing.assert_array_equal(ys_v, ys)
    gc, gx, advances = loop.reverse_checkpointed(carry0, xs, g_c, g_y, s)
    np.testing.assert_array_equal(gc, ref[0])           # same operations: bitwise
    np.testing.assert_array_equal(gx, ref[1])
    assert advances == optimal_forward_steps(L, s)


def test_checkpointed_scalar_scan_in_c_equals_the_recorded_loop(monkeypatch):
    body, init, xs = _scalar_cases()[0]
    hits = _fast_hits(monkeypatch)
    for ck in (1, 3, 10):
        for rev in (False, True):
            f = lambda u: _scalar_loss_ck(body, init, u, rev, ck)      # noqa: E731
            g = ta.grad(f)(xs)
            assert hits[-1] is True
            ref = ta.grad(lambda u: _scalar_loss(body, init, u, rev))(xs)
            np.testing.assert_array_equal(g, ref)


def _scalar_loss_ck(body, init, xs, reverse, ck):
    carry, ys = ta.scan(body, init, xs, reverse=reverse, checkpoints=ck)
    out = sum(tnp.sum(c) * (k + 1) for k, c in enumerate(ta.tree_flatten(carry)[0]))
    return out + sum(tnp.sum(y * y) for y in ta.tree_flatten(ys)[0])
