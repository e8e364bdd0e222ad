"""np.fft: the op-spec rows (tests/opspecs_fft.py) check every transform in
grad/jvp/vjp, orders 1-2, float32/64 and grad against JAX; here:

* the product spec's example ``sum(|fft(x)|^2)`` and a few others against JAX
  in grad, jvp, jacfwd/jacrev and hessian (float64, 1e-12);
* ``ta.vjp`` of a complex-valued transform with a complex cotangent equals
  ``jax.vjp`` (JAX's convention: the transpose, no conjugate), for
  complex-to-complex, real-to-complex and complex-to-real transforms;
* plain inputs get numpy's results; numpy's dispatch reaches tapead;
* bad input (norm=, out=, axis, n, complex input to rfft) raises clearly.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import NonDifferentiableError  # noqa: F401

RTOL = 1e-12


def _close(a, b, what, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1.0)
    err = float(np.max(np.abs(a - b), initial=0.0)) / scale
    assert err <= rtol, f"{what}: relative difference {err:.2e} > {rtol:g}"


FUNCS = {
    "parseval": lambda m, x: m.sum(m.abs(m.fft.fft(x)) ** 2),
    "abs_rfft": lambda m, x: m.sum(m.abs(m.fft.rfft(x * x, n=7, norm="ortho"))),
    "irfft_of_phase": lambda m, x: m.sum(m.fft.irfft(m.exp(1j * x), n=9) ** 3),
    "rfftn_irfftn": lambda m, x: m.sum(m.sin(m.fft.irfftn(m.fft.rfftn(x.reshape(2, 4))
                                                          * (1.0 + 0.5j)))),
    "fft2_shift": lambda m, x: m.sum(m.real(m.fft.fftshift(m.fft.fft2(x.reshape(2, 4)))
                                            * m.exp(1j * x.reshape(2, 4)))),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_against_jax_grad_jvp_hessian(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f = FUNCS[name]
    x = np.random.default_rng(7).uniform(-1.5, 1.5, 8)
    v = np.random.default_rng(8).normal(size=8)
    _close(ta.grad(lambda x: f(np, x))(x), jax.grad(lambda x: f(jnp, x))(x), "grad")
    _close(ta.jvp(lambda x: f(np, x), (x,), (v,))[1],
           jax.jvp(lambda x: f(jnp, x), (x,), (v,))[1], "jvp")
    H = jax.hessian(lambda x: f(jnp, x))(x)
    _close(ta.hessian(lambda x: f(np, x))(x), H, "hessian")
    g = lambda m: (lambda x: m.real(m.fft.fft(m.sin(x)) * m.fft.fft(x[::-1])))  # noqa: E731
    _close(ta.jacfwd(g(np))(x), jax.jacfwd(g(jnp))(x), "jacfwd")
    _close(ta.jacrev(g(np))(x), jax.jacrev(g(jnp))(x), "jacrev")


VJPS = {
    "fft_complex_in": (lambda m, z: m.fft.fft(z, n=6, norm="ortho"), True),
    "ifftn_complex_in": (lambda m, z: m.fft.ifftn(z.reshape(2, 3), axes=(0, 1)), True),
    "fft_real_in": (lambda m, x: m.fft.fft(x), False),
    "rfft": (lambda m, x: m.fft.rfft(x, n=4), False),
    "rfft2": (lambda m, x: m.fft.rfft2(x.reshape(2, 3), norm="forward"), False),
    "irfft_complex_in": (lambda m, z: m.fft.irfft(z, n=9), True),
    "irfft_even": (lambda m, z: m.fft.irfft(z, norm="ortho"), True),
    "irfftn": (lambda m, z: m.fft.irfftn(z.reshape(2, 3), s=(3, 4)), True),
}


@pytest.mark.parametrize("name", sorted(VJPS))
def test_vjp_with_complex_cotangents_matches_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f, complex_in = VJPS[name]
    rng = np.random.default_rng(3)
    x = rng.normal(size=6) + (1j * rng.normal(size=6) if complex_in else 0.0)
    out, pull = ta.vjp(lambda x: f(np, x), x)
    jout, jpull = jax.vjp(lambda x: f(jnp, x), x)
    _close(out, jout, "value")
    g = rng.normal(size=np.shape(out))
    if np.iscomplexobj(jout):
        g = g + 1j * rng.normal(size=np.shape(out))
    _close(pull(g)[0], jpull(g)[0], "vjp")
    t = rng.normal(size=6) + (1j * rng.normal(size=6) if complex_in else 0.0)
    _close(ta.jvp(lambda x: f(np, x), (x,), (t,))[1],
           jax.jvp(lambda x: f(jnp, x), (x,), (t,))[1], "jvp")


def test_plain_inputs_and_dispatch():
    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(tnp.fft.rfftn(x), np.fft.rfftn(x))
    assert np.array_equal(tnp.fft.fftshift(x), np.fft.fftshift(x))
    assert np.array_equal(tnp.fft.fftfreq(4), np.fft.fftfreq(4))
    # np.fft.* on a traced value reaches tapead; the value is numpy's
    for name in ("fft", "ifft", "rfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn"):
        got = ta.jacfwd(lambda x: np.real(getattr(np.fft, name)(x)))(x)
        assert got.shape == np.real(getattr(np.fft, name)(x)).shape + x.shape, name
    for name in ("irfft", "irfft2", "irfftn", "fftshift", "ifftshift"):
        want = getattr(np.fft, name)(x)
        out, _ = ta.vjp(lambda x: getattr(np.fft, name)(x), x)
        np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14)


def test_float32_stays_single_precision():
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    g = ta.grad(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2))(x)
    assert g.dtype == np.float32


def _grad(f, x):
    return ta.grad(lambda x: np.sum(np.abs(f(x))))(x)


@pytest.mark.parametrize("f, exc, msg", [
    (lambda x: np.fft.fft(x, norm="unitary"), ValueError, "norm='unitary' is not one of"),
    (lambda x: np.fft.fft(x, axis=2), ValueError, "axis 2 is out of bounds"),
    (lambda x: np.fft.fft(x, n=0), ValueError, "n must be at least 1"),
    (lambda x: np.fft.irfft(x, n=-2), ValueError, "n must be at least 1"),
    (lambda x: np.fft.fftn(x, s=(2, 2), axes=(0,)), ValueError, "same length"),
    (lambda x: np.fft.rfft(x * 1j), TypeError, "takes real input"),
    (lambda x: np.fft.rfftn(x + 0j), TypeError, "takes real input"),
    (lambda x: np.fft.fft(x, out=np.zeros(3, complex)), TypeError, "out=..."),
])
def test_errors(f, exc, msg):
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(".", r"\.")):
        _grad(f, np.array([0.5, -1.0, 2.0]))


def test_fft_of_a_scalar_is_refused():
    with pytest.raises(ValueError, match="at least 1-d"):
        ta.grad(lambda x: np.abs(tnp.fft.fft(x)))(0.5)
