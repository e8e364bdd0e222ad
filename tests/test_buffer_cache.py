"""The cache of large array buffers (``_core_buffers.h``): numpy's data
allocator in the importing thread keeps freed buffers of 128 KiB or more and
hands them out again.  These tests pin that reused buffers behave as fresh
ones: ``np.zeros`` is zero, contents of one array never show in another that
is alive, resizing works, and nothing changes the values of a gradient."""
import os
import threading

import numpy as np
import pytest

import tapead as ta
from tapead import _core

BIG = 300_000          # 2.4 MB of float64: above the cache's 128 KiB threshold

cached = pytest.mark.skipif(np._core.multiarray.get_handler_name() != "tapead_buffer_cache",
                            reason="TAPEAD_BUFFER_CACHE=0: numpy's own allocator")


@cached
def test_freed_buffer_is_reused():
    a = np.empty(BIG)
    del a
    before = _core.buffer_cache_info()["hits"]
    b = np.empty(BIG)
    assert _core.buffer_cache_info()["hits"] == before + 1
    del b


@cached
def test_zeros_from_a_reused_buffer_are_zero():
    a = np.full(BIG, np.nan)
    del a
    z = np.zeros(BIG)
    assert not np.any(z) and not np.any(np.signbit(z))


@cached
def test_live_arrays_never_share_a_buffer():
    arrays = [np.full(BIG, float(k)) for k in range(40)]     # more than the cache holds
    del arrays[::2]
    more = [np.full(BIG, -1.0) for _ in range(24)]
    for k, a in zip(range(1, 40, 2), arrays):
        assert np.all(a == k)
    assert all(np.all(m == -1.0) for m in more)


@cached
def test_smaller_request_and_resize():
    a = np.ones(BIG)
    del a
    b = np.ones(BIG - 100)           # within 1/16 of a cached block: reused
    assert b.shape == (BIG - 100,) and np.all(b == 1.0)
    b.resize(2 * BIG, refcheck=False)     # realloc of a reused block
    assert np.all(b[:BIG - 100] == 1.0) and np.all(b[BIG - 100:] == 0.0)
    del b


@cached
def test_small_arrays_are_not_cached():
    before = dict(_core.buffer_cache_info())
    a = np.empty(10_000)          # 80 KB: under the threshold
    del a
    after = _core.buffer_cache_info()
    assert after["hits"] == before["hits"] and after["misses"] == before["misses"]


@cached
def test_release_frees_every_block():
    a = np.empty(BIG)
    del a
    assert _core.buffer_cache_info()["blocks"] >= 1
    released = _core.release_cached_buffers()
    assert released >= BIG * 8
    assert _core.buffer_cache_info()["blocks"] == 0 and _core.buffer_cache_info()["bytes"] == 0


def test_other_threads_allocate_with_numpys_handler():
    names = []
    t = threading.Thread(target=lambda: names.append(np._core.multiarray.get_handler_name()))
    t.start()
    t.join()
    assert names and names[0] != "tapead_buffer_cache"


def test_restore_and_use_again():
    old = _core.use_buffer_cache()
    try:
        assert np._core.multiarray.get_handler_name() == "tapead_buffer_cache"
    finally:
        _core.restore_allocator(old)
    assert np._core.multiarray.get_handler_name() == "tapead_buffer_cache" or \
        os.environ.get("TAPEAD_BUFFER_CACHE") == "0"


def test_gradient_values_do_not_depend_on_the_cache():
    x = np.random.default_rng(3).uniform(-1, 1, BIG)
    f = lambda v: (np.sin(v[:-1]) * v[1:]).sum()                       # noqa: E731
    g1 = ta.grad(f)(x)
    out = []
    t = threading.Thread(target=lambda: out.append(ta.grad(f)(x)))    # numpy's allocator
    t.start()
    t.join()
    ref = np.zeros_like(x)
    ref[:-1] += np.cos(x[:-1]) * x[1:]
    ref[1:] += np.sin(x[:-1])
    np.testing.assert_array_equal(g1, out[0])
    np.testing.assert_allclose(g1, ref, rtol=1e-15, atol=0)
