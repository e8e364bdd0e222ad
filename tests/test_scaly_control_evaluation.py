"""How loops are evaluated and differentiated beyond the basic rules: batched
forward mode, revolve checkpoints, grouped reverse passes and the C step
loops (``_core.scalar_scan``, ``_core.scalar_while``)."""
from __future__ import annotations

import numpy as np
import pytest

import tapead.scaly as sc
from tapead.scaly.graphs import topo_order
from test_scaly_control_loops import (INT, XS, _grow_numpy, _scan_fn, _sine_numpy,
                                      _unrolled_grow, _while_fn, check_derivatives)


# ---------------------------------------------------------------------------
# batched forward mode: one tangent loop for all directions
# ---------------------------------------------------------------------------

def test_batched_forward_through_loops_matches_one_direction_at_a_time(monkeypatch):
    monkeypatch.setenv("TAPEAD_STRICT_JVP_MANY", "1")       # no per-direction fallback

    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("w", 2), sc.arg("x", ()),
                 sc.arg("p", ()))
    def step(c, k, w, x, p):
        return (c * w[0]).sin() + p * w[1] * x, c * x * p

    @sc.function(sc.arg("c0", ()), sc.arg("z", 6), sc.arg("xs", 4), sc.arg("p", ()),
                 sc.arg("t", INT),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", 4)))
    def run(c0, z, xs, p, t):
        last, (ys,) = sc.scan(step, c0, (sc.window(z, 1, 1), xs, sc.broadcast(p)),
                              length=4, index=True, trip=t, reverse=True)
        return last, ys

    args = [np.array(0.4), np.array([0.9, -1.2, 0.5, 1.3, 0.7, -0.3]),
            np.array([0.3, -0.6, 1.1, 0.8]), np.array(0.6), np.int64(3)]
    rng = np.random.default_rng(3)
    for out in ("last", "ys"):
        for j, inp in enumerate(("c0", "z", "xs", "p")):
            seeds = rng.normal(size=(3,) + np.shape(args[j]))
            many = sc.forward(run, out, inp, directions=3)(*args, seeds)
            one = sc.forward(run, out, inp)
            monkeypatch.delenv("TAPEAD_STRICT_JVP_MANY")
            want = np.stack([one(*args, s) for s in seeds])
            monkeypatch.setenv("TAPEAD_STRICT_JVP_MANY", "1")
            np.testing.assert_allclose(many, want, rtol=1e-14, atol=1e-15)
    # Jacobians and Hessians use the batched pass: no error in strict mode
    fn = _while_fn(30)
    ref = _unrolled_grow(_grow_numpy(0.2, 3.0, 30)[1])
    check_derivatives(fn, ref, "x", "a", [np.array(0.2), np.array(3.0)])


# ---------------------------------------------------------------------------
# checkpoints=: revolve instead of the stored trajectory
# ---------------------------------------------------------------------------

def _checkpointed_fn(checkpoints, reverse):
    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("w", 2), sc.arg("p", ()))
    def step(c, k, w, p):
        return (c * w[0]).sin() + p * w[1] * k, c * c * p

    @sc.function(sc.arg("c0", ()), sc.arg("z", 7), sc.arg("p", ()), sc.arg("t", INT),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("cost", ())))
    def run(c0, z, p, t):
        last, (ys,) = sc.scan(step, c0, (sc.window(z, 0, 1), sc.broadcast(p)), length=6,
                              index=True, reverse=reverse, trip=t, checkpoints=checkpoints)
        return last, last * ys.sum()
    return run


@pytest.mark.parametrize("checkpoints", [1, 2, 3, 6, 10])
@pytest.mark.parametrize("reverse", [False, True])
def test_checkpointed_scan_matches_the_stored_trajectory(checkpoints, reverse):
    fn, ref = _checkpointed_fn(checkpoints, reverse), _checkpointed_fn(None, reverse)
    z = np.array([0.9, -1.2, 0.5, 1.3, 0.7, -0.4, 1.1])
    for t in (0, 4, 6):
        args = [np.array(0.4), z, np.array(0.6), np.int64(t)]
        for inp in ("c0", "z", "p"):
            for out in ("last", "cost"):
                check_derivatives(fn, ref, out, inp, args)


