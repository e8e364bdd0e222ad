"""``numpy.fft``'s names, differentiable: ``tapead.numpy.fft.fft`` etc.

On plain numpy inputs every function is numpy's own; on traced values it
records (reverse mode) or pushes tangents (forward mode).  The same
functions answer ``np.fft.fft(tracer)`` through numpy's
``__array_function__`` protocol.  Complex outputs follow JAX's convention
for complex derivatives (``docs/complex.md``); ``rfft``/``rfftn`` take real
input only.
"""
from tapead._prims.fft import (  # noqa: F401
    fft, fft2, fftfreq, fftn, fftshift, ifft, ifft2, ifftn, ifftshift, irfft, irfft2, irfftn,
    rfft, rfft2, rfftfreq, rfftn)

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2",
           "irfft2", "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]
