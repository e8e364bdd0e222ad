"""Complex values: real functions through complex intermediates, holomorphic=,
and the refusals.

* Worked examples (they were silently wrong once): d|ix|/dx = 1 at 0.7,
  d|e^{ix} x|/dx = 1, d|e^{ix}|/dx = 0.
* Every row of ``opspecs_complex.COMPLEX_SPECS`` (real -> complex -> real) in grad,
  jvp, vjp, jacfwd, jacrev and hessian, against JAX (float64, 1e-12) and
  against central differences (orders 1 and 2, ``ta.check_grads``).
* ``holomorphic=True`` against JAX; complex inputs/outputs without it, and
  primitives without complex rules, raise clear errors.
"""
import warnings
import zlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._tree import tree_flatten
from tapead.errors import NonDifferentiableError

from opspecs_complex import COMPLEX_NO_JAX, COMPLEX_SPECS

RTOL = 1e-12

CASES = [(spec, kind, shapes) for spec in COMPLEX_SPECS for kind, shapes in spec.kinds]
JAX_CASES = [case for case in CASES if case[0].name not in COMPLEX_NO_JAX]


def _case_id(case):
    return f"{case[0].name}-{case[1]}"


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _point(case):
    spec, kind, shapes = case
    return spec.sample(np.random.default_rng(_seed("complex", _case_id(case))), shapes)


def _rel_err(a, b):
    """max |a - b| / max(max |b|, 1): relative, but an exact zero (the derivative
    of |e^{ix}|) is compared to rounding level, not relatively."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1.0)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


def _close(a, b, what, rtol=RTOL):
    la, _ = tree_flatten(a)
    lb, _ = tree_flatten(b)
    assert len(la) == len(lb), what
    for x, y in zip(la, lb):
        err = _rel_err(x, y)
        assert err <= rtol, f"{what}: relative difference {err:.2e} > {rtol:g}"


@pytest.fixture(autouse=True)
def _complex_casts_are_errors():
    """A complex value cast to real anywhere is a failure, not a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        yield


# ---------------------------------------------------------------------------
# the worked examples
# ---------------------------------------------------------------------------

def test_abs_of_i_times_x():
    f = lambda x: np.abs(1j * x)                        # noqa: E731
    assert ta.grad(f)(0.7) == 1.0
    assert ta.jvp(f, (0.7,), (1.0,))[1] == 1.0
    assert ta.vjp(f, 0.7)[1](1.0)[0] == 1.0
    assert ta.grad(f)(-0.7) == -1.0


def test_abs_of_exp_times_x_matches_finite_differences():
    f = lambda x: np.abs(np.exp(1j * x) * x)            # noqa: E731
    fd = (f(0.7 + 1e-6) - f(0.7 - 1e-6)) / 2e-6
    assert abs(fd - 1.0) < 1e-8
    assert abs(ta.grad(f)(0.7) - 1.0) < 1e-15
    assert abs(ta.jvp(f, (0.7,), (1.0,))[1] - 1.0) < 1e-15
    assert abs(ta.hessian(f)(0.7)) < 1e-15


def test_abs_of_exp_has_zero_derivative():
    f = lambda x: np.abs(np.exp(1j * x))                # noqa: E731
    assert abs(ta.grad(f)(0.7)) < 1e-15
    assert np.max(np.abs(ta.grad(lambda x: f(x).sum())(np.linspace(-1, 1, 5)))) < 1e-15


def test_float32_stays_float32():
    x = np.float32(0.7)
    g = ta.grad(lambda x: np.abs(np.exp(1j * x) * x))(x)
    assert np.result_type(g) == np.float32 and abs(g - 1.0) < 1e-6
    xs = np.linspace(0.2, 1.0, 4, dtype=np.float32)
    g = ta.grad(lambda x: np.sum(np.real(np.exp(1j * x))))(xs)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, -np.sin(xs), rtol=1e-6)