def test_checkpointed_reverse_recomputes_steps_by_revolve(capsys):
    from tapead.checkpointing import optimal_forward_steps

    @sc.function(sc.arg("c", ()), sc.arg("x", ()))
    def loud_step(c, x):
        return sc.print("step {}", x) + (c * x).sin()

    def run_with(checkpoints):
        @sc.function(sc.arg("c0", ()), sc.arg("xs", 10), outputs=sc.arg("last", ()))
        def run(c0, xs):
            return sc.scan(loud_step, c0, (xs,), length=10, checkpoints=checkpoints)[0]
        return run

    xs = np.linspace(0.1, 1.0, 10)
    grads = []
    for s in (3, None):
        grad = sc.gradient(run_with(s), "last", "c0")
        capsys.readouterr()
        grads.append(float(grad(0.5, xs)))
        lines = capsys.readouterr().out.splitlines()
        # the backward body does not read the printed value, so every line is
        # a primal step: t(10, 3) + 1 with revolve, 10 with the trajectory
        assert len(lines) == (optimal_forward_steps(10, 3) + 1 if s else 10)
    assert grads[0] == grads[1]
    text = sc.render_expr_assembly(sc.gradient(run_with(3), "last", "c0"))
    assert 'callee="loud_step_rev", checkpoints=3, length=10' in text


def test_max_trajectory_counts_the_checkpoints():
    @sc.function(sc.arg("x", 4), sc.arg("u", ()))
    def decay(x, u):
        return x * 0.9 + u, (x * x).sum()

    def run_with(limit):
        @sc.function(sc.arg("x0", 4), sc.arg("us", 200), outputs=sc.arg("cost", ()))
        def run(x0, us):
            final, (c,) = sc.scan(decay, x0, (us,), length=200, checkpoints=5,
                                  max_trajectory=limit)
            return c.sum()
        return run

    sc.gradient(run_with(20), "cost", "us")                  # 5 carries of 4 elements
    with pytest.raises(ValueError, match="5 steps x \\(4\\) carry elements = 20 elements, "
                       "more than max_trajectory=19"):
        sc.gradient(run_with(19), "cost", "us")
    with pytest.raises(ValueError, match="checkpoints counts the stored carries"):
        sc.scan(decay, sc.sym("x0", 4), (sc.sym("us", 3),), length=3, checkpoints=0)


def test_several_outputs_of_a_loop_are_reversed_in_one_backward_loop():
    fn = _scan_fn(5)
    grad = sc.gradient(fn, "cost", "xs")         # cost = last * ys.sum(): two outputs
    backward = [n for n in topo_order(grad.outputs)
                if n.op == "scan" and n.attrs["callee"] == "sine_step_rev"]
    assert len({id(n.attrs["spec"]) for n in backward}) == 1
    assert len({tuple(o.id for o in n.operands) for n in backward}) == 1


# ---------------------------------------------------------------------------
# scalar bodies run in C
# ---------------------------------------------------------------------------

def test_a_body_of_float_values_runs_its_steps_in_c():
    fn = _scan_fn(len(XS), reverse=True)
    last, ys, _ = fn(0.8, XS)
    spec = next(n for n in topo_order(fn.outputs) if n.op == "scan").attrs["spec"]
    assert spec._derived["scalar_plan"] is not None    # _core.scalar_scan ran the steps
    ref_last, ref_ys = _sine_numpy(0.8, XS, range(len(XS) - 1, -1, -1))
    assert float(last) == pytest.approx(ref_last, rel=1e-15)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-15)

    @sc.function(sc.arg("c", ()), sc.arg("x", ()))
    def printing(c, x):
        return (sc.print("{}", c) * x).sin() + x, c * c * x

    @sc.function(sc.arg("c0", ()), sc.arg("xs", len(XS)), outputs=sc.arg("last", ()))
    def mixed(c0, xs):
        return sc.scan(printing, c0, (xs,), length=len(XS))[0]
    # an object node (the print) in the body: the steps run from Python
    assert float(mixed(0.8, XS)) == pytest.approx(_sine_numpy(0.8, XS, range(5))[0],
                                                  rel=1e-15)
    spec = next(n for n in topo_order(mixed.outputs) if n.op == "scan").attrs["spec"]
    assert spec._derived["scalar_plan"] is None


