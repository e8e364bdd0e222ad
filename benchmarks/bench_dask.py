"""tapead.dask on a LocalCluster of worker processes (1 thread each).

Run the timings (pytest-benchmark; skipped without the dask extra)::

    python -m pytest benchmarks/bench_dask.py --benchmark-enable

or print the tables (overhead, scaling, throughput, memory, break-even)::

    PYTHONPATH=. python benchmarks/bench_dask.py [overhead scaling throughput memory sparse]

* overhead: the gradient of a 1e6 x 16 least squares, the data persisted on
  2 workers in 8 blocks, against ``ta.value_and_grad`` in one process on
  the same numpy data;
* scaling: the gradient of a 10-32-10 tanh MLP's mean squared error over
  400 000 samples in 8 blocks (each block 10+ ms of work), on 1 worker and
  on 2 workers, the calls interleaved (1, 2, 1, 2, ...);
* throughput: per-example gradients of the 10-32-10 MLP, examples generated
  on the workers (``da.random``) and reduced to their squared norms, against
  ``ta.vmap`` of the same gradient in one process on numpy chunks;
* memory: a generated input several times the workers' memory limit through
  ``tapead.dask.vmap``, the workers' peak resident memory sampled;
* sparse: ``tapead.dask.sparse_jacobian`` against ``ta.sparse_jacobian`` as
  the number of colours and the cost of ``f`` grow (the break-even).

The machine has 2 cores shared with other jobs: ratios are of medians of
interleaved runs, and the figures in docs/dask.md say what was measured.
"""
from __future__ import annotations

import statistics
import sys
import threading
import time

import numpy as np
import pytest

import tapead as ta
from tapead.nn import init_mlp, mlp, mse

MLP = (10, 32, 10)


def least_squares(w, X, y):
    return ((X @ w - y) ** 2).mean()


def mlp_loss(params, x, t):
    return mse(mlp(params, x), t)


def per_example_loss(params, x, t):
    return ((mlp(params, x[None]) - t[None]) ** 2).sum()


def _cluster(n_workers, memory_limit="2GB"):
    from distributed import Client, LocalCluster      # the dask extra is optional
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=memory_limit)
    return cluster, Client(cluster, set_as_default=False)


def _interleaved(cases, repeats):
    """Median seconds of each ``fn`` in ``cases``, the calls taken in turn."""
    times = [[] for _ in cases]
    for fn in cases:
        fn()                                            # warm-up (records on the workers)
    for _ in range(repeats):
        for t, fn in zip(times, cases):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def overhead(repeats=7):
    import dask.array as da
    import tapead.dask as tdask
    rng = np.random.default_rng(0)
    Xn, yn, w = rng.normal(size=(1_000_000, 16)), rng.normal(size=1_000_000), rng.normal(size=16)
    cluster, client = _cluster(2)
    try:
        X = client.persist(da.from_array(Xn, chunks=(125_000, 16)))
        y = client.persist(da.from_array(yn, chunks=125_000))
        vg = tdask.value_and_grad(least_squares)
        one = ta.jit(ta.value_and_grad(least_squares))
        t_dask, t_one = _interleaved([lambda: client.compute(vg.lazy(w, X, y)).result(),
                                      lambda: one(w, Xn, yn)], repeats)
    finally:
        client.close()
        cluster.close()
    print("\n1e6 x 16 least squares, gradient, 8 blocks persisted on 2 workers")
    print(f"{'tapead.dask (2 workers)':<34}{t_dask * 1e3:9.1f} ms")
    print(f"{'ta.jit(ta.value_and_grad), 1 proc':<34}{t_one * 1e3:9.1f} ms")
    print(f"{'ratio dask / one process':<34}{t_dask / t_one:9.2f}")
    return t_dask, t_one


