"""ta.jit: replayed values and gradients equal the un-jitted ones bit for bit;
re-recording on a flipped branch or a new signature; the cache limit; refusal
of compositions a replay cannot serve; several threads."""
import sys
import threading

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead.errors import TapeReplayError


def f_mix(x, y):
    return {"s": np.sin(x) * y + np.exp(-x * x), "t": (np.tanh(x) ** 2).sum() * y}


def loss(w, x, t):
    h = np.tanh(x @ w[0]) @ w[1]
    return ((h - t) ** 2).mean() + 1e-3 * sum((p * p).sum() for p in w)


def _same(a, b):
    la, ta_ = ta.tree_flatten(a)
    lb, tb = ta.tree_flatten(b)
    assert ta_ == tb
    for u, v in zip(la, lb):
        if isinstance(u, (str, int)):
            assert u == v and type(u) is type(v)
            continue
        assert type(u) is type(v) or (np.isscalar(u) and np.isscalar(v)), (type(u), type(v))
        np.testing.assert_array_equal(u, v)
        assert np.shape(u) == np.shape(v) and np.result_type(u) == np.result_type(v)


def test_plain_pytree_outputs_bit_for_bit():
    rng = np.random.default_rng(0)
    jf = ta.jit(f_mix)
    for k in range(4):
        x, y = rng.normal(size=5), float(rng.normal())
        _same(jf(x, y), f_mix(x, y))
    info = jf.cache_info()
    assert (info.misses, info.hits, info.size) == (1, 3, 1)


def test_scalar_program_replayed_in_c_bit_for_bit():
    def f(a, b):
        for _ in range(30):
            a, b = np.sin(a) * b + 0.5, np.cos(b) - a * a
        return a + b
    jf = ta.jit(f)
    rng = np.random.default_rng(1)
    for _ in range(4):
        a, b = rng.normal(size=2)
        a, b = float(a), float(b)
        assert jf(a, b) == ta.value_and_grad(f)(a, b)[0]
    assert jf.cache_info().hits == 3


def test_grad_and_value_and_grad_bit_for_bit():
    rng = np.random.default_rng(2)
    x, t = rng.normal(size=(8, 3)), rng.normal(size=8)
    vg, jvg = ta.value_and_grad(loss), ta.jit(ta.value_and_grad(loss))
    g, jg = ta.grad(loss, argnums=(0, 1)), ta.jit(ta.grad(loss, argnums=(0, 1)))
    for k in range(3):
        w = [rng.normal(size=(3, 4)), rng.normal(size=4)]
        _same(jvg(w, x, t), vg(w, x, t))
        _same(jg(w, x, t), g(w, x, t))
    assert jvg.cache_info().hits == 2 and jg.cache_info().hits == 2


def test_grad_has_aux_and_scalars():
    def f(x, y):
        return x * y + np.sin(x), {"twice": 2.0 * x, "name": "f"}
    jg = ta.jit(ta.grad(f, has_aux=True))
    jvg = ta.jit(ta.value_and_grad(f, argnums=1, has_aux=True))
    for x in (0.3, 1.7, -2.0):
        _same(jg(x, 2.0), ta.grad(f, has_aux=True)(x, 2.0))
        _same(jvg(x, 2.0), ta.value_and_grad(f, argnums=1, has_aux=True)(x, 2.0))
    assert jg(2, 2.0)[0] == ta.grad(f, has_aux=True)(2, 2.0)[0]   # an int is differentiated as a float


def test_jit_grad_matches_finite_differences():
    f = lambda x: np.sum(np.sin(x) * x ** 3)
    jg = ta.jit(ta.grad(f))
    jg(np.ones(3))
    x = np.array([0.3, -1.2, 2.0])
    fd = [(f(x + e) - f(x - e)) / 2e-6 for e in np.eye(3) * 1e-6]
    np.testing.assert_allclose(jg(x), fd, rtol=1e-7)