def test_scalar_scan_refuses_bad_arguments():
    from tapead import _core
    tape = _core.Tape()
    c, x = tape.input(0.5), tape.input(2.0)
    y = c * x + 1.0
    tape.active = False
    ids = [c.idx, x.idx]
    args = dict(out_consts=[0.0], carry=np.array([0.5]), xs=np.ones((3, 1)),
                ys=np.zeros((3, 0)), traj=np.zeros((3, 1)),
                steps=np.arange(3, dtype=np.intp))
    _core.scalar_scan(tape, ids, [y.idx], **args)
    assert args["carry"][0] == ((0.5 * 1 + 1) * 1 + 1) * 1 + 1
    assert args["traj"][:, 0].tolist() == [0.5, 1.5, 2.5]
    with pytest.raises(ValueError, match="nc \\+ nx inputs"):
        _core.scalar_scan(tape, ids[:1], [y.idx], **args)
    with pytest.raises(ValueError, match="step 3 is outside"):
        _core.scalar_scan(tape, ids, [y.idx], **dict(args, steps=np.array([3], np.intp)))
    with pytest.raises(ValueError, match="is not a scalar input"):
        _core.scalar_scan(tape, [y.idx, x.idx], [y.idx], **args)
    arrays = _core.Tape()
    v = arrays.input(np.ones(2))
    w = (v * 2.0).sum()
    arrays.active = False
    with pytest.raises(ValueError, match="is not a scalar node"):
        _core.scalar_scan(arrays, [v.idx, v.idx], [w.idx], **args)


def test_scalarize_rewrites_array_ops_as_scalar_ops():
    from tapead.scaly.control.scalarize import scalarize

    @sc.function(sc.arg("A", (2, 3)), sc.arg("v", 3), sc.arg("s", ()))
    def arrays(A, v, s):
        w = A @ v + s * v[:2]
        M = sc.stack([v, v * v]).T                  # (3, 2)
        return (M @ w).sin(), A.sum(axis=0) * w.sum() + (v / s) ** 2.0, (A.T @ w).tanh()

    scalar = scalarize(arrays)
    assert all(n.shape == () for n in scalar.inputs + scalar.outputs)
    rng = np.random.default_rng(5)
    A, v, s = rng.normal(size=(2, 3)), rng.normal(size=3), np.array(0.7)
    want = np.concatenate([np.ravel(o) for o in arrays(A, v, s)])
    got = np.array(scalar.evaluate(list(A.ravel()) + list(v) + [s]), dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)

    @sc.function(sc.arg("x", 3))
    def printing(x):
        return sc.print("{}", x) * 2.0
    assert scalarize(printing) is None                # a print: stepped from Python
    from scaly_control_programs import rollout
    rollout(np.array([1.0, 0.0]), np.zeros(20))
    spec = next(n for n in topo_order(rollout.outputs) if n.op == "scan").attrs["spec"]
    assert spec._derived["scalar_plan"] is not None   # the rollout's steps run in C


def test_a_while_loop_of_float_values_runs_in_c():
    from scaly_control_programs import root
    assert float(root(2.0)) == 1.414213562373095
    spec = next(n for n in topo_order(root.outputs) if n.op == "while_loop").attrs["spec"]
    assert spec._derived["while_plan"] is not None     # _core.scalar_while ran it
    fn = _while_fn(30)               # index=True in the condition: stepped from Python
    x, count = fn(0.2, 3.0)
    assert (float(x), int(count)) == pytest.approx(_grow_numpy(0.2, 3.0, 30), rel=1e-15)
    spec = next(n for n in topo_order(fn.outputs) if n.op == "while_loop").attrs["spec"]
    assert spec._derived.get("while_plan") is None


