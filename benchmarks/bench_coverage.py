"""``scipy.stats.norm.logpdf`` of 10^6 points, and the spectral energy
``sum(|fft(x)|^2)`` of a 2^16-point signal: value and gradient by tapead, by
JAX (jitted) and by PyTorch (eager, ``torch.set_num_threads(1)``: tapead and
numpy use one core), each divided by the time of the numpy/scipy value alone.
Run as a report with ``PYTHONPATH=. python benchmarks/bench_coverage.py``; as
tests (pytest) it checks the gradients only (torch's when it is installed).
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


def torch_value_and_grad(torch, x, loc=0.3, scale=1.7):
    """``Normal(loc, scale).log_prob`` summed, and its gradient (torch eager)."""
    t = torch.from_numpy(x).requires_grad_()
    f64 = torch.float64               # float parameters would be float32 tensors
    val = torch.distributions.Normal(torch.tensor(loc, dtype=f64),
                                     torch.tensor(scale, dtype=f64)).log_prob(t).sum()
    val.backward()
    return val.item(), t.grad.numpy()


def torch_fft_value_and_grad(torch, x):
    t = torch.from_numpy(x).requires_grad_()
    val = torch.sum(torch.abs(torch.fft.fft(t)) ** 2)
    val.backward()
    return val.item(), t.grad.numpy()


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


def test_torch_gradients_agree(torch_1thread):
    x = _points(256)
    val, g = torch_fft_value_and_grad(torch_1thread, x)
    assert np.isclose(val, spectral_energy(x), rtol=1e-13)
    np.testing.assert_allclose(g, 2 * 256 * x, rtol=1e-12)
    x = _points(1000)
    val, g = torch_value_and_grad(torch_1thread, x)
    np.testing.assert_allclose(g, tapead_value_and_grad(x)[1], rtol=1e-13)
    assert np.isclose(val, scipy.stats.norm.logpdf(x, 0.3, 1.7).sum(), rtol=1e-13)


def _torch():
    """torch restricted to one thread, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def main():
    from common import cpu_name, measure
    x = _points()
    t_scipy = measure(scipy.stats.norm.logpdf, x, 0.3, 1.7)[0]
    t_ta = measure(tapead_value_and_grad, x)[0]
    print(f"norm.logpdf of {N} points on {cpu_name()} (min of repeats; a shared, "
          "loaded machine)")
    print(f"  scipy value:               {t_scipy * 1e3:8.2f} ms")
    print(f"  tapead value+grad:         {t_ta * 1e3:8.2f} ms  ({t_ta / t_scipy:.2f}x scipy)")
    torch = _torch()
    if torch is None:
        print("  torch: not installed")
    else:
        t_torch = measure(lambda v: torch_value_and_grad(torch, v), x)[0]
        print(f"  torch eager, 1 thread:     {t_torch * 1e3:8.2f} ms  "
              f"({t_torch / t_scipy:.2f}x scipy)")
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
    torch = _torch()
    if torch is not None:
        t_torch = measure(lambda v: torch_fft_value_and_grad(torch, v), x)[0]
        print(f"  torch eager, 1 thread:     {t_torch * 1e3:8.2f} ms  "
              f"({t_torch / t_np:.2f}x numpy)")
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
