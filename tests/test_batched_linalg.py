"""Batched JVPs of the contraction and linear-algebra primitives.

``ta.jacfwd`` pushes all K input directions through the tape in one forward
sweep; a primitive with a batched JVP rule is called once for the K
directions instead of once per direction.  For every op-spec row of these
primitives:

* the per-direction JVP (``Primitive.jvp``) is never called by ``jacfwd``,
  and the batched rule is;
* ``jacfwd`` (batched rules) equals the Jacobian built one ``ta.jvp`` at a
  time (per-direction rules) to 1e-13, and the one from ``ta.jacrev``;
* ``jacfwd`` of ``jacfwd`` (the batched rules run on values traced by an
  outer transform) equals ``jacrev`` of ``jacrev``.
"""
import zlib

import numpy as np
import pytest

import tapead as ta
from tapead._prims import contract, linalg, linalg_decomp, linalg_lstsq, reductions
from tapead._prims.base import Primitive
from opspecs import SPECS, case_id

#: op-spec row name (or prefix) -> the primitive whose batched rule it exercises
PRIMS = {
    "matmul": linalg.matmul_p, "dot": linalg.matmul_p, "dot_nd": contract.ndot_p,
    "tensordot_": contract.tensordot_p, "einsum_": None,    # einsum or einsum1
    "solve": linalg.solve_p, "inv": linalg.inv_p, "det": linalg.det_p,
    "slogdet": linalg.slogdet_p, "pinv": linalg_lstsq.pinv_p, "lstsq": linalg_lstsq.lstsq_p,
    "cholesky": linalg_decomp.cholesky_p, "eigh_": linalg_decomp.eigh_p,
    "eigvalsh": linalg_decomp.eigh_p, "qr_": linalg_decomp.qr_p,
    "cumprod": reductions.cumprod_p,
}
BATCHED = [linalg.matmul_p, contract.ndot_p, contract.tensordot_p, contract.einsum_p,
           contract.einsum1_p, linalg.solve_p, linalg.inv_p, linalg.det_p, linalg.slogdet_p,
           linalg_lstsq.pinv_p, linalg_lstsq.lstsq_p, linalg_decomp.cholesky_p,
           linalg_decomp.eigh_p, linalg_decomp.qr_p, reductions.cumprod_p]
BATCHED_NAMES = {p.name for p in BATCHED}


def _prim_of(name):
    for key, prim in PRIMS.items():
        if name == key or (key.endswith("_") and name.startswith(key)) or \
                (key in ("slogdet", "cumprod") and name.startswith(key)):
            return key, prim
    return None, None


CASES = [pytest.param((s, kind, shapes), id=case_id((s, kind, shapes, np.dtype(np.float64))))
         for s in SPECS if _prim_of(s.name)[0] is not None
         for kind, shapes in s.kinds]
FIRST_KIND = [pytest.param((s, s.kinds[0][0], s.kinds[0][1]), id=s.name)
              for s in SPECS if _prim_of(s.name)[0] is not None]


def _point(spec, kind, shapes):
    rng = np.random.default_rng(zlib.crc32(f"batched/{spec.name}/{kind}".encode()))
    return spec.sample(rng, shapes)


def _matrix(jac, out_shape, args):
    """A jacfwd/jacrev result (a tuple over the arguments) as (n_out, n_in)."""
    n_out = int(np.prod(out_shape))
    return np.concatenate([np.reshape(np.asarray(j, np.float64), (n_out, np.size(a)))
                           for j, a in zip(jac, args)], axis=1)


def _per_direction(f, args):
    """The Jacobian one ``ta.jvp`` (one direction) at a time: (n_out, n_in)."""
    cols = []
    for i, a in enumerate(args):
        for k in range(np.size(a)):
            tans = [np.zeros_like(b) for b in args]
            tans[i].flat[k] = 1.0
            cols.append(np.ravel(np.asarray(ta.jvp(f, tuple(args), tuple(tans))[1])))
    return np.stack(cols, axis=1)


class _Spy:
    """Counts per-direction JVP calls (by primitive name) and batched calls."""

    def __init__(self, monkeypatch, prims):
        self.per_direction, self.batched = [], {p.name: 0 for p in prims}
        jvp = Primitive.jvp

        def spy_jvp(prim, *a, **kw):
            self.per_direction.append(prim.name)
            return jvp(prim, *a, **kw)
        monkeypatch.setattr(Primitive, "jvp", spy_jvp)
        for p in prims:
            rule = p.jvp_batched
            if rule is None:                 # no batched rule: nothing to count
                continue

            def spy_batched(*a, _rule=rule, _name=p.name, **kw):
                self.batched[_name] += 1
                return _rule(*a, **kw)
            monkeypatch.setattr(p, "jvp_batched", spy_batched)


def _close(a, b, rtol):
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)


def test_every_listed_primitive_declares_a_batched_rule():
    for p in BATCHED:
        assert callable(p.jvp_batched), p.name


def test_jacfwd_of_tanh_matmul_calls_matmul_once(monkeypatch):
    rng = np.random.default_rng(0)
    A, x = rng.standard_normal((50, 50)), rng.standard_normal(50)
    spy = _Spy(monkeypatch, [linalg.matmul_p])
    J = ta.jacfwd(lambda x: np.tanh(A @ x))(x)
    assert spy.batched["matmul"] == 1
    assert spy.per_direction == []
    _close(J, (1 - np.tanh(A @ x) ** 2)[:, None] * A, 1e-13)


@pytest.mark.parametrize("case", CASES)
def test_batched_rule_runs_once_and_matches_per_direction(case, monkeypatch):
    spec, kind, shapes = case
    args = _point(spec, kind, shapes)
    argnums = tuple(range(spec.arity))
    out_shape = np.shape(spec.np_fn(*args))
    expect = _per_direction(spec.fn, args)          # before the spy: per-direction rules
    rev = _matrix(ta.jacrev(spec.fn, argnums)(*args), out_shape, args)
    _, prim = _prim_of(spec.name)
    spy = _Spy(monkeypatch, BATCHED)
    got = _matrix(ta.jacfwd(spec.fn, argnums)(*args), out_shape, args)
    assert not BATCHED_NAMES & set(spy.per_direction), spy.per_direction
    if prim is not None:
        assert spy.batched[prim.name] >= 1
    else:
        assert spy.batched["einsum"] >= 1
    _close(got, expect, 1e-13)
    _close(got, rev, 1e-12)


@pytest.mark.parametrize("case", FIRST_KIND)
def test_batched_rule_under_an_outer_transform(case):
    spec, kind, shapes = case
    args = _point(spec, kind, shapes)
    f = lambda x: spec.fn(x, *args[1:])             # the first argument only
    fwd = np.asarray(ta.jacfwd(ta.jacfwd(f))(args[0]))
    rev = np.asarray(ta.jacrev(ta.jacrev(f))(args[0]))
    _close(fwd, rev, 1e-11)


def test_cumprod_batched_rule_at_a_zero():
    x = np.array([[2.0, 0.0, 3.0], [1.5, -1.0, 0.0]])
    f = lambda x: np.cumprod(x, axis=1)
    _close(ta.jacfwd(f)(x), ta.jacrev(f)(x), 1e-14)
    g = lambda x: np.cumprod(x, axis=0)
    _close(ta.jacfwd(g)(x), ta.jacrev(g)(x), 1e-14)
