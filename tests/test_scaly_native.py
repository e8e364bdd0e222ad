"""The graph API's loops on compiled bodies.

A ``sc.scan`` (and a mapped call, ``sc.vmap``) whose body is scalarized runs
its steps in C on the body's scalar tape; once a body has run twice, it is
compiled in the background (``tapead.compiler.bodies``: one C loop over the
steps) and the runs after that call the compiled loop.  Compiled and
interpreted runs give the same bits: values, gradients and Hessians.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tapead.scaly as sc
from tapead import _core
from tapead.compiler import eager, native
from tapead.scaly.control import scalar
from test_scaly_control_online import _stretched       # a while loop with a parameter

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler here")

H = 0.1


def _join_compiles():
    for t in threading.enumerate():
        if t.name in ("tapead-compile-loop", "tapead-find-native"):
            t.join(60)


@pytest.fixture(autouse=True)
def compiler_found():
    eager._eager_on()                 # looks for a compiler in the background, once
    _join_compiles()


#: the C loops of the graph API, and how many arguments precede their
#: compiled-function addresses
_LOOPS = {"scalar_scan": 9, "scalar_while": 13, "scalar_while_online": 14,
          "scalar_scan_checkpointed": 19}


@pytest.fixture
def calls(monkeypatch):
    """Whether each C loop call ran compiled code (its compiled-function
    addresses were given and not 0)."""
    seen = []

    def spy_on(name, orig, n):
        def spy(*args):
            seen.append(len(args) > n and all(args[n:]))
            return orig(*args)
        return spy
    for name, n in _LOOPS.items():
        monkeypatch.setattr(_core, name, spy_on(name, getattr(_core, name), n))
    return seen


def _run_compiled(fn, *args, calls):
    """``fn(*args)`` interpreted (compiling turned off), then run until its
    loops are compiled: (interpreted, compiled) results."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(eager, "compiled", lambda *a, **k: None)
        reference = fn(*args)
    for _ in range(eager.EAGER_AFTER):
        fn(*args)
    _join_compiles()
    del calls[:]
    out = fn(*args)
    assert calls and all(calls), "the loops did not run compiled"
    return reference, out


def _same_bits(a, b):
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
        assert np.asarray(u).tobytes() == np.asarray(v).tobytes()


# bodies x_{k+1} = f(x_k, u_k) on a 2-vector carry, each with a per-step output
BODIES = {
    "rollout": lambda x, u: (x + H * sc.stack([x[1], u]), (x * x).sum()),
    "trig": lambda x, u: (sc.stack([x[0] + H * x[1].sin(), x[1] - H * (x[0] * u).cos()]),
                          (x[0] * 0.1).tan() * u),
    "exp_log": lambda x, u: (sc.stack([(x[0] * 0.1).exp() - 0.5, (x[1] * x[1] + 1.0).log()
                                       + u]), (x[0] - u).tanh()),
    "powers": lambda x, u: (sc.stack([(x[0] * x[0] + 1.0).sqrt() * 0.5, x[1] / (1.0 + u * u)]),
                            (x[0] * x[0] + 2.0) ** 1.5 + abs(x[1] - u - 2.0)),
}


