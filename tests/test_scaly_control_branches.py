"""sc.cond, sc.print, sc.custom_derivative, max_trajectory, in_place and the
error messages of Scaly's control flow."""
from __future__ import annotations

import numpy as np
import pytest

import tapead.scaly as sc
from scaly_control_programs import model, negative_root, newton, positive_root, unsolved
from test_scaly_control_loops import XS, check_derivatives, sine_step

INT = sc.TensorType((), sc.dtypes.int64)
BOOL = sc.TensorType((), sc.dtypes.bool_)


# ---------------------------------------------------------------------------
# sc.cond
# ---------------------------------------------------------------------------

@sc.function(sc.arg("x", 3))
def first(x):
    return x[0] * sc.stack([x[0], x[0], x[0]])


@sc.function(sc.arg("x", 3))
def second(x):
    return sc.stack([x[1], x[1] * x[2], x[1]])


@sc.function(sc.arg("x", 3))
def third(x):
    return x.sin() * x[2]


@sc.function(sc.arg("s", INT), sc.arg("x", 3), outputs=sc.arg("y", 3))
def picked(s, x):
    return sc.cond(s, (first, second, third), x)


def _unrolled_branch(k):
    branch = (first, second, third)[k]

    @sc.function(sc.arg("s", INT), sc.arg("x", 3), outputs=sc.arg("y", 3))
    def direct(s, x):
        return branch(x)
    return direct


@pytest.mark.parametrize("s, k", [(-3, 0), (0, 0), (1, 1), (2, 2), (7, 2)])
def test_integer_selector_is_clamped_and_differentiates_the_selected_branch(s, k,
                                                                             monkeypatch):
    monkeypatch.setenv("TAPEAD_STRICT_JVP_MANY", "1")    # Jacobians run batched branches
    x = np.array([0.5, 1.5, -2.0])
    ref = _unrolled_branch(k)
    np.testing.assert_allclose(picked(np.int64(s), x), ref(np.int64(s), x), rtol=1e-15)
    check_derivatives(picked, ref, "y", "x", [np.int64(s), x])

    @sc.function(sc.arg("s", INT), sc.arg("x", 3), outputs=sc.arg("c", ()))
    def scalar(s, x):
        return picked(s, x).sum()

    @sc.function(sc.arg("s", INT), sc.arg("x", 3), outputs=sc.arg("c", ()))
    def scalar_ref(s, x):
        return ref(s, x).sum()
    check_derivatives(scalar, scalar_ref, "c", "x", [np.int64(s), x])


def test_branch_sparsity_is_the_union_over_branches():
    pattern = sc.jacobian_sparsity(picked.outputs[0], picked.input("x")).to_mask()
    assert pattern.astype(int).tolist() == [[1, 1, 1], [1, 1, 1], [1, 1, 1]]

    @sc.function(sc.arg("b", BOOL), sc.arg("x", 3), outputs=sc.arg("y", 3))
    def two(b, x):
        return sc.cond(b, (first, second), x)
    pattern = sc.jacobian_sparsity(two.outputs[0], two.input("x")).to_mask()
    assert pattern.astype(int).tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 0]]


def test_branches_may_return_tuples():
    @sc.function(sc.arg("x", ()), sc.arg("y", ()),
                 outputs=sc.group(sc.arg("s", ()), sc.arg("p", ())))
    def plus(x, y):
        return x + y, x * y

    @sc.function(sc.arg("x", ()), sc.arg("y", ()),
                 outputs=sc.group(sc.arg("s", ()), sc.arg("p", ())))
    def minus(x, y):
        return x - y, x / y

    @sc.function(sc.arg("x", ()), sc.arg("y", ()),
                 outputs=sc.group(sc.arg("s", ()), sc.arg("p", ())))
    def chosen(x, y):
        s, p = sc.cond(x < y, (minus, plus), x, y)
        return s, p * s

    for x, y in ((0.5, 2.0), (3.0, 1.5)):
        branch = plus if x < y else minus

        @sc.function(sc.arg("x", ()), sc.arg("y", ()),
                     outputs=sc.group(sc.arg("s", ()), sc.arg("p", ())))
        def ref(x, y):
            s, p = branch(x, y)
            return s, p * s
        for out in ("s", "p"):
            for inp in ("x", "y"):
                check_derivatives(chosen, ref, out, inp, [np.array(x), np.array(y)])


