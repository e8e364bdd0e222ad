"""The tape itself: layout, sweeps, depth, replay and guards."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapead as ta
from tapead.program import Program
import tapead.numpy as tnp
from tapead import _core
from tapead._core import Tape


def test_20000_deep_chain_has_no_recursion_limit():
    def chain(x):
        for _ in range(20000):
            x = tnp.sin(x)
        return x
    g = ta.grad(chain)(0.5)
    # reference by the same chain rule in plain floats
    x, d = 0.5, 1.0
    for _ in range(20000):
        d *= np.cos(x)
        x = np.sin(x)
    assert g == pytest.approx(d, rel=1e-12)
    # and the same depth in array code (Python-ruled nodes)
    def achain(x):
        for _ in range(20000):
            x = x * 1.0001 + 0.0
        return tnp.sum(x)
    np.testing.assert_allclose(ta.grad(achain)(np.ones(2)), 1.0001 ** 20000 * np.ones(2))


def test_33_nodes_with_2_to_30_paths_take_33_steps():
    def doubling(x, y):
        z = x * y                  # nodes 0, 1 (inputs) and 2
        for _ in range(30):
            z = z + z              # each node has two edges to the previous one
        return z
    rec = ta.record(doubling, 1.0, 1.0)
    assert rec.n_nodes == 33
    value, (gx, gy) = rec.value_and_grad(1.0, 1.0)
    assert value == 2.0 ** 30 and gx == 2.0 ** 30 and gy == 2.0 ** 30
    prog = Program.record(doubling, (1.0, 1.0), {}, (0, 1), "t")
    assert prog.gradients([prog.out.idx], [1.0]) == (2.0 ** 30, 2.0 ** 30)
    assert prog.tape.last_sweep_steps == 33     # every node visited once


def test_scalar_node_layout_is_36_bytes():
    assert Tape.bytes_per_scalar_node == 36
    t = Tape()
    x = t.input(2.0)
    y = t.input(3.0)
    z = x * y
    op, a, b, val, p0, p1 = t.node(z.idx)
    assert (op, a, b, val, p0, p1) == (_core.OPCODES["mul"], x.idx, y.idx, 6.0, 3.0, 2.0)
    w = z * 4.0                            # constant operand: b = -1, constant in p1
    op, a, b, val, p0, p1 = t.node(w.idx)
    assert (op, a, b, val, p0, p1) == (_core.CONST_OPCODES["mulc"], z.idx, -1, 24.0, 4.0, 4.0)
    mem = t.memory()
    assert mem["index"] + mem["values"] == mem["total"]
    assert mem["values"] == 2 * 24        # two scalar ops: value and two partials each


def test_core_runs_without_the_numpy_layer():
    """Layer 0 alone: load tapead._core with an empty tapead package."""
    pkg = os.path.dirname(os.path.dirname(_core.__file__))
    code = textwrap.dedent(f"""
        import sys, types, importlib
        pkg = types.ModuleType("tapead")
        pkg.__path__ = [{os.path.join(pkg, 'tapead')!r}]
        sys.modules["tapead"] = pkg
        core = importlib.import_module("tapead._core")
        assert "tapead._prims" not in sys.modules and "tapead.transforms" not in sys.modules
        t = core.Tape()
        x, y = t.input(1.0), t.input(2.0)
        out = x * y + core.sin(x)
        t.active = False
        gx, gy = t.backward([out.idx], [1.0], [x.idx, y.idx])
        assert abs(gx - 2.5403023058681398) < 1e-15 and gy == 1.0, (gx, gy)
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "ok", res.stderr


def test_forward_sweep_carries_k_directions():
    t = Tape()
    x, y = t.input(0.3), t.input(-1.2)
    out = tnp.sin(x * y) + y
    t.active = False
    K = 3
    seeds = {x.idx: np.array([1.0, 0.0, 2.0]), y.idx: np.array([0.0, 1.0, 3.0])}
    (tan,) = t.forward_sweep(seeds, [out.idx], K)
    c = np.cos(0.3 * -1.2)
    J = np.array([c * -1.2, c * 0.3 + 1.0])
    np.testing.assert_allclose(tan, [J[0], J[1], 2 * J[0] + 3 * J[1]], rtol=1e-15)


def test_replay_at_new_inputs_without_python():
    calls = []

    def f(x, y):
        calls.append(1)
        return x * tnp.exp(y) - tnp.sqrt(x)
    rec = ta.record(f, 2.0, 0.5)
    v, (gx, gy) = rec.value_and_grad(3.0, -0.25)
    assert calls == [1, 1]         # recorded twice (value, gradient), then only replayed
    rec(1.0, 2.0)
    rec.value_and_grad(1.5, 0.5)
    assert calls == [1, 1]
    assert v == pytest.approx(3.0 * np.exp(-0.25) - np.sqrt(3.0), rel=1e-15)
    assert gx == pytest.approx(np.exp(-0.25) - 0.5 / np.sqrt(3.0), rel=1e-15)
    assert gy == pytest.approx(3.0 * np.exp(-0.25), rel=1e-15)
    assert rec(1.0, 0.0) == pytest.approx(0.0, abs=1e-15)


