"""Discrete Fourier transforms: ``np.fft`` with derivatives.

Three primitives carry every transform of ``numpy.fft``:

* ``fft`` (complex to complex over some axes, forward or inverse),
* ``rfft`` (real to half-spectrum along one axis),
* ``irfft`` (half-spectrum to real along one axis);

``fftn``/``rfftn``/``irfftn`` and the 2-d variants compose them axis by axis
(as numpy does), and ``n=``/``s=`` crop or zero-pad the input first with
``getitem``/``concatenate``.  All three are linear, so their JVP is the
transform of the tangent.  Their VJPs follow JAX's convention for complex
cotangents (``docs/complex.md``): the transpose, no conjugate.  The DFT matrix
is symmetric, so ``fft`` transposes to itself (same norm); ``rfft`` to the
real part of the ``fft`` of the zero-padded cotangent; ``irfft`` to the
conjugate of the ``rfft`` of the cotangent, doubled on the bins that stand
for two (JAX's ``_rfft_transpose`` / ``_irfft_transpose``), with the dual
norm.  The rules are written with these primitives, so they differentiate
again.
"""
from __future__ import annotations

import numpy as np

from tapead import patterns
from tapead._core import Box, bind, is_complex, lanes_of
from tapead._prims.base import Primitive
from tapead._prims import batching
from tapead._prims.elementwise import conjugate, real, unbroadcast
from tapead._prims.shape import concatenate, getitem, roll

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2",
           "irfft2", "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

from numpy.fft import fftfreq, rfftfreq  # noqa: E402  (no derivative: integer inputs)

_NORMS = (None, "backward", "ortho", "forward")
_DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}
_DENSE_REASON = ("a Fourier transform: every output entry depends on every input entry "
                 "along the transformed axes")


# the complex-to-complex transform ----------------------------------------------
def _c2c_impl(x, axes, inverse, norm):
    return (np.fft.ifftn if inverse else np.fft.fftn)(x, axes=axes, norm=norm)


fft_p = Primitive("fft", _c2c_impl, saves=(), linear=True)
# the DFT matrix is symmetric: the transpose is the same transform (same norm)
fft_p.defvjp(lambda g, ans, x, axes, inverse, norm:
             unbroadcast(x, bind(fft_p, g, axes=axes, inverse=inverse, norm=norm)))
fft_p.defbatched(lambda tans, ans, vals, params, K: bind(
    fft_p, tans[0], axes=tuple(a + 1 for a in params["axes"]), inverse=params["inverse"],
    norm=params["norm"]))
fft_p.defvmap(batching.axis_rule(fft_p, "axes"))
fft_p.defsparsity(patterns.DENSE, reason=_DENSE_REASON)
fft_p.complex_ok = True      # C-linear: the transpose, no conjugate (JAX's convention)


# real to half-spectrum ------------------------------------------------------------
def _resize(x, axis, n):
    """Crop or zero-pad ``x`` along ``axis`` to length ``n`` (as numpy's ``n=``)."""
    m = np.shape(x)[axis]
    if n == m:
        return x
    if n < m:
        return getitem(x, (slice(None),) * axis + (slice(0, n),))
    shape = list(np.shape(x))
    shape[axis] = n - m
    dtype = np.result_type(*([np.complex64] if is_complex(x) else []), _dtype_of(x))
    return concatenate([x, np.zeros(shape, dtype)], axis=axis)


def _dtype_of(x):
    return np.result_type(lanes_of(x))


def _rfft_vjp(g, ans, x, axis, norm):
    n = np.shape(x)[axis]
    return real(bind(fft_p, _resize(g, axis, n), axes=(axis,), inverse=False, norm=norm))


rfft_p = Primitive("rfft", lambda x, axis, norm: np.fft.rfft(x, axis=axis, norm=norm),
                   saves=(), linear=True)
rfft_p.defvjp(_rfft_vjp)
rfft_p.defbatched(lambda tans, ans, vals, params, K: bind(
    rfft_p, tans[0], axis=params["axis"] + 1, norm=params["norm"]))
rfft_p.defvmap(batching.axis_rule(rfft_p))
rfft_p.defsparsity(patterns.DENSE, reason=_DENSE_REASON)
rfft_p.complex_ok = True     # takes real values only (the wrapper refuses complex ones)


# half-spectrum to real ------------------------------------------------------------
def _irfft_vjp(g, ans, x, axis, n, norm):
    m = n // 2 + 1
    odd = n % 2
    mask = np.concatenate([[1.0], np.full(m - 2 + odd, 2.0), np.ones(1 - odd)])
    mask = mask.reshape((m,) + (1,) * (np.ndim(ans) - axis - 1))
    y = bind(rfft_p, g, axis=axis, norm=_DUAL[norm])
    return unbroadcast(x, conjugate(y * mask.astype(_dtype_of(g))))


irfft_p = Primitive("irfft", lambda x, axis, n, norm: np.fft.irfft(x, n=n, axis=axis,
                                                                    norm=norm),
                    saves=(), linear=True)
