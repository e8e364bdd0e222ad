"""x[i] on array tracers (element nodes) and small float64 vectors computed
per element: the same values (bit for bit) and derivatives (to rounding) as
the generic path, against JAX and central finite differences, through
second order, forward mode, replay (ta.record, ta.jit) and sparsity."""
import contextlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead._core import CONST_OPCODES, OPCODES, STRUCTURAL_OPCODES, Tape

OP_ELEM = STRUCTURAL_OPCODES["elem"]
OP_OBJ = STRUCTURAL_OPCODES["obj"]


@contextlib.contextmanager
def generic_paths():
    """Every x[i] and small vector through the generic primitives (the old path)."""
    before = _core.use_element_paths(False)
    try:
        yield
    finally:
        _core.use_element_paths(before)


def fd_grad(f, x, h=1e-6):
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for k in range(x.size):
        p, m = x.copy(), x.copy()
        p.flat[k] += h
        m.flat[k] -= h
        g.flat[k] = (f(p) - f(m)) / (2 * h)
    return g


def fd_hessian(f, x, h=1e-4):
    x = np.array(x, dtype=np.float64)
    n = x.size
    H = np.zeros((n, n))
    for k in range(n):
        p, m = x.copy(), x.copy()
        p.flat[k] += h
        m.flat[k] -= h
        H[:, k] = (ta.grad(f)(p) - ta.grad(f)(m)).ravel() / (2 * h)
    return H


def _kinds(tape):
    op, _, _ = tape.export_nodes()
    return int((op == OP_OBJ).sum()), int((op == OP_ELEM).sum())


# ---------------------------------------------------------------------------
# element nodes
# ---------------------------------------------------------------------------

def b1(x, m=np):
    return sum(m.sin(x[i]) * x[i + 1] for i in range(len(x) - 1))


def test_indexing_an_array_records_element_nodes_not_records():
    x = np.random.default_rng(0).uniform(-1, 1, 200)
    rec = ta.record(b1, x)
    n_obj, n_elem = _kinds(rec.tape)
    assert n_obj == 1                    # the input array itself
    assert n_elem == 200                 # one node per element, though each is read twice
    g_ref = np.zeros_like(x)
    g_ref[:-1] += np.cos(x[:-1]) * x[1:]
    g_ref[1:] += np.sin(x[:-1])
    np.testing.assert_allclose(ta.grad(b1)(x), g_ref, rtol=1e-15, atol=1e-16)
    with generic_paths():
        np.testing.assert_array_equal(ta.grad(b1)(x), ta.grad(b1)(x))


def test_element_nodes_are_shared_per_array_and_per_element():
    # x[i] twice is one node; two arrays do not share; reading one element of a
    # large array does not cost an index of the array's size
    from tapead._core import Tape
    tape = Tape()
    x = tape.input(np.arange(5.0))
    y = tape.input(np.arange(5.0) + 10.0)
    a, b = x[2], x[2]
    c, d = y[2], x[-3]
    assert a.idx == b.idx == d.idx and c.idx != a.idx
    assert (float(a.primal), float(c.primal)) == (2.0, 12.0)
    before = tape.memory()["index"]
    big = tape.input(np.arange(70_000.0))
    for k in range(3, 300):                  # few elements: a dict of their nodes
        assert big[k].idx == big[k].idx
    assert tape.memory()["index"] - before < 300 * 200
    for k in range(10_000):                  # an eighth of them: an index array
        big[k]
    assert big[5].idx == big[5].idx and float(big[9_999].primal) == 9_999.0
    assert tape.memory()["index"] - before >= 70_000 * 4
    z = x[1] * x[1] + np.sin(x[1])
    tape.active = False
    (g,) = tape.backward([z.idx], [1.0], [x.idx])
    np.testing.assert_array_equal(g, [0.0, 2.0 + np.cos(1.0), 0.0, 0.0, 0.0])