def test_replay_of_array_tape():
    W0 = np.ones((2, 3))

    def loss(W, x):
        return tnp.sum(tnp.tanh(W @ x) ** 2)
    x = np.array([0.1, 0.2, 0.3])
    rec = ta.record(loss, W0, x)
    W1 = np.arange(6.0).reshape(2, 3) / 10
    v, (gW, gx) = rec.value_and_grad(W1, x)
    v2, (gW2, gx2) = ta.value_and_grad(loss, argnums=(0, 1))(W1, x)
    assert v == v2
    np.testing.assert_array_equal(gW, gW2)
    np.testing.assert_array_equal(gx, gx2)


def test_flipped_guard_raises_instead_of_wrong_derivative():
    def f(x):
        if x > 1.0:
            return x * x
        return -x
    rec = ta.record(f, 2.0)
    assert rec.value_and_grad(3.0)[1] == 6.0
    with pytest.raises(ta.GuardFlippedError, match="Re-record"):
        rec.value_and_grad(0.5)


def test_while_loop_guard_and_escape_guard():
    def f(x):
        n = 0
        while x < 10.0:            # trip count depends on the value
            x = x * 2.0
            n += 1
        return x
    rec = ta.record(f, 3.0)        # 3 -> 6 -> 12: two trips
    assert rec.value_and_grad(4.0) == (16.0, 4.0)
    with pytest.raises(ta.GuardFlippedError):
        rec.value_and_grad(1.0)    # would need four trips

    def g(x):
        return x * ta.stop_gradient(x)     # an explicit constant, recomputed on replay
    assert ta.grad(g)(2.0) == 2.0
    rec = ta.record(g, 2.0)
    assert rec.value_and_grad(3.0) == (9.0, 3.0)
    with pytest.raises(TypeError, match="drop its derivative"):
        ta.grad(lambda x: x * float(x))(2.0)


def test_replay_errors_say_what_to_do():
    rec = ta.record(lambda x, y: x * y, 1.0, 2.0)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        rec.value_and_grad(1.0)
    rec = ta.record(lambda x: tnp.sum(x * x), np.ones(3))
    with pytest.raises(ta.TapeReplayError, match="re-record"):
        rec.value_and_grad(np.ones(4))


def test_leaked_tracer_is_an_error():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0
    ta.grad(f)(1.0)
    with pytest.raises(ta.LeakedTracerError, match="leaked"):
        leaked[0] * 3.0


def test_tape_memory_counts_values_and_residuals():
    x = np.ones((4, 3))

    def f(W, b):
        return tnp.sum(tnp.tanh(x @ W + b))
    rec = ta.record(f, np.ones((3, 2)), np.zeros(2))
    mem = rec.tape.memory()
    # x (saved by matmul), W (saved by matmul), matmul out, add out, tanh out, sum (8)
    assert mem["values"] == (12 + 6 + 8 + 8 + 8) * 8 + 8


def test_argmax_index_is_guarded_on_replay():
    rec = ta.record(lambda x: x[np.argmax(x)] * 2.0, np.array([1.0, 3.0, 2.0]))
    value, g = rec.value_and_grad(np.array([1.0, 4.0, 2.0]))
    assert value == 8.0
    np.testing.assert_array_equal(g, [0.0, 2.0, 0.0])
    with pytest.raises(ta.GuardFlippedError, match="argmax"):
        rec.value_and_grad(np.array([5.0, 4.0, 2.0]))


def test_c_shortcuts_of_hot_vjps_equal_the_python_rules():
    """add/sub/tanh/2-d matmul have C shortcuts in the sweep: same numbers as their rules."""
    from tapead._prims import elementwise as ew, linalg
    prims = [ew.add.prim, ew.subtract.prim, ew.tanh.prim, linalg.matmul_p]
    rng = np.random.default_rng(7)
    W1, W2 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    b = rng.standard_normal(4)
    x = rng.standard_normal((5, 3))

    def loss(W1, W2, b):
        h = tnp.tanh(x @ W1 + b)
        return tnp.sum((h @ W2 - 0.5) ** 2) - tnp.sum(b - h[0]) - tnp.sum(h - b)
    for dtype in (np.float64, np.float32):
        args = [a.astype(dtype) for a in (W1, W2, b)]
        fast = ta.grad(loss, argnums=(0, 1, 2))(*args)
        saved = [p.fast_vjp for p in prims]
        try:
            for p in prims:
                p.fast_vjp = 0
            slow = ta.grad(loss, argnums=(0, 1, 2))(*args)
        finally:
            for p, k in zip(prims, saved):
                p.fast_vjp = k
        assert all(k > 0 for k in saved)
        for f, s in zip(fast, slow):
            assert f.dtype == dtype
            np.testing.assert_array_equal(f, s)