def scaling(repeats=7):
    import dask.array as da
    import tapead.dask as tdask
    rng = np.random.default_rng(0)
    params = init_mlp(MLP, rng)
    N = 400_000
    Xn, Tn = rng.normal(size=(N, 10)), rng.normal(size=(N, 10))
    vg = tdask.value_and_grad(mlp_loss)
    one = ta.jit(ta.value_and_grad(mlp_loss))
    xb, tb = Xn[:N // 8].copy(), Tn[:N // 8].copy()
    one(params, xb, tb)                                 # recorded
    t_block = min(_timed(lambda: one(params, xb, tb)) for _ in range(5))
    c1, k1 = _cluster(1)
    c2, k2 = _cluster(2)
    try:
        data = []
        for k in (k1, k2):
            data.append((k.persist(da.from_array(Xn, chunks=(N // 8, 10))),
                         k.persist(da.from_array(Tn, chunks=(N // 8, 10)))))
        (X1, T1), (X2, T2) = data
        t1, t2, t_one = _interleaved(
            [lambda: k1.compute(vg.lazy(params, X1, T1)).result(),
             lambda: k2.compute(vg.lazy(params, X2, T2)).result(),
             lambda: one(params, Xn, Tn)], repeats)
    finally:
        for k, c in ((k1, c1), (k2, c2)):
            k.close()
            c.close()
    print(f"\n10-32-10 MLP loss gradient, {N} samples in 8 blocks "
          f"({t_block * 1e3:.0f} ms of work per block in one process)")
    print(f"{'1 worker':<34}{t1 * 1e3:9.1f} ms")
    print(f"{'2 workers':<34}{t2 * 1e3:9.1f} ms")
    print(f"{'one process, no dask':<34}{t_one * 1e3:9.1f} ms")
    print(f"{'speed-up 1 -> 2 workers':<34}{t1 / t2:9.2f}x")
    return t1, t2


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def throughput(n=400_000, chunk=20_000, workers=2):
    import dask.array as da
    import tapead.dask as tdask
    params = init_mlp(MLP, np.random.default_rng(0))
    g = ta.grad(per_example_loss)
    batched = ta.jit(ta.vmap(g, in_axes=(None, 0, 0)))

    def norms_one_process():
        rng = np.random.default_rng(1)
        total = 0.0
        for _ in range(n // chunk):
            x, t = rng.normal(size=(chunk, 10)), rng.normal(size=(chunk, 10))
            G = batched(params, x, t)
            total += sum(float((v ** 2).sum()) for v in G.values())
        return total
    cluster, client = _cluster(workers)
    vm = tdask.vmap(g, in_axes=(None, 0, 0))          # made once: the workers keep its recording
    try:
        def norms_dask():
            rs = da.random.default_rng(1)
            X = rs.normal(size=(n, 10), chunks=(chunk, 10))
            T = rs.normal(size=(n, 10), chunks=(chunk, 10))
            G = vm(params, X, T)
            return client.compute(sum((v ** 2).sum() for v in G.values())).result()
        t_dask, t_one = _interleaved([norms_dask, norms_one_process], 3)
    finally:
        client.close()
        cluster.close()
    print(f"\nper-example gradients of the 10-32-10 MLP, {n} examples in chunks of {chunk}")
    print(f"{f'tapead.dask.vmap, {workers} worker(s)':<34}{n / t_dask:12,.0f} examples/s")
    print(f"{'ta.vmap, one process':<34}{n / t_one:12,.0f} examples/s")
    print(f"{'ratio':<34}{t_one / t_dask:12.2f}x")
    return n / t_dask, n / t_one


def memory(rows=6_000_000, cols=64, chunk_rows=20_000, limit="600MB"):
    import dask.array as da
    import tapead.dask as tdask
    cluster, client = _cluster(2, memory_limit=limit)
    peaks = {}
    stop = threading.Event()

    def rss():
        import psutil                                   # installed with distributed
        return psutil.Process().memory_info().rss

    def sample():
        while not stop.is_set():
            try:
                for k, v in client.run(rss).items():
                    peaks[k] = max(peaks.get(k, 0), v)
            except Exception:                           # noqa: BLE001 -- a worker restarting
                pass
            time.sleep(0.2)
    try:
        base = max(client.run(rss).values())
        X = da.random.default_rng(0).normal(size=(rows, cols), chunks=(chunk_rows, cols))
        G = tdask.vmap(ta.grad(lambda x: (np.sin(x) ** 2).sum()))(X)
        th = threading.Thread(target=sample)
        th.start()
        t0 = time.perf_counter()
        total = client.compute((G ** 2).sum()).result()
        seconds = time.perf_counter() - t0
        stop.set()
        th.join()
    finally:
        client.close()
        cluster.close()
    gb = rows * cols * 8 / 1e9
    print(f"\nout of core: {rows} x {cols} generated input ({gb:.2f} GB; the output, "
          f"as large, is reduced), blocks of {chunk_rows * cols * 8 / 1e6:.0f} MB, "
          f"worker memory limit {limit}")
    print(f"{'time':<34}{seconds:9.1f} s  ({gb / seconds:.2f} GB/s)")
    print(f"{'worker RSS before':<34}{base / 1e6:9.0f} MB")
    print(f"{'peak worker RSS during':<34}{max(peaks.values()) / 1e6:9.0f} MB")
    print(f"result {total:.6e} (mean per element {total / (rows * cols):.5f}, "
          f"expected 0.5(1 - e^-8) = {0.5 * (1 - np.exp(-8)):.5f})")
    return gb, max(peaks.values())


def banded(k, work):
    """R^n -> R^n with bandwidth 2k+1 (about 2k+1 colours), ``work`` extra
    smooth passes per element (the cost of f)."""
    def f(x):
        y = x * 0.0
        for j in range(-k, k + 1):
            s = np.roll(x, j)
            for _ in range(work):
                s = np.sin(s) + s
            y = y + s * (j + k + 1)
        return y
    return f


def sparse(n=20_000, cases=((2, 1), (8, 1), (8, 8), (16, 8)), per_task=4):
    import tapead.dask as tdask
    cluster, client = _cluster(2, memory_limit="4GB")
    rows = []
    try:
        with client.as_current():
            x = np.linspace(0.1, 1.0, n)
            for k, work in cases:
                f = banded(k, work)
                one = ta.sparse_jacobian(f)
                dist = tdask.sparse_jacobian(f, colors_per_task=per_task)
                ncol = one.recovery(x).ncolors
                J0, J1 = one(x), dist(x)
                assert abs(J0 - J1).max() <= 1e-12 * abs(J0).max()
                t_one, t_dist = _interleaved([lambda: one(x), lambda: dist(x)], 3)
                rows.append((k, work, ncol, t_one, t_dist))
    finally:
        client.close()
        cluster.close()
    print(f"\nsparse Jacobian of a banded R^{n} -> R^{n} (bandwidth 2k+1, cost of f ~ work), "
          f"{per_task} colours per task")
    print(f"{'k':>4}{'work':>6}{'colours':>9}{'one proc':>12}{'dask, 2 w.':>13}{'ratio':>8}")
    for k, work, ncol, a, b in rows:
        print(f"{k:>4}{work:>6}{ncol:>9}{a * 1e3:>10.0f}ms{b * 1e3:>11.0f}ms{a / b:>8.2f}")
    return rows


# -- pytest-benchmark (small sizes) ----------------------------------------------

@pytest.fixture(scope="module")
def client():
    pytest.importorskip("distributed")
    cluster, client = _cluster(2)
    yield client
    client.close()
    cluster.close()


def test_value_and_grad_dask(benchmark, client):
    import dask.array as da
    import tapead.dask as tdask
    rng = np.random.default_rng(0)
    Xn, yn, w = rng.normal(size=(100_000, 16)), rng.normal(size=100_000), rng.normal(size=16)
    X = client.persist(da.from_array(Xn, chunks=(12_500, 16)))
    y = client.persist(da.from_array(yn, chunks=12_500))
    vg = tdask.value_and_grad(least_squares)
    value, g, n = benchmark(lambda: client.compute(vg.lazy(w, X, y)).result())
    assert n == 100_000


def test_value_and_grad_one_process(benchmark):
    rng = np.random.default_rng(0)
    Xn, yn, w = rng.normal(size=(100_000, 16)), rng.normal(size=100_000), rng.normal(size=16)
    benchmark(ta.jit(ta.value_and_grad(least_squares)), w, Xn, yn)


if __name__ == "__main__":
    which = sys.argv[1:] or ["overhead", "scaling", "throughput", "memory", "sparse"]
    for name in which:
        globals()[name]()