INDEXED = {
    "1d": (lambda x, m=np: x[0] * x[2] + m.sin(x[-1]) * x[np.int64(1)] ** 2, (4,), None),
    "2d": (lambda A, m=np: m.exp(A[0, 1]) * A[2, 0] + A[-1, -1] * A[1, np.int32(2)], (3, 3), None),
    "3d": (lambda A, m=np: A[1, 0, 2] * A[0, 1, 1] - A[1, 1, 0] ** 3, (2, 2, 3), None),
    "transposed": (lambda A, m=np: A[0, 1] * A[1, 0] + m.cos(A[2, 1]), (3, 2), "T"),
    "strided": (lambda x, m=np: x[0] * x[3] + x[1] / (2.0 + x[2]), (8,), "step"),
    "repeated": (lambda x, m=np: x[1] * x[1] * x[1] + x[1], (3,), None),
}


def _point(shape, layout, seed=0):
    rng = np.random.default_rng(seed)
    if layout == "T":
        return rng.uniform(-1, 1, shape[::-1]).T
    if layout == "step":
        return rng.uniform(-1, 1, 2 * shape[0])[::2]
    return rng.uniform(-1, 1, shape)


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_element_paths_agree_with_the_generic_path_and_fd(name):
    f, shape, layout = INDEXED[name]
    x = _point(shape, layout)
    v, g = ta.value_and_grad(f)(x)
    H = ta.hessian(f)(x)
    Jf = ta.jacfwd(f)(x)
    with generic_paths():
        v0, g0 = ta.value_and_grad(f)(x)
        H0 = ta.hessian(f)(x)
    assert v == v0
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(Jf, g0, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(H, H0, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(H.reshape(x.size, x.size), fd_hessian(f, x),
                               rtol=1e-6, atol=1e-7)


def test_elements_and_vectorised_ops_on_one_array():
    def f(x):
        y = np.sin(x) * 2.0                  # a vectorised node
        s = y[0] * y[3] + x[2]               # elements of the result and of the input
        z = np.stack([s, y[1], x[0]])        # scalars packed back
        return (z * np.arange(3.0)).sum() + z[1] * s + (x ** 2).sum() * x[1]
    x = _point((6,), None, 3)
    g, H = ta.grad(f)(x), ta.hessian(f)(x)
    with generic_paths():
        g0, H0 = ta.grad(f)(x), ta.hessian(f)(x)
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(H, H0, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-7, atol=1e-8)
    v = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(ta.hvp(f, (x,), (v,)), H0 @ v, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(ta.jacrev(ta.grad(f))(x), H0, rtol=1e-14, atol=1e-14)


def test_interleaved_elements_of_two_arrays_sweep_as_the_generic_path():
    """The reverse sweep takes the element nodes of the array whose adjoint it
    holds inside its scalar runs; elements of a second array, an array node
    in between and a replay must not change a bit of the gradient."""
    def f(x, y):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + tnp.sin(x[i]) * y[i % 3, i % 2] + x[i + 1] * x[i]
            if i == 4:
                s = s + np.sum(np.tanh(x) * x)      # an array node between the runs
        return s * y[2, 1] + x[0]
    rng = np.random.default_rng(5)
    x, y = rng.uniform(-1, 1, 9), rng.uniform(-1, 1, (3, 2))
    g = ta.grad(f, argnums=(0, 1))(x, y)
    with generic_paths():
        g0 = ta.grad(f, argnums=(0, 1))(x, y)
    for a, b in zip(g, g0):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(g[0], fd_grad(lambda u: f(u, y), x), rtol=1e-7, atol=1e-8)
    jf = ta.jit(ta.grad(f, argnums=(0, 1)))
    jf(x, y)
    x2, y2 = x[::-1].copy(), y * 0.5
    for a, b in zip(jf(x2, y2), ta.grad(f, argnums=(0, 1))(x2, y2)):
        np.testing.assert_array_equal(a, b)


def test_element_fallbacks_keep_numpy_semantics():
    tp = Tape()
    x32 = tp.input(np.arange(3, dtype=np.float32))
    assert x32[1].dtype == np.float32                   # not float64: the getitem primitive
    x = tp.input(np.arange(3.0))
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[-4]
    assert x[True].shape == (1, 3)                       # a bool is a mask, not 1
    assert x[1:].shape == (2,)
    A = tp.input(np.ones((2, 2)))
    assert A[1].shape == (2,)                            # a row, not an element
    assert _core.element(x, 2).primal == 2.0


def test_traced_cotangent_through_elements():
    x = _point((5,), None, 4)

    def outer(c):
        _, pullback = ta.vjp(b1, x)
        return (pullback(c)[0] ** 2).sum()
    g = ta.grad(outer)(1.5)
    with generic_paths():
        g0 = ta.grad(outer)(1.5)
    assert abs(g - g0) <= 1e-14 * abs(g0)


def test_forward_mode_takes_the_element_of_the_tangent():
    x, t = _point((4,), None, 5), np.array([0.5, -1.0, 2.0, 0.25])
    out, tan = ta.jvp(b1, (x,), (t,))
    with generic_paths():
        out0, tan0 = ta.jvp(b1, (x,), (t,))
    assert out == out0
    assert abs(tan - tan0) <= 1e-15 * max(1.0, abs(tan0))


def test_record_and_jit_replay_elements_at_new_points():
    f = INDEXED["2d"][0]
    jf = ta.jit(ta.value_and_grad(f))
    rec = ta.record(f, _point((3, 3), None, 0))
    for seed in range(1, 4):
        A = _point((3, 3), None, seed)
        v, g = jf(A)
        v0, g0 = ta.value_and_grad(f)(A)
        assert v == v0
        np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)
        assert rec(A) == f(A)
    jb = ta.jit(ta.value_and_grad(b1))
    for seed in range(3):
        x = _point((50,), None, seed)
        v, g = jb(x)
        v0, g0 = ta.value_and_grad(b1)(x)
        assert v == v0
        np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)


def test_sparsity_of_elements_is_one_entry_each():
    def f(x):
        return np.stack([x[0] * x[2], x[1] + 0.0, x[3] * x[3], (x * 1.0).sum()])
    P = ta.jacobian_sparsity(f, np.arange(4.0)).toarray()
    expected = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1], [1, 1, 1, 1]], bool)
    np.testing.assert_array_equal(P, expected)
    P = ta.jacobian_sparsity(lambda v: (lambda A: A[1, 2] * A[0, 1])(v.reshape(2, 3)),
                             np.arange(6.0)).toarray()
    np.testing.assert_array_equal(P.ravel(), [0, 1, 0, 0, 0, 1])


