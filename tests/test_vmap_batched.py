"""vmap's batch trace over the op-spec table: every row runs ONCE on the
stacked lanes (no per-lane fallback) and equals the loop over the lanes.

For every row (float64, every input kind): lanes stacked along axis 0 and
-1, 0, 1 and 3 lanes, every argument mapped, or only the first one (the
others shared); the result equals the Python loop of the function over the
lanes to 1e-12 and, where JAX has the function, ``jax.vmap``.  The gradient
through the batched rules (``grad`` of a function of ``vmap(f)``) equals the
gradient of the loop, and so do a gradient, a JVP and a hessian taken inside
vmap, whose rules run batched too (``per_lane_runs == 0``) except for the
rows of ``DERIVATIVE_PER_LANE``.
"""
import zlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._prims import batching

from opspecs import F64, NO_JAX, SPECS, case_id, cases, ns

CASES = cases(SPECS, dtypes=(F64,))
RTOL = 1e-12

#: rows that run lane by lane, on purpose: an ODE solve's right-hand side is
#: user code, and one joint solve of all lanes would share the step sizes, so
#: its lanes would differ from the loop's at the tolerance
PER_LANE_ROWS: set = {"odeint_params", "odeint_times",
                      # a plain numpy array indexed by traced integers (numpy's
                      # own indexing needs each lane's number; a traced array,
                      # or tnp.at(field)[i].get(), gathers every lane at once)
                      "gather_traced_plain_field"}


#: rows for which vmap's stand-in lane of ones (how zero lanes learn the output
#: shape when the batched run cannot) is not a valid input: output times must
#: increase, so zero lanes of them raise that error: row -> (argument, message)
ONES_INVALID_ROWS = {"odeint_times": (1, "strictly increasing")}


def _per_lane_allowed(spec):
    return spec.name in PER_LANE_ROWS


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _close(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    if a.dtype == bool or b.dtype == bool or a.dtype.kind in "iu":
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    scale = float(np.max(np.abs(b), initial=0.0))
    err = float(np.max(np.abs(a - b), initial=0.0))
    assert err <= RTOL * max(scale, 1.0), f"{what}: difference {err:.2e} (scale {scale:.2e})"


def _lanes(spec, shapes, n, seed):
    rng = np.random.default_rng(seed)
    return [spec.sample(rng, shapes) for _ in range(max(n, 1))][:n] if n else []


def _stacked(spec, shapes, lanes, n, axis, mapped):
    """The arguments with the lanes stacked along ``axis`` (mapped ones)."""
    rng = np.random.default_rng(1)
    shared = spec.sample(rng, shapes)
    out = []
    for k, shape in enumerate(shapes):
        if not mapped[k]:
            out.append(shared[k])
        elif n == 0:
            out.append(np.zeros((0,) + tuple(shape)) if axis == 0
                       else np.zeros(tuple(shape) + (0,)))
        else:
            out.append(np.stack([np.asarray(lane[k], dtype=np.float64) for lane in lanes],
                                axis=axis))
    return out, shared


def _loop(fn, args, mapped, n, axis):
    outs = []
    for i in range(n):
        lane = [np.take(a, i, axis=axis) if m else a for a, m in zip(args, mapped)]
        outs.append(np.asarray(fn(*lane)))
    return np.stack(outs) if outs else None


MAPS = {"all": lambda k: (True,) * k, "first": lambda k: (True,) + (False,) * (k - 1)}


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_row_runs_batched_and_equals_the_loop(case, axis, n, monkeypatch):
    spec, kind, shapes, _ = case
    for which, maps in MAPS.items():
        if which == "first" and spec.arity < 2:
            continue
        mapped = maps(spec.arity)
        lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, n))
        args, _ = _stacked(spec, shapes, lanes, n, axis, mapped)
        in_axes = tuple(axis if m else None for m in mapped)
        batching.reset_stats()
        if not _per_lane_allowed(spec):
            monkeypatch.setenv("TAPEAD_STRICT_VMAP", "1")
        arg, message = ONES_INVALID_ROWS.get(spec.name, (None, None))
        if n == 0 and arg is not None and mapped[arg]:
            with pytest.raises(ValueError, match=message):
                ta.vmap(spec.fn, in_axes=in_axes)(*args)
            continue
        out = ta.vmap(spec.fn, in_axes=in_axes)(*args)
        monkeypatch.delenv("TAPEAD_STRICT_VMAP", raising=False)
        what = f"{spec.name}-{kind} axis={axis} n={n} mapped={which}"
        if not _per_lane_allowed(spec):
            assert batching.STATS["per_lane_calls"] == 0, what
            assert batching.STATS["per_lane_runs"] == 0, what
        if n == 0:
            lane_shape = np.shape(spec.fn(*spec.sample(np.random.default_rng(0), shapes)))
            assert np.shape(out) == (0,) + lane_shape, what
            continue
        _close(out, _loop(spec.fn, args, mapped, n, axis), what)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradient_through_the_batched_rules_equals_the_loop(case, monkeypatch):
    """``grad`` of a function of ``vmap(f)``: the rules record on the outer tape."""
    spec, kind, shapes, _ = case
    if 1 not in spec.orders:
        pytest.skip("no derivative")
    n = 3
    mapped = (True,) * spec.arity
    lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, "grad"))
    args, _ = _stacked(spec, shapes, lanes, n, 0, mapped)
    w = np.random.default_rng(3).normal(size=np.shape(_loop(spec.fn, args, mapped, n, 0)))

    def batched(*xs):
        return tnp.sum(tnp.real(ta.vmap(spec.fn)(*xs)) * w)

    def looped(*xs):
        return tnp.sum(tnp.real(tnp.stack([spec.fn(*[x[i] for x in xs])
                                           for i in range(n)])) * w)
    argnums = tuple(range(spec.arity))
    if not _per_lane_allowed(spec):
        monkeypatch.setenv("TAPEAD_STRICT_VMAP", "1")
    g = ta.grad(batched, argnums=argnums)(*args)
    monkeypatch.delenv("TAPEAD_STRICT_VMAP", raising=False)
    ref = ta.grad(looped, argnums=argnums)(*args)
    for k in range(spec.arity):
        _close(g[k], ref[k], f"{spec.name}-{kind} d/d argument {k}")


