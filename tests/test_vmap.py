"""``ta.vmap``: JAX's in_axes/out_axes semantics, errors, composition with the
transforms, Python branches whose lanes disagree, chunk_size."""
import tracemalloc

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from opspecs import SPECS

RNG = np.random.default_rng(0)


def _loop(f, xs, axis=0):
    return np.stack([f(np.take(xs, i, axis=axis)) for i in range(np.shape(xs)[axis])])


# ---------------------------------------------------------------------------
# in_axes / out_axes
# ---------------------------------------------------------------------------

def test_default_axes_equal_the_loop_and_return_numpy():
    x = RNG.normal(size=(4, 3))
    f = lambda v: tnp.sin(v) * tnp.sum(v)
    out = ta.vmap(f)(x)
    assert type(out) is np.ndarray and out.shape == (4, 3)
    np.testing.assert_allclose(out, _loop(f, x), rtol=0, atol=0)


def test_in_axes_tuple_none_and_negative():
    w = RNG.normal(size=(3,))
    x = RNG.normal(size=(3, 5))
    f = lambda w, x: tnp.dot(w, x)
    out = ta.vmap(f, in_axes=(None, -1))(w, x)
    np.testing.assert_allclose(out, np.array([w @ x[:, i] for i in range(5)]), atol=1e-15)
    out = ta.vmap(f, in_axes=[None, 1])(w, x)           # a list works like a tuple
    assert out.shape == (5,)


def test_pytree_in_axes_and_out_axes():
    p = {"a": RNG.normal(size=(2, 3)), "b": RNG.normal(size=(3,))}
    f = lambda p: (p["a"] * p["b"], tnp.sum(p["b"]))
    out = ta.vmap(f, in_axes=({"a": 1, "b": 0},), out_axes=(1, 0))(p)
    assert out[0].shape == (2, 3) and out[1].shape == (3,)
    np.testing.assert_allclose(out[0], p["a"] * p["b"], atol=1e-15)
    np.testing.assert_allclose(out[1], p["b"], atol=1e-15)


def test_out_axes_none_for_an_unbatched_output_and_broadcast_for_int():
    c = np.array([1.0, 2.0])
    x = RNG.normal(size=(3,))
    out, same = ta.vmap(lambda x, c: (x * c, c), in_axes=(0, None), out_axes=(0, None))(x, c)
    assert out.shape == (3, 2) and np.array_equal(same, c)
    bc = ta.vmap(lambda x, c: c, in_axes=(0, None))(x, c)       # JAX broadcasts it
    assert np.array_equal(bc, np.stack([c] * 3))


def test_axis_size_zero_and_one():
    f = lambda v: tnp.sum(v * v), lambda v: v[::-1]
    for g in f:
        for n in (0, 1):
            x = RNG.normal(size=(n, 3))
            out = ta.vmap(g)(x)
            ref = _loop(g, x) if n else np.zeros((0,) + np.shape(g(np.ones(3))))
            assert out.shape == ref.shape
            np.testing.assert_allclose(out, ref, atol=1e-15)
    out = ta.vmap(lambda v: (v, tnp.sum(v)), out_axes=(1, 0))(np.zeros((0, 4)))
    assert out[0].shape == (4, 0) and out[1].shape == (0,)


def test_axis_size_with_nothing_mapped_and_keywords():
    out = ta.vmap(lambda c: c * 2.0, in_axes=None, axis_size=3)(np.array([1.0, 2.0]))
    assert out.shape == (3, 2)
    out = ta.vmap(lambda x, *, y: x * y)(np.ones(3), y=np.arange(3.0))
    np.testing.assert_array_equal(out, np.arange(3.0))


def test_float32_is_kept():
    x = RNG.normal(size=(3, 2)).astype(np.float32)
    assert ta.vmap(tnp.tanh)(x).dtype == np.float32
    assert ta.vmap(ta.grad(lambda v: tnp.sum(v ** 2)))(x).dtype == np.float32


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------

