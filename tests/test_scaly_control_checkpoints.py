"""``sc.scan(..., checkpoints=s)`` reversed in C: the backward loop's primal
steps recomputed under revolve by the scalarized primal body and each
executed step reversed by the scalarized backward body
(``_core.scalar_scan_checkpointed``, ``tapead.scaly.control.scalar``): the
gradient equals the stored-trajectory one, the steps recomputed are exactly
revolve's ``t(T, s)``, and nothing of the loop's length but its inputs and
outputs is held."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import tapead.scaly as sc
from tapead import _core
from tapead.checkpointing import optimal_forward_steps
from tapead.scaly.graphs import topo_order
from test_scaly_control_loops import INT, check_derivatives

H = 0.1
X0 = np.array([1.0, 0.0])


def _rollout(T, checkpoints, reverse=False):
    """The double integrator of the control-flow page, cost sum |x_k|^2."""
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def model(x, u):
        return x + H * sc.stack([x[1], u]), sc.sumsqr(x)

    @sc.function(sc.arg("x0", 2), sc.arg("controls", T),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def rollout(x0, controls):
        final, (costs,) = sc.scan(model, x0, (controls,), length=T, reverse=reverse,
                                  checkpoints=checkpoints)
        return final, costs.sum()
    return rollout


def _hand_adjoint(u, reverse=False):
    """d cost / d u by the hand-written adjoint recurrence (numpy)."""
    T = len(u)
    order = range(T - 1, -1, -1) if reverse else range(T)
    x = [X0]
    for k in order:
        x.append(x[-1] + H * np.array([x[-1][1], u[k]]))
    lam, g = np.zeros(2), np.zeros(T)
    for i, k in reversed(list(enumerate(order))):
        g[k] = H * lam[1]
        lam = 2.0 * x[i] + np.array([lam[0], H * lam[0] + lam[1]])
    return g


def _backward_spec(fn):
    """The checkpointed backward loop of a gradient Function."""
    return next(n.attrs["spec"] for n in topo_order(fn.outputs)
                if n.op == "scan" and n.attrs["spec"].recompute is not None)


@pytest.mark.parametrize("T, s", [(1, 1), (7, 1), (7, 3), (50, 2), (200, 10), (30, 40)])
@pytest.mark.parametrize("reverse", [False, True])
def test_checkpointed_gradient_in_c_is_the_stored_one_and_revolves_count(T, s, reverse):
    u = np.sin(np.linspace(0.0, 5.0, T))
    stored = sc.gradient(_rollout(T, None, reverse), "cost", "controls")(X0, u)
    grad = sc.gradient(_rollout(T, s, reverse), "cost", "controls")
    got = grad(X0, u)
    np.testing.assert_allclose(got, stored, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(got, _hand_adjoint(u, reverse), rtol=1e-12, atol=1e-13)
    sweep = _backward_spec(grad)._derived["sweep"]      # set only by the C sweep
    assert sweep["forward_steps"] == optimal_forward_steps(T, min(s, T))
    assert sweep["forward_steps"] == sweep["predicted_forward_steps"]
    assert sweep["backward_steps"] == T and sweep["snapshots"] == min(s, T)


def test_checkpointed_gradient_with_respect_to_the_initial_carry_and_derivatives():
    T = 6
    fn, ref = _rollout(T, 2), _rollout(T, None)
    args = [np.array([0.3, -0.2]), np.linspace(-1.0, 1.0, T)]
    for inp in ("x0", "controls"):
        check_derivatives(fn, ref, "cost", inp, args)
    assert "sweep" in _backward_spec(sc.gradient(fn, "cost", "x0"))._derived


def test_index_trip_window_and_broadcast_run_in_c():
    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("w", 2), sc.arg("p", ()))
    def step(c, k, w, p):
        return (c * w[0]).sin() + p * w[1] * k, c * c * p

    def make(checkpoints):
        @sc.function(sc.arg("c0", ()), sc.arg("z", 7), sc.arg("p", ()), sc.arg("t", INT),
                     outputs=sc.arg("cost", ()))
        def run(c0, z, p, t):
            last, (ys,) = sc.scan(step, c0, (sc.window(z, 0, 1), sc.broadcast(p)),
                                  length=6, index=True, reverse=True, trip=t,
                                  checkpoints=checkpoints)
            return last * ys.sum()
        return run

    z = np.array([0.9, -1.2, 0.5, 1.3, 0.7, -0.4, 1.1])
    for inp in ("c0", "z", "p"):
        grad = sc.gradient(make(2), "cost", inp)
        want = sc.gradient(make(None), "cost", inp)(0.4, z, 0.6, np.int64(4))
        np.testing.assert_allclose(grad(0.4, z, 0.6, np.int64(4)), want, rtol=1e-14,
                                   atol=1e-15)
        sweep = _backward_spec(grad)._derived["sweep"]
        assert sweep["forward_steps"] == optimal_forward_steps(4, 2)


def _peak_bytes(fn, *args):
    fn(*args)                                            # recorded and warmed up
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpointed_gradient_holds_no_trajectory():
    """Bytes per step: the checkpointed gradient holds its inputs and outputs
    (a few float64 arrays of length T) and ``s`` carries; the stored one also
    the trajectory of every step."""
    T, s = 20_000, 10
    u = np.sin(np.linspace(0.0, 5.0, T))
    ck = _peak_bytes(sc.gradient(_rollout(T, s), "cost", "controls"), X0, u)
    stored = _peak_bytes(sc.gradient(_rollout(T, None), "cost", "controls"), X0, u)
    trajectory = T * X0.nbytes
    assert ck < 8 * 8 * T                          # at most eight float64 arrays of length T
    assert ck + trajectory < stored


def test_scalar_scan_checkpointed_refuses_bad_arguments():
    fwd, back = _core.Tape(), _core.Tape()
    c, x = fwd.input(0.5), fwd.input(2.0)
    c2 = c * x
    fwd.active = False
    g, cb, xb = back.input(1.0), back.input(0.5), back.input(2.0)
    gc = g * xb
    back.active = False
    xs, ys = np.array([[2.0], [3.0], [4.0]]), np.zeros((3, 1))

    def call(**over):
        args = dict(fwd=fwd, fwd_carry_in=[c.idx], fwd_x_in=[x.idx], fwd_x_cols=[0],
                    fwd_outs=[c2.idx], fwd_consts=[0.0], back=back,
                    back_carry_in=[g.idx, cb.idx], back_x_in=[xb.idx], back_x_cols=[0],
                    back_outs=[gc.idx, -1], back_consts=[0.0, 7.0], xs=xs,
                    params=np.zeros(0), carry0=np.array([0.5]), adjoint=np.array([1.0]),
                    ys=ys, steps=np.arange(3, dtype=np.intp), s=2)
        args.update(over)
        return _core.scalar_scan_checkpointed(*args.values())

    adjoint = np.array([1.0])
    assert call(adjoint=adjoint) == optimal_forward_steps(3, 2)
    assert adjoint[0] == 2.0 * 3.0 * 4.0 and ys[:, 0].tolist() == [7.0, 7.0, 7.0]
    with pytest.raises(ValueError, match="s counts the stored carries"):
        call(s=0)
    with pytest.raises(ValueError, match="step 3 is outside"):
        call(steps=np.array([3], dtype=np.intp))
    with pytest.raises(ValueError, match="column 1 is not in xs"):
        call(fwd_x_cols=[1])
    with pytest.raises(ValueError, match="nb \\+ nc carries"):
        call(back_carry_in=[g.idx])
    with pytest.raises(ValueError, match="is not a scalar input"):
        call(fwd_carry_in=[c2.idx])


# ---------------------------------------------------------------------------
# forward over reverse (Hessians) keeps the checkpoints
# ---------------------------------------------------------------------------

def _trajectories_read(fn):
    """(loop, output) of every trajectory output a derivative Function reads."""
    out = []
    for n in topo_order(fn.outputs):
        if n.op in ("scan", "while_loop"):
            spec, k = n.attrs["spec"], n.attrs["output"]
            if k >= spec.traj_offset and k != spec.snapshot_output:
                out.append((spec.name, k))
    return out


def _checkpointed_loops(fn):
    return [n.attrs["spec"] for n in topo_order(fn.outputs)
            if n.op == "scan" and n.attrs["spec"].recompute is not None]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inp", ["controls", "x0"])
def test_hessian_through_a_checkpointed_scan_stores_no_trajectory(inp, reverse):
    T, s = 9, 3
    args = [np.array([0.3, -0.2]), np.linspace(-1.0, 1.0, T)]
    hess = sc.hessian(_rollout(T, s, reverse), "cost", inp)
    want = sc.hessian(_rollout(T, None, reverse), "cost", inp)
    np.testing.assert_allclose(hess(*args), want(*args), rtol=1e-13, atol=1e-13)
    assert _trajectories_read(hess) == []
    assert _trajectories_read(want) != []          # what storing looks like
    loops = _checkpointed_loops(hess)
    # each recomputes the primal's tangent loop: carries (x, dx)
    assert loops and all(sp.recompute.body.name.startswith("model_fwd")
                         and sp.recompute.n_carry == 2 for sp in loops)
    for sp in loops:                           # in C, revolve's count exactly
        assert sp._derived["sweep"]["forward_steps"] == optimal_forward_steps(T, s)


def test_batched_forward_over_a_checkpointed_gradient_stores_no_trajectory(monkeypatch):
    monkeypatch.setenv("TAPEAD_STRICT_JVP_MANY", "1")
    T = 8
    args = [np.array([0.3, -0.2]), np.linspace(-1.0, 1.0, T)]
    seeds = np.random.default_rng(1).normal(size=(3, T))
    got, want = [], []
    for ck, out in ((2, got), (None, want)):
        grad = sc.gradient(_rollout(T, ck), "cost", "controls")
        fwd = sc.forward(grad, grad.output_names[0], "controls", directions=3)
        out.append(fwd(*args, seeds))
        if ck is not None:
            assert _trajectories_read(fwd) == []
            assert all(sp.name.endswith("_fwd3_ck") for sp in _checkpointed_loops(fwd))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)


def test_hessian_through_a_checkpointed_while_loop_stores_no_trajectory():
    from test_scaly_control_online import _grown, _stretched
    args = [np.array([0.3, 0.1]), np.array(1.05)]
    for inp in ("x0", "p"):
        hess = sc.hessian(_stretched(3), "y", inp)
        want = sc.hessian(_stretched(None), "y", inp)(*args)
        np.testing.assert_allclose(hess(*args), want, rtol=1e-12, atol=1e-12)
        assert _trajectories_read(hess) == []
    for inp in ("x0", "a"):                  # index=True: stepped from Python
        hess = sc.hessian(_grown(2), "x", inp)
        want = sc.hessian(_grown(None), "x", inp)(np.array(0.2), np.array(3.0))
        np.testing.assert_allclose(hess(np.array(0.2), np.array(3.0)), want, rtol=1e-12,
                                   atol=1e-13)
        assert _trajectories_read(hess) == []


def test_index_trip_window_and_broadcast_hessians_keep_the_checkpoints():
    from test_scaly_control_combined import CASES, _make
    for index, reverse, trip, checkpoints, stride in CASES:
        if checkpoints is None:
            continue
        fn, nz = _make(index, reverse, trip, checkpoints, stride, unrolled=False)
        for inp in ("a0", "b0", "z", "us", "p"):
            assert _trajectories_read(sc.hessian(fn, "cost", inp)) == []


@pytest.mark.parametrize("s", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("limit", [0, 1, 7, 100, 1000])
def test_scalar_while_online_keeps_the_online_rules_carries(s, limit):
    from tapead import _revolve
    body, cond = _core.Tape(), _core.Tape()
    x, a = body.input(0.5), body.input(2.0)
    nxt = x * 1.01 + 0.001
    body.active = False
    cx, ca = cond.input(0.5), cond.input(2.0)
    cond.active = False
    carry = np.array([0.5])
    n, steps, stored = _core.scalar_while_online(
        body, [x.idx, a.idx], [nxt.idx], [0.0], cond, [cx.idx, ca.idx], [cx.idx, ca.idx],
        [0.0, 0.0], "lt", carry, np.array([1e9]), limit, s)
    xs = [0.5]
    for _ in range(n):
        xs.append(xs[-1] * 1.01 + 0.001)
    assert n == limit and carry[0] == xs[-1]
    assert steps.tolist() == _revolve.online_segments(n, s).tolist()
    assert stored[:, 0].tolist() == [xs[k] for k in steps]
    with pytest.raises(ValueError, match="s counts the stored carries"):
        _core.scalar_while_online(body, [x.idx, a.idx], [nxt.idx], [0.0], cond,
                                  [cx.idx, ca.idx], [cx.idx, ca.idx], [0.0, 0.0], "lt",
                                  carry, np.array([1e9]), limit, 0)


def test_forward_over_a_checkpointed_gradient_along_the_seed_only():
    """A direction that moves only the backward loop's seed (not the primal's
    operands): the primal's tangent loop runs with zero tangents."""
    def make(ck):
        @sc.function(sc.arg("c", ()), sc.arg("x", ()))
        def step(c, x):
            return (c * x).sin() + 0.5 * c, c * c

        @sc.function(sc.arg("c0", ()), sc.arg("xs", 5), sc.arg("w", ()),
                     outputs=sc.arg("out", ()))
        def run(c0, xs, w):
            last, (ys,) = sc.scan(step, c0, (xs,), length=5, checkpoints=ck)
            return w * last * last + (w * ys).sum()
        return run

    args = [np.array(0.4), np.linspace(0.1, 1.0, 5), np.array(1.7)]
    got = []
    for ck in (2, None):
        grad = sc.gradient(make(ck), "out", "c0")
        jac = sc.jacobian(grad, grad.output_names[0], "w")
        got.append(jac(*args))
        if ck is not None:
            assert _trajectories_read(jac) == []
    np.testing.assert_allclose(got[0], got[1], rtol=1e-14, atol=0)
    np.testing.assert_allclose(got[0].ravel(), sc.gradient(make(None), "out", "c0")(*args)
                               / args[2], rtol=1e-14)        # linear in w