# ---------------------------------------------------------------------------
# the complex rows against JAX: every transform
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax_reference():
    """case id -> (jax Jacobian blocks, jax Hessian blocks of the sum), all
    computed in one jitted call (eager JAX compiles every operation)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    funcs, points = [], []
    for case in JAX_CASES:
        spec = case[0]
        nums = tuple(range(len(spec.domain)))
        body = (lambda spec: lambda *a: spec.body(jnp, *a))(spec)
        total = (lambda body: lambda *a: jnp.sum(body(*a)))(body)
        funcs.append((jax.jacfwd(body, nums), jax.hessian(total, nums)))
        points.append(_point(case))
    results = jax.jit(lambda pts: [(j(*p), h(*p)) for (j, h), p in zip(funcs, pts)])(points)
    out = {}
    for case, (jac, hess) in zip(JAX_CASES, results):
        out[_case_id(case)] = (jax.tree_util.tree_map(np.asarray, jac),
                               jax.tree_util.tree_map(np.asarray, hess))
    return out


def _np_body(spec):
    return lambda *a: spec.body(np, *a)


@pytest.mark.parametrize("case", JAX_CASES, ids=_case_id)
def test_complex_row_matches_jax(case, jax_reference):
    spec = case[0]
    args = _point(case)
    nums = tuple(range(len(args)))
    f = _np_body(spec)
    total = lambda *a: np.sum(f(*a))                    # noqa: E731
    jac, hess = jax_reference[_case_id(case)]
    out = f(*args)
    assert not np.iscomplexobj(out), "the rows are real-valued"
    oshape = np.shape(out)
    _close(ta.jacfwd(f, nums)(*args), jac, f"{spec.name}: jacfwd")
    _close(ta.jacrev(f, nums)(*args), jac, f"{spec.name}: jacrev")
    _close(ta.hessian(total, nums)(*args), hess, f"{spec.name}: hessian")
    # grad of the sum, jvp and vjp along random directions, from the Jacobian
    rng = np.random.default_rng(_seed("dirs", _case_id(case)))
    v = tuple(float(rng.standard_normal()) if np.ndim(a) == 0 else
              rng.standard_normal(np.shape(a)) for a in args)
    u = rng.standard_normal(oshape) if oshape else float(rng.standard_normal())
    grads = tuple(np.sum(J, axis=tuple(range(len(oshape)))) for J in jac)
    _close(ta.grad(total, nums)(*args), grads, f"{spec.name}: grad")
    jv = sum(np.tensordot(J, vk, axes=np.ndim(vk)) for J, vk in zip(jac, v))
    _close(ta.jvp(f, args, v)[1], jv, f"{spec.name}: jvp")
    uj = tuple(np.tensordot(u, J, axes=len(oshape)) for J in jac)
    _close(ta.vjp(f, *args)[1](u), uj, f"{spec.name}: vjp")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_complex_row_matches_finite_differences(case):
    spec = case[0]
    args = _point(case)
    f = _np_body(spec)
    ta.check_grads(f, args, order=2)
    # jacfwd against central differences, element by element
    nums = tuple(range(len(args)))
    jac = ta.jacfwd(f, nums)(*args)
    eps = 1e-6
    for k, a in enumerate(args):
        flat = np.atleast_1d(np.asarray(a, np.float64)).ravel()
        for i in range(flat.size):
            def at(d):
                p = flat.copy()
                p[i] += d
                xk = float(p[0]) if np.ndim(a) == 0 else p.reshape(np.shape(a))
                return f(*(args[:k] + (xk,) + args[k + 1:]))
            fd = (np.asarray(at(eps)) - np.asarray(at(-eps))) / (2 * eps)
            col = np.asarray(jac[k]).reshape(np.shape(fd) + (-1,))[..., i]
            np.testing.assert_allclose(col, fd, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{spec.name}: d/d arg {k}[{i}]")


# ---------------------------------------------------------------------------
# holomorphic=True
# ---------------------------------------------------------------------------

HOLOMORPHIC = [
    ("square", lambda m, z: z * z, 1.0 + 2.0j),
    ("poly_exp", lambda m, z: m.exp(z) * z ** 3 - 2j * z, 0.3 - 0.7j),
    ("trig_log", lambda m, z: m.sin(z) / (1.0 + z) + m.log(z + 2.0), 0.5 + 0.4j),
]


@pytest.mark.parametrize("name, body, z0", HOLOMORPHIC, ids=[h[0] for h in HOLOMORPHIC])
def test_holomorphic_matches_jax(name, body, z0):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f = lambda z: body(np, z)                           # noqa: E731
    fj = lambda z: body(jnp, z)                         # noqa: E731
    g = ta.grad(f, holomorphic=True)(z0)
    assert np.iscomplexobj(g)
    _close(g, jax.grad(fj, holomorphic=True)(z0), f"{name}: grad")
    # the complex derivative, from a complex difference quotient
    h = 1e-7
    assert abs(g - (f(z0 + h) - f(z0 - h)) / (2 * h)) < 1e-6
    zs = np.array([z0, 0.5 * z0 + 0.1j, -0.3 + 0.2j])
    fv = lambda z: body(np, z)                          # noqa: E731
    jref = np.asarray(jax.jacfwd(lambda z: body(jnp, z), holomorphic=True)(zs))
    _close(ta.jacfwd(fv, holomorphic=True)(zs), jref, f"{name}: jacfwd")
    _close(ta.jacrev(fv, holomorphic=True)(zs), jref, f"{name}: jacrev")
    _close(ta.hessian(f, holomorphic=True)(z0), jax.hessian(fj, holomorphic=True)(z0),
           f"{name}: hessian")


def test_complex_primals_in_jvp_and_vjp_follow_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    z, t = np.array([3.0 + 4.0j, -1.0 + 0.5j]), np.array([1.0j, 0.5 - 0.2j])
    body = lambda m, z: m.sum(m.abs(z) ** 2 + m.real(m.exp(z) * m.conj(z)))  # noqa: E731
    _close(ta.jvp(lambda z: body(np, z), (z,), (t,)),
           jax.jvp(lambda z: body(jnp, z), (z,), (t,)), "jvp")
    _close(ta.vjp(lambda z: body(np, z), z)[1](1.0),
           jax.vjp(lambda z: body(jnp, z), z)[1](1.0), "vjp")
    # a complex output: pullback of a complex cotangent
    g = lambda m, z: m.exp(z) * m.conj(z)               # noqa: E731
    ct = np.array([0.3 - 1.0j, 2.0 + 0.1j])
    _close(ta.vjp(lambda z: g(np, z), z)[1](ct), jax.vjp(lambda z: g(jnp, z), z)[1](ct),
           "vjp, complex output")
    _close(ta.jvp(lambda z: g(np, z), (z,), (t,)), jax.jvp(lambda z: g(jnp, z), (z,), (t,)),
           "jvp, complex output")


def test_real_to_complex_jacfwd_and_jvp():
    x = np.array([0.7, -0.2])
    J = ta.jacfwd(lambda x: np.exp(1j * x))(x)
    np.testing.assert_allclose(J, np.diag(1j * np.exp(1j * x)), rtol=1e-15)
    out, t = ta.jvp(lambda x: 1j * x, (0.7,), (1.0,))
    assert out == 0.7j and t == 1j
    # JAX's pullback of a real-to-complex map takes the real part of ct * dz/dx
    assert ta.vjp(lambda x: 1j * x, 0.7)[1](1.0 + 2.0j)[0] == -2.0


# ---------------------------------------------------------------------------
# refusals: a clear error, never a wrong number
# ---------------------------------------------------------------------------

def test_grad_of_complex_output_needs_holomorphic():
    with pytest.raises(TypeError, match="holomorphic=True"):
        ta.grad(lambda x: 1j * x)(0.7)
    with pytest.raises(TypeError, match="real-valued outputs"):
        ta.grad(lambda x: np.sum(np.exp(1j * x)))(np.ones(3))
    with pytest.raises(TypeError, match="holomorphic=True"):
        ta.jacrev(lambda x: 1j * x)(np.ones(2))


def test_complex_inputs_need_holomorphic():
    with pytest.raises(TypeError, match="holomorphic=True"):
        ta.grad(lambda z: np.abs(z))(1.0 + 1.0j)
    with pytest.raises(TypeError, match="holomorphic=True"):
        ta.jacfwd(lambda z: z * z)(np.array([1.0 + 1.0j]))
    with pytest.raises(TypeError, match="holomorphic=True"):
        ta.jacrev(lambda z: np.abs(z))(np.array([1.0 + 1.0j]))


def test_holomorphic_needs_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match="needs complex inputs"):
        ta.grad(lambda z: z * z, holomorphic=True)(3.0)
    with pytest.raises(TypeError, match="complex-valued function"):
        ta.grad(lambda z: np.abs(z), holomorphic=True)(3.0 + 1.0j)
    with pytest.raises(TypeError, match="needs complex inputs"):
        ta.jacfwd(lambda z: z * z, holomorphic=True)(np.ones(2))


def test_tangent_and_cotangent_kinds_must_match():
    with pytest.raises(TypeError, match="complex tangent"):
        ta.jvp(lambda z: z * z, (1.0 + 1.0j,), (1.0,))
    with pytest.raises(TypeError, match="real tangent"):
        ta.jvp(lambda x: x * x, (1.0,), (1.0j,))
    with pytest.raises(TypeError, match="complex cotangent for a real output"):
        ta.vjp(lambda x: x * x, 1.0)[1](1.0j)


@pytest.mark.parametrize("name, f", [
    ("arcsin", lambda x: np.abs(np.arcsin(1j * x))),
    ("maximum", lambda x: np.abs(np.maximum(1j * x, 0.5j))),
    ("sign", lambda x: np.real(np.sign(1j * x + 1.0))),
    ("cumprod", lambda x: np.abs(np.cumprod(1j * x))),
])
def test_primitives_without_complex_rules_refuse(name, f):
    x = np.array([0.7, 0.4])
    for transform in (lambda: ta.grad(lambda x: np.sum(f(x)))(x),
                      lambda: ta.jvp(lambda x: np.sum(f(x)), (x,), (np.ones(2),))):
        with pytest.raises(NonDifferentiableError, match=f"'{name}'.*complex"):
            transform()


def test_astype_complex_to_real_refuses():
    with pytest.raises(NonDifferentiableError, match="astype.*imaginary part"):
        ta.grad(lambda x: (1j * x + x).astype(np.float64))(0.7)
    with pytest.raises(NonDifferentiableError, match="astype"):
        ta.grad(lambda x: np.sum(tnp.astype(np.exp(1j * x), np.float64)))(np.ones(2))
    # real -> complex is fine: the cotangent's real part goes back
    g = ta.grad(lambda x: np.real(tnp.astype(x, np.complex128) * (2.0 + 1j)))(0.7)
    assert g == 2.0


def test_a_wrong_complex_rule_is_caught_not_cast():
    """A primitive that claims complex support but returns a complex
    cotangent for a real input is stopped by the sweep (reverse) and by the
    forward trace (forward), naming the primitive."""
    from tapead._core import bind
    from tapead._prims.base import Primitive
    bad = Primitive("bad_lift", lambda x: x * (1.0 + 1.0j), saves=())
    bad.defvjp(lambda g, ans, x: g * (1.0 + 1.0j))      # forgets the real part
    bad.defjvp(lambda t, ans, x: t * (1.0 + 1.0j))
    bad.complex_ok = True
    back = Primitive("bad_abs", np.abs, saves=())
    back.defvjp(lambda g, ans, x: g)
    back.defjvp(lambda t, ans, x: t)                    # a complex tangent for a real value
    back.complex_ok = True
    with pytest.raises(NonDifferentiableError, match="'bad_lift'"):
        ta.grad(lambda x: np.real(bind(bad, x)))(np.ones(2).sum() * 0.7)
    with pytest.raises(NonDifferentiableError, match="'bad_abs'"):
        ta.jvp(lambda x: bind(back, x * 1j), (0.7,), (1.0,))
    with pytest.raises(NonDifferentiableError, match="'bad_abs'"):
        ta.jacfwd(lambda x: bind(back, x * 1j))(np.ones(2))


def test_methods_and_attributes():
    f = lambda x: (np.exp(1j * x) * x).real + 2.0 * (np.exp(1j * x) * x).imag  # noqa: E731
    g = ta.grad(lambda x: np.sum(f(x) + (1j * x).conj().imag))(np.array([0.7, 0.1]))
    x = np.array([0.7, 0.1])
    expect = (np.cos(x) - x * np.sin(x)) + 2.0 * (np.sin(x) + x * np.cos(x)) - 1.0
    np.testing.assert_allclose(g, expect, rtol=1e-14)
    assert ta.grad(lambda x: np.real(x) + np.imag(x) + np.angle(x))(0.7) == 1.0
