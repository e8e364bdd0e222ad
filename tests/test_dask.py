"""tapead.dask on a real dask.distributed LocalCluster (2 worker processes,
1 thread each), started once for the module: data-parallel gradients and
Hessian-vector products against one process, vmap over chunks, sparse
Jacobians by colour-group tasks, recordings shared on a worker, errors
raised before work is sent, errors from a block, a worker killed mid-run."""
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import tapead as ta                                     # noqa: E402
import tapead.dask as tdask                             # noqa: E402
from tapead.errors import NonScalarOutputError          # noqa: E402
from tapead.nn import init_mlp, mlp, mse                # noqa: E402

RTOL = 1e-12


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit="1GB")
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def least_squares(w, X, y):
    return ((X @ w - y) ** 2).mean()


def least_squares_sum(w, X, y):
    return ((X @ w - y) ** 2).sum()


def mlp_loss(params, x, t):
    return mse(mlp(params, x), t)


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(np.abs(b).max(), 1e-300)
    assert np.abs(a - b).max() <= rtol * scale, (np.abs(a - b).max() / scale)


def _data(n=1003, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=d)


@pytest.mark.parametrize("reduction, loss", [("mean", least_squares),
                                             ("sum", least_squares_sum)])
def test_value_and_grad_equals_one_process(client, reduction, loss):
    Xn, yn, w = _data()
    X, y = da.from_array(Xn, chunks=(128, 5)), da.from_array(yn, chunks=128)   # ragged last
    value, g = tdask.value_and_grad(loss, reduction=reduction)(w, X, y)
    v0, g0 = ta.value_and_grad(loss)(w, Xn, yn)
    _close(value, v0)
    _close(g, g0)
    # and against central differences of the whole loss
    h = 1e-6
    fd = [(loss(w + h * e, Xn, yn) - loss(w - h * e, Xn, yn)) / (2 * h) for e in np.eye(5)]
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)


def test_value_and_grad_equals_jax(client):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    Xn, yn, w = _data(n=517, seed=4)
    X, y = da.from_array(Xn, chunks=(100, 5)), da.from_array(yn, chunks=100)
    value, g = tdask.value_and_grad(least_squares)(w, X, y)
    v_jax, g_jax = jax.value_and_grad(lambda w: ((Xn @ w - yn) ** 2).mean())(w)
    _close(value, float(v_jax))
    _close(g, np.asarray(g_jax))


def test_every_sample_is_reduced_once(client):
    Xn, yn, w = _data(n=777)
    X, y = da.from_array(Xn, chunks=(100, 5)), da.from_array(yn, chunks=100)
    value, g, n = tdask.value_and_grad(least_squares).lazy(w, X, y).compute()
    assert n == Xn.shape[0] == 777
    _close(g, ta.grad(least_squares)(w, Xn, yn))


def test_mlp_parameters_as_a_dict_and_two_argnums(client):
    rng = np.random.default_rng(1)
    params = init_mlp((2, 8, 1), rng)
    Xn, tn = rng.uniform(-1, 1, size=(301, 2)), rng.normal(size=(301, 1))
    X, t = da.from_array(Xn, chunks=(64, 2)), da.from_array(tn, chunks=(64, 1))
    value, g = tdask.value_and_grad(mlp_loss)(params, X, t)
    v0, g0 = ta.value_and_grad(mlp_loss)(params, Xn, tn)
    _close(value, v0)
    assert sorted(g) == sorted(g0)
    for k in g0:
        assert g[k].shape == g0[k].shape
        _close(g[k], g0[k])
    # two differentiated arguments, the data named explicitly
    f = lambda a, X, b, y: ((X @ a + b - y) ** 2).mean()          # noqa: E731
    Xn2, yn2, a = _data(n=205, d=3)
    X2, y2 = da.from_array(Xn2, chunks=(50, 3)), da.from_array(yn2, chunks=50)
    v, (ga, gb) = tdask.value_and_grad(f, argnums=(0, 2), data_argnums=(1, 3))(a, X2, 0.3, y2)
    v0, (ga0, gb0) = ta.value_and_grad(f, argnums=(0, 2))(a, Xn2, 0.3, yn2)
    _close(v, v0)
    _close(ga, ga0)
    _close(gb, gb0)
    assert np.ndim(gb) == 0


