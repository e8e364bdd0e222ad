"""cond / switch / while_loop / checkpoint_cost: derivatives equal those of
the Python code they stand for, schedules cost what they predict."""
import math

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _revolve
from tapead.checkpointing import optimal_forward_steps
from tapead.errors import ShapeError
from tapead.online import OnlineChain, checkpoint_cost, online_forward_steps

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:             # pragma: no cover
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")


# ---------------------------------------------------------------------------
# cond / switch
# ---------------------------------------------------------------------------

def branchy(x, y):
    return ta.cond(tnp.sum(x) > y, lambda a, b: tnp.sin(a) * b, lambda a, b: a * a + b,
                   x, y)


@pytest.mark.parametrize("y", [0.1, 5.0])      # both branches taken
def test_cond_gradient_is_the_taken_branch(y):
    x = np.array([0.3, 1.1])
    taken = (lambda a, b: tnp.sin(a) * b) if x.sum() > y else (lambda a, b: a * a + b)
    got = ta.jacrev(branchy, (0, 1))(x, y)
    ref = ta.jacrev(taken, (0, 1))(x, y)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    f = lambda a, b: tnp.sum(branchy(a, b) ** 2)      # noqa: E731
    ta.check_grads(f, (x, y), order=2, modes=("fwd", "rev"))
    H = ta.hessian(lambda a: tnp.sum(branchy(a, y) ** 2))(x)
    H_ref = ta.hessian(lambda a: tnp.sum(taken(a, y) ** 2))(x)
    np.testing.assert_allclose(H, H_ref, rtol=1e-14)


def test_cond_traced_predicate_and_operand_pytrees():
    def f(p):
        out = ta.cond(p["a"] > 0.0, lambda q: {"u": q["a"] * q["b"]},
                      lambda q: {"u": q["a"] - q["b"]}, p)
        return out["u"]
    g = ta.grad(f)({"a": 2.0, "b": 3.0})
    assert (g["a"], g["b"]) == (3.0, 2.0)
    g = ta.grad(f)({"a": -2.0, "b": 3.0})
    assert (g["a"], g["b"]) == (1.0, -1.0)
    # forward mode through cond
    _, t = ta.jvp(lambda a: f({"a": a, "b": 3.0}), (2.0,), (1.0,))
    assert t == 3.0


def test_cond_runs_only_the_taken_branch_with_traced_values():
    seen = []

    def t(x):
        seen.append(("t", type(x).__name__))
        return x * 2.0

    def f(x):
        seen.append(("f", type(x).__name__))
        return x * 3.0
    assert ta.grad(lambda x: ta.cond(True, t, f, x))(1.0) == 2.0
    assert seen == [("t", "Tracer")]          # the branch not taken never runs
    seen.clear()
    assert ta.cond(False, t, f, 1.0) == 3.0
    assert seen == [("f", "float")]


@pytest.mark.parametrize("index, expect", [(-3, 0), (0, 0), (1, 1), (2, 2), (7, 2)])
def test_switch_clamps_and_differentiates_the_chosen_branch(index, expect):
    fs = [lambda x: tnp.sin(x) * x, lambda x: tnp.exp(-x * x), lambda x: x ** 3]
    x = np.array([0.2, -0.7])
    got = ta.jacfwd(lambda v: ta.switch(index, fs, v))(x)
    ref = ta.jacfwd(fs[expect])(x)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(ta.jacrev(lambda v: ta.switch(index, fs, v))(x), ref)
    ta.check_grads(lambda v: tnp.sum(ta.switch(index, fs, v)), (x,), order=2)
    # a traced index (an integer computed from traced values) is read by its value
    g = ta.grad(lambda v: ta.switch(np.int64(index), fs, v).sum())(x)
    np.testing.assert_array_equal(g, ta.grad(lambda v: fs[expect](v).sum())(x))


