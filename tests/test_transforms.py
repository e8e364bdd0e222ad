"""The functional API: structures, dtypes, eager control flow and errors."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp


def test_argnums_and_has_aux():
    f = lambda x, y, z: x * y * z
    assert ta.grad(f, argnums=1)(2.0, 3.0, 4.0) == 8.0
    assert ta.grad(f, argnums=(0, 2))(2.0, 3.0, 4.0) == (12.0, 6.0)
    assert ta.grad(f, argnums=-1)(2.0, 3.0, 4.0) == 6.0
    g, aux = ta.grad(lambda x: (x * x, "aux"), has_aux=True)(3.0)
    assert g == 6.0 and aux == "aux"
    (v, aux), g = ta.value_and_grad(lambda x: (x * x, {"k": 1}), has_aux=True)(3.0)
    assert v == 9.0 and aux == {"k": 1} and g == 6.0


def test_pytree_inputs_and_outputs():
    params = {"W": np.ones((2, 3)), "b": np.zeros(2), "scale": 2.0}

    def loss(p, x):
        return p["scale"] * tnp.sum(tnp.tanh(p["W"] @ x + p["b"]))
    x = np.array([0.1, 0.2, 0.3])
    g = ta.grad(loss)(params, x)
    assert set(g) == {"W", "b", "scale"}
    assert g["W"].shape == (2, 3) and g["b"].shape == (2,)
    h = 1e-6
    p2 = dict(params, scale=2.0 + h)
    assert g["scale"] == pytest.approx((loss(p2, x) - loss(params, x)) / h, rel=1e-5)
    out, tangent = ta.jvp(lambda a, b: (a * b, [a + b]), (1.0, 2.0), (1.0, 0.0))
    assert out == (2.0, [3.0]) and tangent == (2.0, [1.0])


def test_results_are_numpy_and_keep_float32():
    x32 = np.array([1.0, 2.0], dtype=np.float32)
    g = ta.grad(lambda x: tnp.sum(tnp.sin(x) * x))(x32)
    assert isinstance(g, np.ndarray) and g.dtype == np.float32
    gs = ta.grad(lambda x: x * x)(np.float32(3.0))
    assert gs.dtype == np.float32 and gs == 6.0
    v, g = ta.value_and_grad(lambda x: x * x)(3.0)
    assert type(v) is np.float64 and type(g) is np.float64
    out, t = ta.jvp(lambda x: x * 2.0, (x32,), (np.ones(2, np.float32),))
    assert out.dtype == np.float32 and t.dtype == np.float32
    J = ta.jacfwd(lambda x: tnp.sin(x))(x32)
    assert J.dtype == np.float32 and J.shape == (2, 2)


def test_ints_are_promoted_and_int_arrays_refused():
    assert ta.grad(lambda x: x * x)(3) == 6.0
    with pytest.raises(TypeError, match="not differentiable"):
        ta.grad(lambda x: tnp.sum(x))(np.arange(3))


def test_numpy_scalars_mix_with_tracers():
    f = lambda x: np.float64(2.0) * x + x * np.float64(3.0) - np.float64(1.0) / x
    assert ta.grad(f)(1.0) == pytest.approx(6.0, rel=1e-15)
    assert ta.grad(lambda x: abs(-x) + (+x) ** 2.0 + 2.0 ** x)(1.0) == pytest.approx(
        1.0 + 2.0 + 2.0 * np.log(2.0), rel=1e-15)


def test_plain_numpy_functions_work_on_tracers():
    def f(x):
        return np.sum(np.exp(np.sin(x)) * x[::-1]) + np.mean(x.reshape(2, 2).T @ x[:2])
    x = np.array([0.1, 0.2, 0.3, 0.4])
    ta.check_grads(f, (x,), order=2)


def test_eager_control_flow_differentiates_the_branch_taken():
    def f(x):
        if x > 0:
            return tnp.sin(x)
        return x ** 3
    assert ta.grad(f)(0.5) == pytest.approx(np.cos(0.5), rel=1e-15)
    assert ta.grad(f)(-2.0) == pytest.approx(12.0, rel=1e-15)

    def newton_sqrt(a):
        x = a
        while abs(x * x - a) > 1e-12:
            x = 0.5 * (x + a / x)
        return x
    assert ta.grad(newton_sqrt)(2.0) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-9)
    assert ta.jvp(newton_sqrt, (2.0,), (1.0,))[1] == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-9)


def test_comparisons_return_plain_bools():
    def f(x):
        assert type(x > 0) is bool and type(x == x) is bool
        return x
    ta.grad(f)(1.0)
    ta.jvp(f, (1.0,), (1.0,))


def test_jacobians_shapes_and_agreement():
    def F(x):
        return tnp.sin(x[:, None] * x[None, :])     # (3,) -> (3, 3)
    x = np.array([0.1, 0.2, 0.3])
    J1, J2 = ta.jacfwd(F)(x), ta.jacrev(F)(x)
    assert J1.shape == (3, 3, 3)
    np.testing.assert_allclose(J1, J2, rtol=1e-15, atol=1e-15)
    J = ta.jacfwd(lambda a, b: a * b, argnums=(0, 1))(np.ones(2), np.full(2, 3.0))
    np.testing.assert_array_equal(J[0], 3 * np.eye(2))
    np.testing.assert_array_equal(J[1], np.eye(2))


def test_output_independent_of_input_gives_zero_gradient():
    assert ta.grad(lambda x: 3.0)(1.0) == 0.0
    np.testing.assert_array_equal(ta.grad(lambda x: 3.0)(np.ones(2)), np.zeros(2))
    assert ta.jvp(lambda x: 3.0, (1.0,), (1.0,))[1] == 0.0


def test_check_grads_on_composites():
    ta.check_grads(lambda x, y: tnp.sum(tnp.tanh(x @ y) ** 2),
                   (np.arange(6.0).reshape(2, 3) / 7, np.ones((3, 2)) / 3), order=2)
    ta.testing.check_grads(lambda x: x ** 2.5 / (1 + x), (1.3,), order=3)


# ---------------------------------------------------------------------------
# error paths: each says what to do
# ---------------------------------------------------------------------------

def test_grad_of_non_scalar_output():
    with pytest.raises(ta.NonScalarOutputError, match="jacrev"):
        ta.grad(lambda x: x * 2.0)(np.ones(3))


def test_shape_mismatch_in_jvp_and_vjp():
    with pytest.raises(ta.ShapeError, match="must match"):
        ta.jvp(lambda x: x, (np.ones(3),), (np.ones(2),))
    _, pb = ta.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(ta.ShapeError, match="must match"):
        pb(np.ones(2))
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        ta.grad(lambda x: tnp.sum(x + np.ones(4)))(np.ones(3))


def test_numpy_function_without_rule_names_it():
    with pytest.raises(ta.NonDifferentiableError, match="np.unique.*custom_vjp"):
        ta.grad(lambda x: np.sum(np.unique(x)))(np.ones(3))
    with pytest.raises(ta.NonDifferentiableError, match="np.nextafter"):
        ta.grad(lambda x: np.sum(np.nextafter(x, 2.0)))(np.ones(3))


def test_bad_arguments():
    with pytest.raises(ValueError, match="argnums 3 is out of range"):
        ta.grad(lambda x: x, argnums=3)(1.0)
    with pytest.raises(TypeError, match="derivatives need float"):
        ta.grad(lambda x: x)(True)
    with pytest.raises(TypeError, match="cannot differentiate with respect to a str"):
        ta.grad(lambda x: x)("a")
    with pytest.raises(TypeError, match="must return a pair"):
        ta.grad(lambda x: x, has_aux=True)(1.0)
    with pytest.raises(TypeError, match="drop its derivative"):
        ta.grad(lambda x: np.asarray(x).sum())(np.ones(2))
    with pytest.raises(TypeError, match="cannot be used as an index"):
        ta.grad(lambda x: [1.0, 2.0][x])(1.0)


def test_float32_in_float32_out_for_second_order_and_sparse():
    x = np.array([0.3, 0.5, 0.7], np.float32)
    f = lambda x: tnp.sum(tnp.sin(x) * x)            # noqa: E731
    r = lambda x: tnp.sin(x) * x                      # noqa: E731
    assert ta.hessian(f)(x).dtype == np.float32
    assert ta.jacfwd(ta.grad(f))(x).dtype == np.float32
    assert ta.hvp(f, (x,), (x,)).dtype == np.float32
    assert ta.sparse_hessian(f)(x).dtype == np.float32
    assert ta.sparse_hessian(f, coloring="acyclic")(x).dtype == np.float32
    assert ta.sparse_jacobian(r)(x).dtype == np.float32
    assert ta.sparse_jacobian(r, coloring="row")(x).dtype == np.float32
    np.testing.assert_allclose(ta.hessian(f)(x), ta.hessian(f)(x.astype(float)), rtol=1e-6)


def test_astype_on_tracers():
    x = np.array([1.5, 2.5])
    g = ta.grad(lambda x: tnp.sum(x.astype(np.float32) ** 2))(x)
    np.testing.assert_allclose(g, 2 * x)
    assert g.dtype == np.float64                      # the cotangent in x's dtype
    # to an integer dtype: piecewise constant, no derivative through the cast
    np.testing.assert_allclose(ta.grad(lambda x: tnp.sum(x.astype(np.int64) * x))(x), [1, 2])
    with pytest.raises(TypeError, match="casting"):
        ta.grad(lambda x: tnp.sum(x.astype(np.float32, casting="same_kind")))(x)
    rec = ta.record(lambda x: tnp.sum(x.astype(np.int64) * x), x)
    assert rec(np.array([3.5, 0.5])) == 3 * 3.5           # the cast is recomputed on replay


def test_transforms_leave_no_reference_cycles():
    # a cycle per call (tree_unflatten's self-calling closure did this) keeps
    # every call's leaves alive until the collector runs, and costs its time
    import gc
    f = lambda x: tnp.sum(tnp.sin(x[:-1] * x[-1]))   # noqa: E731
    x = np.linspace(0.1, 1.0, 7)
    calls = [lambda: ta.grad(f)(x), lambda: ta.hessian(f)(x),
             lambda: ta.sparse_hessian(f)(x), lambda: ta.grad(lambda d: d["a"][0] * d["b"])(
                 {"a": (2.0, [1.0]), "b": 3.0})]
    for call in calls:
        call()

    def ours(o):        # garbage made by tapead (other libraries' is not this test's)
        module = getattr(o, "__module__", None) or type(o).__module__ or ""
        return module.startswith("tapead") or isinstance(o, (ta.Tracer, ta.Tape))

    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for call in calls:
            for _ in range(5):
                call()
        gc.collect()
        assert [o for o in gc.garbage if ours(o)] == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