def test_hvp_equals_one_process(client):
    rng = np.random.default_rng(2)
    params = init_mlp((2, 6, 1), rng)
    v = {k: rng.normal(size=p.shape) for k, p in params.items()}
    Xn, tn = rng.uniform(-1, 1, size=(250, 2)), rng.normal(size=(250, 1))
    X, t = da.from_array(Xn, chunks=(64, 2)), da.from_array(tn, chunks=(64, 1))
    hv = tdask.hvp(mlp_loss)(v, params, X, t)
    hv0 = ta.hvp(lambda p: mlp_loss(p, Xn, tn), (params,), (v,))
    for k in params:
        _close(hv[k], hv0[k])
    hv_n, n = tdask.hvp(mlp_loss).lazy(v, params, X, t).compute()
    assert n == 250


def test_a_worker_records_each_signature_once(client):
    Xn, yn, w = _data(n=800)
    X, y = da.from_array(Xn, chunks=(100, 5)), da.from_array(yn, chunks=100)   # 8 alike
    vg = tdask.value_and_grad(least_squares)
    for k in range(3):
        vg(w + k, X, y)
    infos = client.run(lambda f=vg.jitted: tuple(f.cache_info()))
    calls = sum(hits + misses for hits, misses, *_ in infos.values())
    assert calls == 24                               # 3 gradients of 8 blocks
    for hits, misses, rerecords, size, *_ in infos.values():
        assert misses == (1 if hits + misses else 0)  # one recording per worker process
        assert rerecords == 0 and size == misses


def test_vmap_of_grad_and_jacfwd_is_lazy_and_equals_ta_vmap(client):
    rng = np.random.default_rng(3)
    params = init_mlp((3, 5, 2), rng)
    Xn, tn = rng.normal(size=(530, 3)), rng.normal(size=(530, 2))
    X, t = da.from_array(Xn, chunks=(100, 3)), da.from_array(tn, chunks=(100, 2))
    per_example = ta.grad(lambda p, x, y: mse(mlp(p, x[None]), y[None]))
    G = tdask.vmap(per_example, in_axes=(None, 0, 0))(params, X, t)
    assert isinstance(G["W0"], da.Array) and G["W0"].chunks[0] == X.chunks[0]
    G0 = ta.vmap(per_example, in_axes=(None, 0, 0))(params, Xn, tn)
    got = {k: v.compute() for k, v in G.items()}
    for k in G0:
        _close(got[k], G0[k])
    J = tdask.vmap(ta.jacfwd(lambda x: np.tanh(x) * x.sum()))(X)      # (530, 3, 3)
    _close(J.compute(), ta.vmap(ta.jacfwd(lambda x: np.tanh(x) * x.sum()))(Xn))
    # a mapped axis that is not the first
    Z = tdask.vmap(lambda x: (x ** 2).sum(), in_axes=1)(X.T.rechunk((3, 100)))
    _close(Z.compute(), (Xn ** 2).sum(axis=1))


def test_vmap_out_of_core_input_is_generated_on_the_workers(client):
    X = da.random.default_rng(0).normal(size=(200_000, 4), chunks=(20_000, 4))
    norms = tdask.vmap(ta.grad(lambda x: (np.sin(x) ** 2).sum()))(X)
    total = (norms ** 2).sum().compute()
    ref = (np.sin(2 * X) ** 2).sum().compute()           # d/dx sin^2 = sin 2x
    assert total == pytest.approx(ref, rel=1e-12)


def test_sparse_jacobian_equals_ta_sparse_jacobian(client):
    def f(x):
        return np.concatenate([x[1:] * x[:-1], np.sin(x[:3]) * x[-1]])
    x = np.linspace(0.5, 2.0, 60)
    jac = tdask.sparse_jacobian(f, colors_per_task=1)
    J = jac(x)
    J0 = ta.sparse_jacobian(f)(x)
    assert J.shape == J0.shape == (62, 60)
    assert np.array_equal(J.toarray(), J0.toarray())
    _close(J.toarray(), ta.jacfwd(f)(x))
    np.testing.assert_array_equal(jac(2 * x).toarray(), ta.jacfwd(f)(2 * x))


