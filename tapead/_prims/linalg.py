"""Contractions: matmul and dot."""
from __future__ import annotations

import numpy as np

from tapead._core import Box, bind
from tapead._prims.base import Primitive


def _mT(x):
    from tapead._prims.shape import swapaxes
    return swapaxes(x, -1, -2)


def _matmul_vjp_a(g, ans, a, b):
    from tapead._prims.elementwise import unbroadcast
    from tapead._prims.shape import reshape
    na, nb = np.ndim(a), np.ndim(b)
    if na == 1 and nb == 1:
        return g * b
    if nb == 1:                       # (..., m, k) @ (k,) -> (..., m)
        return unbroadcast(a, reshape(g, np.shape(g) + (1,)) * b)
    if na == 1:                       # (k,) @ (..., k, n) -> (..., n)
        ga = matmul(b, reshape(g, np.shape(g) + (1,)))
        return unbroadcast(a, reshape(ga, np.shape(ga)[:-1]))
    return unbroadcast(a, matmul(g, _mT(b)))


def _matmul_vjp_b(g, ans, a, b):
    from tapead._prims.elementwise import unbroadcast
    from tapead._prims.shape import reshape
    na, nb = np.ndim(a), np.ndim(b)
    if na == 1 and nb == 1:
        return g * a
    if nb == 1:                       # gb_k = sum_m a_mk g_m
        gb = matmul(reshape(g, np.shape(g)[:-1] + (1, np.shape(g)[-1])), a)
        return unbroadcast(b, reshape(gb, np.shape(gb)[:-2] + (np.shape(gb)[-1],)))
    if na == 1:                       # gb_kn = a_k g_n
        return unbroadcast(b, reshape(a, (np.shape(a)[0], 1)) * reshape(g, np.shape(g)[:-1] + (1, np.shape(g)[-1])))
    return unbroadcast(b, matmul(_mT(a), g))


matmul_p = Primitive("matmul", np.matmul)
matmul_p.defvjp(_matmul_vjp_a, _matmul_vjp_b)
matmul_p.defjvp(lambda t, ans, a, b: matmul(t, b), lambda t, ans, a, b: matmul(a, t))


def matmul(a, b):
    """``a @ b`` with derivatives (1-d, 2-d and batched operands)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise ValueError("matmul: operands must be at least 1-d; use * for scalars")
    if isinstance(a, Box) or isinstance(b, Box):
        return bind(matmul_p, a, b)
    return np.matmul(a, b)


def dot(a, b):
    """``np.dot`` with derivatives (scalars multiply; up to 2-d like matmul)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise NotImplementedError("dot of arrays above 2-d: use einsum or matmul")
    return matmul(a, b)


def outer(a, b):
    """``np.outer`` with derivatives."""
    from tapead._prims.shape import reshape
    a = reshape(a, (-1, 1)) if isinstance(a, Box) else np.reshape(a, (-1, 1))
    b = reshape(b, (1, -1)) if isinstance(b, Box) else np.reshape(b, (1, -1))
    return a * b


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.matmul: matmul, np.dot: dot, np.outer: outer}
TRACER_METHODS = {"dot": dot}
__all__ = ["matmul", "dot", "outer"]
