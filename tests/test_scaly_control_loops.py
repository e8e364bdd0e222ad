"""sc.scan and sc.while_loop: every option, values and derivatives.

Values are compared with the same computation unrolled in numpy; first and
second derivatives with the unrolled ``@sc.function`` (the same math, so to
~1e-12) and with central differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapead.scaly as sc

INT = sc.TensorType((), sc.dtypes.int64)


def central(fun, x, eps=1e-6):
    """Central differences of ``fun`` (array out) at ``x``: shape out + x.shape."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fun(x))
    J = np.zeros(f0.shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        J[(...,) + i] = (np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * eps)
    return J


def check_derivatives(fn, ref, out, inp, args, hessian=True):
    """Gradient, Jacobian and Hessian of ``fn`` against ``ref`` (the unrolled
    Function) and against central differences."""
    names = fn.input_names
    k = names.index(inp)

    def along(f):
        def g(v):
            a = list(args)
            a[k] = v
            return f(*a)
        return g

    def output_of(f):
        def g(*a):
            r = f(*a)
            return r[fn.output_names.index(out)] if isinstance(r, tuple) else r
        return g

    jac = sc.jacobian(fn, out, inp)(*args)
    np.testing.assert_allclose(jac, sc.jacobian(ref, out, inp)(*args), rtol=1e-12,
                               atol=1e-12)
    fd = central(along(output_of(fn)), args[k]).reshape(jac.shape)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-7)
    if jac.shape[0] == 1:
        grad = sc.gradient(fn, out, inp)
        g = grad(*args)
        np.testing.assert_allclose(g, sc.gradient(ref, out, inp)(*args), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(np.ravel(g), jac[0], rtol=1e-12, atol=1e-12)
        if hessian:
            H = sc.hessian(fn, out, inp)(*args)
            np.testing.assert_allclose(H, sc.hessian(ref, out, inp)(*args), rtol=1e-11,
                                       atol=1e-11)
            fdh = central(along(grad), args[k]).reshape(H.shape)
            np.testing.assert_allclose(H, fdh, rtol=1e-5, atol=1e-6)
            # reverse over reverse: the gradient of <gradient, w> is H w
            w = np.linspace(0.5, -0.7, H.shape[0]).reshape(np.shape(g))
            gw = sc.function(*fn.params, outputs=sc.arg("gw", ()))(
                lambda *a: (grad(*a) * w).sum())
            np.testing.assert_allclose(np.ravel(sc.gradient(gw, "gw", inp)(*args)),
                                       H @ np.ravel(w), rtol=1e-11, atol=1e-11)


# ---------------------------------------------------------------------------
# sc.scan
# ---------------------------------------------------------------------------

@sc.function(sc.arg("c", ()), sc.arg("x", ()))
def sine_step(c, x):
    return (c * x).sin() + x, c * c * x


def _scan_fn(n, **options):
    @sc.function(sc.arg("c0", ()), sc.arg("xs", n),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", n), sc.arg("cost", ())))
    def scanned(c0, xs):
        last, (ys,) = sc.scan(sine_step, c0, (xs,), length=n, **options)
        return last, ys, last * ys.sum()
    return scanned


def _sine_numpy(c0, xs, order):
    c, ys = c0, np.zeros(len(xs))
    for k in order:
        ys[k] = c * c * xs[k]
        c = np.sin(c * xs[k]) + xs[k]
    return c, ys


def _unrolled_sine(n, order):
    @sc.function(sc.arg("c0", ()), sc.arg("xs", n),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", n), sc.arg("cost", ())))
    def unrolled(c0, xs):
        c, ys = c0, [sc.const(0.0)] * n
        for k in order:
            ys[k] = c * c * xs[k]
            c = (c * xs[k]).sin() + xs[k]
        return c, sc.stack(ys), c * sc.stack(ys).sum()
    return unrolled


XS = np.array([0.3, -0.7, 1.1, 0.4, -0.2])


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_values_and_derivatives(reverse):
    n = len(XS)
    fn = _scan_fn(n, reverse=reverse)
    order = range(n - 1, -1, -1) if reverse else range(n)
    last, ys, cost = fn(0.8, XS)
    ref_last, ref_ys = _sine_numpy(0.8, XS, order)
    assert float(last) == pytest.approx(ref_last, rel=1e-15)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-15)
    ref = _unrolled_sine(n, list(order))
    for out in ("last", "cost", "ys"):
        for inp in ("c0", "xs"):
            check_derivatives(fn, ref, out, inp, [np.array(0.8), XS])


@pytest.mark.parametrize("trip", [0, 1, 3, 5, 9, -2])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_trip_clamps_and_leaves_zeros(trip, reverse):
    n = len(XS)

    @sc.function(sc.arg("c0", ()), sc.arg("xs", n), sc.arg("trip", INT),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", n), sc.arg("cost", ())))
    def tripped(c0, xs, t):
        last, (ys,) = sc.scan(sine_step, c0, (xs,), length=n, trip=t, reverse=reverse)
        return last, ys, last * ys.sum()

    used = min(max(trip, 0), n)
    order = list(range(used - 1, -1, -1) if reverse else range(used))
    last, ys, _ = tripped(0.8, XS, np.int64(trip))
    ref_last, ref_ys = _sine_numpy(0.8, XS, order)
    assert float(last) == pytest.approx(ref_last, rel=1e-15)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-15)
    assert np.all(ys[used:] == 0.0)
    unrolled = _unrolled_sine(n, order)

    @sc.function(sc.arg("c0", ()), sc.arg("xs", n), sc.arg("trip", INT),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", n), sc.arg("cost", ())))
    def ref(c0, xs, t):
        return unrolled(c0, xs)

    for out in ("last", "cost"):
        for inp in ("c0", "xs"):
            check_derivatives(tripped, ref, out, inp, [np.array(0.8), XS, np.int64(trip)])


def test_scan_index_broadcast_and_window():
    @sc.function(sc.arg("c", ()), sc.arg("k", INT), sc.arg("w", 2), sc.arg("p", ()))
    def step(c, k, w, p):
        return c * w[0] + p * w[1] * k, c * p

    @sc.function(sc.arg("c0", ()), sc.arg("z", 5), sc.arg("p", ()),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", 4), sc.arg("cost", ())))
    def windowed(c0, z, p):
        last, (ys,) = sc.scan(step, c0, (sc.window(z, 0, 1), sc.broadcast(p)), length=4,
                              index=True)
        return last, ys, (last * ys).sum()

    @sc.function(sc.arg("c0", ()), sc.arg("z", 5), sc.arg("p", ()),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", 4), sc.arg("cost", ())))
    def unrolled(c0, z, p):
        c, ys = c0, []
        for k in range(4):
            ys.append(c * p)
            c = c * z[k] + p * z[k + 1] * float(k)
        return c, sc.stack(ys), (c * sc.stack(ys)).sum()

    z, p = np.array([0.9, -1.2, 0.5, 1.3, 0.7]), np.array(0.6)
    c, ys = 0.4, []
    for k in range(4):
        ys.append(c * 0.6)
        c = c * z[k] + 0.6 * z[k + 1] * k
    last, got_ys, _ = windowed(0.4, z, p)
    assert float(last) == pytest.approx(c, rel=1e-15)
    np.testing.assert_allclose(got_ys, ys, rtol=1e-15)
    for out in ("last", "cost"):
        for inp in ("c0", "z", "p"):
            check_derivatives(windowed, unrolled, out, inp, [np.array(0.4), z, p])


def test_scan_tuple_and_nested_carries_keep_their_structure():
    @sc.function(sc.arg("a", ()), sc.group(sc.arg("b", 2), sc.arg("n", INT)),
                 sc.arg("x", ()))
    def step(a, bn, x):
        b, count = bn
        return a * x + b[0], (b * a, count + 1), a + b[1]

    @sc.function(sc.arg("a0", ()), sc.arg("b0", 2), sc.arg("xs", 3),
                 outputs=sc.group(sc.arg("a", ()), sc.arg("b", 2), sc.arg("n", INT),
                                  sc.arg("ys", 3)))
    def carried(a0, b0, xs):
        (a, (b, count)), (ys,) = sc.scan(step, (a0, (b0, np.int64(0))), (xs,), length=3)
        return a, b, count, ys

    @sc.function(sc.arg("a0", ()), sc.arg("b0", 2), sc.arg("xs", 3),
                 outputs=sc.group(sc.arg("a", ()), sc.arg("b", 2), sc.arg("n", INT),
                                  sc.arg("ys", 3)))
    def unrolled(a0, b0, xs):
        a, b, ys = a0, b0, []
        for k in range(3):
            ys.append(a + b[1])
            a, b = a * xs[k] + b[0], b * a
        return a, b, sc.const(np.int64(3)), sc.stack(ys)

    args = [np.array(0.5), np.array([0.3, -0.4]), np.array([1.1, 0.7, -0.6])]
    got, want = carried(*args), unrolled(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-15)
    assert got[2].dtype == np.int64 and int(got[2]) == 3
    for out in ("a", "b", "ys"):
        for inp in ("a0", "b0", "xs"):
            check_derivatives(carried, unrolled, out, inp, args, hessian=False)


def test_zero_length_scan_returns_the_initial_carry_and_empty_outputs():
    @sc.function(sc.arg("c0", ()), sc.arg("xs", 0),
                 outputs=sc.group(sc.arg("last", ()), sc.arg("ys", 0)))
    def empty(c0, xs):
        last, (ys,) = sc.scan(sine_step, c0, (xs,), length=0)
        return last, ys

    last, ys = empty(0.8, np.zeros(0))
    assert float(last) == 0.8 and ys.shape == (0,)
    assert float(sc.gradient(empty, "last", "c0")(0.8, np.zeros(0))) == 1.0
    assert float(sc.forward(empty, "last", "c0")(0.8, np.zeros(0), 2.0)) == 2.0


def test_a_body_returning_only_its_carry_gives_an_empty_tuple():
    @sc.function(sc.arg("c", ()))
    def double(c):
        return 2.0 * c

    @sc.function(sc.arg("c0", ()), outputs=sc.arg("last", ()))
    def doubled(c0):
        last, stacked = sc.scan(double, c0, length=10)
        assert stacked == ()
        return last

    assert float(doubled(1.5)) == 1.5 * 1024
    assert float(sc.gradient(doubled, "last", "c0")(1.5)) == 1024.0
    assert sc.hessian(doubled, "last", "c0")(1.5)[0, 0] == 0.0


def test_scan_on_numbers_evaluates_right_away():
    final, (ys,) = sc.scan(sine_step, 0.8, (XS,), length=len(XS))
    ref_last, ref_ys = _sine_numpy(0.8, XS, range(len(XS)))
    assert float(final) == pytest.approx(ref_last, rel=1e-15)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-15)


def test_nested_scans_differentiate():
    @sc.function(sc.arg("c", ()), sc.arg("x", ()))
    def inner_step(c, x):
        return (c + x).sin()

    @sc.function(sc.arg("c", ()), sc.arg("x", ()))
    def outer_step(c, x):
        inner, _ = sc.scan(inner_step, c, (sc.broadcast(x),), length=3)
        return inner * x, inner

    @sc.function(sc.arg("c0", ()), sc.arg("xs", 4), outputs=sc.arg("cost", ()))
    def nested(c0, xs):
        last, (ys,) = sc.scan(outer_step, c0, (xs,), length=4)
        return last + ys.sum()

    @sc.function(sc.arg("c0", ()), sc.arg("xs", 4), outputs=sc.arg("cost", ()))
    def unrolled(c0, xs):
        c, total = c0, 0.0
        for k in range(4):
            inner = c
            for _ in range(3):
                inner = (inner + xs[k]).sin()
            total = total + inner
            c = inner * xs[k]
        return c + total

    args = [np.array(0.3), np.array([0.5, -0.4, 0.9, 0.2])]
    assert float(nested(*args)) == pytest.approx(float(unrolled(*args)), rel=1e-15)
    for inp in ("c0", "xs"):
        check_derivatives(nested, unrolled, "cost", inp, args)


# ---------------------------------------------------------------------------
# sc.while_loop
# ---------------------------------------------------------------------------

@sc.function(sc.arg("x", ()), sc.arg("k", INT), sc.arg("a", ()),
             outputs=sc.arg("go", sc.TensorType((), sc.dtypes.bool_)))
def below(x, k, a):
    return x < a


@sc.function(sc.arg("x", ()), sc.arg("k", INT), sc.arg("a", ()))
def grow(x, k, a):
    return x * 1.5 + (a * x).sin() * 0.1


def _while_fn(max_iter):
    @sc.function(sc.arg("x0", ()), sc.arg("a", ()),
                 outputs=sc.group(sc.arg("x", ()), sc.arg("count", INT)))
    def grown(x0, a):
        return sc.while_loop(below, grow, x0, max_iter=max_iter, params=(a,), index=True)
    return grown


def _grow_numpy(x0, a, max_iter):
    x, count = x0, 0
    while count < max_iter and x < a:
        x = x * 1.5 + np.sin(a * x) * 0.1
        count += 1
    return x, count


def _unrolled_grow(count):
    @sc.function(sc.arg("x0", ()), sc.arg("a", ()),
                 outputs=sc.group(sc.arg("x", ()), sc.arg("count", INT)))
    def unrolled(x0, a):
        x = x0
        for _ in range(count):
            x = x * 1.5 + (a * x).sin() * 0.1
        return x, sc.const(np.int64(count))
    return unrolled


@pytest.mark.parametrize("x0, a, max_iter", [(0.2, 3.0, 30), (0.2, 3.0, 4), (5.0, 3.0, 30),
                                             (0.2, 3.0, 0)])
def test_while_loop_values_counts_and_derivatives(x0, a, max_iter):
    fn = _while_fn(max_iter)
    x, count = fn(x0, a)
    ref_x, ref_count = _grow_numpy(x0, a, max_iter)
    assert float(x) == pytest.approx(ref_x, rel=1e-15)
    assert count.dtype == np.int64 and int(count) == ref_count
    ref = _unrolled_grow(ref_count)
    for inp in ("x0", "a"):
        check_derivatives(fn, ref, "x", inp, [np.array(x0), np.array(a)])


def test_while_loop_condition_sees_the_step_number():
    @sc.function(sc.arg("x", ()), sc.arg("k", INT),
                 outputs=sc.arg("go", sc.TensorType((), sc.dtypes.bool_)))
    def fewer_than_three(x, k):
        return k < 3

    @sc.function(sc.arg("x", ()), sc.arg("k", INT))
    def halve(x, k):
        return 0.5 * x

    @sc.function(sc.arg("x0", ()), outputs=sc.group(sc.arg("x", ()), sc.arg("n", INT)))
    def halved(x0):
        return sc.while_loop(fewer_than_three, halve, x0, max_iter=10, index=True)

    x, n = halved(8.0)
    assert (float(x), int(n)) == (1.0, 3)
    assert float(sc.gradient(halved, "x", "x0")(8.0)) == 0.125


def test_while_loop_tuple_carries():
    @sc.function(sc.arg("x", ()), sc.arg("s", ()), outputs=sc.arg(
        "go", sc.TensorType((), sc.dtypes.bool_)))
    def small(x, s):
        return s < 10.0

    @sc.function(sc.arg("x", ()), sc.arg("s", ()))
    def accumulate(x, s):
        return x * 1.1, s + x

    @sc.function(sc.arg("x0", ()), outputs=sc.group(sc.arg("s", ()), sc.arg("n", INT)))
    def summed(x0):
        (x, s), n = sc.while_loop(small, accumulate, (x0, sc.const(0.0)), max_iter=100)
        return s, n

    s, n = summed(1.0)
    ref_s, ref_n, x = 0.0, 0, 1.0
    while ref_s < 10.0:
        ref_s, x, ref_n = ref_s + x, x * 1.1, ref_n + 1
    assert float(s) == pytest.approx(ref_s, rel=1e-15) and int(n) == ref_n
    g = float(sc.gradient(summed, "s", "x0")(1.0))
    assert g == pytest.approx(sum(1.1 ** k for k in range(ref_n)), rel=1e-14)