def test_only_the_selected_branch_runs(capsys):
    @sc.function(sc.arg("x", ()))
    def loud(x):
        return sc.print("loud {}", x) * 2.0

    @sc.function(sc.arg("x", ()))
    def quiet(x):
        return x * 3.0

    @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    def chosen(x):
        return sc.cond(x > 0.0, (quiet, loud), x)

    assert float(chosen(-1.0)) == -3.0
    assert capsys.readouterr().out == ""
    assert float(chosen(2.0)) == 4.0
    assert capsys.readouterr().out == "loud 2\n"


def test_mismatched_branches_are_refused_with_the_mismatch():
    @sc.function(sc.arg("x", ()), outputs=sc.group(sc.arg("a", ()), sc.arg("b", ())))
    def pair(x):
        return x, x

    @sc.function(sc.arg("x", ()), outputs=sc.arg("r", 2))
    def vector(x):
        return sc.stack([x, x])

    @sc.function(sc.arg("x", ()), outputs=sc.arg("r", INT))
    def integer(x):
        return sc.const(np.int64(1))

    @sc.function(sc.arg("x", 2), outputs=sc.arg("r", ()))
    def wider(x):
        return x.sum()

    x = sc.sym("x", ())
    with pytest.raises(sc.LayoutError, match="tuple structures"):
        sc.cond(x > 0.0, (positive_root, pair), x)
    with pytest.raises(sc.ScalyShapeError, match=r"output 'r' of branch 1 \(vector\) is "
                       r"tensor<2xfloat64> but output 'root' of branch 0"):
        sc.cond(x > 0.0, (positive_root, vector), x)
    with pytest.raises(sc.ScalyShapeError, match="tensor<int64>.*matching shapes and dtypes"):
        sc.cond(x > 0.0, (positive_root, integer), x)
    with pytest.raises(sc.LayoutError, match="same operands"):
        sc.cond(x > 0.0, (positive_root, wider), x)
    with pytest.raises(sc.LayoutError, match="selector must be a bool or int64 scalar"):
        sc.cond(x, (positive_root, negative_root), x)


# ---------------------------------------------------------------------------
# sc.print
# ---------------------------------------------------------------------------

@sc.function(sc.arg("c", ()), sc.arg("x", ()))
def printing_step(c, x):
    return sc.print("c={}", c) * x


def test_prints_once_per_executed_step_and_not_in_a_zero_trip_loop(capsys):
    @sc.function(sc.arg("c0", ()), sc.arg("xs", 3), sc.arg("t", INT),
                 outputs=sc.arg("last", ()))
    def run(c0, xs, t):
        return sc.scan(printing_step, c0, (xs,), length=3, trip=t)[0]

    assert float(run(1.0, np.array([2.0, 3.0, 4.0]), np.int64(3))) == 24.0
    assert capsys.readouterr().out == "c=1\nc=2\nc=6\n"
    assert float(run(1.0, np.array([2.0, 3.0, 4.0]), np.int64(0))) == 1.0
    assert capsys.readouterr().out == ""
    assert float(run(1.5, np.array([2.0, 3.0, 4.0]), np.int64(1))) == 3.0
    assert capsys.readouterr().out == "c=1.5\n"


def test_prints_in_a_while_loop_and_of_arrays(capsys):
    @sc.function(sc.arg("x", 2), outputs=sc.arg("go", BOOL))
    def short(x):
        return x.sum() < 10.0

    @sc.function(sc.arg("x", 2))
    def double(x):
        return sc.print("x={}", x) * 2.0

    @sc.function(sc.arg("x0", 2), outputs=sc.group(sc.arg("x", 2), sc.arg("n", INT)))
    def run(x0):
        return sc.while_loop(short, double, x0, max_iter=10)

    x, n = run(np.array([1.0, 0.5]))
    assert int(n) == 3 and x.tolist() == [8.0, 4.0]
    assert capsys.readouterr().out == "x=[1, 0.5]\nx=[2, 1]\nx=[4, 2]\n"
    run(np.array([20.0, 0.0]))
    assert capsys.readouterr().out == ""


def test_an_unused_print_is_refused_while_tracing():
    with pytest.raises(ValueError, match=r"sc.print\('x=\{\}', ...\) is not used by any "
                       "output"):
        @sc.function(sc.arg("x", ()))
        def forgetful(x):
            sc.print("x={}", x)
            return x * 2.0


# ---------------------------------------------------------------------------
# max_trajectory, in_place and sc.custom_derivative
# ---------------------------------------------------------------------------

