"""Lowering Scaly Functions onto the tape (``tapead.scaly.lower``).

x[i]-indexed inputs are fed element by element (scalar tape inputs, scatter
and add trees as scalar nodes, one ``scaly_pack`` node per array output);
calls take a fast path for exact arguments.  Checked here: values,
gradients and Hessians equal tapead's functional API at several points (so
the tape is replayed), the fast and the checked call paths agree, returned
arrays are fresh, and the x[i] gradient records O(n) scalar nodes, not O(n)
array nodes.
"""
import numpy as np
import pytest

import tapead as ta
from tapead._core import STRUCTURAL_OPCODES
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead._core import OPCODES
from tapead.scaly import lower
from tapead.scaly.lower import LoweredProgram, pack_p

OP_OBJ = STRUCTURAL_OPCODES["obj"]      # an object (array) node
FIRST_SCALAR = min(OPCODES.values())


def rosenbrock(x, n, m=tnp):
    """The same loop for Scaly expressions and for tapead values."""
    s = 0.0
    for i in range(n - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosenbrock_function(n):
    @sc.function(sc.arg("x", n))
    def rosen(x):
        return rosenbrock(x, n)
    return rosen


def few_indices(x, n, m=tnp):
    """Reads 30 elements one by one (15% of 200: below the 25% rule) and
    the whole vector once."""
    s = (x * x).sum() * 0.01
    for i in range(0, 20, 2):
        s = s + m.sin(x[i] * x[i + 1]) * x[n - 1 - i]
    return s


def few_function(n):
    @sc.function(sc.arg("x", n))
    def few(x):
        return few_indices(x, n, Sin)
    return few


class Sin:
    """``m.sin`` for Scaly expressions."""
    sin = staticmethod(lambda e: e.sin())


def program(fn):
    """The lowered program of ``fn`` (called once to build it)."""
    return fn._programs[True]


def node_kinds(p):
    """(object nodes, scalar nodes, inputs) of a program's tape."""
    op, _, _ = p.tape.export_nodes()
    return int((op == OP_OBJ).sum()), int((op >= FIRST_SCALAR).sum()), len(p.tape.inputs)


def rel_err(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# ---------------------------------------------------------------------------
# x[i] code: values and derivatives at several points
# ---------------------------------------------------------------------------

CASES = [
    # (name, n, body, fed element by element)
    ("rosenbrock-50", 50, rosenbrock, True),           # <= 64 elements: always
    ("rosenbrock-200", 200, rosenbrock, True),         # > 64, every element read
    ("few-200", 200, few_indices, False),              # > 64, 10% read: whole array
]


@pytest.mark.parametrize("name, n, body, spread", CASES, ids=[c[0] for c in CASES])
def test_indexed_code_equals_the_functional_api(name, n, body, spread):
    @sc.function(sc.arg("x", n))
    def f(x):
        return body(x, n, Sin)

    def f_ta(x):
        return body(x, n)

    grad = sc.gradient(f, "out", "x")
    # the dense Hessian at n = 200 takes ~40 s to build and lower; H v there
    hess = sc.hessian(f, "out", "x") if n <= 50 else None
    hvp = sc.forward(grad, "grad_out_x", "x")
    rng = np.random.default_rng(n)
    for _ in range(3):                          # the first call records, the rest replay
        x, v = rng.uniform(-1.5, 1.5, size=n), rng.normal(size=n)
        assert rel_err(f(x), f_ta(x)) <= 1e-13
        assert rel_err(grad(x), ta.grad(f_ta)(x)) <= 1e-13
        assert rel_err(hvp(x, v), ta.hvp(f_ta, (x,), (v,))) <= 1e-13
        if hess is not None:
            assert rel_err(hess(x), ta.hessian(f_ta)(x)) <= 1e-13
    for fn in (f, grad, hvp) + ((hess,) if hess is not None else ()):
        assert program(fn)._spread == spread


def test_spread_heuristic_thresholds():
    assert lower.SPREAD_ALWAYS == 64 and lower.SPREAD_SHARE == 0.25

    def only_first(n, k):
        @sc.function(sc.arg("x", n))
        def f(x):
            s = x[0] * 0.0
            for i in range(k):
                s = s + x[i].sin()
            return s
        f(np.ones(n))
        return program(f)._spread

    assert only_first(64, 1)                    # small: one read is enough
    assert only_first(200, 50)                  # 25% of 200
    assert not only_first(200, 49)
    assert not only_first(65, 16)               # 16 < 0.25 * 65


# ---------------------------------------------------------------------------
# the fast path and the checked path
# ---------------------------------------------------------------------------

def test_fast_and_checked_paths_give_identical_results(monkeypatch):
    n = 30

    @sc.function(sc.arg("x", n), sc.arg("a", ()))
    def f(x, a):
        return rosenbrock(x, n) * a, sc.stack([x[0] * a, x[n - 1] - a])

    grad = sc.gradient(f, "out0", "x")
    rng = np.random.default_rng(5)
    x0 = rng.normal(size=n)
    f(x0, 1.0), grad(x0, 1.0)                   # record
    calls = {"exact": 0, "checked": 0}
    run_exact, checked = LoweredProgram.run_exact, LoweredProgram._call

    def count_exact(self, args):
        out = run_exact(self, args)
        calls["exact"] += out is not None
        return out

    def count_checked(self, values):
        calls["checked"] += 1
        return checked(self, values)
    monkeypatch.setattr(LoweredProgram, "run_exact", count_exact)
    monkeypatch.setattr(LoweredProgram, "_call", count_checked)
    for _ in range(3):
        x, a = rng.normal(size=n), float(rng.uniform(0.5, 2.0))
        fast = f(x, a)
        assert calls == {"exact": 1, "checked": 0}
        slow = f(list(x), a)                    # a list: converted and checked
        assert calls == {"exact": 1, "checked": 1}
        assert type(slow) is tuple and len(slow) == 2
        assert slow[0] == fast[0] and type(slow[0]) is type(fast[0]) is np.float64
        np.testing.assert_array_equal(slow[1], fast[1])
        direct = f.evaluate([x, a])
        assert direct[0] == fast[0]
        np.testing.assert_array_equal(direct[1], fast[1])
        # Python floats, 0-d arrays and np.float64 are exact scalars
        for a_kind in (np.float64(a), np.array(a)):
            again = f(x, a_kind)
            assert again[0] == fast[0]
            np.testing.assert_array_equal(again[1], fast[1])
        # an int takes the checked path (converted)
        np.testing.assert_array_equal(f(x, 2)[1], f(x, 2.0)[1])
        g_fast, g_slow = grad(x, a), grad(x.tolist(), a)
        np.testing.assert_array_equal(g_fast, g_slow)
        np.testing.assert_allclose(g_fast, ta.grad(lambda v: rosenbrock(v, n) * a)(x),
                                   rtol=1e-13)
        calls.update(exact=0, checked=0)


def test_int_arrays_and_int_scalars_are_converted_on_the_checked_path():
    n = 10
    f = rosenbrock_function(n)
    x = np.arange(n, dtype=np.float64) / 7
    f(x)
    xi = np.arange(n) - 3
    assert f(xi) == f(xi.astype(np.float64)) == pytest.approx(
        rosenbrock(xi.astype(np.float64), n), rel=1e-15)
    g = sc.gradient(f, "out", "x")
    np.testing.assert_array_equal(g(xi), g(xi.astype(np.float64)))
    np.testing.assert_array_equal(g(np.asfortranarray(x[::-1])), g(x[::-1].copy()))


def test_grouped_parameters_take_the_fast_path_after_flattening(monkeypatch):
    n = 12

    @sc.function(sc.G(sc.L("x", n), sc.L("p", ())), sc.L("cost", ...))
    def f(inputs):
        x, p = inputs
        return rosenbrock(x, n) * p + x[0] * x[n - 1]

    def f_ta(x, p):
        return rosenbrock(x, n) * p + x[0] * x[n - 1]

    grad = sc.gradient(f, "cost", "x")
    rng = np.random.default_rng(3)
    f((rng.normal(size=n), 1.0)), grad((rng.normal(size=n), 1.0))
    assert not program(f).takes_args and program(f)._pack is not None
    for _ in range(3):
        x, p = rng.normal(size=n), float(rng.uniform(0.5, 2.0))
        with monkeypatch.context() as m:        # exact arguments never reach evaluate
            m.setattr(sc.Function, "evaluate", lambda *a, **k: pytest.fail("checked path"))
            fast = f((x, p))
        assert fast == f((list(x), p)) == f.evaluate([x, p])[0]
        assert fast == pytest.approx(f_ta(x, p), rel=1e-14)
        np.testing.assert_array_equal(grad((x, p)), grad((x.tolist(), np.array(p))))
        np.testing.assert_allclose(grad((x, p)), ta.grad(f_ta)(x, p), rtol=1e-13)


# ---------------------------------------------------------------------------
# outputs: fresh arrays, bool and int, identity
# ---------------------------------------------------------------------------

def test_packed_outputs_are_fresh_arrays():
    n = 8

    @sc.function(sc.arg("x", n))
    def f(x):
        return sc.stack([x[0] * x[1], x[2].sin(), x[3] + x[4]]), x[1:4] * 2.0, x

    rng = np.random.default_rng(4)
    for _ in range(4):
        x = rng.normal(size=n)
        keep = x.copy()
        first = f(x)
        p = program(f)
        assert p._spread and sum(lower._packs(p.tape, i) for i in p._ids) == 2
        expected = [np.array([x[0] * x[1], np.sin(x[2]), x[3] + x[4]]), x[1:4] * 2.0, x.copy()]
        for got, want in zip(first, expected):
            np.testing.assert_array_equal(got, want)
            assert got is not x and not np.shares_memory(got, x)
            got[...] = 99.0                     # the caller owns what it got
        np.testing.assert_array_equal(x, keep)
        second = f(x)
        for got, want in zip(second, expected):
            np.testing.assert_array_equal(got, want)
        assert all(a is not b for a, b in zip(first, second))


def test_the_same_array_output_twice_is_two_arrays():
    @sc.function(sc.arg("x", 3))
    def f(x):
        y = sc.stack([x[0] * x[1], x[2], x[0]])
        return y, y

    for _ in range(2):
        a, b = f(np.array([1.0, 2.0, 3.0]))
        assert a is not b and not np.shares_memory(a, b)
        a[0] = -1.0
        assert b[0] == 2.0


def test_identity_outputs_are_copies():
    @sc.function(sc.arg("x", 3), sc.arg("s", ()))
    def ident(x, s):
        return x, s

    x = np.array([1.0, 2.0, 3.0])
    for k in range(3):                          # first call (the recording) and replays
        y, s = ident(x, 0.5 + k)
        np.testing.assert_array_equal(y, x)
        assert s == 0.5 + k and type(s) is np.float64
        assert y is not x and not np.shares_memory(y, x)
        y[0] = 42.0
        assert x[0] == 1.0
    assert ident(x.tolist(), 2)[1] == 2.0


def test_bool_and_int_outputs():
    n = 6

    @sc.function(sc.arg("x", n), sc.arg("k", sc.TensorType((), sc.dtypes.int64)))
    def f(x, k):
        return x[0] * x[1] > x[2], x > 0.0, k * 3, (x[3] * k + x[4]) * x[5]

    rng = np.random.default_rng(6)
    for _ in range(4):
        x, k = rng.normal(size=n), int(rng.integers(-5, 5))
        big, mask, k3, v = f(x, np.array(k))
        assert type(big) is np.bool_ and bool(big) == (x[0] * x[1] > x[2])
        assert mask.dtype == np.bool_ and mask.tolist() == (x > 0).tolist()
        assert k3.dtype == np.int64 and k3 == 3 * k
        assert v == pytest.approx((x[3] * k + x[4]) * x[5], rel=1e-15)
        assert f(x, k)[3] == v and f(list(x), k)[0] == big


# ---------------------------------------------------------------------------
# the as-built graph, the elementwise ops
# ---------------------------------------------------------------------------

ELEMENTWISE_BODIES = {
    "negative-indices": (5, lambda x, m: x[-1] * x[0] + x[-2] ** 3),
    "slices": (6, lambda x, m: ((x[1:] - x[:-1] ** 2) ** 2).sum()
               + (x[::2] * x[1::2]).sum()),
    "repeated-indices": (4, lambda x, m: (x[[1, 1, 2]] * x[[0, 3, 3]]).sum() + x[1] * x[1]),
    "stack": (3, lambda x, m: (m.stack([x[0] * x[2], x[1] ** 2, x[0] + x[2]]) * x).sum()),
    "negation": (4, lambda x, m: (-(x[1:3]) * x[0:2]).sum() + (-x[3]) ** 2),
    "whole-and-elements": (5, lambda x, m: x[0] * (x * x).sum() + (x[1:3] + x[2:4]).sum()),
    "two-d": ((3, 4), lambda x, m: x[0, 1] * x[2, 3] + (x[1] * x[2]).sum()
              + x[:, 0].sum() ** 2),
    "a-plus-a": (4, lambda x, m: ((x[0:2] + x[0:2]) * x[2:4]).sum()),
    "a-minus-a": (4, lambda x, m: ((x[0:2] - x[0:2]) + x[2:4] ** 2).sum()),
    # a one-element slice reshaped to a scalar (was an _Elements of shape ()
    # that scatter and stack took for a scalar: TypeError in the gradient)
    "reshape-to-scalar": (3, lambda x, m: x[0:1].reshape(()) * x[1] + x[2]),
    "stack-of-reshaped": (3, lambda x, m: (m.stack([x[0:1].reshape(()), x[1] * x[2]])
                                           ** 2).sum()),
}


@pytest.mark.parametrize("name", list(ELEMENTWISE_BODIES))
def test_elementwise_ops_and_simplify_false(name):
    shape, body = ELEMENTWISE_BODIES[name]

    @sc.function(sc.arg("x", shape))
    def f(x):
        return body(x, sc)

    def f_ta(x):
        return body(x, tnp)

    grad, hess = sc.gradient(f, "out", "x"), sc.hessian(f, "out", "x")
    size = int(np.prod(shape))
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        x = rng.normal(size=shape)
        assert f(x) == pytest.approx(float(f_ta(x)), rel=1e-13, abs=1e-14)
        np.testing.assert_allclose(grad(x), ta.grad(f_ta)(x), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(hess(x), ta.hessian(f_ta)(x).reshape(size, size),
                                   rtol=1e-13, atol=1e-14)
        for fn in (f, grad, hess):
            np.testing.assert_allclose(fn.evaluate([x], simplify=False),
                                       fn.evaluate([x]), rtol=1e-14, atol=1e-14)
    assert program(grad)._spread


def test_scalar_input_indexed_with_empty_tuple():
    @sc.function(sc.arg("s", ()), sc.arg("x", 2))
    def f(s, x):
        return s[()] * x[0] + (x[1:2].reshape(()) * s[...]) ** 2

    def f_ta(s, x):
        return s * x[0] + (x[1] * s) ** 2

    for s, x in [(1.5, np.array([2.0, -1.0])), (-0.3, np.array([0.4, 0.7]))]:
        assert f(s, x) == pytest.approx(f_ta(s, x), rel=1e-15)
        gs, gx = ta.grad(f_ta, argnums=(0, 1))(s, x)
        assert sc.gradient(f, "out", "s")(s, x) == pytest.approx(gs, rel=1e-15)
        np.testing.assert_allclose(sc.gradient(f, "out", "x")(s, x), gx, rtol=1e-15)
        np.testing.assert_allclose(sc.hessian(f, "out", "x")(s, x),
                                   ta.hessian(lambda x: f_ta(s, x))(x), rtol=1e-14)


# ---------------------------------------------------------------------------
# what the tape holds
# ---------------------------------------------------------------------------

def test_indexed_gradient_records_scalar_nodes_not_array_nodes():
    n = 1000
    f = rosenbrock_function(n)
    grad = sc.gradient(f, "out", "x")
    x = np.linspace(-1.0, 1.0, n)
    g = grad(x)
    n_obj, n_scalar, n_inputs = node_kinds(program(grad))
    assert n_inputs == n                        # one scalar input per element
    assert n_obj == 1                           # the pack of the gradient, nothing else
    assert 5 * n <= n_scalar <= 20 * n          # O(n) scalar nodes
    packs = [i for i in program(grad)._ids if i >= 0 and lower._packs(program(grad).tape, i)]
    assert len(packs) == 1 and program(grad).tape.record(packs[0]).prim is pack_p
    np.testing.assert_allclose(g, ta.grad(lambda v: rosenbrock(v, n))(x), rtol=1e-13)
    x2 = np.cos(np.arange(n))
    np.testing.assert_allclose(grad(x2), ta.grad(lambda v: rosenbrock(v, n))(x2),
                               rtol=1e-13)
    # the value itself: no object node at all
    f(x)
    n_obj, n_scalar, _ = node_kinds(program(f))
    assert n_obj == 0 and n_scalar <= 10 * n


def test_below_the_share_rule_the_input_stays_one_array():
    n = 200
    grad = sc.gradient(few_function(n), "out", "x")
    grad(np.linspace(-1.0, 1.0, n))
    p = program(grad)
    n_obj, _, n_inputs = node_kinds(p)
    # its elements are read by element nodes (x[i] of an array node) or array nodes
    n_elem = int((p.tape.export_nodes()[0] == STRUCTURAL_OPCODES["elem"]).sum())
    assert not p._spread and n_inputs == 1 and n_obj + n_elem > 20
