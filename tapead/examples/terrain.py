"""The terrain-MLP example: an MLP learns terrain elevation from grid coordinates.

Run with ``python -m tapead.examples.terrain`` (or the ``tapead-terrain``
console script).  Needs the ``examples`` extra (matplotlib for the data and
the figure, tqdm for the progress bar): ``pip install "tapead[examples]"``.
``--dask`` trains data-parallel on a Dask ``LocalCluster`` of two worker
processes (each batch's gradient in two blocks, one per worker; needs the
``dask`` extra too) and checks the weights against the one-process run.

The model: MLP 2 -> 64 -> 64 -> 1, tanh, float64, batch 64,
60 epochs of plain SGD on 6 000 training points, tested on 6 000 others of
matplotlib's Jacksboro fault elevation model (344 x 403 heights).
"""
from __future__ import annotations

import argparse
import time
from typing import Dict, Tuple

import numpy as np

import tapead as ta
from tapead.nn import init_mlp, mlp, mlp_tape_nbytes, mse
from tapead.optim import sgd_inplace

SIZES = (2, 64, 64, 1)
BATCH = 64
LR = 0.1


def _need(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise SystemExit(
            f"tapead.examples.terrain needs {module.split('.')[0]}, which is not "
            "installed. Install the examples extra:  pip install \"tapead[examples]\"")


def load_terrain(n_train: int = 6000, n_test: int = 6000, seed: int = 0):
    """Sample distinct grid points of the elevation model.

    Returns ``(X_train, y_train, X_test, y_test, z)``: coordinates scaled to
    [-1, 1], elevations in metres as column vectors, and the full grid.
    """
    cbook = _need("matplotlib.cbook")
    z = np.asarray(cbook.get_sample_data("jacksboro_fault_dem.npz")["elevation"],
                   dtype=np.float64)
    H, W = z.shape
    rng = np.random.default_rng(seed)
    idx = rng.choice(H * W, n_train + n_test, replace=False)
    r, c = np.divmod(idx, W)
    X = np.stack([r / (H - 1), c / (W - 1)], axis=1) * 2.0 - 1.0
    y = z[r, c][:, None]
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], z


def rmse(pred, y) -> float:
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def baselines(X_train, y_train, X_test, y_test) -> Tuple[float, float]:
    """Test RMSE of predicting the training mean, and of a least-squares plane."""
    mean = rmse(np.full_like(y_test, y_train.mean()), y_test)
    A = np.c_[X_train, np.ones(len(X_train))]
    coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
    linear = rmse(np.c_[X_test, np.ones(len(X_test))] @ coef, y_test)
    return mean, linear


def loss_fn(params: Dict[str, np.ndarray], x, t):
    return mse(mlp(params, x), t)


