"""``autograd.scipy.signal.convolve``: autograd's tensor convolution.

``convolve(A, B, axes=None, dot_axes=[(), ()], mode='full')`` convolves
``A`` and ``B`` along the axis pairs ``axes = (A's axes, B's axes)`` (all axes
by default), contracts the axis pairs ``dot_axes`` and keeps every other
axis; the result's axes are A's other axes, then B's, then the convolved
ones.  ``mode`` is scipy's: ``'full'``, ``'valid'``, ``'same'`` (the size of
``A``, centred in the full result).  With the default axes it is
``scipy.signal.convolve``.

It is written as a sum over the positions of the smaller operand of
shifted slices contracted with ``einsum``, so every transform of tapead
differentiates it, at every order.

>>> import numpy as np
>>> from tapead.autograd.scipy.signal import convolve
>>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
array([0. , 1. , 2.5, 4. , 1.5])
"""
from __future__ import annotations

import itertools
import string

import numpy as np

from tapead import _core
from tapead import numpy as tnp

__all__ = ["convolve"]


def _conv_size(a, b, mode):
    if mode == "full":
        return a + b - 1
    if mode == "same":
        return a
    return abs(a - b) + 1


def convolve(A, B, axes=None, dot_axes=None, mode="full"):
    """See the module docstring."""
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"Mode {mode} undefined, it can be one of 'valid', 'full', and 'same'")
    a_shape = np.shape(_core.concrete(A))
    b_shape = np.shape(_core.concrete(B))
    if dot_axes is None:
        dot_axes = [(), ()]
    if axes is None:
        axes = [tuple(range(len(a_shape))), tuple(range(len(a_shape)))]
    a_conv, b_conv = (tuple(int(i) for i in axes[0]), tuple(int(i) for i in axes[1]))
    a_dot, b_dot = (tuple(int(i) for i in dot_axes[0]), tuple(int(i) for i in dot_axes[1]))
    if len(a_conv) != len(b_conv) or len(a_dot) != len(b_dot):
        raise ValueError("convolve: axes and dot_axes need as many axes of A as of B")
    for i, j in zip(a_dot, b_dot):
        if a_shape[i] != b_shape[j]:
            raise ValueError(f"convolve: dot axes {i} of A and {j} of B differ in length "
                             f"({a_shape[i]} and {b_shape[j]})")
    la = [a_shape[i] for i in a_conv]
    lb = [b_shape[j] for j in b_conv]
    if mode == "valid" and not (all(x >= y for x, y in zip(la, lb))
                                or all(y >= x for x, y in zip(la, lb))):
        raise ValueError("One array must be larger than the other along all convolved "
                         "dimensions")
    a_ignore = [i for i in range(len(a_shape)) if i not in a_conv and i not in a_dot]
    b_ignore = [j for j in range(len(b_shape)) if j not in b_conv and j not in b_dot]

    # einsum letters: A's axes, then B's (dot pairs share A's letter)
    letters = iter(string.ascii_letters)
    a_sub = [next(letters) for _ in a_shape]
    b_sub = [next(letters) for _ in b_shape]
    for i, j in zip(a_dot, b_dot):
        b_sub[j] = a_sub[i]
    out_sub = [a_sub[i] for i in a_ignore] + [b_sub[j] for j in b_ignore] + \
        [a_sub[i] for i in a_conv]

    # the full (or valid) convolution as a sum over the positions of the operand
    # iterated over ("kernel"), of slices of the other ("signal", zero-padded for
    # 'full' and 'same'); which one is the kernel does not change the sum
    full = mode != "valid"
    kernel_is_b = (np.prod(lb) <= np.prod(la)) if full else all(x >= y for x, y in zip(la, lb))
    if kernel_is_b:
        sig, ker, s_conv, k_conv, ls, lk = A, B, a_conv, b_conv, la, lb
    else:
        sig, ker, s_conv, k_conv, ls, lk = B, A, b_conv, a_conv, lb, la
    if full:
        width = [(0, 0)] * len(np.shape(_core.concrete(sig)))
        for ax, k in zip(s_conv, lk):
            width[ax] = (k - 1, k - 1)
        sig = _pad(sig, width)
    n_out = [x + y - 1 if full else abs(x - y) + 1 for x, y in zip(ls, lk)]
    s_ndim = len(np.shape(_core.concrete(sig)))
    k_ndim = len(np.shape(_core.concrete(ker)))
    s_sub = a_sub if kernel_is_b else b_sub
    k_sub = b_sub if kernel_is_b else a_sub
    # the output's conv axes carry the signal's letters
    conv_letters = [s_sub[ax] for ax in s_conv]
    spec_out = "".join(out_sub[:len(out_sub) - len(a_conv)] + conv_letters)
    k_rest = [k_sub[ax] for ax in range(k_ndim) if ax not in k_conv]
    spec = "".join(s_sub) + "," + "".join(k_rest) + "->" + spec_out
    total = None
    for pos in itertools.product(*[range(k) for k in lk]):
        s_idx = [slice(None)] * s_ndim
        for ax, p, k, n in zip(s_conv, pos, lk, n_out):
            start = k - 1 - p
            s_idx[ax] = slice(start, start + n)
        k_idx = [slice(None)] * k_ndim
        for ax, p in zip(k_conv, pos):
            k_idx[ax] = p
        term = tnp.einsum(spec, sig[tuple(s_idx)], ker[tuple(k_idx)])
        total = term if total is None else total + term
    if mode == "same":
        n_conv = len(a_conv)
        first = len(out_sub) - n_conv
        idx = [slice(None)] * len(out_sub)
        for d, (x, y) in enumerate(zip(la, lb)):
            start = (y - 1) // 2
            idx[first + d] = slice(start, start + x)
        total = total[tuple(idx)]
    return total


def _pad(x, width):
    if isinstance(x, _core.Box):
        return tnp.pad(x, width)
    return np.pad(x, width)