@sc.function(sc.arg("x", 4), sc.arg("u", ()))
def decay(x, u):
    return x * 0.9 + u, (x * x).sum()


def _limited(limit, length=200):
    @sc.function(sc.arg("x0", 4), sc.arg("us", length), outputs=sc.arg("cost", ()))
    def limited(x0, us):
        final, (c,) = sc.scan(decay, x0, (us,), length=length, max_trajectory=limit)
        return c.sum() + (final * final).sum()
    return limited


def test_max_trajectory_counts_carry_elements_over_the_length():
    x0, us = np.linspace(0.1, 0.4, 4), np.linspace(-1.0, 1.0, 200)
    free, exact = _limited(None), _limited(800)          # 4 elements x 200 steps
    np.testing.assert_allclose(sc.gradient(exact, "cost", "us")(x0, us),
                               sc.gradient(free, "cost", "us")(x0, us), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"200 steps x \(4\) carry elements = 800 elements, "
                       r"more than max_trajectory=799.*sc.custom_derivative"):
        sc.gradient(_limited(799), "cost", "us")
    # forward mode stores no trajectory; the limit does not apply
    np.testing.assert_allclose(sc.jacobian(_limited(0), "cost", "x0")(x0, us),
                               sc.jacobian(free, "cost", "x0")(x0, us), rtol=1e-15)


def test_derived_loops_do_not_inherit_max_trajectory():
    @sc.function(sc.arg("c", ()))
    def step(c):
        return (c * 0.9).sin() + 0.5

    @sc.function(sc.arg("c0", ()), outputs=sc.arg("last", ()))
    def limited(c0):
        return sc.scan(step, c0, length=5, max_trajectory=5)[0]

    @sc.function(sc.arg("c0", ()), outputs=sc.arg("last", ()))
    def unrolled(c0):
        c = c0
        for _ in range(5):
            c = (c * 0.9).sin() + 0.5
        return c

    grad = sc.gradient(limited, "last", "c0")
    second = sc.gradient(grad, grad.output_names[0], "c0")       # reverse over reverse
    ref = sc.gradient(unrolled, "last", "c0")
    assert float(second(0.3)) == pytest.approx(
        float(sc.gradient(ref, ref.output_names[0], "c0")(0.3)), rel=1e-13)
    assert sc.hessian(limited, "last", "c0")(0.3)[0, 0] == pytest.approx(
        float(second(0.3)), rel=1e-13)


def test_each_nested_loop_has_its_own_limit():
    @sc.function(sc.arg("c", ()), sc.arg("x", ()))
    def inner_step(c, x):
        return (c + x).sin()

    def nested(inner_limit, outer_limit):
        @sc.function(sc.arg("c", ()), sc.arg("x", ()))
        def outer_step(c, x):
            inner, _ = sc.scan(inner_step, c, (sc.broadcast(x),), length=3,
                               max_trajectory=inner_limit)
            return inner * x

        @sc.function(sc.arg("c0", ()), sc.arg("xs", 4), outputs=sc.arg("cost", ()))
        def run(c0, xs):
            return sc.scan(outer_step, c0, (xs,), length=4, max_trajectory=outer_limit)[0]
        return run

    args = (np.array(0.3), np.array([0.5, -0.4, 0.9, 0.2]))
    # 3 inner and 4 outer elements: the limits do not multiply
    g = sc.gradient(nested(3, 4), "cost", "xs")(*args)
    np.testing.assert_allclose(g, sc.gradient(nested(None, None), "cost", "xs")(*args),
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match="scan 'inner_step'.*max_trajectory=2"):
        sc.gradient(nested(2, 4), "cost", "xs")
    with pytest.raises(ValueError, match="scan 'outer_step'.*max_trajectory=3"):
        sc.gradient(nested(3, 3), "cost", "xs")


