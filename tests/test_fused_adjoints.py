"""Indexed cotangents written into an array's adjoint in one pass.

The cotangents that reach an array through basic indices (a ``Scatter`` of g
into ``x[1:]``, the product ``g * cos`` of sin's VJP through ``x[:-1]``) are
kept as pieces of x's adjoint and written in one pass when it is read
(``tapead/_core_pieces.pxi``).  These tests pin that the numbers are those of
the unfused path bit for bit (``_core.set_adjoint_pieces(False)``: zeros, then
each cotangent added as it arrives) for many index patterns and arrival
orders, that what cannot be kept as pieces takes that path, and that the
derivatives are right (closed form, finite differences, second order, JAX).
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core


def vec_numpy(x):                      # benchmarks/bench_core.py's B2 function
    return np.sum(np.sin(x[:-1]) * x[1:])


def vec_tnp(x):
    return tnp.sum(tnp.sin(x[:-1]) * x[1:])


def exact_value_and_grad(x):
    """d/dx_i = cos(x_i) x_{i+1} [i < n-1] + sin(x_{i-1}) [i > 0]."""
    g = np.zeros_like(x)
    g[:-1] += np.cos(x[:-1]) * x[1:]
    g[1:] += np.sin(x[:-1])
    return float(np.sum(np.sin(x[:-1]) * x[1:])), g


def _unfused(fn, *args):
    old = _core.set_adjoint_pieces(False)
    try:
        return fn(*args)
    finally:
        _core.set_adjoint_pieces(old)


def _assert_same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    assert np.array_equal(np.signbit(a), np.signbit(b))      # +0.0 stays +0.0


@pytest.fixture(autouse=True)
def _pieces_on():
    old = _core.set_adjoint_pieces(True)
    yield
    _core.set_adjoint_pieces(old)


@pytest.mark.parametrize("n", [2, 3, 17, 4096, 100_003])
@pytest.mark.parametrize("f", [vec_tnp, vec_numpy], ids=["tnp", "np"])
def test_b2_gradient_is_the_closed_form_and_the_unfused_bits(f, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    vg = ta.value_and_grad(f)
    v, g = vg(x)
    v0, g0 = _unfused(vg, x)
    _assert_same_bits(g, g0)
    assert v == v0 == vec_numpy(x)
    ve, ge = exact_value_and_grad(x)
    np.testing.assert_allclose(g, ge, rtol=1e-15, atol=0)
    assert g.flags.c_contiguous and g.flags.writeable and not np.shares_memory(g, x)


# each: the function and whether it takes a 2-d input
_CASES = {
    "b2": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]), False),
    "product-first": (lambda v: np.sum(v[1:] * np.sin(v[:-1])), False),
    "cos": (lambda v: np.sum(np.cos(v[1:]) * v[:-1]), False),
    "middle": (lambda v: np.sum(np.sin(v[2:-3]) * v[:-5]), False),
    "tail-only": (lambda v: np.sum(v[3:] * 2.0), False),
    "head-and-tail-disjoint": (lambda v: np.sum(np.sin(v[:3])) + np.sum(v[-4:] ** 2), False),
    "same-slice-twice": (lambda v: np.sum(np.sin(v[1:]) * v[1:]), False),
    "three-pieces": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]) + np.sum(np.cos(v[2:]) * v[:-2])
                     + np.sum(v[1:-1] ** 2), False),
    "more-than-four": (lambda v: sum(np.sum(np.sin(v[k:v.shape[0] - 6 + k])
                                            * v[6 - k:v.shape[0] - k]) for k in range(6)),
                       False),
    "with-dense": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]) + np.sum(v ** 2), False),
    "dense-first": (lambda v: np.sum(v ** 2) + np.sum(np.sin(v[:-1]) * v[1:]), False),
    "with-elements": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]) + v[0] * v[3], False),
    "elements-after": (lambda v: v[0] * v[3] + np.sum(np.sin(v[:-1]) * v[1:]), False),
    "strided": (lambda v: np.sum(np.sin(v[:-1:2]) * v[1::2]), False),
    "strided-and-slice": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]) + np.sum(np.cos(v[::3])),
                          False),
    "strided-after": (lambda v: np.sum(np.cos(v[::3])) + np.sum(np.sin(v[:-1]) * v[1:]),
                      False),
    "intermediate": (lambda v: (lambda y: np.sum(np.sin(y[:-1]) * y[1:]))(v * 1.5 + 0.25),
                     False),
    "rows": (lambda v: np.sum(np.sin(v[:-1]) * v[1:]), True),
    "one-row": (lambda v: np.sum(np.sin(v[2]) * v[3]) + np.sum(v[1:3] ** 2), True),
    "columns": (lambda v: np.sum(np.sin(v[:, 1:]) * v[:, :-1]), True),
    "ellipsis-newaxis": (lambda v: np.sum(np.sin(v[None, 1:, ...]) * v[None, :-1]), True),
}


def _input(two_d, dtype=np.float64, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (9, 7) if two_d else 61)
    return x.astype(dtype)


# the cases whose float64 gradient is written from pieces, at least in part
# (the sweep meets the last recorded use first: a dense cotangent, a scalar
# element, a strided view or float32 arriving first means the unfused path;
# arriving after the pieces, it is added to them written out)
_WRITTEN = {"b2", "product-first", "cos", "middle", "tail-only", "head-and-tail-disjoint",
            "same-slice-twice", "three-pieces", "more-than-four", "dense-first",
            "elements-after", "strided-after", "intermediate", "rows", "one-row",
            "ellipsis-newaxis"}


@pytest.mark.parametrize("name", list(_CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pieces_give_the_unfused_bits(name, dtype):
    f, two_d = _CASES[name]
    x = _input(two_d, dtype)
    before = _core.adjoint_pieces_written()
    v, g = ta.value_and_grad(f)(x)
    used = _core.adjoint_pieces_written() - before
    v0, g0 = _unfused(ta.value_and_grad(f), x)
    assert _core.adjoint_pieces_written() - before == used     # off means off
    assert g.dtype == dtype
    _assert_same_bits(g, g0)
    assert v == v0
    if dtype == np.float64:
        assert (used > 0) == (name in _WRITTEN)


@pytest.mark.parametrize("name", ["b2", "product-first", "three-pieces", "rows"])
def test_float32_cotangents_take_the_unfused_path(name):
    # (value_and_grad of a float32 function seeds 1.0, so its cotangents are
    # float64 and may be written from pieces; a float32 cotangent is not)
    f, two_d = _CASES[name]
    x = _input(two_d, np.float32)
    out, pullback = ta.vjp(f, x)
    w = np.ones_like(out)
    before = _core.adjoint_pieces_written()
    g = pullback(w)[0]
    assert _core.adjoint_pieces_written() == before
    assert g.dtype == np.float32
    _assert_same_bits(g, _unfused(lambda: ta.vjp(f, x)[1](w)[0]))


@pytest.mark.parametrize("name", ["b2", "product-first", "cos", "three-pieces"])
def test_signed_zeros_nan_and_inf_keep_the_unfused_bits(name):
    f, _ = _CASES[name]
    x = np.array([-0.0, -0.0, 0.0, -0.0, 1.0, -0.0, np.inf, 0.5, np.nan, -0.0, 2.0, -1e-310])
    with np.errstate(invalid="ignore"):
        g = ta.grad(f)(x)
        g0 = _unfused(ta.grad(f), x)
    _assert_same_bits(g, g0)


def test_pullback_twice_and_a_cotangent_array():
    f = lambda v: np.sin(v[:-1]) * v[1:]                                 # noqa: E731
    x = _input(False)
    out, pullback = ta.vjp(f, x)
    w = np.random.default_rng(1).standard_normal(out.shape)
    g1 = pullback(w)[0]
    g2 = pullback(w)[0]
    _assert_same_bits(g1, g2)
    _assert_same_bits(g1, _unfused(lambda: ta.vjp(f, x)[1](w)[0]))
    ref = np.zeros_like(x)
    ref[:-1] += w * np.cos(x[:-1]) * x[1:]
    ref[1:] += w * np.sin(x[:-1])
    np.testing.assert_allclose(g1, ref, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["b2", "product-first", "middle", "three-pieces",
                                  "more-than-four", "with-elements", "intermediate", "rows",
                                  "one-row", "ellipsis-newaxis"])
def test_pieces_against_finite_differences_to_second_order(name):
    f, two_d = _CASES[name]
    x = _input(two_d)[:12] if not two_d else _input(two_d)[:5, :4]
    ta.check_grads(f, (x,), order=2, modes=("rev",))


def test_hessian_of_a_small_b2_against_finite_differences():
    f = lambda v: np.sum(np.sin(v[:-1]) * v[1:])                         # noqa: E731
    x = np.random.default_rng(2).uniform(-1, 1, 7)
    h = ta.hessian(f)(x)
    g = ta.grad(f)
    eps = 1e-5
    fd = np.empty((7, 7))
    for j in range(7):
        e = np.zeros(7)
        e[j] = eps
        fd[:, j] = (g(x + e) - g(x - e)) / (2 * eps)
    np.testing.assert_allclose(h, fd, rtol=1e-8, atol=1e-9)
    exact = np.zeros((7, 7))                       # d2/dx_i dx_i = -sin(x_i) x_{i+1}, ...
    for i in range(6):
        exact[i, i] += -np.sin(x[i]) * x[i + 1]
        exact[i, i + 1] += np.cos(x[i])
        exact[i + 1, i] += np.cos(x[i])
    np.testing.assert_allclose(h, exact, rtol=1e-14, atol=1e-15)


_JAX = {
    "b2": lambda v, m: m.sum(m.sin(v[:-1]) * v[1:]),
    "product-first": lambda v, m: m.sum(v[1:] * m.sin(v[:-1])),
    "middle": lambda v, m: m.sum(m.sin(v[2:-3]) * v[:-5]),
    "three-pieces": lambda v, m: (m.sum(m.sin(v[:-1]) * v[1:]) + m.sum(m.cos(v[2:]) * v[:-2])
                                  + m.sum(v[1:-1] ** 2)),
    "with-dense": lambda v, m: m.sum(m.sin(v[:-1]) * v[1:]) + m.sum(v ** 2),
}


@pytest.mark.parametrize("name", list(_JAX))
def test_pieces_against_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    src = _JAX[name]
    x = _input(False)
    g = ta.grad(lambda v: src(v, np))(x)
    np.testing.assert_allclose(g, np.asarray(jax.grad(lambda v: src(v, jnp))(x)),
                               rtol=1e-13, atol=1e-13)
    h = ta.hessian(lambda v: src(v, np))(x[:9])
    hj = np.asarray(jax.hessian(lambda v: src(v, jnp))(x[:9]))
    np.testing.assert_allclose(h, hj, rtol=1e-13, atol=1e-13)


def test_set_adjoint_pieces_returns_the_previous_setting():
    assert _core.set_adjoint_pieces(False) is True
    assert _core.set_adjoint_pieces(True) is False


# any basic slices, in any number and order: the pieces give the unfused bits
def _term_strategy(st, rows):
    bound = st.integers(-rows - 1, rows + 1) | st.none()
    step = st.sampled_from([None, 1, 1, 1, 2, -1])
    kind = st.sampled_from(["sin", "cos", "linear", "square"])
    return st.tuples(kind, bound, bound, step)


def _hypothesis():
    return pytest.importorskip("hypothesis")


def test_random_slices_in_any_order_give_the_unfused_bits():
    hyp = _hypothesis()
    st = hyp.strategies

    @hyp.settings(max_examples=150, deadline=None, derandomize=True)
    @hyp.given(two_d=st.booleans(), rows=st.integers(1, 9),
               terms=st.lists(_term_strategy(st, 9), min_size=1, max_size=7),
               seed=st.integers(0, 2 ** 16))
    def check(two_d, rows, terms, seed):
        rng = np.random.default_rng(seed)
        x = rng.uniform(-2, 2, (rows, 3) if two_d else rows)
        weights = [rng.standard_normal(x[slice(a, b, s)].shape) for _, a, b, s in terms]

        def f(v):
            total = 0.0
            for (kind, a, b, s), w in zip(terms, weights):
                part = v[slice(a, b, s)]
                if kind == "sin":
                    part = np.sin(part)
                elif kind == "cos":
                    part = np.cos(part)
                elif kind == "square":
                    part = part * part
                total = total + np.sum(part * w)
            return total

        g = ta.grad(f)(x)
        g0 = _unfused(ta.grad(f), x)
        _assert_same_bits(g, g0)

    before = _core.adjoint_pieces_written()
    check()
    assert _core.adjoint_pieces_written() > before + 50       # most examples use pieces