def test_element_of_a_stack_of_scalars_is_the_scalar():
    tp = Tape()
    a, b = tp.input(2.0), tp.input(3.0)
    v = np.stack([a, b * 2.0])
    n = tp.n_nodes
    assert v[1].idx == n - 2                  # b * 2.0's node, no new node
    assert tp.n_nodes == n
    assert v[-2].idx == a.idx


def test_stack_and_array_of_scalars_are_one_record():
    def f(x):
        s, c = np.sin(x[0]), x[1] * x[2]
        return (np.stack([s, c, 1.0]) * np.array([s, 2, c])).sum() + tnp.array([s, c])[1]
    x = _point((3,), None, 6)
    rec = ta.record(f, x)
    prims = [str(rec.tape.record(i).prim) for i in range(rec.n_nodes)
             if rec.tape.node(i)[0] == OP_OBJ]
    # the input, the two packs, the product's pack and nothing else (the sum of
    # three elements is scalar adds)
    assert sorted(prims) == sorted(["None"] + ["<primitive stack>"] * 3), prims
    g = ta.grad(f)(x)
    with generic_paths():
        g0 = ta.grad(f)(x)
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)


# ---------------------------------------------------------------------------
# small vectors, per element
# ---------------------------------------------------------------------------

UNARY = [n for n, op in OPCODES.items() if op >= 50]
BINARY = [n for n, op in OPCODES.items() if op < 30]
DOMAIN = {"log": (0.1, 3), "log2": (0.1, 3), "log10": (0.1, 3), "sqrt": (0.1, 3),
          "log1p": (-0.5, 3), "arccosh": (1.1, 3), "arcsin": (-0.9, 0.9),
          "arccos": (-0.9, 0.9), "arctanh": (-0.9, 0.9), "reciprocal": (0.3, 3),
          "tan": (-1.2, 1.2)}
NP_NAME = {"neg": "negative", "abs": "absolute", "pos": "positive", "sub": "subtract",
           "mul": "multiply", "div": "divide", "pow": "power"}


def _fn(name):
    return getattr(tnp, NP_NAME.get(name, name))


