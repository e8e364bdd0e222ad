"""``ta.while_loop`` over float carries, run in C.

A while loop whose carry is floats, whose body is scalar arithmetic and whose
condition is one comparison of its values runs its steps in C: the trip
count is found by the recorded body and condition (``_core.scalar_while``),
then the loop is the scan of that many steps (``tapead.scalar_scan``).  The
values and derivatives are the step-by-step loop's, bit for bit; loops that
do not qualify keep the step-by-step path.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import control


@pytest.fixture
def ran(monkeypatch):
    """Whether each while loop ran in C."""
    seen = []
    orig = control._while_in_c

    def spy(*args):
        out = orig(*args)
        seen.append(out is not None)
        return out
    monkeypatch.setattr(control, "_while_in_c", spy)
    return seen


def _stepped(f, *args):
    """``f(*args)`` with every while loop stepped from Python."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(control, "_while_in_c", lambda *a: None)
        return f(*args)


def fixed_point(a, checkpoints=None, steps=500):
    def body(c):
        x, k, a = c
        return tnp.cos(a * x), k + 1.0, a
    x, k, _ = ta.while_loop(lambda c: c[1] < steps, body, (0.5, 0.0, a),
                            checkpoints=checkpoints)
    return x


@pytest.mark.parametrize("ck", [None, 1, 3, 10])
def test_fixed_point_values_and_gradients_are_the_stepped_loops(ck, ran):
    f = lambda a: fixed_point(a, ck)          # noqa: E731
    assert f(0.9) == _stepped(f, 0.9)
    del ran[:]                                # (an untraced loop is a Python loop)
    g = ta.grad(f)(0.9)
    assert ran and all(ran)
    assert g == _stepped(ta.grad(f), 0.9)
    h = 1e-6
    assert abs(g - (f(0.9 + h) - f(0.9 - h)) / (2 * h)) < 1e-7


@pytest.mark.parametrize("ck", [None, 2])
def test_a_count_that_depends_on_the_input(ck, ran):
    """Newton's iteration for sqrt(v) until the residual is small: v rides in
    the carry, and the count changes with v."""
    def f(v):
        def body(c):
            x, n, w = c
            return 0.5 * (x + w / x), n + 1.0, w
        x, n, _ = ta.while_loop(lambda c: abs(c[0] * c[0] - c[2]) > 1e-12 * c[2], body,
                                (v, 0.0, v), checkpoints=ck)
        return x * n
    for v in (2.0, 50.0, 1e6):
        assert f(v) == _stepped(f, v)
        del ran[:]
        g = ta.grad(f)(v)
        assert ran == [True]
        assert g == _stepped(ta.grad(f), v)
        n = f(v) / np.sqrt(v)
        assert g == pytest.approx(n * 0.5 / np.sqrt(v), rel=1e-12)


def test_second_order_through_the_loop(ran):
    f = lambda a: fixed_point(a, None, 60)      # noqa: E731
    H = ta.hessian(f)(0.9)
    assert ran and ran[0]
    assert H == pytest.approx(_stepped(ta.hessian(f), 0.9), rel=1e-13)
    h = 1e-4
    fd = (ta.grad(f)(0.9 + h) - ta.grad(f)(0.9 - h)) / (2 * h)
    assert H == pytest.approx(fd, rel=1e-7)


def test_against_jax_with_the_count_known():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def loop(a):
        return jax.lax.fori_loop(0, 500, lambda i, x: jnp.cos(a * x), 0.5)
    assert ta.grad(fixed_point)(0.9) == pytest.approx(float(jax.grad(loop)(0.9)),
                                                      rel=1e-13)


def test_no_steps_and_vector_of_carries(ran):
    assert ta.grad(lambda x: ta.while_loop(lambda c: c > 10.0, lambda c: c * 2.0, x))(1.0) \
        == 1.0
    f = lambda x: ta.while_loop(lambda c: c[0] < 100.0,       # noqa: E731
                                lambda c: (c[0] + c[1], c[1] * 1.5, c[2] - c[0] * 0.01),
                                (x, 1.0, x))
    g = ta.grad(lambda x: sum(f(x)))(0.25)
    assert g == _stepped(ta.grad(lambda x: sum(f(x))), 0.25)
    assert all(ran)


@pytest.mark.parametrize("case", ["int counter", "branch in body", "two comparisons",
                                  "negated", "array carry", "closure"])
