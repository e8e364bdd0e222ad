"""Op-spec rows of tapead/_prims/fft.py (``np.fft``).

The transforms have complex values, so each row is a real-valued
composition (real/imag/abs of the spectrum, or a transform back to real),
as in ``opspecs_complex.py``; being linear, the transforms get nonzero
second derivatives through ``abs``/products.  ``abs`` stays off its kink at
0: the random spectra of these draws are nonzero.
"""
from __future__ import annotations

import numpy as np

from opspecs import REAL
from opspecs import _array_op as A

V5 = ("vector", ((5,),))
M23 = ("matrix", ((2, 3),))
M34 = ("matrix", ((3, 4),))
T232 = ("array3", ((2, 3, 2),))


def _parts(z):
    """A real function of every part of a complex value."""
    return z.real + 2.0 * z.imag


ARRAY_OPS = [
    # the product spec's own example: Parseval, in grad, jvp, hessian
    A("fft_abs2_sum", lambda m, x: m.sum(m.abs(m.fft.fft(x)) ** 2), V5, M23),
    A("fft_parts", lambda m, x: _parts(m.fft.fft(x * x)), V5, M23),
    A("fft_n_axis_norm", lambda m, x: m.abs(m.fft.fft(x, n=4, axis=0, norm="ortho")) ** 2,
      M23),
    A("fft_crop_forward", lambda m, x: _parts(m.fft.fft(m.sin(x), n=3, norm="forward")), V5),
    A("ifft_complex_in", lambda m, x: _parts(m.fft.ifft(m.exp(1j * x) * x, n=6)), V5, M23),
    A("ifft_norms", lambda m, x: _parts(m.fft.ifft(x + 1j * x * x, axis=0, norm="ortho"))
      + _parts(m.fft.ifft(x, norm="forward")) + _parts(m.fft.ifft(x, norm="backward")), M23),
    A("rfft_abs", lambda m, x: m.abs(m.fft.rfft(x)) ** 2 + _parts(m.fft.rfft(x * x)), V5, M34),
    A("rfft_n_axis", lambda m, x: _parts(m.fft.rfft(m.sin(x), n=6, axis=0, norm="ortho"))
      + m.sum(_parts(m.fft.rfft(x, n=2, norm="forward"))), M23),
    A("irfft_even", lambda m, x: m.fft.irfft(m.exp(1j * x) * x), M23, V5),
    A("irfft_odd_n", lambda m, x: m.fft.irfft(m.exp(1j * x) * (1.0 + x), n=5) ** 2, M34),
    A("irfft_axis_norms", lambda m, x: m.fft.irfft(m.exp(0.5j * x), n=3, axis=0,
                                                   norm="ortho")
      + m.fft.irfft(x * (1.0 - 1j * x), n=3, axis=0, norm="forward"), M23),
    A("irfft_real_in", lambda m, x: m.fft.irfft(x * x, n=7), V5),
    A("rfft_irfft_roundtrip", lambda m, x: m.fft.irfft(m.fft.rfft(x) * m.fft.rfft(x * x), n=5),
      V5),
    A("fft2", lambda m, x: m.abs(m.fft.fft2(x)) ** 2 + m.sum(_parts(m.fft.fft2(x, s=(3, 2)))), M23,
      T232),
    A("ifft2", lambda m, x: _parts(m.fft.ifft2(m.exp(1j * x), norm="ortho")), M23, T232),
    A("fftn_axes_s", lambda m, x: _parts(m.fft.fftn(x * x, s=(3, 4), axes=(0, 2))), T232),
    A("fftn_all", lambda m, x: m.abs(m.fft.fftn(x)) + _parts(m.fft.ifftn(x, norm="forward")),
      M34, T232),
    A("ifftn_axes", lambda m, x: _parts(m.fft.ifftn(m.exp(1j * x), axes=(1,))), M34),
    A("rfft2", lambda m, x: m.abs(m.fft.rfft2(x)) ** 2, M34, T232),
    A("rfftn_axes_s", lambda m, x: _parts(m.fft.rfftn(m.sin(x), s=(3, 3), axes=(1, 0),
                                                      norm="ortho")), T232),
    # odd last axes: the half spectrum has no Nyquist bin, so every bin but the
    # first counts twice in Parseval (the VJP's weights)
    A("rfftn_odd_last", lambda m, x: m.abs(m.fft.rfftn(x)) ** 2 + _parts(m.fft.rfftn(x * x)),
      ("odd", ((2, 5),)), ("odd3", ((2, 3, 3),))),
    A("irfftn_odd_s", lambda m, x: m.fft.irfftn(m.exp(1j * x) * (1.0 + x), s=(3, 7),
                                                axes=(0, 1)) ** 2, M34),
    A("irfftn_odd_all_axes", lambda m, x: m.fft.irfftn(m.exp(0.5j * x), s=(2, 3, 3),
                                                       axes=(0, 1, 2)), T232),
    A("irfft2", lambda m, x: m.fft.irfft2(m.exp(1j * x) * x), M34, T232),
    A("irfftn_s", lambda m, x: m.fft.irfftn(m.exp(1j * x) + x, s=(3, 5), axes=(0, 1),
                                            norm="forward") ** 2, M34),
    A("fftshift", lambda m, x: m.fft.fftshift(x) * x + m.fft.ifftshift(x, axes=0), M23, V5),
    A("fftshift_spectrum", lambda m, x: _parts(m.fft.fftshift(m.fft.fft(x), axes=(-1,))),
      V5, M23),
]
del A
_ = REAL
