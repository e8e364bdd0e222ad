"""Compiled scalar runs (``tapead.compiler.runs``): the repeated blocks of a
recording's long runs of scalar nodes -- an unrolled Python loop over
floats and its recorded reverse sweep -- as C loops over the periods, with
the interpreter's bits; the stretches a block does not cover, and runs
without a repeated block, stay on the interpreter."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead.compiler import native, runs

from test_native_loops import BINARY, CONST, UNARY, _unary, _eq_tree

needs_cc = pytest.mark.skipif(not native.available(), reason="no C compiler here")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEAD_CACHE_DIR", str(tmp_path / "cache"))


def _loop_of(step, n=400):
    """A Python loop over floats: ``a, b = step(a, b, x_i)`` for i < n."""
    def f(a, b, xs):
        for x in xs:
            a, b = step(a, b, x)
        return a * 1.5 + b
    return f


def _check(step, xs, a=0.4, b=0.6):
    f = ta.value_and_grad(_loop_of(step, len(xs)), argnums=(0, 1))
    jf = ta.jit(f)
    xs = list(xs)
    first = jf(a, b, xs)
    tape = jf._recording((a, b, xs), {}).program.tape
    blocks = runs.plan_runs(tape)
    longest = max(e - s for s, e in runs._runs(tape.export_nodes()[0]))
    assert blocks and sum(blk.stop - blk.start for blk in blocks) > longest // 2
    interpreted = [jf(a + d, b - d, [x + d for x in xs]) for d in (0.0, 0.01, -0.02)]
    comp = jf.compile(a, b, xs)
    assert comp.run_library is not None
    for d, want in zip((0.0, 0.01, -0.02), interpreted):
        with np.errstate(all="ignore"):
            _eq_tree(jf(a + d, b - d, [x + d for x in xs]), want)
    _eq_tree(jf(a, b, xs), first)


OPS = {**{k: (lambda f: lambda a, b, u: f(u * a + 0.2, b))(f) for k, f in BINARY.items()},
       **{k: (lambda f: lambda a, b, u: f(u + a * b))(f) for k, f in CONST.items()},
       **{k: (lambda f: lambda a, b, u: f(0.5 * u * a + 0.1 * b))(_unary(k))
          for k in UNARY + ["sigmoid", "relu"]}}


@needs_cc
@pytest.mark.parametrize("name", sorted(OPS))
def test_rerolled_runs_give_the_interpreters_bits(name):
    r = OPS[name]

    def step(a, b, u):
        v = r(a, b, u)
        return a + 1e-3 * v, 0.999 * b + 1e-3 * u * v
    xs = np.random.default_rng(len(name)).uniform(0.1, 0.9, 300)
    _check(step, xs)


@needs_cc
def test_rk4_on_two_floats_is_rerolled():
    H = 0.01

    def step(th, om, _):
        f = lambda th, om: (om, -0.1 * om - tnp.sin(th))     # noqa: E731
        a1, b1 = f(th, om)
        a2, b2 = f(th + H / 2 * a1, om + H / 2 * b1)
        a3, b3 = f(th + H / 2 * a2, om + H / 2 * b2)
        a4, b4 = f(th + H * a3, om + H * b3)
        return th + H / 6 * (a1 + 2 * a2 + 2 * a3 + a4), om + H / 6 * (b1 + 2 * b2 + 2 * b3 + b4)
    _check(step, np.zeros(500))


def test_short_or_irregular_runs_are_not_planned():
    t = _core.Tape()
    x, = t.input_many([np.float64(0.5)])
    y = x
    for i in range(100):            # too short
        y = tnp.sin(y) * 1.01
    t.active = False
    assert runs.plan_runs(t) == []
    t = _core.Tape()
    x, = t.input_many([np.float64(0.5)])
    y = x
    rng = np.random.default_rng(0)
    ops = [tnp.sin, tnp.cos, lambda v: v * 1.5, lambda v: v + x, tnp.tanh, lambda v: v * v]
    for k in rng.integers(0, len(ops), 3000):    # long, but no period
        y = ops[k](y)
    t.active = False
    assert all(blk.K >= runs.MIN_PERIODS for blk in runs.plan_runs(t))


def test_set_native_runs_checks_its_stretches():
    t = _core.Tape()
    x, = t.input_many([np.float64(0.5)])
    y = x
    for i in range(10):
        y = y * 1.1 + x
    t.active = False
    with pytest.raises(ValueError, match="not a stretch"):
        t.set_native_runs([(1, 1, 500, 1)], None)
    with pytest.raises(ValueError, match="does not begin a run"):
        t.set_native_runs([(2, 2, 5, 1)], None)
    with pytest.raises(ValueError, match="not a scalar node"):
        t.set_native_runs([(0, 0, 5, 1)], None)
    with pytest.raises(ValueError, match="overlap"):
        t.set_native_runs([(1, 3, 6, 1), (1, 2, 4, 1)], None)
    t.set_native_runs([], None)


def test_without_native_code_runs_stay_interpreted(monkeypatch):
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    f = ta.value_and_grad(_loop_of(lambda a, b, u: (a * 0.9 + tnp.sin(u * b), b)), argnums=(0, 1))
    jf = ta.jit(f)
    xs = list(np.linspace(0, 1, 600))
    want = jf(0.3, 0.2, xs)
    comp = jf.compile(0.3, 0.2, xs)
    assert comp.run_library is None
    _eq_tree(jf(0.3, 0.2, xs), want)
