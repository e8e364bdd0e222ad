"""The Scaly graph API's core: functions, expressions, derivatives, printing.

Derivatives are checked against tapead's functional transforms on the same
functions written with tapead.numpy, and against central differences.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
import tapead.scaly as sc
from tapead.scaly.graphs import topo_order
from tapead.scaly.calls import expand_calls

SEED_000_LISTING = """\
expr.module {
  expr.func @f_grad_y_x(%x: tensor<float64 diff>) -> (%grad_y_x: tensor<float64 diff>) {
    %0 = expr.const {lowering="auto", value=1.} : tensor<float64>
    %1 = expr.input {lowering="auto", name="x"} : tensor<float64 diff>
    %2 = expr.mul(%1, %1) : tensor<float64 diff>
    %3 = expr.cos(%2) : tensor<float64 diff>
    %4 = expr.mul(%0, %3) : tensor<float64 diff>
    %5 = expr.mul(%4, %1) : tensor<float64 diff>
    %6 = expr.add(%5, %5) : tensor<float64 diff>
    expr.return %6
  }
}"""

SEED_000_STORE = ("prog.store prog.mul(2, prog.mul(prog.cos(prog.mul(%v0, %v0)), %v0)), "
                  "%grad_y_x[0] : float64")


def sin_of_square():
    @sc.function(sc.L("x", ()), sc.L("y", ...))
    def f(x: sc.Expr) -> sc.Expr:
        return (x * x).sin()
    return f


def seed_stack_function():
    @sc.function(sc.L("x", 3), sc.L("y", ...))
    def f(x: sc.Expr) -> sc.Expr:
        return sc.stack([x[0] * x[2], x[1] ** 2, 2.0 * x[0] + x[2] ** 2])
    return f


# ---------------------------------------------------------------------------
# seed 000: the listing, the lowered program, the forward example
# ---------------------------------------------------------------------------

def test_seed_000_gradient_listing_byte_for_byte():
    assert sc.render_expr_assembly(sc.gradient(sin_of_square(), "y", "x")) == SEED_000_LISTING


def test_seed_000_lowered_program_is_one_store():
    program = sc.render_lowered_program(sc.gradient(sin_of_square(), "y", "x"))
    statements = [ln.strip() for ln in program.splitlines()[1:-1]
                  if not ln.strip().startswith("%v0 = prog.load")]
    assert statements == [SEED_000_STORE]


def test_seed_000_gradient_value():
    g = sc.gradient(sin_of_square(), "y", "x")
    assert g.name == "f_grad_y_x" and g.output_names == ["grad_y_x"]
    for x in (0.3, 1.0, -2.0):
        out = g(np.array(x))
        assert isinstance(out, np.float64)
        assert out == pytest.approx(2 * x * np.cos(x * x), rel=1e-15)


def test_seed_000_forward_directions_and_jacobian():
    f = seed_stack_function()
    seeds = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    fwd = sc.forward(f, "y", "x")
    x_value = np.array([1.0, 2.0, 3.0])
    compressed = np.stack([fwd((x_value, s)) for s in seeds], axis=1)
    np.testing.assert_array_equal(compressed, [[3.0, 1.0], [4.0, 0.0], [2.0, 6.0]])
    jac = sc.jacobian(f, "y", "x")
    assert jac.name == "f_jac_y_x"
    np.testing.assert_array_equal(jac(x_value), [[3, 0, 1], [0, 4, 0], [2, 0, 6]])
    np.testing.assert_array_equal(f(x_value), [3.0, 4.0, 11.0])


# ---------------------------------------------------------------------------
# random expression graphs, checked against tapead and finite differences
# ---------------------------------------------------------------------------

SC_OPS = dict(sin=lambda v: v.sin(), cos=lambda v: v.cos(), tanh=lambda v: v.tanh(),
              exp=lambda v: v.sin().exp(), sqrt=lambda v: (1.0 + v * v).sqrt(),
              log=lambda v: (2.0 + v.sin()).log(), sum=lambda v: v.sum())
TA_OPS = dict(sin=tnp.sin, cos=tnp.cos, tanh=tnp.tanh, exp=lambda v: tnp.exp(tnp.sin(v)),
              sqrt=lambda v: tnp.sqrt(1.0 + v * v), log=lambda v: tnp.log(2.0 + tnp.sin(v)),
              sum=tnp.sum)
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / (1.5 + b * b), "pow": lambda a, b: a ** 2 - b,
          "neg": lambda a, b: -a + 0.5 * b}


def random_program(seed, n_steps=12):
    rng = np.random.default_rng(seed)
    steps = []
    for k in range(n_steps):
        pool = 4 + k
        if rng.random() < 0.4:
            steps.append(("u", str(rng.choice(list(SC_OPS)[:-1])), int(rng.integers(pool)), 0))
        else:
            steps.append(("b", str(rng.choice(list(BINARY))), int(rng.integers(pool)),
                          int(rng.integers(pool))))
    return steps


def run_program(steps, x, unary):
    """The same program on sc expressions or tapead tracers (x has 3 elements)."""
    pool = [x[0], x[1], x[2], x]
    for kind, name, i, j in steps:
        pool.append(unary[name](pool[i]) if kind == "u" else BINARY[name](pool[i], pool[j]))
    out = 0.0
    for k, v in enumerate(pool[4:]):
        out = out + (0.3 + 0.1 * k) * unary["sum"](v)
    return out


def both(seed):
    steps = random_program(seed)

    @sc.function(sc.arg("x", 3), outputs=sc.arg("y", ()))
    def f(x):
        return run_program(steps, x, SC_OPS)

    return f, (lambda x: run_program(steps, x, TA_OPS))


def central_difference(fun, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = eps
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("seed", range(6))
def test_random_graph_derivatives(seed):
    f, f_ta = both(seed)
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=3)
    assert f(x) == pytest.approx(float(f_ta(x)), rel=1e-13, abs=1e-13)
    grad = sc.gradient(f, "y", "x")
    g = grad(x)
    np.testing.assert_allclose(g, ta.grad(f_ta)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, central_difference(f, x), rtol=1e-6, atol=1e-6)
    v = rng.normal(size=3)
    np.testing.assert_allclose(sc.forward(f, "y", "x")(x, v), g @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sc.jacobian(f, "y", "x")(x), g[None, :], rtol=1e-12,
                               atol=1e-12)
    hess = sc.hessian(f, "y", "x")(x)
    np.testing.assert_allclose(hess, ta.hessian(f_ta)(x), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, central_difference(grad, x), rtol=1e-5, atol=1e-5)
    # the Jacobian of the gradient Function is the Hessian
    np.testing.assert_allclose(sc.jacobian(grad, "grad_y_x", "x")(x), hess, rtol=1e-12,
                               atol=1e-12)
    # simplified and as-built graphs give the same numbers
    for fn in (f, grad, sc.hessian(f, "y", "x")):
        np.testing.assert_allclose(fn.evaluate([x]), fn.evaluate([x], simplify=False),
                                   rtol=1e-14, atol=1e-14)


def test_vector_jacobian_against_jacfwd():
    @sc.function(sc.L("x", 3), sc.L("y", ...))
    def f(x):
        return sc.stack([x[0] * x[1].sin(), (x * x).sum(), x[2] / x[0]]) * x.exp()

    def f_ta(x):
        return tnp.stack([x[0] * tnp.sin(x[1]), tnp.sum(x * x), x[2] / x[0]]) * tnp.exp(x)

    x = np.array([0.7, -1.2, 0.4])
    np.testing.assert_allclose(sc.jacobian(f, "y", "x")(x), ta.jacfwd(f_ta)(x), rtol=1e-13)
    np.testing.assert_allclose(sc.jacobian(f, "y", "x")(x), central_difference(f, x),
                               rtol=1e-7)


def test_gradient_of_gradient_equals_hessian():
    @sc.function(sc.arg("x", ()), sc.arg("a", ()))
    def newton(x, a):
        return 0.5 * (x + a / x)

    second = sc.gradient(sc.gradient(newton, "out", "x"), "grad_out_x", "x")
    hess = sc.hessian(newton, "out", "x")
    assert hess.name == "newton_hess_out_x"
    for x in (0.5, 1.0, 3.0):
        assert hess(x, 2.0).shape == (1, 1)
        assert second(x, 2.0) == pytest.approx(hess(x, 2.0)[0, 0], rel=1e-15)
        assert second(x, 2.0) == pytest.approx(2.0 / x ** 3, rel=1e-14)


def test_gradient_is_reused_at_new_points_by_tape_replay():
    g = sc.gradient(sin_of_square(), "y", "x")
    g(1.0)
    program = g._programs[True]
    for x in np.linspace(-2, 2, 7):
        assert g(x) == pytest.approx(2 * x * np.cos(x * x), rel=1e-14, abs=1e-15)
    assert g._programs[True] is program and program.n_nodes > 0


# ---------------------------------------------------------------------------
# interning and simplification
# ---------------------------------------------------------------------------

def test_interning_shares_equal_nodes():
    x = sc.sym("x", ())
    assert x is sc.sym("x", ())
    assert (x * x).sin() is (x * x).sin()
    assert len(topo_order([(x * x).sin()])) == 3
    y = sc.sym("y", 3)
    a = y[0] * y[2] + y[0] * y[2]
    assert a.operands[0] is a.operands[1]
    assert len(topo_order([a])) == 5      # y, y[0], y[2], mul, add
    f = sin_of_square()
    assert f.n_nodes == 3
    assert sc.gradient(f, "y", "x").n_nodes == 7


def test_simplification_rules():
    x = sc.sym("x", ())
    one, zero = sc.const(1.0), sc.const(0.0)
    assert sc.simplify([x * one])[0] is x
    assert sc.simplify([zero + x])[0] is x
    assert sc.simplify([-(-x)])[0] is x
    doubled = sc.simplify([x.sin() + x.sin()])[0]
    assert doubled.op == "mul" and doubled.operands[1] is x.sin()
    folded = sc.simplify([sc.const(2.0) * sc.const(3.0) + x * zero])[0]
    assert folded.op == "const" and folded.attrs["value"] == 6.0
    dead = sc.simplify([(x * one).cos()])[0]
    assert len(topo_order([dead])) == 2


# ---------------------------------------------------------------------------
# layouts, composition, seed 003's declarations
# ---------------------------------------------------------------------------

def test_arg_style_functions_and_tuple_outputs():
    @sc.function(sc.arg("x", 2), sc.arg("u", ()))
    def model(x, u):
        xnext = x + 0.1 * sc.stack([x[1], u])
        return xnext, sc.sumsqr(x)

    xnext, cost = model(np.array([1.0, 2.0]), np.array(3.0))
    np.testing.assert_allclose(xnext, [1.2, 2.3])
    assert cost == 5.0
    assert model.name == "model" and model.input_names == ["x", "u"]

    @sc.function(sc.arg("x0", 2), sc.arg("u", ()),
                 outputs=sc.group(sc.arg("final", 2), sc.arg("cost", ())))
    def two_steps(x0, u):
        x1, c0 = model(x0, u)            # a call on expressions composes
        x2, c1 = model(x1, u)
        return x2, c0 + c1

    final, cost = two_steps(np.array([1.0, 0.0]), np.array(0.5))
    np.testing.assert_allclose(final, [1.0 + 0.005, 0.1])
    g = sc.gradient(two_steps, "cost", "u")(np.array([1.0, 0.0]), np.array(0.5))
    assert g == pytest.approx(2 * 0.1 * 0.05, rel=1e-14)


def test_group_input_and_bool_output():
    @sc.function(sc.G(sc.L("x", 1), sc.L("p", 1)), sc.L("c", ...))
    def stage(inputs):
        x, p = inputs
        return (x * p).sin().sum()

    assert stage((np.array([0.5]), np.array([2.0]))) == pytest.approx(np.sin(1.0))
    grad = sc.gradient(stage, "c", "p")
    np.testing.assert_allclose(grad((np.array([0.5]), np.array([2.0]))), [0.5 * np.cos(1.0)])

    @sc.function(sc.arg("x", ()), sc.arg("a", ()),
                 outputs=sc.arg("go", sc.TensorType((), sc.dtypes.bool_)))
    def unsolved(x, a):
        return (x * x - a).abs() > 1e-12

    assert unsolved(np.array(1.0), np.array(2.0)) is np.True_
    assert unsolved(np.array(2.0 ** 0.5), np.array(2.0)) is np.False_  # replayed, no guard


# ---------------------------------------------------------------------------
# errors that tell the user what to do
# ---------------------------------------------------------------------------

def test_python_bool_on_symbolic_value_says_use_cond():
    with pytest.raises(sc.SymbolicBoolError, match="sc.cond"):
        @sc.function(sc.arg("x", ()))
        def branchy(x):
            return x if x > 0 else -x
    with pytest.raises(TypeError):
        float(sc.sym("x", ()))


def test_wrong_input_shape_at_call_time():
    f = seed_stack_function()
    with pytest.raises(sc.ScalyShapeError, match=r"expects shape \(3,\)"):
        f(np.zeros(2))
    with pytest.raises(sc.LayoutError, match="takes 1 argument"):
        f(np.zeros(3), np.zeros(3))
    with pytest.raises(sc.LayoutError, match="tuple of 2"):
        sc.forward(f, "y", "x")(np.zeros(3))


def test_unknown_names_in_gradient():
    f = sin_of_square()
    with pytest.raises(sc.UnknownNameError, match="no output named 'z'.*'y'"):
        sc.gradient(f, "z", "x")
    with pytest.raises(sc.UnknownNameError, match="no input named 'w'.*'x'"):
        sc.gradient(f, "y", "w")
    with pytest.raises(sc.NonScalarGradientError, match="sc.jacobian"):
        sc.gradient(seed_stack_function(), "y", "x")


def test_declaration_errors():
    with pytest.raises(sc.ScalyShapeError, match="declared with shape"):
        @sc.function(sc.arg("x", 3), outputs=sc.arg("y", ()))
        def wrong(x):
            return x * 2.0
    z = sc.sym("z", ())
    with pytest.raises(sc.LayoutError, match="not inputs"):
        @sc.function(sc.arg("x", ()))
        def closes_over(x):
            return x * z
    with pytest.raises(sc.ScalyShapeError, match="broadcast"):
        sc.sym("a", 2) + sc.sym("b", 3)


def test_calls_on_symbols_and_forward_with_arg_style():
    f = seed_stack_function()
    x = sc.sym("x", 3)
    call = f(x)                            # a call node; the callee's graph is not copied
    assert call.op == "call" and call.attrs["callee"] == "f" and call.attrs["output"] == 0
    assert f(x) is call                    # interned like any node
    assert expand_calls([call])[0] is f.outputs[0]   # expanding onto its own inputs: identity
    y = f(x * 2.0)
    assert isinstance(y, sc.Expr) and y.shape == (3,)

    @sc.function(sc.arg("x", ()), sc.arg("a", ()))
    def newton(x, a):
        return 0.5 * (x + a / x)

    fwd = sc.forward(newton, "out", "a")
    assert fwd.input_names == ["x", "a", "seed_a"] and fwd.name == "newton_fwd_out_a"
    assert fwd(2.0, 3.0, 4.0) == pytest.approx(0.5 / 2.0 * 4.0, rel=1e-15)


def test_int_inputs_and_bool_outputs_replay():
    @sc.function(sc.arg("x", 3), sc.arg("k", sc.TensorType((), sc.dtypes.int64)))
    def f(x, k):
        return (x * k).sum(), x > 0.5

    total, mask = f(np.array([1.0, 2.0, 0.0]), 3)
    assert total == 9.0 and mask.tolist() == [True, True, False]
    total, mask = f(np.array([0.0, 2.0, 1.0]), 2)
    assert total == 6.0 and mask.tolist() == [False, True, True]
    np.testing.assert_array_equal(sc.gradient(f, "out0", "x")(np.zeros(3), 3), [3, 3, 3])
    with pytest.raises(sc.LayoutError, match="int64, which has no derivative"):
        sc.gradient(f, "out0", "k")


def test_deep_chain_needs_no_recursion():
    depth = 3000

    @sc.function(sc.arg("x", ()))
    def chain(x):
        for _ in range(depth):
            x = (x * 0.999).sin() + 0.001
        return x

    def chain_ta(x):
        for _ in range(depth):
            x = tnp.sin(x * 0.999) + 0.001
        return x

    g = sc.gradient(chain, "out", "x")
    assert g(0.5) == pytest.approx(ta.grad(chain_ta)(0.5), rel=1e-12)
    assert sc.render_expr_assembly(g).count("\n") > depth


def test_wrong_input_dtype_at_call_time():
    @sc.function(sc.arg("x", 2), sc.arg("k", sc.TensorType((), sc.dtypes.int64)),
                 sc.arg("m", sc.TensorType((2,), sc.dtypes.bool_)))
    def f(x, k, m):
        return (x * k).sum()
    # conversions that change no value are fine
    assert f(np.array([1, 2]), np.int32(2), [True, False]) == 6.0
    assert f([1.0, 2.0], 3.0, np.array([1, 0])) == 9.0
    assert f(np.array([1 + 0j, 2]), 2, [0, 1]) == 6.0
    # the others would be silent wrong numbers
    with pytest.raises(sc.LayoutError, match="input 'x' is float64, and its complex128"):
        f(np.array([1 + 2j, 3]), 2, [1, 0])
    with pytest.raises(sc.LayoutError, match="input 'k' is int64, and its float64"):
        f(np.ones(2), 2.7, [1, 0])
    with pytest.raises(sc.LayoutError, match="input 'k' is int64"):
        f(np.ones(2), np.nan, [1, 0])
    with pytest.raises(sc.LayoutError, match="input 'm' is bool, and its int64"):
        f(np.ones(2), 2, [2, 0])
    with pytest.raises(sc.LayoutError, match="<U1 values are not numbers"):
        f(np.array(["a", "b"]), 2, [1, 0])


def test_calls_from_several_threads_take_turns():
    import threading

    @sc.function(sc.arg("x", 20))
    def h(x):
        y = x
        for _ in range(100):
            y = (y * 1.0001).sin() + x
        return y.sum()

    xs = [np.full(20, 0.01 * k) for k in range(6)]
    ref = [h(v) for v in xs]
    bad = []

    def work(k):
        for _ in range(100):
            if h(xs[k]) != ref[k] or h(list(xs[k])) != ref[k]:
                bad.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_int_scalar_input_keeps_a_scalar_output():
    @sc.function(sc.arg("x", 3), sc.arg("n", sc.TensorType((), sc.dtypes.int64)))
    def f(x, n):
        return x.sum() + n
    for n in (np.array(2), 2, np.int64(2)):
        out = f(np.ones(3), n)
        assert np.shape(out) == () and out == 5.0
    assert f(np.ones(3), 4) == 7.0                     # replayed at a new int
