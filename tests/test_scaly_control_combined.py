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