def test_loops_that_do_not_qualify_step_from_python(case, ran):
    a0 = 0.7
    if case == "int counter":
        f = lambda a: ta.while_loop(lambda c: c[1] < 20,               # noqa: E731
                                    lambda c: (tnp.sin(c[0]) + a, c[1] + 1), (a, 0))[0]
    elif case == "branch in body":
        f = lambda a: ta.while_loop(lambda c: c[1] < 20.0, lambda c: (   # noqa: E731
            c[0] * 1.1 if c[0] < 1.0 else c[0] * 0.9, c[1] + 1.0), (a, 0.0))[0]
    elif case == "two comparisons":
        f = lambda a: ta.while_loop(lambda c: c[1] < 20.0 and c[0] < 5.0,  # noqa: E731
                                    lambda c: (c[0] * 1.1, c[1] + 1.0), (a, 0.0))[0]
    elif case == "negated":
        f = lambda a: ta.while_loop(lambda c: not c[1] >= 20.0,          # noqa: E731
                                    lambda c: (c[0] * 1.1, c[1] + 1.0), (a, 0.0))[0]
    elif case == "array carry":
        f = lambda a: tnp.sum(ta.while_loop(lambda c: c[1] < 20.0,       # noqa: E731
                                            lambda c: (c[0] * 1.1, c[1] + 1.0),
                                            (a * np.ones(40), 0.0))[0])
    else:
        f = lambda a: ta.while_loop(lambda c: c[1] < 20.0,               # noqa: E731
                                    lambda c: (c[0] * a, c[1] + 1.0), (a, 0.0))[0]
    g = ta.grad(f)(a0)
    assert ran and not any(ran)
    h = 1e-6
    assert g == pytest.approx((f(a0 + h) - f(a0 - h)) / (2 * h), rel=1e-7)


def test_under_jit_the_count_is_a_guard(ran):
    """Under ta.jit the loop runs in C too and its count is checked at each
    replay: the same count replays, another re-records."""
    def f(v):
        x, n = ta.while_loop(lambda c: c[0] > 1.0, lambda c: (c[0] * 0.5, c[1] + 1.0),
                             (v, 0.0))
        return x * n
    jf = ta.jit(ta.value_and_grad(f))
    for v in (10.0, 12.0, 1000.0, 3.0):
        val, g = jf(v)
        assert (val, g) == ta.value_and_grad(f)(v)
        n = np.ceil(np.log2(v))
        assert val == pytest.approx(v / 2 ** n * n) and g == pytest.approx(n / 2 ** n)
    info = jf.cache_info()
    assert info.hits == 1 and info.rerecords == 2       # 12 has 10's count
    assert ran and all(ran)


def test_a_jitted_gradient_of_a_long_loop_records_no_steps():
    f = lambda a: fixed_point(a, None, 5000)            # noqa: E731
    jg = ta.jit(ta.grad(f))
    assert jg(0.9) == ta.grad(f)(0.9) == _stepped(ta.grad(f), 0.9)
    assert jg(0.8) == ta.grad(f)(0.8)
    assert jg.cache_info().hits == 1
    rec = ta.record(f, 0.9)
    assert rec.tape.n_nodes < 100                      # not 5000 steps


def test_a_recording_refuses_inputs_with_another_count():
    from tapead.errors import GuardFlippedError

    def f(v):
        x, n = ta.while_loop(lambda c: c[0] > 1.0, lambda c: (c[0] * 0.5, c[1] + 1.0),
                             (v, 0.0))
        return x * n
    rec = ta.record(f, 10.0)
    assert rec(12.0) == f(12.0)                          # the same count: 4 halvings
    with pytest.raises(GuardFlippedError, match="trip count of a ta.while_loop"):
        rec(1000.0)


def test_a_long_count_runs_in_chunks(monkeypatch):
    """The count is found a chunk of steps at a time (between them Python sees
    Ctrl-C): a loop longer than a chunk gives the same count and gradient."""
    f = lambda a: fixed_point(a, None, 1000)            # noqa: E731
    want = ta.grad(f)(0.9)
    monkeypatch.setattr(control, "_C_CHUNK", 64)
    assert ta.grad(f)(0.9) == want
    monkeypatch.setattr(control, "_C_CHUNK", 1000)      # exactly one chunk, then none
    assert ta.grad(f)(0.9) == want


def test_a_condition_closing_over_a_value_jit_traces_is_not_frozen(ran):
    """``a`` is traced by ta.jit but not differentiated: a count found with its
    value baked in would be stale at the next a.  Such a loop steps in Python."""
    def f(a, v):
        x, n = ta.while_loop(lambda c: c[0] > a, lambda c: (c[0] * 0.5, c[1] + 1.0),
                             (v, 0.0))
        return x * n
    jg = ta.jit(ta.grad(f, argnums=1))
    for a in (1.0, 0.1, 0.01, 1.0):
        assert jg(a, 10.0) == ta.grad(f, argnums=1)(a, 10.0)
    assert not any(ran[:1])