def test_strict_in_place_carry_is_refused_in_reverse_mode_only():
    def run_with(in_place):
        @sc.function(sc.arg("x0", 4), sc.arg("us", 3), outputs=sc.arg("cost", ()))
        def run(x0, us):
            final, (c,) = sc.scan(decay, x0, (us,), length=3, in_place=in_place)
            return c.sum()
        return run

    x0, us = np.linspace(0.1, 0.4, 4), np.array([0.5, -0.2, 0.3])
    free = run_with(None)
    for carry in (0, "x", (0, "u")):
        with pytest.raises(ValueError, match="reverse mode reads the carries entering every "
                           "step.*leave in_place unset"):
            sc.gradient(run_with(carry), "cost", "us")
        np.testing.assert_allclose(sc.jacobian(run_with(carry), "cost", "us")(x0, us),
                                   sc.jacobian(free, "cost", "us")(x0, us), rtol=1e-15)
        assert float(run_with(carry)(x0, us)) == float(free(x0, us))
    np.testing.assert_allclose(sc.gradient(run_with("u"), "cost", "us")(x0, us),
                               sc.gradient(free, "cost", "us")(x0, us), rtol=1e-15)
    x = sc.sym("x0", 4)
    with pytest.raises(ValueError, match="in_place=5 is not a carry position"):
        sc.scan(decay, x, (sc.sym("us", 3),), length=3, in_place=5)
    with pytest.raises(ValueError, match="in_place names 'zz', which is not an input"):
        sc.scan(decay, x, (sc.sym("us", 3),), length=3, in_place="zz")


@sc.function(sc.arg("a", ()), outputs=sc.arg("root", ()))
def stored_root(a):
    value, count = sc.while_loop(unsolved, newton, sc.const(1.0), max_iter=30, params=(a,),
                                 max_trajectory=0)
    return value


@sc.function(sc.arg("a", ()), sc.arg("adj_root", ()), outputs=sc.arg("adj_a", ()))
def implicit_reverse(a, adj_root):
    # x(a)^2 = a, so dx/da = 1 / (2 x): the implicit-function theorem at the root
    return adj_root / (2.0 * stored_root(a))


implicit_root = sc.custom_derivative(stored_root, reverse=implicit_reverse)


def test_custom_derivative_gives_newton_a_derivative_without_a_trajectory():
    with pytest.raises(ValueError, match="max_trajectory=0.*sc.custom_derivative"):
        sc.gradient(stored_root, "root", "a")
    assert float(implicit_root(2.0)) == float(stored_root(2.0)) == 1.414213562373095
    d = sc.gradient(implicit_root, "root", "a")
    assert float(d(2.0)) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-15)
    h = sc.hessian(implicit_root, "root", "a")(2.0)
    assert h[0, 0] == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-13)
    # forward mode without a forward rule differentiates the loop (no trajectory)
    assert float(sc.forward(implicit_root, "root", "a")(2.0, 1.0)) == pytest.approx(
        0.5 / np.sqrt(2.0), rel=1e-14)
    text = sc.render_expr_assembly(implicit_root)
    assert 'expr.custom_call(%0) {callee="stored_root", output=0}' in text


def test_custom_derivative_forward_rule_and_signature_checks():
    @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    def cube(x):
        return x * x * x

    @sc.function(sc.arg("x", ()), sc.arg("tan_x", ()), outputs=sc.arg("tan_y", ()))
    def cube_forward(x, t):
        return 3.0 * x * x * t

    @sc.function(sc.arg("x", ()), sc.arg("adj_y", ()), outputs=sc.arg("adj_x", ()))
    def cube_reverse(x, g):
        return 3.0 * x * x * g

    both = sc.custom_derivative(cube, forward=cube_forward, reverse=cube_reverse)
    assert float(sc.forward(both, "y", "x")(2.0, 1.0)) == 12.0
    assert sc.forward(both, "y", "x", directions=2)(2.0, np.array([1.0, -0.5])).tolist() \
        == [12.0, -6.0]
    plain = sc.custom_derivative(cube, reverse=cube_reverse)
    assert sc.forward(plain, "y", "x", directions=2)(2.0, np.array([1.0, -0.5])).tolist() \
        == [12.0, -6.0]
    assert float(sc.gradient(both, "y", "x")(2.0)) == 12.0
    assert sc.hessian(both, "y", "x")(2.0)[0, 0] == 12.0
    with pytest.raises(sc.LayoutError, match="reverse Function cube must take the inputs of cube followed by one adjoint per output"):
        sc.custom_derivative(cube, reverse=cube)
    with pytest.raises(sc.LayoutError, match="forward Function cube_reverse must return"):
        wrong = sc.function(sc.arg("x", ()), sc.arg("t", ()),
                            outputs=sc.arg("z", 2))(lambda x, t: sc.stack([x, t]))
        wrong.name = "cube_reverse"
        sc.custom_derivative(cube, forward=wrong)


# ---------------------------------------------------------------------------
# errors of sc.scan and sc.while_loop
# ---------------------------------------------------------------------------