#: eager JAX compiles every operation for every shape: one case in four keeps it short
JAX_CASES = [c for c in CASES if c[0].name not in NO_JAX][::4]


@pytest.mark.parametrize("case", JAX_CASES, ids=case_id)
def test_every_row_equals_jax_vmap(case):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    JNP = ns(jnp, sigmoid=jax.nn.sigmoid, relu=jax.nn.relu)
    spec, kind, shapes, _ = case
    n = 3
    mapped = (True,) + (False,) * (spec.arity - 1)
    lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, "jax"))
    args, _ = _stacked(spec, shapes, lanes, n, -1, mapped)
    in_axes = tuple(-1 if m else None for m in mapped)
    out = ta.vmap(spec.fn, in_axes=in_axes)(*args)
    ref = jax.vmap(lambda *a: spec.body(JNP, *a), in_axes=in_axes)(*[jnp.asarray(a)
                                                                     for a in args])
    _close(out, np.asarray(ref), f"{spec.name}-{kind}")


#: rows whose gradient or JVP taken inside vmap still runs lane by lane (every
#: other row's derivative rules run batched: ``per_lane_runs == 0``)
DERIVATIVE_PER_LANE: set = set(PER_LANE_ROWS)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_gradient_taken_inside_vmap_runs_batched_and_equals_the_loop(case, monkeypatch):
    """``vmap(lambda *a: grad(g)(*a))``: a tape started inside vmap records the
    stacked lanes and its sweep runs the rules batched."""
    spec, kind, shapes, _ = case
    if 1 not in spec.orders:
        pytest.skip("no derivative")
    n = 3
    lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, "inner"))
    args, _ = _stacked(spec, shapes, lanes, n, 0, (True,) * spec.arity)
    w = np.random.default_rng(4).normal(size=np.shape(spec.fn(*lanes[0])))
    argnums = tuple(range(spec.arity))
    gfun = ta.grad(lambda *a: tnp.sum(tnp.real(spec.fn(*a)) * w), argnums=argnums)
    inner = lambda *a: gfun(*a)                               # noqa: E731  (untagged)
    batching.reset_stats()
    out = ta.vmap(inner)(*args)
    if spec.name not in DERIVATIVE_PER_LANE:
        assert batching.STATS["per_lane_runs"] == 0, spec.name
    for k in range(spec.arity):
        ref = np.stack([np.asarray(gfun(*lane)[k]) for lane in lanes])
        _close(out[k], ref, f"{spec.name}-{kind} d/d argument {k}")


#: (a's shape, b's shape, the mapped one) for one lane of ``a @ b``: one
#: matmul over all the lanes replaces numpy's per-lane loop when the shared
#: operand is at most 2-d (the last row takes the general path)
SHARED_MATMUL = [((3, 4), (4,), "b"), ((4,), (4, 3), "a"), ((3, 4), (4, 2), "a"),
                 ((3, 4), (4,), "a"), ((4,), (4,), "a"), ((3, 4), (4, 2), "b")]