def test_forward_sweep_visits_only_what_the_outputs_depend_on(monkeypatch):
    # the tape of grad(f) holds f's own value, sin(x); the gradient reads it
    # only as the hint of cos_given_sin (nondiff_args), so a forward sweep of
    # the gradient never needs sin's tangent
    from tapead._prims.elementwise import sin as tsin
    from tapead.program import Program
    f = lambda x: tnp.sum(tnp.sin(x) * 2.0)            # noqa: E731
    x = np.linspace(0.1, 1.0, 5)
    prog = Program.record(ta.grad(f), (x,), {}, 0, "t")
    tape, out = prog.tape, prog.out

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep visited a node the output does not need")
    monkeypatch.setattr(tsin.prim, "jvp_many", refuse, raising=False)
    seeds = np.eye(5)
    (t,) = tape.forward_sweep({tape.inputs[0]: seeds}, [out.idx], 5)
    np.testing.assert_allclose(t, np.diag(-2.0 * np.sin(x)), rtol=1e-15, atol=1e-16)


def test_large_tapes_one_after_another_and_side_by_side_stay_right():
    # a freed tape of >= 4096 nodes leaves its buffers to the next tape: the
    # next one must start empty, grow past them, and a tape alive meanwhile
    # must keep its own
    import math

    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + tnp.sin(x[i]) * x[i + 1]
        return s

    def exact(x):
        g = [0.0] * len(x)
        for i in range(len(x) - 1):
            g[i] += math.cos(x[i]) * x[i + 1]
            g[i + 1] += math.sin(x[i])
        return g
    rng = np.random.default_rng(7)
    for n in (5000, 20000, 3000, 9000):
        x = rng.uniform(-1, 1, n).tolist()
        np.testing.assert_allclose(ta.grad(f)(x), exact(x), rtol=1e-13, atol=1e-15)
    x = rng.uniform(-1, 1, 6000).tolist()
    y = rng.uniform(-1, 1, 7000).tolist()
    _, pull_x = ta.vjp(f, x)                 # its tape stays alive
    gy = ta.grad(f)(y)                       # records and frees a tape meanwhile
    np.testing.assert_allclose(pull_x(1.0)[0], exact(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gy, exact(y), rtol=1e-13, atol=1e-15)


def test_repeated_sweeps_of_one_tape_start_from_zero_adjoints():
    # a tape's sweeps share one list of object adjoints; each sweep clears
    # what it stored, so a second sweep (other seeds, other outputs, a nested
    # sweep inside a rule) sees no adjoint of the first
    tape = Tape()
    x = tape.input(np.array([0.5, -1.0, 2.0]))
    w = tape.input(np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]]))
    h = tnp.tanh(w @ x)
    y = tnp.sum(h * h) + x[0] * x[2]
    z = tnp.sum(tnp.sin(x))
    tape.active = False
    g1 = tape.backward([y.idx], [1.0], [x.idx, w.idx])
    g2 = tape.backward([y.idx], [1.0], [x.idx, w.idx])
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)
    gz = tape.backward([z.idx], [2.0], [x.idx, w.idx])
    np.testing.assert_array_equal(gz[0], 2.0 * np.cos([0.5, -1.0, 2.0]))
    assert gz[1] is None
    gy = ta.grad(lambda x, w: tnp.sum(tnp.tanh(w @ x) ** 2) + x[0] * x[2], argnums=(0, 1))(
        np.array([0.5, -1.0, 2.0]), np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]]))
    np.testing.assert_allclose(g1[0], gy[0], rtol=1e-15)
    np.testing.assert_allclose(g1[1], gy[1], rtol=1e-15)


def test_node_ids_off_the_tape_are_refused():
    tape = Tape()
    x = tape.input(np.array([1.0, 2.0]))
    y = tnp.sum(x * x)
    tape.active = False
    for wrt in ([-1], [10 ** 6], range(0, 10 ** 6), [x.idx, 99]):
        with pytest.raises(IndexError, match="(is|are) not (all )?on this tape"):
            tape.backward([y.idx], [1.0], wrt)
    for i in (-1, 10 ** 6):
        with pytest.raises(IndexError, match="(is|are) not (all )?on this tape"):
            tape.record(i)
    np.testing.assert_array_equal(tape.backward([y.idx], [1.0], [x.idx])[0], [2.0, 4.0])
