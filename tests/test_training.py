"""Training loops: tape memory to the byte, the terrain lab, flat memory."""
import tracemalloc

import numpy as np
import pytest

import tapead as ta
from tapead.nn import init_mlp, mlp, mlp_tape_nbytes, mse


def test_mlp_tape_bytes_predicted_and_measured_233480():
    sizes, batch = [2, 64, 64, 1], 64
    assert mlp_tape_nbytes(sizes, batch) == 233_480
    rng = np.random.default_rng(0)
    params = init_mlp(sizes, rng)
    x = rng.standard_normal((batch, 2))
    y = rng.standard_normal((batch, 1))
    rec = ta.record(lambda p: mse(mlp(p, x), y), params)
    assert rec.nbytes == 233_480


@pytest.mark.parametrize("sizes, batch", [([3, 5, 2], 7), ([4, 8, 8, 8, 1], 16), ([1, 1], 1)])
def test_tape_bytes_prediction_holds_for_other_shapes(sizes, batch):
    rng = np.random.default_rng(1)
    params = init_mlp(sizes, rng)
    x = rng.standard_normal((batch, sizes[0]))
    y = rng.standard_normal((batch, sizes[-1]))
    assert ta.record(lambda p: mse(mlp(p, x), y), params).nbytes == mlp_tape_nbytes(sizes, batch)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    p32 = init_mlp(sizes, rng, dtype=np.float32)
    assert ta.record(lambda p: mse(mlp(p, x32), y32), p32).nbytes == \
        mlp_tape_nbytes(sizes, batch, itemsize=4)


def test_mse_errors_and_gradient():
    with pytest.raises(ValueError, match="reshape the target"):
        mse(np.ones((3, 1)), np.ones(3))
    ta.check_grads(lambda p, t: mse(p, t), (np.arange(6.0).reshape(3, 2), np.ones((3, 2))))


def test_value_and_grad_over_dict_and_optimizers():
    rng = np.random.default_rng(2)
    params = init_mlp([2, 8, 1], rng)
    x, y = rng.standard_normal((32, 2)), rng.standard_normal((32, 1))
    vg = ta.value_and_grad(lambda p: mse(mlp(p, x), y))
    opt = ta.optim.Adam(lr=1e-2)
    first, _ = vg(params)
    for _ in range(50):
        loss, g = vg(params)
        params = opt.step(params, g)
    assert loss < first
    p2 = ta.optim.sgd(params, g, 0.1)
    np.testing.assert_array_equal(p2["W0"], params["W0"] - 0.1 * g["W0"])


def test_memory_stays_flat_over_10000_steps():
    rng = np.random.default_rng(3)
    params = init_mlp([2, 16, 1], rng)
    x, y = rng.standard_normal((8, 2)), rng.standard_normal((8, 1))
    vg = ta.value_and_grad(lambda p: mse(mlp(p, x), y))
    samples = []
    tracemalloc.start()
    try:
        for step in range(10_000):
            _, g = vg(params)
            for k in params:
                params[k] -= 0.01 * g[k]
            if step % 1000 == 999:
                samples.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    # the tape is freed after each sweep: what is left is bounded (allocator and
    # freelist caches), so the last samples are no higher than the early ones
    early, late = max(samples[1:5]), max(samples[5:])
    assert late < early + 128 * 1024, f"memory grew: {samples}"


def test_terrain_two_epochs_match_numpy_backprop():
    pytest.importorskip("matplotlib")
    from tapead.examples import terrain
    X, y, Xt, yt, z = terrain.load_terrain()
    assert z.shape == (344, 403) and len(X) == 6000 and len(Xt) == 6000
    p_ta, scale, curve = terrain.train(X, y, epochs=2, progress=False)
    p_np, scale_np, curve_np = terrain.train_numpy_by_hand(X, y, epochs=2)
    assert curve[1] < curve[0]
    np.testing.assert_allclose(curve, curve_np, rtol=1e-12)
    for k in p_np:
        np.testing.assert_allclose(p_ta[k], p_np[k], rtol=1e-12, atol=1e-12)
    mean_rmse, linear_rmse = terrain.baselines(X, y, Xt, yt)
    assert 155 < mean_rmse < 170 and 140 < linear_rmse < 150
    assert terrain.rmse(terrain.predict(p_ta, scale, Xt), yt) < linear_rmse


def test_terrain_main_writes_figure(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    from tapead.examples import terrain
    out = tmp_path / "terrain.png"
    assert terrain.main(["--epochs", "1", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "predicted 233,480 bytes, measured 233,480 bytes" in text
    assert "linear in (x, y)" in text and out.stat().st_size > 10_000


def test_terrain_without_matplotlib_says_which_extra(monkeypatch):
    import builtins

    from tapead.examples import terrain
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(SystemExit, match=r'pip install "tapead\[examples\]"'):
        terrain.load_terrain()
