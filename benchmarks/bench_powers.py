"""Constant integer powers: the gradient and the HVP of ``sum(x**4)`` at n = 1e5.

``x**3`` and ``x**4`` of float arrays are computed by multiplication
(forward and in the derivative rule) instead of numpy's ``pow``; the line
printed compares with ``np.power`` for the same forward and backward work
(what the rule did before) and with the hand-written ``(x*x)*(x*x)``.  The
Hessian-vector product (``ta.hvp``: forward over reverse) is timed beside the
gradient, numpy's evaluation of the function and ``jax.jit`` of JAX's gradient
and HVP (when jax is importable), with the ratios the targets are stated in.  Run as
a report with ``PYTHONPATH=. python benchmarks/bench_powers.py`` (quote the
figures with the machine's load); as tests it checks the values only.

Measured under load (2 shared cores, other jobs running; minimum of repeats):
gradient 0.21-0.23 ms, HVP 0.49 ms = 2.1-2.3x the gradient (was 0.84-0.88 ms,
3.7-3.9x) and 1.5-1.8x ``jax.jit``'s 0.28-0.33 ms (was 2.4-3.2x).  The HVP
computes ``x**4``'s tangent and the power rule's dual partial ``4 x**3`` each
in one C pass (``_core.fused_pow_tangent``, ``_core.pow_partial_dual``), with
the roundings of the unfused rules.
"""
from __future__ import annotations

import sys

import numpy as np

import tapead as ta
try:                                   # run as a script or as a module
    from benchmarks.common import measure
except ImportError:                    # pragma: no cover
    from common import measure

N = 100_000


def _inputs():
    return np.random.default_rng(0).uniform(-2.0, 2.0, N)


def grad_pow4(x):
    return ta.grad(lambda v: (v ** 4).sum())(x)


def grad_mul4(x):
    return ta.grad(lambda v: ((v * v) * (v * v)).sum())(x)


def numpy_pow_work(x):
    """The work of the former rule: np.power forward, 4 * np.power(x, 3) back."""
    return np.power(x, 4.0).sum(), 4.0 * np.power(x, 3.0)


def hvp_pow4(x, v):
    return ta.hvp(lambda u: (u ** 4).sum(), (x,), (v,))


def numpy_eval(x):
    """The function alone, as numpy users write it."""
    return np.sum(x ** 4)


def numpy_eval_mul(x):
    """The function alone with the power as products (numpy's fastest form)."""
    t = x * x
    return np.sum(t * t)


def jax_jit_cases(x, v):
    """``jax.jit`` of JAX's gradient and HVP (forward over reverse), compiled;
    None when jax is not importable."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    f = lambda u: jnp.sum(u ** 4)                                    # noqa: E731
    g = jax.jit(jax.grad(f))
    h = jax.jit(lambda u, w: jax.jvp(jax.grad(f), (u,), (w,))[1])
    jax.block_until_ready(g(x))
    jax.block_until_ready(h(x, v))
    return (lambda u: jax.block_until_ready(g(u))), (lambda u: jax.block_until_ready(h(u, v)))


def test_values():
    x = _inputs()
    np.testing.assert_allclose(grad_pow4(x), 4.0 * x ** 3, rtol=1e-15, atol=0)
    np.testing.assert_allclose(grad_mul4(x), 4.0 * x ** 3, rtol=1e-15, atol=0)
    v = np.random.default_rng(1).standard_normal(N)
    np.testing.assert_allclose(hvp_pow4(x, v), 12.0 * x * x * v, rtol=1e-14, atol=1e-14)


def main(out=sys.stdout):
    x = _inputs()
    rows = [("grad sum(x**4), tapead", grad_pow4), ("grad sum((x*x)*(x*x)), tapead", grad_mul4),
            ("np.power forward + backward (the former rule's work)", numpy_pow_work)]
    v = np.random.default_rng(1).standard_normal(N)
    rows += [("numpy evaluation np.sum(x**4)", numpy_eval),
             ("numpy evaluation t = x*x; np.sum(t*t)", numpy_eval_mul),
             ("hvp sum(x**4), tapead (forward over reverse)", lambda u: hvp_pow4(u, v))]
    jx = jax_jit_cases(x, v)
    if jx is not None:
        rows += [("jax.jit(jax.grad)", jx[0]), ("jax.jit(jvp of jax.grad)", jx[1])]
    print(f"n = {N}; min / median of repeats (ms); the machine may be loaded", file=out)
    best = {}
    for name, fn in rows:
        lo, med = measure(fn, x)
        best[name] = lo
        print(f"  {name:55s} {lo * 1e3:7.2f} / {med * 1e3:7.2f}", file=out)
    g, h = best["grad sum(x**4), tapead"], best["hvp sum(x**4), tapead (forward over reverse)"]
    print(f"  grad / numpy evaluation (x**4): {g / best['numpy evaluation np.sum(x**4)']:.2f}"
          f"  (products: {g / best['numpy evaluation t = x*x; np.sum(t*t)']:.2f}; target <= 1.5)",
          file=out)
    print(f"  hvp / grad: {h / g:.2f}  (target <= 2.5)", file=out)
    if jx is not None:
        print(f"  hvp / jax.jit hvp: {h / best['jax.jit(jvp of jax.grad)']:.2f}  (target <= 3)"
              f"; grad / jax.jit grad: {g / best['jax.jit(jax.grad)']:.2f}", file=out)


if __name__ == "__main__":
    main()
