"""Fused elementwise kernels: numpy's values bit for bit, the same derivatives.

``sin`` and ``cos`` of a float64 array on a tape take both values from one C
pass (``_core.sin_with_cos``) and keep the partner for the reverse pass.  These
tests pin that the values are numpy's, that every path that cannot use the
kernel falls back to numpy, and that derivatives match the closed forms, the
unfused rules and JAX.
"""
import numpy as np
import pytest

import tapead as ta
from tapead import _core
from tapead._core import Tape
from tapead._prims import elementwise as E

active = pytest.mark.skipif(not _core.sincos_kernel_active(),
                            reason="this numpy's sine differs from libm's; the kernel is off")


def _probe():
    rng = np.random.default_rng(7)
    return np.concatenate([rng.uniform(-1, 1, 3000), rng.uniform(-1e4, 1e4, 3000),
                           rng.standard_normal(500) * 1e12,
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, np.pi]])


@active
@pytest.mark.parametrize("shape", [(1,), (7,), (6507,), (3, 5), (2, 3, 4)])
def test_sin_with_cos_is_numpys_bit_for_bit(shape):
    x = _probe()[:int(np.prod(shape))].reshape(shape)
    s, c = _core.sin_with_cos(x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(s, np.sin(x))
        np.testing.assert_array_equal(c, np.cos(x))
        assert np.array_equal(np.signbit(s), np.signbit(np.sin(x)))
    assert s.shape == c.shape == shape and s.dtype == c.dtype == np.float64


@pytest.mark.parametrize("x", [
    np.ones(5, dtype=np.float32),                 # numpy's float32 sine is its own
    np.ones(5, dtype=np.complex128),
    np.ones(10)[::2],                             # not C-contiguous
    np.asfortranarray(np.ones((3, 4))),
    np.array(0.5),                                # 0-d: np.sin returns a scalar
    [0.5, 1.0],                                   # not an array
    0.5,
], ids=["f32", "complex", "strided", "fortran", "0d", "list", "float"])
def test_sin_with_cos_declines_what_numpy_must_compute(x):
    assert _core.sin_with_cos(x) is None


def test_empty_array():
    if not _core.sincos_kernel_active():
        pytest.skip("kernel off")
    s, c = _core.sin_with_cos(np.empty((0, 3)))
    assert s.shape == c.shape == (0, 3)


def _closed_form(x):
    """gradient of sum(sin(x[:-1]) * x[1:] + cos(x)**2)"""
    g = -2.0 * np.cos(x) * np.sin(x)
    g[:-1] += np.cos(x[:-1]) * x[1:]
    g[1:] += np.sin(x[:-1])
    return g


def _f(x):
    return np.sum(np.sin(x[:-1]) * x[1:]) + np.sum(np.cos(x) ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_matches_closed_form_and_unfused_rules(dtype, monkeypatch):
    x = np.random.default_rng(0).uniform(-3, 3, 2000).astype(dtype)
    g = ta.grad(_f)(x)
    assert g.dtype == dtype
    tol = 1e-14 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(g, _closed_form(x.astype(np.float64)), rtol=tol, atol=tol)
    monkeypatch.setattr(E.sin.prim, "fwd_saved", None)
    monkeypatch.setattr(E.cos.prim, "fwd_saved", None)
    np.testing.assert_array_equal(ta.grad(_f)(x), g)     # the same numbers, unfused


def test_tape_keeps_the_partner_and_counts_it():
    x = np.linspace(-1, 1, 1000)
    tape = Tape()
    tx = tape.input(x)
    s = np.sin(tx)
    rec = tape.record(s.idx)
    if _core.sincos_kernel_active():
        assert len(rec.saved) == 2
        np.testing.assert_array_equal(rec.saved[1], np.cos(x))
        # sin's value and its cosine (x's shape only: the rule never reads x)
        assert tape.memory()["values"] == 2 * x.nbytes
    np.testing.assert_array_equal(s.primal, np.sin(x))


def test_replay_recomputes_the_partner():
    x = np.linspace(-1, 1, 50)
    tape = Tape()
    tx = tape.input(x)
    out = np.sum(np.cos(tx) * tx)
    x2 = x * 1.7 + 0.3
    tape.replay([x2])
    (g,) = tape.backward([out.idx], [1.0], [tx.idx])
    np.testing.assert_allclose(g, np.cos(x2) - x2 * np.sin(x2), rtol=1e-15, atol=1e-15)


def test_cotangent_arrays_are_not_aliased_to_the_saved_partner():
    # a sum's cotangent is a broadcast 1: the rule must not hand back (or write
    # into) the saved partner where the caller could mutate it
    x = np.linspace(-1, 1, 20)
    out, pullback = ta.vjp(lambda v: np.cos(v), x)
    g1 = pullback(np.ones(20))[0]
    g1 *= 0.0
    g2 = pullback(np.ones(20))[0]
    np.testing.assert_allclose(g2, -np.sin(x), rtol=1e-15)


def test_second_order_through_sin_and_cos():
    x = np.random.default_rng(1).uniform(-2, 2, 6)
    H = ta.hessian(lambda v: np.sum(np.sin(v) * np.cos(v[::-1])))(x)
    # d2/dxi dxj of the terms sin(x_i) cos(x_{5-i})
    ref = np.zeros((6, 6))
    for i in range(6):
        j = 5 - i
        ref[i, i] += -np.sin(x[i]) * np.cos(x[j])
        ref[j, j] += -np.sin(x[i]) * np.cos(x[j])
        ref[i, j] += np.cos(x[i]) * -np.sin(x[j])
        ref[j, i] += np.cos(x[i]) * -np.sin(x[j])
    np.testing.assert_allclose(H, ref, rtol=1e-13, atol=1e-14)


def test_hvp_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    x = np.random.default_rng(2).uniform(-2, 2, 300)
    v = np.random.default_rng(3).standard_normal(300)
    f = lambda a, m: m.sum(m.sin(a[:-1]) * a[1:]) + m.sum(m.cos(a) ** 3)   # noqa: E731
    ours = ta.hvp(lambda a: f(a, np), (x,), (v,))
    ref = jax.jvp(jax.grad(lambda a: f(a, jnp)), (x,), (v,))[1]
    np.testing.assert_allclose(ours, np.asarray(ref), rtol=1e-12, atol=1e-12)
    g = ta.grad(lambda a: f(a, np))(x)
    np.testing.assert_allclose(g, np.asarray(jax.grad(lambda a: f(a, jnp))(x)),
                               rtol=1e-13, atol=1e-13)


# -- forward mode: the tangent of a product of two dual arrays in one pass ------

def test_mul_tangent_is_numpys_three_passes_bit_for_bit():
    rng = np.random.default_rng(4)
    tx, y, ty, x = (rng.standard_normal((37, 3)) * 10.0 ** rng.integers(-100, 100, (37, 3))
                    for _ in range(4))
    out = _core.fused_mul_tangent(tx, y, ty, x)
    np.testing.assert_array_equal(out, tx * y + ty * x)


@pytest.mark.parametrize("case", ["f32", "shape", "strided", "int"])
def test_mul_tangent_declines_other_layouts(case):
    a = np.ones(6)
    args = {"f32": (a.astype(np.float32), a, a, a), "shape": (np.ones(5), a, a, a),
            "strided": (np.ones(12)[::2], a, a, a), "int": (a, a, a, np.ones(6, int))}[case]
    assert _core.fused_mul_tangent(*args) is None


def test_jvp_and_hvp_of_products_equal_the_unfused_rules(monkeypatch):
    rng = np.random.default_rng(5)
    x, v = rng.uniform(-2, 2, 500), rng.standard_normal(500)
    f = lambda u: np.sum((u * u) * (u ** 4) * np.sin(u))          # noqa: E731
    t = ta.jvp(lambda u: u * np.cos(u), (x,), (v,))[1]
    h = ta.hvp(f, (x,), (v,))
    monkeypatch.setattr(E.multiply.prim, "fused_jvp", 0)
    np.testing.assert_array_equal(ta.jvp(lambda u: u * np.cos(u), (x,), (v,))[1], t)
    np.testing.assert_array_equal(ta.hvp(f, (x,), (v,)), h)
    # and against the closed form of d/du (u cos u) . v
    np.testing.assert_allclose(t, (np.cos(x) - x * np.sin(x)) * v, rtol=1e-14, atol=1e-14)


def test_integer_power_derivative_is_the_products():
    x = np.random.default_rng(6).uniform(-2, 2, 100)
    np.testing.assert_array_equal(ta.grad(lambda u: np.sum(u ** 4))(x), 4.0 * (x * x * x))
    np.testing.assert_array_equal(ta.grad(lambda u: np.sum(u ** 3))(x), 3.0 * (x * x))
    h = ta.hvp(lambda u: np.sum(u ** 4), (x,), (np.ones(100),))
    np.testing.assert_allclose(h, 12.0 * x * x, rtol=1e-14)


# the dense cotangent of a slice of leading rows (x[a:b]), written in one pass
def _dense_reference(g, idx, shape, dtype):
    out = np.zeros(shape, dtype=np.result_type(dtype, g))
    np.add.at(out, idx, g) if not isinstance(idx, (slice, tuple)) else None
    if isinstance(idx, (slice, tuple)):
        view = out[idx]
        np.add(view, g, out=view)
    return out


@pytest.mark.parametrize("shape,idx", [
    ((10,), slice(1, None)), ((10,), slice(None, -1)), ((10,), slice(3, 7)),
    ((10,), (slice(2, 9),)), ((6, 4), slice(1, 5)), ((10,), slice(5, 5)),
    ((10,), slice(-3, None)), ((10,), slice(0, 10, 2)), ((6, 4), (slice(None), slice(1, 3))),
    ((0,), slice(0, None)),
], ids=["tail", "head", "middle", "tuple", "rows", "empty", "negative", "step2", "columns",
        "zero-size"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_scatter_dense_is_zeros_plus_g(shape, idx, dtype):
    rng = np.random.default_rng(4)
    view_shape = np.zeros(shape)[idx].shape
    g = rng.standard_normal(view_shape).astype(dtype)
    if g.size >= 3:
        g.flat[0], g.flat[1], g.flat[2] = -0.0, np.nan, np.inf
    d = _core.Scatter(g, idx, shape, dtype).dense()
    ref = _dense_reference(g, idx, shape, dtype)
    assert d.dtype == ref.dtype and d.shape == ref.shape
    np.testing.assert_array_equal(d, ref)
    assert np.array_equal(np.signbit(d.real), np.signbit(ref.real))   # +0.0 where 0.0 + -0.0


def test_scatter_dense_of_another_dtype_promotes():
    g = np.arange(3, dtype=np.float32)
    d = _core.Scatter(g, slice(1, 4), (5,), np.float64).dense()
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d, [0, 0, 1, 2, 0])


# the VJP of sin / cos with the partner saved is a product formed where it is
# added: into x's adjoint through x[a:b] in one C pass (FAST_PARTNER, FAST_GETITEM)
_PRODUCT_CASES = {
    "b2": lambda v: np.sum(np.sin(v[:-1]) * v[1:]),
    "cos": lambda v: np.sum(np.cos(v[1:]) * v[:-1]),
    "middle": lambda v: np.sum(np.sin(v[2:-3]) * v[:-5]) + np.sum(np.cos(v) * 0.5),
    "slice-first": lambda v: np.sum(np.sin(v[:-1]) ** 2) + np.sum(v[1:] * v[1:]),
    "rows": lambda v: np.sum(np.sin(v[1:]) * v[:-1]) if v.ndim == 1 else
    np.sum(np.cos(v[1:]) * v[:-1]),
    "twice": lambda v: np.sum(np.sin(v[:-1]) * v[1:] + np.sin(v[:-1])),
    "direct": lambda v: np.sum(np.sin(v) * v),
    "strided": lambda v: np.sum(np.sin(v[::2]) * v[1::2][:v[::2].size]),
    "columns": lambda v: np.sum(np.sin(v[:, 1:]) * v[:, :-1]) if v.ndim == 2 else
    np.sum(np.sin(v)),
}


def _product_inputs(dtype, two_d):
    x = np.random.default_rng(5).uniform(-3, 3, 240 if not two_d else (20, 12))
    return x.astype(dtype)


@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("name", list(_PRODUCT_CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_product_cotangent_is_the_unfused_rules(name, dtype, two_d, monkeypatch):
    f = _PRODUCT_CASES[name]
    x = _product_inputs(dtype, two_d)
    v, g = ta.value_and_grad(f)(x)
    assert g.dtype == dtype and g.shape == x.shape
    monkeypatch.setattr(E.sin.prim, "fast_vjp", 0)
    monkeypatch.setattr(E.cos.prim, "fast_vjp", 0)
    v2, g2 = ta.value_and_grad(f)(x)
    np.testing.assert_array_equal(g, g2)
    assert v == v2


@pytest.mark.parametrize("name", list(_PRODUCT_CASES))
def test_product_cotangent_against_finite_differences(name):
    x = _product_inputs(np.float64, False)[:40]
    ta.check_grads(_PRODUCT_CASES[name], (x,), order=2, modes=("rev",))


@pytest.mark.parametrize("name", ["b2", "cos", "middle", "twice", "direct"])
def test_product_cotangent_against_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    x = _product_inputs(np.float64, False)
    src = {"b2": lambda v, m: m.sum(m.sin(v[:-1]) * v[1:]),
           "cos": lambda v, m: m.sum(m.cos(v[1:]) * v[:-1]),
           "middle": lambda v, m: m.sum(m.sin(v[2:-3]) * v[:-5]) + m.sum(m.cos(v) * 0.5),
           "twice": lambda v, m: m.sum(m.sin(v[:-1]) * v[1:] + m.sin(v[:-1])),
           "direct": lambda v, m: m.sum(m.sin(v) * v)}[name]
    g = ta.grad(lambda v: src(v, np))(x)
    gj = np.asarray(jax.grad(lambda v: src(v, jnp))(x))
    np.testing.assert_allclose(g, gj, rtol=1e-13, atol=1e-13)


def test_product_cotangent_of_empty_and_pullback_twice():
    x = np.zeros(1)
    assert ta.grad(lambda v: np.sum(np.sin(v[:-1]) * v[1:]))(x).tolist() == [0.0]
    x = np.linspace(-1, 1, 30)
    out, pullback = ta.vjp(lambda v: np.sin(v[:-1]) * 2.0, x)
    g1 = pullback(np.ones(29))[0]
    g2 = pullback(np.ones(29))[0]
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(g1[:-1], 2.0 * np.cos(x[:-1]), rtol=1e-15)
    assert g1[-1] == 0.0


def test_product_cotangent_second_order():
    x = np.random.default_rng(8).uniform(-2, 2, 50)
    v = np.random.default_rng(9).standard_normal(50)
    f = lambda u: np.sum(np.sin(u[:-1]) * u[1:])                        # noqa: E731
    h = ta.hvp(f, (x,), (v,))
    ref = np.zeros(50)
    ref[:-1] += -np.sin(x[:-1]) * x[1:] * v[:-1] + np.cos(x[:-1]) * v[1:]
    ref[1:] += np.cos(x[:-1]) * v[:-1]
    np.testing.assert_allclose(h, ref, rtol=1e-13, atol=1e-13)


# tanh's cotangent (1 - a*a) * g from its output a, in one C pass
def _tanh_vjp_numpy(a, g):
    d = np.multiply(a, a)
    np.subtract(1.0, d, out=d)
    return np.multiply(d, g, out=d)


@pytest.mark.parametrize("shape", [(64, 64), (5000,), (0, 3), (7,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tanh_vjp_kernel_is_numpys_three_calls(shape, dtype):
    rng = np.random.default_rng(11)
    a = np.tanh(rng.standard_normal(shape) * 3).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    d = _core.fused_tanh_vjp(a, g)
    assert d.dtype == dtype and d.shape == shape
    np.testing.assert_array_equal(d, _tanh_vjp_numpy(a, g))


@pytest.mark.parametrize("a,g", [
    (np.ones(10)[::2], np.ones(5)),                           # strided
    (np.ones(5), np.ones(5, dtype=np.float32)),               # dtypes differ
    (np.ones(5), np.ones(4)),                                 # shapes differ
    (np.ones(5, dtype=np.complex128), np.ones(5, dtype=np.complex128)),
    (np.ones(5), 1.0),
], ids=["strided", "dtypes", "shapes", "complex", "float"])
def test_tanh_vjp_kernel_declines(a, g):
    assert _core.fused_tanh_vjp(a, g) is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tanh_gradient_through_the_kernel(dtype, monkeypatch):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 8)).astype(dtype)
    w = rng.standard_normal((8, 8)).astype(dtype)
    f = lambda v: np.sum(np.tanh(v @ w) * np.tanh(v.T[:, :, None] * 0.5))   # noqa: E731
    g = ta.grad(f)(x)
    monkeypatch.setattr(E.tanh.prim, "fast_vjp", 0)            # the Python rule
    np.testing.assert_array_equal(ta.grad(f)(x), g)
    if dtype == np.float64:
        ta.check_grads(f, (x,), order=2, modes=("rev",))
