"""sc.scan with its options combined (two carries, one a vector; a window, a
sliced and a broadcast input; two stacked outputs; index, reverse, trip and
checkpoints): values and derivatives of order 1 and 2, forward and reverse,
against the same steps unrolled in Python and central differences."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tapead.scaly as sc
from test_scaly_control_loops import check_derivatives

INT = sc.TensorType((), sc.dtypes.int64)
L = 4


@sc.function(sc.arg("a", ()), sc.arg("b", 2), sc.arg("k", INT), sc.arg("w", 3),
             sc.arg("u", ()), sc.arg("p", 2))
def indexed(a, b, k, w, u, p):
    a2 = (a * w[0] + b[1] * u).sin() + p[0] * k
    b2 = b * w[1:] + sc.stack([a * p[1], u * b[0]]) * 0.5
    return a2, b2, a * b.sum() + w[2] * u, (b * p).tanh()


@sc.function(sc.arg("a", ()), sc.arg("b", 2), sc.arg("w", 3), sc.arg("u", ()),
             sc.arg("p", 2))
def plain(a, b, w, u, p):
    a2 = (a * w[0] + b[1] * u).sin()
    b2 = b * w[1:] + sc.stack([a * p[1], u * b[0]]) * 0.5
    return a2, b2, a * b.sum() + w[2] * u, (b * p).tanh()


def _make(index, reverse, trip, checkpoints, stride, unrolled):
    body = indexed if index else plain
    nz = 3 + (L - 1) * stride

    @sc.function(sc.arg("a0", ()), sc.arg("b0", 2), sc.arg("z", nz), sc.arg("us", L),
                 sc.arg("p", 2),
                 outputs=sc.group(sc.arg("cost", ()), sc.arg("bL", 2), sc.arg("ys", (L, 2))))
    def run(a0, b0, z, us, p):
        if not unrolled:
            options = dict(length=L, index=index, reverse=reverse, checkpoints=checkpoints)
            if trip is not None:
                options["trip"] = sc.const(np.int64(trip))
            (a, b), (y1, y2) = sc.scan(body, (a0, b0),
                                       (sc.window(z, 0, stride), us, sc.broadcast(p)),
                                       **options)
            return a * y1.sum() + (y2 * y2).sum() + b.sum(), b, y2
        n = L if trip is None else min(max(trip, 0), L)
        a, b = a0, b0
        y1, y2 = [sc.const(0.0)] * L, [sc.const(np.zeros(2))] * L
        for k in (range(n - 1, -1, -1) if reverse else range(n)):
            step = (sc.const(np.int64(k)),) if index else ()
            a, b, y1[k], y2[k] = body(a, b, *step, z[k * stride:k * stride + 3], us[k], p)
        Y1, Y2 = sc.stack(y1), sc.stack(y2)
        return a * Y1.sum() + (Y2 * Y2).sum() + b.sum(), b, Y2
    return run, nz


CASES = [(False, False, None, None, 1), (True, True, None, None, 2),
         (True, False, 2, None, 1), (False, True, 9, None, 2),
         (False, False, None, 2, 2), (True, True, 2, 2, 1), (False, True, None, 1, 1)]


@pytest.mark.parametrize("index, reverse, trip, checkpoints, stride", CASES)
def test_scan_options_combined(index, reverse, trip, checkpoints, stride):
    fn, nz = _make(index, reverse, trip, checkpoints, stride, unrolled=False)
    ref, _ = _make(index, reverse, trip, checkpoints, stride, unrolled=True)
    rng = np.random.default_rng(7)
    args = [np.array(0.3), 0.5 * rng.normal(size=2), 0.5 * rng.normal(size=nz),
            0.5 * rng.normal(size=L), 0.5 * rng.normal(size=2)]
    for got, want in zip(fn(*args), ref(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    for out, inp in itertools.product(("cost", "bL", "ys"), ("a0", "b0", "z", "us", "p")):
        check_derivatives(fn, ref, out, inp, args)


BOOL = sc.TensorType((), sc.dtypes.bool_)


@sc.function(sc.arg("v", 2), sc.arg("k", INT), sc.arg("q", ()), outputs=sc.arg("go", BOOL))
def small(v, k, q):
    return (v * v).sum() < q


@sc.function(sc.arg("v", 2), sc.arg("k", INT), sc.arg("q", ()))
def grow(v, k, q):
    return v * 1.3 + sc.stack([v[1], v[0]]) * 0.1 * q


@sc.function(sc.arg("c", 2), sc.arg("q", ()))
def grow_then_halve(c, q):
    v, _ = sc.while_loop(small, grow, c, max_iter=6, params=(q,), index=True)
    return v * 0.5, v.sum()


def test_a_while_loop_in_a_scan_differentiates_along_the_executed_steps():
    @sc.function(sc.arg("c0", 2), sc.arg("qs", 3),
                 outputs=sc.group(sc.arg("last", 2), sc.arg("cost", ())))
    def nested(c0, qs):
        last, (ys,) = sc.scan(grow_then_halve, c0, (qs,), length=3)
        return last, ys.sum() * last.sum()

    c0, qs = np.array([0.3, 0.2]), np.array([2.0, 1.5, 3.0])
    counts, c = [], c0.copy()
    for q in qs:                               # the steps each inner loop executes
        v, n = c.copy(), 0
        while n < 6 and (v * v).sum() < q:
            v, n = v * 1.3 + np.array([v[1], v[0]]) * 0.1 * q, n + 1
        counts.append(n)
        c = v * 0.5
    assert counts == [4, 1, 3]

    @sc.function(sc.arg("c0", 2), sc.arg("qs", 3),
                 outputs=sc.group(sc.arg("last", 2), sc.arg("cost", ())))
    def unrolled(c0, qs):
        c, total = c0, 0.0
        for i in range(3):
            v = c
            for _ in range(counts[i]):
                v = v * 1.3 + sc.stack([v[1], v[0]]) * 0.1 * qs[i]
            c, total = v * 0.5, total + v.sum()
        return c, total * c.sum()

    for got, want in zip(nested(c0, qs), unrolled(c0, qs)):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    for out, inp in itertools.product(("last", "cost"), ("c0", "qs")):
        check_derivatives(nested, unrolled, out, inp, [c0, qs])


@pytest.mark.parametrize("index, reverse, trip, checkpoints, stride", CASES)
def test_scan_patterns_are_those_of_the_unrolled_steps(index, reverse, trip, checkpoints,
                                                       stride):
    fn, _ = _make(index, reverse, trip, checkpoints, stride, unrolled=False)
    ref, _ = _make(index, reverse, trip, checkpoints, stride, unrolled=True)
    for o, i in itertools.product(range(3), range(5)):
        got = sc.jacobian_sparsity(fn.outputs[o], fn.inputs[i]).to_mask()
        want = sc.jacobian_sparsity(ref.outputs[o], ref.inputs[i]).to_mask()
        if trip is None:
            np.testing.assert_array_equal(got, want)
        else:                    # any trip count may run: a superset of this one's
            assert np.all(got >= want)