def test_error_inconsistent_sizes_names_the_arguments():
    with pytest.raises(ValueError, match=r"argument 0 \(a\) has size 3.*argument 1 \(b\) "
                                         r"has size 4"):
        ta.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="axis_size=5"):
        ta.vmap(lambda a: a, axis_size=5)(np.ones(3))


def test_error_in_axes_not_matching_the_arguments():
    with pytest.raises(ValueError, match="in_axes has 3 entries.*2 positional"):
        ta.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="does not match"):
        ta.vmap(lambda p: p[0], in_axes=((0, 0, 0),))((np.ones(3), np.ones(3)))
    with pytest.raises(ValueError, match="does not match"):
        ta.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": np.ones(3)})
    with pytest.raises(TypeError, match="in_axes='x'"):
        ta.vmap(lambda a: a, in_axes="x")(np.ones(3))


def test_error_bad_axes_and_scalars():
    with pytest.raises(ta.ShapeError, match="axis 2.*rank 2"):
        ta.vmap(lambda a: a, in_axes=2)(np.ones((3, 2)))
    with pytest.raises(ta.ShapeError, match="scalar cannot be mapped"):
        ta.vmap(lambda a: a)(1.0)
    with pytest.raises(ValueError, match="no axis to map"):
        ta.vmap(lambda a: a, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="chunk_size=0"):
        ta.vmap(lambda a: a, chunk_size=0)(np.ones(3))
    with pytest.raises(TypeError, match="must be a function"):
        ta.vmap(3)


def test_error_out_axes_none_for_a_batched_output():
    with pytest.raises(ValueError, match="out_axes is None for output 0.*differs"):
        ta.vmap(lambda a: a * 2.0, out_axes=None)(np.arange(3.0))
    with pytest.raises(ValueError, match="out_axes"):
        ta.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(np.arange(3.0))
    with pytest.raises(TypeError, match="not an array"):
        ta.vmap(lambda a: "text")(np.arange(3.0))