def data_parallel(blocks: int = 2):
    """``value_and_grad(params, x, t)`` of :func:`loss_fn` with each batch split
    into ``blocks`` blocks computed as Dask tasks (``tapead.dask``), on the
    default Dask client."""
    import dask.array as da
    import tapead.dask as tdask     # the dask extra is optional: imported only when asked for
    vg = tdask.value_and_grad(loss_fn, reduction="mean")

    def value_and_grad(params, x, t):
        c = -(-len(x) // blocks)
        return vg(params, da.from_array(x, chunks=(c, -1)), da.from_array(t, chunks=(c, -1)))
    return value_and_grad


def train(X, y, epochs: int = 60, lr: float = LR, seed: int = 0, progress: bool = True,
          inplace_update: bool = True, value_and_grad=None):
    """SGD with tapead gradients; returns (params, scale, loss curve per epoch).

    ``inplace_update=False`` updates with numpy's ``params[k] -= lr * g[k]``
    (the same numbers; the benchmarks use it to compare the gradients alone
    with the numpy trainer, which updates that way).  ``value_and_grad``
    replaces ``ta.value_and_grad(loss_fn)`` (e.g. :func:`data_parallel`)."""
    rng = np.random.default_rng(seed)
    params = init_mlp(SIZES, rng)
    mu, sd = float(y.mean()), float(y.std())
    t = (y - mu) / sd
    if value_and_grad is None:
        value_and_grad = ta.value_and_grad(loss_fn)
    n = len(X)
    curve = []
    bar = None
    if progress:
        tqdm = _need("tqdm").tqdm
        bar = tqdm(total=epochs, desc="training", unit="epoch")   # on stderr
    for _ in range(epochs):
        perm = rng.permutation(n)
        total = 0.0
        for s in range(0, n, BATCH):
            b = perm[s:s + BATCH]
            loss, g = value_and_grad(params, X[b], t[b])
            if inplace_update:
                sgd_inplace(params, g, lr)  # params[k] -= lr * g[k], one C pass each
            else:
                for k in params:
                    params[k] -= lr * g[k]
            total += float(loss) * len(b)
        curve.append(total / n)
        if bar is not None:
            bar.set_postfix(loss=f"{curve[-1]:.4f}")
            bar.update()
    if bar is not None:
        bar.close()
    return params, (mu, sd), np.array(curve)


def train_numpy_by_hand(X, y, epochs: int = 60, lr: float = LR, seed: int = 0):
    """The same training with backpropagation written out in numpy (reference)."""
    rng = np.random.default_rng(seed)
    p = init_mlp(SIZES, rng)
    mu, sd = float(y.mean()), float(y.std())
    t = (y - mu) / sd
    n = len(X)
    curve = []
    for _ in range(epochs):
        perm = rng.permutation(n)
        total = 0.0
        for s in range(0, n, BATCH):
            b = perm[s:s + BATCH]
            x, tt = X[b], t[b]
            h1 = np.tanh(x @ p["W0"] + p["b0"])
            h2 = np.tanh(h1 @ p["W1"] + p["b1"])
            d = h2 @ p["W2"] + p["b2"] - tt
            total += float(np.mean(d * d)) * len(b)
            dp = (2.0 / d.size) * d
            dh2 = (dp @ p["W2"].T) * (1.0 - h2 * h2)
            dh1 = (dh2 @ p["W1"].T) * (1.0 - h1 * h1)
            grads = {"W2": h2.T @ dp, "b2": dp.sum(0), "W1": h1.T @ dh2,
                     "b1": dh2.sum(0), "W0": x.T @ dh1, "b0": dh1.sum(0)}
            for k in p:
                p[k] -= lr * grads[k]
        curve.append(total / n)
    return p, (mu, sd), np.array(curve)


def predict(params, scale, X):
    mu, sd = scale
    return mlp(params, X) * sd + mu


def tape_bytes(params, X, y) -> Tuple[int, int]:
    """(predicted from shapes, measured on a recorded tape) for one batch."""
    predicted = mlp_tape_nbytes(SIZES, BATCH)
    rec = ta.record(loss_fn, params, X[:BATCH], y[:BATCH])
    return predicted, rec.nbytes


def plot(z, params, scale, curve, path: str, test_rmse: float) -> None:
    """Truth, prediction and error maps (labelled, with colour bars) and the
    loss curve, with the test RMSE in the title."""
    plt = _need("matplotlib.pyplot")
    H, W = z.shape
    rr, cc = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    grid = np.stack([rr.ravel() / (H - 1), cc.ravel() / (W - 1)], axis=1) * 2.0 - 1.0
    zhat = predict(params, scale, grid).reshape(H, W)
    err = zhat - z
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6), constrained_layout=True)
    vmin, vmax = z.min(), z.max()
    lim = float(np.max(np.abs(err)))
    panels = [(z, "true terrain", "terrain", vmin, vmax, "elevation (m)"),
              (zhat, "MLP 2-64-64-1 prediction", "terrain", vmin, vmax, "elevation (m)"),
              (err, "error (prediction - truth)", "RdBu_r", -lim, lim, "error (m)")]
    for ax, (img, title, cmap, lo, hi, label) in zip(axes, panels):
        im = ax.imshow(img, cmap=cmap, vmin=lo, vmax=hi, origin="upper")
        ax.set_title(title)
        ax.set_xlabel("grid column (east)")
        ax.set_ylabel("grid row (south)")
        fig.colorbar(im, ax=ax, shrink=0.85, label=label)
    axes[3].plot(np.arange(1, len(curve) + 1), curve)
    axes[3].set_yscale("log")
    axes[3].set_xlabel("epoch")
    axes[3].set_ylabel("training loss (standardised MSE)")
    axes[3].set_title("loss curve")
    fig.suptitle(f"Terrain elevation learned by an MLP with tapead gradients: "
                 f"test RMSE {test_rmse:.1f} m on held-out grid points")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--out", default="terrain.png", help="where to write the figure")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--dask", action="store_true",
                    help="data-parallel gradients on a Dask LocalCluster of 2 processes")
    args = ap.parse_args(argv)
    _need("matplotlib")
    import matplotlib
    matplotlib.use("Agg")

    X_tr, y_tr, X_te, y_te, z = load_terrain()
    mean_rmse, linear_rmse = baselines(X_tr, y_tr, X_te, y_te)
    if args.dask:
        return _main_dask(args, X_tr, y_tr)
    t0 = time.perf_counter()
    params, scale, curve = train(X_tr, y_tr, epochs=args.epochs,
                                 progress=not args.no_progress)
    seconds = time.perf_counter() - t0
    test = rmse(predict(params, scale, X_te), y_te)
    train_rmse = rmse(predict(params, scale, X_tr), y_tr)

    print()
    print(f"elevation model: {z.shape[0]} x {z.shape[1]} heights, "
          f"standard deviation {z.std():.1f} m")
    print(f"{'model':<30}{'test RMSE':>12}{'seconds':>10}")
    print(f"{'predict the mean (baseline)':<30}{mean_rmse:>10.1f} m")
    print(f"{'linear in (x, y)':<30}{linear_rmse:>10.1f} m")
    print(f"{'MLP 2-64-64-1, tapead':<30}{test:>10.1f} m{seconds:>10.2f}")
    print(f"(train RMSE {train_rmse:.1f} m, {args.epochs} epochs of SGD, batch {BATCH})")
    predicted, measured = tape_bytes(params, X_tr, (y_tr - scale[0]) / scale[1])
    print(f"tape memory for one batch: predicted {predicted:,} bytes, "
          f"measured {measured:,} bytes")
    plot(z, params, scale, curve, args.out, test)
    print(f"figure written to {args.out}")
    return 0


def _main_dask(args, X_tr, y_tr) -> int:
    """Train with each batch's gradient on two worker processes, then once in
    this process, and compare the weights."""
    try:
        # the dask extra is optional: imported only for --dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise SystemExit("--dask needs the dask extra:  pip install \"tapead[dask]\"")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster) as client:
        print(f"Dask dashboard: {client.dashboard_link}")
        t0 = time.perf_counter()
        params, _, curve = train(X_tr, y_tr, epochs=args.epochs,
                                 progress=not args.no_progress,
                                 value_and_grad=data_parallel(blocks=2))
        seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref, _, _ = train(X_tr, y_tr, epochs=args.epochs, progress=False)
    ref_seconds = time.perf_counter() - t0
    diff = max(float(np.max(np.abs(params[k] - ref[k])) / np.max(np.abs(ref[k])))
               for k in ref)
    print(f"data-parallel on 2 worker processes: {args.epochs} epochs in {seconds:.1f} s "
          f"(one process: {ref_seconds:.1f} s), final training loss {curve[-1]:.5f}")
    print(f"largest relative difference of the weights from the one-process run: "
          f"{diff:.1e}")
    return 0 if diff <= 1e-10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