@needs_jax
def test_cond_and_switch_against_jax():
    x = np.array([0.4, -1.3, 2.0])
    fs = [lambda v: tnp.sin(v) * v, lambda v: tnp.tanh(v) ** 2]
    jfs = [lambda v: jnp.sin(v) * v, lambda v: jnp.tanh(v) ** 2]
    for i in (0, 1, 5):
        ours = ta.jacrev(lambda v: ta.switch(i, fs, v))(x)
        theirs = jax.jacrev(lambda v: jax.lax.switch(i, jfs, v))(x)
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-14, atol=1e-15)
    for p in (True, False):
        ours = ta.grad(lambda v: tnp.sum(ta.cond(p, fs[0], fs[1], v)))(x)
        theirs = jax.grad(lambda v: jnp.sum(jax.lax.cond(p, jfs[0], jfs[1], v)))(x)
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-14, atol=1e-15)


def test_cond_switch_errors():
    with pytest.raises(TypeError, match="true_fun must be callable"):
        ta.cond(True, 3.0, lambda x: x, 1.0)
    with pytest.raises(ShapeError, match="pred must be a scalar"):
        ta.cond(np.array([True, False]), lambda x: x, lambda x: x, 1.0)
    with pytest.raises(TypeError, match="index must be an integer"):
        ta.switch(1.0, [lambda x: x, lambda x: x], 1.0)
    with pytest.raises(TypeError, match="index must be an integer"):
        ta.switch(True, [lambda x: x, lambda x: x], 1.0)
    with pytest.raises(ShapeError, match="index must be a scalar"):
        ta.switch(np.array([0, 1]), [lambda x: x, lambda x: x], 1.0)
    with pytest.raises(TypeError, match="non-empty list"):
        ta.switch(0, [], 1.0)
    with pytest.raises(TypeError, match="non-empty list"):
        ta.switch(0, lambda x: x, 1.0)
    with pytest.raises(TypeError, match=r"branches\[1\] must be callable"):
        ta.switch(0, [lambda x: x, None], 1.0)


# ---------------------------------------------------------------------------
# while_loop
# ---------------------------------------------------------------------------

def newton_sqrt(a, x0, ck=None, max_bytes=None):
    """Newton's iteration for sqrt(a) until converged (trip count depends on a).
    A checkpointed body is recomputed from its carry alone, so ``a`` rides in it."""
    def body(c):
        x, i, a = c
        return 0.5 * (x + a / x), i + 1, a
    x, n, _ = ta.while_loop(lambda c: abs(c[0] * c[0] - c[2]) > 1e-9 * c[2], body,
                            (x0, 0, a), checkpoints=ck, max_bytes=max_bytes)
    return x, n


def rollout(p, x0, ck=None):
    """A damped oscillator run until its energy drops below a threshold."""
    def body(c):
        x, v, t, p = c
        acc = -p[0] * x - p[1] * v + 0.1 * tnp.sin(x)
        v2 = v + 0.05 * acc
        return (x + 0.05 * v2, v2, t + 0.05, p)
    x, v, t, _ = ta.while_loop(lambda c: c[0] ** 2 + c[1] ** 2 > 0.05, body,
                               (x0, 0.0, 0.0, p), checkpoints=ck)
    return x, v, t


def python_rollout(p, x0):
    x, v, t = x0, 0.0, 0.0
    while x ** 2 + v ** 2 > 0.05:
        acc = -p[0] * x - p[1] * v + 0.1 * tnp.sin(x)
        v = v + 0.05 * acc
        x = x + 0.05 * v
        t = t + 0.05
    return x, v, t


P = np.array([1.3, 0.2])


def _loss(fn):
    return lambda p, x0: (lambda c: c[0] * 3.0 + c[1] ** 2 + c[2])(fn(p, x0))


