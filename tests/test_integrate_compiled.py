"""The tangent system's right-hand side compiled to C (``tapead.integrate.compiled``).

Forward sensitivities call the tangent right-hand side once per solver step;
once a Jacobian tape's structure has been seen twice it is compiled, and the
solver calls the compiled function.  Its numbers are the tape's (to
rounding: the products for the tangents are summed in another order than
numpy's), so gradients agree with the tape path, with differences and with
JAX.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.compiler import eager, native
from tapead.integrate import kernels
from tapead.scipy.integrate import odeint

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler here")

R = np.array([1.0, -0.6, -0.4])
A3 = np.array([[-0.05, -0.8, 0.0], [0.5, 0.0, -0.6], [0.0, 0.4, 0.0]])
Y3 = np.array([1.0, 0.5, 0.3])
T = np.linspace(0.0, 8.0, 40)
DATA = np.cos(T)[:, None] * [0.2, 0.1, 0.05] + 1.0


def lotka_volterra(y, t, r, A):
    return y * (r + A @ y)


def loss(r, A, rhs=lotka_volterra):
    ys = odeint(rhs, Y3, T, r, A, rtol=1e-11, atol=1e-11, adjoint="forward")
    return tnp.sum((ys - DATA) ** 2)


@pytest.fixture
def used(monkeypatch):
    """(kernel, compiled function) of every lookup of a compiled right-hand side."""
    seen = []
    orig = kernels.RhsKernel._compiled

    def spy(self, *args):
        fun = orig(self, *args)
        seen.append((self, fun, args))
        return fun
    monkeypatch.setattr(kernels.RhsKernel, "_compiled", spy)
    return seen


def _settle(fn, *args):
    """Run ``fn`` until its Jacobian tape is compiled (in the background)."""
    eager._eager_on()
    for t in threading.enumerate():
        if t.name == "tapead-find-native":
            t.join(60)
    for _ in range(eager.EAGER_AFTER + 1):
        fn(*args)
    for t in threading.enumerate():
        if t.name == "tapead-compile-loop":
            t.join(60)


def _tape_path(fn, *args):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "compiled_tangent", lambda *a, **k: None)
        return fn(*args)


def test_gradients_through_the_compiled_rhs_are_the_tapes(used):
    grad = ta.grad(loss, argnums=(0, 1))
    _settle(grad, R, A3)
    del used[:]
    g = grad(R, A3)
    assert used and used[-1][1] is not None, "the compiled right-hand side did not run"
    ref = _tape_path(grad, R, A3)
    for a, b in zip(g, ref):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
    # and the derivative: five-point differences in r
    h = 1e-3
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        fd = (-loss(R + 2 * e, A3) + 8 * loss(R + e, A3) - 8 * loss(R - e, A3)
              + loss(R - 2 * e, A3)) / (12 * h)
        assert abs(g[0][i] - fd) <= 1e-7 * max(1.0, abs(fd))


def test_the_compiled_rhs_equals_the_tapes_at_many_points(used):
    grad = ta.grad(loss, argnums=(0, 1))
    _settle(grad, R, A3)
    del used[:]
    grad(R, A3)
    kernel, fun, (tape, u, t, p, Pdot, general, p_list, Z) = used[-1]
    assert fun is not None
    rng = np.random.default_rng(3)
    for _ in range(20):
        v = rng.normal(size=u.shape)
        tt = float(rng.uniform(0, 8))
        want = kernel.tangent_rhs(v, tt, p, p_list, Z)
        got = fun(v, tt)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * np.abs(want).max())


def test_gradient_matches_jax_odeint():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jax_odeint
    grad = ta.grad(loss, argnums=(0, 1))
    _settle(grad, R, A3)
    g = grad(R, A3)

    def jloss(r, A):
        ys = jax_odeint(lambda y, t, r, A: y * (r + A @ y), jnp.asarray(Y3), jnp.asarray(T),
                        r, A, rtol=1e-11, atol=1e-11)
        return jnp.sum((ys - DATA) ** 2)
    gj = jax.grad(jloss, argnums=(0, 1))(jnp.asarray(R), jnp.asarray(A3))
    for a, b in zip(g, gj):
        b = np.asarray(b)
        assert np.abs(a - b).max() <= 1e-7 * np.abs(b).max()


def test_a_rhs_with_a_branch_keeps_the_tape(used):
    def rhs(y, t, r, A):
        growth = r if y[0] < 5.0 else r * 0.5          # a recorded branch
        return y * (growth + A @ y)
    grad = ta.grad(lambda r, A: loss(r, A, rhs), argnums=(0, 1))
    _settle(grad, R, A3)
    del used[:]
    g = grad(R, A3)
    assert used and all(fun is None for _, fun, _ in used)
    ref = ta.grad(loss, argnums=(0, 1))(R, A3)     # the branch is never taken otherwise
    for a, b in zip(g, ref):
        np.testing.assert_allclose(a, b, rtol=1e-8)


def test_native_off_keeps_the_tape(used, monkeypatch):
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    grad = ta.grad(lambda r, A: loss(r * 1.0, A * 1.0), argnums=(0, 1))
    for _ in range(eager.EAGER_AFTER + 1):
        grad(R, A3)
    assert used and all(fun is None for _, fun, _ in used)
