"""``sc.while_loop(..., checkpoints=s)``: reverse mode through a while loop
from at most ``s`` carries placed online (``tapead.online``), not the stored
trajectory.  Derivatives equal the stored-trajectory ones and central
differences; the body calls equal the online schedule's count and the
stored carries never exceed ``s``."""
from __future__ import annotations

import numpy as np
import pytest

import tapead
import tapead.scaly as sc
from tapead.online import OnlineChain, checkpoint_cost, online_forward_steps
from tapead.scaly.control import lowering
from tapead.scaly.graphs import topo_order
from test_scaly_control_loops import (INT, _grow_numpy, _unrolled_grow, below, central,
                                      check_derivatives, grow)

BOOL = sc.TensorType((), sc.dtypes.bool_)


def _grown(checkpoints, max_iter=40):
    @sc.function(sc.arg("x0", ()), sc.arg("a", ()),
                 outputs=sc.group(sc.arg("x", ()), sc.arg("count", INT)))
    def grown(x0, a):
        return sc.while_loop(below, grow, x0, max_iter=max_iter, params=(a,), index=True,
                             checkpoints=checkpoints)
    return grown


@pytest.mark.parametrize("checkpoints", [1, 2, 3, 5, 40])
@pytest.mark.parametrize("x0, a", [(0.2, 3.0), (0.05, 8.0), (5.0, 3.0)])
def test_checkpointed_while_matches_the_unrolled_steps(checkpoints, x0, a):
    fn = _grown(checkpoints)
    ref = _unrolled_grow(_grow_numpy(x0, a, 40)[1])
    args = [np.array(x0), np.array(a)]
    for inp in ("x0", "a"):
        check_derivatives(fn, ref, "x", inp, args)


@pytest.mark.parametrize("checkpoints", [1, 2, 4, 7])
def test_checkpointed_gradient_equals_the_stored_trajectory_one(checkpoints):
    args = [np.array(0.05), np.array(8.0)]
    for inp in ("x0", "a"):
        want = sc.gradient(_grown(None), "x", inp)(*args)
        got = sc.gradient(_grown(checkpoints), "x", inp)(*args)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def _counting(monkeypatch):
    """Counts of Stepper calls per Function name, and the chains reversed."""
    calls, chains = {}, []
    step_call, replay = lowering.Stepper.__call__, OnlineChain.replay

    def counted(self, args):
        calls[self.fn.name] = calls.get(self.fn.name, 0) + 1
        return step_call(self, args)

    def recorded(self, forward_step=None):
        twin = replay(self, forward_step)
        chains.append((self, twin))
        return twin

    monkeypatch.setattr(lowering.Stepper, "__call__", counted)
    monkeypatch.setattr(OnlineChain, "replay", recorded)
    return calls, chains


def _stretched(s):
    @sc.function(sc.arg("x", 2), sc.arg("p", ()), outputs=sc.arg("go", BOOL))
    def unfinished(x, p):
        return x.sum() < 200.0

    @sc.function(sc.arg("x", 2), sc.arg("p", ()))
    def stretch(x, p):
        return x * p + sc.stack([x[1], x[0]]).sin() * 0.1

    @sc.function(sc.arg("x0", 2), sc.arg("p", ()),
                 outputs=sc.group(sc.arg("y", ()), sc.arg("n", INT)))
    def run(x0, p):
        x, n = sc.while_loop(unfinished, stretch, x0, max_iter=500, params=(p,),
                             checkpoints=s)
        return (x * x).sum(), n
    return run


