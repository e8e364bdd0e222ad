"""``scipy.stats.norm.logpdf`` of 10^6 points, and the spectral energy
``sum(|fft(x)|^2)`` of a 2^16-point signal: value and gradient by tapead and by
JAX (jitted), each divided by the time of the numpy/scipy value alone.  Run as a report with
``PYTHONPATH=. python benchmarks/bench_coverage.py``; as tests (pytest) it
checks the gradient only.
"""
from __future__ import annotations

import sys

import numpy as np
import scipy.stats

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.stats as tst

N = 10 ** 6


def _points(n=N):
    return np.random.default_rng(0).standard_normal(n)


def tapead_value_and_grad(x, loc=0.3, scale=1.7):
    return ta.value_and_grad(lambda v: tnp.sum(tst.norm.logpdf(v, loc, scale)))(x)


FFT_N = 2 ** 16


def spectral_energy(x):
    return np.sum(np.abs(np.fft.fft(x)) ** 2)


def tapead_fft_value_and_grad(x):
    return ta.value_and_grad(spectral_energy)(x)


def test_fft_energy_gradient():
    x = _points(256)
    val, g = tapead_fft_value_and_grad(x)
    assert np.isclose(val, spectral_energy(x), rtol=1e-13)
    np.testing.assert_allclose(g, 2 * 256 * x, rtol=1e-12)     # Parseval: |X|^2 = n |x|^2


def test_norm_logpdf_gradient():
    x = _points(1000)
    val, g = tapead_value_and_grad(x)
    assert np.isclose(val, scipy.stats.norm.logpdf(x, 0.3, 1.7).sum(), rtol=1e-13)
    np.testing.assert_allclose(g, -(x - 0.3) / 1.7 ** 2, rtol=1e-13)


def main():
    from common import cpu_name, measure
    x = _points()
    t_scipy = measure(scipy.stats.norm.logpdf, x, 0.3, 1.7)[0]
    t_ta = measure(tapead_value_and_grad, x)[0]
    print(f"norm.logpdf of {N} points on {cpu_name()} (min of repeats; a shared, "
          "loaded machine)")
    print(f"  scipy value:               {t_scipy * 1e3:8.2f} ms")
    print(f"  tapead value+grad:         {t_ta * 1e3:8.2f} ms  ({t_ta / t_scipy:.2f}x scipy)")
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        import jax.scipy.stats as jst
    except ImportError:
        print("  jax: not installed")
        fft_report(None, None, measure)
        return
    f = jax.jit(jax.value_and_grad(lambda v: jnp.sum(jst.norm.logpdf(v, 0.3, 1.7))))
    xj = jnp.asarray(x)
    jax.block_until_ready(f(xj))
    t_jax = measure(lambda v: jax.block_until_ready(f(v)), xj)[0]
    print(f"  jax (jit) value+grad:      {t_jax * 1e3:8.2f} ms  ({t_jax / t_scipy:.2f}x scipy)")
    fft_report(jax, jnp, measure)


def fft_report(jax, jnp, measure):
    x = _points(FFT_N)
    t_np = measure(spectral_energy, x)[0]
    t_ta = measure(tapead_fft_value_and_grad, x)[0]
    print(f"sum(|fft(x)|^2) of {FFT_N} points")
    print(f"  numpy value:               {t_np * 1e3:8.2f} ms")
    print(f"  tapead value+grad:         {t_ta * 1e3:8.2f} ms  ({t_ta / t_np:.2f}x numpy)")
    if jax is None:
        return
    f = jax.jit(jax.value_and_grad(lambda v: jnp.sum(jnp.abs(jnp.fft.fft(v)) ** 2)))
    xj = jnp.asarray(x)
    jax.block_until_ready(f(xj))
    t_jax = measure(lambda v: jax.block_until_ready(f(v)), xj)[0]
    print(f"  jax (jit) value+grad:      {t_jax * 1e3:8.2f} ms  ({t_jax / t_np:.2f}x numpy)")


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
