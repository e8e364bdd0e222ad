"""The C forms of vmap rules (``_core.set_vmap_fast``, ``_core_batch.pxi``):
reshape, transpose, broadcast_to, the axis reductions, matmul against a
shared matrix, the elementwise rule's padding and the lanes' outer products.

Each case runs with the C forms on and off (``_core.vmap_fast``): the
results are bit for bit those of the Python rules, equal the loop of the
function over the lanes, and the primitives of the case never reach the
Python handler (``batching.process``).  In_axes 0, 1, -1 and None, batch
sizes 0, 1 and several, float32 and float64, non-contiguous inputs, nested
vmap; derivatives (``vmap(grad)``, a second derivative inside vmap) against
central finite differences and JAX.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead._prims import batching

RNG = np.random.default_rng(7)
W34 = RNG.normal(size=(3, 4))
W43 = RNG.normal(size=(4, 3))
V3 = RNG.normal(size=(3,))


def _outer(x, y):
    return tnp.reshape(x, (3, 1)) * tnp.reshape(y, (1, 4))


#: name -> (lane function, lane shapes of its arguments, primitives that must run in C)
CASES = {
    "reshape": (lambda x: tnp.reshape(x, (6,)), [(2, 3)], {"reshape"}),
    "reshape -1": (lambda x: tnp.reshape(x, (-1, 2)), [(2, 3)], {"reshape"}),
    "transpose": (lambda x: tnp.transpose(x), [(2, 3)], {"transpose"}),
    "transpose axes": (lambda x: tnp.transpose(x, (1, 2, 0)), [(2, 3, 2)], {"transpose"}),
    "broadcast_to a vector": (lambda x: tnp.broadcast_to(x, (4, 3)), [(3,)], {"broadcast_to"}),
    "broadcast_to a column": (lambda x: tnp.broadcast_to(x, (2, 3)), [(2, 1)],
                              {"broadcast_to"}),
    "sum": (lambda x: tnp.sum(x), [(2, 3)], {"sum"}),
    "sum axis 0": (lambda x: tnp.sum(x, axis=0), [(2, 3)], {"sum"}),
    "sum axis -1 keepdims": (lambda x: tnp.sum(x, axis=-1, keepdims=True), [(2, 3)], {"sum"}),
    "sum axes": (lambda x: tnp.sum(x, axis=(0, 2)), [(2, 3, 2)], {"sum"}),
    "mean axis 1": (lambda x: tnp.mean(x, axis=1), [(2, 3)], {"sum"}),
    "max axis 1": (lambda x: tnp.max(x, axis=1), [(2, 3)], {"max"}),
    "cumsum axis 0": (lambda x: tnp.cumsum(x, axis=0), [(2, 3)], {"cumsum"}),
    "vector @ shared matrix": (lambda x: tnp.dot(x, W34), [(3,)], {"matmul"}),
    "matrix @ shared matrix": (lambda x: x @ W34, [(2, 3)], {"matmul"}),
    "shared matrix @ vector": (lambda x: W43 @ x, [(3,)], {"matmul"}),
    "vector @ shared vector": (lambda x: x @ V3, [(3,)], {"matmul"}),
    "outer product": (_outer, [(3,), (4,)], {"reshape", "mul"}),
    "outer product, rows first": (lambda x, y: tnp.reshape(y, (1, 4)) * tnp.reshape(x, (3, 1)),
                                  [(3,), (4,)], {"reshape", "mul"}),
    "column times vector lanes": (lambda x, y: x * y, [(3, 1), (4,)], {"mul"}),
    "padded operand": (lambda x, z: tnp.sin(x) * z + x, [(3,), (2, 3)], {"mul", "add", "sin"}),
}


def _lanes_at(lanes, axis, dtype, noncontig):
    """The lanes (n, *shape) stacked along ``axis`` (negative counts from the
    end), optionally as a strided view of a bigger array."""
    stacked = np.moveaxis(np.asarray(lanes, dtype=dtype), 0, axis % lanes.ndim)
    if noncontig:
        big = np.zeros(stacked.shape[:-1] + (2 * stacked.shape[-1],), dtype=dtype)
        big[..., ::2] = stacked
        stacked = big[..., ::2]
        assert not stacked.flags.c_contiguous or stacked.size <= 1
    return stacked


def _run(f, args, in_axes, fast, names=None):
    old = _core.vmap_fast(fast)
    try:
        if names is None:
            return ta.vmap(f, in_axes=in_axes)(*args)
        real = batching.process

        def counting(trace, prim, a, params):
            names.append(prim.name)
            return real(trace, prim, a, params)
        batching.process = counting
        try:
            return ta.vmap(f, in_axes=in_axes)(*args)
        finally:
            batching.process = real
    finally:
        _core.vmap_fast(old)


def _same_bits(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape} {a.dtype} != " \
                                                      f"{b.shape} {b.dtype}"
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), what


@pytest.mark.parametrize("noncontig", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name", list(CASES))
def test_c_rules_equal_the_python_rules_and_the_loop(name, axis, n, dtype, noncontig):
    f, shapes, in_c = CASES[name]
    rng = np.random.default_rng(len(name) * 31 + n)
    lanes = [rng.normal(size=(n,) + s) for s in shapes]
    args = [_lanes_at(l, axis, dtype, noncontig) for l in lanes]
    in_axes = tuple(axis % a.ndim for a in args) if axis >= 0 else (axis,) * len(args)
    names = []
    fast = _run(f, args, in_axes, True, names)
    slow = _run(f, args, in_axes, False)
    _same_bits(fast, slow, f"{name}: C rules against Python rules")
    if n:
        assert not in_c & set(names), f"{name}: {sorted(in_c & set(names))} ran in Python"
        loop = np.stack([np.asarray(f(*[np.asarray(l[i], dtype=dtype) for l in lanes]))
                         for i in range(n)])
        assert fast.dtype == loop.dtype
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(fast, loop, rtol=tol, atol=tol)
    else:
        one = np.asarray(f(*[np.ones(s, dtype=dtype) for s in shapes]))
        assert fast.shape == (0,) + one.shape


@pytest.mark.parametrize("name", ["vector @ shared matrix", "outer product", "padded operand",
                                  "broadcast_to a column", "sum axes"])
def test_shared_arguments_and_nested_vmap(name):
    f, shapes, _ = CASES[name]
    rng = np.random.default_rng(3)
    # the first argument shared (in_axes None), the others mapped
    shared = rng.normal(size=shapes[0])
    rest = [rng.normal(size=(4,) + s) for s in shapes[1:]]
    if rest:
        in_axes = (None,) + (0,) * len(rest)
        fast = _run(f, [shared] + rest, in_axes, True)
        _same_bits(fast, _run(f, [shared] + rest, in_axes, False), f"{name}: shared")
        loop = np.stack([f(shared, *[r[i] for r in rest]) for i in range(4)])
        np.testing.assert_allclose(fast, loop, rtol=1e-12, atol=1e-15)
    # vmap of vmap: the inner lanes hold the outer vmap's boxes (the Python
    # rule), the outer ones plain arrays (the C rule)
    xs = [rng.normal(size=(3, 2) + s) for s in shapes]
    inner = ta.vmap(f, in_axes=(0,) * len(shapes))
    fast = ta.vmap(inner, in_axes=(1,) * len(shapes))(*xs)
    old = _core.vmap_fast(False)
    try:
        slow = ta.vmap(inner, in_axes=(1,) * len(shapes))(*xs)
    finally:
        _core.vmap_fast(old)
    _same_bits(fast, slow, f"{name}: nested")
    loop = np.stack([np.stack([f(*[x[i, j] for x in xs]) for i in range(3)])
                     for j in range(2)])
    np.testing.assert_allclose(fast, loop, rtol=1e-12, atol=1e-15)


def _mlp_loss(p, x, y):
    h = tnp.tanh(tnp.dot(x, p["W0"]) + p["b0"])
    h = tnp.dot(h, p["W1"]) + p["b1"]
    return tnp.sum((h - y) ** 2) + tnp.mean(tnp.broadcast_to(x, (2, 3)).T ** 2)


def _params(rng):
    return {"W0": rng.normal(size=(3, 5)), "b0": rng.normal(size=(5,)),
            "W1": rng.normal(size=(5, 2)), "b1": rng.normal(size=(2,))}


def _fd_grad(f, p, h=1e-5):
    """Central differences of f with respect to every entry of the dict p."""
    out = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            up = {**p, k: v.copy()}
            dn = {**p, k: v.copy()}
            up[k][idx] += h
            dn[k][idx] -= h
            g[idx] = (f(up) - f(dn)) / (2 * h)
        out[k] = g
    return out


@pytest.mark.parametrize("n", [1, 4])
def test_per_example_gradients_against_finite_differences(n):
    rng = np.random.default_rng(11)
    p = _params(rng)
    X, Y = rng.normal(size=(n, 3)), rng.normal(size=(n, 2))
    g = ta.vmap(ta.grad(_mlp_loss), in_axes=(None, 0, 0))(p, X, Y)
    old = _core.vmap_fast(False)
    try:
        slow = ta.vmap(ta.grad(_mlp_loss), in_axes=(None, 0, 0))(p, X, Y)
    finally:
        _core.vmap_fast(old)
    for i in range(n):
        fd = _fd_grad(lambda q: float(_mlp_loss(q, X[i], Y[i])), p)
        one = ta.grad(_mlp_loss)(p, X[i], Y[i])
        for k in p:
            _same_bits(g[k], slow[k], f"{k}: C rules against Python rules")
            np.testing.assert_allclose(g[k][i], one[k], rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(g[k][i], fd[k], rtol=1e-7, atol=1e-8)


def test_second_derivative_inside_vmap_against_finite_differences():
    """grad of a directional derivative (a Hessian-vector product) per lane:
    both tapes record the stacked lanes, whose rules run in C."""
    rng = np.random.default_rng(5)
    W, v = rng.normal(size=(3, 4)), rng.normal(size=(3,))
    f = lambda x: tnp.sum(tnp.tanh(tnp.reshape(x, (3, 1)) * tnp.dot(x, W)) ** 2)
    hvp = lambda x: ta.grad(lambda y: tnp.sum(ta.grad(f)(y) * v))(x)
    X = rng.normal(size=(4, 3))
    out = ta.vmap(hvp)(X)
    old = _core.vmap_fast(False)
    try:
        slow = ta.vmap(hvp)(X)
    finally:
        _core.vmap_fast(old)
    _same_bits(out, slow, "hvp: C rules against Python rules")
    h = 1e-5
    for i in range(4):
        g = lambda x: np.asarray(ta.grad(f)(x)) @ v
        fd = np.array([(g(X[i] + h * e) - g(X[i] - h * e)) / (2 * h) for e in np.eye(3)])
        np.testing.assert_allclose(out[i], hvp(X[i]), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[i], fd, rtol=1e-7, atol=1e-8)


def test_per_example_gradients_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(p, x, y):
        h = jnp.tanh(x @ p["W0"] + p["b0"])
        h = h @ p["W1"] + p["b1"]
        return jnp.sum((h - y) ** 2) + jnp.mean(jnp.broadcast_to(x, (2, 3)).T ** 2)
    rng = np.random.default_rng(2)
    p = _params(rng)
    X, Y = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    g = ta.vmap(ta.grad(_mlp_loss), in_axes=(None, 0, 0))(p, X, Y)
    jg = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))(p, X, Y)
    for k in p:
        np.testing.assert_allclose(g[k], np.asarray(jg[k]), rtol=1e-12, atol=1e-14)


def test_refusals_are_the_python_rules():
    # a broadcast the lanes cannot take: numpy's error, from the Python rule
    with pytest.raises(ValueError):
        ta.vmap(lambda x: tnp.broadcast_to(x, (4, 2)))(np.ones((5, 3)))
    from tapead._prims.structural import reshape_p
    with pytest.raises(ValueError, match="kind must be one of"):
        _core.set_vmap_fast(reshape_p, "gather")
    with pytest.raises(TypeError):
        _core.set_vmap_fast(object(), "reshape")


def test_the_registered_c_forms():
    from tapead._prims.elementwise import multiply
    from tapead._prims.linalg import matmul_p
    from tapead._prims.structural import broadcast_p, reshape_p, sum_p, transpose_p
    assert _core.vmap_fast_kind(reshape_p) == "reshape"
    assert _core.vmap_fast_kind(transpose_p) == "transpose"
    assert _core.vmap_fast_kind(broadcast_p) == "broadcast_to"
    assert _core.vmap_fast_kind(sum_p) == "axis"
    assert _core.vmap_fast_kind(matmul_p) == "matmul"
    assert _core.vmap_fast_kind(multiply.prim) == "multiply"
    assert _core.vmap_fast(True) is True and _core.vmap_fast(True) is True


def test_broadcast_outputs_are_the_callers_arrays():
    x = np.arange(6.0).reshape(2, 1, 3)
    out = ta.vmap(lambda v: tnp.broadcast_to(v, (2, 3)))(x)
    assert out.flags.writeable and out.base is None
    np.testing.assert_array_equal(out, np.broadcast_to(x, (2, 2, 3)))
    out[0, 0, 0] = 99.0                    # a copy: the input is untouched
    assert x[0, 0, 0] == 0.0


def test_a_rule_defined_again_is_not_bypassed():
    from tapead._prims.base import Primitive
    prim = Primitive("sum_for_a_test", lambda x, axis=None, keepdims=False:
                     np.add.reduce(x, axis=axis, keepdims=keepdims), saves=())
    prim.defvmap(batching.axis_rule(prim))
    assert _core.vmap_fast_kind(prim) == "axis"
    x = RNG.normal(size=(4, 3))
    np.testing.assert_array_equal(ta.vmap(lambda v: _core.bind(prim, v, axis=0))(x),
                                  x.sum(axis=1))
    calls = []

    def rule(args, bdims, **params):
        calls.append(params)
        v = batching.to_front(args[0], bdims[0])
        return _core.bind(prim, v, axis=params["axis"] + 1), 0
    prim.defvmap(rule)
    assert _core.vmap_fast_kind(prim) is None
    np.testing.assert_array_equal(ta.vmap(lambda v: _core.bind(prim, v, axis=0))(x),
                                  x.sum(axis=1))
    assert calls == [{"axis": 0}]
    old = _core.vmap_fast(False)
    try:
        from tapead._prims.structural import reshape_p
        assert _core.vmap_fast_kind(reshape_p) is None
    finally:
        _core.vmap_fast(old)


@pytest.mark.parametrize("kind", ["int64", "complex128", "bool"])
def test_other_dtypes_take_the_same_numpy_calls(kind):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 2, 3)) * 3
    x = {"int64": x.astype(np.int64), "complex128": x + 1j * x[::-1],
         "bool": x > 0}[kind]
    fs = [lambda v: tnp.reshape(v, (3, 2)), lambda v: tnp.transpose(v),
          lambda v: tnp.broadcast_to(v[:1], (5, 3)), lambda v: tnp.sum(v, axis=1)]
    if kind != "bool":
        fs += [lambda v: v @ W34, lambda v: tnp.reshape(v[0], (3, 1)) * tnp.reshape(v[1], (1, 3))]
    for f in fs:
        fast = _run(f, [x], 0, True)
        _same_bits(fast, _run(f, [x], 0, False), kind)
        np.testing.assert_array_equal(fast, np.stack([f(x[i]) for i in range(4)]))


def test_an_axis_reduction_with_more_parameters():
    x = np.random.default_rng(4).normal(size=(3, 8))
    f = lambda v: tnp.fft.rfft(v, n=6)
    fast = _run(f, [x], 0, True)
    _same_bits(fast, _run(f, [x], 0, False), "rfft")
    np.testing.assert_allclose(fast, np.fft.rfft(x, n=6, axis=1), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_lane_outer_products_are_numpys_products_bit_for_bit(dtype):
    """The C loop of the lanes' outer products against numpy's broadcast
    product, with infinities, NaNs, signed zeros, subnormals and overflow."""
    rng = np.random.default_rng(0)
    a, g = rng.normal(size=(300, 7)).astype(dtype), rng.normal(size=(300, 9)).astype(dtype)
    a[0, 0], a[1, 1], a[2, 2] = np.inf, np.nan, -0.0
    g[3, 3], a[4, :] = np.finfo(dtype).tiny / 8, np.finfo(dtype).max
    f = ta.vmap(lambda x, y: tnp.reshape(x, (7, 1)) * tnp.reshape(y, (1, 9)))
    with np.errstate(all="ignore"):
        out, ref = f(a, g), a[:, :, None] * g[:, None, :]
    _same_bits(out, ref, "outer products")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_matmul_with_an_unmapped_matrix_argument(axis):
    """``in_axes=None`` for the matrix: the lanes meet it in one GEMM (C form),
    in either operand order; equal to the Python rule and the loop."""
    rng = np.random.default_rng(12)
    W, x = rng.normal(size=(3, 4)), rng.normal(size=(5, 3))
    X = np.moveaxis(x, 0, axis % 2)
    cases = [(lambda w, v: v @ w, W), (lambda w, v: w.T @ v, W),
             (lambda w, v: tnp.reshape(v, (1, 3)) @ w, W)]
    for f, w in cases:
        names = []
        fast = _run(f, [w, X], (None, axis), True, names)
        assert "matmul" not in names
        _same_bits(fast, _run(f, [w, X], (None, axis), False), "unmapped matrix")
        loop = np.stack([f(w, x[i]) for i in range(5)])
        np.testing.assert_allclose(fast, loop, rtol=1e-13, atol=1e-15)


def test_lanes_against_a_repeated_weight_are_one_gemm():
    """Per-example gradients differentiate each lane's own copy of a shared
    weight, a stride-0 repeat of it: ``x @ W`` over the lanes is then one GEMM
    (``linalg._matmul_impl``), numpy's product to rounding, and eager and jit
    give the same bits."""
    import tapead as ta
    import tapead.numpy as tnp
    from tapead._prims.linalg import _matmul_impl
    rng = np.random.default_rng(0)
    for n, m, k, p in [(5, 1, 3, 4), (7, 3, 2, 6), (2, 1, 1, 1)]:
        a, W = rng.normal(size=(n, m, k)), rng.normal(size=(k, p))
        b = np.broadcast_to(W, (n, k, p))
        np.testing.assert_allclose(_matmul_impl(a, b), np.matmul(a, b), rtol=1e-15,
                                   atol=1e-15)
        assert _matmul_impl(a, np.ascontiguousarray(b)).tobytes() == np.matmul(a, b).tobytes()
    with pytest.raises(ValueError):
        _matmul_impl(np.ones((3, 1, 2)), np.broadcast_to(np.ones((4, 5)), (3, 4, 5)))

    def loss(P, x, y):
        h = tnp.tanh(x @ P["W1"] + P["b1"])
        return tnp.sum((h @ P["W2"] - y) ** 2)
    P = {"W1": rng.normal(size=(10, 32)), "b1": np.zeros(32), "W2": rng.normal(size=(32, 10))}
    X, Y = rng.normal(size=(64, 10)), rng.normal(size=(64, 10))
    per = ta.vmap(ta.grad(loss), in_axes=(None, 0, 0))
    eager, jitted = per(P, X, Y), ta.jit(per)(P, X, Y)
    for key in P:
        assert eager[key].tobytes() == jitted[key].tobytes()
        want = np.stack([ta.grad(loss)(P, X[i], Y[i])[key] for i in range(3)])
        np.testing.assert_allclose(eager[key][:3], want, rtol=1e-13, atol=1e-13)
