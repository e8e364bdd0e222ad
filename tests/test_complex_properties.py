"""Property tests: random straight-line programs mixing real and complex values.

A program is a list of steps over a growing list of values (no expression
trees, so nothing recursive): each step applies one operation to earlier
values -- lifting a real value to complex (``1j * x``, ``x * c``,
``exp(i x)``), complex arithmetic (``+ - * /``, ``**``), holomorphic
functions, ``conj``, the way back to real (``real``, ``imag``, ``abs``,
``angle``), reductions (``sum``/``mean`` with ``keepdims``), indexing (a
reversed last axis), ``matmul`` with a constant complex matrix, and numpy
broadcasting between the input shapes ``()``, ``(3,)`` and ``(2, 3)``.
Every value is squashed to modulus < 1 after each step, so every operation
stays smooth (``abs``/``angle`` and ``/`` see arguments away from 0 and the
branch cut).  The output is real; its gradient, a JVP and a Hessian-vector
product are checked against JAX (float64, 1e-12), or against central
differences when JAX is not installed.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead as ta

try:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
except ImportError:                       # pragma: no cover - finite differences instead
    jax = jnp = None

RTOL = 1e-12
SHAPES = [(), (3,), (2, 3)]
CMAT = np.array([[0.4 + 0.3j, -0.2j, 0.5], [0.1, 0.6 - 0.2j, 0.3j], [-0.5j, 0.2, 0.3 + 0.1j]])
LIFTS = ["times_i", "times_c", "exp_i", "plus_c"]
BINARY = ["add", "sub", "mul", "div", "pow_int"]
UNARY = ["exp", "sin", "tanh", "sqrt", "log", "square", "reciprocal", "conj", "neg"]
TO_REAL = ["real", "imag", "abs", "angle", "abs2"]
SHAPE_OPS = ["sum_keepdims", "mean_keepdims", "flip", "matmul"]


@st.composite
def programs(draw):
    n_in = draw(st.integers(1, 2))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_in)]
    steps = []
    n_values = n_in
    for _ in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["lift", "binary", "unary", "to_real", "shape"]))
        op = draw(st.sampled_from({"lift": LIFTS, "binary": BINARY, "unary": UNARY,
                                   "to_real": TO_REAL, "shape": SHAPE_OPS}[kind]))
        a = draw(st.integers(0, n_values - 1))
        b = draw(st.integers(0, n_values - 1))
        c = complex(draw(st.floats(-1, 1)), draw(st.floats(-1, 1)))
        steps.append((kind, op, a, b, c))
        n_values += 1
    seed = draw(st.integers(0, 2 ** 16))
    return shapes, steps, seed


def _squash(m, z):
    """z / sqrt(1 + |z|^2): smooth, modulus < 1, complex stays complex."""
    mod2 = m.real(z * m.conj(z)) if np.iscomplexobj(_val(z)) else z * z
    return z / m.sqrt(1.0 + mod2)


def _val(z):
    """The concrete value (tapead's boxes or JAX's tracers) for kind checks."""
    if jax is not None and isinstance(z, jax.core.Tracer):
        return np.zeros(z.shape, dtype=z.dtype)
    from tapead._core import concrete
    return concrete(z)


def _is_complex(z):
    return np.iscomplexobj(_val(z))


def _run(m, steps, xs):
    vals = list(xs)
    for kind, op, ia, ib, c in steps:
        a, b = vals[ia], vals[ib]
        if kind == "lift":
            out = {"times_i": lambda: 1j * a, "times_c": lambda: a * c,
                   "exp_i": lambda: m.exp(1j * a), "plus_c": lambda: a + c}[op]()
        elif kind == "binary":
            if op == "add":
                out = a + b
            elif op == "sub":
                out = a - b
            elif op == "mul":
                out = a * b
            elif op == "div":
                out = a / (2.0 + 0.5j + b)          # |b| < 1: the divisor is away from 0
            else:
                out = (a + 0.5j) ** 3
        elif kind == "unary":
            if op in ("sqrt", "log"):               # argument in the right half plane
                out = getattr(m, op)(1.5 + a)
            elif op == "reciprocal":
                out = m.reciprocal(1.5 + a)
            elif op == "conj":
                out = m.conj(a)
            elif op == "neg":
                out = -a
            else:
                out = getattr(m, op)(a)
        elif kind == "to_real":
            if op == "real":
                out = m.real(a)
            elif op == "imag":
                out = m.imag(a) if _is_complex(a) else a
            elif op == "abs":
                out = m.abs(a + (1.5 + 0.25j))      # |a| < 1: away from abs's kink at 0
            elif op == "angle":
                out = m.angle(a + 1.5 + 0.1j) if _is_complex(a) else m.angle(a + 1.5j)
            else:
                out = m.real(a * m.conj(a)) if _is_complex(a) else a * a
        else:
            shape = np.shape(_val(a))
            if not shape or (op == "matmul" and shape[-1] != 3):
                out = a * (1.0 - 0.5j)
            elif op == "sum_keepdims":
                out = m.sum(a, axis=-1, keepdims=True)
            elif op == "mean_keepdims":
                out = m.mean(a, axis=0, keepdims=True)
            elif op == "flip":
                out = a[..., ::-1]
            else:
                out = a @ CMAT
        vals.append(_squash(m, out))
    last = vals[-1]
    total = m.sum(last)
    if _is_complex(total):
        total = m.real(total) + 0.5 * m.imag(total) + m.abs(total + 1.5)
    return total + 0.0 * m.sum(vals[0])


def _inputs(shapes, rng):
    return tuple(float(rng.uniform(-1.5, 1.5)) if s == () else rng.uniform(-1.5, 1.5, s)
                 for s in shapes)


def _close(a, b, what, rtol=RTOL):
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        assert x.shape == y.shape, what
        err = float(np.max(np.abs(x - y), initial=0.0))
        scale = max(float(np.max(np.abs(y), initial=0.0)), 1.0)
        assert err <= rtol * scale, f"{what}: difference {err:.2e}"


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_complex_programs(problem):
    shapes, steps, seed = problem
    rng = np.random.default_rng(seed)
    xs = _inputs(shapes, rng)
    v = _inputs(shapes, rng)
    nums = tuple(range(len(xs)))
    f = lambda *a: _run(np, steps, a)                   # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        g = ta.grad(f, nums)(*xs)
        _, jv = ta.jvp(f, xs, v)
        hv = ta.hvp(f, xs, v)
    if jax is not None:
        fj = lambda *a: _run(jnp, steps, a)             # noqa: E731
        _close(g, tuple(jax.grad(fj, nums)(*xs)), "grad vs JAX")
        _close(jv, jax.jvp(fj, xs, v)[1], "jvp vs JAX")
        hj = jax.jvp(jax.grad(fj, nums), xs, v)[1]
        _close(hv if isinstance(hv, tuple) else (hv,), tuple(hj), "hvp vs JAX")
    else:                                               # pragma: no cover
        ta.check_grads(f, xs, order=2)
    # reverse and forward agree: <grad, v> = jvp
    dot = sum(float(np.sum(np.asarray(gk) * np.asarray(vk))) for gk, vk in zip(g, v))
    assert abs(dot - float(jv)) <= 1e-12 * max(1.0, abs(float(jv)))


@pytest.mark.parametrize("seed", range(3))
def test_random_complex_programs_match_finite_differences(seed):
    """A few fixed programs through check_grads (orders 1 and 2)."""
    steps = [("lift", "exp_i", 0, 0, 0j), ("binary", "mul", 2, 1, 0j),
             ("unary", "sin", 3, 3, 0j), ("shape", "matmul", 4, 4, 0j),
             ("to_real", "abs", 5, 5, 0j), ("binary", "div", 6, 2, 0j)]
    rng = np.random.default_rng(seed)
    xs = (rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3,)))
    ta.check_grads(lambda *a: _run(np, steps, a), xs, order=2)