def test_rerecords_when_a_branch_flips():
    seen = []

    def f(x):
        seen.append(1)
        return x * x if x > 0 else -3.0 * x
    jf, jg = ta.jit(f), ta.jit(ta.grad(f))
    assert [jf(v) for v in (2.0, 3.0, -1.0, -2.0, 4.0)] == [4.0, 9.0, 3.0, 6.0, 16.0]
    assert [jg(v) for v in (2.0, 3.0, -1.0, -2.0)] == [4.0, 6.0, -3.0, -3.0]
    info = jf.cache_info()
    assert info.rerecords == 2 and info.hits == 2
    assert len(seen) == 3 + 2       # Python ran only when recording


def test_new_signature_records_again():
    jf = ta.jit(lambda x: sum((v * v).sum() for v in ta.tree_flatten(x)[0]))
    jf(np.ones(3))
    jf(np.ones(4))                              # new shape
    jf(np.ones(3, dtype=np.float32))            # new dtype
    jf([np.ones(3), np.ones(3)])                # new structure
    jf(np.ones(3) * 2)                          # replay of the first
    assert jf.cache_info().misses == 4 and jf.cache_info().hits == 1
    assert jf(np.ones(3, dtype=np.float32)).dtype == np.float32


def test_python_scalar_type_is_part_of_the_signature():
    jf = ta.jit(lambda x: x * 2.0)
    assert jf(1.5) == 3.0
    assert jf(np.float32(1.5)) == 3.0
    assert jf.cache_info().misses == 2


def test_static_values_ints_and_static_argnums():
    def f(x, n, mode):
        y = x
        for _ in range(n):
            y = y * x
        return y if mode == "power" else -y
    jf = ta.jit(f, static_argnums=2)
    assert jf(2.0, 2, "power") == 8.0
    assert jf(3.0, 2, "power") == 27.0          # replay
    assert jf(2.0, 3, "power") == 16.0          # an int is static: new recording
    assert jf(2.0, 3, "neg") == -16.0
    assert jf.cache_info().misses == 3
    with pytest.raises(TypeError, match="hashable"):
        jf(2.0, 2, ["power"])
    with pytest.raises(ValueError, match="out of range"):
        ta.jit(f, static_argnums=5)(2.0, 2, "power")


def test_integer_arrays_are_static_by_value():
    jf = ta.jit(lambda x, idx: x[idx].sum())
    x = np.arange(5.0)
    assert jf(x, np.array([0, 1])) == 1.0
    assert jf(x, np.array([3, 4])) == 7.0
    assert jf.cache_info().misses == 2


def test_cache_limit_drops_least_recently_used():
    jf = ta.jit(lambda x: x.sum(), cache_size=2)
    jf(np.ones(1)); jf(np.ones(2)); jf(np.ones(1)); jf(np.ones(3))   # drops shape (2,)
    assert jf.cache_info().size == 2
    jf(np.ones(1))
    assert jf.cache_info().hits == 2
    jf(np.ones(2))
    assert jf.cache_info().misses == 4
    jf.clear_cache()
    assert jf.cache_info().size == 0
    with pytest.raises(ValueError, match="cache_size"):
        ta.jit(lambda x: x, cache_size=0)


def test_inner_transforms_are_recorded_and_replayed_at_new_inputs():
    # the inner transforms' sweeps are operations of the recording: replays
    # give the derivatives at the new inputs (closures over traced values too)
    cases = [
        (lambda x: ta.grad(lambda y: y * x * tnp.sin(y))(x), [2.0, -0.5, 3.0]),
        (ta.grad(ta.grad(lambda x: x ** 3 * tnp.exp(-x))), [2.0, 0.5, -1.0]),
        (ta.grad(lambda z: z * z * z, holomorphic=True), [1.0 + 1j, 2.0 - 0.5j]),
    ]
    for f, points in cases:
        jf = ta.jit(f)
        for x in points:
            np.testing.assert_allclose(jf(x), f(x), rtol=1e-15, atol=1e-15)
        assert jf.cache_info().misses == 1 and jf.cache_info().hits == len(points) - 1