@pytest.mark.parametrize("ck", [None, 1, 2, 3, 10, 1000])
def test_while_loop_gradient_equals_python_loop(ck):
    ref = ta.grad(_loss(python_rollout), (0, 1))(P, 1.5)
    got = ta.grad(_loss(lambda p, x0: rollout(p, x0, ck)), (0, 1))(P, 1.5)
    np.testing.assert_array_equal(got[0], ref[0])     # same operations: bitwise
    assert got[1] == ref[1]
    assert rollout(P, 1.5, ck) == python_rollout(P, 1.5)


@pytest.mark.parametrize("ck", [None, 3])
def test_while_loop_finite_differences_forward_reverse_second_order(ck):
    f = lambda p, x0: _loss(lambda q, y: rollout(q, y, ck))(p, x0)      # noqa: E731
    # the trip count is locally constant here, so finite differences see the
    # derivative of the fixed-count loop
    ta.check_grads(f, (P, 1.5), order=2, modes=("fwd", "rev"))
    H = ta.hessian(lambda q: f(q[:2], q[2]))(np.array([1.3, 0.2, 1.5]))
    H_ref = ta.hessian(lambda q: _loss(python_rollout)(q[:2], q[2]))(np.array([1.3, 0.2, 1.5]))
    np.testing.assert_allclose(H, H_ref, rtol=1e-12, atol=1e-14)
    t = ta.jvp(lambda x0: f(P, x0), (1.5,), (1.0,))[1]
    t_ref = ta.jvp(lambda x0: _loss(python_rollout)(P, x0), (1.5,), (1.0,))[1]
    assert t == pytest.approx(t_ref, rel=1e-13)
    hv = ta.hvp(lambda p: f(p, 1.5), (P,), (np.array([1.0, -2.0]),))
    hv_ref = ta.hvp(lambda p: _loss(python_rollout)(p, 1.5), (P,), (np.array([1.0, -2.0]),))
    np.testing.assert_allclose(hv, hv_ref, rtol=1e-12, atol=1e-14)


def test_while_loop_int_counter_and_max_bytes():
    for kw in (dict(ck=None), dict(ck=2), dict(max_bytes=48), dict(ck=5, max_bytes=10 ** 6)):
        x, n = newton_sqrt(2.0, 1.0, **kw)
        assert isinstance(n, int) and n == 4 and x == pytest.approx(math.sqrt(2.0))
        g = ta.grad(lambda a: newton_sqrt(a, 1.0, **kw)[0])(2.0)
        # the derivative of the n iterations that ran: close to d sqrt(a)/da
        assert g == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-8)
        assert g == ta.grad(lambda a: newton_sqrt(a, 1.0)[0])(2.0)


def test_while_loop_float32_stays_float32():
    def f(x):
        return ta.while_loop(lambda v: v < 10.0, lambda v: v * np.float32(1.5), x,
                             checkpoints=2)
    x = np.float32(1.0)
    assert np.result_type(f(x)) == np.float32
    g = ta.grad(f)(x)
    assert np.result_type(g) == np.float32 and g == np.float32(1.5) ** 6


def test_while_loop_array_carry_with_a_budget_in_bytes():
    W = np.array([[0.6, -0.3], [0.2, 0.5]])

    def f(h0, **kw):
        def body(c):
            h, k = c
            return tnp.tanh(W @ h) * 1.1 + 0.01, k + 1
        h, k = ta.while_loop(lambda c: c[1] < 40, body, (h0, 0), **kw)
        return tnp.sum(h * h)
    h0 = np.array([0.7, -0.4])
    ref = ta.grad(f)(h0)
    np.testing.assert_array_equal(ta.grad(lambda h: f(h, max_bytes=3 * 16))(h0), ref)
    np.testing.assert_array_equal(ta.grad(lambda h: f(h, checkpoints=4))(h0), ref)


