"""Every op-spec row through the element and small-vector paths and through
the generic path (``use_element_paths(False)``): the same values, bit for
bit, and the same Jacobians (reverse and forward mode) to 1e-15.

Each row runs as written (its 1-d float64 arguments of at most
``SMALL_ARRAY_MAX`` elements meet the small-vector path) and with every
argument passed through ``x * 1.0`` first, so that the primitive receives a
stack of scalar nodes instead of an input leaf.  Elementwise rows also run
on one element of a larger array (``x[i]``: an element node).
"""
import zlib

import numpy as np
import pytest

import tapead as ta
from tapead import _core

from opspecs import F64, SPECS, case_id, cases


def _jac_rev(f, args):
    out, pullback = ta.vjp(f, *args)
    rows = []
    for j in range(int(np.size(out))):
        e = np.zeros(np.shape(out), np.result_type(out))
        e.flat[j] = 1
        cts = pullback(e if np.shape(out) else np.result_type(out).type(1))
        rows.append(np.concatenate([np.ravel(np.asarray(c, np.complex128
                                                        if np.iscomplexobj(c) else
                                                        np.float64)) for c in cts]))
    return out, np.stack(rows)


def _jac_fwd(f, args):
    cols = []
    for i, a in enumerate(args):
        for k in range(int(np.size(a))):
            tans = []
            for j, b in enumerate(args):
                t = np.zeros(np.shape(b), np.result_type(b))
                if j == i:
                    t.flat[k] = 1
                tans.append(t if np.shape(b) else float(t))
            _, t = ta.jvp(f, tuple(args), tuple(tans))
            cols.append(np.ravel(np.asarray(t)))
    return np.stack(cols, axis=1)


def _both(f, args, fwd):
    out = _jac_rev(f, args)
    jf = _jac_fwd(f, args) if fwd else None
    before = _core.use_element_paths(False)
    try:
        ref = _jac_rev(f, args)
        jf0 = _jac_fwd(f, args) if fwd else None
    finally:
        _core.use_element_paths(before)
    return out, ref, jf, jf0


def _check(out, ref, jf, jf0):
    (v, J), (v0, J0) = out, ref
    np.testing.assert_array_equal(np.asarray(v), np.asarray(v0))
    assert np.shape(v) == np.shape(v0) and np.result_type(v) == np.result_type(v0)
    scale = max(1.0, float(np.max(np.abs(J0), initial=0.0)))
    np.testing.assert_allclose(J, J0, rtol=1e-15, atol=1e-15 * scale)
    if jf is not None:
        np.testing.assert_allclose(jf, jf0, rtol=1e-15, atol=1e-15 * scale)


CASES = [c for c in cases(SPECS, dtypes=(F64,))]


def _args(case):
    spec, kind, shapes, dt = case
    rng = np.random.default_rng(zlib.crc32(case_id(case).encode()))
    return spec.sample(rng, shapes, dt)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_row_through_the_element_paths(case):
    spec = case[0]
    args = _args(case)
    small = any(np.ndim(a) == 1 and np.size(a) <= _core.SMALL_ARRAY_MAX for a in args)
    _check(*_both(spec.fn, args, fwd=small))

    def through_stack(*xs):
        return spec.fn(*[x * 1.0 for x in xs])
    _check(*_both(through_stack, args, fwd=False))
    shapes = {np.shape(a) for a in args if np.ndim(a)}
    if spec.opcode is not None and len(shapes) == 1:
        # an elementwise row on 1-d vectors: the small-vector path per element
        flat = tuple(np.ravel(a) if np.ndim(a) else a for a in args)
        _check(*_both(spec.fn, flat, fwd=True))
        _check(*_both(through_stack, flat, fwd=True))


ELEMENTWISE = [c for c in CASES if c[0].opcode is not None and c[1] == "scalar"]


@pytest.mark.parametrize("case", ELEMENTWISE, ids=case_id)
def test_elementwise_row_on_an_element(case):
    spec = case[0]
    args = _args(case)
    rng = np.random.default_rng(1)
    # each argument becomes element 3 of an array of 7 (the rest random, unused)
    arrays = [np.concatenate([rng.uniform(-1, 1, 3), [a], rng.uniform(-1, 1, 3)])
              for a in args]

    def f(*xs):
        return spec.fn(*[x[3] for x in xs])
    _check(*_both(f, arrays, fwd=True))