def test_user_wrapper_of_a_gradient_is_jitted_as_what_it_does():
    import functools
    g = ta.grad(lambda x: x ** 3)

    @functools.wraps(g)
    def twice(x):
        return 2.0 * g(x)
    jf = ta.jit(twice)
    assert jf(2.0) == 24.0 and jf(3.0) == 54.0 and jf.cache_info().hits == 1


def test_inside_other_transforms_it_runs_eagerly():
    jf = ta.jit(lambda y: y * y)
    assert ta.grad(lambda x: jf(x) * x)(3.0) == 27.0
    assert ta.grad(lambda x: ta.jit(lambda y: y * y * x)(2.0))(3.0) == 4.0
    assert ta.jvp(jf, (3.0,), (1.0,))[1] == 6.0
    h = ta.hessian(lambda x: ta.jit(lambda y: (y ** 3).sum())(x))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(h, np.diag([6.0, 12.0]))


def test_errors_for_bad_arguments():
    with pytest.raises(TypeError, match="expected a function"):
        ta.jit(3)
    with pytest.raises(TypeError, match="hashable"):
        ta.jit(lambda x, o: x)(1.0, object.__new__(type("U", (), {"__hash__": None})))


def test_threads_agree():
    rng = np.random.default_rng(3)
    x, t = rng.normal(size=(8, 3)), rng.normal(size=8)
    jvg = ta.jit(ta.value_and_grad(loss))
    ws = [[rng.normal(size=(3, 4)), rng.normal(size=4)] for _ in range(24)]
    expected = [ta.value_and_grad(loss)(w, x, t) for w in ws]
    jf = ta.jit(lambda a: np.abs(a).sum() if a[0] > 0 else -a.sum())
    got, got_f, errors = [None] * len(ws), [None] * len(ws), []

    def work(k0):
        try:
            for k in range(k0, len(ws), 4):
                got[k] = jvg(ws[k], x, t)
                got_f[k] = jf(ws[k][1])
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for a, b in zip(got, expected):
        _same(a, b)
    for a, w in zip(got_f, ws):
        assert a == (np.abs(w[1]).sum() if w[1][0] > 0 else -w[1].sum())


def test_keyword_arguments_are_traced_and_constant_outputs_kept():
    def f(x, scale=1.0, label="a"):
        return {"y": x * scale, "label": label, "three": 3}
    jf = ta.jit(f)
    x = np.array([1.0, 2.0])
    _same(jf(x, scale=2.0), f(x, scale=2.0))
    _same(jf(x, scale=5.0), f(x, scale=5.0))        # replay: the new scale flows through
    assert jf.cache_info().hits == 1
    _same(jf(x, scale=5.0, label="b"), f(x, scale=5.0, label="b"))
    assert jf.cache_info().misses == 2


def test_static_argument_traced_by_an_outer_transform_runs_eagerly():
    jf = ta.jit(lambda x, c: x * c, static_argnums=1)
    assert jf(2.0, 3.0) == 6.0
    assert ta.grad(lambda c: jf(2.0, c))(3.0) == 2.0


def test_float32_gradients_bit_for_bit():
    f = lambda w: (np.tanh(w) * w).sum()
    jg = ta.jit(ta.grad(f))
    for s in (1.0, 2.0, 3.0):
        w = np.linspace(-1, 1, 5, dtype=np.float32) * np.float32(s)
        _same(jg(w), ta.grad(f)(w))


def test_static_minus_zero_is_not_zero():
    jf = ta.jit(lambda x, s: x * np.copysign(1.0, s), static_argnums=1)
    assert jf(2.0, 0.0) == 2.0
    assert jf(2.0, -0.0) == -2.0


