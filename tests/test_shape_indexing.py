"""Unmodified numpy code, in-place index assignment, and the shape family's errors.

The per-primitive checks (values, fwd/rev to order 2, float32) run from the
rows of ``opspecs_shape.py``.  Here: whole functions written with plain
``np.*`` calls, ``@`` and ``y[idx] = v`` / ``y[idx] += v`` differentiate
unchanged (against finite differences and JAX's ``.at[]`` spelling), numpy's
semantics for repeated indices are kept, aliasing behaves like numpy's, and
every refusal says what to do instead.
"""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead._prims import indexing, shape
from tapead.errors import NonDifferentiableError

import opspecs  # noqa: F401  (first: it imports opspecs_shape itself)
from opspecs_shape import ARRAY_OPS

MASK = np.array([True, False, True, False, True, False])


# ---------------------------------------------------------------------------
# plain numpy functions with in-place index assignment
# ---------------------------------------------------------------------------

def numpy_program(x):
    """The kind of code people write: copies, index writes, @, np.* calls."""
    y = x * 1.0
    y[0] = y[1] * 2
    y[MASK] += np.sin(x[:3])
    y[1:3] = np.flip(x[3:5]) ** 2
    A = np.outer(y, x[:3])                      # (6, 3)
    A[0, 0] = x[5]
    A[:, 1] *= 0.5
    B = np.pad(np.triu(A[:3]), 1) @ np.tile(x[:5], 1)
    return np.sum(B ** 2) + np.trace(A[:3]) + np.sum(np.diag(A[3:]) ** 3)


def jax_program(jnp, x):
    """The same function in JAX's functional spelling."""
    y = x * 1.0
    y = y.at[0].set(y[1] * 2)
    y = y.at[MASK].add(jnp.sin(x[:3]))
    y = y.at[1:3].set(jnp.flip(x[3:5]) ** 2)
    A = jnp.outer(y, x[:3])
    A = A.at[0, 0].set(x[5])
    A = A.at[:, 1].multiply(0.5)
    B = jnp.pad(jnp.triu(A[:3]), 1) @ jnp.tile(x[:5], 1)
    return jnp.sum(B ** 2) + jnp.trace(A[:3]) + jnp.sum(jnp.diag(A[3:]) ** 3)


X = np.array([0.3, -1.1, 0.8, 1.7, -0.4, 0.9])