@pytest.mark.parametrize("n, s", [(1, 1), (7, 1), (30, 2), (37, 3), (100, 5), (64, 64)])
def test_while_loop_recomputes_what_checkpoint_cost_predicts(n, s):
    calls = [0]

    def body(c):
        calls[0] += 1
        x, i = c
        return x * 1.01 + tnp.sin(x) * 0.1, i + 1
    f = lambda x: ta.while_loop(lambda c: c[1] < n, body, (x, 0), checkpoints=s)[0]  # noqa
    ta.grad(f)(0.4)
    cost = checkpoint_cost(n, s, online=True)
    # forward steps without a tape (the first run included) + one taped step per reversal
    assert calls[0] == cost["forward_step_calls"] + n


def test_while_loop_replayed_reversal_counts_and_branch_flips():
    calls = [0]

    def body(c):
        calls[0] += 1
        x, t = c
        x = x * 1.07 + 0.01 if x < 1.0 else x * 0.95 + tnp.sin(x) * 0.01   # flips
        return x, t + 0.1

    def f(x0, ck):
        return ta.while_loop(lambda c: c[1] < 6.0, body, (x0, 0.0), checkpoints=ck)[0]
    ref = ta.grad(lambda x: f(x, None))(0.3)
    n = calls[0]
    for s in (1, 2, 5):
        calls[0] = 0
        assert ta.grad(lambda x: f(x, s))(0.3) == ref
        # an all-float carry: the body is recorded once and replayed per reversal,
        # except where its branch flips relative to the recording
        assert calls[0] <= checkpoint_cost(n, s, online=True)["forward_step_calls"] + n


def test_online_chain_stays_within_its_budget_and_prediction():
    for n in range(0, 130, 3):
        for s in range(1, 12):
            chain = OnlineChain(lambda x, i: x * 1.01 + i, 0.5, s)
            chain.forward(lambda x: True, max_steps=n)
            adj = chain.reverse(lambda x, i, a: a * 1.01, 1.0)
            assert adj == pytest.approx(1.01 ** n, rel=1e-12)
            cost = checkpoint_cost(n, s, online=True)
            assert chain.stats["forward_steps"] == cost["forward_step_calls"]
            assert chain.stats["max_snapshots"] <= cost["peak_snapshots"] <= s
            assert chain.stats["backward_steps"] == n


def test_online_placement_keeps_the_budget_every_step():
    for s in (1, 2, 5, 13):
        placer = _revolve.OnlineCheckpoints(s)
        for i in range(1, 2000):
            placer.place(i)
            stored = placer.stored()
            assert len(stored) <= s and stored == sorted(stored) and stored[0] == 0


@needs_jax
def test_while_loop_forward_mode_against_jax():
    def ours(a):
        return ta.while_loop(lambda c: c[1] < 25,
                             lambda c: (tnp.cos(c[0]) * c[2], c[1] + 1, c[2]),
                             (a, 0, a), checkpoints=3)[0]

    def theirs(a):
        return jax.lax.while_loop(lambda c: c[1] < 25,
                                  lambda c: (jnp.cos(c[0]) * a, c[1] + 1), (a, 0))[0]
    y, t = ta.jvp(ours, (0.7,), (1.0,))
    y_j, t_j = jax.jvp(theirs, (0.7,), (1.0,))
    assert y == pytest.approx(float(y_j), rel=1e-15)
    assert t == pytest.approx(float(t_j), rel=1e-13)
    assert ta.grad(ours)(0.7) == pytest.approx(float(t_j), rel=1e-13)