def test_jit_grad_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def body(m, w, x, t):
        return ((m.tanh(x @ w) - t) ** 2).mean() + 1e-3 * (w ** 4).sum()
    rng = np.random.default_rng(4)
    x, t = rng.normal(size=(8, 3)), rng.normal(size=8)
    jg = ta.jit(ta.grad(lambda w, x, t: body(np, w, x, t)))
    jgj = jax.grad(lambda w: body(jnp, w, x, t))
    for _ in range(3):
        w = rng.normal(size=3)
        np.testing.assert_allclose(jg(w, x, t), np.asarray(jgj(w)), rtol=1e-12, atol=1e-14)
    assert jg.cache_info().hits == 2


def test_refuses_a_function_that_reads_traced_numbers():
    """A branch on x.primal is not recorded as a guard, so a replay would return the
    recorded branch's number at new inputs: jit refuses at the first call."""
    f = ta.jit(lambda x: x * x if x.primal > 0 else -x)
    with pytest.raises(ta.TapeReplayError, match=r"x\.primal"):
        f(1.0)
    g = ta.jit(lambda x: x * x if x > 0 else -x)       # a comparison is a guard
    assert g(2.0) == 4.0 and g(-2.0) == 2.0


def test_replayed_small_vector_packs_equal_a_fresh_recording_bit_for_bit():
    # np.array([a, b]) of traced scalars is a pack of scalar nodes, which the
    # replay fills in C; packs with a constant piece take numpy's stack
    def f(y):
        for _ in range(20):
            a, b = y[0], y[1]
            k = np.array([b, -0.1 * b - np.sin(a)])          # scalars only: the C pack
            c = np.array([a * b, 2.0])                       # a constant piece: numpy
            d = np.stack([np.cos(a), b * b])                 # np.stack of scalars
            y = y + 0.01 * k + 0.001 * c * d
        return y[0] ** 2 + np.sum(y * y)
    fast = ta.jit(ta.value_and_grad(f))
    eager = ta.value_and_grad(f)
    rng = np.random.default_rng(3)
    for _ in range(4):
        y0 = rng.normal(size=2)
        v, g = fast(y0)
        v_ref, g_ref = eager(y0)
        assert v == v_ref
        # the recorded gradient runs the rules' array forms, eager the C kernels
        # of small vectors: the same operations up to the last bit of a libm call
        np.testing.assert_allclose(g, g_ref, rtol=1e-14, atol=1e-15)
    assert fast.cache_info().hits >= 3 and fast.cache_info().rerecords == 0


def test_a_returned_small_vector_is_never_changed_by_the_next_call():
    # a pack no node reads is written only when asked for, in place when
    # nothing else holds it: an array already handed to the caller is not
    jf = ta.jit(lambda y: np.array([y[0] * 2.0, y[1] + 1.0, np.sin(y[0])]))
    a, b = np.array([0.5, -1.0]), np.array([2.0, 3.0])
    r1 = jf(a)
    r1_copy = r1.copy()
    r2 = jf(b)
    r3 = jf(a)
    np.testing.assert_array_equal(r1, r1_copy)
    np.testing.assert_array_equal(r2, [4.0, 4.0, np.sin(2.0)])
    np.testing.assert_array_equal(r3, r1_copy)
    assert r2 is not r1 and r3 is not r2
    assert jf.cache_info().hits == 2


def test_small_vectors_left_stale_by_a_replay_are_written_before_they_are_read():
    # after a replay, the packs no node reads hold old numbers until asked for;
    # every way of reading a node's value sees the new ones
    def f(y):
        for _ in range(5):
            k = np.array([y[1], -np.sin(y[0])])
            y = y + 0.1 * k
        return y
    y0, y1 = np.array([0.3, -0.2]), np.array([1.1, 0.7])
    from tapead._core import Tape
    tape = Tape()
    x = tape.input(y0)
    out = f(x)
    fresh = Tape()
    xf = fresh.input(y1)
    out_f = f(xf)
    packs = [i for i, o in enumerate(tape.export_nodes()[0]) if o == 1 and i > 0]
    assert packs                                     # the np.array([...]) nodes
    tape.replay([y1])
    for i in packs:
        np.testing.assert_array_equal(tape.value(i), fresh.value(i))
        np.testing.assert_array_equal(tape.record(i).ans, fresh.record(i).ans)
    tape.replay([y1])
    # the forward sweep reads records' values directly: it writes them first
    seeds = {x.idx: np.eye(2)}
    t_rep = tape.forward_sweep(seeds, [out.idx], 2)[0]
    t_new = fresh.forward_sweep({xf.idx: np.eye(2)}, [out_f.idx], 2)[0]
    np.testing.assert_array_equal(t_rep, t_new)


