"""Fused replays: chains of elementwise array nodes in one blocked pass each
(``tapead.compiler.fusion``, ``_core.FusedGroup``) give the bits the node-by-node
replay gives, skip what no output needs, and refuse what they cannot run."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead.compiler import plan
from tapead.errors import TapeReplayError

_UNARY = ("sin", "cos", "exp", "tanh", "log1p_abs", "square", "negative")
_BINARY = ("add", "subtract", "multiply", "divide_safe")


def _unary(name, v):
    if name == "log1p_abs":
        return np.log1p(np.abs(v))
    return getattr(np, name)(v)


def _binary(name, a, b):
    if name == "divide_safe":
        return a / (2.0 + np.cos(b))
    return getattr(np, name)(a, b)


def run(prog, x, c):
    """A random elementwise program on slices of x with a scalar c."""
    vals = [x[:-1], x[1:], x[:-1] * c]
    for ins in prog:
        if ins[0] == "u":
            vals.append(_unary(ins[1], vals[ins[2] % len(vals)]))
        elif ins[0] == "b":
            vals.append(_binary(ins[1], vals[ins[2] % len(vals)], vals[ins[3] % len(vals)]))
        else:                                   # a scalar or a constant operand
            vals.append(vals[ins[2] % len(vals)] * (c if ins[1] else 0.75))
    return tnp.sum(vals[-1] * vals[-2]) + tnp.sum(vals[len(vals) // 2])


_ins = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(_UNARY), st.integers(0, 20)),
    st.tuples(st.just("b"), st.sampled_from(_BINARY), st.integers(0, 20), st.integers(0, 20)),
    st.tuples(st.just("s"), st.booleans(), st.integers(0, 20)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_ins, min_size=1, max_size=10), st.sampled_from([5, 1024, 1025, 3001]))
def test_fused_replays_give_the_unfused_bits(prog, n):
    rng = np.random.default_rng(n)
    x, c = rng.uniform(-1.0, 1.0, n), float(rng.uniform(0.5, 2.0))
    f = lambda x, c: run(prog, x, c)                        # noqa: E731
    fused = ta.jit(ta.value_and_grad(f, argnums=(0, 1)), native=False)
    plain = ta.jit(ta.value_and_grad(f, argnums=(0, 1)), fuse=False)
    fused(x, c), plain(x, c)                                # recorded
    fused.compile(x, c)                                     # planned (numpy's loops)
    for k in range(2):
        x2, c2 = np.cos(x + k), c * 0.9
        (v, (gx, gc)), (v0, (gx0, gc0)) = fused(x2, c2), plain(x2, c2)
        assert v == v0 and gc == gc0
        np.testing.assert_array_equal(gx, gx0)
    fwd = ta.jit(f, native=False)
    fwd.compile(x, c)
    assert fwd(np.sin(x), c) == f(np.sin(x), c)              # numpy's bits, forward
    assert fused.cache_info().hits == 2


def _b2(x):
    return tnp.sum(np.sin(x[:-1]) * x[1:])


def test_the_gradient_program_is_planned_into_groups_and_dead_nodes():
    g = ta.jit(ta.value_and_grad(_b2), native=False)
    x = np.linspace(-1.0, 1.0, 2000)
    g(x)
    assert next(iter(g._cache.values())).program.tape.n_fused_groups == 0   # not yet
    g.compile(x)                     # (done in the background after two replays)
    tape = next(iter(g._cache.values())).program.tape
    assert tape.n_fused_groups >= 2
    p = plan(tape, [i for i in next(iter(g._cache.values())).out_ids if i >= 0])
    assert p.n_fused_nodes >= 4
    text = p.describe(tape)
    assert "sin -> mul" in text and "cos_given_sin -> mul" in text
    for grp in p.groups:             # the cosine is a scratch buffer: never written out
        assert set(grp.outputs) < set(grp.members) or len(grp.outputs) == len(grp.members)
    v, gx = g(x * 0.5)
    v0, gx0 = ta.value_and_grad(_b2)(x * 0.5)
    np.testing.assert_allclose(v, v0, rtol=1e-15)
    np.testing.assert_allclose(gx, gx0, rtol=1e-15, atol=1e-15)


def test_fusion_can_be_turned_off(monkeypatch):
    x = np.linspace(0.0, 1.0, 50)
    off = ta.jit(ta.grad(_b2), fuse=False)
    off(x)
    assert next(iter(off._cache.values())).program.tape.n_fused_groups == 0
    monkeypatch.setenv("TAPEAD_FUSION", "0")
    env = ta.jit(ta.grad(_b2))
    env(x)
    assert env.compile(x) is None
    assert next(iter(env._cache.values())).program.tape.n_fused_groups == 0
    monkeypatch.setenv("TAPEAD_FUSION", "1")
    on = ta.jit(ta.grad(_b2), native=False)
    on.compile(x)
    assert next(iter(on._cache.values())).program.tape.n_fused_groups > 0
    np.testing.assert_array_equal(on(x * 2), off(x * 2))


def test_a_changed_layout_records_again_instead_of_reading_wrong_memory():
    f = ta.jit(lambda a: tnp.sum(np.tanh(np.sin(a) * a) * a))
    a = np.arange(12.0).reshape(3, 4) / 10
    f.compile(a)
    fortran = np.asfortranarray(a * 0.5)         # same shape and dtype, another layout
    assert f(fortran) == pytest.approx(np.sum(np.tanh(np.sin(fortran) * fortran) * fortran),
                                       rel=1e-15)
    assert f.cache_info().rerecords == 1
    strided = np.linspace(0.0, 1.0, 24)[::2]     # 1-d views of any stride are read in place
    g = ta.jit(lambda v: tnp.sum(np.exp(np.sin(v)) * v))
    g.compile(np.ones(12))
    assert g(strided) == np.sum(np.exp(np.sin(strided)) * strided)
    assert g.cache_info().rerecords == 0


def test_fused_group_checks_what_it_is_given():
    with pytest.raises(TypeError, match="float64 loop"):
        _core.FusedGroup((3,), [(1, 0, 0.0), (3, 1, 0.0)], [(np.isnan, [0], 1)], [1])
    with pytest.raises(ValueError, match="slot"):
        _core.FusedGroup((3,), [(1, 0, 0.0), (3, 1, 0.0)], [(np.sin, [5], 1)], [1])
    with pytest.raises(ValueError, match="input slot"):
        _core.FusedGroup((3,), [(1, 0, 0.0), (3, 1, 0.0)], [(np.sin, [1], 0)], [1])
    with pytest.raises(ValueError, match="unknown kind"):
        _core.FusedGroup((3,), [(9, 0, 0.0)], [], [1])
    tape = ta.Tape()
    t = tape.input(np.ones(30))
    tnp.sin(t) * 2.0
    tape.active = False
    grp = _core.FusedGroup((30,), [(1, 0, 0.0), (3, 1, 0.0)], [(np.sin, [0], 1)], [0])
    with pytest.raises(ValueError, match="cannot be a member"):
        tape.set_fusion([grp])                    # node 0 is the input
    with pytest.raises(TypeError, match="not a FusedGroup"):
        tape.set_fusion([object()])
    with pytest.raises(ValueError, match="cannot be skipped"):
        tape.set_fusion([], skip=[0])


def test_a_scalar_operand_that_became_an_array_is_refused():
    tape = ta.Tape()
    x = tape.input(np.ones(64))                   # (arrays of up to 8 run per element)
    s = tape.input(2.0)
    y = np.sin(x) * s
    z = np.exp(y)
    tape.active = False
    p = plan(tape, [z.idx])
    assert len(p.groups) == 1 and p.groups[0].outputs == [z.idx]
    p.install(tape)
    out = tape.evaluate([np.full(64, 0.5), 3.0], [z.idx])[0]
    assert np.array_equal(out, np.exp(np.sin(np.full(64, 0.5)) * 3.0))
    with pytest.raises(TapeReplayError):
        tape.replay([np.full(64, 0.5), np.full(64, 3.0)], partials=False)