def test_a_body_that_changes_its_carry_is_refused_naming_the_carry():
    @sc.function(sc.arg("c", 2))
    def shrink(c):
        return c[0]

    @sc.function(sc.arg("c", ()))
    def to_int(c):
        return sc.const(np.int64(1))

    with pytest.raises(sc.ScalyShapeError, match="carry 'c' has shape \\(2,\\), but shrink "
                       "returns its next value 'out' with shape \\(\\)"):
        sc.scan(shrink, sc.sym("c", 2), length=3)
    with pytest.raises(sc.LayoutError, match="carry 'c' is float64, but to_int returns"):
        sc.scan(to_int, sc.sym("c", ()), length=3)
    with pytest.raises(sc.ScalyShapeError, match="carry 'x' is declared with shape"):
        sc.scan(model, sc.sym("c", 3), (sc.sym("u", 3),), length=3)


def test_scan_argument_errors():
    x0, u = sc.sym("x0", 2), sc.sym("u", 3)
    with pytest.raises(sc.ScalyShapeError, match="leading axis of 3 steps.*sc.broadcast"):
        sc.scan(model, x0, (sc.sym("u", 5),), length=3)
    with pytest.raises(sc.LayoutError, match="model has 2 parameters.*0 input"):
        sc.scan(model, x0, length=3)
    with pytest.raises(sc.LayoutError, match="index=True passes the step number"):
        sc.scan(model, x0, (u,), length=3, index=True)
    with pytest.raises(ValueError, match="length must be a non-negative int"):
        sc.scan(model, x0, (u,), length=-1)
    with pytest.raises(sc.LayoutError, match="trip is declared int64"):
        sc.scan(model, x0, (u,), length=3, trip=sc.sym("t", ()))
    with pytest.raises(sc.LayoutError, match="trip is int64, and 2.5 would change"):
        sc.scan(model, x0, (u,), length=3, trip=2.5)
    costs = sc.scan(model, np.zeros(2), (np.ones(3),), length=3, trip=2.0)[1][0]
    assert costs.tolist() == pytest.approx([0.0, 0.01, 0.0], abs=1e-17)   # 2 steps run
    with pytest.raises(TypeError, match="must be an sc.Function"):
        sc.scan(lambda c: c, x0, length=3)
    with pytest.raises(sc.ScalyShapeError, match="reads a window of 1 element"):
        sc.scan(model, x0, (sc.window(u, 1, 1),), length=3)


def test_while_loop_argument_errors():
    a = sc.sym("a", ())
    with pytest.raises(ValueError, match="give max_iter="):
        sc.while_loop(unsolved, newton, 1.0, params=(a,))
    with pytest.raises(sc.LayoutError, match="must return one bool scalar"):
        sc.while_loop(newton, newton, 1.0, max_iter=3, params=(a,))
    with pytest.raises(sc.LayoutError, match="unsolved has 2 parameters.*0 parameter"):
        sc.while_loop(unsolved, newton, 1.0, max_iter=3)
    with pytest.raises(sc.LayoutError, match="returns only its next carries"):
        sc.while_loop(unsolved, sine_step, 1.0, max_iter=3, params=(a,))


# ---------------------------------------------------------------------------
# sc.broadcast and sc.window in sc.vmap
# ---------------------------------------------------------------------------

def test_vmap_takes_broadcast_and_window():
    @sc.function(sc.arg("x", 2), sc.arg("p", ()))
    def stage(x, p):
        return (x[1] - x[0]) * p

    @sc.function(sc.arg("z", 4), sc.arg("p", ()), outputs=sc.arg("d", 3))
    def diffs(z, p):
        return sc.vmap(stage, 3, [sc.window(z, 0, 1), sc.broadcast(p)])

    z = np.array([1.0, 4.0, 9.0, 16.0])
    np.testing.assert_allclose(diffs(z, 2.0), 2.0 * np.diff(z), rtol=1e-15)
    with pytest.raises(sc.ScalyShapeError, match="sc.broadcast needs an expression of 1"):
        sc.vmap(stage, 3, [sc.window(sc.sym("z", 4), 0, 1), sc.broadcast(sc.sym("q", 2))])