@pytest.mark.parametrize("s", [1, 2, 3, 6])
def test_forward_steps_and_stored_carries_follow_the_online_schedule(monkeypatch, s):
    """Stepped from Python (the C path turned off): the calls of each Function."""
    monkeypatch.setattr(lowering, "run_while_online_steps", lambda *a: None)
    monkeypatch.setattr(lowering, "run_online_reverse_steps", lambda *a: None)
    run = _stretched(s)
    args = [np.array([0.3, 0.1]), np.array(1.05)]
    n = int(run(*args)[1])
    assert n > 50
    grad = sc.gradient(run, "y", "x0")
    grad(*args)                                        # records the program
    calls, chains = _counting(monkeypatch)
    g = grad(*args)
    # every call of the step Function: the forward run and the recomputations
    assert calls["stretch"] == online_forward_steps(n, s)
    assert calls["stretch"] == checkpoint_cost(n, s, online=True)["forward_step_calls"]
    assert calls["stretch_rev"] == n                   # each step reversed once
    (forward, reversed_), = chains
    assert forward.n == n and len(forward._stored) <= s
    assert reversed_.stats["forward_steps"] == online_forward_steps(n, s)
    assert 1 <= reversed_.stats["max_snapshots"] <= s
    assert reversed_.stats["max_snapshots"] <= checkpoint_cost(n, s, online=True)[
        "peak_snapshots"]
    np.testing.assert_allclose(g, central(lambda v: run(v, args[1])[0], args[0]),
                               rtol=1e-7)


@pytest.mark.parametrize("s", [1, 2, 3, 6, 20])
def test_a_checkpointed_while_loop_of_float_values_runs_in_c(monkeypatch, s):
    """Forward run and reverse sweep in C (``_core.scalar_while_online``,
    ``_core.scalar_scan_checkpointed``): no Function called per step, the
    steps run exactly the online schedule's, the gradient the Python one."""
    run = _stretched(s)
    args = [np.array([0.3, 0.1]), np.array(1.05)]
    n = int(run(*args)[1])
    grad = sc.gradient(run, "y", "x0")
    g = grad(*args)
    calls, chains = _counting(monkeypatch)
    assert np.array_equal(grad(*args), g)
    assert calls == {} and chains == []
    back = next(nd.attrs["spec"] for nd in topo_order(grad.outputs)
                if nd.op == "scan" and nd.attrs["spec"].recompute is not None)
    sweep = back._derived["sweep"]
    assert sweep["forward_steps"] == online_forward_steps(n, s)
    assert sweep["forward_steps"] == sweep["predicted_forward_steps"]
    assert sweep["backward_steps"] == n and sweep["snapshots"] <= s
    monkeypatch.setattr(lowering, "run_while_online_steps", lambda *a: None)
    monkeypatch.setattr(lowering, "run_online_reverse_steps", lambda *a: None)
    python = sc.gradient(_stretched(s), "y", "x0")(*args)
    np.testing.assert_allclose(g, python, rtol=1e-14, atol=0)
    want = sc.gradient(_stretched(None), "y", "x0")(*args)
    np.testing.assert_allclose(g, want, rtol=1e-14, atol=0)


def test_online_chain_from_stored_refuses_other_steps():
    chain = OnlineChain(lambda x, i: x * 1.5, 1.0, s=3)
    chain.forward(lambda x: x < 100.0)
    stored = chain.stored_states()
    twin = OnlineChain.from_stored(lambda x, i: x * 1.5, stored, chain.final_state, chain.n, 3)
    assert twin.reverse(lambda x, i, adj: 1.5 * adj, 1.0) == 1.5 ** chain.n
    with pytest.raises(ValueError, match="not those the online rule keeps"):
        OnlineChain.from_stored(lambda x, i: x, {0: 1.0, 5: 2.0}, 3.0, chain.n, 3)


def test_the_gradient_reads_no_trajectory():
    grad = sc.gradient(_grown(3), "x", "a")
    loops = [n for n in topo_order(grad.outputs) if n.op == "while_loop"]
    spec = loops[0].attrs["spec"]
    assert {n.attrs["output"] for n in loops} == {spec.n_carry, spec.snapshot_output}
    # nothing of the loop's length: no stacked zero adjoint either
    assert all(n.size < 40 for n in topo_order(grad.outputs) if n.op == "const")
    text = sc.render_expr_assembly(grad)
    assert 'checkpoints=3' in text and 'callee="grow_rev", checkpoints=3' in text