irfft_p.defvjp(_irfft_vjp)
irfft_p.defbatched(lambda tans, ans, vals, params, K: bind(
    irfft_p, tans[0], axis=params["axis"] + 1, n=params["n"], norm=params["norm"]))
irfft_p.defvmap(batching.axis_rule(irfft_p))
irfft_p.defsparsity(patterns.DENSE, reason=_DENSE_REASON)
irfft_p.complex_ok = True    # R-linear; its transpose conjugates, as JAX's


# argument handling as numpy's ----------------------------------------------------
def _check(name, a, norm, out):
    if out is not None:
        raise TypeError(f"np.fft.{name}(..., out=...) cannot write a traced value into an "
                        "array; assign the result instead")
    if norm not in _NORMS:
        raise ValueError(f"np.fft.{name}: norm={norm!r} is not one of 'backward', 'ortho', "
                         "'forward' (or None)")
    if np.ndim(a) == 0:
        raise ValueError(f"np.fft.{name}: the input must be at least 1-d, got a scalar")


def _axis(name, a, axis):
    nd = np.ndim(a)
    axis = int(axis)
    if not -nd <= axis < nd:
        raise ValueError(f"np.fft.{name}: axis {axis} is out of bounds for an array of "
                         f"dimension {nd}")
    return axis % nd


def _length(name, n, default):
    if n is None:
        return default
    n = int(n)
    if n < 1:
        raise ValueError(f"np.fft.{name}: invalid number of data points ({n}); "
                         "n must be at least 1")
    return n


def _axes_and_sizes(name, a, s, axes):
    """numpy's (s, axes) defaults: axes = the last len(s) axes, or all of them."""
    nd = np.ndim(a)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(_axis(name, a, ax) for ax in np.atleast_1d(axes))
    if s is None:
        s = tuple(np.shape(a)[ax] for ax in axes)
    s = tuple(s)
    if len(s) != len(axes):
        raise ValueError(f"np.fft.{name}: s and axes must have the same length, got "
                         f"{len(s)} and {len(axes)}")
    return s, axes


def _c2c(name, a, s, axes, norm, inverse):
    s, axes = _axes_and_sizes(name, a, s, axes)
    for n, ax in zip(s, axes):
        a = _resize(a, ax, _length(name, n, np.shape(a)[ax]))
    if len(set(axes)) != len(axes):          # repeated axes: transform once per entry
        for ax in axes:
            a = bind(fft_p, a, axes=(ax,), inverse=inverse, norm=norm)
        return a
    return bind(fft_p, a, axes=axes, inverse=inverse, norm=norm)


def _real_only(name, a):
    if is_complex(a):
        raise TypeError(f"np.fft.{name} takes real input; numpy would drop the imaginary "
                        "part (and its derivative). Take np.real(x) explicitly, or use "
                        "np.fft.fft / fftn for complex input")


# public functions ----------------------------------------------------------------
def fft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.fft`` with derivatives: the 1-d DFT along ``axis``.

    Parameters
    ----------
    a : array_like, shape (..., m, ...)
    n : int, optional
        Length of the transform (``a`` cropped or zero-padded along ``axis``).
    axis : int
    norm : {None, "backward", "ortho", "forward"}

    Returns
    -------
    complex ndarray, shape (..., n, ...)

    >>> import numpy as np, tapead as ta
    >>> f = lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2)     # Parseval: 4 |x|^2
    >>> print(ta.grad(f)(np.array([1.0, 2.0, 0.0, -1.0])))
    [ 8. 16.  0. -8.]
    """
    if not isinstance(a, Box):
        return np.fft.fft(a, n=n, axis=axis, norm=norm, out=out)
    _check("fft", a, norm, out)
    return _c2c("fft", a, None if n is None else (n,), (axis,), norm, False)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.ifft`` with derivatives (the inverse of :func:`fft`; same shapes)."""
    if not isinstance(a, Box):
        return np.fft.ifft(a, n=n, axis=axis, norm=norm, out=out)
    _check("ifft", a, norm, out)
    return _c2c("ifft", a, None if n is None else (n,), (axis,), norm, True)


def fftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.fftn`` with derivatives: the DFT over ``axes`` (sizes ``s``)."""
    if not isinstance(a, Box):
        return np.fft.fftn(a, s=s, axes=axes, norm=norm, out=out)
    _check("fftn", a, norm, out)
    return _c2c("fftn", a, s, axes, norm, False)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.ifftn`` with derivatives (the inverse of :func:`fftn`)."""
    if not isinstance(a, Box):
        return np.fft.ifftn(a, s=s, axes=axes, norm=norm, out=out)
    _check("ifftn", a, norm, out)
    return _c2c("ifftn", a, s, axes, norm, True)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.fft2`` with derivatives (:func:`fftn` over the last two axes)."""
    if not isinstance(a, Box):
        return np.fft.fft2(a, s=s, axes=axes, norm=norm, out=out)
    _check("fft2", a, norm, out)
    return _c2c("fft2", a, s, axes, norm, False)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.ifft2`` with derivatives (:func:`ifftn` over the last two axes)."""
    if not isinstance(a, Box):
        return np.fft.ifft2(a, s=s, axes=axes, norm=norm, out=out)
    _check("ifft2", a, norm, out)
    return _c2c("ifft2", a, s, axes, norm, True)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.rfft`` with derivatives: the DFT of real input, non-negative
    frequencies only.

    Parameters
    ----------
    a : real array_like, shape (..., m, ...)
    n : int, optional
        Length of the transform (``a`` cropped or zero-padded along ``axis``).

    Returns
    -------
    complex ndarray, shape (..., n // 2 + 1, ...)
    """
    if not isinstance(a, Box):
        return np.fft.rfft(a, n=n, axis=axis, norm=norm, out=out)
    _check("rfft", a, norm, out)
    _real_only("rfft", a)
    axis = _axis("rfft", a, axis)
    a = _resize(a, axis, _length("rfft", n, np.shape(a)[axis]))
    return bind(rfft_p, a, axis=axis, norm=norm)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.irfft`` with derivatives: the inverse of :func:`rfft`.

    Parameters
    ----------
    a : complex array_like, shape (..., m, ...)
        The non-negative frequencies of a Hermitian spectrum.
    n : int, optional
        Length of the output (default ``2 * (m - 1)``); the input is cropped
        or zero-padded to ``n // 2 + 1`` entries along ``axis``.

    Returns
    -------
    real ndarray, shape (..., n, ...)
    """
    if not isinstance(a, Box):
        return np.fft.irfft(a, n=n, axis=axis, norm=norm, out=out)
    _check("irfft", a, norm, out)
    axis = _axis("irfft", a, axis)
    n = _length("irfft", n, 2 * (np.shape(a)[axis] - 1))
    a = _resize(a, axis, n // 2 + 1)
    return bind(irfft_p, a, axis=axis, n=n, norm=norm)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.rfftn`` with derivatives: :func:`rfft` over the last of ``axes``,
    then :func:`fftn` over the others."""
    if not isinstance(a, Box):
        return np.fft.rfftn(a, s=s, axes=axes, norm=norm, out=out)
    _check("rfftn", a, norm, out)
    _real_only("rfftn", a)
    s, axes = _axes_and_sizes("rfftn", a, s, axes)
    a = rfft(a, n=s[-1], axis=axes[-1], norm=norm)
    return _c2c("rfftn", a, s[:-1], axes[:-1], norm, False) if len(axes) > 1 else a


def irfftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.irfftn`` with derivatives: :func:`ifftn` over all but the last of
    ``axes``, then :func:`irfft` over the last (default length ``2 * (m - 1)``)."""
    if not isinstance(a, Box):
        return np.fft.irfftn(a, s=s, axes=axes, norm=norm, out=out)
    _check("irfftn", a, norm, out)
    given = s is not None
    s, axes = _axes_and_sizes("irfftn", a, s, axes)
    last = s[-1] if given else 2 * (np.shape(a)[axes[-1]] - 1)
    if len(axes) > 1:
        a = _c2c("irfftn", a, s[:-1], axes[:-1], norm, True)
    return irfft(a, n=last, axis=axes[-1], norm=norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.rfft2`` with derivatives (:func:`rfftn` over the last two axes)."""
    if not isinstance(a, Box):
        return np.fft.rfft2(a, s=s, axes=axes, norm=norm, out=out)
    return rfftn(a, s=s, axes=axes, norm=norm, out=out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.irfft2`` with derivatives (:func:`irfftn` over the last two axes)."""
    if not isinstance(a, Box):
        return np.fft.irfft2(a, s=s, axes=axes, norm=norm, out=out)
    return irfftn(a, s=s, axes=axes, norm=norm, out=out)


def _shift(name, x, axes, sign):
    if not isinstance(x, Box):
        return getattr(np.fft, name)(x, axes=axes)
    if axes is None:
        axes = tuple(range(np.ndim(x)))
    axes = tuple(int(a) for a in np.atleast_1d(axes))
    shifts = [sign * (np.shape(x)[a] // 2) for a in axes]
    return roll(x, shifts, axes) if axes else x


def fftshift(x, axes=None):
    """``np.fft.fftshift`` with derivatives: the zero frequency moved to the middle."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """``np.fft.ifftshift`` with derivatives: the inverse of :func:`fftshift`."""
    return _shift("ifftshift", x, axes, -1)


NUMPY_FUNCTIONS = {
    np.fft.fft: fft, np.fft.ifft: ifft, np.fft.rfft: rfft, np.fft.irfft: irfft,
    np.fft.fft2: fft2, np.fft.ifft2: ifft2, np.fft.fftn: fftn, np.fft.ifftn: ifftn,
    np.fft.rfft2: rfft2, np.fft.irfft2: irfft2, np.fft.rfftn: rfftn, np.fft.irfftn: irfftn,
    np.fft.fftshift: fftshift, np.fft.ifftshift: ifftshift,
}
