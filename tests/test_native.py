"""Native kernels for fused groups (``tapead.compiler.native``): C generated
from a recording's groups, built by the system compiler, cached on disk.
They give the bits numpy's loops give (sums in numpy's pairwise order,
sine and cosine of one argument as one sincos), fall back to numpy's loops
without a compiler, refuse under ``strict=True`` what they cannot compile,
and are reused by a second process."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead as ta
import tapead.numpy as tnp
from tapead.compiler import native, compiled
from tapead.errors import NativeCompileError

from test_fusion import _ins, run

needs_cc = pytest.mark.skipif(not native.available(), reason="no C compiler here")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEAD_CACHE_DIR", str(tmp_path / "cache"))


def _b2(x):
    return tnp.sum(tnp.sin(x[:-1]) * x[1:])


def _hvp_f(x):
    return tnp.sum(tnp.sin(x[:-1]) * x[1:]) + tnp.sum(x ** 4)


def _flat(a):
    return [np.asarray(v) for v in ta.tree_flatten(a)[0]]


def _same(a, b):
    for x, y in zip(_flat(a), _flat(b)):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=True)


@needs_cc
@settings(max_examples=30, deadline=None)
@given(st.lists(_ins, min_size=1, max_size=10), st.sampled_from([5, 130, 1025, 3001]))
def test_native_replays_give_numpys_bits(prog, n):
    rng = np.random.default_rng(n)
    x, c = rng.uniform(-1.0, 1.0, n), float(rng.uniform(0.5, 2.0))
    f = lambda x, c: run(prog, x, c)                        # noqa: E731
    fast = ta.jit(ta.value_and_grad(f, argnums=(0, 1)))
    plain = ta.jit(ta.value_and_grad(f, argnums=(0, 1)), fuse=False)
    fast.compile(x, c), plain(x, c)
    for k in range(2):
        x2, c2 = np.cos(x + k), c * 0.9
        _same(fast(x2, c2), plain(x2, c2))
    fwd = ta.jit(f)
    fwd.compile(x, c)
    assert fwd(np.sin(x), c) == f(np.sin(x), c)


@needs_cc
@pytest.mark.parametrize("n", [33, 39, 40, 64, 127, 128, 129, 136, 255, 256, 257, 1000, 1023,
                               1025, 4097, 8193, 100001])       # (up to 32: small vectors in C)
def test_sums_in_a_kernel_are_numpys_pairwise_sums(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * rng.uniform(1.0, 1e8, n)
    f = lambda x: (tnp.sum(tnp.sin(x) * x), tnp.sum(x * x))     # noqa: E731
    jf, plain = ta.jit(f), ta.jit(f, native=False)
    info = jf.compile(x)
    assert info.is_native and any(g.needs_native for g in info.plan.groups)
    plain(x)
    for k in range(3):
        y = np.cos(x * (k + 1)) * 1e3
        got = jf(y)
        assert got[0] == np.sum(np.sin(y) * y) and got[1] == np.sum(y * y)
        assert type(got[0]) is type(plain(y)[0])


@needs_cc
def test_the_gradient_is_one_kernel_with_sincos():
    x = np.linspace(-3.0, 3.0, 2001)
    jf = ta.jit(ta.value_and_grad(_b2))
    info = jf.compile(x)
    assert info.is_native
    (g,) = info.plan.groups
    assert [getattr(u, "__name__", "sum") for u, _, _ in g.ops] == [
        "sin", "multiply", "sum", "cos", "multiply"]
    src = jf.lower(x)
    assert "tapead_kernel_0" in src and "sin(" in src and "cos(" in src
    _same(jf(x + 0.5), ta.jit(ta.value_and_grad(_b2), native=False)(x + 0.5))
    y = x + 0.25
    v, gx = jf(y)
    want = np.zeros_like(y)                 # d/dx_i: cos(x_i) x_(i+1) + sin(x_(i-1))
    want[:-1] += np.cos(y[:-1]) * y[1:]
    want[1:] += np.sin(y[:-1])
    np.testing.assert_allclose(gx, want, rtol=1e-14, atol=1e-14)
    eps = 1e-5                              # and a central difference of the value
    e = np.zeros_like(y)
    e[7] = eps
    assert abs(gx[7] - (jf(y + e)[0] - jf(y - e)[0]) / (2 * eps)) < 1e-6


@needs_cc
def test_hvp_compiles_and_matches_the_eager_hvp():
    rng = np.random.default_rng(3)
    x, v = rng.standard_normal(5000), rng.standard_normal(5000)
    h = lambda x, v: ta.hvp(_hvp_f, (x,), (v,))             # noqa: E731
    jf, plain = ta.jit(h), ta.jit(h, native=False)
    assert jf.compile(x, v).is_native
    plain(x, v)
    _same(jf(x * 0.5, v), plain(x * 0.5, v))
    np.testing.assert_allclose(_flat(jf(x * 0.5, v))[-1], _flat(h(x * 0.5, v))[-1],
                               rtol=1e-13, atol=1e-13)


@needs_cc
def test_kernels_compile_in_the_background_after_the_first_replays():
    x = np.linspace(0.0, 1.0, 500)
    jf = ta.jit(ta.grad(_b2))
    for k in range(compiled.COMPILE_AFTER + 1):
        jf(x + k)
    (rec,) = jf._cache.values()
    rec.compiled.compile()                  # waits for the background thread
    assert rec.compiled.is_native
    info = jf.cache_info()
    assert info.compiled == 1 and info.compile_seconds > 0
    _same(jf(x), ta.jit(ta.grad(_b2), native=False)(x))


@needs_cc
def test_threads_share_a_jitted_function_while_it_compiles():
    x = np.linspace(-1.0, 1.0, 3000)
    jf = ta.jit(ta.value_and_grad(_b2))
    want = ta.jit(ta.value_and_grad(_b2), native=False)
    want(x)
    expected = {k: want(x * k) for k in range(1, 9)}
    errors = []

    def work(k):
        try:
            for _ in range(6):
                _same(jf(x * k), expected[k])
        except BaseException as e:          # pragma: no cover  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    jf.compile(x)
    assert jf.cache_info().compiled == 1


@needs_cc
def test_a_flipped_guard_records_again_with_native_kernels():
    def f(x):
        if tnp.sum(x) > 0:
            return tnp.sum(tnp.sin(x) * x)
        return tnp.sum(tnp.cos(x) * x)
    x = np.linspace(0.1, 1.0, 300)
    jf = ta.jit(ta.grad(f))
    jf.compile(x)
    np.testing.assert_array_equal(jf(-x), ta.grad(f)(-x))
    assert jf.cache_info().rerecords == 1
    jf.compile(-x)
    np.testing.assert_array_equal(jf(-x * 2), ta.jit(ta.grad(f), native=False)(-x * 2))


def test_without_a_compiler_groups_keep_numpys_loops(monkeypatch):
    monkeypatch.setattr(native, "compiler", lambda: None)
    monkeypatch.setattr(native, "_state", {})
    x = np.linspace(0.0, 1.0, 200)
    jf = ta.jit(ta.value_and_grad(_b2))
    info = jf.compile(x)
    assert not info.is_native and jf.cache_info().compiled == 0
    assert "unavailable" in str(info.error)
    _same(jf(x + 1), ta.jit(ta.value_and_grad(_b2), fuse=False)(x + 1))
    with pytest.raises(NativeCompileError, match="no C compiler"):
        ta.jit(ta.value_and_grad(_b2), strict=True).compile(x)


def test_native_off_by_environment(monkeypatch):
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    x = np.linspace(0.0, 1.0, 200)
    jf = ta.jit(ta.grad(_b2))
    assert not jf.compile(x).is_native
    assert not native.available()


@needs_cc
def test_strict_names_the_operations_it_cannot_compile(monkeypatch):
    table = dict(native.probe())
    table[np.cos] = False                   # as on a numpy with its own vectorised cosine
    monkeypatch.setattr(native, "probe", lambda: table)
    x = np.linspace(0.0, 1.0, 200)
    f = lambda x: tnp.sum(tnp.cos(x) * tnp.sin(x) + x)       # noqa: E731
    with pytest.raises(NativeCompileError, match="cos"):
        ta.jit(f, strict=True).compile(x)
    lenient = ta.jit(f)
    assert not lenient.compile(x).is_native or all(
        np.cos not in [u for u, _, _ in g.ops] for g in lenient.compile(x).plan.groups
        if g.is_native)
    assert lenient(x * 2) == f(x * 2)


@needs_cc
def test_the_probe_finds_numpys_bits_for_arithmetic():
    table = native.probe()
    for u in (np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.sqrt):
        assert table[u], u
    assert "numpy bits" in native.describe_probe()


@needs_cc
def test_a_second_process_loads_the_kernels_from_the_disk_cache(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, tapead as ta, tapead.numpy as tnp
        f = ta.jit(ta.value_and_grad(lambda x: tnp.sum(tnp.sin(x[:-1]) * x[1:])))
        info = f.compile(np.linspace(0.0, 1.0, 777))
        print(info.is_native, info.library.cached, f.cache_info().compile_seconds)
    """)
    env = dict(os.environ, TAPEAD_CACHE_DIR=str(tmp_path / "shared"))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = (r.stdout.split() for r in runs)
    assert first[:2] == ["True", "False"] and float(first[2]) > 0
    assert second[:2] == ["True", "True"]
    assert len([p for p in os.listdir(tmp_path / "shared") if p.startswith("plan-")]) == 1


@needs_cc
@pytest.mark.parametrize("n", [native.SPLIT, native.SPLIT + 13, 100001])
def test_two_threads_change_no_bit(n, monkeypatch, tmp_path):
    rng = np.random.default_rng(n)
    x, v = rng.standard_normal(n), rng.standard_normal(n)
    h = lambda x, v: ta.hvp(_hvp_f, (x,), (v,))             # noqa: E731
    f = lambda x: (tnp.sum(tnp.sin(x) * x), tnp.cos(x) * x)  # noqa: E731
    out = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("TAPEAD_THREADS", threads)
        monkeypatch.setenv("TAPEAD_CACHE_DIR", str(tmp_path / threads))
        jh, jf = ta.jit(h), ta.jit(f)
        assert jh.compile(x, v).is_native and jf.compile(x).is_native
        out[threads] = (jh(x * 0.5, v), jf(x * 0.5))
    _same(out["1"], out["2"])
    assert out["2"][1][0] == np.sum(np.sin(x * 0.5) * (x * 0.5))
    _same(out["2"][0], ta.jit(h, native=False)(x * 0.5, v))