@pytest.mark.parametrize("a_shape, b_shape, side", SHARED_MATMUL)
@pytest.mark.parametrize("axis", [0, -1])
def test_matmul_against_a_shared_operand_equals_the_loop(a_shape, b_shape, side, axis):
    rng = np.random.default_rng(7)
    n = 5
    c = rng.normal(size=b_shape if side == "a" else a_shape)
    xs = rng.normal(size=(n,) + (a_shape if side == "a" else b_shape))
    f = (lambda x, c: tnp.sin(x) @ c) if side == "a" else (lambda x, c: c @ tnp.sin(x))
    what = f"{a_shape} @ {b_shape}, {side} mapped"
    stacked = np.moveaxis(xs, 0, axis)
    out = ta.vmap(f, in_axes=(axis, None))(stacked, c)
    ref = np.stack([f(x, c) for x in xs])
    _close(out, ref, what)
    # derivatives through the rule, against the loop's
    w = rng.normal(size=ref.shape)
    g = ta.grad(lambda x, c: tnp.sum(ta.vmap(f, in_axes=(axis, None))(x, c) * w),
                argnums=(0, 1))(stacked, c)
    gl = ta.grad(lambda x, c: sum(tnp.sum(f(x[i], c) * w[i]) for i in range(n)),
                 argnums=(0, 1))(xs, c)
    _close(g[0], np.moveaxis(gl[0], 0, axis), what + " d/dx")
    _close(g[1], gl[1], what + " d/dc")
    J = ta.vmap(ta.jacfwd(f), in_axes=(axis, None))(stacked, c)
    _close(J, np.stack([ta.jacfwd(f)(x, c) for x in xs]), what + " vmap(jacfwd)")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_jvp_taken_inside_vmap_runs_batched_and_equals_the_loop(case):
    """``vmap(lambda *a: jvp(f, a, t))``: the JVP rules run on the stacked
    lanes (the tangents, one lane's shape, are shared by every lane)."""
    spec, kind, shapes, _ = case
    if 1 not in spec.orders:
        pytest.skip("no derivative")
    n = 3
    lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, "jvp"))
    args, _ = _stacked(spec, shapes, lanes, n, 0, (True,) * spec.arity)
    rng = np.random.default_rng(5)
    tans = tuple(np.asarray(rng.normal(size=np.shape(a)), dtype=np.float64) for a in lanes[0])

    def inner(*a):
        return ta.jvp(lambda *b: tnp.real(spec.fn(*b)), a, tans)[1]
    batching.reset_stats()
    out = ta.vmap(inner)(*args)
    if spec.name not in DERIVATIVE_PER_LANE:
        assert batching.STATS["per_lane_runs"] == 0, spec.name
    _close(out, np.stack([np.asarray(inner(*lane)) for lane in lanes]), f"{spec.name}-{kind}")


#: one case per one-argument row with second derivatives
HESSIAN_CASES = list({c[0].name: c for c in CASES[::-1]
                      if c[0].arity == 1 and 2 in c[0].orders}.values())[::-1]


@pytest.mark.parametrize("case", HESSIAN_CASES, ids=case_id)
def test_a_hessian_taken_inside_vmap_runs_batched_and_equals_the_loop(case):
    """``vmap(hessian(g))``: the second-order rules (the JVPs of the VJPs) run
    on the stacked lanes too."""
    spec, kind, shapes, _ = case
    n = 2
    lanes = _lanes(spec, shapes, n, _seed(spec.name, kind, "hessian"))
    args, _ = _stacked(spec, shapes, lanes, n, 0, (True,))
    w = np.random.default_rng(6).normal(size=np.shape(spec.fn(*lanes[0])))
    h = ta.hessian(lambda x: tnp.sum(tnp.real(spec.fn(x)) * w))
    batching.reset_stats()
    out = ta.vmap(h)(*args)
    if spec.name not in DERIVATIVE_PER_LANE:
        assert batching.STATS["per_lane_runs"] == 0, spec.name
    _close(out, np.stack([np.asarray(h(*lane)) for lane in lanes]), f"{spec.name}-{kind}")


def test_the_per_lane_lists_name_rows_of_the_table():
    names = {spec.name for spec in SPECS}
    assert PER_LANE_ROWS <= names and DERIVATIVE_PER_LANE <= names
