"""``ta.jit`` of functions that run transforms: the recording holds the
derivative computation, so replays at new inputs give the derivatives there.

Each case is jitted, called at several points (the first records, the others
replay or record again where a branch flips), and compared with the eager
transform at every point and with central finite differences at one."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import TapeReplayError

RNG = np.random.default_rng(7)


def _fd_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def _kinks(x):
    # relu, abs, maximum and a max: masks and ties that change with x
    return (tnp.sum(tnp.maximum(x, 0.0) * x) + tnp.sum(np.abs(x) * np.sin(x))
            + np.max(x * x) + tnp.sum(np.maximum(x, 0.3 * x)))


def _branchy(x):
    s = tnp.sum(x * x)
    if s > 2.0:                       # a Python branch inside the inner transform
        return s * tnp.sum(np.cos(x))
    return tnp.sum(np.exp(x))


def _sorted(x):
    w = np.arange(1.0, x.size + 1.0)
    return tnp.sum(np.sort(x) * w) + tnp.sum(np.median(x) * x)


def _prod(x):
    return np.prod(x) + tnp.sum(np.cumprod(x))


SCALARS = {"kinks": _kinks, "branchy": _branchy, "sorted": _sorted, "prod": _prod}


def _points(n=5, k=4):
    return [RNG.uniform(-1.5, 1.5, n) for _ in range(k)] + [np.array([0.0, 1.0, -2.0, 0.5, 3.0])]


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_jit_of_grad_follows_masks_branches_and_permutations(name):
    f = SCALARS[name]
    jg = ta.jit(ta.grad(f))
    for x in _points():
        np.testing.assert_allclose(jg(x), ta.grad(f)(x), rtol=1e-13, atol=1e-14)
    x = _points()[0]
    np.testing.assert_allclose(jg(x), _fd_grad(f, x), rtol=1e-6, atol=1e-7)
    info = jg.cache_info()
    assert info.hits + info.misses == len(_points()) + 1


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_jit_of_second_order_transforms(name):
    f = SCALARS[name]
    v = np.linspace(-1.0, 1.0, 5)
    jh = ta.jit(ta.hessian(f))
    jhvp = ta.jit(lambda x, v: ta.hvp(f, (x,), (v,)))
    jjf = ta.jit(ta.jacfwd(ta.grad(f)))
    jjr = ta.jit(ta.jacrev(ta.grad(f)))
    for x in _points():
        H = ta.hessian(f)(x)
        np.testing.assert_allclose(jh(x), H, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jhvp(x, v), H @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jjf(x), H, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jjr(x), H, rtol=1e-12, atol=1e-13)


def test_jit_of_jvp_vjp_and_value_and_grad_with_aux():
    f = lambda x, y: (np.sin(x) * y, tnp.sum(x * y))        # noqa: E731
    jjvp = ta.jit(lambda x, y, tx: ta.jvp(f, (x, y), (tx, 0.0)))
    jvjp = ta.jit(lambda x, y, c: ta.vjp(f, x, y)[1]((c, 1.0)))
    loss = lambda w, x: (tnp.sum(np.tanh(x @ w) ** 2), w * 2.0)       # noqa: E731
    jvg = ta.jit(ta.value_and_grad(loss, has_aux=True))
    for _ in range(3):
        x, y, t, c = RNG.normal(size=3), RNG.normal(), RNG.normal(size=3), RNG.normal(size=3)
        for got, ref in zip(jjvp(x, y, t), ta.jvp(f, (x, y), (t, 0.0))):
            for a, b in zip(got, ref):
                np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
        for a, b in zip(jvjp(x, y, c), ta.vjp(f, x, y)[1]((c, 1.0))):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
        w, X = RNG.normal(size=2), RNG.normal(size=(4, 2))
        (v, aux), g = jvg(w, X)
        (v0, aux0), g0 = ta.value_and_grad(loss, has_aux=True)(w, X)
        np.testing.assert_allclose([v, *aux, *g], [v0, *aux0, *g0], rtol=1e-14)


def test_jit_of_per_example_gradients():
    def loss(p, x, y):
        h = np.tanh(x @ p["W1"] + p["b1"])
        return tnp.sum((h @ p["W2"] - y) ** 2)
    p = {"W1": RNG.normal(size=(3, 8)), "b1": np.zeros(8), "W2": RNG.normal(size=(8, 2))}
    per_example = ta.vmap(ta.grad(loss), in_axes=(None, 0, 0))
    jitted = ta.jit(per_example)
    for _ in range(3):
        X, Y = RNG.normal(size=(16, 3)), RNG.normal(size=(16, 2))
        got, ref = jitted(p, X, Y), per_example(p, X, Y)
        for k in ref:
            np.testing.assert_allclose(got[k], ref[k], rtol=1e-13, atol=1e-14)
    assert jitted.cache_info().hits == 2


def test_jit_of_functions_that_call_loops_and_cond():
    def rollout(x0, k):
        def step(x, _):
            x = x + 0.1 * ta.cond(x[0] > 0.0, lambda z: -k * z, lambda z: -0.5 * k * z, x)
            return x, tnp.sum(x * x)
        _, ys = ta.scan(step, x0, None, length=20)
        return tnp.sum(ys)
    g = ta.grad(rollout, argnums=(0, 1))
    jg = ta.jit(g)
    for _ in range(4):
        x0, k = RNG.normal(size=2), float(RNG.uniform(0.5, 2.0))
        for a, b in zip(jg(x0, k), g(x0, k)):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)

    def newton_sqrt(a):
        x = ta.while_loop(lambda x: tnp.abs(x * x - a) > 1e-12, lambda x: 0.5 * (x + a / x),
                          a)
        return x * 1.0
    js = ta.jit(ta.grad(newton_sqrt))
    for a in (2.0, 9.0, 0.25):
        np.testing.assert_allclose(js(a), 0.5 / np.sqrt(a), rtol=1e-10)


def test_reading_a_value_inside_still_refuses_with_what_to_do():
    with pytest.raises(TapeReplayError, match="reads the number"):
        ta.jit(lambda x: x * float(x.primal))(2.0)
    with pytest.raises(TypeError, match="drop its derivative"):   # an inner transform's
        ta.jit(ta.grad(lambda x: x * float(x.primal)))(2.0)    # primal is a traced value