def test_while_loop_errors():
    with pytest.raises(TypeError, match="cond_fun must be callable"):
        ta.while_loop(True, lambda c: c, 1.0)
    with pytest.raises(TypeError, match="body_fun must be callable"):
        ta.while_loop(lambda c: False, "body", 1.0)
    with pytest.raises(TypeError, match="structure, shapes and dtypes of init_val"):
        ta.while_loop(lambda c: c.shape[0] < 3, lambda c: tnp.concatenate([c, c]), np.ones(1))
    with pytest.raises(TypeError, match="structure, shapes and dtypes of init_val"):
        ta.grad(lambda x: ta.while_loop(lambda c: c[0] < 3.0, lambda c: (c[0] + 1.0,),
                                        (x, 1.0), checkpoints=2)[0])(0.0)
    with pytest.raises(ShapeError, match="cond_fun's result must be a scalar"):
        ta.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, np.zeros(2))
    with pytest.raises(ValueError, match="positive number"):
        ta.grad(lambda x: ta.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x,
                                        checkpoints=0))(0.0)
    with pytest.raises(ValueError, match="less than one stored carry"):
        ta.grad(lambda x: ta.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x,
                                        max_bytes=4))(0.0)

    def closes_over(p):                 # converted: p rides in the carry
        return ta.while_loop(lambda c: c < 3.0, lambda c: c + p, p * 0.5, checkpoints=2)
    assert ta.grad(closes_over)(1.1) == pytest.approx(3.5)

    class Holder:
        def __init__(self, p):
            self.p = p

    def hidden(p):                      # an object inside a list: not searched
        held = [Holder(p)]
        return ta.while_loop(lambda c: c < 3.0, lambda c: c + held[0].p, p * 0.5,
                             checkpoints=2)
    with pytest.raises(ValueError, match="through the carry"):
        ta.grad(hidden)(1.1)
    # without checkpoints a closure is an ordinary Python loop: fine
    assert ta.grad(lambda p: ta.while_loop(lambda c: c < 3.0, lambda c: c + p, p * 0.5))(
        1.1) == pytest.approx(3.5)


# ---------------------------------------------------------------------------
# checkpoint_cost
# ---------------------------------------------------------------------------

def closed_form(n, s):
    r = 0
    while math.comb(s + r, s) < n:
        r += 1
    return r * n - math.comb(s + r, s + 1)


def test_checkpoint_cost_known_length_is_revolves_optimum():
    for n in list(range(1, 200)) + [10 ** 3, 12345, 10 ** 5]:
        for s in (1, 2, 3, 5, 8, 13, 40):
            if s == 1 and n > 2000:
                continue
            cost = checkpoint_cost(n, s, carry_bytes=24)
            assert cost["forward_steps"] == closed_form(n, s) == optimal_forward_steps(n, s)
            assert cost["forward_step_calls"] == cost["forward_steps"] + 1
            assert cost["peak_snapshots"] == min(s, n)
            assert cost["bytes"] == 24 * min(s, n)


def test_checkpoint_cost_matches_a_checkpointed_scan():
    calls = [0]

    def body(c, x):
        calls[0] += 1
        # (the 1-element array keeps the body off the scalar C loop)
        return c * 1.01 + tnp.sin(c) * x + tnp.sum(np.zeros(1) * c), None
    xs = np.linspace(0, 1, 57)
    ta.grad(lambda c: ta.scan(body, c, xs, checkpoints=4)[0])(0.4)
    cost = checkpoint_cost(57, 4)
    # the eager first run + the schedule's forward calls + one recording of the
    # body (replayed for each reversal) + the scalar C loop's trial recording
    assert calls[0] == 57 + cost["forward_step_calls"] + 1 + 1


@pytest.mark.parametrize("s", [10, 20])
def test_online_schedule_within_1_25x_of_the_offline_optimum(s):
    # measured: s=10 -> 1.134, 1.038, 1.078 and s=20 -> 1.044, 1.198, 1.020
    for n in (10 ** 3, 10 ** 4, 10 ** 5):
        ratio = online_forward_steps(n, s) / (optimal_forward_steps(n, s) + 1)
        assert 1.0 <= ratio <= 1.25, (n, s, ratio)


def test_checkpoint_cost_errors():
    with pytest.raises(ValueError, match="snapshots must be >= 1"):
        checkpoint_cost(10, 0)
    with pytest.raises(ValueError, match="n_steps must be an integer"):
        checkpoint_cost(2.5, 3)


# ---------------------------------------------------------------------------
# fixed_point / custom_root (implicit function theorem)
# ---------------------------------------------------------------------------

