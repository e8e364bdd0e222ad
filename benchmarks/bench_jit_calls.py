"""The cost of one call of a small jitted function: ``ta.jit`` against the
eager tapead call, ``jax.jit`` (steady, after its compile) and the plain
Python function.

Small functions are where a call's fixed cost shows: the tape of
``x * x + 1.0`` replays in well under a microsecond, so what a call costs is
the signature check, the cache lookup and building the results.  Cases:

* ``scalar f``: ``f(x) = x * x + 1.0`` on a Python float (the value only);
* ``scalar vg``: ``value_and_grad`` of ``g(x, y) = x * y + sin(x) * x`` with
  respect to both floats;
* ``3-vector vg``: ``value_and_grad`` of ``sum(sin(x) * x)`` on a 3-element
  float64 array.

Run the table with ``PYTHONPATH=. python benchmarks/bench_jit_calls.py``;
``pytest benchmarks/bench_jit_calls.py --benchmark-enable`` times the same
cases with pytest-benchmark; without ``--benchmark-enable`` the tests check
the values only.
"""
from __future__ import annotations

import timeit

import numpy as np
import pytest

import tapead as ta


def f_scalar(x):
    return x * x + 1.0


def g_scalar(x, y):
    return x * y + np.sin(x) * x


def h_vector(x):
    return np.sum(np.sin(x) * x)


X3 = np.array([0.3, -1.2, 2.0])

CASES = {
    "scalar f": (f_scalar, None, (1.5,)),
    "scalar vg": (g_scalar, (0, 1), (0.7, 2.0)),
    "3-vector vg": (h_vector, 0, (X3,)),
}


def _tapead(name, jit):
    f, argnums, _ = CASES[name]
    fn = f if argnums is None else ta.value_and_grad(f, argnums=argnums)
    return ta.jit(fn) if jit else fn


def _jax(name):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    f, argnums, _ = CASES[name]
    jf = {"scalar f": f_scalar,
          "scalar vg": lambda x, y: x * y + jnp.sin(x) * x,
          "3-vector vg": lambda x: jnp.sum(jnp.sin(x) * x)}[name]
    return jax.jit(jf if argnums is None else jax.value_and_grad(jf, argnums=argnums))


def _expected(name):
    f, argnums, args = CASES[name]
    if argnums is None:
        return f(*args)
    return ta.value_and_grad(f, argnums=argnums)(*args)


def _same(got, want):
    np.testing.assert_allclose(np.concatenate([np.ravel(a) for a in ta.tree_flatten(got)[0]]),
                               np.concatenate([np.ravel(a) for a in ta.tree_flatten(want)[0]]),
                               rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("impl", ["plain", "tapead eager", "ta.jit", "jax.jit"])
def test_jit_call(benchmark, name, impl):
    benchmark.group = f"jit call: {name}"
    _, argnums, args = CASES[name]
    if impl == "plain":
        if argnums is not None:
            pytest.skip("the plain function has no gradient")
        fn = CASES[name][0]
    elif impl == "jax.jit":
        pytest.importorskip("jax")
        fn = _jax(name)
    else:
        fn = _tapead(name, impl == "ta.jit")
    fn(*args)                                   # ta.jit records, jax.jit compiles
    _same(benchmark(fn, *args), _expected(name))


def _best(fn, args, number=2000, repeat=7):
    fn(*args)
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number


def main() -> None:                                     # pragma: no cover
    try:
        import jax  # noqa: F401
        have_jax = True
    except ImportError:
        have_jax = False
    print("| case | plain | tapead eager | ta.jit | jax.jit steady | ta.jit / eager | "
          "ta.jit / jax.jit |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (f, argnums, args) in CASES.items():
        plain = _best(f, args) if argnums is None else None
        eager = _best(_tapead(name, False), args) if argnums is not None else None
        jit = _best(_tapead(name, True), args)
        jx = _best(_jax(name), args) if have_jax else None
        cell = (lambda t: f"{t * 1e6:.2f} us" if t is not None else "--")
        ratio = f"{jit / jx:.2f}" if jx else "--"
        vs_eager = f"{jit / eager:.2f}" if eager else "--"
        print(f"| {name} | {cell(plain)} | {cell(eager)} | {cell(jit)} | {cell(jx)} | "
              f"{vs_eager} | {ratio} |")


if __name__ == "__main__":                              # pragma: no cover
    main()
