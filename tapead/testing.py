"""``check_grads``: a finite-difference checker for any differentiable function.

Forward mode is checked against central differences along random
directions; reverse mode against forward mode (or differences) through the
inner-product identity ``<u, J v> == <J^T u, v>``.  ``order=2`` checks the
derivatives of the derivatives the same way.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tapead._tree import tree_flatten, tree_unflatten
from tapead.transforms import jvp, vjp

__all__ = ["check_grads"]

_DEFAULT_TOL = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 2e-2}
_DEFAULT_EPS = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 1e-2}


def _dtype_of(leaves):
    dts = [np.result_type(x) for x in leaves]
    return np.dtype(np.float32) if dts and all(d == np.float32 for d in dts) else \
        np.dtype(np.float64)


def _vdot(a, b) -> float:
    la, _ = tree_flatten(a)
    lb, _ = tree_flatten(b)
    return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
                     for x, y in zip(la, lb)))


def _scale_add(x, v, eps):
    lx, tx = tree_flatten(x)
    lv, _ = tree_flatten(v)
    return tree_unflatten(tx, [np.asarray(a + eps * b, dtype=np.result_type(a))
                               if np.ndim(a) else type(a)(a + eps * b) if isinstance(a, float)
                               else np.result_type(a).type(a + eps * b)
                               for a, b in zip(lx, lv)])


def _random_like(tree, rng):
    leaves, td = tree_flatten(tree)
    out = []
    for x in leaves:
        r = rng.standard_normal(np.shape(x))
        out.append(float(r) if isinstance(x, float) else
                   np.asarray(r, dtype=np.result_type(x)))
    return tree_unflatten(td, out)


def check_grads(f: Callable, args: Sequence, order: int = 2,
                modes: Sequence[str] = ("fwd", "rev"), eps: float = None,
                atol: float = None, rtol: float = None, seed: int = 0) -> None:
    """Check ``f``'s derivatives at ``args`` against finite differences.

    Parameters
    ----------
    f : callable
        Function of ``len(args)`` positional float/array (pytree) arguments.
    args : tuple
        The point.
    order : int
        1 checks first derivatives; 2 also checks the derivatives of the
        JVP and of the VJP (and so on for higher orders).
    modes : sequence of {"fwd", "rev"}
        Which modes to check.
    eps, atol, rtol : float, optional
        Step and tolerances; defaults depend on the dtype (float64: 1e-6).
    seed : int
        Seed of the random directions.

    Raises
    ------
    AssertionError
        With the two numbers that disagree.

    Examples
    --------
    Nothing happens when the derivatives are right; a wrong rule fails:

    >>> import numpy as np, tapead as ta, tapead.numpy as tnp
    >>> ta.check_grads(lambda x: tnp.sum(tnp.sin(x) * x), (np.array([0.5, 1.0]),), order=2)
    >>> @ta.custom_jvp
    ... def wrong_sin(x):
    ...     return tnp.sin(x)
    >>> @wrong_sin.defjvp
    ... def _(primals, tangents):
    ...     return wrong_sin(primals[0]), tnp.sin(primals[0]) * tangents[0]
    >>> ta.check_grads(wrong_sin, (0.5,), order=1)
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    args = tuple(args)
    leaves, _ = tree_flatten(args)
    dt = _dtype_of(leaves)
    eps = _DEFAULT_EPS[dt] if eps is None else eps
    atol = _DEFAULT_TOL[dt] if atol is None else atol
    rtol = _DEFAULT_TOL[dt] if rtol is None else rtol
    rng = np.random.default_rng(seed)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {mode!r}; use 'fwd' and/or 'rev'")
    v = _random_like(args, rng)
    f_plus = f(*_scale_add(args, v, eps))
    f_minus = f(*_scale_add(args, v, -eps))
    lp, _ = tree_flatten(f_plus)
    lm, otd = tree_flatten(f_minus)
    fd = tree_unflatten(otd, [(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                              / (2 * eps) for a, b in zip(lp, lm)])
    out, tangent = jvp(f, args, v) if "fwd" in modes else (f(*args), None)
    if tangent is not None:
        _assert_close(tangent, fd, atol, rtol, "forward mode (JVP) vs finite differences")
    if "rev" in modes:
        u = _random_like(out, rng)
        _, pullback = vjp(f, *args)
        ct = pullback(u)
        lhs = _vdot(u, tangent if tangent is not None else fd)
        rhs = _vdot(ct, v)
        _assert_close(rhs, lhs, atol, rtol,
                      "reverse mode (VJP) vs forward mode by <u, J v> = <J^T u, v>")
    if order > 1:
        if "fwd" in modes:
            check_grads(lambda *a: jvp(f, a, v)[1], args, order - 1, ("fwd",),
                        eps, atol, rtol, seed + 1)
        if "rev" in modes:
            u = _random_like(out, rng)
            check_grads(lambda *a: vjp(f, *a)[1](u), args, order - 1, ("rev",),
                        eps, atol, rtol, seed + 2)


def _assert_close(a, b, atol, rtol, what):
    la, _ = tree_flatten(a)
    lb, _ = tree_flatten(b)
    for x, y in zip(la, lb):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        if not np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=False):
            raise AssertionError(f"check_grads: {what} disagree:\n{x}\nvs\n{y}")
