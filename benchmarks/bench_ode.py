"""Benchmarks of differentiated ODE solves (pytest-benchmark).

O1  The fit loss of a three-species Lotka-Volterra food chain,
    ``dy_i/dt = y_i (r_i + sum_j A_ij y_j)``, over 200 output times in
    [0, 30]: ``L(r, A) = sum_i |y(t_i) - data_i|^2``, 12 parameters.  At
    rtol = atol = 1e-10 (both libraries):
    * ``primal``: ``tapead.scipy.integrate.odeint`` on plain arrays (scipy's
      LSODA, nothing else),
    * ``grad``: ``ta.grad`` of the loss, as ``adjoint="auto"`` chooses for
      these 15 inputs: the primal solve, then one solve of the state with the
      forward sensitivities of all 15 inputs, contracted with the cotangent
      (the tangent system's right-hand side compiled to C once its tape has
      been seen twice: the table is the steady state),
    * ``grad-adjoint``: the same gradient with ``adjoint="backsolve"`` (the
      primal solve, then the adjoint system integrated back over the 199
      intervals),
    * ``jacfwd``: ``ta.jacfwd`` of the loss (forward sensitivities: one solve
      of the state with 12 tangent directions),
    * ``jax-primal`` / ``jax-grad``: ``jax.experimental.ode.odeint`` under
      ``jax.jit`` (after compilation), when JAX is installed.
    The gradients are compared with JAX's (relative difference, max norm).

Run the timings::

    python -m pytest benchmarks/bench_ode.py --benchmark-enable

Run them as quick tests (each case once, results checked)::

    python -m pytest benchmarks/bench_ode.py

Print the table (timings interleaved, so that the ratios hold on a shared
machine; the agreement with JAX at two tolerances)::

    PYTHONPATH=.:benchmarks python benchmarks/bench_ode.py

No test asserts a wall-clock time.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.scipy.integrate import odeint

try:                                   # run as a script or as a module
    from benchmarks.common import cpu_name, measure_together
except ImportError:                    # pragma: no cover
    from common import cpu_name, measure_together

TOL = 1e-10
T = np.linspace(0.0, 30.0, 200)
Y0 = np.array([1.0, 0.5, 0.3])
R = np.array([1.0, -0.6, -0.4])
A = np.array([[-0.05, -0.8, 0.0], [0.5, 0.0, -0.6], [0.0, 0.4, 0.0]])
# the data: the model at other parameters, solved tightly
DATA = odeint(lambda y, t, r, a: y * (r + a @ y), Y0, T, R * 1.05, A * 0.95,
              rtol=1e-13, atol=1e-13)


def rhs(y, t, r, a):
    return y * (r + a @ y)


def primal(r, a, tol=TOL):
    ys = odeint(rhs, Y0, T, r, a, rtol=tol, atol=tol)
    return np.sum((ys - DATA) ** 2)


def loss(r, a, tol=TOL, adjoint="auto"):
    ys = odeint(rhs, Y0, T, r, a, rtol=tol, atol=tol, adjoint=adjoint)
    return tnp.sum((ys - DATA) ** 2)


def gradient(r, a, tol=TOL):
    return ta.grad(loss, argnums=(0, 1))(r, a, tol)


def gradient_adjoint(r, a, tol=TOL):
    return ta.grad(loss, argnums=(0, 1))(r, a, tol, "backsolve")


def gradient_fwd(r, a, tol=TOL):
    return ta.jacfwd(loss, argnums=(0, 1))(r, a, tol)


def jax_fns(jax, tol=TOL):
    """(primal, gradient) of the loss with JAX's odeint, jitted and compiled."""
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jax_odeint

    def jloss(r, a):
        ys = jax_odeint(lambda y, t, r, a: y * (r + a @ y), jnp.asarray(Y0), jnp.asarray(T),
                        r, a, rtol=tol, atol=tol)
        return jnp.sum((ys - DATA) ** 2)
    p, g = jax.jit(jloss), jax.jit(jax.grad(jloss, argnums=(0, 1)))
    p(R, A).block_until_ready()
    jax.block_until_ready(g(R, A))
    return (lambda r, a: float(p(r, a))), (lambda r, a: tuple(
        np.asarray(x) for x in jax.block_until_ready(g(r, a))))


def rel_diff(g, ref):
    a = np.concatenate([np.ravel(x) for x in g])
    b = np.concatenate([np.ravel(x) for x in ref])
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_primal(benchmark):
    assert benchmark(primal, R, A) > 0.0


def test_gradient(benchmark):
    g = benchmark(gradient, R, A)
    assert rel_diff(g, gradient_adjoint(R, A)) < 1e-7  # sensitivities vs adjoint


def test_gradient_adjoint(benchmark):
    g = benchmark(gradient_adjoint, R, A)
    assert rel_diff(g, gradient_fwd(R, A)) < 1e-6      # adjoint vs sensitivities


def test_gradient_forward_sensitivities(benchmark):
    g = benchmark(gradient_fwd, R, A)
    assert g[1].shape == (3, 3)


def test_gradient_jax(benchmark, jax_x64):
    jp, jg = jax_fns(jax_x64)
    g = benchmark(jg, R, A)
    assert rel_diff(gradient(R, A), g) < 1e-7          # tolerance-limited agreement
    assert rel_diff(gradient_adjoint(R, A), g) < 1e-7


def settle(fns) -> None:
    """Steady state: each case run until what tapead compiles in the background
    (the tangent system's right-hand side, at a tape's second solve) is
    compiled, and the compiler waited for."""
    import threading
    from tapead.compiler import eager
    for fn in fns:
        for _ in range(eager.EAGER_AFTER + 1):
            fn(R, A)
    for t in threading.enumerate():
        if t.name in ("tapead-compile-loop", "tapead-find-native"):
            t.join(60)


def main() -> None:
    print(f"CPU: {cpu_name()}; interleaved repeats, median (min) ms per call; "
          f"rtol = atol = {TOL:g}, {len(T)} output times, 3 species, 12 parameters")
    cases = [("tapead primal (odeint, LSODA)", primal),
             ("tapead grad (auto: sensitivities)", gradient),
             ("tapead grad (adjoint=backsolve)", gradient_adjoint),
             ("tapead jacfwd (sensitivities)", gradient_fwd)]
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jp, jg = jax_fns(jax)
        cases += [("jax primal (jit)", jp), ("jax grad (jit)", jg)]
    except ImportError:
        jax = None
    settle([fn for _, fn in cases])
    times = measure_together([(fn, (R, A)) for _, fn in cases], total=20.0)
    base = {"tapead": times[0][1], "jax": times[4][1] if jax else None}
    for (name, _), (best, med) in zip(cases, times):
        lib = name.split()[0]
        print(f"{name:35} {med * 1e3:9.2f} ({best * 1e3:.2f}) ms   "
              f"{med / base[lib]:5.2f}x its primal")
    if jax is not None:
        print("gradient vs JAX's (relative difference, max norm):")
        for tol in (1e-8, 1e-10, 1e-12):
            g, ga = gradient(R, A, tol), gradient_adjoint(R, A, tol)
            gj = jax_fns(jax, tol)[1](R, A)
            print(f"  rtol = atol = {tol:g} (both): sensitivities {rel_diff(g, gj):.2e}, "
                  f"adjoint {rel_diff(ga, gj):.2e};   sensitivities vs adjoint "
                  f"{rel_diff(g, ga):.2e}")


if __name__ == "__main__":
    main()