def test_zero_steps_and_the_step_limit():
    for x0, a, max_iter in ((5.0, 3.0, 40), (0.2, 3.0, 0), (0.01, 40.0, 4)):
        fn, ref = _grown(2, max_iter), _unrolled_grow(_grow_numpy(x0, a, max_iter)[1])
        args = [np.array(x0), np.array(a)]
        assert int(fn(*args)[1]) == _grow_numpy(x0, a, max_iter)[1]
        for inp in ("x0", "a"):
            np.testing.assert_allclose(sc.gradient(fn, "x", inp)(*args),
                                       sc.gradient(ref, "x", inp)(*args), rtol=1e-14)


def test_tuple_carries_and_jax():
    @sc.function(sc.arg("x", ()), sc.arg("v", 2), sc.arg("h", ()), outputs=sc.arg("go", BOOL))
    def moving(x, v, h):
        return x < 3.0

    @sc.function(sc.arg("x", ()), sc.arg("v", 2), sc.arg("h", ()))
    def leap(x, v, h):
        return x + h * v[0], v + h * sc.stack([v[1], -x.sin()])

    def make(s):
        @sc.function(sc.arg("v0", 2), sc.arg("h", ()),
                     outputs=sc.group(sc.arg("e", ()), sc.arg("n", INT)))
        def orbit(v0, h):
            (x, v), n = sc.while_loop(moving, leap, (sc.const(0.0), v0), max_iter=300,
                                      params=(h,), checkpoints=s)
            return x * v[0] + (v * v).sum(), n
        return orbit

    args = [np.array([1.0, 0.2]), np.array(0.05)]
    n = int(make(None)(*args)[1])
    for inp in ("v0", "h"):
        want = sc.gradient(make(None), "e", inp)(*args)
        np.testing.assert_allclose(sc.gradient(make(4), "e", inp)(*args), want,
                                   rtol=1e-14, atol=1e-15)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def orbit(v0, h):                         # the same n steps, as a fori_loop
        def body(_, c):
            x, v = c
            return x + h * v[0], v + h * jnp.stack([v[1], -jnp.sin(x)])
        x, v = jax.lax.fori_loop(0, n, body, (0.0, v0))
        return x * v[0] + (v * v).sum()

    np.testing.assert_allclose(sc.gradient(make(4), "e", "v0")(*args),
                               jax.grad(orbit)(*args), rtol=1e-13)
    np.testing.assert_allclose(sc.gradient(make(4), "e", "h")(*args),
                               jax.grad(orbit, argnums=1)(*args), rtol=1e-13)


def test_max_trajectory_counts_the_stored_carries():
    @sc.function(sc.arg("x", 4), sc.arg("u", ()), outputs=sc.arg("go", BOOL))
    def small(x, u):
        return x.sum() < 100.0

    @sc.function(sc.arg("x", 4), sc.arg("u", ()))
    def inflate(x, u):
        return x * 1.01 + u

    def run_with(limit):
        @sc.function(sc.arg("x0", 4), sc.arg("u", ()), outputs=sc.arg("y", ()))
        def run(x0, u):
            return sc.while_loop(small, inflate, x0, max_iter=10000, params=(u,),
                                 checkpoints=5, max_trajectory=limit)[0].sum()
        return run

    args = [np.ones(4), np.array(0.01)]
    np.testing.assert_allclose(sc.gradient(run_with(20), "y", "u")(*args),
                               sc.gradient(run_with(None), "y", "u")(*args), rtol=1e-14)
    with pytest.raises(ValueError, match="max_trajectory=19"):
        sc.gradient(run_with(19), "y", "u")(*args)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError),
                                        (1.5, ValueError), (True, ValueError)])
def test_bad_checkpoints_are_refused(bad, error):
    with pytest.raises(error, match="checkpoints"):
        _grown(bad)


def test_replay_keeps_the_forward_run():
    chain = OnlineChain(lambda x, i: x * 1.5, 1.0, s=3)
    chain.forward(lambda x: x < 100.0)
    first = chain.replay().reverse(lambda x, i, adj: 1.5 * adj, 1.0)
    again = chain.reverse(lambda x, i, adj: 1.5 * adj, 1.0)
    assert first == again == 1.5 ** 12
    with pytest.raises(RuntimeError, match="forward"):
        OnlineChain(lambda x, i: x, 1.0, s=2).replay()
    assert tapead.checkpoint_cost is checkpoint_cost