def test_element_reads_replay_from_the_new_array_in_any_layout():
    # x[i] on an array input: a replay reads each element from the new array,
    # C-contiguous or strided, and refuses an array too short for the tape
    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + np.sin(x[i]) * x[i + 1]
        return s
    jf = ta.jit(ta.value_and_grad(f))
    eager = ta.value_and_grad(f)
    rng = np.random.default_rng(7)
    base = rng.normal(size=40)
    v, g = jf(base[:20].copy())
    for x in (base[20:].copy(), base[::2], base[1::2][::-1]):
        v, g = jf(x)
        v_ref, g_ref = eager(np.ascontiguousarray(x))
        assert v == v_ref
        np.testing.assert_array_equal(g, g_ref)
    from tapead._core import Tape
    tape = Tape()
    t = tape.input(base[:5].copy())
    f(t)
    with pytest.raises(TapeReplayError, match="shape"):
        tape.replay([base[:3].copy()])


def test_jit_of_vmap_replays_and_a_split_batch_records_again():
    f = ta.jit(ta.vmap(lambda x: np.sin(x).sum()))
    for c in (1.0, 2.0):
        np.testing.assert_allclose(f(np.full((3, 4), c)), np.full(3, 4 * np.sin(c)),
                                   rtol=1e-15)
    assert f.cache_info().hits == 1
    g = ta.jit(ta.vmap(lambda x: x * 2.0 if x.sum() > 0 else -x))
    np.testing.assert_array_equal(g(np.array([[1.0], [-1.0]])), [[2.0], [1.0]])
    np.testing.assert_array_equal(g(np.array([[-1.0], [1.0]])), [[1.0], [2.0]])
    assert g.cache_info().rerecords == 1          # the lanes' branch flipped: recorded again


def test_a_0d_array_and_a_float_record_apart_and_bad_argnums_keep_nothing():
    g = ta.jit(ta.grad(lambda x: x * x))
    assert g(np.array(3.0)) == 6.0 and g(3.0) == 6.0 and g(np.array(4.0)) == 8.0
    assert (g.cache_info().misses, g.cache_info().hits) == (2, 1)  # a 0-d array, a float
    bad = ta.jit(ta.grad(lambda x: (x * x).sum(), argnums=2))
    with pytest.raises(ValueError):
        bad(np.ones(3))
    assert bad.cache_info().size == 0             # nothing was kept


def test_a_small_vector_read_twice_after_a_replay_is_one_array():
    # a pack a replay left stale is written once; both outputs are that array
    jf = ta.jit(lambda x: (lambda y: (y, y))(x * 2.0 + 1.0))     # a 2-element vector op
    a, b = jf(np.array([1.0, 2.0]))
    assert a is b
    a, b = jf(np.array([3.0, 4.0]))
    assert a is b
    np.testing.assert_array_equal(a, [7.0, 9.0])