# ---------------------------------------------------------------------------
# every primitive of the op-spec table through vmap
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_opspec_rows_through_vmap_equal_the_loop(spec):
    kind, shapes = spec.kinds[-1]
    rng = np.random.default_rng(1)
    pts = [spec.sample(rng, shapes) for _ in range(3)]
    batch = tuple(np.stack([np.asarray(p[i]) for p in pts]) for i in range(spec.arity))
    out = ta.vmap(spec.fn)(*batch)
    ref = np.stack([np.asarray(spec.fn(*p)) for p in pts])
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)
    g = ta.grad(lambda *a: tnp.sum(spec.fn(*a)), argnums=tuple(range(spec.arity)))
    gb = ta.vmap(g)(*batch)
    gl = [g(*p) for p in pts]
    for k in range(spec.arity):
        np.testing.assert_allclose(gb[k], np.stack([np.asarray(r[k]) for r in gl]),
                                   rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------
# composition with the transforms
# ---------------------------------------------------------------------------

def _f(w, x):
    return tnp.sum(tnp.tanh(w * x) ** 2) + tnp.sin(w[0]) * x[1]


W = RNG.normal(size=(3,))
XS = RNG.normal(size=(4, 3))


def test_grad_of_vmap_matches_finite_differences():
    loss = lambda w: tnp.sum(ta.vmap(_f, in_axes=(None, 0))(w, XS) ** 2)
    g = ta.grad(loss)(W)
    ta.check_grads(loss, (W,), order=2)
    np.testing.assert_allclose(g, sum(ta.grad(lambda w: _f(w, x) ** 2)(W) for x in XS),
                               rtol=1e-12)


def test_vmap_of_grad_jacfwd_hessian_and_vmap_of_vmap():
    per = ta.vmap(ta.grad(_f), in_axes=(None, 0))(W, XS)
    np.testing.assert_allclose(per, np.stack([ta.grad(_f)(W, x) for x in XS]), rtol=1e-14)
    jf = ta.vmap(ta.jacfwd(lambda x: tnp.sin(x) * tnp.sum(x)))(XS)
    assert jf.shape == (4, 3, 3)
    h = ta.vmap(ta.hessian(_f), in_axes=(None, 0))(W, XS)
    np.testing.assert_allclose(h, np.stack([ta.hessian(_f)(W, x) for x in XS]), rtol=1e-14)
    X3 = RNG.normal(size=(2, 4, 3))
    vv = ta.vmap(ta.vmap(_f, in_axes=(None, 0)), in_axes=(None, 0))(W, X3)
    np.testing.assert_allclose(vv, [[_f(W, x) for x in xs] for xs in X3], rtol=1e-15)


def test_jvp_through_vmap_with_out_axes():
    f = ta.vmap(lambda x: tnp.exp(x) * x[0], in_axes=1, out_axes=1)
    x = RNG.normal(size=(3, 4))
    t = RNG.normal(size=(3, 4))
    _, tan = ta.jvp(f, (x,), (t,))
    J = ta.jacfwd(f)(x).reshape(12, 12)
    np.testing.assert_allclose(tan.ravel(), J @ t.ravel(), rtol=1e-13, atol=1e-14)


# ---------------------------------------------------------------------------
# eager Python control flow whose lanes disagree
# ---------------------------------------------------------------------------

def _branchy(x):
    if tnp.sum(x) > 0:
        y = tnp.sin(x)
        if x[0] > 0.5:              # a nested branch
            y = y * 3.0
    else:
        y = tnp.cos(x)
    n = 0
    while tnp.sum(y * y) < 4.0 and n < 50:   # the trip count differs per lane
        y = y * 1.5
        n += 1
    return y


def test_branches_and_while_loops_equal_the_loop_and_differentiate():
    xs = RNG.normal(size=(8, 3))
    np.testing.assert_allclose(ta.vmap(_branchy)(xs), _loop(_branchy, xs), rtol=0, atol=0)
    g = ta.vmap(ta.grad(lambda x: tnp.sum(_branchy(x))))(xs)
    ref = _loop(ta.grad(lambda x: tnp.sum(_branchy(x))), xs)
    np.testing.assert_allclose(g, ref, rtol=0, atol=0)
    loss = lambda xs: tnp.sum(ta.vmap(_branchy)(xs))
    ta.check_grads(loss, (xs,), order=1)


# ---------------------------------------------------------------------------
# chunk_size
# ---------------------------------------------------------------------------

def test_chunked_equals_unchunked_and_composes_with_grad():
    xs = RNG.normal(size=(7, 3))
    for c in (1, 3, 7, 100):
        np.testing.assert_array_equal(ta.vmap(_branchy, chunk_size=c)(xs), ta.vmap(_branchy)(xs))
    loss = lambda w, c: tnp.sum(ta.vmap(_f, in_axes=(None, 0), chunk_size=c)(w, xs))
    np.testing.assert_allclose(ta.grad(loss)(W, 2), ta.grad(loss)(W, None), rtol=1e-15)


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_chunk_size_bounds_the_memory_of_per_lane_temporaries():
    """The gradient of a pairwise energy of 48 points per lane makes (lane, 48,
    48) temporaries for a (lane, 48) output: with chunk_size=8, one chunk's
    temporaries at a time (16 chunks of 128 lanes), so the traced peak is a
    fraction of the unchunked one, and the numbers are the same.  (Where the
    output dominates, e.g. per-example gradients of a small MLP, chunking
    cannot lower the peak: the chunks' outputs and their concatenation are
    held together; benchmarks/bench_vmap.py prints both cases.)"""
    def energy(x):
        d = x[:, None] - x[None, :]
        return tnp.sum(tnp.exp(-d * d))
    P = RNG.normal(size=(128, 48))
    g = ta.vmap(ta.grad(energy))
    gc = ta.vmap(ta.grad(energy), chunk_size=8)
    full, chunked = _peak(lambda: g(P)), _peak(lambda: gc(P))
    assert chunked < full / 4, (full, chunked)
    np.testing.assert_allclose(gc(P), g(P), rtol=1e-15, atol=0)
    np.testing.assert_allclose(g(P)[:3], np.stack([ta.grad(energy)(x) for x in P[:3]]),
                               rtol=1e-13, atol=1e-13)
    # the same through plain vmap of a function making the temporaries
    f = lambda x: tnp.sum(tnp.exp(-(x[:, None] - x[None, :]) ** 2), axis=1)   # noqa: E731
    full = _peak(lambda: ta.vmap(f)(P))
    chunked = _peak(lambda: ta.vmap(f, chunk_size=8)(P))
    assert chunked < full / 4, (full, chunked)
    np.testing.assert_array_equal(ta.vmap(f, chunk_size=8)(P), ta.vmap(f)(P))


# ---------------------------------------------------------------------------
# against JAX
# ---------------------------------------------------------------------------

def test_against_jax_axes_and_compositions():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def body(m, w, x):
        return m.sum(m.tanh(w * x) ** 2) + m.sin(w[0]) * x[1]

    tf, jf = (lambda w, x: body(tnp, w, x)), (lambda w, x: body(jnp, w, x))
    x1 = RNG.normal(size=(3, 4))
    w2 = RNG.normal(size=(2, 3))
    for n in (0, 1, 5):
        xs = RNG.normal(size=(n, 3))
        for tt, trans in ((lambda g: g, lambda g: g), (ta.grad, jax.grad),
                          (ta.hessian, jax.hessian)):
            a = ta.vmap(tt(tf), in_axes=(None, 0))(W, xs)
            b = jax.vmap(trans(jf), in_axes=(None, 0))(W, xs)
            assert np.shape(a) == np.shape(b)
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    a = ta.vmap(ta.grad(tf, argnums=(0, 1)), in_axes=(0, 1), out_axes=(1, 0))(w2[:, :3], x1[:, :2])
    b = jax.vmap(jax.grad(jf, argnums=(0, 1)), in_axes=(0, 1), out_axes=(1, 0))(
        w2[:, :3], x1[:, :2])
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-13)
    loss_t = lambda w: tnp.sum(ta.vmap(tf, in_axes=(None, 1))(w, x1) ** 2)
    loss_j = lambda w: jnp.sum(jax.vmap(jf, in_axes=(None, 1))(w, x1) ** 2)
    np.testing.assert_allclose(ta.grad(loss_t)(W), jax.grad(loss_j)(W), rtol=1e-12)
    np.testing.assert_allclose(ta.hessian(loss_t)(W), jax.hessian(loss_j)(W), rtol=1e-12)


def test_namedtuple_trees_negative_out_axes_and_python_numbers():
    import collections
    P = collections.namedtuple("P", "a b")
    x = P(RNG.normal(size=(3, 2)), RNG.normal(size=(3,)))
    out = ta.vmap(lambda p: P(p.a * p.b, 2.0), in_axes=(P(0, 0),), out_axes=P(-1, 0))(x)
    assert isinstance(out, P) and out.a.shape == (2, 3)
    np.testing.assert_allclose(out.a, (x.a * x.b[:, None]).T, atol=1e-15)
    assert out.b.shape == (3,) and out.b.dtype == np.float64
    n = ta.vmap(lambda v: int(v.shape[0]) + 1)(np.ones((4, 2)))
    assert np.array_equal(n, [3, 3, 3, 3])


def test_arguments_written_in_place_do_not_change_other_lanes():
    def f(v):
        v[0] = 7.0
        return v * 1.0
    xs = np.arange(6.0).reshape(3, 2)
    out = ta.vmap(f)(xs)
    assert np.array_equal(out[:, 0], [7.0] * 3) and np.array_equal(xs[:, 0], [0.0, 2.0, 4.0])