def _scan_fn(name, T, reverse=False):
    step = BODIES[name]

    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def body(x, u):
        return step(x, u)

    @sc.function(sc.arg("x0", 2), sc.arg("us", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, us):
        final, (ys,) = sc.scan(body, x0, (us,), length=T, reverse=reverse)
        return final, (ys * ys).sum() + (final * final).sum()
    return rollout


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_compiled_scans_give_the_interpreters_bits(name, reverse, calls):
    T = 300
    fn = _scan_fn(name, T, reverse)
    x0, us = np.array([0.3, -0.2]), np.sin(np.linspace(0.0, 3.0, T))
    ref, out = _run_compiled(fn, x0, us, calls=calls)
    _same_bits(ref, out)
    grad = sc.gradient(fn, "cost", "us")
    ref, out = _run_compiled(grad, x0, us, calls=calls)
    _same_bits(ref, out)
    # and the gradient is the derivative: Richardson-extrapolated central
    # differences along a direction (their own error here is ~1e-9 relative)
    d = np.cos(np.arange(T))

    def central(h):
        return (fn(x0, us + h * d)[1] - fn(x0, us - h * d)[1]) / (2 * h)
    fd = (4 * central(5e-4) - central(1e-3)) / 3
    assert abs(float(np.dot(out, d)) - fd) <= 1e-7 * max(1.0, abs(fd))


def test_compiled_hessian_vector_products_give_the_interpreters_bits(calls):
    T = 200
    fn = _scan_fn("trig", T)
    x0, us = np.array([0.3, -0.2]), np.sin(np.linspace(0.0, 3.0, T))
    hess = sc.hessian(fn, "cost", "x0")
    ref, out = _run_compiled(hess, x0, us, calls=calls)
    _same_bits(ref, out)


def test_a_scan_of_a_step_subset_and_outputs_that_are_constants(calls):
    """A trip count shorter than the length (rows of steps not run stay
    zero), and a body with a constant output and an output that is an input."""
    T = 400

    @sc.function(sc.arg("x", ()), sc.arg("u", ()))
    def body(x, u):
        return (x * 0.9 + u).sin(), sc.stack([sc.const(2.0), u, x])

    @sc.function(sc.arg("x0", ()), sc.arg("us", T), sc.arg("n", sc.TensorType((), sc.dtypes.int64)),
                 outputs=sc.group(sc.arg("final", ()), sc.arg("ys", (T, 3))))
    def run(x0, us, n):
        final, (ys,) = sc.scan(body, x0, (us,), length=T, trip=n)
        return final, ys

    us = np.cos(np.arange(T) * 0.01)
    ref, out = _run_compiled(run, np.array(0.1), us, np.array(250), calls=calls)
    _same_bits(ref, out)
    assert np.all(out[1][250:] == 0.0) and np.all(out[1][:250, 0] == 2.0)


def test_mapped_calls_run_compiled_stages(calls):
    n = 300

    @sc.function(sc.G(sc.L("zz", 2), sc.L("p", 1)), sc.L("c", ...))
    def link(inputs):
        zz, p = inputs
        return p[0] * (zz[1] - zz[0].sin()) ** 2

    @sc.function(sc.G(sc.L("z", n + 1), sc.L("p", 1)), sc.L("cost", ...))
    def chain(inputs):
        z, p = inputs
        return sc.vmap(link, n, [(z, 0, 1), p]).sum()

    z, p = np.linspace(-1.0, 1.0, n + 1), np.array([1.5])
    ref, out = _run_compiled(chain, (z, p), calls=calls)
    _same_bits(ref, out)
    grad = sc.gradient(chain, "cost", "z")
    ref, out = _run_compiled(grad, (z, p), calls=calls)
    _same_bits(ref, out)
    want = 2 * p[0] * np.r_[-(z[1:] - np.sin(z[:-1])) * np.cos(z[:-1]), 0.0] \
        + 2 * p[0] * np.r_[0.0, z[1:] - np.sin(z[:-1])]
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)


