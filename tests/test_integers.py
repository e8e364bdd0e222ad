"""Integers computed from traced values (``astype(int)``, ``np.floor(x).astype(int)``,
argmax...) carry no derivative; what they gather keeps its derivative.

Checked here beyond the op-spec rows (tests/opspecs_integers.py): the
semi-Lagrangian interpolation of a fluid simulation (values, gradients against
finite differences, vmap with different integers per lane, jit replays at
points where the integers change), integers handed to numpy (``np.asarray(x,
dtype=int)``, ``np.int64(x)``, a plain numpy array indexed by a traced
integer: guarded), autograd's ``test_cast_to_int`` situation, and the errors.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._prims import batching
from tapead.errors import GuardFlippedError


def fd_grad(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def advect(field, u, v, dt=0.7):
    """One semi-Lagrangian advection step of ``field`` on an n x n grid by the
    velocity (u, v): each cell takes the bilinear interpolation of the field at
    the point it came from."""
    n = field.shape[0]
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    px = np.clip(ii - dt * u, 0.0, n - 1.001)
    py = np.clip(jj - dt * v, 0.0, n - 1.001)
    x0 = np.floor(px).astype(int)
    y0 = np.floor(py).astype(int)
    wx, wy = px - x0, py - y0
    return (field[x0, y0] * (1 - wx) * (1 - wy) + field[x0 + 1, y0] * wx * (1 - wy)
            + field[x0, y0 + 1] * (1 - wx) * wy + field[x0 + 1, y0 + 1] * wx * wy)


def loss(field, u, v):
    out = field
    for _ in range(3):
        out = advect(out, u, v)
    return np.sum(out ** 2 * np.arange(out.size).reshape(out.shape))


def _point(seed=0, n=6):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n)), rng.uniform(-1.3, 1.3, (n, n)),
            rng.uniform(-1.3, 1.3, (n, n)))


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1.0)


def test_advection_gradients_match_finite_differences():
    f, u, v = _point()
    g = ta.grad(loss, argnums=(0, 1, 2))(f, u, v)
    for k, x in enumerate((f, u, v)):
        args = [f, u, v]

        def one(z, k=k):
            a = list(args)
            a[k] = z
            return loss(*a)
        assert _rel(g[k], fd_grad(one, x)) < 1e-7
    assert np.isclose(ta.value_and_grad(loss)(f, u, v)[0], loss(f, u, v), rtol=1e-15)


def test_advection_check_grads_second_order():
    f, u, v = _point(1, n=4)
    ta.check_grads(lambda f, u: loss(f, u, v), (f, u), order=2)


def test_plain_field_indexed_by_traced_integers():
    field = np.arange(20.0).reshape(4, 5) ** 1.5

    def f(p):
        i = np.floor(p).astype(int)
        w = p - i
        return np.sum(field[i, 2] * w + field[i + 1, 3] * (1 - w))
    p = np.array([0.3, 1.6, 2.2])
    assert np.allclose(ta.grad(f)(p), fd_grad(f, p), rtol=1e-8, atol=1e-8)
    assert ta.grad(f)(p)[0] == field[0, 2] - field[1, 3]


def test_the_integers_carry_no_derivative():
    x = np.array([0.3, 1.6, -2.2])
    i = np.floor(x).astype(int)
    assert np.array_equal(ta.grad(lambda x: np.sum(x * np.floor(x).astype(int)))(x), i)
    assert np.array_equal(ta.grad(lambda x: np.sum(x.astype(int) * 1.0) + 0 * x[0])(x),
                          np.zeros(3))
    out, tan = ta.jvp(lambda x: np.round(x).astype(np.int64) * x, (x,), (np.ones(3),))
    assert np.array_equal(tan, np.round(x))
    # a hessian through a gather: gathered values keep their second derivatives
    A = np.arange(12.0).reshape(4, 3) / 7

    def h(z):
        j = np.floor(z[:2] * 3 + 1).astype(int)
        return np.sum(np.sin(z[2:].reshape(4, 3)[j, 1]) ** 2) * z[0]
    z = np.concatenate([[0.4, 0.2], A.ravel()])
    H = ta.hessian(h)(z)
    assert np.allclose(H, ta.jacfwd(ta.grad(h))(z), rtol=1e-14, atol=1e-15)
    gh = ta.grad(h)
    H_fd = np.stack([(gh(z + e) - gh(z - e)) / 2e-6 for e in np.eye(z.size) * 1e-6], axis=1)
    assert np.allclose(H, H_fd, rtol=1e-7, atol=1e-8)


def test_numpy_conversions_to_integers():
    x = np.array([1.5, 2.5, 0.25])

    def via_asarray(x):
        return np.sum(x * np.asarray(x, dtype=int))

    def via_int64(x):
        return np.sum(x * np.int64(x))

    for f in (via_asarray, via_int64):
        assert np.array_equal(ta.grad(f)(x), [1.0, 2.0, 0.0])
    # int() and operator.index of a traced integer hand over its value
    assert ta.grad(lambda x: x * int(np.floor(x).astype(int)))(2.5) == 2.0
    assert ta.grad(lambda x: x * len(range(x.astype(int))))(3.5) == 3.0


def test_index_functions_of_traced_values():
    x = np.array([1.5, 2.7, 0.1, 2.0])
    bins = np.array([0.0, 1.0, 2.0])
    assert np.array_equal(ta.grad(lambda x: x[np.argmax(x)])(x), [0, 1, 0, 0])
    assert np.array_equal(ta.grad(lambda x: x[np.argmin(x)] * 2)(x), [0, 0, 2, 0])
    assert np.array_equal(ta.grad(lambda x: x[np.argsort(x)] @ np.arange(4.0))(x),
                          [1, 3, 0, 2])
    assert np.array_equal(ta.grad(lambda x: np.sum(x * np.searchsorted(bins, x)))(x),
                          np.searchsorted(bins, x))
    assert np.array_equal(ta.grad(lambda x: np.sum(x * np.digitize(x, bins)))(x),
                          np.digitize(x, bins))
    assert np.array_equal(ta.grad(lambda x: np.sum(x * np.digitize(x, bins, right=True)))(x),
                          np.digitize(x, bins, right=True))


def test_cast_to_int_like_autograd():
    """autograd's test_cast_to_int: indices stored beside the weights in one
    array, pulled out again with np.int64 and used to gather."""
    inds = np.array([[1.0], [0.0], [3.0], [1.0], [8.0]])

    def fun(W):
        glued = np.concatenate((W, inds), axis=1)
        new_W = glued[:, :-1]
        new_inds = np.int64(glued[:, -1])
        return np.sum(new_W[np.arange(5), new_inds] ** 2)

    W = np.random.default_rng(3).standard_normal((5, 10))
    ta.check_grads(fun, (W,), order=2)
    g = ta.grad(fun)(W)
    want = np.zeros_like(W)
    want[np.arange(5), inds[:, 0].astype(int)] = 2 * W[np.arange(5), inds[:, 0].astype(int)]
    assert np.array_equal(g, want)

    def fun_astype(W):                 # the same with astype, indices traced
        glued = np.concatenate((W, W[:, :1] * 0 + inds), axis=1)
        return np.sum(glued[:, :-1][np.arange(5), glued[:, -1].astype(int)] ** 2)
    assert np.array_equal(ta.grad(fun_astype)(W), want)


def test_vmap_integers_per_lane():
    f0, u0, v0 = _point(2, n=5)
    lanes = [_point(s, n=5) for s in range(3)]
    F = np.stack([p[0] for p in lanes])
    U = np.stack([p[1] for p in lanes])
    batching.reset_stats()
    out = ta.vmap(lambda f, u: loss(f, u, v0))(F, U)
    assert batching.STATS["per_lane_runs"] == 0       # one run for all lanes
    for k in range(3):
        assert out[k] == pytest.approx(loss(F[k], U[k], v0), rel=1e-14)
    G = ta.vmap(ta.grad(lambda f, u: loss(f, u, v0), argnums=(0, 1)))(F, U)
    GG = ta.grad(lambda F, U: np.sum(ta.vmap(lambda f, u: loss(f, u, v0))(F, U)),
                 argnums=(0, 1))(F, U)
    for k in range(3):
        gk = ta.grad(lambda f, u: loss(f, u, v0), argnums=(0, 1))(F[k], U[k])
        for a, b, c in zip(gk, (G[0][k], G[1][k]), (GG[0][k], GG[1][k])):
            assert _rel(b, a) < 1e-14 and _rel(c, a) < 1e-14
    # a plain numpy field indexed by per-lane integers: lane by lane, right
    field = np.arange(20.0).reshape(4, 5)
    got = ta.vmap(lambda p: field[np.floor(p).astype(int), 1] * p)(np.array([0.5, 2.5, 3.1]))
    assert np.array_equal(got, field[[0, 2, 3], 1] * np.array([0.5, 2.5, 3.1]))


@pytest.mark.parametrize("template", range(6))
def test_vmap_of_index_layouts(template):
    """Every lane's gather at once, for index layouts where numpy moves the
    axes of advanced indices (after a slice, around a slice, with ints)."""
    def f(A, p):
        i = np.floor(p).astype(int)
        return [lambda: A[:, i], lambda: A[i, :, i], lambda: A[1, :, i],
                lambda: A[:, i, 1:], lambda: A[..., i[:2]], lambda: A[i[:, None], 0, i]
                ][template]()
    rng = np.random.default_rng(template)
    A = rng.standard_normal((3, 4, 3, 5))
    P = rng.integers(0, 3, (4, 3)) + 0.5
    AA = rng.standard_normal((4, 3, 4, 3))
    for args, axes in (((A, P), (None, 0)), ((AA, P), (0, 0)), ((AA, P[0]), (0, None))):
        got = ta.vmap(f, in_axes=axes)(*args)
        for k in range(4):
            lane = [a if ax is None else a[k] for a, ax in zip(args, axes)]
            assert np.array_equal(got[k], f(*lane))
    # nested vmap
    got = ta.vmap(ta.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(AA, P)
    for k in range(4):
        for m in range(4):
            assert np.array_equal(got[k, m], f(AA[k], P[m]))


def test_jit_replays_with_new_integers():
    f, u, v = _point(4, n=5)
    vg = ta.jit(ta.value_and_grad(loss, argnums=(0, 1)))
    vg(f, u, v)
    for s in (5, 6, 7):
        f2, u2, v2 = _point(s, n=5)
        assert not np.array_equal(np.floor(-0.7 * u2), np.floor(-0.7 * u))
        val, (gf, gu) = vg(f2, u2, v)
        want = ta.value_and_grad(loss, argnums=(0, 1))(f2, u2, v)
        assert val == pytest.approx(want[0], rel=1e-14)
        assert _rel(gf, want[1][0]) < 1e-14 and _rel(gu, want[1][1]) < 1e-14
    info = vg.cache_info()
    assert info.misses == 1 and info.hits == 3      # the positions were recomputed


def test_record_replays_integers_or_refuses():
    A = np.arange(12.0).reshape(3, 4)
    # a traced array: the gather is recomputed at the new integers
    rec = ta.record(lambda x: np.sum(x[np.floor(x[:, 0] / 4).astype(int)] ** 2),
                    A / 10)
    B = A[::-1] + 1.0
    val, g = rec.value_and_grad(B)
    want = ta.value_and_grad(lambda x: np.sum(x[np.floor(x[:, 0] / 4).astype(int)] ** 2))(B)
    assert val == want[0] and np.array_equal(g, want[1])
    # a plain numpy array indexed by a traced integer: guarded
    rec = ta.record(lambda p: A[np.floor(p).astype(int), 1] * p, 1.5)
    assert rec(1.7) == A[1, 1] * 1.7
    with pytest.raises(GuardFlippedError, match="integer"):
        rec(2.5)
    # jit records again where such a guard flips
    jf = ta.jit(lambda p: A[np.floor(p).astype(int), 1] * p)
    assert [jf(1.5), jf(2.5)] == [A[1, 1] * 1.5, A[2, 1] * 2.5]
    assert jf.cache_info().rerecords == 1


def test_index_add_with_traced_integers():
    def f(x, p):
        i = np.floor(p).astype(int)              # repeats accumulate
        return np.sum(tnp.at(x)[i].add(p * x[i]) ** 2)
    x = np.array([0.3, -1.2, 2.0, 0.7])
    p = np.array([1.5, 1.2, 3.3, 0.6])
    ta.check_grads(f, (x, p), order=2)


def test_errors_keep_their_advice():
    with pytest.raises(TypeError, match=r"float\(\) of a traced value would drop"):
        ta.grad(lambda x: float(x))(1.0)
    with pytest.raises(TypeError, match=r"int\(\) of a traced value would drop"):
        ta.grad(lambda x: int(x))(1.0)
    with pytest.raises(TypeError, match=r"x.primal"):
        ta.grad(lambda x: int(x))(1.0)
    with pytest.raises(TypeError, match="cannot be turned into a numpy array"):
        ta.grad(lambda x: np.sum(np.asarray(x)))(np.ones(2))
    with pytest.raises(TypeError, match="cannot be turned into a numpy array of dtype"):
        ta.grad(lambda x: np.sum(np.asarray(x, dtype=np.float32)))(np.ones(2))
    with pytest.raises(IndexError, match=r"np.floor\(p\).astype\(int\)"):
        ta.grad(lambda x: np.sum(x[x]))(np.ones(2))
    with pytest.raises(TypeError, match=r"astype\(int\)"):
        ta.grad(lambda x: list(range(5))[x] * x)(1.0)       # operator.index
    with pytest.raises(IndexError):                          # numpy's own message
        ta.grad(lambda x: np.arange(5.0)[x] * x)(1.0)
    with pytest.raises(TypeError, match="which write wins"):
        def set_traced(x):
            y = x * 1.0
            y[np.floor(x).astype(int)] = 0.0
            return np.sum(y)
        ta.grad(set_traced)(np.array([0.5, 1.5]))
    with pytest.raises(IndexError, match="out of bounds"):
        ta.grad(lambda x: np.sum(x[np.floor(x * 10).astype(int)]))(np.ones(2))


def advect_wrapped(field, u, v):
    """fluidsim's advection: indices wrapped around the edges with np.mod."""
    n = field.shape[0]
    jj, ii = np.meshgrid(np.arange(n), np.arange(n))
    px, py = (ii - u).ravel(), (jj - v).ravel()
    x0, y0 = np.floor(px).astype(int), np.floor(py).astype(int)
    wx, wy = px - x0, py - y0
    x0, y0 = np.mod(x0, n), y0 % n
    x1, y1 = np.mod(x0 + 1, n), (y0 + 1) % n
    out = ((1 - wx) * ((1 - wy) * field[x0, y0] + wy * field[x0, y1])
           + wx * ((1 - wy) * field[x1, y0] + wy * field[x1, y1]))
    return np.reshape(out, (n, n))