def test_scan_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_cost(c0, xs):
        def step(c, x):
            return jnp.sin(c * x) + x, c * c * x
        last, ys = jax.lax.scan(step, c0, xs)
        return last * ys.sum()

    @sc.function(sc.arg("c0", ()), sc.arg("xs", 5), outputs=sc.arg("cost", ()))
    def cost(c0, xs):
        last, (ys,) = sc.scan(sine_step, c0, (xs,), length=5)
        return last * ys.sum()

    for inp, k in (("c0", 0), ("xs", 1)):
        want = np.asarray(jax.grad(jax_cost, argnums=k)(0.8, XS))
        np.testing.assert_allclose(sc.gradient(cost, "cost", inp)(0.8, XS), want,
                                   rtol=1e-13, atol=1e-14)
        H = np.asarray(jax.hessian(jax_cost, argnums=k)(0.8, XS))
        np.testing.assert_allclose(sc.hessian(cost, "cost", inp)(0.8, XS),
                                   H.reshape(np.size(want), np.size(want)),
                                   rtol=1e-12, atol=1e-13)


def test_building_derivatives_and_patterns_runs_no_loop_and_prints_nothing(capsys):
    from scaly_control_programs import printed_rollout
    hess = sc.hessian(printed_rollout, "final", "initial")
    pattern = sc.jacobian_sparsity(printed_rollout.outputs[0], printed_rollout.inputs[0])
    assert pattern.to_mask().tolist() == [[True]]
    assert capsys.readouterr().out == ""
    H = hess(np.array(1.0))
    assert capsys.readouterr().out != ""
    # d2/dx2 of f(f(f(x))), f(x) = x^2 + 1, at 1: f' = 2x, f'' = 2
    x1, x2 = 2.0, 5.0
    d1 = 2 * x2 * 2 * x1 * 2 * 1.0
    d2 = (2 * (2 * x1 * 2) ** 2 * 1.0 + 2 * x2 * (2 * (2 * 1.0) ** 2 + 2 * x1 * 2)) * 1.0
    assert d1 == 80.0
    assert H[0, 0] == pytest.approx(d2, rel=1e-14)


def test_loops_in_an_unselected_branch_do_not_run(capsys):
    @sc.function(sc.arg("c", ()))
    def loud(c):
        return sc.print("step {}", c) + 1.0

    @sc.function(sc.arg("x", ()))
    def looping(x):
        return sc.scan(loud, x, length=3)[0]

    @sc.function(sc.arg("x", ()))
    def plain(x):
        return x * 2.0

    @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    def chosen(x):
        return sc.cond(x > 0.0, (plain, looping), x)

    assert float(chosen(-1.0)) == -2.0
    assert capsys.readouterr().out == ""
    assert float(chosen(1.0)) == 4.0
    assert capsys.readouterr().out == "step 1\nstep 2\nstep 3\n"

    @sc.function(sc.arg("x", ()), outputs=sc.arg("y", ()))
    def constant_start(x):                  # a loop on constants, traced: not run yet
        return sc.scan(loud, sc.const(0.5), length=2)[0] * x
    assert capsys.readouterr().out == ""
    assert float(constant_start(2.0)) == 5.0
    assert capsys.readouterr().out == "step 0.5\nstep 1.5\n"


def test_cond_and_while_loop_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    from scaly_control_programs import absolute_root, root

    def jax_absolute_root(x):
        return jax.lax.cond(x > 0.0, jnp.sqrt, lambda v: jnp.sqrt(-v), x)

    for x in (-4.0, 2.5):
        assert float(sc.gradient(absolute_root, "root", "x")(x)) == pytest.approx(
            float(jax.grad(jax_absolute_root)(x)), rel=1e-15)
        assert sc.hessian(absolute_root, "root", "x")(x)[0, 0] == pytest.approx(
            float(jax.hessian(jax_absolute_root)(x)), rel=1e-14)

    def jax_root(a):                  # JAX differentiates while_loop in forward mode
        def go(x):
            return jnp.abs(x * x - a) > 1e-12
        return jax.lax.while_loop(go, lambda x: 0.5 * (x + a / x), 1.0)

    for a in (2.0, 7.0):
        _, want = jax.jvp(jax_root, (a,), (1.0,))
        got = float(sc.forward(root, "root", "a")(a, 1.0))
        assert got == pytest.approx(float(want), rel=1e-14)
        assert float(sc.gradient(root, "root", "a")(a)) == pytest.approx(got, rel=1e-14)
        second = jax.jacfwd(jax.jacfwd(jax_root))(a)
        assert sc.hessian(root, "root", "a")(a)[0, 0] == pytest.approx(float(second),
                                                                         rel=1e-12)