def test_scalar_while_refuses_bad_arguments():
    from tapead import _core
    body, cond = _core.Tape(), _core.Tape()
    x, a = body.input(0.5), body.input(2.0)
    nxt = x * 2.0
    body.active = False
    cx, ca = cond.input(0.5), cond.input(2.0)
    cond.active = False
    args = [body, [x.idx, a.idx], [nxt.idx], [0.0], cond, [cx.idx, ca.idx],
            [cx.idx, ca.idx], [0.0, 0.0]]
    carry = np.array([0.5])
    count = _core.scalar_while(*args, "lt", carry, np.array([3.0]), np.zeros((10, 1)), 10)
    assert (count, carry[0]) == (3, 4.0)                # 0.5 -> 1 -> 2 -> 4
    with pytest.raises(ValueError, match="comparison 'less' is not one of"):
        _core.scalar_while(*args, "less", carry, np.array([3.0]), np.zeros((0, 1)), 10)
    with pytest.raises(ValueError, match="traj needs max_iter rows"):
        _core.scalar_while(*args, "lt", carry, np.array([3.0]), np.zeros((2, 1)), 10)
    with pytest.raises(ValueError, match="take nc \\+ np inputs"):
        _core.scalar_while(*args, "lt", carry, np.zeros(0), np.zeros((0, 1)), 10)


def test_sparse_derivatives_and_mapped_calls_through_loops():
    from scaly_control_programs import rollout, root
    x0, u = np.array([0.3, -0.2]), np.linspace(-1.0, 1.0, 20)
    sparse = sc.sparse_hessian(rollout, "cost", "controls")
    H = sc.hessian(rollout, "cost", "controls")(x0, u)
    pattern = sparse.output_sparsities[0]
    assert pattern.nnz == 19 * 19                # the last control does not reach the cost
    assert np.all(H[19] == 0.0) and np.all(H[:, 19] == 0.0)
    np.testing.assert_allclose(sparse(x0, u), H[pattern.row, pattern.col], rtol=1e-13,
                               atol=1e-14)

    @sc.function(sc.arg("a", 3), outputs=sc.arg("roots", 3))
    def roots(a):
        return sc.vmap(root, 3, [a])
    a = np.array([2.0, 3.0, 5.0])
    want = np.array([float(root(v)) for v in a])     # Newton stops at |x^2 - a| < 1e-12
    np.testing.assert_allclose(roots(a), want, rtol=1e-15)
    np.testing.assert_allclose(sc.jacobian(roots, "roots", "a")(a),
                               np.diag([float(sc.gradient(root, "root", "a")(v)) for v in a]),
                               rtol=1e-15, atol=1e-15)


def test_a_scan_pattern_follows_the_steps():
    from scaly_control_programs import rollout
    pattern = sc.jacobian_sparsity(rollout.outputs[0], rollout.input("controls")).to_mask()
    # the position after 20 steps does not depend on the last control yet
    assert pattern.astype(int).tolist() == [[1] * 19 + [0], [1] * 20]


def test_a_body_reading_the_step_number_in_float_arithmetic_runs_in_c():
    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("x", ()))
    def counted(c, k, x):
        return (c * x).sin() + 0.5 * k, c * k

    @sc.function(sc.arg("c0", ()), sc.arg("xs", 5),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", 5)))
    def run(c0, xs):
        last, (ys,) = sc.scan(counted, c0, (xs,), length=5, index=True, reverse=True)
        return last, ys

    c, ys = 0.8, np.zeros(5)
    for k in range(4, -1, -1):
        ys[k] = c * k
        c = np.sin(c * XS[k]) + 0.5 * k
    last, got = run(0.8, XS)
    assert float(last) == pytest.approx(c, rel=1e-15)
    np.testing.assert_allclose(got, ys, rtol=1e-15)
    spec = next(n for n in topo_order(run.outputs) if n.op == "scan").attrs["spec"]
    assert spec._derived["scalar_plan"] is not None

    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("x", ()))
    def integer_use(c, k, x):
        return c * x + (k * 2) * 1.0                 # an int64 product: from Python
    @sc.function(sc.arg("c0", ()), sc.arg("xs", 5), outputs=sc.arg("last", ()))
    def run_int(c0, xs):
        return sc.scan(integer_use, c0, (xs,), length=5, index=True)[0]
    c = 0.8
    for k in range(5):
        c = c * XS[k] + 2.0 * k
    assert float(run_int(0.8, XS)) == pytest.approx(c, rel=1e-15)
    spec = next(n for n in topo_order(run_int.outputs) if n.op == "scan").attrs["spec"]
    assert spec._derived["scalar_plan"] is None