@pytest.mark.parametrize("n", [1, 2, 5, 16, _core.SMALL_ARRAY_MAX])
@pytest.mark.parametrize("name", UNARY)
def test_small_unary_matches_the_generic_path(name, n):
    lo, hi = DOMAIN.get(name, (-2, 2))
    x = np.random.default_rng(n).uniform(lo, hi, n)
    fn = _fn(name)
    w = np.linspace(0.5, 1.5, n)

    def f(x):
        return (fn(x * 1.0) * w).sum()
    tp = Tape()
    y = fn(tp.input(x))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y.primal, fn(x))   # numpy's values, bit for bit
        x2 = np.random.default_rng(n + 1).uniform(lo, hi, n)
        tp.replay([x2])
        np.testing.assert_array_equal(tp.value(y.idx), fn(x2))
    with generic_paths():
        v0, g0 = ta.value_and_grad(f)(x)
    v, g = ta.value_and_grad(f)(x)
    assert v == v0
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-300)
    per_element = _core.small_opcode_agrees(OPCODES[name])
    # per element: one scalar node each, packed by a stack record
    assert (str(tp.record(y.idx).prim) == "<primitive stack>") == per_element


@pytest.mark.parametrize("other", ["vector", "scalar", "float", "array", "objects"])
@pytest.mark.parametrize("name", BINARY)
def test_small_binary_matches_the_generic_path(name, other):
    n = 3
    rng = np.random.default_rng(len(name))
    x = rng.uniform(0.5, 2.0, n)
    y = rng.uniform(0.5, 2.0, n) + (0.0 if name not in ("maximum", "minimum") else 0.01)
    fn = _fn(name)
    w = np.array([0.7, -1.3, 2.1])

    def f(x, y):
        if other == "vector":
            b = y * 1.0
        elif other == "scalar":
            b = y[1]
        elif other == "float":
            b = 1.75
        elif other == "array":
            b = np.array([1.5, 0.75, 1.25])
        else:
            b = np.array([y[0], 1.5, y[2] * 2.0])           # an object array of tracers
        return (fn(x * 1.0, b) * w).sum() + (fn(b, x + 0.0) * w[::-1]).sum()
    v, g = ta.value_and_grad(f, argnums=(0, 1))(x, y)
    with generic_paths():
        v0, g0 = ta.value_and_grad(f, argnums=(0, 1))(x, y)
    assert v == v0
    for a, b in zip(g, g0):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=1e-15)


def test_small_vectors_keep_dtypes_and_shapes():
    tp = Tape()
    x = tp.input(np.array([1.0, 2.0]))
    for y in (x * 2, 2 * x, x + x, -x, abs(x), np.sqrt(x), x / 3, x ** 2, x - 1):
        assert type(y.primal) is np.ndarray and y.primal.dtype == np.float64
        assert y.shape == (2,)
    big = tp.input(np.ones(_core.SMALL_ARRAY_MAX + 1))
    n = tp.n_nodes
    big * 2.0
    assert tp.n_nodes == n + 1                     # one array node: not per element
    f32 = tp.input(np.ones(2, np.float32))
    assert (f32 * 2.0).primal.dtype == np.float32


def test_small_vector_constants_and_nan_follow_numpy():
    x = np.array([np.nan, 1.0, -0.0])
    for f in (lambda x: np.maximum(x, 0.5), lambda x: np.sign(x), lambda x: x * 2.0,
              lambda x: np.sqrt(x), lambda x: x ** 2.0, lambda x: 1.0 / (x + 1.0)):
        with np.errstate(all="ignore"):
            got = f(Tape().input(x)).primal
            np.testing.assert_array_equal(got, f(x))
            assert np.array_equal(np.signbit(got), np.signbit(f(x)))


# ---------------------------------------------------------------------------
# RK4 on a small state
# ---------------------------------------------------------------------------

def pendulum(y, m=np):
    th, om = y[0], y[1]
    return m.array([om, -0.1 * om - m.sin(th)])


def rk4(y0, steps=50, h=0.05, m=np):
    y = y0
    for _ in range(steps):
        k1 = pendulum(y, m)
        k2 = pendulum(y + h / 2 * k1, m)
        k3 = pendulum(y + h / 2 * k2, m)
        k4 = pendulum(y + h * k3, m)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y[0] ** 2 + 0.5 * y[1]