def test_numpy_program_value_and_finite_differences():
    val, g = ta.value_and_grad(numpy_program)(X)
    assert np.isclose(val, numpy_program(X), rtol=1e-15)
    ta.check_grads(numpy_program, (X,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(ta.jacfwd(numpy_program)(X), g, rtol=1e-12)


def test_numpy_program_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    f = lambda x: jax_program(jnp, x)       # noqa: E731
    np.testing.assert_allclose(ta.grad(numpy_program)(X), jax.jit(jax.grad(f))(X), rtol=1e-12)
    np.testing.assert_allclose(ta.hessian(numpy_program)(X), jax.jit(jax.hessian(f))(X),
                               rtol=1e-12, atol=1e-12)


def test_index_assignment_keeps_float32():
    x = X.astype(np.float32)
    g = ta.grad(numpy_program)(x)
    assert g.dtype == np.float32
    _, t = ta.jvp(numpy_program, (x,), (np.ones_like(x),))
    assert np.result_type(t) == np.float32


def test_writes_in_a_loop_build_a_matrix():
    def f(x):
        A = x[0] * np.zeros((3, 3))             # start from a traced array
        for i in range(3):
            A[i, i] = x[i] ** 2
            A[i, (i + 1) % 3] = x[i] * x[(i + 1) % 3]
        return (A @ A).sum()
    ta.check_grads(f, (X[:3],), order=2)


# ---------------------------------------------------------------------------
# numpy's semantics: repeated indices, aliasing, inputs
# ---------------------------------------------------------------------------

def test_repeated_indices_in_iadd_add_once_like_numpy():
    # Python runs y[i] += v as y[i] = y[i] + v: with i = [0, 0] the second
    # write overwrites the first, so element 0 grows by v once, not twice
    def f(x):
        y = x * 1.0
        y[[0, 0, 2]] += x[3:6] ** 2
        return y
    ref = X.copy()
    ref[[0, 0, 2]] += X[3:6] ** 2
    np.testing.assert_allclose(f(X), ref, rtol=0)
    out, t = ta.jvp(f, (X,), (np.ones(6),))
    np.testing.assert_allclose(out, ref, rtol=1e-15)
    J = ta.jacrev(f)(X)
    # y0 = x0 + x4**2 (the last write wins): no dependence on x3
    assert J[0, 3] == 0.0 and J[0, 4] == 2 * X[4] and J[0, 0] == 1.0
    np.testing.assert_allclose(J, ta.jacfwd(f)(X), rtol=1e-15)
    ta.check_grads(f, (X,), order=2)


def test_repeated_indices_in_set_last_write_wins():
    def f(x, v):
        y = x * 1.0
        y[[1, 3, 1]] = v
        return y * y
    v = np.array([2.0, -1.0, 0.5])
    ref = X.copy()
    ref[[1, 3, 1]] = v
    np.testing.assert_allclose(f(X, v), ref * ref)
    gx, gv = ta.grad(lambda x, v: f(x, v).sum(), argnums=(0, 1))(X, v)
    np.testing.assert_allclose(gv, [0.0, 2 * v[1], 2 * v[2]])
    np.testing.assert_allclose(gx, np.where(np.isin(np.arange(6), [1, 3]), 0, 2 * X))
    ta.check_grads(f, (X, v), order=2)


def test_at_add_accumulates_repeats_like_add_at():
    def f(x):
        return tnp.at(x)[[0, 0, 2]].add(x[3:6] ** 2)
    ref = X.copy()
    np.add.at(ref, [0, 0, 2], X[3:6] ** 2)
    np.testing.assert_allclose(f(X), ref)
    J = ta.jacrev(f)(X)
    assert J[0, 3] == 2 * X[3] and J[0, 4] == 2 * X[4]
    ta.check_grads(f, (X,), order=2)
    # plain arrays: a copy, x untouched; .set and .get too
    x = np.zeros(3)
    np.testing.assert_array_equal(tnp.at(x)[1:].set(2.0), [0.0, 2.0, 2.0])
    assert tnp.at(X)[2].get() == X[2] and not x.any()


def test_a_list_of_traced_values_as_the_written_value():
    def f(x):
        y = x * 1.0
        y[:2] = [x[2] ** 2, 1.0]
        y[3:] = (x[0], x[1], 2.0)
        return y * tnp.at(np.zeros(2))[:1].set([x[5]])[0]
    ta.check_grads(f, (X,), order=2)
    np.testing.assert_allclose(f(X), X[5] * np.r_[X[2] ** 2, 1.0, X[2], X[0], X[1], 2.0])


def test_writing_into_an_argument_and_aliases():
    def f(x):
        y = x                    # the same array: the write shows through both
        y[0] = 0.0
        return (x ** 2).sum()
    np.testing.assert_allclose(ta.grad(f)(X), np.r_[0.0, 2 * X[1:]])
    assert X[0] == 0.3, "the caller's array is never written"

    def g(x):
        y = x.copy()             # a copy: x keeps its values
        y[0] = 10.0
        z = np.copy(x)
        z[1] = 10.0
        return (x * y * z).sum()
    np.testing.assert_allclose(ta.grad(g)(X), np.r_[20 * X[:2], 3 * X[2:] ** 2])
    ta.check_grads(g, (X,), order=2)


def test_setitem_under_every_transform():
    def f(x):
        y = x ** 2
        y[1:4] = np.exp(x[:3])
        y[MASK] *= x[3:]
        return y
    ta.check_grads(f, (X,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(ta.jacfwd(f)(X), ta.jacrev(f)(X), rtol=1e-15)
    h = ta.hessian(lambda x: f(x).sum())(X)
    np.testing.assert_allclose(h, h.T, rtol=1e-15)
    np.testing.assert_allclose(ta.hvp(lambda x: f(x).sum(), (X,), (np.ones(6),)),
                               h.sum(axis=1), rtol=1e-12)


def test_setitem_nested_grad():
    # the inner function writes inner values into an inner array that also
    # holds outer values: the derivatives of both levels cross correctly
    def outer(x):
        def inner(z):
            y = x * z                       # inner: it depends on z
            y[0] = z * x[1]
            y[1:3] = x[3:5]                 # outer values into an inner array
            return (y ** 2).sum()
        return ta.grad(inner)(x[2])
    # inner(z) = z^2 x1^2 + x3^2 + x4^2 + z^2 (x3^2 + x4^2 + x5^2) before the
    # writes at 1..2; d/dz = 2 z (x1^2 + x3^2 + x4^2 + x5^2)
    def ref(x):
        return 2 * x[2] * (x[1] ** 2 + x[3] ** 2 + x[4] ** 2 + x[5] ** 2)
    g = ta.grad(outer)(X)
    np.testing.assert_allclose(outer(X), ref(X), rtol=1e-14)
    np.testing.assert_allclose(g, ta.grad(ref)(X), rtol=1e-14)


def test_record_and_replay_with_setitem():
    def f(x):
        y = x * 1.0
        y[::2] = x[1::2] ** 2
        return (y ** 3).sum()
    rec = ta.record(f, X)
    v, g = rec.value_and_grad(2 * X)
    vv, gg = ta.value_and_grad(f)(2 * X)
    assert np.isclose(v, vv) and np.allclose(g, gg)


# ---------------------------------------------------------------------------
# errors and documented limits
# ---------------------------------------------------------------------------

def test_outer_array_cannot_hold_inner_value():
    def outer(x):
        y = x * 1.0

        def inner(z):
            y[0] = z
            return y.sum()
        return ta.grad(inner)(x[1])
    with pytest.raises(TypeError, match=r"at\(x\)\[idx\]\.set\(v\)"):
        ta.grad(lambda x: outer(x))(X)


def test_traced_float_index_is_refused():
    # an index must hold integers (np.floor(p).astype(int) makes traced ones,
    # tests/test_integers.py)
    def f(x):
        y = x * 1.0
        y[x[0]] = 1.0
        return y.sum()
    with pytest.raises(IndexError, match="must hold integers"):
        ta.grad(f)(X)
    with pytest.raises(IndexError, match="must hold integers"):
        ta.grad(lambda x: tnp.take(x, [x[0], 1]).sum())(X)


def test_traced_array_into_a_numpy_array_raises():
    def f(x):
        A = np.zeros(3)
        A[:2] = x[1:3]           # numpy converts x: the derivative would be lost
        return A.sum()
    with pytest.raises(TypeError, match="cannot be turned into a numpy array"):
        ta.grad(f)(X)


def test_traced_scalar_into_a_numpy_array_raises():
    # never a silent zero derivative: numpy's conversion fails loudly
    def f(x):
        A = np.zeros(3)
        A[0] = x[1]
        return A.sum()
    with pytest.raises((TypeError, ValueError)):
        ta.grad(f)(X)
    with pytest.raises(TypeError, match="drop its derivative"):
        ta.grad(lambda s: s * float(s))(1.0)


def test_trace_method_in_forward_mode():
    assert ta.jvp(lambda x: x.trace(), (np.eye(3),), (np.ones((3, 3)),)) == (3.0, 3.0)


@pytest.mark.parametrize("call, err, match", [
    (lambda x: np.split(x, 4), ValueError, "array_split"),
    (lambda x: np.squeeze(x, 0), ValueError, "size one"),
    (lambda x: np.pad(x, 1, mode="mean"), NotImplementedError, "'constant'"),
    (lambda x: np.pad(x, 1, constant_values=x[0]), TypeError, "pad with 0"),
    (lambda x: np.ravel(x, order="F"), ValueError, "x.T.ravel"),
    (lambda x: np.diag(x[None, None]), ValueError, "1-d or 2-d"),
    (lambda x: np.take(x, [0], out=np.zeros(1)), TypeError, "returned value"),
    (lambda x: tnp.index_update(x, 1.0, 0, mode="mul"), ValueError, "'set' or 'add'"),
], ids=["split", "squeeze", "pad_mode", "pad_traced_value", "ravel_F", "diag_3d",
        "take_out", "update_mode"])
def test_refusals_say_what_to_do(call, err, match):
    with pytest.raises(err, match=match):
        ta.grad(lambda x: tnp.sum(call(x)))(X)


# ---------------------------------------------------------------------------
# registration: every function dispatches from numpy, plain arrays stay numpy
# ---------------------------------------------------------------------------

def test_numpy_functions_dispatch_and_plain_inputs_stay_numpy():
    funcs = {**shape.NUMPY_FUNCTIONS, **indexing.NUMPY_FUNCTIONS}
    for npf, f in funcs.items():
        assert getattr(tnp, f.__name__) is f, f.__name__
    x = np.arange(6.0).reshape(2, 3)
    assert type(tnp.flip(x)) is np.ndarray
    np.testing.assert_array_equal(tnp.flip(x, 1), np.flip(x, 1))
    np.testing.assert_array_equal(tnp.pad(x, 1, mode="wrap"), np.pad(x, 1, mode="wrap"))
    np.testing.assert_array_equal(tnp.repeat(x, [1, 2], axis=0),
                                  np.repeat(x, [1, 2], axis=0))


def test_numpy_only_forms():
    # forms JAX refuses, so they have no row in opspecs_shape: tril/triu of a
    # 1-d array (numpy broadcasts it to a square), pad of a scalar
    for f in (np.tril, lambda v: np.triu(v, 1), lambda v: np.pad(v[0], 2)):
        np.testing.assert_allclose(ta.jvp(f, (X,), (np.ones(6),))[0], f(X))
        ta.check_grads(f, (X,), order=2)


def test_every_shape_function_has_a_row():
    names = {s.name for s in ARRAY_OPS}
    exported = set(shape.__all__) | set(indexing.__all__)
    covered = {n for n in exported if any(r == n or r.startswith(n + "_") for r in names)}
    # getitem/reshape/... have rows in opspecs.py; at and index_update in setitem_* rows
    assert exported - covered <= {"reshape", "transpose", "swapaxes", "broadcast_to",
                                  "concatenate", "stack", "getitem", "index_update", "at"}


# -- the sum of a few slice cotangents (add_scatters) ------------------------------
SLICE_PROGRAMS = {
    "neighbours": lambda x: np.sum(np.sin(x[:-1]) * x[1:]),
    "overlapping": lambda x: np.sum(x[1:4] ** 2) + np.sum(np.cos(x[2:]) * x[:-2]) + x[3] * x[0],
    "strided 2-d": lambda x: (lambda m: np.sum(np.tanh(m[::2, 1:]) * m[1::2, :-1]))(
        x.reshape(4, 5)),
}


@pytest.mark.parametrize("name", list(SLICE_PROGRAMS))
def test_slice_cotangents_sum_in_place_with_add_ats_bits(name, monkeypatch):
    """A recorded gradient sums a few slices' cotangents by in-place additions;
    each element is added in np.add.at's order, so the bits are the joined
    scatter's (and agree with finite differences)."""
    from tapead._prims import indexing
    f = SLICE_PROGRAMS[name]
    x = np.random.default_rng(7).uniform(-1.0, 1.0, 20)
    chained = ta.jit(ta.grad(f))
    chained(x)
    v = np.random.default_rng(8).normal(size=20)
    hv = ta.jit(lambda x: ta.hvp(f, (x,), (v,)))
    hv(x)
    monkeypatch.setattr(indexing, "_CHAIN_MAX", 0)          # the joined np.add.at
    joined, hj = ta.jit(ta.grad(f)), ta.jit(lambda x: ta.hvp(f, (x,), (v,)))
    y = x * 0.7
    np.testing.assert_array_equal(chained(y), joined(y))
    np.testing.assert_array_equal(hv(y), hj(y))
    tape = next(iter(chained._cache.values())).program.tape
    names = [getattr(tape.record(i).prim, "name", None) for i in range(tape.n_nodes)
             if not tape.is_scalar_node(i) and tape.record(i) is not None]
    assert "index_update" in names and "concatenate" not in names
    h = 1e-6
    fd = np.array([(f(y + h * e) - f(y - h * e)) / (2 * h) for e in np.eye(20)])
    np.testing.assert_allclose(chained(y), fd, rtol=1e-7, atol=1e-9)


def test_complex_slice_cotangents_keep_the_joined_scatter(monkeypatch):
    """Complex cotangents of slices are summed by the joined scatter (whose
    rules hold for complex values); second order through them works."""
    from tapead._prims import indexing

    def f(x):
        z = x[:4] + 1j * x[4:]
        return tnp.sum(tnp.abs(tnp.sin(z[:-1]) * z[1:]) ** 2)
    x = np.array([0.3, -0.5, 0.8, 0.1, 0.2, 0.1, -0.4, 0.9])
    t = np.array([0.2, 0.4, -0.3, 0.6, -0.1, 0.3, 0.5, 0.0])
    got = ta.jvp(ta.grad(f), (x,), (t,))[1]
    monkeypatch.setattr(indexing, "_CHAIN_MAX", 0)
    np.testing.assert_array_equal(got, ta.jvp(ta.grad(f), (x,), (t,))[1])
    h = 1e-6
    fd = (ta.grad(f)(x + h * t) - ta.grad(f)(x - h * t)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-9)