def _sin_chain(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + ta.numpy.sin(x[i]) * x[i + 1]
    return s


def test_a_list_of_numpy_float64_is_a_list_of_scalar_inputs():
    """``list(array)`` holds np.float64 scalars: eager and jitted gradients are
    lists of np.float64 with the numbers of the float list, recorded apart
    from a list of Python floats (whose gradient holds floats)."""
    x = np.random.default_rng(3).uniform(-1.0, 1.0, 40)
    v_ref, g_ref = ta.value_and_grad(_sin_chain)(x)
    for f in (ta.value_and_grad(_sin_chain), ta.jit(ta.value_and_grad(_sin_chain))):
        for _ in range(3):                          # the jit: a recording, then replays
            v, g = f(list(x))
            assert type(g) is list and all(type(a) is np.float64 for a in g)
            assert v == v_ref and np.array_equal(np.array(g), g_ref)
            v, g = f(x.tolist())
            # eager: Python floats; jitted: numpy scalars (its outputs are numpy values)
            assert type(g) is list and all(isinstance(a, float) for a in g)
            assert v == v_ref and np.array_equal(np.array(g), g_ref)
    assert f.cache_info().misses == 2 and f.cache_info().hits == 4
    mixed = [float(x[0])] + list(x[1:])             # mixed floats: each leaf on its own
    v, g = ta.jit(ta.value_and_grad(_sin_chain))(mixed)
    assert type(g[0]) is np.float64 and np.array_equal(np.array(g), g_ref)
    jf = ta.jit(_sin_chain)                         # a plain jit replays them too
    assert jf(list(x)) == jf(list(x)) == v_ref
    with pytest.raises(TypeError, match="boolean"):  # a bool is still refused
        ta.grad(_sin_chain)([np.float64(1.0), True])


_FLAT_CALLS = [
    (2.0,), (2.0, 3.0), (np.float64(2.0),), (np.float64(1.0), 2.0, np.zeros(2)), (np.array([1.0, 2.0]), 3.0), (1.5, np.ones((2, 3))),
    (np.ones(3, dtype=np.float32), np.ones(3)), (np.array([1.0, 2.0]),),
]


@pytest.mark.parametrize("args", _FLAT_CALLS)
def test_the_flat_signature_is_the_general_paths_key(args, monkeypatch):
    """Calls of floats and float arrays take a short path to their cache key;
    it is the key the general path makes, so both share recordings."""
    tj = sys.modules["tapead.jit"]      # the module (ta.jit is the function)
    f = ta.jit(ta.grad(lambda *a: sum(np.sum(x) for x in a)))
    fast = f._signature(args, {})
    monkeypatch.setattr(tj, "_flat_signature", lambda args: None)
    slow = f._signature(args, {})
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert list(fast[2]) == list(slow[2]) and list(fast[3]) == list(slow[3])


def _two(x, y):
    return x * y + np.sin(x) * x


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
@pytest.mark.parametrize("kind", ["grad", "value_and_grad"])
def test_jitted_gradients_of_floats_match_the_eager_ones_in_type_and_value(argnums, kind):
    eager = getattr(ta, kind)(_two, argnums=argnums)
    jitted = ta.jit(getattr(ta, kind)(_two, argnums=argnums))
    for x, y in [(0.3, 2.0), (1.7, -0.5), (0.3, 2.0), (-2.0, 4.0)]:
        want, got = eager(x, y), jitted(x, y)
        assert repr(got) == repr(want)           # np.float64 values, tuples as eager's
    assert jitted.cache_info().misses == 1
    for x, y in [(np.float64(0.3), 2.0), (np.float64(1.5), np.float64(-1.0))]:
        want, got = eager(x, y), jitted(x, y)    # np.float64 in (what an update gives)
        assert repr(got) == repr(want)
    assert jitted.cache_info().misses == 3


def test_a_float_the_output_does_not_reach_has_a_zero_gradient_on_replay():
    g = ta.jit(ta.grad(lambda x, y: x * x, argnums=(0, 1)))
    for x in (1.0, 2.0, 3.0):
        assert repr(g(x, 5.0)) == repr((np.float64(2 * x), np.float64(0.0)))
    c = ta.jit(ta.value_and_grad(lambda x: 4.0))     # a constant output: no tape node
    assert c(1.0) == c(2.0) == (4.0, 0.0)


def test_tapes_count_their_object_nodes():
    from tapead._core import Tape
    t = Tape()
    x, = t.input_many([1.0])
    y = x * x + 1.0
    assert t.n_object_nodes == 0 and t.n_nodes == 3
    a = t.input(np.ones(3))
    np.sin(a) * y
    assert t.n_object_nodes == 3        # the input, sin, the product