A_MAT = np.array([[0.3, -0.1, 0.05], [0.2, 0.25, -0.1], [0.0, 0.1, 0.35]])


def contraction(x, W, b):
    return tnp.tanh(W @ x + b) * 0.8


def unrolled(x0, W, b, n=200):
    x = x0
    for _ in range(n):
        x = contraction(x, W, b)
    return x


def fp(W, b, x0=np.zeros(3)):
    return ta.fixed_point(contraction, x0, W, b)


B_VEC = np.array([0.3, -0.2, 0.5])


def test_fixed_point_derivatives_equal_the_unrolled_iteration():
    x = fp(A_MAT, B_VEC)
    np.testing.assert_allclose(x, contraction(x, A_MAT, B_VEC), atol=1e-13)
    J = ta.jacrev(lambda b: fp(A_MAT, b))(B_VEC)
    J_ref = ta.jacrev(lambda b: unrolled(np.zeros(3), A_MAT, b))(B_VEC)
    np.testing.assert_allclose(J, J_ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ta.jacfwd(lambda b: fp(A_MAT, b))(B_VEC), J_ref,
                               rtol=1e-12, atol=1e-13)
    gW = ta.grad(lambda W: tnp.sum(fp(W, B_VEC) ** 2))(A_MAT)
    gW_ref = ta.grad(lambda W: tnp.sum(unrolled(np.zeros(3), W, B_VEC) ** 2))(A_MAT)
    np.testing.assert_allclose(gW, gW_ref, rtol=1e-11, atol=1e-13)
    # second order, both compositions
    H = ta.hessian(lambda b: tnp.sum(fp(A_MAT, b) ** 3))(B_VEC)
    H_ref = ta.hessian(lambda b: tnp.sum(unrolled(np.zeros(3), A_MAT, b) ** 3))(B_VEC)
    np.testing.assert_allclose(H, H_ref, rtol=1e-11, atol=1e-13)
    hv = ta.hvp(lambda b: tnp.sum(fp(A_MAT, b) ** 3), (B_VEC,), (np.array([1.0, 0.5, -1.0]),))
    np.testing.assert_allclose(hv, H_ref @ np.array([1.0, 0.5, -1.0]), rtol=1e-11, atol=1e-13)
    ta.check_grads(lambda b: tnp.sum(fp(A_MAT, b) ** 3), (B_VEC,), order=2,
                   modes=("fwd", "rev"))


def test_fixed_point_does_not_depend_on_x0_and_stores_no_iterations():
    g = ta.grad(lambda x0: tnp.sum(fp(A_MAT, B_VEC, x0)), 0)(np.array([0.1, 0.2, 0.3]))
    assert g is None or np.all(np.asarray(g) == 0.0)
    # the tape holds the same number of nodes however long the solver ran
    sizes = [ta.record(lambda b: tnp.sum(ta.fixed_point(contraction, np.zeros(3), A_MAT, b,
                                                        tol=tol)), B_VEC).n_nodes
             for tol in (1e-3, 1e-14)]
    # input, fixed point, sum (of 3 elements: 3 element nodes and 3 scalar adds)
    assert sizes[0] == sizes[1] <= 8


def test_fixed_point_scalar_with_several_params():
    def f(x, a, c):
        return tnp.cos(x) * a + c
    x = ta.fixed_point(f, 0.3, 0.7, 0.1)
    ga, gc = ta.grad(lambda a, c: ta.fixed_point(f, 0.3, a, c), (0, 1))(0.7, 0.1)
    d = 1.0 + 0.7 * np.sin(x)
    assert ga == pytest.approx(np.cos(x) / d, rel=1e-12)
    assert gc == pytest.approx(1.0 / d, rel=1e-12)
    ta.check_grads(lambda a, c: ta.fixed_point(f, 0.3, a, c), (0.7, 0.1), order=2)


def newton(f, x):
    for _ in range(40):
        x = x - f(x) / ta.grad(f)(x)
    return x


