"""Sparse derivatives: patterns from the tape, colored Jacobians/Hessians,
and the scipy.optimize wrapper (tapead.sparse, tapead._patterns,
tapead.optimize)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import tapead as ta
import tapead.numpy as tnp
from tapead import _patterns
from tapead._prims.indexing import index_update
from tapead.optimize import minimize
from tapead.sparse import hessian_sparsity, tape_sparsity
from tapead.program import Program


def _record(*args):
    """(tape, output) of a recording, as the transforms make it."""
    prog = Program.record(*args)
    return prog.tape, prog.out

RNG = np.random.default_rng(20240611)
P_ARROW = 1.3


# ---- example functions ------------------------------------------------------

def tridiagonal(x):
    """y_i depends on x_{i-1}, x_i, x_{i+1}: a tridiagonal Jacobian."""
    mid = x[:-2] * tnp.sin(x[1:-1]) + x[2:] ** 2
    first = tnp.exp(x[:1]) * x[1:2]
    last = x[-2:-1] - tnp.tanh(x[-1:])
    return tnp.concatenate([first, mid, last])


def arrow_jac(x):
    """Every y_i depends on x_i and x_{-1}; the last on everything."""
    head = tnp.cos(x[:-1]) * x[-1]
    return tnp.concatenate([head, tnp.reshape(tnp.sum(x ** 2), (1,))])


def arrow(x):
    """sum_i sin(x_i * x_{-1} * p): an arrow-shaped Hessian."""
    return tnp.sum(tnp.sin(x[:-1] * x[-1] * P_ARROW))


def rosenbrock(x):
    """The chained Rosenbrock function: a tridiagonal Hessian."""
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def scalar_loop(x):
    """Scalar nodes: a Python loop over elements."""
    s = 0.0
    for i in range(len(x) - 1):
        s = s + tnp.exp(x[i] * x[i + 1]) + x[i] ** 2
    return s


def scalar_stack(x):
    return tnp.stack([x[i] * tnp.sin(x[i + 1]) for i in range(len(x) - 1)])


IDX = RNG.integers(0, 20, size=(30, 3))


def random_indexing(x):
    """Random sparse structure built with fancy indexing."""
    return tnp.sin(x[IDX[:, 0]]) * x[IDX[:, 1]] + x[IDX[:, 2]] ** 2


A_CONST = sp.random(15, 20, density=0.1, random_state=3).toarray()


def const_matmul(x):
    return tnp.tanh(A_CONST @ x)


def mixed(x):
    """reshape, sum(axis), where, cumsum, index_update, transpose, broadcasting."""
    m = tnp.reshape(x[:6], (2, 3))
    s = tnp.sum(m * m, axis=0)
    w = tnp.where(np.array([True, False, True]), x[6:9], 2.0)
    c = tnp.cumsum(x[:3])
    t = tnp.transpose(m)
    b = t * x[9:11]
    u = index_update(x[:4], x[10] * 3.0, 1)
    v = index_update(x[:4], x[8:10], slice(0, 2), "add")
    return tnp.concatenate([s, w, c, tnp.reshape(b, (6,)), u, v])


JAC_CASES = [(tridiagonal, 9), (arrow_jac, 7), (random_indexing, 20),
             (const_matmul, 20), (scalar_stack, 8), (mixed, 11)]
HESS_CASES = [(arrow, 7), (rosenbrock, 9), (scalar_loop, 6)]


def _dense(P):
    return P.toarray() if sp.issparse(P) else np.asarray(P)


# ---- the Cython loop -----------------------------------------------------------

def test_union_sorted():
    u = _patterns.union_sorted(np.array([0, 2, 5], np.int32), np.array([1, 2, 7], np.int32))
    assert u.tolist() == [0, 1, 2, 5, 7]
    assert _patterns.union_sorted(np.empty(0, np.int32), np.array([3], np.int32)).tolist() == [3]


def test_scalar_nodes_pattern():
    x = [1.0, 2.0, 3.0]
    tape, out, *_ = _record(lambda a, b, c: a * b + 2.0 * tnp.sin(b), tuple(x), {},
                            (0, 1, 2), "t")
    pats, N = tape_sparsity(tape)
    assert N == 3
    assert pats[out.idx].tolist() == [0, 1]


# ---- Jacobian patterns ------------------------------------------------------

@pytest.mark.parametrize("f,n", JAC_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_jacobian_pattern_is_superset(f, n):
    for _ in range(3):
        x = RNG.standard_normal(n)
        P = ta.jacobian_sparsity(f, x)
        J = np.asarray(ta.jacfwd(f)(x)).reshape(-1, n)
        assert P.dtype == bool and P.shape == J.shape
        assert not np.any((J != 0) & ~_dense(P))


@pytest.mark.parametrize("f,n", [c for c in JAC_CASES if c[0] is not mixed],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_jacobian_pattern_exact(f, n):
    x = RNG.uniform(0.5, 1.5, n)   # no accidental zeros
    J = np.asarray(ta.jacfwd(f)(x))
    np.testing.assert_array_equal(_dense(ta.jacobian_sparsity(f, x)), J != 0)


def test_tridiagonal_pattern_and_colors():
    n = 12
    x = RNG.standard_normal(n)
    P = _dense(ta.jacobian_sparsity(tridiagonal, x))
    expect = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    expect[0, 2:] = expect[-1, :-2] = False
    np.testing.assert_array_equal(P, expect)
    assert ta.sparse_jacobian(tridiagonal).recovery(x).ncolors == 3


def test_constant_matmul_uses_the_constants_zeros():
    x = RNG.standard_normal(20)
    np.testing.assert_array_equal(_dense(ta.jacobian_sparsity(const_matmul, x)), A_CONST != 0)


def test_scalar_output_and_constant_output():
    x = RNG.standard_normal(4)
    P = ta.jacobian_sparsity(lambda x: tnp.sum(x[1:3]), x)
    np.testing.assert_array_equal(_dense(P), [[False, True, True, False]])
    P = ta.jacobian_sparsity(lambda x: np.ones(3), x)
    assert P.shape == (3, 4) and P.nnz == 0
    J = ta.sparse_jacobian(lambda x: np.ones(3))(x)
    assert J.shape == (3, 4) and J.nnz == 0


def test_unknown_primitive_falls_back_to_dense():
    x = RNG.standard_normal(5)
    f = lambda x: tnp.sort(x[:3]) * x[4]       # noqa: E731
    P = _dense(ta.jacobian_sparsity(f, x))
    np.testing.assert_array_equal(P, np.array([[1, 1, 1, 0, 1]] * 3, dtype=bool))
    J = ta.sparse_jacobian(f)(x).toarray()
    np.testing.assert_allclose(J, ta.jacfwd(f)(x), rtol=0, atol=1e-12)


# ---- sparse Jacobians -----------------------------------------------------------

@pytest.mark.parametrize("f,n", JAC_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_sparse_jacobian_matches_jacfwd(f, n):
    jac = ta.sparse_jacobian(f)
    for _ in range(2):                                  # second call: cached pattern
        x = RNG.standard_normal(n)
        J = jac(x)
        assert isinstance(J, sp.csr_array)
        np.testing.assert_allclose(J.toarray(), np.asarray(ta.jacfwd(f)(x)).reshape(J.shape),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f,n", JAC_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_sparse_jacobian_row_coloring(f, n):
    x = RNG.standard_normal(n)
    J = ta.sparse_jacobian(f, coloring="row")(x)
    assert isinstance(J, sp.csr_array)
    np.testing.assert_allclose(J.toarray(), np.asarray(ta.jacfwd(f)(x)).reshape(J.shape),
                               rtol=1e-12, atol=1e-12)


def test_row_coloring_of_a_gradient_is_one_sweep():
    x = RNG.standard_normal(9)
    jac = ta.sparse_jacobian(lambda x: tnp.sum(x ** 3), coloring="row")
    np.testing.assert_allclose(jac(x).toarray(), [3 * x ** 2], rtol=1e-14)
    assert jac.recovery(x).ncolors == 1


def test_sparse_jacobian_orders():
    x = RNG.standard_normal(10)
    for order in ("natural", "largest_first", "smallest_last"):
        J = ta.sparse_jacobian(arrow_jac, order=order)(x)
        np.testing.assert_allclose(J.toarray(), ta.jacfwd(arrow_jac)(x), rtol=1e-12,
                                   atol=1e-12)


# ---- Hessians --------------------------------------------------------------------

def test_arrow_hessian_pattern_and_two_star_colors():
    n = 8
    x = RNG.standard_normal(n)
    P = _dense(hessian_sparsity(arrow, x))
    expect = np.eye(n, dtype=bool)
    expect[-1, :] = expect[:, -1] = True
    np.testing.assert_array_equal(P, expect)
    assert ta.sparse_hessian(arrow).recovery(x).ncolors == 2


def test_rosenbrock_hessian_pattern_tridiagonal():
    n = 9
    P = _dense(hessian_sparsity(rosenbrock, RNG.standard_normal(n)))
    np.testing.assert_array_equal(
        P, np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1)


@pytest.mark.parametrize("coloring", ["star", "acyclic"])
@pytest.mark.parametrize("f,n", HESS_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_sparse_hessian_matches_dense(f, n, coloring):
    hess = ta.sparse_hessian(f, coloring=coloring)
    for _ in range(2):
        x = RNG.standard_normal(n) * 0.5
        H = hess(x)
        Hd = np.asarray(ta.hessian(f)(x))
        assert not np.any((Hd != 0) & ~_dense(hessian_sparsity(f, x)))
        np.testing.assert_allclose(H.toarray(), Hd, rtol=1e-12,
                                   atol=1e-12 * max(1.0, np.abs(Hd).max()))


@pytest.mark.parametrize("f,n", HESS_CASES + [(lambda x: tnp.sum(tnp.sin(x[:-1] * x[-1])), 9)],
                         ids=["arrow", "rosenbrock", "scalar_loop", "sin_arrow"])
def test_pruned_sweep_matches_the_tape_sweep(f, n):
    """The sweep that skips f's own value gives the tape's full K-direction sweep."""
    from tapead.sparse import _tangents
    from tapead.transforms import grad
    x = RNG.standard_normal(n)
    tape, out, *_ = _record(grad(f), (x,), {}, 0, "t")
    seed_t = np.ascontiguousarray(RNG.standard_normal((3, n)))
    (full,) = tape.forward_sweep({tape.inputs[0]: seed_t}, [out.idx], 3)
    np.testing.assert_allclose(_tangents(tape, out, seed_t, n), np.reshape(full, (3, n)),
                               rtol=1e-13, atol=1e-13)
    # the same by one jvp per direction (no pruning, no batching)
    for k in range(3):
        _, t = ta.jvp(grad(f), (x,), (seed_t[k],))
        np.testing.assert_allclose(np.reshape(full, (3, n))[k], t, rtol=1e-12, atol=1e-12)


def branchy(x):
    """Python branch and value-dependent rules (abs, maximum) on x."""
    if x[0] > 0:
        return tnp.sum(tnp.abs(x) ** 3) + tnp.sum(tnp.maximum(x[:-1], 0.0) ** 3 * x[1:])
    return tnp.sum(tnp.sin(x[:-1] * x[1:])) + tnp.sum(x ** 4)


def test_branch_and_sign_changes_between_calls():
    """Every call records afresh, so a branch or sign that flips is followed."""
    hess = ta.sparse_hessian(branchy)
    jac = ta.sparse_jacobian(lambda x: tnp.abs(x[1:]) * x[:-1] if x[0] > 0 else x[1:] ** 2)
    for x in (np.array([1.0, -2.0, 0.5, 3.0, -1.5]), np.array([-1.0, 2.0, -0.5, 3.0, 1.5]),
              np.array([2.0, 1.0, -0.5, -3.0, 1.5])):
        np.testing.assert_allclose(hess(x).toarray(), ta.hessian(branchy)(x), rtol=1e-12,
                                   atol=1e-12)
        J = ta.jacfwd(lambda v: tnp.abs(v[1:]) * v[:-1] if v[0] > 0 else v[1:] ** 2)(x)
        np.testing.assert_allclose(jac(x).toarray(), J, rtol=1e-12, atol=1e-12)


def test_default_order_is_auto_and_never_worse():
    x = RNG.standard_normal(40)
    f = lambda x: tnp.sum(tnp.sin(x[IDX40[:, 0]] * x[IDX40[:, 1]] * x[IDX40[:, 2]]))  # noqa
    auto = ta.sparse_hessian(f).recovery(x).ncolors
    for order in ("natural", "largest_first", "smallest_last", "incidence_degree"):
        assert auto <= ta.sparse_hessian(f, order=order).recovery(x).ncolors
    np.testing.assert_allclose(ta.sparse_hessian(f)(x).toarray(), ta.hessian(f)(x),
                               rtol=1e-12, atol=1e-12)


IDX40 = np.random.default_rng(5).integers(0, 40, size=(60, 3))


def test_large_rosenbrock_hessian_is_cheap():
    n = 5000
    x = RNG.standard_normal(n)
    hess = ta.sparse_hessian(rosenbrock)
    H = hess(x)
    assert H.nnz == 3 * n - 2 and hess.recovery(x).ncolors == 3
    v = RNG.standard_normal(n)
    np.testing.assert_allclose(H @ v, ta.hvp(rosenbrock, (x,), (v,)), rtol=1e-10)


# ---- errors ------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [ta.jacobian_sparsity,
                                lambda f, x: ta.sparse_jacobian(f)(x),
                                lambda f, x: ta.sparse_hessian(f)(x)])
def test_non_vector_input_says_ravel(fn):
    with pytest.raises(ValueError, match="ravel"):
        fn(lambda x: tnp.sum(x), np.ones((2, 3)))
    with pytest.raises(ValueError, match="ravel"):
        fn(lambda x: x, 1.0)


def test_integer_input_and_bad_coloring():
    with pytest.raises(ValueError, match="float"):
        ta.jacobian_sparsity(lambda x: x, np.arange(3))
    with pytest.raises(ValueError, match="column"):
        ta.sparse_jacobian(lambda x: x, coloring="star")
    with pytest.raises(ValueError, match="star"):
        ta.sparse_hessian(lambda x: x, coloring="column")


# ---- optimize ------------------------------------------------------------------------

def test_minimize_rosenbrock_1000_sparse_hessian():
    n = 1000
    x0 = 1.0 + 0.2 * RNG.standard_normal(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = minimize(rosenbrock, x0, method="trust-constr",
                     options={"gtol": 1e-8, "xtol": 1e-12})
    assert r.success
    np.testing.assert_allclose(r.x, 1.0, atol=1e-6)


@pytest.mark.parametrize("method", ["trust-ncg", "Newton-CG", "trust-exact", "BFGS",
                                    "Nelder-Mead"])
def test_minimize_methods(method):
    n = 6 if method == "Nelder-Mead" else 30
    x0 = 1.0 + 0.1 * np.random.default_rng(7).standard_normal(n)
    kw = ({"options": {"maxiter": 40000, "xatol": 1e-10, "fatol": 1e-14}}
          if method == "Nelder-Mead" else {})
    if method == "Newton-CG":
        kw = {"options": {"xtol": 1e-12}}
    r = minimize(rosenbrock, x0, method=method, **kw)
    np.testing.assert_allclose(r.x, 1.0, atol=1e-2 if method == "Nelder-Mead" else 1e-4)


def test_minimize_args_and_dense_choice():
    c = np.arange(1.0, 5.0)
    f = lambda x, c: tnp.sum((x - c) ** 2) + tnp.sum(x) ** 2   # noqa: E731 dense Hessian
    r = minimize(f, np.zeros(4), method="trust-constr", args=(c,))
    A = 2 * np.eye(4) + 2 * np.ones((4, 4))
    np.testing.assert_allclose(r.x, np.linalg.solve(A, 2 * c), atol=1e-6)
    with pytest.raises(ValueError, match="dense"):
        minimize(rosenbrock, np.zeros(4), method="trust-exact", hessian="sparse")


def test_patterns_of_scalar_code_on_arrays_are_exact():
    # x[k] and 0-d arithmetic make one-element object nodes: their patterns are
    # index sets (no sparse matrices), and must stay exact
    def f(w):
        c = 0.0
        for k in range(len(w) - 1):
            c = c + tnp.sin(w[k] * w[-1]) * tnp.reshape(w[k], (1,))[0]
        return c

    n = 7
    P = hessian_sparsity(f, np.linspace(0.1, 1.0, n)).toarray()
    want = np.eye(n, dtype=bool)
    want[-1, :] = want[:, -1] = True
    np.testing.assert_array_equal(P, want)

    def g(x):
        y = x.reshape(2, 3)
        return tnp.stack([y[1, 2] * x[0], tnp.sum(y[0]) + 0.0 * x[4], tnp.sign(x[5]) * 2.0])
    J = ta.jacobian_sparsity(g, np.arange(1.0, 7.0)).toarray().astype(int)
    np.testing.assert_array_equal(J, [[1, 0, 0, 0, 0, 1],
                                      [1, 1, 1, 0, 1, 0],
                                      [0, 0, 0, 0, 0, 0]])