def test_integer_arithmetic_of_traced_integers_stays_integer():
    def check(v):
        i = np.floor(v).astype(int)
        for got, want in ((i // 2, np.floor_divide), (7 // (i + 3), None),
                          (np.mod(i, 5), np.mod), (i % 5, np.remainder),
                          (np.fmod(i, 5), np.fmod), (np.floor_divide(i, -2), None)):
            assert isinstance(got, ta.Tracer) and got.dtype == np.int64
        iv = np.floor(v.primal).astype(int)
        np.testing.assert_array_equal((i // 2).primal, iv // 2)
        np.testing.assert_array_equal((7 // (i + 3)).primal, 7 // (iv + 3))
        np.testing.assert_array_equal(np.mod(i, 5).primal, np.mod(iv, 5))
        np.testing.assert_array_equal(np.fmod(i, 5).primal, np.fmod(iv, 5))
        return np.sum(v)
    ta.grad(check)(np.array([1.3, 2.7, -0.5, -3.2]))


def test_float_floor_divide_has_zero_derivative_and_numpys_values():
    x = np.array([1.3, 2.7, -0.5, 4.9])

    def f(x):
        return np.sum(x * (x // 0.7)) + np.sum(np.floor_divide(2.0, x))
    np.testing.assert_array_equal(ta.grad(f)(x), x // 0.7)
    v = ta.value_and_grad(f)(x)[0]
    assert v == np.sum(x * (x // 0.7)) + np.sum(np.floor_divide(2.0, x))


def test_wrapped_advection_gradients_jit_and_vmap():
    field, u, v = _point(3, n=5)

    def f(u):
        return np.sum(advect_wrapped(field, u, v) ** 2)
    g = ta.grad(f)(u)
    assert _rel(g, fd_grad(f, u)) < 1e-7
    jg = ta.jit(ta.grad(f))
    jg(u)
    u2 = u + 0.37                       # other integers: the replay recomputes them
    np.testing.assert_allclose(jg(u2), ta.grad(f)(u2), rtol=1e-13, atol=1e-15)
    us = np.stack([u, u2, -u])
    np.testing.assert_allclose(ta.vmap(ta.grad(f))(us), np.stack([ta.grad(f)(w) for w in us]),
                               rtol=1e-13, atol=1e-15)