def test_rk4_on_a_two_element_state():
    y0 = np.array([1.0, 0.3])
    g = ta.grad(rk4)(y0)
    with generic_paths():
        g0 = ta.grad(rk4)(y0)
    np.testing.assert_allclose(g, g0, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g, fd_grad(rk4, y0), rtol=1e-7)
    H = ta.hessian(lambda y: rk4(y, steps=10))(y0)
    np.testing.assert_allclose(H, fd_hessian(lambda y: rk4(y, steps=10), y0), rtol=1e-6,
                               atol=1e-8)
    jf = ta.jit(ta.value_and_grad(rk4))
    for y in (y0, np.array([0.2, -1.0])):
        v, gj = jf(y)
        assert v == rk4(y)
        np.testing.assert_allclose(gj, ta.grad(rk4)(y), rtol=1e-15)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    y0 = np.array([1.0, 0.3])
    np.testing.assert_allclose(ta.grad(rk4)(y0), jax.grad(lambda y: rk4(y, m=jnp))(y0),
                               rtol=1e-12)
    np.testing.assert_allclose(ta.hessian(lambda y: rk4(y, steps=10))(y0),
                               jax.hessian(lambda y: rk4(y, steps=10, m=jnp))(y0),
                               rtol=1e-12)
    for name in sorted(INDEXED):
        f, shape, layout = INDEXED[name]
        x = _point(shape, layout, 7)
        np.testing.assert_allclose(ta.grad(f)(x), jax.grad(lambda a: f(a, jnp))(x),
                                   rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# random programs mixing small vectors, x[i], np.stack and vectorised ops
# ---------------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

N_STATE = 3
_VEC_UNARY = ("sin", "cos", "tanh", "exp", "square")
_BIN = ("add", "sub", "mul", "div")


def _binop(name, a, b, m):
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    return a / (1.5 + m.cos(b))                  # a denominator in [0.5, 2.5]


def run_program(prog, x, m=np):
    """Interpret ``prog`` on vector ``x`` with numpy-like namespace ``m``.

    The state is a list of vectors (length N_STATE) and scalars; each
    instruction appends one value computed from earlier ones."""
    vecs, scals = [x], [x[0]]
    for ins in prog:
        kind = ins[0]
        if kind == "vun":                          # elementwise on a vector
            vecs.append(getattr(m, ins[1])(vecs[ins[2] % len(vecs)] * 0.5))
        elif kind == "vbin":                       # vector (op) vector / scalar / constant
            a = vecs[ins[2] % len(vecs)]
            b = (vecs[ins[3] % len(vecs)], scals[ins[3] % len(scals)], 0.75,
                 m.asarray(np.linspace(0.5, 1.0, N_STATE)))[ins[4]]
            vecs.append(_binop(ins[1], a, b, m) if ins[5] else _binop(ins[1], b, a, m))
        elif kind == "index":                      # x[i]
            scals.append(vecs[ins[1] % len(vecs)][ins[2] % N_STATE])
        elif kind == "sbin":                       # scalar (op) scalar
            scals.append(_binop(ins[1], scals[ins[2] % len(scals)],
                                scals[ins[3] % len(scals)], m))
        elif kind == "stack":                      # np.stack / np.array of scalars
            pick = [scals[j % len(scals)] for j in ins[1]]
            vecs.append(m.stack(pick) if ins[2] else m.array(pick))
        elif kind == "reduce":                     # a vectorised reduction
            v = vecs[ins[1] % len(vecs)]
            scals.append(m.sum(v * v) * 0.1 if ins[2] else m.dot(v, vecs[0]) * 0.1)
    return sum(m.sum(v) for v in vecs[1:]) * 0.1 + sum(scals) * 0.1


_idx = st.integers(0, 50)
_instruction = st.one_of(
    st.tuples(st.just("vun"), st.sampled_from(_VEC_UNARY), _idx),
    st.tuples(st.just("vbin"), st.sampled_from(_BIN), _idx, _idx, st.integers(0, 3),
              st.booleans()),
    st.tuples(st.just("index"), _idx, _idx),
    st.tuples(st.just("sbin"), st.sampled_from(_BIN), _idx, _idx),
    st.tuples(st.just("stack"), st.lists(_idx, min_size=N_STATE, max_size=N_STATE),
              st.booleans()),
    st.tuples(st.just("reduce"), _idx, st.booleans()),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_instruction, min_size=1, max_size=12),
       st.lists(st.floats(-1.0, 1.0), min_size=N_STATE, max_size=N_STATE))
