"""Values-only replay: ``Tape.evaluate``, ``Tape.replay(..., partials=False)``.

``evaluate`` at new inputs must give the numbers a fresh recording gives
(scalar runs of 32 nodes or more take the C loop without the GIL); an input
of the wrong kind gives ``None`` and leaves the tape as it was; ``spread=``
feeds an array into consecutive scalar inputs; after a values-only replay
(or a replay stopped by an error) the sweeps refuse the tape until a full
replay, so stale partials never come out as a gradient.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._core import OPCODES, Tape

NOGIL_RUN = 32          # tapead/_core_replay.pxi: runs this long replay without the GIL
FIRST_SCALAR = min(OPCODES.values())    # scalar opcodes; input/obj/guard are below


def record(f, *args):
    """(tape, input ids, output ids) of ``f`` recorded on a bare Tape."""
    t = Tape()
    ins = [t.input(a) for a in args]
    outs = f(*ins)
    t.active = False
    outs = outs if isinstance(outs, tuple) else (outs,)
    return t, [i.idx for i in ins], [o.idx for o in outs]


def longest_scalar_run(tape):
    op, _, _ = tape.export_nodes()
    best = run = 0
    for o in op:
        run = run + 1 if o >= FIRST_SCALAR else 0
        best = max(best, run)
    return best


def chain(x, y, steps=12):
    """sin/cos/exp/log/div/pow and every constant opcode, kept bounded."""
    z = x
    for _ in range(steps):
        z = (tnp.sin(z) * y + tnp.cos(z * 0.5) / (1.5 + y * y) + tnp.exp(-z * z)
             - tnp.log(1.0 + z * z) + (1.5 + tnp.sin(z)) ** y - z / 3.0
             + 2.0 / (2.0 + z * z) + (1.0 - z) * 0.25 + 2.0 ** tnp.tanh(z)
             + tnp.sqrt(1.0 + z * z) ** 0.5)
        z = tnp.tanh(z * 0.3)
    return z


def mixed(W, s, t):
    """Array nodes, a float-valued array node feeding a long scalar run, and
    an array output built from a scalar node."""
    h = tnp.tanh(W * s)
    a = tnp.sum(h * h)
    z = a
    for _ in range(40):
        z = tnp.sin(z) * t + 0.1 * z
    v = W * z
    return tnp.sum(tnp.exp(v * 0.1)) + z * s, v


# ---------------------------------------------------------------------------
# evaluate equals a fresh recording
# ---------------------------------------------------------------------------

def short(x, y):
    return tnp.sin(x) * y / (1.0 + tnp.exp(x)) - tnp.log(1.5 + y * y) ** 1.5 + x ** y * 0.0 \
        + tnp.cos(x * y)


@pytest.mark.parametrize("f, long_run", [(chain, True), (short, False)])
def test_scalar_evaluate_equals_fresh_recording(f, long_run):
    t, _, (out,) = record(f, 0.3, 0.8)
    # long: the C loop without the GIL runs; short: the loop with it
    assert (longest_scalar_run(t) >= NOGIL_RUN) == long_run
    rng = np.random.default_rng(int(long_run))
    for x, y in rng.uniform(0.1, 1.5, size=(8, 2)):
        got = t.evaluate([float(x), float(y)], [out])
        fresh, _, (fout,) = record(f, float(x), float(y))
        assert type(got[0]) is float
        assert got[0] == pytest.approx(fresh.value(fout), rel=1e-15, abs=1e-15)
        assert got[0] == pytest.approx(float(f(float(x), float(y))), rel=1e-14)
        assert t.value(out) == got[0]


def test_evaluate_accepts_numpy_scalars_and_returns_none_for_negative_ids():
    t, (ix, iy), (out,) = record(lambda x, y: chain(x, y), 0.3, 0.8)
    a = t.evaluate([np.float64(0.1), np.array(0.2)], [out, -1, ix, iy])
    assert a[1] is None and a[2:] == [0.1, 0.2]
    assert a[0] == pytest.approx(float(chain(0.1, 0.2)), rel=1e-14)


def test_mixed_scalar_array_tape_evaluate_equals_fresh_recording():
    rng = np.random.default_rng(0)
    W0 = rng.normal(size=(3, 4))
    t, _, (out, v) = record(mixed, W0, 0.5, 0.9)
    assert longest_scalar_run(t) >= NOGIL_RUN
    for _ in range(5):
        W, s, u = rng.normal(size=(3, 4)), float(rng.normal()), float(rng.uniform(0.5, 1.5))
        got = t.evaluate([W, s, u], [out, v])
        fresh, _, (fo, fv) = record(mixed, W, s, u)
        assert got[0] == pytest.approx(fresh.value(fo), rel=1e-14)
        np.testing.assert_allclose(got[1], fresh.value(fv), rtol=1e-14)
        assert got[1].shape == (3, 4)


# ---------------------------------------------------------------------------
# None, the tape untouched, for an input of the wrong kind
# ---------------------------------------------------------------------------

def _snapshot(t, ids):
    return [np.array(t.value(i), copy=True) for i in ids]


@pytest.mark.parametrize("bad", [
    [1, 0.9],                                   # int for a float
    [True, 0.9],
    [np.float32(0.4), 0.9],
    [np.array([0.4]), 0.9],                     # shape (1,) for a scalar
    [np.array(0.4, dtype=np.float32), 0.9],
    [0.4],                                      # too few
    [0.4, 0.9, 1.0],                            # too many
])
def test_scalar_input_of_wrong_kind_gives_none_and_keeps_the_tape(bad):
    t, (ix, iy), (out,) = record(lambda x, y: chain(x, y), 0.3, 0.8)
    first = t.evaluate([0.7, 1.1], [out])
    before = _snapshot(t, [ix, iy, out])
    assert t.evaluate(bad, [out]) is None
    assert _snapshot(t, [ix, iy, out]) == before
    assert t.value(out) == first[0]
    assert t.evaluate([0.7, 1.1], [out]) == first


@pytest.mark.parametrize("make_bad", [
    lambda W: W.astype(np.float32),             # dtype
    lambda W: W.astype(np.int64),
    lambda W: W.reshape(4, 3),                  # shape
    lambda W: W[:2],
    lambda W: W.tolist(),                       # a list
    lambda W: float(W[0, 0]),                   # a float for an array
])
def test_array_input_of_wrong_kind_gives_none_and_keeps_the_tape(make_bad):
    rng = np.random.default_rng(1)
    t, (iW, is_, it), (out, v) = record(mixed, rng.normal(size=(3, 4)), 0.5, 0.9)
    W = rng.normal(size=(3, 4))
    first = t.evaluate([W, 0.2, 1.1], [out, v])
    kept = t.value(iW)
    assert kept is W                            # array inputs are kept by reference
    assert t.evaluate([make_bad(W + 1.0), 0.3, 1.2], [out, v]) is None
    assert t.value(iW) is kept and t.value(is_) == 0.2 and t.value(it) == 1.1
    assert t.value(out) == first[0] and t.value(v) is first[1]


# ---------------------------------------------------------------------------
# spread=: an array into consecutive scalar inputs
# ---------------------------------------------------------------------------

def spread_tape():
    """Inputs: an array W (2, 2), six scalars, one more scalar."""
    t = Tape()
    W = t.input(np.ones((2, 2)))
    xs = t.input_many([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    s = t.input(0.7)
    out = tnp.sum(W * xs[0]) + s * xs[5]
    for k in range(1, 5):
        out = out + tnp.sin(xs[k] * k) * xs[k - 1]
    t.active = False
    return t, out.idx


@pytest.mark.parametrize("arr", [
    np.array([0.3, -1.2, 0.5, 2.0, 0.1, -0.7]),
    np.array([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]]),                    # C order
    np.asfortranarray(np.array([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]])),   # copied once
    np.array([0.3, 9.0, -1.2, 9.0, 0.5, 9.0, 2.0, 9.0, 0.1, 9.0, -0.7])[::2],   # strided
])
def test_spread_equals_feeding_the_floats_one_by_one(arr):
    t, out = spread_tape()
    W = np.arange(4.0).reshape(2, 2)
    one_by_one = t.evaluate([W, *np.ravel(arr).tolist(), 1.5], [out])
    spread = t.evaluate([W, arr, 1.5], [out], spread=[0, 6, 0])
    assert spread == one_by_one
    x = [0.3, -1.2, 0.5, 2.0, 0.1, -0.7]
    expected = 6.0 * x[0] + 1.5 * x[5] + sum(np.sin(x[k] * k) * x[k - 1] for k in range(1, 5))
    assert spread[0] == pytest.approx(expected, rel=1e-15)
    # a count of 1: a one-element array is one scalar input
    ones = [np.array([v]) for v in np.ravel(arr)] + [np.array([1.5])]
    assert t.evaluate([W, *ones], [out], spread=[0] + [1] * 7) == one_by_one


@pytest.mark.parametrize("values, counts", [
    (lambda W, a: [W, a[:5], 1.5], [0, 5, 0]),                 # counts short of the inputs
    (lambda W, a: [W, a, 1.5], [0, 7, 0]),                     # size differs from the count
    (lambda W, a: [W, np.append(a, [1.5, 2.0])], [0, 8]),      # past the last input
    (lambda W, a: [W, a.astype(np.float32), 1.5], [0, 6, 0]),  # float32
    (lambda W, a: [W, a.astype(np.int64), 1.5], [0, 6, 0]),
    (lambda W, a: [W, a.tolist(), 1.5], [0, 6, 0]),             # a list
    (lambda W, a: [np.append(W.ravel(), a[:2]), a[2:], 1.5], [6, 4, 0]),   # over an array input
    (lambda W, a: [W, a, 1.5, 2.0], [0, 6, 0, 0]),             # one value too many
])
def test_spread_of_the_wrong_size_or_kind_gives_none(values, counts):
    t, out = spread_tape()
    W = np.arange(4.0).reshape(2, 2)
    a = np.array([0.3, -1.2, 0.5, 2.0, 0.1, -0.7])
    first = t.evaluate([W, a, 1.5], [out], spread=[0, 6, 0])
    assert t.evaluate(values(W, a), [out], spread=counts) is None
    assert t.value(out) == first[0]


def test_spread_counts_must_match_the_values():
    t, out = spread_tape()
    with pytest.raises(ValueError, match="spread counts"):
        t.evaluate([np.ones((2, 2)), np.ones(6), 1.5], [out], spread=[0, 6])


# ---------------------------------------------------------------------------
# stale partials: the sweeps refuse until a full replay
# ---------------------------------------------------------------------------

def chain_ta(x, y):
    return chain(x, y)


@pytest.mark.parametrize("values_only", [
    lambda t, p: t.evaluate(p, [0]),
    lambda t, p: t.replay(p, partials=False),
])
def test_sweeps_refuse_stale_partials_until_a_full_replay(values_only):
    t, (ix, iy), (out,) = record(chain, 0.3, 0.8)
    assert not t.partials_stale
    values_only(t, [0.7, 1.1])
    assert t.partials_stale
    assert t.value(out) == pytest.approx(float(chain(0.7, 1.1)), rel=1e-14)
    with pytest.raises(ta.TapeReplayError, match=r"call Tape.replay\(inputs\) first"):
        t.backward([out], [1.0], [ix, iy])
    with pytest.raises(ta.TapeReplayError, match="partials are stale"):
        t.forward_sweep({ix: np.ones(1)}, [out], 1)
    t.replay([0.7, 1.1])
    assert not t.partials_stale
    gx, gy = t.backward([out], [1.0], [ix, iy])
    ex, ey = ta.grad(chain_ta, argnums=(0, 1))(0.7, 1.1)
    assert gx == pytest.approx(ex, rel=1e-13) and gy == pytest.approx(ey, rel=1e-13)
    (tan,) = t.forward_sweep({ix: np.array([1.0, 0.0]), iy: np.array([0.0, 1.0])}, [out], 2)
    np.testing.assert_allclose(tan, [ex, ey], rtol=1e-13)


def test_mixed_tape_gradient_after_full_replay():
    rng = np.random.default_rng(2)
    t, ins, (out, _) = record(mixed, rng.normal(size=(3, 4)), 0.5, 0.9)
    W = rng.normal(size=(3, 4))
    t.evaluate([W, -0.4, 1.2], [out])
    with pytest.raises(ta.TapeReplayError):
        t.backward([out], [1.0], ins)
    t.replay([W, -0.4, 1.2])
    gW, gs, gt = t.backward([out], [1.0], ins)
    eW, es, et = ta.grad(lambda W, s, u: mixed(W, s, u)[0], argnums=(0, 1, 2))(W, -0.4, 1.2)
    np.testing.assert_allclose(gW, eW, rtol=1e-13)
    assert gs == pytest.approx(es, rel=1e-13) and gt == pytest.approx(et, rel=1e-13)


def test_evaluate_of_wrong_kind_keeps_fresh_partials():
    t, (ix, iy), (out,) = record(chain, 0.3, 0.8)
    t.replay([0.7, 1.1])
    assert t.evaluate([1, 1.1], [out]) is None
    assert not t.partials_stale                 # untouched: still the full replay's
    gx, _ = t.backward([out], [1.0], [ix, iy])
    assert gx == pytest.approx(ta.grad(chain_ta)(0.7, 1.1), rel=1e-13)


# ---------------------------------------------------------------------------
# guards: a flipped branch raises, never a silent wrong value
# ---------------------------------------------------------------------------

def branchy(x, y):
    z = x * y
    for _ in range(40):                         # a long scalar run before the guard
        z = tnp.sin(z) + 0.5 * y
    if z > 0.5:
        return z * z
    return -z


@pytest.mark.parametrize("how", ["evaluate", "values-only replay", "replay"])
def test_flipped_guard_raises_and_the_sweeps_refuse(how):
    t, (ix, iy), (out,) = record(branchy, 1.0, 1.0)
    run = {"evaluate": lambda p: t.evaluate(p, [out]),
           "values-only replay": lambda p: t.replay(p, partials=False),
           "replay": lambda p: t.replay(p)}[how]
    run([1.2, 1.1])                             # same branch
    assert t.value(out) == pytest.approx(float(branchy(1.2, 1.1)), rel=1e-14)
    with pytest.raises(ta.GuardFlippedError, match="Re-record"):
        run([1.0, -1.0])                        # z < 0.5: the other branch
    with pytest.raises(ta.TapeReplayError, match="stale"):
        t.backward([out], [1.0], [ix, iy])     # not the half-replayed partials
    t.replay([0.9, 1.3])
    gx, gy = t.backward([out], [1.0], [ix, iy])
    ex, ey = ta.grad(branchy, argnums=(0, 1))(0.9, 1.3)
    assert gx == pytest.approx(ex, rel=1e-13) and gy == pytest.approx(ey, rel=1e-13)


def test_flipped_index_guard_on_an_array_input():
    t, (ix,), (out,) = record(lambda x: x[np.argmax(x)] * 2.0, np.array([1.0, 3.0, 2.0]))
    assert t.evaluate([np.array([1.0, 4.0, 2.0])], [out]) == [8.0]
    with pytest.raises(ta.GuardFlippedError, match="argmax"):
        t.evaluate([np.array([5.0, 4.0, 2.0])], [out])


def test_replay_with_an_input_of_the_wrong_shape_leaves_the_sweeps_refusing():
    t, (iW, is_, it), (out, _) = record(mixed, np.ones((3, 4)), 0.5, 0.9)
    with pytest.raises(ta.TapeReplayError, match="re-record"):
        t.replay([np.ones((3, 4)), 0.2, np.ones(2)])    # 0.2 written, then the error
    with pytest.raises(ta.TapeReplayError, match="stale"):
        t.backward([out], [1.0], [iW, is_, it])
