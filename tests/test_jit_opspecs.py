"""Every op-spec row through ``ta.jit``: the recorded (and fused) programs of
the value, the gradient, a JVP, an HVP and a vmap, replayed at a new point,
against the eager transforms there.  Fused, unfused and native-kernel replays
give the same bits; the recorded derivative programs agree with eager ones to
rounding."""
import zlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core

from opspecs import F64, case_id, cases

CASES = [c for c in cases(dtypes=(F64,))]


def _points(case):
    spec, kind, shapes, dt = case
    rng = np.random.default_rng(zlib.crc32(case_id(case).encode()))
    return spec.sample(rng, shapes, dt), spec.sample(rng, shapes, dt)


def _real_scalar(spec):
    def f(*args):
        out = spec.fn(*args)
        if _core.is_complex(ta.tree_flatten(out)[0][0]):
            out = tnp.real(out) + tnp.imag(out)
        return tnp.sum(out * out) if np.ndim(out) else out * out
    return f


def _close(a, b, rtol):
    for x, y in zip(ta.tree_flatten(a)[0], ta.tree_flatten(b)[0]):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol)


def _same(a, b):
    for x, y in zip(ta.tree_flatten(a)[0], ta.tree_flatten(b)[0]):
        assert np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_jitted_transforms_of_every_row_replay_at_new_points(case):
    spec = case[0]
    x0, x1 = _points(case)
    if not all(np.asarray(a).dtype.kind == "f" for a in x0):
        pytest.skip("integer or complex arguments are static for ta.jit")
    f = _real_scalar(spec)
    nums = tuple(range(len(x0)))
    vg = ta.value_and_grad(f, argnums=nums)
    jf, jvg, jvg_plain = ta.jit(f), ta.jit(vg, native=False), ta.jit(vg, fuse=False)
    for g in (jf, jvg, jvg_plain):
        g(*x0)                                  # recorded at one point ...
    jvg.compile(*x0)                            # (fused on numpy's loops)
    _close(jf(*x1), f(*x1), 1e-14)              # ... replayed at another
    got = jvg(*x1)
    _same(got, jvg_plain(*x1))                  # fusion changes no bit
    jvg_native = ta.jit(vg)
    jvg_native.compile(*x0)
    _same(jvg_native(*x1), got)                 # nor do native kernels
    _close(got, vg(*x1), 1e-12)
    t = tuple(np.ones_like(a) if np.ndim(a) else 1.0 for a in x0)
    jjvp = ta.jit(lambda *a: ta.jvp(f, a, t))
    jjvp(*x0)
    _close(jjvp(*x1), ta.jvp(f, x1, t), 1e-12)
    jhvp = ta.jit(lambda *a: ta.hvp(f, a, t), native=False)
    jhvp(*x0)
    hv = jhvp(*x1)
    _close(hv, ta.hvp(f, x1, t), 1e-10)
    jhvp_native = ta.jit(lambda *a: ta.hvp(f, a, t))
    jhvp_native.compile(*x0)
    _same(jhvp_native(*x1), hv)
    if all(np.ndim(a) == 0 for a in x0):
        stacked = tuple(np.array([a, b]) for a, b in zip(x0, x1))
        jv = ta.jit(ta.vmap(f))
        jv(*stacked)
        swapped = tuple(s[::-1].copy() for s in stacked)
        _close(jv(*swapped), ta.vmap(f)(*swapped), 1e-13)