def test_random_programs_agree_with_the_generic_path_jax_and_fd(prog, x):
    x = np.array(x)
    f = lambda v: run_program(prog, v)                       # noqa: E731
    v, g = ta.value_and_grad(f)(x)
    with generic_paths():
        v0, g0 = ta.value_and_grad(f)(x)
    assert v == v0                                           # numpy's values, bit for bit
    np.testing.assert_allclose(g, g0, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ta.jacfwd(f)(x), g0, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(ta.hessian(f)(x), fd_hessian(f, x), rtol=1e-5, atol=1e-6)
    # the recording replayed at other inputs: what a fresh recording gives
    jf = ta.jit(ta.value_and_grad(f))
    jf(x)
    for x2 in (x[::-1] * 0.9 + 0.05, np.cos(x)):
        v2, g2 = jf(x2)
        v2_ref, g2_ref = ta.value_and_grad(f)(x2)
        np.testing.assert_allclose(v2, v2_ref, rtol=1e-15, atol=1e-16)
        # the recorded sweep runs the rules' array forms (the eager one C kernels)
        np.testing.assert_allclose(g2, g2_ref, rtol=1e-14, atol=1e-15)
    assert jf.cache_info().hits == 2
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    np.testing.assert_allclose(g, jax.grad(lambda v: run_program(prog, v, jnp))(x),
                               rtol=1e-12, atol=1e-13)


def test_slices_and_concatenations_of_small_vectors():
    def f(x, m=np):
        a, b = x[1:], x[:-1]
        c = m.concatenate([x[::2], a * 2.0, x[1:2]])
        return (a * b).sum() + (c * m.sin(c)).sum() + c[3] * x[-1]
    x = _point((5,), None, 8)
    tp = Tape()
    y = tp.input(x)[1:]
    assert str(tp.record(y.idx).prim) == "<primitive stack>"     # the elements' nodes
    g, H = ta.grad(f)(x), ta.hessian(f)(x)
    with generic_paths():
        g0, H0 = ta.grad(f)(x), ta.hessian(f)(x)
        v0 = f(Tape().input(x)).primal
    assert f(Tape().input(x)).primal == v0
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(H, H0, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-7, atol=1e-8)
    jf = ta.jit(ta.value_and_grad(f))
    x2 = _point((5,), None, 9)
    v, gj = jf(x2)
    assert v == f(x2)
    np.testing.assert_allclose(gj, ta.grad(f)(x2), rtol=1e-15)
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    np.testing.assert_allclose(g, jax.grad(lambda v: f(v, jnp))(x), rtol=1e-12)


@pytest.mark.parametrize("n", range(1, 11))
def test_sums_of_small_vectors_are_numpys(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, n) * 10.0 ** rng.integers(-8, 9, n)
    tp = Tape()
    t = tp.input(x)
    s, s2, s3 = np.sum(t), t.sum(), np.sum(t * 1.0, axis=0)
    for v in (s, s2, s3):
        assert v.primal == np.sum(x) and type(v.primal) is float
    # fewer than 8 elements: scalar adds (numpy's order); else the sum primitive
    assert (tp.node(s.idx)[0] == OP_OBJ) == (n >= 8)
    tp.replay([-x])
    assert tp.value(s.idx) == np.sum(-x)
    f = lambda v: np.sum(np.sin(v) * v) * np.sum(v)               # noqa: E731
    g = ta.grad(f)(x / 1e8)
    with generic_paths():
        g0 = ta.grad(f)(x / 1e8)
    np.testing.assert_allclose(g, g0, rtol=1e-15, atol=1e-300)
    zeros = np.full(n, -0.0)
    assert np.signbit(np.sum(Tape().input(zeros)).primal) == np.signbit(np.sum(zeros))


def test_empty_vectors_take_the_generic_path():
    tp = Tape()
    e = tp.input(np.zeros(0))
    for y in (np.sin(e), e * 2.0, e + e, np.sum(e), e[1:], np.concatenate([e, e])):
        assert np.size(y.primal) == (1 if y is not None and np.ndim(y.primal) == 0 else 0)
    assert ta.grad(lambda v: np.sum(np.sin(v) * v) + 1.0)(np.zeros(0)).shape == (0,)


def test_numpys_probes_of_a_box_are_answered_without_changing_any_attribute():
    # np.array([a, b]) asks each element for __array_struct__ and
    # __array_interface__; a box answers "no such attribute" in C
    for box in (_core.Tracer, _core.Dual, _core.Batched):
        for name in ("__array_struct__", "__array_interface__"):
            assert name not in dir(box), (box, name)

    def f(x):
        a, b = x[0], x[1]
        assert not hasattr(a, "__array_interface__") and not hasattr(a, "__array_struct__")
        assert a.__array_priority__ == 1000.0 and hasattr(a, "__array__")
        assert a.T is not None and callable(a.sum)
        with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
            a.nonexistent
        return np.sum(np.array([a * b, np.sin(a)]) ** 2)
    x = np.array([0.3, -1.2])
    g = ta.grad(f)(x)
    a, b = x
    exact = [2 * a * b * b + 2 * np.sin(a) * np.cos(a), 2 * a * b * a]
    np.testing.assert_allclose(g, exact, rtol=1e-14)


def test_concatenating_small_vectors_drops_empty_pieces_and_stays_exact():
    # th[1:] of a one-element vector is empty: the join is still one pack of
    # the others' scalar nodes, with the same values and derivatives as numpy
    def ring(y):
        th = y[0::2]
        shifted = np.concatenate([th[1:], th[:1], np.zeros(0)])
        return np.sum(np.sin(shifted - th) * y[1::2]) + np.sum(shifted * shifted)
    for n in (2, 4, 6):
        y = np.linspace(-0.7, 1.3, n)
        g = ta.grad(ring)(y)
        eps = 1e-6
        fd = np.array([(ring(y + eps * e) - ring(y - eps * e)) / (2 * eps)
                       for e in np.eye(n)])
        np.testing.assert_allclose(g, fd, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ta.hessian(ring)(y), ta.jacfwd(ta.jacrev(ring))(y),
                                   rtol=1e-13, atol=1e-14)
        assert ta.value_and_grad(ring)(y)[0] == ring(y)


@pytest.mark.parametrize("idx", [slice(1, None), slice(None, -2), slice(None, None, 2),
                                 slice(-3, 1, -1), 0, -1, (1,), (slice(None), 2),
                                 (0, slice(1, 4)), (slice(2, 3), slice(None, None, -2))])
def test_basic_indices_of_array_tracers_record_what_the_generic_path_records(idx):
    """x[1:], x[:, 2], x[0] on an array tracer are recorded from C: the same
    values, gradients and second derivatives as the Python getitem."""
    X = np.random.default_rng(2).normal(size=(5, 6))

    def f(x):
        return tnp.sum(tnp.sin(x[idx]) * x[idx] ** 2)
    fast = ta.value_and_grad(f)(X)
    with generic_paths():
        slow = ta.value_and_grad(f)(X)
    assert fast[0] == slow[0]
    np.testing.assert_array_equal(fast[1], slow[1])
    np.testing.assert_allclose(fast[1], fd_grad(f, X), rtol=1e-7, atol=1e-8)
    H = ta.hessian(f)(X)
    with generic_paths():
        np.testing.assert_array_equal(H, ta.hessian(f)(X))


def test_basic_index_errors_and_leaked_tracers_as_the_generic_path():
    X = np.ones((3, 4))
    with pytest.raises(IndexError):
        ta.grad(lambda x: tnp.sum(x[5]))(X)
    with pytest.raises(IndexError):
        ta.grad(lambda x: tnp.sum(x[0, 9]))(X)
    kept = []
    ta.grad(lambda x: kept.append(x) or tnp.sum(x))(X)
    with pytest.raises(ta.errors.LeakedTracerError):
        kept[0][1:]
