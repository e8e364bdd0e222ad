"""The memory pool numpy allocates through while a transform runs.

Freed large blocks are kept and handed out again for the same rounded size;
arrays made inside are ordinary numpy arrays that outlive the transform;
``np.zeros`` of a reused block is zero; the handler is restored on exit,
exceptions included; the pool never keeps more than its limit;
``TAPEAD_POOL_MB=0`` turns it off and a bad value is refused at import.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core

BIG = 200_000          # elements: 1.6 MB, above the pool's 64 KiB floor


def handler_name(a=None):
    from numpy._core.multiarray import get_handler_name
    return get_handler_name() if a is None else get_handler_name(a)


pytestmark = pytest.mark.skipif(not _core.pool_info()["enabled"],
                                reason="TAPEAD_POOL_MB=0 turns the pool off")


def test_numpy_allocates_through_the_pool_inside_and_not_outside():
    before = handler_name()
    with _core.pooled():
        assert handler_name() == "tapead_pool"
        a = np.arange(float(BIG))
    assert handler_name() == before
    assert handler_name(a) == "tapead_pool"
    np.testing.assert_array_equal(a, np.arange(float(BIG)))   # outlives the block


def test_the_handler_is_restored_when_the_block_raises():
    before = handler_name()
    with pytest.raises(ZeroDivisionError):
        with _core.pooled():
            1 / 0
    assert handler_name() == before


def test_nested_blocks_restore_in_order():
    before = handler_name()
    with _core.pooled():
        with _core.pooled():
            assert handler_name() == "tapead_pool"
        assert handler_name() == "tapead_pool"
    assert handler_name() == before


def test_a_freed_block_is_reused_and_zeros_are_zero():
    _core.pool_clear()
    with _core.pooled():
        a = np.full(BIG, 7.0)
        del a                                   # kept by the pool
        kept = _core.pool_info()
        assert kept["blocks"] >= 1 and kept["bytes"] >= BIG * 8
        hits = kept["hits"]
        b = np.zeros(BIG)                       # the same size: the kept (dirty) block
        assert _core.pool_info()["hits"] == hits + 1
        assert not b.any()
        c = np.empty(BIG)
        c[:] = 3.0
        assert (c == 3.0).all()


def test_small_arrays_and_resizes_go_through_malloc_safely():
    with _core.pooled():
        small = [np.arange(float(k)) for k in range(0, 200, 7)]
        big = np.arange(float(BIG))
        big.resize(2 * BIG, refcheck=False)     # realloc of a pooled block
        big[BIG:] = 1.0
        big.resize(BIG // 3, refcheck=False)
    for k, s in zip(range(0, 200, 7), small):
        np.testing.assert_array_equal(s, np.arange(float(k)))
    np.testing.assert_array_equal(big, np.arange(float(BIG // 3)))


def test_the_pool_keeps_no_more_than_its_limit():
    # a 4 MB pool, given 40 MB of blocks of distinct sizes freed at once
    code = ("import numpy as np, tapead._core as c\n"
            "with c.pooled():\n"
            "    arrays = [np.ones(100_000 + 1000 * k) for k in range(50)]\n"
            "del arrays\n"
            "i = c.pool_info()\n"
            "print(i['limit'], i['bytes'], i['blocks'], c.pool_clear(), c.pool_info()['bytes'])")
    r = _python(code, TAPEAD_POOL_MB="4")
    assert r.returncode == 0, r.stderr
    limit, kept, blocks, released, after = map(int, r.stdout.split())
    assert limit == 4 << 20
    assert 0 < kept <= limit and blocks >= 1
    assert released == kept and after == 0


def test_threads_allocating_at_once_get_their_own_blocks():
    errors = []

    def work(k):
        try:
            with _core.pooled():
                for i in range(200):
                    a = np.full(BIG // 4 * (1 + i % 3), float(k))
                    if not (a == k).all():
                        errors.append((k, i))
                    del a
        except Exception as e:                  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_gradients_through_the_pool_equal_finite_differences_call_after_call():
    def f(x):
        return tnp.sum(tnp.sin(x[:-1]) * x[1:]) + tnp.sum(x ** 2)
    x = np.linspace(-1.0, 2.0, BIG)
    g = ta.grad(f)
    exact = np.zeros(BIG)
    exact[:-1] += np.cos(x[:-1]) * x[1:]
    exact[1:] += np.sin(x[:-1])
    exact += 2 * x
    first = g(x)
    for _ in range(3):                      # later calls reuse the blocks the first freed
        np.testing.assert_allclose(g(x), exact, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(first, g(x))
    assert handler_name(first) == "tapead_pool"
    assert handler_name() != "tapead_pool"


def _python(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)


def test_pool_off_and_a_bad_limit_from_the_environment():
    off = _python("import tapead._core as c, numpy as np\n"
                  "from numpy._core.multiarray import get_handler_name as h\n"
                  "with c.pooled(): print(c.pool_info()['enabled'], h())",
                  TAPEAD_POOL_MB="0")
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "default_allocator"]
    bad = _python("import tapead", TAPEAD_POOL_MB="lots")
    assert bad.returncode != 0
    assert "TAPEAD_POOL_MB='lots'" in bad.stderr and "megabytes" in bad.stderr


def test_sparse_derivatives_and_recordings_allocate_through_the_pool():
    def f(x):
        return tnp.sin(x) * x + 0.5 * x ** 2
    def s(x):
        return tnp.sum(tnp.sin(x) * x)
    x = np.linspace(-1.0, 2.0, BIG)
    J = ta.sparse_jacobian(f)(x)
    np.testing.assert_allclose(J.diagonal(), np.cos(x) * x + np.sin(x) + x, rtol=1e-14)
    H = ta.sparse_hessian(s)(x)
    np.testing.assert_allclose(H.diagonal(), 2 * np.cos(x) - x * np.sin(x), rtol=1e-13,
                               atol=1e-15)
    rec = ta.record(s, x)
    v, g = rec.value_and_grad(x[::-1].copy())
    np.testing.assert_allclose(g, np.cos(x[::-1]) * x[::-1] + np.sin(x[::-1]), rtol=1e-14)
    assert handler_name(g) == "tapead_pool"
    assert handler_name() != "tapead_pool"