def test_terrain_trained_data_parallel_equals_one_process(client):
    pytest.importorskip("matplotlib")
    from tapead.examples import terrain            # needs matplotlib for its data
    X, y, *_ = terrain.load_terrain(n_train=640, n_test=10)
    params, _, curve = terrain.train(X, y, epochs=2, progress=False,
                                     value_and_grad=terrain.data_parallel(blocks=2))
    ref, _, ref_curve = terrain.train(X, y, epochs=2, progress=False)
    for k in ref:
        _close(params[k], ref[k], rtol=1e-10)
    _close(curve, ref_curve, rtol=1e-10)


# -- bad input: clear errors before any work is sent ------------------------------

def test_errors_before_any_work(client):
    Xn, yn, w = _data(n=100)
    X = da.from_array(Xn, chunks=(25, 5))
    vg = tdask.value_and_grad(least_squares).lazy      # builds the graph, computes nothing
    with pytest.raises(ValueError, match="chunked differently"):
        vg(w, X, da.from_array(yn, chunks=30))
    with pytest.raises(TypeError, match="argument 2 is a ndarray.*dask array"):
        vg(w, X, yn)
    with pytest.raises(TypeError, match="differentiated.*dask array"):
        vg(da.from_array(w, chunks=5), X, da.from_array(yn, chunks=25))
    with pytest.raises(ValueError, match="reduction must be"):
        tdask.value_and_grad(least_squares, reduction="average")
    lock = threading.Lock()

    def locked(w, X, y):
        with lock:
            return least_squares(w, X, y)
    with pytest.raises(TypeError, match="loss cannot be sent to the workers"):
        tdask.value_and_grad(locked, jit=False).lazy(w, X, da.from_array(yn, chunks=25))
    with pytest.raises(TypeError, match="function cannot be sent"):
        tdask.vmap(lambda x: locked(x, x, x))(X)
    with pytest.raises(TypeError, match="must be a dask array"):
        tdask.vmap(lambda x: x.sum())(Xn)
    with pytest.raises(ValueError, match="1-d float array"):
        tdask.sparse_jacobian(lambda x: x)(np.ones((2, 2)))


def test_an_error_in_a_block_is_the_original_error_naming_the_block(client):
    Xn, yn, w = _data(n=250)
    X, y = da.from_array(Xn, chunks=(100, 5)), da.from_array(yn, chunks=100)

    def vector_loss(w, X, y):
        r = X @ w - y
        return r ** 2 if X.shape[0] < 100 else (r ** 2).mean()    # block 2 has 50
    with pytest.raises(NonScalarOutputError, match=r"in block 2 \(samples 200:250\)"):
        tdask.value_and_grad(vector_loss)(w, X, y)


# -- faults: last, it restarts a worker --------------------------------------------

def slow_least_squares(w, X, y):
    time.sleep(0.25)
    return least_squares(w, X, y)


def test_a_worker_killed_mid_gradient_still_gives_the_right_result(client):
    Xn, yn, w = _data(n=1200)
    X, y = da.from_array(Xn, chunks=(100, 5)), da.from_array(yn, chunks=100)   # 12 blocks
    vg = tdask.value_and_grad(slow_least_squares, jit=False)
    future = client.compute(vg.lazy(w, X, y))
    time.sleep(0.6)                                    # some blocks done, some running
    victim = sorted(client.scheduler_info()["workers"])[0]
    client.restart_workers([victim])                   # the nanny kills and restarts it
    value, g, n = future.result(timeout=120)
    assert n == 1200
    v0, g0 = ta.value_and_grad(least_squares)(w, Xn, yn)
    _close(value, v0)
    _close(g, g0)
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.scheduler_info()["workers"]     # it was restarted