def _unique_fn(T, c):
    """A rollout whose body no other test compiles (its constant ``c``)."""
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def body(x, u):
        return x + c * sc.stack([x[1], u]), (x * x).sum()

    @sc.function(sc.arg("x0", 2), sc.arg("us", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, us):
        final, (ys,) = sc.scan(body, x0, (us,), length=T)
        return final, ys.sum()
    return rollout


def test_small_loops_and_native_off_stay_interpreted(calls, monkeypatch):
    fn = _unique_fn(5, 0.0625)              # 5 steps x a few nodes < MIN_WORK
    for _ in range(eager.EAGER_AFTER + 1):
        fn(np.array([0.3, -0.2]), np.ones(5))
    _join_compiles()
    assert calls and not any(calls)
    # once a longer loop of the same body compiled it, short ones run it too
    long = _unique_fn(500, 0.0625)
    for _ in range(eager.EAGER_AFTER):
        long(np.array([0.3, -0.2]), np.ones(500))
    _join_compiles()
    del calls[:]
    fn(np.array([0.3, -0.2]), np.ones(5))
    assert calls and all(calls)
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    fn = _unique_fn(500, 0.03125)
    del calls[:]
    for _ in range(eager.EAGER_AFTER + 1):
        fn(np.array([0.3, -0.2]), np.ones(500))
    _join_compiles()
    assert calls and not any(calls)


def test_the_compiled_body_is_the_bodys_tape():
    """A body's compiled scan is looked up by its tape's code: two Functions
    with the same body share one compiled loop, another body gets its own."""
    T = 300
    a, b, c = _scan_fn("trig", T), _scan_fn("trig", T), _scan_fn("powers", T)
    x0, us = np.array([0.3, -0.2]), np.linspace(0.0, 1.0, T)
    for _ in range(eager.EAGER_AFTER + 1):
        a(x0, us)
        c(x0, us)
    _join_compiles()
    progs = []
    for fn in (a, b, c):
        fn(x0, us)
        spec = next(n.attrs["spec"] for n in _nodes(fn) if n.op == "scan")
        progs.append(spec._derived["scalar_plan"]._programs[True])
    states = [next(iter(p._native_bodies.values()))[1] for p in progs]
    assert all(s is not None for s in states)
    assert states[0][0] is states[1][0] and states[0][0] is not states[2][0]
    assert scalar.MIN_WORK <= T * 4


def _nodes(fn):
    from tapead.scaly.graphs import topo_order
    return topo_order(fn.outputs)


def test_compiled_gradient_matches_jax(calls):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    T = 300
    fn = _scan_fn("trig", T)
    x0, us = np.array([0.3, -0.2]), np.sin(np.linspace(0.0, 3.0, T))
    _, g = _run_compiled(sc.gradient(fn, "cost", "us"), x0, us, calls=calls)

    def cost(u):
        def step(x, uk):
            return (jnp.stack([x[0] + H * jnp.sin(x[1]), x[1] - H * jnp.cos(x[0] * uk)]),
                    jnp.tan(x[0] * 0.1) * uk)
        final, ys = jax.lax.scan(step, jnp.asarray(x0), u)
        return (ys * ys).sum() + (final * final).sum()
    want = np.asarray(jax.grad(cost)(us))
    np.testing.assert_allclose(g, want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("s", [None, 3])
def test_compiled_while_loops_give_the_interpreters_bits(s, calls):
    run = _stretched(s)
    args = (np.array([0.3, 0.1]), np.array(1.05))
    ref, out = _run_compiled(run, *args, calls=calls)
    _same_bits(ref, out)
    assert int(out[1]) > 50
    for wrt in ("x0", "p"):
        grad = sc.gradient(run, "y", wrt)
        ref, out = _run_compiled(grad, *args, calls=calls)
        _same_bits(ref, out)
    # against differences in p (the count is locally constant), Richardson-
    # extrapolated (the value grows like p**n: plain differences are off by 1e-7)
    def central(h):
        return (run(args[0], args[1] + h)[0] - run(args[0], args[1] - h)[0]) / (2 * h)
    np.testing.assert_allclose(out, (4 * central(5e-6) - central(1e-5)) / 3, rtol=1e-7)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    n = int(run(*args)[1])

    def unrolled(p):
        x = jnp.asarray(args[0])
        for _ in range(n):
            x = x * p + jnp.sin(jnp.stack([x[1], x[0]])) * 0.1
        return (x * x).sum()
    np.testing.assert_allclose(out, float(jax.grad(unrolled)(float(args[1]))), rtol=1e-13)


def _sine_rollout(T, reverse, checkpoints):
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def body(x, u):
        return x + H * sc.stack([x[1].sin(), u]), (x * x).sum()

    @sc.function(sc.arg("x0", 2), sc.arg("us", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, us):
        final, (costs,) = sc.scan(body, x0, (us,), length=T, checkpoints=checkpoints,
                                  reverse=reverse)
        return final, costs.sum()
    return rollout


@pytest.mark.parametrize("reverse", [False, True])
def test_compiled_checkpointed_scans_give_the_interpreters_bits(reverse, calls):
    T = 500
    rollout, stored = _sine_rollout(T, reverse, 7), _sine_rollout(T, reverse, None)
    x0, us = np.array([1.0, 0.0]), np.sin(np.linspace(0.0, 6.0, T))
    for wrt in ("us", "x0"):
        grad = sc.gradient(rollout, "cost", wrt)
        ref, out = _run_compiled(grad, x0, us, calls=calls)
        _same_bits(ref, out)
        want = sc.gradient(stored, "cost", wrt)(x0, us)
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)
