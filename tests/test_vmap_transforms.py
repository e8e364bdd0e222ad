"""vmap of grad, value_and_grad, jacfwd, jacrev and hessian run batched (the
transform of a vmap, tapead/vmap_transforms.py) and equal JAX's vmap of the
same transform to 1e-12; untagged transforms inside vmap run lane by lane;
chunk_size gives the same numbers."""
import tracemalloc

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(11)
W = RNG.normal(size=(3, 4))
X = RNG.normal(size=(6, 4))
Y = RNG.normal(size=(6, 3))


def loss(W, x, y, m=tnp):
    return m.sum((m.tanh(W @ x) - y) ** 2)


def jloss(W, x, y):
    return loss(W, x, y, jnp)


def vec(x, m=tnp):
    return m.sin(x) * x[0] + x[::-1] ** 2


def jvec(x):
    return vec(x, jnp)


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(b), initial=0.0), 1e-300))


def _close(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert _rel(x, y) <= 1e-12


def _batched(check):
    """Run ``check`` and assert that vmap never ran lane by lane."""
    ta.vmap_stats(reset=True)
    check()
    stats = ta.vmap_stats(reset=True)
    assert stats["per_lane_runs"] == 0 and stats["per_lane_calls"] == 0, stats


@pytest.mark.parametrize("argnums", [0, 1, (0, 2)])
def test_vmap_of_grad_and_value_and_grad(argnums):
    ax = (None, 0, 0)
    _batched(lambda: _close(ta.vmap(ta.grad(loss, argnums), in_axes=ax)(W, X, Y),
                            jax.vmap(jax.grad(jloss, argnums), in_axes=ax)(W, X, Y)))
    _batched(lambda: _close(
        ta.vmap(ta.value_and_grad(loss, argnums), in_axes=ax)(W, X, Y),
        jax.vmap(jax.value_and_grad(jloss, argnums), in_axes=ax)(W, X, Y)))


def test_vmap_of_grad_with_aux_out_axes_and_a_mapped_parameter():
    f = lambda W, x, y: (loss(W, x, y), tnp.tanh(W @ x))            # noqa: E731
    jf = lambda W, x, y: (jloss(W, x, y), jnp.tanh(W @ x))         # noqa: E731
    Ws = RNG.normal(size=(3, 4, 6))                                  # lanes on the last axis
    ax = (2, 0, 0)
    out = ta.vmap(ta.grad(f, has_aux=True), in_axes=ax, out_axes=1)(Ws, X, Y)
    ref = jax.vmap(jax.grad(jf, has_aux=True), in_axes=ax, out_axes=1)(Ws, X, Y)
    _close(out, ref)


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
def test_vmap_of_jacobians(kind):
    ta_t, jax_t = getattr(ta, kind), getattr(jax, kind)
    _batched(lambda: _close(ta.vmap(ta_t(vec))(X), jax.vmap(jax_t(jvec))(X)))
    ax = (None, 0, 0)
    _batched(lambda: _close(ta.vmap(ta_t(loss, argnums=(0, 1)), in_axes=ax)(W, X, Y),
                            jax.vmap(jax_t(jloss, argnums=(0, 1)), in_axes=ax)(W, X, Y)))
    f = lambda W, x: {"a": tnp.tanh(W @ x), "b": tnp.sum(x)}       # noqa: E731
    jf = lambda W, x: {"a": jnp.tanh(W @ x), "b": jnp.sum(x)}      # noqa: E731
    _batched(lambda: _close(ta.vmap(ta_t(f), in_axes=(None, 0))(W, X),
                            jax.vmap(jax_t(jf), in_axes=(None, 0))(W, X)))


@pytest.mark.parametrize("budget", [1, 72, 8192], ids=["one_direction_a_run",
                                                    "three_a_run", "all_in_one_run"])
def test_vmap_of_jacfwd_in_groups_of_directions(budget, monkeypatch):
    """The directions of vmap(jacfwd) go B per forward run over lanes repeated B
    times (B = 1, 3 of 4 with a last group of one, all): the same numbers, with
    pytrees, a mapped argument on axis 1, aux data, a branch whose lanes
    disagree, and grad through it."""
    from tapead import vmap_transforms
    monkeypatch.setattr(vmap_transforms, "_LANE_BUDGET", budget)
    _batched(lambda: _close(ta.vmap(ta.jacfwd(vec))(X), jax.vmap(jax.jacfwd(jvec))(X)))
    ax = (None, 1, 0)
    _batched(lambda: _close(ta.vmap(ta.jacfwd(loss, argnums=(0, 1)), in_axes=ax)(W, X.T, Y),
                            jax.vmap(jax.jacfwd(jloss, argnums=(0, 1)), in_axes=ax)(W, X.T, Y)))
    aux = lambda x: (vec(x), {"s": tnp.sum(x)})                    # noqa: E731
    J, a = ta.vmap(ta.jacfwd(aux, has_aux=True))(X)
    Jj, aj = jax.vmap(jax.jacfwd(lambda x: (jvec(x), {"s": jnp.sum(x)}), has_aux=True))(X)
    _close((J, a), (Jj, aj))
    branchy = lambda x: vec(x) if x[0] > 0 else 2.0 * tnp.cos(x)   # noqa: E731
    Xs = X.copy()
    Xs[::2, 0] = np.abs(Xs[::2, 0])
    Xs[1::2, 0] = -np.abs(Xs[1::2, 0])
    np.testing.assert_allclose(ta.vmap(ta.jacfwd(branchy))(Xs),
                               np.stack([ta.jacfwd(branchy)(x) for x in Xs]), rtol=1e-15)

    def outer(W):
        return tnp.sum(ta.vmap(ta.jacfwd(loss, argnums=1), in_axes=(None, 0, 0))(W, X, Y) ** 2)

    def jouter(W):
        return jnp.sum(jax.vmap(jax.jacfwd(jloss, argnums=1), in_axes=(None, 0, 0))(W, X, Y) ** 2)
    _close(ta.grad(outer)(W), jax.grad(jouter)(W))
    _close(ta.vmap(ta.hessian(loss, argnums=1), in_axes=(None, 0, 0))(W, X, Y),
           jax.vmap(jax.hessian(jloss, argnums=1), in_axes=(None, 0, 0))(W, X, Y))


def test_vmap_of_hessian():
    h = lambda x: tnp.sum(tnp.sin(x) * x[0] ** 2)                 # noqa: E731
    jh = lambda x: jnp.sum(jnp.sin(x) * x[0] ** 2)                # noqa: E731
    _batched(lambda: _close(ta.vmap(ta.hessian(h))(X), jax.vmap(jax.hessian(jh))(X)))
    ax = (None, 0, 0)
    _batched(lambda: _close(ta.vmap(ta.hessian(loss), in_axes=ax)(W, X, Y),
                            jax.vmap(jax.hessian(jloss), in_axes=ax)(W, X, Y)))


def test_grad_of_vmap_of_grad():
    def outer(W):
        return tnp.sum(ta.vmap(ta.grad(loss, argnums=1), in_axes=(None, 0, 0))(W, X, Y) ** 2)

    def jouter(W):
        return jnp.sum(jax.vmap(jax.grad(jloss, argnums=1), in_axes=(None, 0, 0))(W, X, Y) ** 2)
    _close(ta.grad(outer)(W), jax.grad(jouter)(W))


def test_jvp_of_vmap_and_vmap_of_vmap():
    V = RNG.normal(size=X.shape)
    _close(ta.jvp(ta.vmap(vec), (X,), (V,)), jax.jvp(jax.vmap(jvec), (X,), (V,)))
    X3 = RNG.normal(size=(2, 3, 4))
    _close(ta.vmap(ta.vmap(vec))(X3), jax.vmap(jax.vmap(jvec))(X3))
    _close(ta.vmap(ta.vmap(ta.grad(lambda x: tnp.sum(vec(x)))))(X3),
           jax.vmap(jax.vmap(jax.grad(lambda x: jnp.sum(jvec(x)))))(X3))


def test_an_untagged_transform_inside_vmap_runs_batched():
    """A tape started inside vmap records the stacked lanes: its sweep runs the
    rules once for all lanes."""
    f = lambda W, x, y: ta.grad(loss)(W, x, y) * 2.0               # noqa: E731
    _batched(lambda: _close(ta.vmap(f, in_axes=(None, 0, 0))(W, X, Y),
                            2.0 * jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))(W, X, Y)))
    g = lambda x: ta.jvp(vec, (x,), (np.ones(x.shape),))[1]          # noqa: E731
    _batched(lambda: _close(ta.vmap(g)(X),
                            jax.vmap(lambda x: jax.jvp(jvec, (x,), (jnp.ones_like(x),))[1])(X)))