def sqrt_cubed(a):
    return ta.custom_root(lambda y: y ** 2 - a ** 3, 1.0, newton, lambda g, y: y / g(1.0))


def test_custom_root_scalar_first_and_second_order():
    assert sqrt_cubed(4.0) == pytest.approx(8.0, rel=1e-14)
    assert ta.grad(sqrt_cubed)(4.0) == pytest.approx(1.5 * 4.0 ** 0.5, rel=1e-13)
    # d2/da2 a**1.5 = 0.75 a**-0.5
    assert ta.grad(ta.grad(sqrt_cubed))(4.0) == pytest.approx(0.75 / 2.0, rel=1e-12)
    assert ta.jvp(sqrt_cubed, (4.0,), (1.0,))[1] == pytest.approx(3.0, rel=1e-13)
    ta.check_grads(sqrt_cubed, (4.0,), order=2, modes=("fwd", "rev"))


def test_custom_root_vector_with_dense_tangent_solve():
    def dense_solve(g, y):
        n = np.shape(y)[0]
        cols = [g(np.eye(n)[k]) for k in range(n)]
        return tnp.linalg.solve(tnp.stack(cols, axis=1), y)

    def vector_newton(f, x):
        for _ in range(30):
            x = x - np.linalg.solve(ta.jacfwd(f)(x), f(x))
        return x

    def root(W, b):
        return ta.custom_root(lambda x: x - contraction(x, W, b), np.zeros(3),
                              vector_newton, dense_solve)
    np.testing.assert_allclose(root(A_MAT, B_VEC), fp(A_MAT, B_VEC), atol=1e-13)
    J = ta.jacrev(lambda b: root(A_MAT, b))(B_VEC)
    np.testing.assert_allclose(J, ta.jacrev(lambda b: fp(A_MAT, b))(B_VEC), rtol=1e-12)
    H = ta.hessian(lambda b: tnp.sum(root(A_MAT, b) ** 3))(B_VEC)
    H_ref = ta.hessian(lambda b: tnp.sum(unrolled(np.zeros(3), A_MAT, b) ** 3))(B_VEC)
    np.testing.assert_allclose(H, H_ref, rtol=1e-11, atol=1e-13)


@needs_jax
def test_custom_root_against_jax():
    def j_newton(f, x):
        for _ in range(40):
            x = x - f(x) / jax.grad(f)(x)
        return x

    def j_sqrt_cubed(a):
        return jax.lax.custom_root(lambda y: y ** 2 - a ** 3, 1.0, j_newton,
                                   lambda g, y: y / g(1.0))
    for a in (0.5, 4.0, 9.0):
        assert ta.grad(sqrt_cubed)(a) == pytest.approx(float(jax.grad(j_sqrt_cubed)(a)),
                                                       rel=1e-13)
        assert ta.grad(ta.grad(sqrt_cubed))(a) == pytest.approx(
            float(jax.grad(jax.grad(j_sqrt_cubed))(a)), rel=1e-12)


def test_implicit_errors():
    with pytest.raises(TypeError, match="f must be callable"):
        ta.fixed_point(3.0, 0.0)
    with pytest.raises(RuntimeError, match="no convergence after max_iter=50"):
        ta.fixed_point(lambda x, a: x * a + 1.0, 0.0, 1.5, max_iter=50)
    with pytest.raises(TypeError, match="structure and shapes of x0"):
        ta.fixed_point(lambda x, a: tnp.concatenate([x, x]) * a, np.zeros(2), 0.5)
    with pytest.raises(TypeError, match="tangent_solve must be callable"):
        ta.custom_root(lambda y: y - 1.0, 0.0, newton, None)
    with pytest.raises(TypeError, match="structure and shapes of initial_guess"):
        ta.grad(lambda a: ta.custom_root(lambda y: y - a, 0.0, lambda f, x: (x, x),
                                         lambda g, y: y))(1.0)