def test_a_transform_inside_vmap_over_outer_boxes_runs_lane_by_lane():
    """Inside vmap, inside grad: a tape started in the function would hold lanes
    of the outer tape's tracers; vmap reruns the function lane by lane."""
    f = lambda W, x, y: ta.grad(loss, argnums=1)(W, x, y)           # noqa: E731  (untagged)

    def outer(W):
        ta.vmap_stats(reset=True)
        return tnp.sum(ta.vmap(f, in_axes=(None, 0, 0))(W, X, Y) ** 2)

    def jouter(W):
        return jnp.sum(jax.vmap(jax.grad(jloss, argnums=1), in_axes=(None, 0, 0))(W, X, Y) ** 2)
    _close(ta.grad(outer)(W), jax.grad(jouter)(W))
    assert ta.vmap_stats(reset=True)["per_lane_runs"] == 1


def test_vmap_of_grad_of_a_non_scalar_function_raises_grad_error():
    with pytest.raises(ta.NonScalarOutputError):
        ta.vmap(ta.grad(lambda x: x * 2.0))(X)


def _peak(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_chunk_size_gives_the_same_numbers_and_holds_less_memory():
    Xb = RNG.normal(size=(512, 4))
    Yb = RNG.normal(size=(512, 3))
    g = ta.vmap(ta.grad(loss), in_axes=(None, 0, 0))
    gc = ta.vmap(ta.grad(loss), in_axes=(None, 0, 0), chunk_size=64)
    np.testing.assert_allclose(gc(W, Xb, Yb), g(W, Xb, Yb), rtol=1e-15, atol=0)
    f = ta.vmap(vec, chunk_size=4)
    np.testing.assert_array_equal(f(X), ta.vmap(vec)(X))
    # the tape of one chunk at a time (the output is small next to it)
    Wl, Xl, Yl = RNG.normal(size=(256, 32)), RNG.normal(size=(1024, 32)), RNG.normal(size=(1024, 256))
    g = ta.vmap(ta.grad(loss, argnums=1), in_axes=(None, 0, 0))
    gc = ta.vmap(ta.grad(loss, argnums=1), in_axes=(None, 0, 0), chunk_size=16)
    full, chunked = _peak(lambda: g(Wl, Xl, Yl)), _peak(lambda: gc(Wl, Xl, Yl))
    assert chunked < full / 2, (full, chunked)
    f = lambda W, x, y: tnp.sum(tnp.tanh(W @ x) - y)               # noqa: E731
    full = _peak(lambda: ta.vmap(f, in_axes=(None, 0, 0))(Wl, Xl, Yl))
    chunked = _peak(lambda: ta.vmap(f, in_axes=(None, 0, 0), chunk_size=64)(Wl, Xl, Yl))
    assert chunked < full / 4, (full, chunked)

